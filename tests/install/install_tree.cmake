# Installs the build into a fresh prefix and checks that every installed piece is there: the
# public headers, the shared library with its SONAME and version links, the static library, the
# pkg-config file, the CMake package, the tools and the model reader in libexec/pcinfer; and
# that the testing library is not.
# -D: BUILD_DIR PREFIX LIBDIR SOURCE_DIR VERSION SOVERSION TOOLS (comma-separated) READELF
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" TOOLS "${TOOLS}")

file(REMOVE_RECURSE ${PREFIX})
pc_step("cmake --install" out COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})

set(missing)
function(expect path)
  if(NOT EXISTS ${PREFIX}/${path})
    set(missing ${missing} ${path} PARENT_SCOPE)
  endif()
endfunction()
file(GLOB headers RELATIVE ${SOURCE_DIR}/include ${SOURCE_DIR}/include/pc/*.h)
foreach(header IN LISTS headers)
  expect(include/${header})
endforeach()
foreach(file libpcinfer.a pkgconfig/pcinfer.pc cmake/pcinfer/pcinferConfig.cmake
             cmake/pcinfer/pcinferConfigVersion.cmake cmake/pcinfer/pcinferTargets.cmake
             cmake/pcinfer/pcinferStaticTargets.cmake)
  expect(${LIBDIR}/${file})
endforeach()
foreach(tool IN LISTS TOOLS)
  expect(bin/${tool})
endforeach()
expect(libexec/pcinfer/pcinfer-hclt-reader)
if(missing)
  message(FATAL_ERROR "not installed: ${missing}")
endif()

# libpcinfer.so -> libpcinfer.so.X.Y (the SONAME) -> libpcinfer.so.X.Y.Z (the file).
set(lib ${PREFIX}/${LIBDIR}/libpcinfer.so)
foreach(link_pair "libpcinfer.so;libpcinfer.so.${SOVERSION}"
                  "libpcinfer.so.${SOVERSION};libpcinfer.so.${VERSION}")
  list(GET link_pair 0 link)
  list(GET link_pair 1 target)
  file(READ_SYMLINK ${PREFIX}/${LIBDIR}/${link} points_to)
  if(NOT points_to STREQUAL target)
    message(FATAL_ERROR "${link} points to '${points_to}', not ${target}")
  endif()
endforeach()
pc_step("readelf -d libpcinfer.so" dynamic COMMAND ${READELF} -d ${lib})
if(NOT dynamic MATCHES "\\(SONAME\\)[^\n]*\\[libpcinfer\\.so\\.${SOVERSION}\\]")
  message(FATAL_ERROR "libpcinfer.so's SONAME is not libpcinfer.so.${SOVERSION}:\n${dynamic}")
endif()

file(GLOB_RECURSE testing RELATIVE ${PREFIX} ${PREFIX}/*testing*)
if(testing)
  message(FATAL_ERROR "the testing library is installed: ${testing}")
endif()
message(STATUS "installed into ${PREFIX}")
