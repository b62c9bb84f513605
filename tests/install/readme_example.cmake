cmake_minimum_required(VERSION 3.25)
# The C program of README.md's "Using the library from C" (its indented block from the first
# "#include" to the closing "}"), built against the installed tree with the section's pkg-config
# line and run on the test model: the README's example stays true.
# The section's SONAME and find_package version are this build's.
# -D: README PREFIX LIBDIR OUT CC C_FLAGS (comma-separated) PKG_CONFIG MODEL EXPECTED (the text
#     the program must print) SOVERSION
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
string(REPLACE "," ";" C_FLAGS "${C_FLAGS}")

file(READ ${README} text)
if(NOT text MATCHES "\n## Using the library from C\n(.*)")
  message(FATAL_ERROR "${README} has no section \"Using the library from C\"")
endif()
set(section "${CMAKE_MATCH_1}")
string(FIND "${section}" "\n## " end)
string(SUBSTRING "${section}" 0 ${end} section)
foreach(mention "libpcinfer.so.${SOVERSION}" "find_package(pcinfer ${SOVERSION} ")
  string(FIND "${section}" "${mention}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the section \"Using the library from C\" does not say '${mention}'")
  endif()
endforeach()
if(NOT section MATCHES "\n(    #include[^\n]*\n([^\n]*\n)*)    }\n")
  message(FATAL_ERROR "no C program in the section \"Using the library from C\"")
endif()
set(program "${CMAKE_MATCH_1}    }\n")
string(REGEX REPLACE "(^|\n)    " "\\1" program "${program}")
file(MAKE_DIRECTORY ${OUT})
file(WRITE ${OUT}/score.c "${program}")

set(ENV{PKG_CONFIG_PATH} ${PREFIX}/${LIBDIR}/pkgconfig)
set(ENV{LD_LIBRARY_PATH} ${PREFIX}/${LIBDIR})
pc_step("pkg-config --cflags --libs" flags COMMAND ${PKG_CONFIG} --cflags --libs pcinfer)
separate_arguments(flags UNIX_COMMAND "${flags}")
pc_step("cc score.c" out COMMAND ${CC} ${C_FLAGS} ${OUT}/score.c ${flags} -o ${OUT}/score)
pc_step("run score" out COMMAND ${OUT}/score ${MODEL})
string(FIND "${out}" "${EXPECTED}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "the README's program printed '${out}', not '${EXPECTED}'")
endif()
message(STATUS "${out}")
