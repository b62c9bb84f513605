# The consumer built by consumer_pkgconfig.cmake, on the shared library, run in an empty
# environment whose library path holds only the install prefix (no CUDA directory): it must
# score on the CPU, and the dynamic loader's log (LD_DEBUG=libs, which also records libraries
# opened at run time) must show that none of the CUDA-only libraries was loaded. A library that
# is never loaded cannot be missed on a machine that lacks it.
# -D: PROGRAM PREFIX LIBDIR MODEL TABLE NOT_LOADED (comma-separated names without ".so...")
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" NOT_LOADED "${NOT_LOADED}")

if(NOT EXISTS ${PROGRAM})
  message(FATAL_ERROR "${PROGRAM} was not built (the install_pkgconfig test makes it)")
endif()
execute_process(COMMAND env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH=${PREFIX}/${LIBDIR}
  LD_DEBUG=libs ${PROGRAM} ${MODEL} ${TABLE}
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE log)
string(REGEX MATCHALL "calling init: [^\n]+" loaded "${log}")
list(TRANSFORM loaded REPLACE ".*/" "")
if(NOT status EQUAL 0)
  string(REGEX REPLACE "[ \t]*[0-9]+:[ \t][^\n]*\n" "" messages "${log}")
  message(FATAL_ERROR "the consumer failed (${status}) without CUDA on its library path:\n"
    "${out}\n${messages}")
endif()
if(NOT loaded MATCHES "libpcinfer\\.so")
  message(FATAL_ERROR "no libpcinfer.so in the loader's log (LD_DEBUG=libs): ${loaded}")
endif()
pc_libraries_named(forbidden "${loaded}" "${NOT_LOADED}")
if(forbidden)
  message(FATAL_ERROR "the CPU path loaded ${forbidden}")
endif()
message(STATUS "${out}loaded: ${loaded}")
