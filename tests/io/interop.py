#!/usr/bin/env python3
"""Interop with Hugging Face's safetensors package (tests/io/interop.cmake runs it as the CTest test io/interop).

usage: interop.py SAFETENSORS_INTEROP WORK_DIR
1. writes a file with safetensors.numpy (every numpy-backed dtype, 0-d and empty tensors, metadata); shrink reads
   and rewrites it (safetensors_interop copy); the rewritten file must load with the same tensors, the same
   metadata and a byte-identical data area;
2. shrink writes a file of all twelve dtypes (safetensors_interop make), which safetensors.deserialize must read
   with the dtypes, shapes and bytes interop_tool.cpp put there;
3. the reference implementation must reject every hostile file of tests/io/corpus/ too (each is truly invalid).
Exits 77 (CTest: skipped) when safetensors or numpy is not importable, 1 under SHRINK_PYTHON_STRICT=1."""
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import safetensors
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as error:
    print(f"interop.py: skipped: {error} (pip install safetensors numpy)")
    # scripts/test.sh installs them (scripts/python-env.sh) and sets SHRINK_PYTHON_STRICT: there a skip is a failure.
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)


def fail(message):
    print(f"interop.py: FAILED: {message}")
    sys.exit(1)


def data_area(path):
    with open(path, "rb") as f:
        content = f.read()
    (n,) = struct.unpack("<Q", content[:8])
    return content[8 + n:]


def metadata_of(path):
    with safe_open(path, framework="numpy") as f:
        return f.metadata() or {}


def run(tool, *args):
    result = subprocess.run([tool, *args], capture_output=True, text=True)
    print(result.stdout, end="")
    if result.returncode != 0:
        fail(f"{' '.join(args)}: exit status {result.returncode}: {result.stderr}")


def python_to_shrink(tool, work):
    rng = np.random.default_rng(5)
    tensors = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal((5,)).astype(np.float16),
        "f64": rng.standard_normal((2, 2, 2)).astype(np.float64),
        "i8": rng.integers(-128, 128, (7,), dtype=np.int8),
        "u8": rng.integers(0, 256, (3, 3), dtype=np.uint8),
        "i16": rng.integers(-30000, 30000, (4,), dtype=np.int16),
        "i32": rng.integers(-2**31, 2**31, (6,), dtype=np.int32),
        "i64": rng.integers(-2**62, 2**62, (2, 3), dtype=np.int64),
        "bool": rng.integers(0, 2, (9,)).astype(np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    metadata = {"format": "np", "note": "written by safetensors.numpy, ü"}
    original = os.path.join(work, "python.safetensors")
    copied = os.path.join(work, "shrink_copy.safetensors")
    save_file(tensors, original, metadata=metadata)
    run(tool, "copy", original, copied)
    loaded = load_file(copied)
    if sorted(loaded) != sorted(tensors):
        fail(f"tensor names {sorted(loaded)} != {sorted(tensors)}")
    for name, expected in tensors.items():
        got = loaded[name]
        if got.dtype != expected.dtype or got.shape != expected.shape or got.tobytes() != expected.tobytes():
            fail(f"tensor {name}: {got.dtype}{got.shape} differs from {expected.dtype}{expected.shape}")
    if metadata_of(copied) != metadata:
        fail(f"metadata {metadata_of(copied)} != {metadata}")
    if data_area(copied) != data_area(original):
        fail("the data area of shrink's copy differs from the original's")
    print(f"interop.py: shrink read and rewrote {len(tensors)} tensors written by safetensors {safetensors.__version__}")


def shrink_to_python(tool, work):
    path = os.path.join(work, "shrink.safetensors")
    run(tool, "make", path)
    with open(path, "rb") as f:
        tensors = dict(safetensors.deserialize(f.read()))
    names = ["F64", "I64", "F32", "I32", "F16", "BF16", "I16", "I8", "U8", "BOOL", "F8_E4M3", "F8_E5M2"]
    widths = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2, "BF16": 2, "I16": 2}
    for j, name in enumerate(names):
        info = tensors.get(name)
        if info is None:
            fail(f"tensor {name} missing from shrink's file")
        size = 6 * widths.get(name, 1)
        expected = bytes(((k * 31 + j * 7 + 1) & 0xFF) & (1 if name == "BOOL" else 0xFF) for k in range(size))
        if info["dtype"] != name or list(info["shape"]) != [2, 3] or bytes(info["data"]) != expected:
            fail(f"tensor {name}: got {info['dtype']} {info['shape']} {bytes(info['data']).hex()}")
    if bytes(tensors["scalar"]["data"]) != struct.pack("<f", 2.5) or list(tensors["scalar"]["shape"]) != []:
        fail(f"tensor scalar: {tensors['scalar']}")
    if list(tensors["empty"]["shape"]) != [0, 4] or bytes(tensors["empty"]["data"]) != b"":
        fail(f"tensor empty: {tensors['empty']}")
    if metadata_of(path) != {"writer": "shrink", "unicode": "ü"}:
        fail(f"metadata {metadata_of(path)}")
    with safe_open(path, framework="numpy") as f:  # numpy reads the dtypes it has
        if f.get_tensor("F32").shape != (2, 3) or f.get_tensor("BOOL").dtype != np.bool_:
            fail("safe_open(framework='numpy') read shrink's file differently")
    print(f"interop.py: safetensors {safetensors.__version__} read all {len(names) + 2} tensors shrink wrote")


def reference_rejects_corpus():
    corpus = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    names = sorted(n for n in os.listdir(corpus) if n.endswith(".safetensors"))
    for name in names:
        with open(os.path.join(corpus, name), "rb") as f:
            content = f.read()
        try:
            safetensors.deserialize(content)
        except Exception:  # the package raises SafetensorError, or others for some defects
            continue
        fail(f"safetensors accepted the hostile file corpus/{name}")
    print(f"interop.py: safetensors rejects all {len(names)} hostile corpus files, as shrink does")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    tool, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    python_to_shrink(tool, work)
    shrink_to_python(tool, work)
    reference_rejects_corpus()


if __name__ == "__main__":
    main()
