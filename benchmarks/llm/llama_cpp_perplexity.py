#!/usr/bin/env python3
"""Perplexity of a GGUF by llama.cpp's own forward (llama-cpp-python), on the LLM example's token ids.

    llama_cpp_perplexity.py --model MODEL.gguf --ids IDS.bin [--window 512] [--windows 8] [--threads T] [--json OUT]

IDS.bin holds little-endian int32 token ids (`shrink_llm --write-ids`: Hamlet through SmolLM2's tokenizer). Window w is
ids[w·window, (w + 1)·window), evaluated from an empty cache in one batch with every position's logits kept; every
token but the window's first is scored by log-softmax of the previous position's logits (in float64), as shrink_llm
scores its own rows, so the figures compare with docs/llm.md's. Prints the perplexity; --json writes it with the NLL
sum, the predictions, the file's size and the seconds taken.
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np

import llama_cpp


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--ids", required=True)
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--windows", type=int, default=8)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json")
    a = p.parse_args()

    with open(a.ids, "rb") as f:
        raw = f.read()
    ids = list(struct.unpack(f"<{len(raw) // 4}i", raw))
    if len(ids) < a.window * a.windows:
        sys.exit(f"llama_cpp_perplexity: {a.ids} holds {len(ids)} ids, fewer than {a.windows} windows of {a.window}")

    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.window, n_batch=a.window, n_ubatch=a.window,
                          n_threads=a.threads, n_threads_batch=a.threads, logits_all=True, verbose=False)
    nll, predictions = 0.0, 0
    start = time.perf_counter()
    for w in range(a.windows):
        window = ids[w * a.window:(w + 1) * a.window]
        llm.reset()
        llm.eval(window)
        logits = np.asarray(llm.scores[:a.window - 1], dtype=np.float64)
        top = logits.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        targets = np.asarray(window[1:], dtype=np.int64)
        nll += float((log_z - logits[np.arange(a.window - 1), targets]).sum())
        predictions += a.window - 1
    seconds = time.perf_counter() - start
    perplexity = float(np.exp(nll / predictions))
    print(f"{a.model}: perplexity {perplexity:.3f} over {predictions} predictions ({seconds:.1f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "perplexity": perplexity, "nll_sum": nll, "predictions": predictions,
                       "file_bytes": os.path.getsize(a.model), "seconds": seconds, "window": a.window,
                       "windows": a.windows, "threads": a.threads}, f, indent=2)


if __name__ == "__main__":
    main()
