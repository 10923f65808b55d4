#!/usr/bin/env python3
"""Loads `shrink quantize --format compressed-tensors` output with the compressed-tensors package's own decompression
(tests/cli/CMakeLists.txt runs it as the CTest test cli/compressed_tensors_interop).

usage: compressed_tensors_check.py SHRINK WORK_DIR
Writes a small Llama-shaped model and config.json, exports it with shrink under several schemes, builds the
package's ModelCompressor from the config.json shrink wrote, decompresses every quantized Linear weight with the
package's compressor for the config's format, and requires the weights `shrink dequantize --dtype f32` gives for
the same scheme, bit for bit. Also checks the ignore list and that every other tensor is copied.

Torch comes from Debian (python3-torch 1.13), which has neither a float8 dtype nor torch.compile; compressed-tensors
names both when it is imported (to size FP8 quantization and to compile FP4 rounding, neither of which runs here), so
stand-ins are set before the import, and FP8 codes are decoded to float32 here before the package's FP8 decompression
multiplies them by the scales. The integer unpacking, zero-point unpacking and dequantization are the package's. Exits 77 (CTest: skipped) when the packages are missing, 1 under SHRINK_PYTHON_STRICT=1."""
import json
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch

    if not hasattr(torch, "float8_e4m3fn"):  # the stand-ins: see above
        torch.float8_e4m3fn = torch.float16
    if not hasattr(torch, "compile"):
        torch.compile = lambda function=None, **options: function if function is not None else (lambda f: f)
    import compressed_tensors
    from compressed_tensors.compressors import ModelCompressor
    from safetensors.numpy import load_file, save_file
except ImportError as error:
    print(f"compressed_tensors_check.py: skipped: {error} (scripts/python-env.sh torch)")
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)


def fail(message):
    print(f"compressed_tensors_check.py: FAILED: {message}")
    sys.exit(1)


def read_raw(path):
    """Every tensor of a safetensors file as (dtype name, shape, bytes), parsed by hand (numpy has no FP8)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    header.pop("__metadata__", None)
    body = data[8 + length:]
    return {name: (t["dtype"], t["shape"], body[t["data_offsets"][0]:t["data_offsets"][1]]) for name, t in header.items()}


def decode_e4m3(codes):
    """FP8 E4M3 (OCP, as ml_dtypes' float8_e4m3fn) codes as float32."""
    codes = codes.astype(np.int32)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> 3) & 0xF
    mantissa = codes & 0x7
    normal = (1.0 + mantissa / 8.0) * np.exp2(exponent.astype(np.float64) - 7)
    subnormal = (mantissa / 8.0) * 2.0 ** -6
    value = sign * np.where(exponent == 0, subnormal, normal)
    return np.where((codes & 0x7F) == 0x7F, np.nan, value).astype(np.float32)


TORCH = {"F32": (np.float32, torch.float32), "I32": (np.int32, torch.int32), "I64": (np.int64, torch.int64)}


def torch_state_dict(path):
    out = {}
    for name, (dtype, shape, raw) in read_raw(path).items():
        if dtype == "F8_E4M3":
            out[name] = torch.from_numpy(decode_e4m3(np.frombuffer(raw, np.uint8)).reshape(shape))
        elif dtype in TORCH:
            out[name] = torch.from_numpy(np.frombuffer(raw, TORCH[dtype][0]).reshape(shape).copy())
    return out


def write_model(work):
    rng = np.random.default_rng(7)
    tensors = {
        "model.embed_tokens.weight": rng.normal(0, 0.02, (128, 96)).astype(np.float32),
        "model.layers.0.self_attn.q_proj.weight": rng.normal(0, 0.05, (96, 96)).astype(np.float32),
        "model.layers.0.self_attn.o_proj.weight": rng.normal(0, 0.05, (30, 96)).astype(np.float32),  # 30 rows: padding
        "model.layers.0.mlp.up_proj.weight": rng.normal(0, 0.05, (64, 96)).astype(np.float16),
        "model.layers.0.mlp.down_proj.weight": rng.normal(0, 0.05, (96, 40)).astype(np.float32),  # 40: no group of 32
        "model.layers.0.input_layernorm.weight": np.ones(96, np.float32),
        "lm_head.weight": rng.normal(0, 0.02, (128, 96)).astype(np.float32),
    }
    model_dir = os.path.join(work, "model")
    os.makedirs(model_dir)
    save_file(tensors, os.path.join(model_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "hidden_size": 96, "torch_dtype": "float32"}, f)
    return os.path.join(model_dir, "model.safetensors"), tensors


def decompress_packed_zero_points(state, module, args):
    """PackedQuantizationCompressor.decompress_weight of compressed-tensors 0.13, with 0.12.2's own functions: 0.12.2
    refuses packed zero points on decompression (it writes them), 0.13 unpacks them along dim 0 as here, and needs a
    transformers that torch 1.13 cannot import."""
    from compressed_tensors.compressors.quantized_compressors.pack_quantized import unpack_from_int32
    from compressed_tensors.quantization.lifecycle.forward import dequantize

    shape = torch.Size(state[module + ".weight_shape"])
    scale = state[module + ".weight_scale"]
    values = unpack_from_int32(state[module + ".weight_packed"], args.num_bits, shape)
    zero_point = unpack_from_int32(state[module + ".weight_zero_point"], args.num_bits, (shape[0], scale.shape[-1]),
                                   packed_dim=0)
    return dequantize(x_q=values, scale=scale, zero_point=zero_point)


def compressor_for(compressor, fmt):
    qc = compressor.quantization_compressor
    return qc[fmt] if isinstance(qc, dict) else qc


def main():
    if len(sys.argv) != 3:
        fail("usage: compressed_tensors_check.py SHRINK WORK_DIR")
    shrink, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model, tensors = write_model(work)
    group = ["--granularity", "group", "--group-size", "32"]
    configurations = [
        (["--dtype", "int4", "--scheme", "affine", *group], "pack-quantized", {"num_bits": 4, "symmetric": False, "strategy": "group", "group_size": 32}),
        (["--dtype", "int4", *group], "pack-quantized", {"num_bits": 4, "symmetric": True, "strategy": "group"}),
        (["--dtype", "uint4", "--scheme", "affine", *group], "pack-quantized", {"num_bits": 4, "symmetric": False}),
        (["--dtype", "int8"], "pack-quantized", {"num_bits": 8, "symmetric": True, "strategy": "channel"}),
        (["--dtype", "int8", "--scheme", "affine"], "pack-quantized", {"num_bits": 8, "symmetric": False, "strategy": "channel"}),
        (["--dtype", "int4", "--granularity", "channel", "--scheme", "affine"], "pack-quantized", {"num_bits": 4, "strategy": "channel"}),
        (["--dtype", "fp8-e4m3"], "naive-quantized", {"num_bits": 8, "type": "float", "strategy": "channel"}),
        (["--dtype", "fp8-e4m3", "--granularity", "tensor"], "naive-quantized", {"type": "float", "strategy": "tensor"}),
    ]
    for flags, fmt, expected_args in configurations:
        label = " ".join(flags)
        out_dir = os.path.join(work, "ct")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        exported = os.path.join(out_dir, "model.safetensors")
        quantized = os.path.join(work, "q.safetensors")
        restored = os.path.join(work, "d.safetensors")
        run = lambda *args: subprocess.run([shrink, *args], check=True, stdout=subprocess.DEVNULL)
        run("quantize", model, exported, "--format", "compressed-tensors", *flags)
        run("quantize", model, quantized, *flags)
        run("dequantize", quantized, restored, "--dtype", "f32")
        expected = load_file(restored)

        with open(os.path.join(out_dir, "config.json")) as f:
            config = json.load(f)
        if config.get("model_type") != "llama":
            fail(f"{label}: config.json lost the input's keys: {config}")
        qconfig = config["quantization_config"]
        if qconfig["quant_method"] != "compressed-tensors" or qconfig["format"] != fmt:
            fail(f"{label}: quantization_config {qconfig}")
        compressor = ModelCompressor.from_compression_config(qconfig)  # the package validates the config
        scheme = compressor.quantization_config.config_groups["group_0"]
        weights = scheme.weights.model_dump()
        for key, value in expected_args.items():
            if weights[key] != value:
                fail(f"{label}: weights.{key} = {weights[key]}: expected {value}")

        state = torch_state_dict(exported)
        modules = sorted(name[: -len(".weight_scale")] for name in state if name.endswith(".weight_scale"))
        if fmt == "pack-quantized" and not scheme.weights.symmetric:
            decompressed = {m: {"weight": decompress_packed_zero_points(state, m, scheme.weights)} for m in modules}
        else:
            decompressed = dict(compressor_for(compressor, fmt).decompress_from_state_dict(
                state, {module: scheme for module in modules}))
        if sorted(decompressed) != modules:
            fail(f"{label}: decompressed {sorted(decompressed)}: expected {modules}")
        for module in modules:
            mine = decompressed[module]["weight"].to(torch.float32).numpy()
            theirs = expected[module + ".weight"]
            if mine.shape != theirs.shape or not np.array_equal(mine.view(np.uint32), theirs.view(np.uint32)):
                worst = np.max(np.abs(mine - theirs)) if mine.shape == theirs.shape else "shape"
                fail(f"{label}: {module}: compressed-tensors' decompression differs from shrink's ({worst})")

        # lm_head and the layers that could not take the scheme are Linear layers left alone; the embedding is no Linear.
        ignored = set(qconfig["ignore"])
        linear = {n[: -len(".weight")] for n, t in tensors.items() if t.ndim == 2 and "embed" not in n}
        if ignored != linear - set(modules) or "lm_head" not in ignored:
            fail(f"{label}: ignore = {sorted(ignored)}: expected {sorted(linear - set(modules))}")
        raw = read_raw(exported)
        for name, value in tensors.items():
            if name[: -len(".weight")] not in modules and raw[name][2] != value.tobytes():
                fail(f"{label}: {name} was not copied unchanged")
        print(f"compressed_tensors_check.py: {label}: {len(modules)} weights match, ignore {sorted(ignored)}")
    print(f"compressed_tensors_check.py: passed (compressed-tensors {compressed_tensors.__version__}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
