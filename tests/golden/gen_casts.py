"""Goldens for the float casts (core/half.hpp, core/fp8.hpp, quant/cast.hpp), from independent references.

- float32 -> float16 / bfloat16 and back: PyTorch (Debian's python3-torch 1.13), `Tensor.half()`,
  `Tensor.bfloat16()`, `.float()`.
- FP8 E4M3 ("FN") and E5M2: torch 1.13 has no FP8, so the PyPI package ml_dtypes (float8_e4m3fn, float8_e5m2),
  whose float32 casts round to nearest even and do not saturate (OCP rules). Install it for Debian's python
  without replacing Debian's numpy 1.24 (ml_dtypes 0.6 pulls numpy 2, which breaks torch 1.13):
      /usr/bin/python3 -m pip install --break-system-packages "ml_dtypes<0.6"

Inputs and outputs are stored as integer bit patterns (float32 bits, 16-bit and 8-bit codes), so NaN signs and
payloads survive the text format. Files written:
  casts_float16.golden  cases half_* and bfloat16_*: input_bits, code (16-bit), back_bits (float32 of the code)
  casts_fp8.golden      cases <format>_decode (all 256 codes), <format>_encode (input_bits, code), and
                        scaled_* (quantize_fp8 per tensor / per channel: x, scale, code, dequantized)
"""
import pathlib

import ml_dtypes
import numpy as np
import torch

from golden_format import write_cases

SEED = 20240602


def _bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.int64)


def _from_bits(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def _neighbours(values):
    """values and the float32 just below and above each (|v| +- 1 ulp), both signs."""
    v = np.asarray(values, dtype=np.float32)
    v = v[np.isfinite(v)]
    out = [v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))]
    both = np.concatenate(out)
    return np.concatenate([both, -both]).astype(np.float32)


def _specials():
    inf = np.float32(np.inf)
    nan_bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA00000, 0x7FC01234], dtype=np.uint32)
    finite = np.array([0.0, -0.0, 1.0, -1.0, np.finfo(np.float32).max, -np.finfo(np.float32).max,
                       np.finfo(np.float32).tiny, np.finfo(np.float32).smallest_subnormal, 1e-30, 1e30],
                      dtype=np.float32)
    return np.concatenate([finite, np.array([inf, -inf], dtype=np.float32), nan_bits.view(np.float32)])


def _random_floats(rng, count, low_exp, high_exp):
    """Random signs, mantissas and exponents (base 2) in [low_exp, high_exp): every binade equally likely."""
    mantissa = rng.integers(0, 1 << 23, size=count, dtype=np.uint32)
    exponent = rng.integers(low_exp + 127, high_exp + 127, size=count).astype(np.uint32)
    sign = rng.integers(0, 2, size=count, dtype=np.uint32)
    return ((sign << 31) | (exponent << 23) | mantissa).view(np.float32)


def _midpoints(grid, pairs=None):
    """Exact float32 midpoints between grid[i] and grid[i + 1] (all i, or those in `pairs`) of a sorted finite
    grid, with their +-1 ulp neighbours and both signs."""
    grid = np.asarray(grid, dtype=np.float64)
    low = np.arange(len(grid) - 1) if pairs is None else np.asarray(pairs)
    exact = (grid[low] + grid[low + 1]) / 2
    mid = exact.astype(np.float32)
    assert np.all(mid.astype(np.float64) == exact), "midpoints must be exact in float32"
    return _neighbours(mid)


def _float16_cases(rng):
    cases = []
    for name, dtype in (("half", torch.float16), ("bfloat16", torch.bfloat16)):
        # Every positive finite value of the format, in order (codes 0 .. max finite).
        max_code = 0x7BFF if dtype == torch.float16 else 0x7F7F
        codes = np.arange(0, max_code + 1, dtype=np.int32).astype(np.int16)
        values = torch.from_numpy(codes).view(dtype).float().numpy()
        pairs = np.concatenate([np.arange(4), rng.choice(len(values) - 1, size=400, replace=False), [len(values) - 2]])
        if dtype == torch.float16:
            random = _random_floats(rng, 1500, -28, 17)
            edges = [65504.0, 65520.0, 65536.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25]
        else:
            subnormals = rng.integers(1, 1 << 23, size=200, dtype=np.uint32).view(np.float32)
            random = np.concatenate([_random_floats(rng, 1500, -126, 128), subnormals, -subnormals])
            edges = [float(values[-1]), float(values[-1]) * (1 + 2.0 ** -9), 2.0 ** -126, 2.0 ** -133, 2.0 ** -134]
        sets = {
            "random": random,
            "midpoints": _midpoints(values, pairs),
            "edges": np.concatenate([_neighbours(np.array(edges, dtype=np.float32)), _specials()]),
        }
        for set_name, inputs in sets.items():
            inputs = np.asarray(inputs, dtype=np.float32)
            converted = torch.from_numpy(inputs.copy()).to(dtype)
            cases.append((f"{name}_{set_name}", {
                "input_bits": _bits(inputs),
                "code": converted.view(torch.int16).numpy().view(np.uint16).astype(np.int64),
                "back_bits": _bits(converted.float().numpy()),
            }))
    return cases


FP8_FORMATS = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def _fp8_cases(rng):
    cases = []
    for name, dtype in FP8_FORMATS.items():
        codes = np.arange(256, dtype=np.uint8)
        decoded = codes.view(dtype).astype(np.float32)
        cases.append((f"{name}_decode", {"code": codes.astype(np.int64), "value_bits": _bits(decoded)}))

        finite = np.sort(decoded[np.isfinite(decoded) & (decoded >= 0)])
        max_finite = float(finite[-1])
        ulp_at_max = float(finite[-1] - finite[-2])
        min_subnormal = float(finite[1])
        edges = [max_finite, max_finite + ulp_at_max / 2, max_finite + ulp_at_max, max_finite * 2, 1e6,
                 min_subnormal / 2, min_subnormal, 3 * min_subnormal / 2, float(finite[1 << (3 if name == "e4m3" else 2)]),
                 2.0 ** -30]
        inputs = np.concatenate([
            _random_floats(rng, 2000, -20, 10 if name == "e4m3" else 17),
            _midpoints(finite),
            _neighbours(np.array(edges, dtype=np.float32)),
            _specials(),
        ]).astype(np.float32)
        with np.errstate(invalid="ignore"):  # NaN and out-of-range inputs are the point here
            code = inputs.astype(dtype).view(np.uint8).astype(np.int64)
        cases.append((f"{name}_encode", {"input_bits": _bits(inputs), "code": code}))
    return cases


def _scaled_cases(rng):
    """quantize_fp8 with derived scales: scale = amax / max_finite (float32), code = fp8(x / scale)."""
    cases = []
    x = (rng.standard_normal((3, 4, 5)) * np.exp(rng.uniform(-3, 3, size=(3, 4, 5)))).astype(np.float32)
    x[:, 2, :] = 0.0  # an all-zero channel along axis 1 gets scale 1
    for name, dtype in FP8_FORMATS.items():
        max_finite = np.float32(float(ml_dtypes.finfo(dtype).max))
        for label, axis in (("tensor", None), ("axis0", 0), ("axis1", 1), ("axis2", 2)):
            if axis is None:
                amax = np.abs(x).max(keepdims=True)
            else:
                other = tuple(d for d in range(3) if d != axis)
                amax = np.abs(x).max(axis=other, keepdims=True)
            scale = np.where(amax == 0, np.float32(1), amax / max_finite).astype(np.float32)
            scaled = (x / scale).astype(np.float32)
            # Rounding of the scale may put |x / scale| an ulp past max_finite; it still rounds to max_finite.
            assert np.all(np.abs(scaled) <= max_finite * np.float32(1.001)), "x / scale must fit"
            code = scaled.astype(dtype)
            dequantized = (code.astype(np.float32) * scale).astype(np.float32)
            cases.append((f"scaled_{name}_{label}", {
                "format": name,
                "axis": np.array([-1 if axis is None else axis], dtype=np.int64),
                "shape": np.array(x.shape, dtype=np.int64),
                "x": x,
                "scale": scale.reshape(-1),
                "code": code.view(np.uint8).astype(np.int64),
                "dequantized": dequantized,
            }))
    return cases


def generate(out_dir):
    out_dir = pathlib.Path(out_dir)
    rng = np.random.default_rng(SEED)
    write_cases(out_dir / "casts_float16.golden", _float16_cases(rng),
                header=f"float32 -> float16 / bfloat16 -> float32 with torch {torch.__version__}; "
                       "written by tests/golden/gen_casts.py")
    write_cases(out_dir / "casts_fp8.golden", _fp8_cases(rng) + _scaled_cases(rng),
                header=f"FP8 E4M3 / E5M2 with ml_dtypes {ml_dtypes.__version__}; written by tests/golden/gen_casts.py")


if __name__ == "__main__":
    generate(pathlib.Path(__file__).resolve().parent)
