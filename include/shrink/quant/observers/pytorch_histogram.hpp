// PyTorch 1.13's HistogramObserver arithmetic, operation for operation: how a batch joins the histogram
// (torch.histc, _adjust_min_max, _combine_histograms) and the L2 search (_non_linear_param_search).
//
// Reference: torch/ao/quantization/observer.py (torch 1.13.1) and the ATen CPU kernels it calls. Every
// step keeps torch's precision: 0-dim float32 tensors and float32 elementwise ops where torch has them,
// float64 where Python floats or .item() appear, torch.sum's cascade order (AVX2 build) for float32 sums,
// torch.cumsum's float64 accumulator, and comparisons of a float32 tensor with a Python float done in
// float32. Quirks kept on purpose, because torch has them:
//   - histc is called with int(min) and int(max): the edges are the truncated range, so elements outside
//     [trunc(min), trunc(max)] are not counted (when both truncate to the same integer, histc falls back to
//     the batch's own min and max, then to +-1 around them);
//   - a batch that arrives while min_val == max_val (a constant history) restarts the histogram;
//   - merging into a grown range re-grids the old histogram at upsample_rate times its resolution.
// Where torch 1.13 raises instead (edges beyond int64 after int(), a constant batch whose +-1 is lost to
// rounding, a range that grows over 2^33-fold (a downsample rate past 2^40), a bin width that underflows),
// shrink carries on: the edges stay doubles, a zero-width histc puts the batch in bin 0, and an old
// histogram too narrow to re-grid adds its mass to the one new bin where it starts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "shrink/core/no_contract.hpp"
#include "shrink/cpu/histogram.hpp"
#include "shrink/quant/observers/channel_bins.hpp"

namespace shrink::quant::pytorch {

// torch.sum of a contiguous float32 tensor on the CPU: SumKernel.cpp's cascade with 8-float vectors.
// Rows of four vectors are summed in chunks of 2^level_power rows, chunk sums carried up four levels.
SHRINK_NO_CONTRACT inline float float_sum(const float* x, std::int64_t n) {
  SHRINK_NO_CONTRACT_BODY
  const std::int64_t width = n >= 8 ? 8 : 1;  // torch takes the scalar path below one vector
  const std::int64_t vectors = n / width;
  const std::int64_t rows = vectors / 4;
  std::int64_t ceil_log2 = 1;
  if (rows > 2) {
    ceil_log2 = 0;
    for (std::int64_t v = rows - 1; v > 0; v >>= 1) ++ceil_log2;
  }
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2 / 4);
  const std::int64_t level_step = std::int64_t{1} << level_power;
  const std::int64_t level_mask = level_step - 1;
  float acc[4][4][8] = {};  // [level][ilp column][lane]
  std::int64_t i = 0;
  for (;;) {
    const bool whole_chunk = i + level_step <= rows;
    const std::int64_t chunk_end = whole_chunk ? i + level_step : rows;
    for (; i < chunk_end; ++i)
      for (int k = 0; k < 4; ++k)
        for (std::int64_t l = 0; l < width; ++l) acc[0][k][l] = acc[0][k][l] + x[width * (4 * i + k) + l];
    if (!whole_chunk) break;
    for (int j = 1; j < 4; ++j) {
      for (int k = 0; k < 4; ++k)
        for (std::int64_t l = 0; l < width; ++l) {
          acc[j][k][l] = acc[j][k][l] + acc[j - 1][k][l];
          acc[j - 1][k][l] = 0.0f;
        }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (int j = 1; j < 4; ++j)
    for (int k = 0; k < 4; ++k)
      for (std::int64_t l = 0; l < width; ++l) acc[0][k][l] = acc[0][k][l] + acc[j][k][l];
  float partial[8] = {};
  for (std::int64_t l = 0; l < width; ++l) partial[l] = acc[0][0][l];
  for (std::int64_t v = rows * 4; v < vectors; ++v)
    for (std::int64_t l = 0; l < width; ++l) partial[l] = partial[l] + x[width * v + l];
  for (int k = 1; k < 4; ++k)
    for (std::int64_t l = 0; l < width; ++l) partial[l] = partial[l] + acc[0][k][l];
  if (width == 1) return partial[0];
  float total = 0.0f;
  for (std::int64_t t = vectors * width; t < n; ++t) total = total + x[t];
  for (int l = 0; l < 8; ++l) total = total + partial[l];
  return total;
}

// std::fmod(a, b) for finite floats without the libm call: with A = |a|, B = |b| and q = trunc(A / B) in
// double (possibly one too large or too small), A - q * B is exact in double (q * B has at most 53 bits and
// the difference at most 24), and one correction step lands it in [0, B): the exact remainder fmod returns.
inline float exact_fmod(float a, float b) {
  const double A = std::fabs(static_cast<double>(a)), B = std::fabs(static_cast<double>(b));
  const double q = std::trunc(A / B);
  if (!(q < 0x1p28) || !std::isfinite(A)) return std::fmod(a, b);  // outside the exactness argument
  double r = A - q * B;
  if (r < 0.0) r += B;
  else if (r >= B) r -= B;
  return std::copysign(static_cast<float>(r), a);
}

// torch.div(a, b, rounding_mode='floor') for float32 (c10::div_floor_floating).
SHRINK_NO_CONTRACT inline float div_floor(float a, float b) {
  SHRINK_NO_CONTRACT_BODY
  if (b == 0.0f) return a / b;
  const float mod = exact_fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div = div - 1.0f;
  if (div == 0.0f) return std::copysign(0.0f, a / b);
  float floor_div = std::floor(div);
  if (div - floor_div > 0.5f) floor_div = floor_div + 1.0f;
  return floor_div;
}

// One torch HistogramObserver's buffers.
struct HistogramState {
  std::vector<float> histogram;  // float32 counts, `bins` of them
  float min_val = std::numeric_limits<float>::infinity();
  float max_val = -std::numeric_limits<float>::infinity();

  bool initialized() const { return !(min_val == std::numeric_limits<float>::infinity() &&
                                      max_val == -std::numeric_limits<float>::infinity()); }
};

// torch.histc's outer edges for min=lo, max=hi (histc_select_outer_bin_edges), as float32 linspace ends.
inline cpu::HistcBinning histc_binning(double lo, double hi, float data_min, float data_max, std::int64_t bins) {
  if (lo == hi) {
    lo = data_min;
    hi = data_max;
  }
  if (lo == hi) {
    lo -= 1.0;
    hi += 1.0;
  }
  return cpu::HistcBinning{static_cast<float>(lo), static_cast<float>(hi), static_cast<std::int32_t>(bins)};
}

// _adjust_min_max: the grown range on a grid of upsample_rate * bins steps of the old range.
struct CombinedRange {
  float min = 0.0f;
  float max = 0.0f;                  // combined max + e, so the range is downsample_rate old-widths / 128
  std::int64_t downsample_rate = 1;
  std::int64_t start_idx = 0;        // where the old min falls on the fine grid
  bool regridable = true;            // false where torch 1.13 fails (see the file comment)
};

SHRINK_NO_CONTRACT inline CombinedRange adjust_min_max(const HistogramState& s, float combined_min, float combined_max,
                                                      std::int64_t bins, std::int64_t upsample_rate) {
  SHRINK_NO_CONTRACT_BODY
  CombinedRange r;
  r.min = combined_min;
  r.max = combined_max;
  const float fine_width = (s.max_val - s.min_val) / static_cast<float>(bins * upsample_rate);
  const float old_width = static_cast<float>(bins) * fine_width;
  const float downsample = std::ceil((combined_max - combined_min) / old_width);
  // Beyond 2^40 torch could not allocate its grid; the fine-grid positions must also fit in int64.
  const double max_downsample = std::min(1099511627776.0, 4611686018427387904.0 / static_cast<double>(bins * upsample_rate));
  if (!(static_cast<double>(downsample) <= max_downsample)) {
    r.regridable = false;
    return r;
  }
  r.downsample_rate = static_cast<std::int64_t>(downsample);
  const float e = static_cast<float>(r.downsample_rate) * old_width - (combined_max - combined_min);
  r.max = combined_max + e;
  r.start_idx = static_cast<std::int64_t>(std::nearbyint((s.min_val - combined_min) / fine_width));
  return r;
}

// _combine_histograms: adds the old histogram, re-gridded onto the combined range, to `combined` (the
// batch's own histc). The old bins are repeated upsample_rate times on the fine grid from start_idx,
// integrated in float64 (torch.cumsum), sampled every downsample_rate steps, and differenced against the
// previous sample as torch keeps it (in a float32 tensor), divided by upsample_rate.
SHRINK_NO_CONTRACT inline void combine_histograms(std::vector<float>& combined, const HistogramState& s,
                                                  const CombinedRange& r, std::int64_t upsample_rate) {
  SHRINK_NO_CONTRACT_BODY
  const std::int64_t bins = static_cast<std::int64_t>(combined.size());
  const std::vector<float>& old = s.histogram;
  if (!r.regridable) {
    double mass = 0.0;
    for (float v : old) mass += static_cast<double>(v);
    const double at = (static_cast<double>(s.min_val) - r.min) / ((static_cast<double>(r.max) - r.min) / static_cast<double>(bins));
    const std::size_t bin = at >= 0.0 ? static_cast<std::size_t>(std::min(at, static_cast<double>(bins - 1))) : 0;
    combined[bin] = combined[bin] + static_cast<float>(mass);
    return;
  }
  const std::int64_t ds = r.downsample_rate;
  const std::int64_t begin = r.start_idx;
  const std::int64_t end = std::min(begin + bins * upsample_rate, bins * ds);  // torch needs it to fit
  double integral = 0.0;
  std::int64_t next = begin;  // next fine-grid cell to integrate; cells before `begin` hold zeros
  float previous = 0.0f;      // the previous sample, as stored in torch's float32 shifted tensor
  for (std::int64_t k = 0; k < bins; ++k) {
    const std::int64_t sample_at = k * ds + ds - 1;
    for (; next <= sample_at && next < end; ++next)
      integral += static_cast<double>(old[static_cast<std::size_t>((next - begin) / upsample_rate)]);
    const float interpolated = static_cast<float>((integral - static_cast<double>(previous)) / static_cast<double>(upsample_rate));
    combined[static_cast<std::size_t>(k)] = combined[static_cast<std::size_t>(k)] + interpolated;
    previous = static_cast<float>(integral);
  }
}

// What forward() does with one batch, decided from the batch's finite range before anything is counted.
struct ForwardStep {
  bool restart = true;         // no history, or min_val == max_val: the histogram becomes this batch's
  bool same_range = false;     // the range did not move: the old histogram is added bin by bin
  cpu::HistcBinning histc{};   // edges the batch is counted with
  CombinedRange combined{};    // the state's range afterwards, and how the old histogram maps onto it
};

SHRINK_NO_CONTRACT inline ForwardStep plan_forward(const HistogramState& s, float batch_min, float batch_max,
                                                   std::int64_t bins, std::int64_t upsample_rate) {
  SHRINK_NO_CONTRACT_BODY
  ForwardStep step;
  if (!s.initialized() || s.min_val == s.max_val) {
    step.combined.min = batch_min;
    step.combined.max = batch_max;
    step.histc = histc_binning(std::trunc(static_cast<double>(batch_min)), std::trunc(static_cast<double>(batch_max)),
                               batch_min, batch_max, bins);
    return step;
  }
  step.restart = false;
  step.combined = adjust_min_max(s, std::min(batch_min, s.min_val), std::max(batch_max, s.max_val), bins, upsample_rate);
  step.same_range = step.combined.min == s.min_val && step.combined.max == s.max_val;
  step.histc = histc_binning(std::trunc(static_cast<double>(step.combined.min)),
                             std::trunc(static_cast<double>(step.combined.max)), batch_min, batch_max, bins);
  return step;
}

// Finishes forward(): `batch_counts` is torch.histc of the batch with step.histc.
SHRINK_NO_CONTRACT inline void apply_forward(HistogramState& s, const ForwardStep& step,
                                             const std::int64_t* batch_counts, std::int64_t bins,
                                             std::int64_t upsample_rate) {
  SHRINK_NO_CONTRACT_BODY
  std::vector<float> histogram(static_cast<std::size_t>(bins));
  for (std::int64_t j = 0; j < bins; ++j) histogram[static_cast<std::size_t>(j)] = static_cast<float>(batch_counts[j]);
  if (!step.restart) {
    if (step.same_range) {
      for (std::int64_t j = 0; j < bins; ++j)
        histogram[static_cast<std::size_t>(j)] = histogram[static_cast<std::size_t>(j)] + s.histogram[static_cast<std::size_t>(j)];
    } else {
      combine_histograms(histogram, s, step.combined, upsample_rate);
    }
  }
  s.histogram.swap(histogram);
  s.min_val = step.combined.min;
  s.max_val = step.combined.max;
}

// (end^3 - begin^3) / 3 in float32: _get_norm without its density factor.
SHRINK_NO_CONTRACT inline float cube_difference(float begin, float end) {
  SHRINK_NO_CONTRACT_BODY
  return (((end * end) * end) - ((begin * begin) * begin)) / 3.0f;
}

// _compute_quantization_error: the L2 norm of quantizing bins [start_bin, end_bin] onto dst_nbins levels,
// each source bin's mass spread uniformly (density * integral of x^2 over its offsets from the centres).
SHRINK_NO_CONTRACT inline double quantization_error(const HistogramState& s, std::int64_t start_bin, std::int64_t end_bin,
                                                    std::int64_t dst_nbins, std::vector<float>& norm) {
  SHRINK_NO_CONTRACT_BODY
  const std::int64_t bins = static_cast<std::int64_t>(s.histogram.size());
  const double bin_width = (static_cast<double>(s.max_val) - static_cast<double>(s.min_val)) / static_cast<double>(bins);
  const double dst_bin_width = bin_width * static_cast<double>(end_bin - start_bin + 1) / static_cast<double>(dst_nbins);
  if (dst_bin_width == 0.0) return 0.0;
  const float width = static_cast<float>(bin_width);
  const float dst_width = static_cast<float>(dst_bin_width);
  const float half = static_cast<float>(dst_bin_width / 2);
  const float minus_half = static_cast<float>(-dst_bin_width / 2);
  const float last_dst = static_cast<float>(dst_nbins - 1);
  const float inner_norm = cube_difference(minus_half, half);
  norm.resize(static_cast<std::size_t>(bins));
  for (std::int64_t i = 0; i < bins; ++i) {
    const float src_begin = static_cast<float>(i - start_bin) * width;
    const float src_end = src_begin + width;
    const float dst_of_begin = std::min(std::max(div_floor(src_begin, dst_width), 0.0f), last_dst);
    const float dst_of_begin_center = (dst_of_begin + 0.5f) * dst_width;
    const float dst_of_end = std::min(std::max(div_floor(src_end, dst_width), 0.0f), last_dst);
    const float density = s.histogram[static_cast<std::size_t>(i)] / width;
    float n = 0.0f;
    n = n + density * cube_difference(src_begin - dst_of_begin_center, half);  // _get_norm = density * cube_difference
    n = n + ((dst_of_end - dst_of_begin) - 1.0f) * (density * inner_norm);
    const float dst_of_end_center = dst_of_end * dst_width + half;
    n = n + density * cube_difference(minus_half, src_end - dst_of_end_center);
    norm[static_cast<std::size_t>(i)] = n;
  }
  return static_cast<double>(float_sum(norm.data(), bins));
}

// _non_linear_param_search: moves the start or end bin, whichever passes fewer counts to reach the next
// 1e-5 quantile step, while the quantization error keeps falling; returns [new_min, new_max].
SHRINK_NO_CONTRACT inline ClippingRange non_linear_param_search(const HistogramState& s, std::int64_t dst_nbins) {
  SHRINK_NO_CONTRACT_BODY
  const std::int64_t bins = static_cast<std::int64_t>(s.histogram.size());
  const float bin_width = (s.max_val - s.min_val) / static_cast<float>(bins);
  const double total = static_cast<double>(float_sum(s.histogram.data(), bins));
  std::vector<float> cumulative(static_cast<std::size_t>(bins));
  double running = 0.0;  // torch.cumsum accumulates float32 in float64
  for (std::int64_t j = 0; j < bins; ++j) {
    running += static_cast<double>(s.histogram[static_cast<std::size_t>(j)]);
    cumulative[static_cast<std::size_t>(j)] = static_cast<float>(running);
  }
  std::vector<float> scratch;
  const double stepsize = 1e-5;
  double alpha = 0.0, beta = 1.0;
  std::int64_t start_bin = 0, end_bin = bins - 1;
  double norm_min = std::numeric_limits<double>::infinity();
  while (alpha < beta) {
    const double next_alpha = alpha + stepsize;
    const double next_beta = beta - stepsize;
    // A float32 tensor compared with a Python float: the float is rounded to float32 first.
    const float low_mass = static_cast<float>(next_alpha * total);
    const float high_mass = static_cast<float>(next_beta * total);
    std::int64_t l = start_bin, r = end_bin;
    while (l < end_bin && cumulative[static_cast<std::size_t>(l)] < low_mass) ++l;
    while (r > start_bin && cumulative[static_cast<std::size_t>(r)] > high_mass) --r;
    std::int64_t next_start = start_bin, next_end = end_bin;
    if ((l - start_bin) > (end_bin - r)) {
      next_start = l;
      alpha = next_alpha;
    } else {
      next_end = r;
      beta = next_beta;
    }
    if (next_start == start_bin && next_end == end_bin) continue;
    const double norm = quantization_error(s, next_start, next_end, dst_nbins, scratch);
    if (norm > norm_min) break;
    norm_min = norm;
    start_bin = next_start;
    end_bin = next_end;
  }
  ClippingRange range;
  range.min = s.min_val + bin_width * static_cast<float>(start_bin);
  range.max = s.min_val + bin_width * static_cast<float>(end_bin + 1);
  return range;
}

}  // namespace shrink::quant::pytorch
