"""Golden data for shrink's histogram calibrators (tests/quant/test_observer_{histogram,entropy,percentile,mse}.cpp).

calibration_histogram.golden: PyTorch 1.13's HistogramObserver (torch.ao.quantization.observer), run on
one or several batches. Fields of a case:
    batch_sizes i64        elements of each batch, in order
    data_k i64, data_unit f64   the batches' values: batch b holds float32(k * data_unit[b]) (exact:
                           |k| < 2^24 and the unit is a power of two)
    scale f32 [8], zero_point i64 [8]   torch's calculate_qparams() for the schemes in SCHEMES_TORCH order
    min_val f32, max_val f32   torch's running range after the last batch
    clip f32 [2]           torch's _non_linear_param_search() result (new_min, new_max)
    histogram_sum f64, histogram_moment f64   sum(h) and sum((j + 1) * h[j]) of torch's histogram, in float64

calibration_magnitude.golden: amax of the |x|-histogram observers from the numpy reference below (written
from the algorithm descriptions in include/shrink/quant/observers/{magnitude_histogram,entropy,percentile,
mse}.hpp, independent of the C++ code). Same batch fields, plus:
    bins, start_bin, max_bins i64   the options (start_bin serves entropy and MSE)
    percentiles f64 [P], percentile_amax f32 [P]
    entropy_amax f32 [4], mse_amax f32 [4]   for the schemes in SCHEMES_MAGNITUDE order
    histogram_size i64, histogram_total i64   the final histogram's bin count and element count

Inputs cover random normal, heavy-tailed (Student-t, Laplace), all-zero, constant, tiny (~1e-30),
huge (~1e18 for torch, whose histc turns int(min) into an int64; ~1e30 for the |x| observers),
negative-only, non-negative, and batch sequences whose range grows, shrinks and restarts.
Needs only numpy and torch (Debian's python3-torch).
"""
import math
import warnings

import numpy as np
import torch
from torch.ao.quantization.observer import HistogramObserver

from golden_format import write_cases

warnings.filterwarnings("ignore", message="Please use quant_min and quant_max")

F32 = np.float32
FLT_EPSILON = float(np.finfo(np.float32).eps)

# (qscheme, dtype, reduce_range): the order of the scale/zero_point fields of calibration_histogram.golden.
SCHEMES_TORCH = [
    (qs, dt, rr)
    for qs in ("affine", "symmetric")
    for dt in ("qint8", "quint8")
    for rr in (False, True)
]

# (dtype, symmetry, reduce_range): the order of entropy_amax and mse_amax.
SCHEMES_MAGNITUDE = [
    ("int8", "symmetric", False),
    ("uint8", "affine", False),
    ("int4", "symmetric", False),
    ("int8", "affine", True),
]


def _batch(x, unit):
    """float32 values on a grid of `unit` (a power of two), stored as integers."""
    k = np.rint(np.asarray(x, dtype=np.float64) / unit).astype(np.int64)
    assert np.all(np.abs(k) < 2**24), "grid too fine for exact float32 values"
    return k, float(unit)


def _values(k, unit):
    return (k.astype(np.float64) * unit).astype(F32)


def _inputs(rng, huge_exponent):
    """(name, [(k, unit), ...]) for every input kind."""
    n = 1500
    normal = rng.standard_normal
    u = 2.0**-16
    big = 2.0**huge_exponent
    return [
        ("normal", [_batch(normal(n) * 1.5, u)]),
        ("normal_wide", [_batch(normal(n) * 40.0, 2.0**-10)]),
        ("student_t", [_batch(rng.standard_t(3, n), u)]),
        ("laplace", [_batch(rng.laplace(size=n) * 0.7, u)]),
        ("all_zero", [_batch(np.zeros(400), u)]),
        ("constant", [_batch(np.full(300, 3.25), u)]),
        ("tiny", [_batch(normal(n) * 1e-30, 2.0**-120)]),
        ("huge", [_batch(normal(n) * (big * 0.9), big / 2.0**21)]),
        ("negative_only", [_batch(-np.abs(normal(n)) * 2.0 - 0.5, u)]),
        ("non_negative", [_batch(np.maximum(normal(n), 0.0) * 3.0, u)]),
        ("narrow_offset", [_batch(rng.uniform(0.2, 0.9, n), u)]),
        ("batches_grow", [_batch(normal(600) * s, u) for s in (0.5, 2.0, 7.0)]),
        ("batches_shrink", [_batch(normal(600) * s, u) for s in (7.0, 2.0, 0.5)]),
        ("batches_mixed", [_batch(rng.laplace(size=600), u), _batch(normal(600) * 3.0 + 2.0, u),
                           _batch(rng.standard_t(2, 600) * 0.5, u)]),
        ("batches_constant_first", [_batch(np.full(200, -1.5), u), _batch(normal(800) * 2.0, u),
                                    _batch(normal(500) * 0.3, u)]),
        ("batches_zero_first", [_batch(np.zeros(300), u), _batch(rng.laplace(size=900) * 2.0, u)]),
        ("batches_negative_then_positive", [_batch(-np.abs(normal(600)) * 3.0, u),
                                            _batch(np.abs(normal(600)) * 5.0, u)]),
    ]


def _case_fields(batches):
    return {
        "batch_sizes": np.array([k.size for k, _ in batches], dtype=np.int64),
        "data_k": np.concatenate([k for k, _ in batches]),
        "data_unit": np.array([unit for _, unit in batches], dtype=np.float64),
    }


# ---------------------------------------------------------------------------------------------------
# (a) PyTorch's HistogramObserver


def _torch_case(batches):
    fields = _case_fields(batches)
    scales, zero_points = [], []
    observer = None
    for qscheme, dtype, reduce_range in SCHEMES_TORCH:
        observer = HistogramObserver(
            dtype=getattr(torch, dtype),
            qscheme=getattr(torch, f"per_tensor_{qscheme}"),
            reduce_range=reduce_range,
        )
        for k, unit in batches:
            observer(torch.from_numpy(_values(k, unit)))
        scale, zero_point = observer.calculate_qparams()
        scales.append(scale.item())
        zero_points.append(zero_point.item())
    new_min, new_max = observer._non_linear_param_search()
    histogram = observer.histogram.numpy().astype(np.float64)
    fields.update({
        "scale": np.array(scales, dtype=F32),
        "zero_point": np.array(zero_points, dtype=np.int64),
        "min_val": np.array([observer.min_val.item()], dtype=F32),
        "max_val": np.array([observer.max_val.item()], dtype=F32),
        "clip": np.array([new_min.item(), new_max.item()], dtype=F32),
        "histogram_sum": np.array([histogram.sum()]),
        "histogram_moment": np.array([(histogram * np.arange(1, histogram.size + 1)).sum()]),
    })
    return fields


# ---------------------------------------------------------------------------------------------------
# (b) numpy reference of the |x| histogram and the Entropy, Percentile and MSE searches


class MagnitudeHistogramReference:
    """|x| counts in bins of one width from 0; grows by whole bins, merges pairs past max_bins."""

    def __init__(self, bins, max_bins):
        self.bins, self.max_bins = bins, max_bins
        self.counts = None
        self.width = self.inv_width = None
        self.zeros = 0
        self.min_seen, self.max_seen = math.inf, -math.inf

    def add(self, x):
        x = np.asarray(x, dtype=F32)
        self.min_seen = min(self.min_seen, float(x.min()))
        self.max_seen = max(self.max_seen, float(x.max()))
        a = np.abs(x).astype(np.float64)
        top = float(a.max())
        if self.counts is None:
            if top == 0.0:
                self.zeros += a.size
                return
            self.width = top / self.bins
            self.inv_width = self.bins / top
            self.counts = np.zeros(self.bins, dtype=np.int64)
            self.counts[0] = self.zeros
        else:
            reach = top * self.inv_width
            if math.ceil(reach) > self.counts.size:
                halvings = 0
                while math.ceil(reach / 2.0**halvings) > self.max_bins:
                    halvings += 1
                if halvings:
                    group = 2**halvings
                    merged = np.zeros((self.counts.size - 1) // group + 1, dtype=np.int64)
                    np.add.at(merged, np.arange(self.counts.size) // group, self.counts)
                    self.counts = merged
                    self.width *= group
                    self.inv_width /= group
                grown = np.zeros(math.ceil(reach / 2.0**halvings), dtype=np.int64)
                grown[: self.counts.size] = self.counts
                self.counts = grown
        n = self.counts.size
        if 2.0**-120 <= self.inv_width <= 2.0**120:
            product = np.abs(x) * F32(self.inv_width)  # float32, as the C++ binning does in this range
        else:
            product = a * self.inv_width
        index = np.minimum(np.floor(product), n - 1).astype(np.int64)
        self.counts += np.bincount(index, minlength=n)

    def edge(self, k):
        return k * self.width


def _interleaved_sum(terms):
    """Four partial sums (term j to sum j mod 4), each left to right, added in order: as the C++ does."""
    lanes = [float(np.cumsum(terms[lane::4])[-1]) if terms[lane::4].size else 0.0 for lane in range(4)]
    return ((lanes[0] + lanes[1]) + lanes[2]) + lanes[3]


def entropy_reference(counts, start_bin, levels):
    """Number of bins kept (the amax is its edge) by the KL search; see entropy.hpp."""
    h = counts.astype(np.int64).copy()
    n = h.size
    if n >= 2:
        h[0] = h[1]
    total = int(h.sum())
    divergences = {}
    for i in range(max(1, min(start_bin, n)), n + 1):
        kept = int(h[:i].sum())
        outliers = total - kept
        if kept == 0 or (h[i - 1] == 0 and outliers > 0):
            divergences[i] = math.inf
            continue
        p = h[:i].astype(np.float64)
        p[i - 1] += outliers
        level = (np.arange(i) * levels) // i
        mass = np.zeros(levels, dtype=np.int64)
        np.add.at(mass, level, h[:i])
        nonzero = np.zeros(levels, dtype=np.int64)
        np.add.at(nonzero, level[h[:i] > 0], 1)
        q = np.divide(mass.astype(np.float64), nonzero.astype(np.float64),
                      out=np.ones(levels), where=nonzero > 0)
        log_q = np.log(q)[level]
        log_p = np.log(p, out=np.zeros(i), where=p > 0)
        terms = p * (log_p - log_q)
        divergences[i] = _interleaved_sum(terms) / float(total) + math.log(float(kept) / float(total))
    best = min(divergences.values())
    if not math.isfinite(best):
        return n
    tie = best + 1e-12 * abs(best)
    return max(i for i, d in divergences.items() if d <= tie)


def percentile_reference(counts, percentile):
    total = int(counts.sum())
    if total == 0:
        return 0
    target = percentile / 100.0 * float(total)
    cumulative = np.cumsum(counts).astype(np.float64)
    return int(np.argmax(cumulative >= target))


def _quant_range(dtype, reduce_range):
    bits = (8 if dtype in ("int8", "uint8") else 4) - (1 if reduce_range else 0)
    if dtype.startswith("u"):
        return 0, 2**bits - 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def _scale_zero_point(lo, hi, dtype, symmetry, reduce_range):
    """shrink's scale_zero_point_from_range (PyTorch's _calculate_qparams) in float32."""
    qmin, qmax = _quant_range(dtype, reduce_range)
    min_neg, max_pos = F32(min(lo, 0.0)), F32(max(hi, 0.0))
    if symmetry == "symmetric":
        amax = max(-min_neg, max_pos)
        scale = max(F32(amax / F32(F32(qmax - qmin) / F32(2.0))), F32(FLT_EPSILON))
        zero_point = 0 if not dtype.startswith("u") else (qmin + qmax + 1) // 2
    else:
        scale = max(F32(F32(max_pos - min_neg) / F32(qmax - qmin)), F32(FLT_EPSILON))
        zero_point = int(min(max(F32(qmin) - np.rint(F32(min_neg / scale)), qmin), qmax))
    return float(scale), zero_point, qmin, qmax


def _clip(amax, min_seen, max_seen):
    return F32(max(min(min_seen, 0.0), -amax)), F32(min(max(max_seen, 0.0), amax))


def mse_reference(hist, scheme, start_bin):
    """Bin whose centre is the first MSE-optimal amax; see mse.hpp."""
    dtype, symmetry, reduce_range = scheme
    counts = hist.counts.astype(np.float64)
    n = counts.size
    centres = (np.arange(n, dtype=np.float64) + 0.5) * hist.width
    best, best_bin = math.inf, n - 1
    for i in range(min(start_bin, n - 1), n):
        amax = float(F32((i + 0.5) * hist.width))
        lo, hi = _clip(amax, hist.min_seen, hist.max_seen)
        scale, zero_point, qmin, qmax = _scale_zero_point(float(lo), float(hi), dtype, symmetry, reduce_range)
        v = np.minimum(np.maximum(centres * (1.0 / scale), float(qmin - zero_point)), float(qmax - zero_point))
        error = np.rint(v) * scale - centres
        total = _interleaved_sum(error * error * counts)
        if total < best:
            best, best_bin = total, i
    return best_bin


def entropy_levels(scheme, min_seen):
    dtype, symmetry, reduce_range = scheme
    bits = (8 if dtype in ("int8", "uint8") else 4) - (1 if reduce_range else 0)
    return 2**bits if (min_seen >= 0.0 and symmetry == "affine") else 2 ** (bits - 1)


def magnitude_case(batches, bins=2048, start_bin=128, max_bins=16384, percentiles=(90.0, 99.0, 99.9, 99.99, 100.0)):
    fields = _case_fields(batches)
    hist = MagnitudeHistogramReference(bins, max_bins)
    for k, unit in batches:
        hist.add(_values(k, unit))
    entropy, mse, percentile = [], [], []
    for scheme in SCHEMES_MAGNITUDE:
        if hist.counts is None:
            entropy.append(0.0)
            mse.append(0.0)
            continue
        levels = entropy_levels(scheme, hist.min_seen)
        entropy.append(hist.edge(entropy_reference(hist.counts, start_bin, levels)))
        mse.append((mse_reference(hist, scheme, start_bin) + 0.5) * hist.width)
    for p in percentiles:
        percentile.append(0.0 if hist.counts is None else hist.edge(percentile_reference(hist.counts, p) + 1))
    fields.update({
        "bins": np.array([bins], dtype=np.int64),
        "start_bin": np.array([start_bin], dtype=np.int64),
        "max_bins": np.array([max_bins], dtype=np.int64),
        "percentiles": np.array(percentiles, dtype=np.float64),
        "percentile_amax": np.array(percentile, dtype=F32),
        "entropy_amax": np.array(entropy, dtype=F32),
        "mse_amax": np.array(mse, dtype=F32),
        "histogram_size": np.array([0 if hist.counts is None else hist.counts.size], dtype=np.int64),
        "histogram_total": np.array([hist.zeros if hist.counts is None else int(hist.counts.sum())], dtype=np.int64),
    })
    return fields


def torch_cases(seed=2024):
    rng = np.random.default_rng(seed)
    return [(name, _torch_case(batches)) for name, batches in _inputs(rng, huge_exponent=60)]


def magnitude_cases(seed=7):
    rng = np.random.default_rng(seed)
    cases = [(name, magnitude_case(batches)) for name, batches in _inputs(rng, huge_exponent=100)]
    u = 2.0**-16
    # Small histograms: the growth past max_bins merges bins in pairs; start_bin near the edges.
    grow = [_batch(rng.standard_normal(500) * s, u) for s in (0.25, 1.0, 6.0)]
    cases.append(("small_bins_merging", magnitude_case(grow, bins=64, start_bin=8, max_bins=128)))
    cases.append(("small_bins_start_1", magnitude_case([_batch(rng.laplace(size=800), u)], bins=32, start_bin=1, max_bins=64)))
    dense = [_batch(rng.standard_t(4, 6000), u)]
    cases.append(("dense_student_t", magnitude_case(dense)))
    # Below ~1e-33 the binning product runs in double.
    cases.append(("very_tiny", magnitude_case([_batch(rng.standard_normal(1000) * 1e-36, 2.0**-140)])))
    return cases


def generate(out_dir):
    write_cases(f"{out_dir}/calibration_histogram.golden", torch_cases(),
                header="PyTorch 1.13 HistogramObserver, written by gen_calibration.py (format: golden_format.py)")
    write_cases(f"{out_dir}/calibration_magnitude.golden", magnitude_cases(),
                header="Entropy/Percentile/MSE amax from gen_calibration.py's numpy reference")


if __name__ == "__main__":
    import pathlib
    generate(pathlib.Path(__file__).resolve().parent)
