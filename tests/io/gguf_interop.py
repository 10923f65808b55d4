#!/usr/bin/env python3
"""Interop with gguf-py, the GGUF package of llama.cpp (tests/io/interop.cmake runs it as the CTest test io/gguf_interop).

usage: gguf_interop.py GGUF_INTEROP WORK_DIR
GGUF_INTEROP make WORK_DIR writes shrink.gguf (shrink's GgufWriter, every written type), source.gguf (the float values
it quantized) and dequantized.gguf (shrink's dequantization of shrink.gguf). gguf.GGUFReader must read shrink.gguf
with its metadata, names, shapes and types; gguf.quants.dequantize of each tensor (the K-quants Q4_K, Q5_K, Q6_K
included) must equal shrink's bit for bit; and gguf.quants.quantize of each source must give shrink's bytes (all but
the K-quants, which gguf-py does not quantize).
Exits 77 (CTest: skipped) when gguf or numpy is not importable, 1 under SHRINK_PYTHON_STRICT=1."""
import importlib.metadata
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import gguf
except ImportError as error:
    print(f"gguf_interop.py: skipped: {error} (pip install gguf numpy)")
    # scripts/test.sh installs them (scripts/python-env.sh) and sets SHRINK_PYTHON_STRICT: there a skip is a failure.
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)


def fail(message):
    print(f"gguf_interop.py: FAILED: {message}")
    sys.exit(1)


def field_value(reader, key):
    field = reader.get_field(key)
    if field is None:
        fail(f"key {key} missing")
    return field.contents()


def tensors(reader):
    """name -> ReaderTensor."""
    return {t.name: t for t in reader.tensors}


def main():
    tool, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    subprocess.run([tool, "make", work], check=True)
    written = gguf.GGUFReader(os.path.join(work, "shrink.gguf"))
    expected_fields = {
        "general.architecture": "llama",
        "general.name": "shrink gguf interop",
        "llama.block_count": 1,
        "test.int32": -123456,
        "test.uint64": 1 << 50,
        "llama.attention.layer_norm_rms_epsilon": float(np.float32(1e-5)),
        "test.bool": False,
        "tokenizer.ggml.tokens": ["<|endoftext|>", "a", "é"],
        "tokenizer.ggml.token_type": [3, 1, 1],
        "tokenizer.ggml.scores": [0.0, -1.5, 2.25],
    }
    for key, value in expected_fields.items():
        got = field_value(written, key)
        if isinstance(value, float):
            ok = float(got) == value
        else:
            ok = got == value
        if not ok:
            fail(f"{key} = {got!r}: expected {value!r}")
    source = tensors(gguf.GGUFReader(os.path.join(work, "source.gguf")))
    dequantized = tensors(gguf.GGUFReader(os.path.join(work, "dequantized.gguf")))
    checked = requantized_count = 0
    k_quants = {gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q5_K, gguf.GGMLQuantizationType.Q6_K}
    for t in written.tensors:
        shape = tuple(int(n) for n in reversed(t.shape.tolist()))  # GGUFReader lists ne, innermost first
        if shape != tuple(int(n) for n in reversed(source[t.name].shape.tolist())):
            fail(f"{t.name}: shape {shape} differs from its source's")
        ours = np.asarray(dequantized[t.name].data, dtype=np.float32).reshape(-1)
        theirs = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        if theirs.shape != ours.shape or not np.array_equal(theirs.view(np.uint32), ours.view(np.uint32)):
            bad = int(np.count_nonzero(theirs.view(np.uint32) != ours.view(np.uint32)))
            fail(f"{t.name} ({t.tensor_type.name}): gguf-py's dequantization differs from shrink's in {bad} values")
        checked += 1
        if t.tensor_type in k_quants:
            continue  # gguf-py has no K quantizer (its quantize raises NotImplementedError): dequantization only
        x = np.asarray(source[t.name].data, dtype=np.float32).reshape(shape)
        requantized = gguf.quants.quantize(x, t.tensor_type)
        if requantized.tobytes() != np.asarray(t.data).tobytes():
            fail(f"{t.name} ({t.tensor_type.name}): gguf-py's quantization of the source differs from shrink's bytes")
        requantized_count += 1
    if checked != 11 or requantized_count != 8:
        fail(f"{checked} tensors checked, {requantized_count} requantized: expected 11 and 8")
    version = importlib.metadata.version("gguf")
    print(f"gguf_interop.py: gguf-py {version} read shrink's file; {checked} tensors dequantize as shrink's bit for bit,"
          f" {requantized_count} requantize to shrink's bytes")


if __name__ == "__main__":
    main()
