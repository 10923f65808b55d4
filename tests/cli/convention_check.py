#!/usr/bin/env python3
"""An independent reader of shrink's quantized-tensor convention (tests/cli/CMakeLists.txt runs it as the CTest
test cli/convention_interop).

usage: convention_check.py SHRINK WORK_DIR
Writes a model with Hugging Face's safetensors package, quantizes it with `shrink quantize` under many schemes,
then dequantizes every "shrink.quant.<name>" tensor in numpy from nothing but the description in docs/model-files.md (header
parsed by hand, packed nibbles, scales, zero points (HQQ's fractional ones too), FP8 codes, AWQ's input scale) and requires the values `shrink
dequantize` wrote, bit for bit (`shrink quantize --method awq` from calibration statistics written here). Also checks that safetensors itself opens shrink's quantized files (metadata included), and every shard
of a sharded checkpoint quantized into shards, whose index must map each tensor to the shard holding it.
Exits 77 (CTest: skipped) when numpy or safetensors is not importable, 1 under SHRINK_PYTHON_STRICT=1."""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
except ImportError as error:
    print(f"convention_check.py: skipped: {error} (pip install safetensors numpy)")
    # scripts/test.sh installs them (scripts/python-env.sh) and sets SHRINK_PYTHON_STRICT: there a skip is a failure.
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)


def fail(message):
    print(f"convention_check.py: FAILED: {message}")
    sys.exit(1)


def read_raw(path):
    """The header, metadata and raw bytes of every tensor, read by hand."""
    with open(path, "rb") as f:
        content = f.read()
    (n,) = struct.unpack("<Q", content[:8])
    header = json.loads(content[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = content[8 + n:]
    tensors = {name: (e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]])
               for name, e in header.items()}
    return tensors, metadata


NUMPY_TYPES = {"F32": np.float32, "I8": np.int8, "U8": np.uint8, "F16": np.float16}


def array(tensors, name, expected_dtype):
    dtype, shape, raw = tensors[name]
    if dtype != expected_dtype:
        fail(f"{name}: dtype {dtype}, expected {expected_dtype}")
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if dtype.startswith("F8"):
        return np.frombuffer(raw, dtype=np.uint8).reshape(shape)
    return np.frombuffer(raw, dtype=NUMPY_TYPES[dtype]).reshape(shape)


def decode_fp8(codes, exponent_bits, mantissa_bits, bias):
    """Exact values of FP8 codes (E4M3: no infinities; E5M2: IEEE-like)."""
    codes = codes.astype(np.int64)
    sign = np.where(codes >> 7, -1.0, 1.0)
    exponent = (codes >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = codes & ((1 << mantissa_bits) - 1)
    normal = (1.0 + mantissa / (1 << mantissa_bits)) * np.exp2(exponent - bias)
    subnormal = (mantissa / (1 << mantissa_bits)) * np.exp2(1 - bias)
    return (sign * np.where(exponent == 0, subnormal, normal)).astype(np.float32)


def unpack_nibbles(packed, logical_shape, signed):
    """Element 2j of each row in the low nibble of byte j, 2j+1 in the high nibble."""
    last = logical_shape[-1] if logical_shape else 1
    rows = packed.reshape(-1, packed.shape[-1] if packed.ndim else 1).astype(np.int32)
    nibbles = np.empty((rows.shape[0], rows.shape[1] * 2), dtype=np.int32)
    nibbles[:, 0::2] = rows & 0xF
    nibbles[:, 1::2] = rows >> 4
    values = nibbles[:, :last]
    if signed:
        values = np.where(values >= 8, values - 16, values)
    return values.reshape(logical_shape)


def expand(params, logical_shape, record):
    """Scales (or zero points) broadcast to the tensor's shape."""
    granularity = record["granularity"]
    if granularity == "per_tensor":
        return np.broadcast_to(params.reshape(()), logical_shape)
    axis = record["axis"] % len(logical_shape)
    if granularity == "per_channel":
        shape = [1] * len(logical_shape)
        shape[axis] = logical_shape[axis]
        return np.broadcast_to(params.reshape(shape), logical_shape)
    return np.repeat(params, record["group_size"], axis=axis)  # per_group


def dequantize(tensors, name, record):
    shape = record["shape"]
    dtype = record["dtype"]
    if dtype in ("fp16", "bf16"):
        return array(tensors, name, "F16" if dtype == "fp16" else "BF16").astype(np.float32)
    scale = array(tensors, name + "_scale", "F32")
    if dtype.startswith("fp8"):
        e4m3 = dtype == "fp8_e4m3"
        values = decode_fp8(array(tensors, name, "F8_E4M3" if e4m3 else "F8_E5M2"), 4 if e4m3 else 5,
                            3 if e4m3 else 2, 7 if e4m3 else 15)
        return (values * expand(scale, shape, record)).astype(np.float32)
    signed = dtype in ("int8", "int4")
    stored = array(tensors, name, "I8" if dtype == "int8" else "U8")
    q = unpack_nibbles(stored, shape, signed) if dtype in ("int4", "uint4") else stored.astype(np.int32)
    if record.get("zero_point") == "float":  # fractional zero points (HQQ): (float32(q) - z) * s, each op in float32
        z = expand(array(tensors, name + "_zero_point", "F32"), shape, record)
        values = ((q.astype(np.float32) - z) * expand(scale, shape, record)).astype(np.float32)
    else:
        if record["scheme"] == "affine":
            zp = expand(array(tensors, name + "_zero_point", "I8" if signed else "U8").astype(np.int32), shape, record)
        else:
            qmax = {"int8": 127, "uint8": 255, "int4": 7, "uint4": 15}[dtype]
            if record.get("reduce_range"):
                qmax = qmax // 2
            qmin = 1 if (not signed and record.get("restricted_range")) else 0
            zp = np.int32(0 if signed else (qmin + qmax + 1) // 2)  # the range midpoint for unsigned types
        difference = (q - zp).astype(np.float32)
        values = (difference * expand(scale, shape, record)).astype(np.float32)
    if "input_scale" in record:  # AWQ: the stored values are of W·diag(s); W = values / s[column], in float32
        s = array(tensors, record["input_scale"], "F32")
        if len(shape) != 2 or s.shape != (shape[1],):
            fail(f"{name}: input scale of shape {s.shape} for a record of shape {shape}")
        values = values / s
    return values


def write_calibration(path, rng, inputs):
    """Calibration statistics (include/shrink/io/calibration_stats.hpp) of 256 random rows per Linear input:
    H = (2/n) XᵀX and mean |x| in F64, the row count in the metadata."""
    tensors, metadata = {}, {"shrink.calibration": "1"}
    for linear, width in inputs.items():
        x = rng.normal(0, 1, (256, width)) * rng.uniform(0.2, 4.0, width)  # channels of unequal size, as AWQ meets
        tensors[linear + ".hessian"] = (2.0 / 256) * (x.T @ x)
        tensors[linear + ".act_abs_mean"] = np.abs(x).mean(axis=0)
        metadata[linear + ".samples"] = "256"
    save_file(tensors, path, metadata=metadata)


def check_sharded(shrink, work, rng):
    """A checkpoint in two shards (written by safetensors) quantized into shards: safetensors loads every output
    shard, and the rewritten index maps each tensor to the shard that holds it, total_size their data bytes."""
    source = os.path.join(work, "sharded")
    os.makedirs(source)
    shards = {"model-00001-of-00002.safetensors": {"a.weight": rng.normal(0, 0.05, (12, 10)).astype(np.float32),
                                                   "a.bias": rng.normal(0, 1, (12,)).astype(np.float32)},
              "model-00002-of-00002.safetensors": {"b.weight": rng.normal(0, 1.0, (6, 8)).astype(np.float32)}}
    weight_map = {}
    for shard, tensors in shards.items():
        save_file(tensors, os.path.join(source, shard), metadata={"format": "np"})
        weight_map.update({name: shard for name in tensors})
    with open(os.path.join(source, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    out = os.path.join(work, "sharded-int8")
    subprocess.run([shrink, "quantize", source, out], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "model.safetensors.index.json")) as f:
        index = json.load(f)
    held, total = {}, 0
    for shard in shards:
        for name, value in load_file(os.path.join(out, shard)).items():
            held[name] = shard
            total += value.nbytes
    if index["weight_map"] != held:
        fail(f"sharded: the index maps {index['weight_map']}, the shards hold {held}")
    if index["metadata"]["total_size"] != total or "b.weight_scale" not in held:
        fail(f"sharded: total_size {index['metadata']['total_size']}, expected {total}; tensors {sorted(held)}")
    print(f"convention_check.py: sharded: {len(held)} tensors in {len(shards)} shards, index matches")


def main():
    if len(sys.argv) != 3:
        fail("usage: convention_check.py SHRINK WORK_DIR")
    shrink, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(3)
    model = os.path.join(work, "model.safetensors")
    save_file({"a.weight": rng.normal(0, 0.05, (12, 10)).astype(np.float32),
               "b.weight": rng.normal(0, 1.0, (3, 4, 6)).astype(np.float32),
               "c.weight": rng.laplace(0, 0.2, (8, 7)).astype(np.float32),
               "a.bias": rng.normal(0, 1, (12,)).astype(np.float32)}, model, metadata={"format": "np"})
    stats = os.path.join(work, "stats.safetensors")
    write_calibration(stats, rng, {"a": 10, "c": 7})
    configurations = [
        [],
        ["--scheme", "affine", "--granularity", "tensor"],
        ["--dtype", "uint8", "--scheme", "affine", "--axis", "-1"],
        ["--dtype", "uint8", "--restricted-range"],
        ["--dtype", "int8", "--reduce-range", "--calib", "entropy"],
        ["--dtype", "int4", "--granularity", "channel", "--axis", "0", "--scheme", "affine"],
        ["--dtype", "uint4", "--granularity", "channel"],
        ["--dtype", "int4", "--granularity", "group", "--group-size", "2", "--axis", "1", "--scheme", "affine",
         "--exclude", "c"],
        ["--dtype", "uint4", "--granularity", "group", "--group-size", "2", "--exclude", "c"],
        ["--dtype", "fp8-e4m3"],
        ["--dtype", "fp8-e5m2", "--granularity", "tensor"],
        ["--dtype", "fp16"],
        ["--dtype", "bf16", "--include", "weight|bias"],
        ["--method", "awq", "--calibration", stats, "--group-size", "0"],
        ["--method", "awq", "--calibration", stats, "--group-size", "2", "--scheme", "symmetric", "--bits", "3",
         "--exclude", "c"],
        ["--method", "hqq", "--group-size", "5", "--bits", "3", "--exclude", "c"],
        ["--method", "hqq", "--group-size", "0"],
        ["--method", "hqq", "--group-size", "0", "--bits", "6"],
    ]
    for flags in configurations:
        quantized = os.path.join(work, "q.safetensors")
        restored = os.path.join(work, "d.safetensors")
        subprocess.run([shrink, "quantize", model, quantized, *flags], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([shrink, "dequantize", quantized, restored, "--dtype", "f32"], check=True, stdout=subprocess.DEVNULL)
        tensors, metadata = read_raw(quantized)
        if metadata.get("shrink.format_version") != "1" or metadata.get("format") != "np":
            fail(f"{flags}: metadata {metadata}")
        expected = load_file(restored)
        records = {key[len("shrink.quant."):]: json.loads(value)
                   for key, value in metadata.items() if key.startswith("shrink.quant.")}
        if not records:
            fail(f"{flags}: no tensor quantized")
        if ("hqq" in flags) != any(r.get("zero_point") == "float" for r in records.values()):
            fail(f"{flags}: fractional zero points {[r.get('zero_point') for r in records.values()]}")
        if ("awq" in flags) != any("input_scale" in r for r in records.values()):
            fail(f"{flags}: input scales {[r.get('input_scale') for r in records.values()]}")
        for scale in (r["input_scale"] for r in records.values() if "input_scale" in r):
            if scale in expected:
                fail(f"{flags}: `shrink dequantize` copied the input scale {scale} as a tensor")
        for name, record in records.items():
            mine = dequantize(tensors, name, record)
            if mine.shape != expected[name].shape or not np.array_equal(mine.view(np.uint32), expected[name].view(np.uint32)):
                fail(f"{flags}: {name} ({record}): numpy's dequantization differs from shrink's")
        if not any(r["dtype"].startswith("fp8") for r in records.values()):  # numpy has no FP8 dtype
            with safe_open(quantized, framework="np") as f:
                if f.metadata() != metadata or set(f.keys()) != set(tensors):
                    fail(f"{flags}: safetensors reads other tensors or metadata")
        print(f"convention_check.py: {' '.join(flags) or '(defaults)'}: {len(records)} tensors match")
    check_sharded(shrink, work, rng)
    print("convention_check.py: passed")


if __name__ == "__main__":
    main()
