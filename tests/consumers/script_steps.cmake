# What the consumer tests' cmake -P scripts share: run_step(), which runs a command and stops the script when it
# fails; require_inputs(), which stops it when a -D input is missing; append_tool_options(), the optional
# MAKE_PROGRAM and EIGEN3_DIR inputs as configure options. The including script sets step_label.

function(run_step)
  string(REPLACE ";" " " shown "${ARGN}")
  message(STATUS "${step_label}: ${shown}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${step_label}: step failed with exit status ${result}: ${shown}")
  endif()
endfunction()

function(require_inputs)
  foreach(input IN LISTS ARGN)
    if(NOT DEFINED ${input})
      message(FATAL_ERROR "${step_label}.cmake: pass -D${input}=...")
    endif()
  endforeach()
endfunction()

function(append_tool_options options_var)
  set(options ${${options_var}})
  if(MAKE_PROGRAM)
    list(APPEND options -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
  if(EIGEN3_DIR)
    list(APPEND options -DEigen3_DIR=${EIGEN3_DIR})
  endif()
  set(${options_var} ${options} PARENT_SCOPE)
endfunction()
