# cmake -P script for the consumer tests: `cmake --install` of shrink into a fresh prefix.
# With -DINSTALLED_BUILD_DIR=<dir>: installs that existing build tree as it is. Otherwise configures shrink
# host-only from SOURCE_DIR in BUILD_DIR (GENERATOR, CXX_COMPILER; optional MAKE_PROGRAM, EIGEN3_DIR), builds it
# and installs that.

set(step_label install_shrink)
include(${CMAKE_CURRENT_LIST_DIR}/script_steps.cmake)

if(NOT PREFIX)
  message(FATAL_ERROR "install_shrink.cmake: pass -DPREFIX=...")
endif()
# A clean prefix (and build) every time, so a stale install cannot hide a missing file.
file(REMOVE_RECURSE ${PREFIX})

if(INSTALLED_BUILD_DIR)
  run_step(${CMAKE_COMMAND} --install ${INSTALLED_BUILD_DIR} --prefix ${PREFIX})
  return()
endif()

require_inputs(SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER)
file(REMOVE_RECURSE ${BUILD_DIR})

set(configure_options
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DSHRINK_ENABLE_CUDA=OFF
  -DSHRINK_BUILD_TESTS=OFF
  -DSHRINK_BUILD_BENCHMARKS=OFF
  -DSHRINK_BUILD_EXAMPLES=OFF)
append_tool_options(configure_options)

run_step(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR} ${configure_options})
run_step(${CMAKE_COMMAND} --build ${BUILD_DIR})
run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
