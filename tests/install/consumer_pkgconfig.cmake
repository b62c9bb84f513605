# Builds the consumer against the installed tree with pkg-config, once on the shared library
# (pkg-config --libs) and once on the static one (pkg-config --static --libs, libpcinfer.a named
# explicitly since -lpcinfer prefers the .so), and runs both on the test model.
# -D: PREFIX LIBDIR OUT CC C_FLAGS (comma-separated, may be empty) PKG_CONFIG READELF VERSION
#     MODEL TABLE
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" C_FLAGS "${C_FLAGS}")

set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
set(ENV{LD_LIBRARY_PATH} ${PREFIX}/${LIBDIR})
file(MAKE_DIRECTORY ${OUT})
set(source ${CMAKE_CURRENT_LIST_DIR}/consumer/consumer.c)

pc_step("pkg-config --modversion" modversion COMMAND ${PKG_CONFIG} --modversion pcinfer)
string(STRIP "${modversion}" modversion)
if(NOT modversion STREQUAL VERSION)
  message(FATAL_ERROR "pcinfer.pc says version ${modversion}, the build is ${VERSION}")
endif()
pc_step("pkg-config --cflags" cflags COMMAND ${PKG_CONFIG} --cflags pcinfer)
pc_step("pkg-config --libs" libs COMMAND ${PKG_CONFIG} --libs pcinfer)
pc_step("pkg-config --static --libs" static_libs COMMAND ${PKG_CONFIG} --static --libs pcinfer)
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
separate_arguments(static_libs UNIX_COMMAND "${static_libs}")
list(TRANSFORM static_libs REPLACE "^-lpcinfer$" "-l:libpcinfer.a")

foreach(kind shared static)
  if(kind STREQUAL "shared")
    set(link ${libs})
  else()
    set(link ${static_libs})
  endif()
  set(program ${OUT}/consumer_pkgconfig_${kind})
  pc_step("cc (pkg-config, ${kind})" out
    COMMAND ${CC} ${C_FLAGS} ${cflags} ${source} -o ${program} ${link} -lm)
  pc_step("run consumer_pkgconfig_${kind}" out COMMAND ${program} ${MODEL} ${TABLE})
  message(STATUS "${out}")
  pc_step("readelf -d consumer_pkgconfig_${kind}" dynamic COMMAND ${READELF} -d ${program})
  if(kind STREQUAL "static" AND dynamic MATCHES "libpcinfer")
    message(FATAL_ERROR "the static consumer needs libpcinfer.so:\n${dynamic}")
  elseif(kind STREQUAL "shared" AND NOT dynamic MATCHES "\\[libpcinfer\\.so\\.")
    message(FATAL_ERROR "the shared consumer does not need libpcinfer.so:\n${dynamic}")
  endif()
endforeach()
