# ctest -R llm/shrink_llm_generate: `shrink_llm generate` (PROGRAM) on the real data (DATA), in WORK.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(generate name)
  execute_process(COMMAND ${PROGRAM} generate --data ${DATA} --threads 2 --calibration-windows 1 --json
                          ${WORK}/${name}.json ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${name}: ${out}${err}")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "shrink_llm generate (${name}) exited with ${status}")
  endif()
  file(READ ${WORK}/${name}.json json)
  set(${name}_out "${out}" PARENT_SCOPE)
  set(${name}_json "${json}" PARENT_SCOPE)
endfunction()

# The float model answers a chat question, greedy, and stops at <|im_end|>.
generate(chat --chat --prompt "What is the capital of France?" --max-tokens 48)
string(JSON stop GET "${chat_json}" stop)
if(NOT chat_out MATCHES "Paris" OR NOT stop STREQUAL "stop token")
  message(FATAL_ERROR "chat: expected an answer naming Paris that ends at a stop token, got '${chat_out}' (${stop})")
endif()

# Calibrated recipes (sequential GPTQ, SmoothQuant) with the compressed caches, sampled with a seed: the same seed
# gives the same text.
foreach(run gptq_a gptq_b)
  generate(${run} --recipe gptq-w4-g64 --kv-cache int8 --prompt "Once upon a time" --max-tokens 12
           --temperature 0.8 --top-k 40 --top-p 0.9 --seed 7)
endforeach()
string(JSON a GET "${gptq_a_json}" generated_ids)
string(JSON b GET "${gptq_b_json}" generated_ids)
string(JSON count LENGTH "${gptq_a_json}" generated_ids)
if(NOT a STREQUAL b OR count LESS 1)
  message(FATAL_ERROR "gptq-w4-g64 with seed 7: '${a}' then '${b}': expected the same tokens")
endif()
generate(smooth --recipe sq-w8a8 --kv-cache f16 --prompt "The weather today" --max-tokens 8)
string(JSON cache GET "${smooth_json}" kv_cache)
if(NOT cache STREQUAL "f16")
  message(FATAL_ERROR "sq-w8a8: kv_cache '${cache}', expected f16")
endif()

# Usage errors (exit 2, the flag named) and a prompt longer than the context (exit 1, no JSON written).
foreach(case "--kv-cache;int4;--kv-cache" "--head;int4;--head" "--temperature;-1;temperature" "--top-p;1.5;top_p" "--recipe;w2;w2"
             "--max-tokens;0;--max-tokens")
  list(GET case 0 flag)
  list(GET case 1 value)
  list(GET case 2 named)
  execute_process(COMMAND ${PROGRAM} generate --data ${DATA} --prompt hello ${flag} ${value}
                  RESULT_VARIABLE status ERROR_VARIABLE err)
  if(NOT status EQUAL 2 OR NOT err MATCHES "${named}")
    message(FATAL_ERROR "${flag} ${value}: exit ${status}, stderr '${err}': expected exit 2 naming ${named}")
  endif()
endforeach()
execute_process(COMMAND ${PROGRAM} generate --data ${DATA} --prompt RESULT_VARIABLE status ERROR_VARIABLE err)
if(NOT status EQUAL 2)
  message(FATAL_ERROR "--prompt without a value: exit ${status}, expected 2")
endif()
execute_process(COMMAND ${PROGRAM} generate --data ${DATA} --chat --prompt "What is the capital of France?" --context 8
                        --json ${WORK}/long.json
                RESULT_VARIABLE status ERROR_VARIABLE err)
if(NOT status EQUAL 1 OR NOT err MATCHES "context of 8" OR EXISTS ${WORK}/long.json)
  message(FATAL_ERROR "prompt over --context 8: exit ${status}, stderr '${err}': expected exit 1, an error, no file")
endif()
