#!/usr/bin/env python3
"""The table of docs/llm.md "Into llama.cpp's formats": every GGUF format x method, perplexity by llama.cpp.

    gguf_table.py --shrink BIN/shrink --shrink-llm BIN/shrink_llm --llama-tools DIR --data DIR --work DIR
                  [--types q4_0,q5_0,q5_1,q8_0,q4_k,q5_k,q6_k] [--methods rtn,hqq,gptq,gptq-act,awq] [--threads 2]
                  [--json OUT]

Run with the Python of `scripts/python-env.sh llama` (llama-cpp-python). --llama-tools holds llama.cpp's own
llama-quantize and llama-imatrix, built by hand from the same llama-cpp-python sdist (its Python API has no importance
matrix tool; commands in benchmarks/notes/gguf_methods.md). In --work, made once and reused:
  hamlet_ids.bin, calibration.safetensors   shrink_llm --write-ids / --write-calibration-stats (the float model's
                                            input statistics over the calibration windows: 16 x 512 Macbeth tokens)
  imatrix.gguf                              llama-imatrix on llama.cpp's F16 of the source, the same Macbeth text,
                                            16 chunks of 512
  llama.<T>[.imatrix].gguf                  llama-quantize --allow-requantize [--imatrix] of the source to T; for the
                                            K-quants (shrink writes them pure) --pure with the embedding and output
                                            types shrink's plan gives them (Q4_K_S, Q5_K_S, Q6_K), so that both
                                            files hold the same type per tensor
  <t>.<method>.gguf                         shrink quantize --format gguf --type t --method ... (timed)
Every file's perplexity comes from llama.cpp's logits (llama_cpp_perplexity.py: 8 windows of 512 Hamlet ids, every
token but each window's first). Prints a markdown table and writes every figure to --json.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

METHOD_ARGS = {
    "rtn": [],
    "hqq": ["--method", "hqq"],
    "gptq": ["--method", "gptq", "--calibration", "{stats}"],
    "gptq-act": ["--method", "gptq", "--act-order", "--calibration", "{stats}"],
    "awq": ["--method", "awq", "--calibration", "{stats}"],
}


def run(cmd, log):
    with open(log, "w") as f:
        start = time.perf_counter()
        status = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode
        seconds = time.perf_counter() - start
    if status != 0:
        sys.exit(f"gguf_table: {' '.join(cmd)} failed with status {status} (log: {log})")
    return seconds


def perplexity(python, model, ids, threads, work):
    out = os.path.join(work, os.path.basename(model) + ".ppl.json")
    if not (os.path.exists(out) and os.path.getmtime(out) > os.path.getmtime(model)):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "llama_cpp_perplexity.py")
        run([python, script, "--model", model, "--ids", ids, "--threads", str(threads), "--json", out], out + ".log")
    with open(out) as f:
        return json.load(f)


# llama-quantize's file type for each K-quant shrink writes (every linear the one type: --pure).
LLAMA_K_FTYPE = {"q4_k": "Q4_K_S", "q5_k": "Q5_K_S", "q6_k": "Q6_K"}


def head_types(shrink, source, t, work):
    """The types shrink's plan gives token_embd.weight and output.weight (when present) for --type t."""
    plan = os.path.join(work, f"{t}.plan.json")
    out = os.path.join(work, f"{t}.plan.gguf")
    with open(plan, "w") as f:
        subprocess.run([shrink, "quantize", source, out, "--format", "gguf", "--type", t, "--json"], stdout=f,
                       check=True)
    os.remove(out)
    with open(plan) as f:
        tensors = {e["name"]: e["to"] for e in json.load(f)["tensors"]}
    return tensors.get("token_embd.weight"), tensors.get("output.weight")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shrink", required=True)
    p.add_argument("--shrink-llm", required=True)
    p.add_argument("--llama-tools", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--types", default="q4_0,q5_0,q5_1,q8_0,q4_k,q5_k,q6_k")
    p.add_argument("--methods", default="rtn,hqq,gptq,gptq-act,awq")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    source = os.path.join(a.data, "SmolLM2-135M-Instruct.Q4_1.gguf")
    ids = os.path.join(a.work, "hamlet_ids.bin")
    stats = os.path.join(a.work, "calibration.safetensors")
    env_data = ["--data", a.data, "--threads", str(a.threads), "--recipes", "none"]
    if not os.path.exists(ids):
        run([a.shrink_llm, *env_data, "--write-ids", ids], ids + ".log")
    if not os.path.exists(stats):
        run([a.shrink_llm, *env_data, "--write-calibration-stats", stats], stats + ".log")
    tool = lambda name: os.path.join(a.llama_tools, name)
    f16 = os.path.join(a.work, "llama.F16.gguf")
    if not os.path.exists(f16):
        run([tool("llama-quantize"), "--allow-requantize", source, f16, "F16", str(a.threads)], f16 + ".log")
    imatrix = os.path.join(a.work, "imatrix.gguf")
    if not os.path.exists(imatrix):
        run([tool("llama-imatrix"), "-m", f16, "-f", os.path.join(a.data, "macbeth.txt"), "-o", imatrix, "--chunks",
             "16", "-c", "512", "-b", "512", "-t", str(a.threads), "--no-ppl"], imatrix + ".log")

    python = sys.executable
    rows = []
    base = perplexity(python, f16, ids, a.threads, a.work)
    rows.append({"type": "F16", "method": "llama-quantize", "perplexity": base["perplexity"],
                 "file_bytes": base["file_bytes"]})
    print(f"F16 (llama-quantize): {base['perplexity']:.3f}", flush=True)
    for t in a.types.split(","):
        T = t.upper()
        for imat in (False, True):
            out = os.path.join(a.work, f"llama.{T}{'.imatrix' if imat else ''}.gguf")
            seconds = None
            if not os.path.exists(out):
                cmd = [tool("llama-quantize"), "--allow-requantize"] + (["--imatrix", imatrix] if imat else [])
                ftype = T
                if t in LLAMA_K_FTYPE:
                    ftype = LLAMA_K_FTYPE[t]
                    embedding, output = head_types(a.shrink, source, t, a.work)
                    cmd += ["--pure", "--token-embedding-type", embedding.lower()]
                    cmd += ["--output-tensor-type", (output or embedding).lower()]
                seconds = run(cmd + [source, out, ftype, str(a.threads)], out + ".log")
            r = perplexity(python, out, ids, a.threads, a.work)
            rows.append({"type": T, "method": "llama-quantize" + (" + imatrix" if imat else ""),
                         "perplexity": r["perplexity"], "file_bytes": r["file_bytes"], "compress_seconds": seconds})
            print(f"{T} {rows[-1]['method']}: {r['perplexity']:.3f}", flush=True)
        for m in a.methods.split(","):
            out = os.path.join(a.work, f"{t}.{m}.gguf")
            cmd = [a.shrink, "quantize", source, out, "--format", "gguf", "--type", t]
            cmd += [x.format(stats=stats) for x in METHOD_ARGS[m]]
            if os.path.exists(out):
                os.remove(out)
            seconds = run(cmd, out + ".log")
            r = perplexity(python, out, ids, a.threads, a.work)
            rows.append({"type": T, "method": "shrink " + m, "perplexity": r["perplexity"],
                         "file_bytes": r["file_bytes"], "compress_seconds": seconds})
            print(f"{T} shrink {m}: {r['perplexity']:.3f} ({seconds:.1f} s)", flush=True)

    print()
    print("| format | method | perplexity | vs F16 | file MB | compress s |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        rise = 100.0 * (r["perplexity"] / base["perplexity"] - 1.0)
        secs = "" if r.get("compress_seconds") is None else f"{r['compress_seconds']:.1f}"
        print(f"| {r['type']} | {r['method']} | {r['perplexity']:.3f} | {rise:+.2f}% | "
              f"{r['file_bytes'] / 1e6:.1f} | {secs} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"base_f16": base["perplexity"], "threads": a.threads, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
