#!/usr/bin/env python3
"""llama.cpp's prefill and decode speed on a GGUF, through its own API (llama-cpp-python), for bench_llm_generate.

    llama_cpp_speed.py --source MODEL.gguf --format F32|F16|Q8_0|Q4_0 --work DIR --ids IDS.bin
                       --prompt 512 --decode 128 --threads T [--repeats 3] --json OUT

The model of --format is made once in --work from --source by llama.cpp's own quantizer (llama_model_quantize, as
the llama-quantize tool; allow_requantize, since SmolLM2's file is Q4_1) and kept there. Then, with n_ctx = prompt
+ decode, batches of 512 and T threads for both batches and single tokens (llama.cpp's defaults otherwise: its
KV cache in F16, flash attention as the package sets it):
  prefill: the first --prompt ids of IDS.bin (little-endian int32) evaluated from an empty cache, in one call;
  decode:  the next --decode ids, one eval call each (every call computes the next token's logits), after it.
One untimed warm-up round, then --repeats rounds; the median of each is written to OUT as JSON with the library's
system info (the instruction sets it was built for) and the file's size.
"""
import argparse
import json
import os
import statistics
import struct
import sys
import time

import llama_cpp

FTYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7}


def make_format(source, fmt, work):
    path = os.path.join(work, f"{os.path.splitext(os.path.basename(source))[0]}.{fmt}.gguf")
    if os.path.exists(path):
        return path
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[fmt]
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    partial = path + ".partial"
    status = llama_cpp.llama_model_quantize(source.encode(), partial.encode(), params)
    if status != 0:
        sys.exit(f"llama_cpp_speed: llama_model_quantize to {fmt} failed with status {status}")
    os.replace(partial, path)
    return path


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--format", required=True, choices=sorted(FTYPES))
    p.add_argument("--work", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--prompt", type=int, default=512)
    p.add_argument("--decode", type=int, default=128)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", required=True)
    a = p.parse_args()

    with open(a.ids, "rb") as f:
        raw = f.read()
    ids = list(struct.unpack(f"<{len(raw) // 4}i", raw))
    if len(ids) < a.prompt + a.decode:
        sys.exit(f"llama_cpp_speed: {a.ids} holds {len(ids)} ids, fewer than {a.prompt} + {a.decode}")
    prompt, following = ids[:a.prompt], ids[a.prompt:a.prompt + a.decode]
    os.makedirs(a.work, exist_ok=True)
    model = make_format(a.source, a.format, a.work)
    llm = llama_cpp.Llama(model_path=model, n_ctx=a.prompt + a.decode, n_batch=512, n_ubatch=512,
                          n_threads=a.threads, n_threads_batch=a.threads, verbose=False)

    def one_round():
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt)
        middle = time.perf_counter()
        for token in following:
            llm.eval([token])
        return middle - start, time.perf_counter() - middle

    one_round()
    rounds = [one_round() for _ in range(a.repeats)]
    result = {"format": a.format, "model": model, "file_bytes": os.path.getsize(model), "threads": a.threads,
              "prompt_tokens": a.prompt, "decode_tokens": a.decode,
              "prefill_seconds": statistics.median(r[0] for r in rounds),
              "decode_seconds": statistics.median(r[1] for r in rounds),
              "rounds": rounds, "llama_cpp_python": llama_cpp.__version__,
              "system_info": llama_cpp.llama_print_system_info().decode()}
    with open(a.json + ".partial", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(a.json + ".partial", a.json)


if __name__ == "__main__":
    main()
