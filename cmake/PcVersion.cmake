# pc_read_version(<header> <out_var>): sets <out_var> to "major.minor.patch" from the
# PC_VERSION_MAJOR / _MINOR / _PATCH lines of include/pc/version.h, and stops the configure step
# when that header's PC_VERSION_STRING says something else.
function(pc_read_version header out_var)
  file(STRINGS ${header} lines REGEX "^#define PC_VERSION_(MAJOR|MINOR|PATCH|STRING) ")
  foreach(part MAJOR MINOR PATCH)
    if(NOT lines MATCHES "#define PC_VERSION_${part} ([0-9]+)")
      message(FATAL_ERROR "${header}: no numeric PC_VERSION_${part}")
    endif()
    set(${part} ${CMAKE_MATCH_1})
  endforeach()
  set(version ${MAJOR}.${MINOR}.${PATCH})
  if(NOT lines MATCHES "#define PC_VERSION_STRING \"([^\"]*)\"" OR
     NOT CMAKE_MATCH_1 STREQUAL version)
    message(FATAL_ERROR "${header}: PC_VERSION_STRING is not \"${version}\"")
  endif()
  set(${out_var} ${version} PARENT_SCOPE)
endfunction()
