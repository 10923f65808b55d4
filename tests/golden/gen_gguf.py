"""Golden GGUF files for shrink/io/gguf.hpp, written by the reference implementation: the PyPI package gguf
(gguf-py, 0.19.0; scripts/python-env.sh's environment has it). Run: $(scripts/python-env.sh) tests/golden/gen_gguf.py

Files written (a few KB each):
  gguf_small.gguf           metadata of every GGUF value type, and tensors of odd shapes in F32, F16, BF16, Q8_0,
                            Q4_0 and Q4_1, quantized by gguf.quants.quantize from seeded random values
  gguf_small_expected.gguf  each of those tensors as F32 under the same name and shape: gguf.quants.dequantize of
                            its stored bytes (the test requires shrink's dequantization to give the same bits)
  gguf_small_source.gguf    the float values each quantized tensor (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) was made from, as
                            F32 under the same name (the test requires shrink's quantizers to give the stored bytes)
  gguf_kquants.gguf         Q4_K, Q5_K and Q6_K tensors of seeded random blocks (gguf-py has no K-quant quantizer;
                            every byte pattern is a valid block once its fp16 scales are finite), plus all-zero blocks
  gguf_kquants_expected.gguf  gguf.quants.dequantize of each, as F32
"""
import pathlib

import gguf
import numpy as np

SEED = 20250618
HERE = pathlib.Path(__file__).resolve().parent
Q = gguf.GGMLQuantizationType


def values(rng, shape):
    """Normal values with a spread of magnitudes per row, so blocks get different scales (and Q4_1 offsets)."""
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows *= np.geomspace(0.01, 8.0, rows.shape[0], dtype=np.float32)[:, None]
    rows[::2] += np.float32(0.75)  # shifted rows: Q4_1's m away from -max
    return x


def tensors(rng):
    """name -> (float values, ggml type). Shapes are numpy's (outermost first); GGUF stores them reversed."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, 65504.0, 6.0e-8, -1.0e-5, 1.0e30, 3.0e38], dtype=np.float32)
    f16 = values(rng, (5, 3))
    f16.reshape(-1)[:6] = special[:6]  # signed zeros, infinities, the largest half, a subnormal
    f32 = values(rng, (3, 5, 7))
    f32.reshape(-1)[:9] = special
    bf16 = values(rng, (7,))
    bf16[:3] = [-0.0, np.inf, 1.0e-39]  # a bfloat16 subnormal
    q4_0 = values(rng, (5, 96))
    q4_0[1] = 0.0  # an all-zero row: scale 0
    q8_0 = values(rng, (3, 64))
    # Halves of the grid (d = 1): round half away from zero, as C's roundf; ties of magnitude: the first one wins.
    q8_0[2, :32] = np.array([127.0, 0.5, 1.5, -2.5, -0.5, 126.5, -127.0] + [j - 12.5 for j in range(25)], np.float32)
    return {
        "f32.weight": (f32, Q.F32),
        "f32_4d": (values(rng, (2, 1, 3, 2)), Q.F32),
        "f16.weight": (f16, Q.F16),
        "bf16.bias": (bf16, Q.BF16),
        "q8_0.weight": (q8_0, Q.Q8_0),
        "q4_0.weight": (q4_0, Q.Q4_0),
        "q4_1.weight": (values(rng, (7, 32)), Q.Q4_1),
        "q4_1_3d": (values(rng, (3, 2, 64)), Q.Q4_1),
        "q5_0.weight": (zero_row(values(rng, (4, 64))), Q.Q5_0),
        "q5_1.weight": (zero_row(values(rng, (5, 32))), Q.Q5_1),
    }


def zero_row(x):
    """x with its second row all zero: scale 0 (and for Q5_1 a minimum of 0)."""
    x[1] = 0.0
    return x


# ggml's K-quant super-blocks: bytes per 256 values and the byte offsets of their fp16 scales (d, and dmin where there
# is one).
KQUANTS = {Q.Q4_K: (144, (0, 2)), Q.Q5_K: (176, (0, 2)), Q.Q6_K: (210, (208,))}


def kquant_blocks(rng, qtype, rows, blocks_per_row):
    """Random super-blocks with finite fp16 scales of a spread of magnitudes; the second row's blocks all zero."""
    size, scale_offsets = KQUANTS[qtype]
    raw = rng.integers(0, 256, size=(rows, blocks_per_row, size), dtype=np.uint8)
    for offset in scale_offsets:
        scales = (rng.standard_normal((rows, blocks_per_row)) * np.geomspace(1e-4, 4.0, rows)[:, None])
        raw[:, :, offset:offset + 2] = scales.astype(np.float16).view(np.uint8).reshape(rows, blocks_per_row, 2)
    raw[1] = 0
    return raw.reshape(rows, blocks_per_row * size)


def write_kquants(rng):
    small = gguf.GGUFWriter(str(HERE / "gguf_kquants.gguf"), arch="shrinktest")
    expected = gguf.GGUFWriter(str(HERE / "gguf_kquants_expected.gguf"), arch="shrinktest")
    for name, qtype, rows, per_row in (("q4_k.weight", Q.Q4_K, 3, 2), ("q5_k.weight", Q.Q5_K, 3, 1),
                                       ("q6_k.weight", Q.Q6_K, 4, 2)):
        raw = kquant_blocks(rng, qtype, rows, per_row)
        small.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        dequantized = gguf.quants.dequantize(raw, qtype).astype(np.float32)
        assert dequantized.shape == (rows, per_row * 256), (name, dequantized.shape)
        expected.add_tensor(name, np.ascontiguousarray(dequantized))
    for writer in (small, expected):
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def main():
    rng = np.random.default_rng(SEED)
    small = gguf.GGUFWriter(str(HERE / "gguf_small.gguf"), arch="shrinktest")
    small.add_uint8("test.uint8", 200)
    small.add_int8("test.int8", -100)
    small.add_uint16("test.uint16", 60000)
    small.add_int16("test.int16", -30000)
    small.add_uint32("test.uint32", 4000000000)
    small.add_int32("test.int32", -2000000000)
    small.add_uint64("test.uint64", 18000000000000000000)
    small.add_int64("test.int64", -9000000000000000000)
    small.add_float32("test.float32", 0.1)
    small.add_float64("test.float64", -2.5e-300)
    small.add_bool("test.bool_true", True)
    small.add_bool("test.bool_false", False)
    small.add_string("test.string", "héllo, GGUF")
    small.add_array("test.strings", ["a", "", "ünï", "<|im_end|>"])
    small.add_array("test.ints", [3, -1, 0, 2000000000])
    small.add_array("test.floats", [0.5, -1.25, 3.0])
    small.add_array("test.bools", [True, False, True])
    small.add_array("test.nested", [[1, 2], [3]])
    # gguf-py skips empty strings and arrays (add_string, add_array): tests/io/test_gguf.cpp covers those.
    expected = gguf.GGUFWriter(str(HERE / "gguf_small_expected.gguf"), arch="shrinktest")
    source = gguf.GGUFWriter(str(HERE / "gguf_small_source.gguf"), arch="shrinktest")
    for name, (x, qtype) in tensors(rng).items():
        if qtype not in (Q.F32, Q.F16, Q.BF16):
            source.add_tensor(name, np.ascontiguousarray(x))
        stored = gguf.quants.quantize(x, qtype)
        if qtype in (Q.F32, Q.F16):
            small.add_tensor(name, stored)
        else:
            small.add_tensor(name, stored, raw_shape=stored.shape, raw_dtype=qtype)
        dequantized = gguf.quants.dequantize(stored, qtype).astype(np.float32)
        assert dequantized.shape == x.shape, (name, dequantized.shape, x.shape)
        expected.add_tensor(name, np.ascontiguousarray(dequantized))
    for writer in (small, expected, source):
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    write_kquants(np.random.default_rng(SEED + 1))
    print(f"gen_gguf: wrote gguf_small.gguf, gguf_small_expected.gguf, gguf_small_source.gguf, gguf_kquants.gguf and "
          f"gguf_kquants_expected.gguf in {HERE}")


if __name__ == "__main__":
    main()
