# cmake -P script: checks with cuobjdump that LIBRARY holds machine code (a cubin) for every real architecture in
# ARCHITECTURES (CMAKE_CUDA_ARCHITECTURES syntax). Prints "SKIPPED:" when cuobjdump is not available.
if(NOT CUOBJDUMP OR NOT EXISTS "${CUOBJDUMP}")
  message("SKIPPED: no cuobjdump (it ships with the CUDA toolkit; pass -DSHRINK_CUOBJDUMP=/path/to/cuobjdump)")
  return()
endif()

execute_process(COMMAND ${CUOBJDUMP} --list-elf ${LIBRARY} OUTPUT_VARIABLE listing RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${CUOBJDUMP} --list-elf ${LIBRARY} failed with exit status ${result}")
endif()
message("${listing}")

set(checked 0)
foreach(architecture IN LISTS ARCHITECTURES)
  if(architecture MATCHES "-virtual$" OR NOT architecture MATCHES "^([0-9]+[a-z]?)(-real)?$")
    continue()  # PTX only, or a keyword such as "native" that names no fixed architecture
  endif()
  set(cubin "sm_${CMAKE_MATCH_1}")
  if(NOT listing MATCHES "\\.${cubin}\\.cubin")
    message(FATAL_ERROR "${LIBRARY} has no ${cubin} machine code (ARCHITECTURES = ${ARCHITECTURES})")
  endif()
  message("found ${cubin} machine code")
  math(EXPR checked "${checked} + 1")
endforeach()
if(checked EQUAL 0)
  message("SKIPPED: ARCHITECTURES = '${ARCHITECTURES}' names no fixed real architecture to look for")
endif()
