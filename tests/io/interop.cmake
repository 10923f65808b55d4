# The interop test io/interop: tests/io/interop.py writes files with Python's safetensors package that
# safetensors_interop (shrink) reads and rewrites, and reads back files shrink wrote. Reported skipped
# (exit code 77) where python3 or its safetensors and numpy packages are missing.
add_executable(safetensors_interop ${CMAKE_CURRENT_SOURCE_DIR}/io/interop_tool.cpp)
target_link_libraries(safetensors_interop PRIVATE shrink::shrink)
shrink_enable_warnings(safetensors_interop)

include(ShrinkPythonTests)
shrink_add_python_test(NAME io/interop SCRIPT ${CMAKE_CURRENT_SOURCE_DIR}/io/interop.py
                       ARGS $<TARGET_FILE:safetensors_interop> ${CMAKE_CURRENT_BINARY_DIR}/io_interop)

# io/gguf_interop: tests/io/gguf_interop.py reads the GGUF file gguf_interop (shrink's GgufWriter) writes with gguf-py,
# llama.cpp's own Python package, and compares its dequantization and quantization with shrink's bit for bit.
add_executable(gguf_interop ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_interop_tool.cpp)
target_link_libraries(gguf_interop PRIVATE shrink::shrink)
shrink_enable_warnings(gguf_interop)
shrink_add_python_test(NAME io/gguf_interop SCRIPT ${CMAKE_CURRENT_SOURCE_DIR}/io/gguf_interop.py
                       ARGS $<TARGET_FILE:gguf_interop> ${CMAKE_CURRENT_BINARY_DIR}/io_gguf_interop)
