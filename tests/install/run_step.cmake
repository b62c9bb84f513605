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
