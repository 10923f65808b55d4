# The interop test io/interop: tests/io/interop.py writes files with Python's safetensors package that
# safetensors_interop (shrink) reads and rewrites, and reads back files shrink wrote. Reported skipped
# (exit code 77) where python3 or its safetensors and numpy packages are missing.
add_executable(safetensors_interop ${CMAKE_CURRENT_SOURCE_DIR}/io/interop_tool.cpp)
target_link_libraries(safetensors_interop PRIVATE shrink::shrink)
shrink_enable_warnings(safetensors_interop)

find_program(SHRINK_PYTHON3 NAMES python3 DOC "Python 3 for shrink's interop tests")
if(SHRINK_PYTHON3)
  add_test(NAME io/interop
           COMMAND ${SHRINK_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/io/interop.py $<TARGET_FILE:safetensors_interop>
                   ${CMAKE_CURRENT_BINARY_DIR}/io_interop)
  set_tests_properties(io/interop PROPERTIES SKIP_RETURN_CODE 77)
else()
  add_test(NAME io/interop COMMAND ${CMAKE_COMMAND} -E false)
  set_tests_properties(io/interop PROPERTIES SKIP_RETURN_CODE 1)
endif()
