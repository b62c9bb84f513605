# Configures and builds the consumer project (consumer/CMakeLists.txt) against the installed tree
# with find_package(pcinfer <version>), then runs its programs on the shared and the static
# library.
# -D: PREFIX LIBDIR OUT CC C_FLAGS (comma-separated) VERSION MODEL TABLE [CUDA_ROOT]
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" C_FLAGS "${C_FLAGS}")

file(REMOVE_RECURSE ${OUT})
list(JOIN C_FLAGS " " flags)
set(configure -S ${CMAKE_CURRENT_LIST_DIR}/consumer -B ${OUT} -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}"
  -DCMAKE_PREFIX_PATH=${PREFIX} -DPCINFER_VERSION=${VERSION})
if(CUDA_ROOT)
  list(APPEND configure -DCUDAToolkit_ROOT=${CUDA_ROOT})
endif()
pc_step("configure the consumer project" out COMMAND ${CMAKE_COMMAND} ${configure})
pc_step("build the consumer project" out COMMAND ${CMAKE_COMMAND} --build ${OUT})
set(ENV{LD_LIBRARY_PATH} ${PREFIX}/${LIBDIR})
foreach(program consumer_shared consumer_static)
  pc_step("run ${program}" out COMMAND ${OUT}/${program} ${MODEL} ${TABLE})
  message(STATUS "${out}")
endforeach()
