#!/usr/bin/env python3
"""llama.cpp loads shrink's GGUF files and computes the logits shrink computes (CTest llm/llama_cpp_logits).

    llama_cpp_logits.py SHRINK SHRINK_LLM DATA WORK [--threads 2] [--tokens 64]

Run with the Python of `scripts/python-env.sh llama` (llama-cpp-python, built by pip from its source). For every type
`shrink quantize --format gguf` writes (F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, and Q4_K through
--method hqq), SmolLM2-135M-Instruct (DATA, scripts/fetch-llm-data.sh) is requantized by `shrink` (SHRINK), loaded by
llama.cpp through its own API (llama_cpp.Llama), and its logits on the first --tokens Hamlet ids compared with
shrink_llm's float32 forward of the same file's dequantized weights (SHRINK_LLM --write-logits).

llama.cpp runs with its key/value cache in float32. Two checks per file:
  - shrink's dequantization of the file written as F32 (`--type f32`, its F32 twin) gives llama.cpp's logits equal to
    shrink's within float tolerance: relative RMS difference sqrt(mean (z_llama - z_shrink)^2) /
    sqrt(mean (z_shrink - mean)^2) <= 1e-5 (measured 1.3e-6 to 1.8e-6);
  - the file itself agrees within what ggml's CPU products add: they round the activations too (to fp16 against F16
    weights, to 8-bit blocks, Q8_0 or Q8_K, against the quantized types; llama-quantize's own Q6_K and Q5_K_S files of
    this model measure 0.040 and 0.049 relative RMS, 0.06 to 0.1 nats of mean NLL, against shrink's forward of the same
    weights): relative RMS <= 10% (F16: 0.5%), the top token the same at >= 85% of positions and, where it differs,
    llama.cpp's within 1.5 logits of shrink's top (a near tie), the mean NLL of the next tokens within 0.12 nats.
A block laid out wrongly shows in both as a relative difference near 1; the bytes themselves are checked bit for bit
against gguf-py's dequantization by io/gguf_interop.
Prints each file's figures. Exits 1 on a failure; 77 (CTest: skipped) when llama_cpp or numpy is not importable, 1
under SHRINK_PYTHON_STRICT=1 (scripts/test.sh).
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import llama_cpp
except ImportError as error:
    print(f"llama_cpp_logits.py: skipped: {error} (scripts/python-env.sh llama)")
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)

# (--type, extra shrink arguments, relative RMS bound)
CASES = [
    ("f16", [], 0.005),
    ("q8_0", [], 0.10),
    ("q4_0", [], 0.10),
    ("q4_1", [], 0.10),
    ("q5_0", [], 0.10),
    ("q5_1", [], 0.10),
    ("q4_k", [], 0.10),
    ("q5_k", [], 0.10),
    ("q6_k", [], 0.10),
    ("q4_k", ["--method", "hqq"], 0.10),
]
MIN_AGREEMENT = 0.85
NEAR_TIE = 1.5
NLL_GAP = 0.12
TWIN_BOUND = 1e-5


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout)
        fail(f"{' '.join(cmd)} exited with {done.returncode}")
    return done.stdout


def fail(message):
    print(f"llama_cpp_logits.py: FAILED: {message}")
    sys.exit(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("shrink")
    p.add_argument("shrink_llm")
    p.add_argument("data")
    p.add_argument("work")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tokens", type=int, default=64)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    source = os.path.join(a.data, "SmolLM2-135M-Instruct.Q4_1.gguf")
    ids_path = os.path.join(a.work, "hamlet_ids.bin")
    common = ["--data", a.data, "--threads", str(a.threads), "--recipes", "none"]
    run([a.shrink_llm, *common, "--write-ids", ids_path])
    with open(ids_path, "rb") as f:
        raw = f.read(4 * a.tokens)
    ids = list(struct.unpack(f"<{a.tokens}i", raw))

    failures = []

    def llama_logits(model):
        # Keys and values cached in float32 (llama.cpp's default is fp16): only the products' own rounding remains.
        llm = llama_cpp.Llama(model_path=model, n_ctx=a.tokens, n_batch=a.tokens, n_ubatch=a.tokens,
                              n_threads=a.threads, n_threads_batch=a.threads, logits_all=True, verbose=False,
                              type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
        llm.eval(ids)
        return np.asarray(llm.scores[:a.tokens - 1], dtype=np.float64)

    def mean_nll(z):
        top = z.max(axis=1, keepdims=True)
        log_z = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        return float(np.mean(log_z - z[np.arange(len(z)), np.asarray(ids[1:])]))

    def relative_rms(theirs, ours):
        return float(np.sqrt(np.mean((theirs - ours) ** 2)) / np.sqrt(np.mean((ours - ours.mean()) ** 2)))

    for t, extra, bound in CASES:
        name = t + ("." + extra[1] if extra else "")
        model = os.path.join(a.work, f"{name}.gguf")
        run([a.shrink, "quantize", source, model, "--format", "gguf", "--type", t, *extra])
        logits_path = os.path.join(a.work, f"{name}.logits")
        run([a.shrink_llm, *common, "--model", model, "--window", str(a.tokens), "--windows", "1",
             "--write-logits", logits_path])
        theirs = llama_logits(model)
        ours = np.fromfile(logits_path, dtype="<f4").astype(np.float64)
        if ours.size != theirs.size:
            fail(f"{name}: shrink_llm wrote {ours.size} logits, llama.cpp gave {theirs.shape}")
        ours = ours.reshape(theirs.shape)
        rms = relative_rms(theirs, ours)
        top_ours, top_theirs = ours.argmax(axis=1), theirs.argmax(axis=1)
        agree = top_ours == top_theirs
        rows = np.arange(len(ours))
        # Where the top tokens differ: how far llama.cpp's pick is below shrink's top logit, in shrink's logits.
        gap = ours[rows, top_ours] - ours[rows, top_theirs]
        worst_gap = float(gap[~agree].max()) if (~agree).any() else 0.0
        nll_gap = abs(mean_nll(theirs) - mean_nll(ours))
        line = (f"{name:10s} relative RMS {rms:.5f} (bound {bound}), max |diff| {np.abs(theirs - ours).max():.4f}, "
                f"top token agrees at {agree.mean():.3f} of {len(ours)} positions, widest disagreement "
                f"{worst_gap:.3f} logits, mean NLL {mean_nll(ours):.4f} vs llama.cpp's {mean_nll(theirs):.4f}")
        if not rms <= bound:
            failures.append(f"{name}: relative RMS {rms:.5f} above {bound}")
        if not agree.mean() >= MIN_AGREEMENT:
            failures.append(f"{name}: top token agrees at {agree.mean():.3f} of positions, below {MIN_AGREEMENT}")
        if not worst_gap <= NEAR_TIE:
            failures.append(f"{name}: a differing top token {worst_gap:.3f} logits below shrink's, above {NEAR_TIE}")
        if not nll_gap <= NLL_GAP:
            failures.append(f"{name}: mean NLL {nll_gap:.4f} nats from shrink's, above {NLL_GAP}")
        twin_model = os.path.join(a.work, f"{name}.f32.gguf")
        run([a.shrink, "quantize", model, twin_model, "--format", "gguf", "--type", "f32"])
        twin_rms = relative_rms(llama_logits(twin_model), ours)
        os.remove(twin_model)
        line += f"; its F32 twin: relative RMS {twin_rms:.2e} (bound {TWIN_BOUND})"
        if not twin_rms <= TWIN_BOUND:
            failures.append(f"{name}: its F32 twin's logits at relative RMS {twin_rms:.2e}, above {TWIN_BOUND}")
        print(line, flush=True)
        os.remove(model)
    if failures:
        fail("; ".join(failures))
    print(f"llama_cpp_logits.py: llama-cpp-python {llama_cpp.__version__} loaded {len(CASES)} files shrink wrote; "
          "their logits agree with shrink's forward")


if __name__ == "__main__":
    main()
