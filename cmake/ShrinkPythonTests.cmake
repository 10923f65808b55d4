# shrink_add_python_test(NAME name SCRIPT script.py [PYTHON python3] [ARGS ...]): a CTest test running
# `python3 script.py ARGS...` (SHRINK_PYTHON3, or the PYTHON given), reported skipped when the script exits 77 (a
# missing Python package) or when no python3 is found.
include_guard(GLOBAL)

find_program(SHRINK_PYTHON3 NAMES python3 DOC "Python 3 for shrink's interop tests")

function(shrink_add_python_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "NAME;SCRIPT;PYTHON" "ARGS")
  if(NOT arg_PYTHON)
    set(arg_PYTHON ${SHRINK_PYTHON3})
  endif()
  if(arg_PYTHON)
    add_test(NAME ${arg_NAME} COMMAND ${arg_PYTHON} ${arg_SCRIPT} ${arg_ARGS})
    set_tests_properties(${arg_NAME} PROPERTIES SKIP_RETURN_CODE 77)
  else()
    # No python3: a test that exits 1, which counts as skipped.
    add_test(NAME ${arg_NAME} COMMAND ${CMAKE_COMMAND} -E false)
    set_tests_properties(${arg_NAME} PROPERTIES SKIP_RETURN_CODE 1)
  endif()
endfunction()
