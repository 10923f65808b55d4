# shrink_resolve_cuda(): turns SHRINK_ENABLE_CUDA (AUTO/ON/OFF) into SHRINK_CUDA_ENABLED, finding nvcc on the way.
# shrink_find_cuda_toolkit(...): find_package(CUDAToolkit ...) that works on Debian bookworm's CMake with CUDA 13.
include_guard(GLOBAL)
include(CheckLanguage)

# Sets SHRINK_CUDA_ENABLED in the caller's scope. AUTO enables CUDA when a working nvcc is found (on PATH, in
# CUDACXX, in CMAKE_CUDA_COMPILER, or at /usr/local/cuda/bin/nvcc); ON stops with an error when none is found.
# The caller then runs enable_language(CUDA), which CMake allows only at directory scope.
function(shrink_resolve_cuda)
  string(TOUPPER "${SHRINK_ENABLE_CUDA}" request)
  if(request MATCHES "^(1|TRUE|YES|Y)$")
    set(request ON)
  elseif(request MATCHES "^(0|FALSE|NO|N)$")
    set(request OFF)
  endif()
  if(NOT request MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "shrink: SHRINK_ENABLE_CUDA = '${SHRINK_ENABLE_CUDA}': expected AUTO, ON or OFF")
  endif()

  if(request STREQUAL "OFF")
    set(SHRINK_CUDA_ENABLED FALSE PARENT_SCOPE)
    message(STATUS "shrink: CUDA disabled (SHRINK_ENABLE_CUDA=OFF)")
    return()
  endif()

  # The toolkit often sits at /usr/local/cuda without being on PATH, where check_language alone would miss it.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(shrink_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
    if(shrink_nvcc)
      set(ENV{CUDACXX} ${shrink_nvcc})
    endif()
  endif()

  # Machine code for Ampere (sm_80) and Hopper (sm_90), plus their PTX for later GPUs, unless the user chose.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures shrink_cuda is compiled for")
  endif()

  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    if(request STREQUAL "ON")
      message(FATAL_ERROR
        "shrink: SHRINK_ENABLE_CUDA=ON but no working CUDA compiler was found (searched CMAKE_CUDA_COMPILER, "
        "the CUDACXX environment variable, PATH and /usr/local/cuda/bin/nvcc). Install the CUDA toolkit, "
        "pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc, or configure with -DSHRINK_ENABLE_CUDA=OFF.")
    endif()
    set(SHRINK_CUDA_ENABLED FALSE PARENT_SCOPE)
    message(STATUS "shrink: CUDA disabled (SHRINK_ENABLE_CUDA=AUTO and no CUDA compiler found)")
    return()
  endif()

  set(SHRINK_CUDA_ENABLED TRUE PARENT_SCOPE)
endfunction()

# Debian bookworm's CMake (3.25.1) marks CUDA::nvToolsExt deprecated without checking that the target exists, and
# CUDA 12.9 and later ship no libnvToolsExt, so find_package(CUDAToolkit) stops with "set_property could not find
# TARGET CUDA::nvToolsExt". The mark is made only for projects whose minimum CMake is 3.25 or later: the find runs
# with CMAKE_MINIMUM_REQUIRED_VERSION at 3.24 (the variable alone; no policy changes). The installed package config
# (shrinkConfig.cmake.in) does the same around its own find.
macro(shrink_find_cuda_toolkit)
  set(shrink_saved_minimum_version "${CMAKE_MINIMUM_REQUIRED_VERSION}")
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  find_package(CUDAToolkit ${ARGN})
  set(CMAKE_MINIMUM_REQUIRED_VERSION "${shrink_saved_minimum_version}")
  unset(shrink_saved_minimum_version)
endmacro()
