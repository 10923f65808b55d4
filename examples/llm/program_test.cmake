# ctest -R llm/shrink_llm_every_recipe_on_one_window: shrink_llm (PROGRAM) on the real data (DATA), in WORK.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# Every recipe on one window of 64 tokens, calibration on one window: a table row and a JSON row for each.
execute_process(COMMAND ${PROGRAM} --data ${DATA} --window 64 --windows 1 --calibration-windows 1 --threads 2
                        --json ${WORK}/table.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT status EQUAL 0)
  message(FATAL_ERROR "shrink_llm exited with ${status}")
endif()
file(READ ${WORK}/table.json json)
string(JSON rows LENGTH "${json}" rows)
if(NOT rows EQUAL 22)
  message(FATAL_ERROR "table.json has ${rows} rows, expected 22")
endif()
foreach(recipe base fp16 bf16 w8 w8-g32 w8a8 sq-w8a8 w4-g64 w4a8-g64 w3-g64 mag-50 wanda-50 mag-2:4 wanda-2:4 gptq-w4-g64
               gptq-w4-g64-act gptq-w3-g64 gptq-w3-g64-act hqq-w4-g64 awq-w4-g64 sparsegpt-50 sparsegpt-2:4)
  string(FIND "${out}" "${recipe} " at)
  if(at EQUAL -1)
    message(FATAL_ERROR "no table row for ${recipe}")
  endif()
endforeach()

# The float model's input statistics for `shrink quantize --format gguf --method gptq|awq`: one calibration window,
# every block's four inputs (Hessians of 576 and 1536 features: about 0.8 GB of F64).
execute_process(COMMAND ${PROGRAM} --data ${DATA} --window 64 --calibration-windows 1 --threads 2 --recipes none
                        --write-calibration-stats ${WORK}/stats.safetensors
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "calibration statistics: 64 tokens" OR NOT EXISTS ${WORK}/stats.safetensors)
  message(FATAL_ERROR "--write-calibration-stats: exit ${status}, '${out}${err}'")
endif()
file(SIZE ${WORK}/stats.safetensors stats_bytes)
if(stats_bytes LESS 800000000)
  message(FATAL_ERROR "--write-calibration-stats wrote ${stats_bytes} bytes, expected every block's Hessians")
endif()
file(REMOVE ${WORK}/stats.safetensors)

# A text shorter than one window: exit 1, an error naming the text, and no JSON file.
file(WRITE ${WORK}/short.txt "To be, or not to be, that is the question.")
execute_process(COMMAND ${PROGRAM} --data ${DATA} --eval-text ${WORK}/short.txt --json ${WORK}/short.json
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 1 OR NOT err MATCHES "short.txt: tokens" OR EXISTS ${WORK}/short.json)
  message(FATAL_ERROR "short text: exit ${status}, stderr '${err}', json written: expected exit 1, an error, no file")
endif()

# An unknown recipe is a usage error (exit 2) before anything is loaded.
execute_process(COMMAND ${PROGRAM} --data ${DATA} --recipes base,w2 RESULT_VARIABLE status ERROR_VARIABLE err)
if(NOT status EQUAL 2 OR NOT err MATCHES "w2")
  message(FATAL_ERROR "unknown recipe: exit ${status}, stderr '${err}'")
endif()

# A Hessian jitter outside [0, 1) is a usage error (exit 2) naming the flag.
execute_process(COMMAND ${PROGRAM} --data ${DATA} --hessian-jitter 2 RESULT_VARIABLE status ERROR_VARIABLE err)
if(NOT status EQUAL 2 OR NOT err MATCHES "--hessian-jitter")
  message(FATAL_ERROR "--hessian-jitter 2: exit ${status}, stderr '${err}'")
endif()
