# Helpers of the install tests (CMake scripts run by ctest).

# pc_step(<name> <out_var> COMMAND <cmd> [<arg>...]): runs a command of an install test; stops
# the test with the command, its exit status and its output when it fails, else returns its
# standard output in <out_var>. Every step is printed, so a failing test shows how far it got.
function(pc_step name out_var)
  cmake_parse_arguments(PARSE_ARGV 2 step "" "" "COMMAND")
  message(STATUS "${name}")
  execute_process(COMMAND ${step_COMMAND} RESULT_VARIABLE status OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    list(JOIN step_COMMAND " " command)
    message(FATAL_ERROR "${name} failed (${status}): ${command}\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()

# pc_libraries_named(<out_var> <files> <names>): the library files (e.g. libcudart.so.13) among
# <files> whose name without ".so..." is one of <names> (e.g. libcudart).
function(pc_libraries_named out_var files names)
  set(found)
  foreach(file IN LISTS files)
    string(REGEX REPLACE "\\.so(\\..*)?$" "" name ${file})
    if(name IN_LIST names)
      list(APPEND found ${file})
    endif()
  endforeach()
  set(${out_var} ${found} PARENT_SCOPE)
endfunction()
