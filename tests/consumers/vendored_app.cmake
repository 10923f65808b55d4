# cmake -P script for the consumer tests of a vendored shrink: configures tests/consumers/fetchcontent in BUILD_DIR
# (GENERATOR, CXX_COMPILER, SHRINK_SOURCE_DIR; optional MAKE_PROGRAM, EIGEN3_DIR, OPTIONS: more -D options).
# With CONFIGURE_ONLY=ON it stops there. Otherwise it builds the app, runs it, installs the app into a fresh PREFIX
# and checks that the install holds the app's program and nothing of shrink's.

set(step_label vendored_app)
include(${CMAKE_CURRENT_LIST_DIR}/script_steps.cmake)

require_inputs(SHRINK_SOURCE_DIR BUILD_DIR GENERATOR CXX_COMPILER)
file(REMOVE_RECURSE ${BUILD_DIR})

set(configure_options -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
                      -DSHRINK_SOURCE_DIR=${SHRINK_SOURCE_DIR})
append_tool_options(configure_options)
separate_arguments(extra_options UNIX_COMMAND "${OPTIONS}")
run_step(${CMAKE_COMMAND} -S ${SHRINK_SOURCE_DIR}/tests/consumers/fetchcontent -B ${BUILD_DIR} -G ${GENERATOR}
         ${configure_options} ${extra_options})
if(CONFIGURE_ONLY)
  return()
endif()

run_step(${CMAKE_COMMAND} --build ${BUILD_DIR})
run_step(${BUILD_DIR}/shrink_consumer)

if(NOT PREFIX)
  message(FATAL_ERROR "vendored_app.cmake: pass -DPREFIX=...")
endif()
file(REMOVE_RECURSE ${PREFIX})
run_step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
file(GLOB_RECURSE installed LIST_DIRECTORIES false RELATIVE ${PREFIX} ${PREFIX}/*)
if(NOT installed STREQUAL "bin/shrink_consumer")
  message(FATAL_ERROR "the vendoring app's install holds '${installed}'; expected only its own bin/shrink_consumer")
endif()
message(STATUS "vendored_app: the app's install holds only ${installed}")
