# libpcinfer.so names none of the CUDA-only libraries as NEEDED (readelf -d), so it loads where
# they are not installed; what it needs of them it opens at run time.
# -D: LIBRARY READELF NOT_NEEDED (comma-separated names without ".so...", e.g. libcudart)
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" NOT_NEEDED "${NOT_NEEDED}")

pc_step("readelf -d" dynamic COMMAND ${READELF} -d ${LIBRARY})
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" needed "${dynamic}")
list(TRANSFORM needed REPLACE ".*\\[([^]]+)\\]$" "\\1")
if(NOT needed)
  message(FATAL_ERROR "no NEEDED entries read from:\n${dynamic}")
endif()
pc_libraries_named(forbidden "${needed}" "${NOT_NEEDED}")
if(forbidden)
  message(FATAL_ERROR "libpcinfer.so needs ${forbidden} (NEEDED: ${needed})")
endif()
message(STATUS "NEEDED: ${needed}; none of ${NOT_NEEDED}")
