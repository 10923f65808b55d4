# shrink_find_onednn(<found-var> <missing-var>): finds oneDNN's CMake package (target DNNL::dnnl) for the benchmarks
# that time it, without ever stopping the configure. A package config may call find_package(... REQUIRED) for the
# runtimes oneDNN was built with (Debian's: OpenCL, for DNNL_GPU_RUNTIME "OCL"), which a QUIET find cannot silence;
# so the config file is read first, and loaded only when what it will require is here. Sets <found-var> TRUE or
# FALSE and, when FALSE, <missing-var> to what is missing, with the Debian package that gives it.
include_guard(GLOBAL)

function(shrink_find_onednn found_var missing_var)
  set(${found_var} FALSE PARENT_SCOPE)
  # (find_file skips its search when the variable is already set, even to "": `config` is left unset before it.)
  if(dnnl_DIR AND EXISTS "${dnnl_DIR}/dnnl-config.cmake")
    set(config "${dnnl_DIR}/dnnl-config.cmake")
  else()
    find_file(config dnnl-config.cmake NO_CACHE NO_DEFAULT_PATH PATHS ${CMAKE_PREFIX_PATH} ${CMAKE_SYSTEM_PREFIX_PATH}
              PATH_SUFFIXES lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/dnnl lib/cmake/dnnl lib64/cmake/dnnl)
  endif()
  if(NOT config)
    set(${missing_var} "oneDNN (Debian: libdnnl-dev)" PARENT_SCOPE)
    return()
  endif()

  # The runtimes the package declares: set(DNNL_GPU_RUNTIME "OCL"), set(DNNL_CPU_THREADING_RUNTIME "TBB"), ...
  file(STRINGS "${config}" runtime_lines REGEX "^set\\(DNNL_[A-Z_]*RUNTIME \"[A-Z]+\"\\)")
  set(missing "")
  foreach(line IN LISTS runtime_lines)
    string(REGEX MATCH "^set\\((DNNL_[A-Z_]*RUNTIME) \"([A-Z]+)\"\\)" _ "${line}")
    set(variable "${CMAKE_MATCH_1}")
    set(runtime "${CMAKE_MATCH_2}")
    if(runtime STREQUAL "OCL")  # find_package(OpenCL REQUIRED): its headers and library
      find_path(opencl_include CL/cl.h NO_CACHE)
      find_library(opencl_library OpenCL NO_CACHE)
      if(NOT opencl_include OR NOT opencl_library)
        list(APPEND missing "OpenCL's development files, which oneDNN's package requires (Debian: ocl-icd-opencl-dev)")
      endif()
    elseif(runtime STREQUAL "TBB")  # find_package(TBB REQUIRED COMPONENTS tbb)
      find_package(TBB QUIET COMPONENTS tbb)
      if(NOT TBB_FOUND)
        list(APPEND missing "TBB, which oneDNN's package requires (Debian: libtbb-dev)")
      endif()
    elseif(runtime MATCHES "^(SYCL|DPCPP)$")
      list(APPEND missing "a SYCL compiler, which this oneDNN (${variable} ${runtime}) requires")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES missing)
  if(missing)
    list(JOIN missing ", " missing)
    set(${missing_var} "${missing}" PARENT_SCOPE)
    return()
  endif()

  get_filename_component(config_dir "${config}" DIRECTORY)
  find_package(dnnl CONFIG QUIET PATHS "${config_dir}" NO_DEFAULT_PATH)
  if(dnnl_FOUND AND TARGET DNNL::dnnl)
    set(${found_var} TRUE PARENT_SCOPE)
  else()
    set(${missing_var} "a oneDNN package that loads (${config} gave no DNNL::dnnl)" PARENT_SCOPE)
  endif()
endfunction()
