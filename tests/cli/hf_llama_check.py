#!/usr/bin/env python3
"""A Hugging Face Llama checkpoint through `shrink quantize --format gguf`, run by llama.cpp, against transformers
(CTest cli/hf_llama_to_llama_cpp).

usage: hf_llama_check.py SHRINK LLAMA_PYTHON WORK

Run with the torch environment's Python (scripts/python-env.sh torch: transformers over Debian's torch). Makes a small
random LlamaForCausalLM (width 256, 4 heads of 64 with 2 KV heads, 2 blocks, an untied head) with transformers,
saves it in shards (model.safetensors.index.json) with a byte-level BPE tokenizer.json written here, and takes
transformers' float32 logits for 48 token ids. `shrink quantize CHECKPOINT OUT --format gguf` writes it as F32 and as
Q8_0; llama.cpp (LLAMA_PYTHON: scripts/python-env.sh llama) loads each and computes the logits of the same ids (its
key/value cache in float32):
  F32   equal to transformers' within float tolerance: relative RMS difference <= 1e-5. The same model with q and k
        left in Hugging Face's row order measures about 1 here (checked below), so the rotary reordering is what
        this proves, with the names, the metadata and the vocabulary llama.cpp needs to load the file at all;
  Q8_0  within what its 8-bit products add (relative RMS <= 10%; 4.1% measured).
Exits 77 (skipped) without torch, transformers or numpy, or without LLAMA_PYTHON's llama_cpp; 1 under
SHRINK_PYTHON_STRICT=1 (scripts/test.sh).
"""
import json
import os
import shutil
import subprocess
import sys

STRICT = os.environ.get("SHRINK_PYTHON_STRICT") == "1"


def skip(why):
    print(f"hf_llama_check.py: skipped: {why}")
    sys.exit(1 if STRICT else 77)


try:
    import numpy as np
    import torch
    import transformers
except ImportError as error:
    skip(f"{error} (scripts/python-env.sh torch)")


def fail(message):
    print(f"hf_llama_check.py: FAILED: {message}")
    sys.exit(1)


LLAMA_LOGITS = r"""
import sys, numpy as np, llama_cpp
model, ids_path, out = sys.argv[1:4]
ids = [int(x) for x in open(ids_path).read().split()]
llm = llama_cpp.Llama(model_path=model, n_ctx=len(ids), n_batch=len(ids), n_ubatch=len(ids), n_threads=2,
                      logits_all=True, verbose=False, type_k=llama_cpp.GGML_TYPE_F32,
                      type_v=llama_cpp.GGML_TYPE_F32)
llm.eval(ids)
np.asarray(llm.scores[:len(ids)], dtype=np.float32).tofile(out)
"""


def byte_level_vocab():
    """GPT-2's printable stand-in of every byte (the byte-level alphabet), by byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def relative_rms(theirs, ours):
    return float(np.sqrt(np.mean((theirs - ours) ** 2)) / np.sqrt(np.mean((ours - ours.mean()) ** 2)))


def main():
    args = sys.argv[1:]
    if len(args) == 2:  # CMake drops an empty LLAMA_PYTHON
        args = [args[0], "", args[1]]
    shrink, llama_python, work = args
    if not llama_python or shutil.which(llama_python) is None:
        skip("no Python with llama_cpp given (scripts/python-env.sh llama, SHRINK_LLAMA_PYTHON3)")
    done = subprocess.run([llama_python, "-c", "import llama_cpp"], capture_output=True)
    if done.returncode != 0:
        skip(f"{llama_python} has no llama_cpp (scripts/python-env.sh llama)")
    shutil.rmtree(work, ignore_errors=True)
    checkpoint = os.path.join(work, "tiny-llama")
    os.makedirs(checkpoint)

    # The vocabulary: 256 byte tokens, two merges, three special tokens, and ids left free up to vocab_size.
    tokens = byte_level_vocab()
    vocab = {t: i for i, t in enumerate(tokens)}
    vocab["he"] = 256
    vocab["Ġt"] = 257
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    config = transformers.LlamaConfig(vocab_size=264, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                                      initializer_range=0.08, bos_token_id=259, eos_token_id=260)
    torch.manual_seed(20261129)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so that a norm's place matters
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
    model.save_pretrained(checkpoint, safe_serialization=True, max_shard_size="1MB")
    if not os.path.exists(os.path.join(checkpoint, "model.safetensors.index.json")):
        fail("transformers wrote no sharded checkpoint: the test means to read one")
    with open(os.path.join(checkpoint, "tokenizer.json"), "w") as f:
        json.dump({"version": "1.0", "added_tokens": [
            {"id": 258 + k, "content": s, "special": True} for k, s in enumerate(specials)],
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "model": {"type": "BPE", "vocab": vocab, "merges": ["h e", "Ġ t"]}}, f)
    with open(os.path.join(checkpoint, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "add_bos_token": False}, f)

    rng = np.random.default_rng(7)
    ids = [int(i) for i in rng.integers(0, 258, size=48)]
    ids_path = os.path.join(work, "ids.txt")
    with open(ids_path, "w") as f:
        f.write(" ".join(map(str, ids)))
    with torch.no_grad():
        ours = model(torch.tensor([ids])).logits[0].double().numpy()

    # The same model with q and k in Hugging Face's own row order, read with llama.cpp's rotary pairing: how far the
    # logits move when the reordering is missing (the F32 check's bound must be far below it).
    head_dim = 64
    with torch.no_grad():
        wrong = transformers.LlamaForCausalLM(config).eval()
        wrong.load_state_dict(model.state_dict())
        for layer in wrong.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj):
                w = proj.weight.data
                rows = w.shape[0]
                order = []  # HF row i of a head read where llama.cpp pairs (2i, 2i + 1)
                for h in range(rows // head_dim):
                    for j in range(head_dim):
                        order.append(h * head_dim + (j // 2 if j % 2 == 0 else head_dim // 2 + j // 2))
                inverse = np.argsort(order)
                proj.weight.data = w[torch.tensor(inverse)].clone()
        unpermuted = wrong(torch.tensor([ids])).logits[0].double().numpy()
    missing = relative_rms(unpermuted, ours)
    print(f"without the rotary reordering the logits would move by {missing:.3f} (relative RMS)")
    if not missing > 0.05:
        fail(f"the model is not sensitive to the q/k row order ({missing:.4f}): the check would prove nothing")

    failures = []
    for t, bound in (("f32", 1e-5), ("q8_0", 0.10)):
        out = os.path.join(work, f"tiny.{t}.gguf")
        done = subprocess.run([shrink, "quantize", checkpoint, out, "--format", "gguf", "--type", t],
                              capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"shrink quantize --type {t} exited {done.returncode}: {done.stdout}{done.stderr}")
        if "a Hugging Face Llama checkpoint" not in done.stdout:
            fail(f"shrink quantize did not report reading a checkpoint: {done.stdout}")
        leftovers = [n for n in os.listdir(work) if n.endswith(".source.gguf")]
        if leftovers:
            fail(f"the temporary GGUF was left behind: {leftovers}")
        logits_path = out + ".logits"
        done = subprocess.run([llama_python, "-c", LLAMA_LOGITS, out, ids_path, logits_path], capture_output=True,
                              text=True)
        if done.returncode != 0:
            fail(f"llama.cpp could not run {out}: {done.stderr[-2000:]}")
        theirs = np.fromfile(logits_path, dtype=np.float32).astype(np.float64).reshape(ours.shape)
        rms = relative_rms(theirs, ours)
        print(f"{t}: llama.cpp's logits against transformers': relative RMS {rms:.2e} (bound {bound:g})", flush=True)
        if not rms <= bound:
            failures.append(f"{t}: relative RMS {rms:.2e} above {bound:g}")
    if failures:
        fail("; ".join(failures))
    print(f"hf_llama_check.py: transformers {transformers.__version__}'s Llama, written by shrink, runs in llama.cpp "
          "with transformers' logits")


if __name__ == "__main__":
    main()
