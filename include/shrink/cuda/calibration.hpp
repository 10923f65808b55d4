// Host API of the CUDA calibration statistics (compiled in cuda/calibration.cu; plain C++, no CUDA headers):
// per-tensor and per-channel min/max, the moving-average update, and histogram counts under the CPU's bin rules.
//
// Results equal the CPU's bit for bit (device code: shrink/cuda/kernels/calibration.cuh):
//   - minmax_*: the finite min and max of each entry, as cpu::finite_range / quant::MinMaxObserver; an entry with no
//     finite element gets min = +inf, max = -inf (min > max: "nothing seen"), as cpu::FiniteRange. With
//     Accumulate::yes the batch is folded into the values already in `min` / `max` (min = fmin(min, batch min)),
//     which is MinMaxObserver's update: start from +inf / -inf, or from a first call with Accumulate::no.
//     (Signed zeros: the GPU orders -0 below +0; the CPU's SIMD min/max may return either. Values otherwise equal.)
//   - moving_average_update: MovingAverageMinMaxObserver's update in float32 from the batch ranges minmax_* made.
//   - histogram_*: counts under cpu::HistcBinning (torch.histc over [lo, hi]) or cpu::MagnitudeBinning (|x|), the
//     same bin_index for every element, added to (Accumulate::yes) or written over (no) a caller's int64 array.
//
// Non-finite input: with NonFinite::reject (ObserverOptions::ignore_nonfinite false, the default) a NaN or +-inf
// or-s kNonFinite into the status word (the CPU observer throws); minmax_* skip such elements either way, histograms
// skip what their bin rule skips. With NonFinite::ignore the flag is not raised.
//
// Feeding the host observers: the observers keep their state privately and take no counts, so GPU counts go to the
// searches they run, which are free functions over a count vector:
//   - Entropy (TensorRT): counts of |x| under MagnitudeBinning{bins / max|x|, bins} (max|x| from minmax_per_tensor),
//     then quant::entropy_threshold_bin(counts, start_bin, quant::entropy_quantized_bins(scheme, min >= 0)); the
//     amax is threshold * max|x| / bins (MagnitudeHistogram::edge).
//   - Percentile: the same counts, then quant::percentile_bin(counts, percentile); amax = (bin + 1) * max|x| / bins.
//   - Histogram (PyTorch L2): counts under the binning quant::pytorch::histc_binning(...) gives (copy its lo, hi,
//     bins into HistcBins) are torch.histc's; the running merge across batches and non_linear_param_search
//     (pytorch_histogram.hpp) work on a quant::pytorch::HistogramState on the host.
//   With one batch these give the observers' amax; across batches the observers also grow or re-bin their
//   histograms (magnitude_histogram.hpp), which a caller reproduces by fixing the range up front.
//
// Two phases, as CUB: calibration_workspace_bytes(entries) is the status word plus two ints per entry; calls
// enqueue on `stream`, allocate nothing and return at once. Synchronize::yes (or check_status) waits and throws
// shrink::Error when a device-side check failed. Inputs are contiguous row-major device memory on the current device.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

enum class Accumulate : bool { no, yes };

// quant::ObserverOptions::ignore_nonfinite: reject (false, the default) flags NaN/inf input as kNonFinite.
enum class NonFinite : bool { reject, ignore };

// torch.histc's rule over [lo, hi] (the fields of cpu::HistcBinning): pos = (int)(((x - lo) * bins) / (hi - lo)) in
// float32, x == hi in the last bin, x outside [lo, hi] and NaN skipped, 0/0 (hi == lo) in bin 0.
struct HistcBins {
  float lo = 0.0f;
  float hi = 0.0f;
  std::int32_t bins = 2048;
};

// The |x| rule (the fields of cpu::MagnitudeBinning): pos = min(floor(|x| * inv_width), bins - 1), the product in
// float32 (inv_width rounded to float) when inv_width lies in [2^-120, 2^120], else in double; NaN and inf skipped.
struct MagnitudeBins {
  double inv_width = 1.0;
  std::int32_t bins = 2048;
};

// Bytes of workspace for a call with `entries` results (1 per tensor, one per channel; histograms: 1).
std::size_t calibration_workspace_bytes(std::int64_t entries);

// min[0], max[0] = finite range of x (one float each, device memory).
void minmax_per_tensor(TensorView<const float> x, float* min, float* max, Workspace workspace, Stream stream,
                       Accumulate accumulate = Accumulate::no, NonFinite nonfinite = NonFinite::reject,
                       Synchronize synchronize = Synchronize::no);

// min[c], max[c] = finite range of channel c along `axis` (in [-rank, rank)); x.shape()[axis] floats each.
void minmax_per_channel(TensorView<const float> x, int axis, float* min, float* max, Workspace workspace,
                        Stream stream, Accumulate accumulate = Accumulate::no, NonFinite nonfinite = NonFinite::reject,
                        Synchronize synchronize = Synchronize::no);

// For each of `entries` entries, MovingAverageMinMaxObserver's update (c = averaging_constant in (0, 1]):
// a batch entry with batch_min > batch_max (no finite value) leaves the running one as it is; a running entry with
// min > max (nothing seen yet) takes the batch's; otherwise min = min + c * (batch_min - min), likewise max, each
// product and sum rounded to float. Needs no workspace (only device arrays); `running_*` start at +inf / -inf.
void moving_average_update(const float* batch_min, const float* batch_max, std::int64_t entries,
                           float averaging_constant, float* running_min, float* running_max, Stream stream);

// counts[0..bins) (int64, device memory) += (or =) the histogram of x. bins in [1, 2^24].
void histogram(TensorView<const float> x, HistcBins binning, std::int64_t* counts, Workspace workspace, Stream stream,
               Accumulate accumulate = Accumulate::no, NonFinite nonfinite = NonFinite::reject,
               Synchronize synchronize = Synchronize::no);
void histogram(TensorView<const float> x, MagnitudeBins binning, std::int64_t* counts, Workspace workspace,
               Stream stream, Accumulate accumulate = Accumulate::no, NonFinite nonfinite = NonFinite::reject,
               Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
