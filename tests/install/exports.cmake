# The dynamic symbols libpcinfer.so defines are exactly the functions include/pc declares with
# PC_API: nothing internal, nothing C++-mangled, nothing of the API missing.
# -D: LIBRARY INCLUDE_DIR NM
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

# Declared: in each header without comments and preprocessor lines, the name before the first
# "(" after each PC_API.
set(declared)
file(GLOB headers ${INCLUDE_DIR}/pc/*.h)
foreach(header IN LISTS headers)
  file(READ ${header} text)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" text "${text}")
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(REGEX REPLACE "(^|\n)[ \t]*#[^\n]*" "\\1" text "${text}")
  string(REGEX MATCHALL "PC_API[^;{(]*[^A-Za-z0-9_][A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\\(" decls
    "${text}")
  foreach(decl IN LISTS decls)
    string(REGEX MATCH "([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*\\($" name "${decl}")
    list(APPEND declared ${CMAKE_MATCH_1})
  endforeach()
endforeach()
list(SORT declared)
list(LENGTH declared declared_count)
if(declared_count LESS 10)
  message(FATAL_ERROR "only ${declared_count} PC_API functions found in ${INCLUDE_DIR}/pc")
endif()

# Exported: every symbol the library defines in its dynamic symbol table.
pc_step("nm -D --defined-only" table COMMAND ${NM} -D --defined-only ${LIBRARY})
string(REGEX MATCHALL "[^\n]+" lines "${table}")
set(exported)
foreach(line IN LISTS lines)
  string(REGEX REPLACE ".* " "" name "${line}")
  string(REGEX REPLACE "@.*" "" name "${name}")
  list(APPEND exported ${name})
endforeach()
list(SORT exported)

set(mangled ${exported})
list(FILTER mangled INCLUDE REGEX "^_Z")
set(internal ${exported})
list(REMOVE_ITEM internal ${declared})
set(absent ${declared})
list(REMOVE_ITEM absent ${exported})
if(mangled OR internal OR absent)
  message(FATAL_ERROR "libpcinfer.so's exports differ from the PC_API declarations:\n"
    "  C++-mangled: ${mangled}\n  exported, not declared PC_API: ${internal}\n"
    "  declared PC_API, not exported: ${absent}")
endif()
message(STATUS "${declared_count} PC_API functions, exactly the library's exports")
