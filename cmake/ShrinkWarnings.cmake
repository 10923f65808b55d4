# shrink_enable_warnings(target [WERROR] [STRICT]): the warning flags shrink's own tests, benchmarks and examples use.
# STRICT adds what a codebase with strict warnings builds shrink's headers with (the flags of tests/consumers/strict),
# as errors where SHRINK_WARNINGS_AS_ERRORS is on (the presets turn it on).
include_guard(GLOBAL)

function(shrink_enable_warnings target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "WERROR;STRICT" "" "")
  set(cxx_flags -Wall -Wextra)
  if(arg_STRICT)
    list(APPEND cxx_flags -Wpedantic -Wshadow -Wconversion -Wsign-conversion)
    if(SHRINK_WARNINGS_AS_ERRORS)
      set(arg_WERROR ON)
    endif()
  endif()
  set(cuda_flags -Xcompiler=-Wall,-Wextra)
  if(arg_WERROR)
    list(APPEND cxx_flags -Werror)
    # nvcc's own warnings, then the host compiler's on the host side of .cu files.
    list(APPEND cuda_flags -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${cxx_flags}>")
  endif()
  if(CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA")
    target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${cuda_flags}>")
  endif()
endfunction()
