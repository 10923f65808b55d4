// EntropyObserver: TensorRT's entropy (KL-divergence) calibration over the |x| histogram, per tensor or per channel.
//
// Reference: NVIDIA, "8-bit Inference with TensorRT" (GTC 2017) and pytorch-quantization's
// calib/histogram.py (_compute_amax_entropy), which this follows step for step:
//   - h = the |x| histogram (magnitude_histogram.hpp: 2048 bins to start, more of the same width when a
//     later batch reaches further); h[0] is replaced by h[1] first, as NVIDIA does, so a spike of exact
//     zeros (ReLU outputs) does not dominate the distributions;
//   - for every candidate i in [start_bin, n] (n = bins now; start_bin 128 by default, capped at n):
//       P = h[0..i) with the outliers' mass sum(h[i..n)) added to P[i-1];
//       Q = h[0..i) (without the outliers) merged into L quantized bins (bin j goes to floor(j * L / i))
//           and expanded back: each quantized bin's count is shared equally by its nonzero source bins,
//           empty source bins stay empty;
//       KL(P || Q) of the normalised distributions, in double:
//           KL = sum_j P_j * (log P_j - log Q_j) / sum(P) + log(sum(Q) / sum(P)),
//       the sum over j taken in four interleaved partial sums (j mod 4) added in order at the end;
//       a candidate where P has mass and Q none (h[i-1] empty but outliers) has KL = +inf, and one with
//       no mass below i is skipped;
//   - the threshold is the LAST candidate at the minimum (as DESIGN.md states; NVIDIA takes the last
//     argmin too); divergences within 1e-12 relative of the minimum count as equal, so the choice does
//     not hinge on rounding; amax = edge i = i * width, the upper edge of bin i - 1 (edge n, no
//     clipping, if no candidate is finite). A histogram that never saw a nonzero |x| gives amax 0.
// L, the quantized bins, is what one sign of the data gets from the scheme: 2^(b-1) for data with
// negative values or a symmetric scheme, 2^b for non-negative data under an affine scheme (its range
// [0, amax] spans the whole integer range), b = range_bits (scheme.bits when set) less one under reduce_range. So int8
// gives NVIDIA's 128 (256 for unsigned data), int4 gives 8 (16). restricted_range keeps the power of two. The AVX2
// search evaluates four candidates at a time with the same bits as one at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/cpu/entropy_search.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/observers/magnitude_histogram.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct EntropyOptions {
  std::int64_t bins = 2048;       // |x| bins the first range is split into, in [2, 2^24]
  std::int64_t start_bin = 128;   // first candidate threshold, in bins, in [1, bins]
  std::int64_t max_bins = 16384;  // growth limit before bins merge in pairs, in [bins, 2^24]
};

// L: quantized bins for one sign of the data (see the file comment).
inline std::int64_t entropy_quantized_bins(const QuantScheme& scheme, bool non_negative_data) {
  const int bits = range_bits(scheme) - (scheme.reduce_range ? 1 : 0);
  return (non_negative_data && scheme.symmetry == Symmetry::affine) ? (std::int64_t{1} << bits)
                                                                    : (std::int64_t{1} << (bits - 1));
}

// The threshold, in bins kept (amax = edge i), of the entropy search over |x| counts.
inline std::int64_t entropy_threshold_bin(const std::vector<std::int64_t>& counts, std::int64_t start_bin,
                                          std::int64_t quantized_bins) {
  if (quantized_bins < 1)
    fail("shrink::quant::entropy_threshold_bin", "quantized_bins", quantized_bins, "at least one quantized bin");
  const std::int64_t n = static_cast<std::int64_t>(counts.size());
  if (n == 0) return 0;
  cpu::EntropyTables tables(counts, quantized_bins);
  const std::int64_t first = std::max<std::int64_t>(1, std::min(start_bin, n));
  std::vector<double> divergence(static_cast<std::size_t>(n) + 1, std::numeric_limits<double>::infinity());
  double best = std::numeric_limits<double>::infinity();
  cpu::entropy_divergences(tables, first, n, divergence.data());
  for (std::int64_t i = first; i <= n; ++i) best = std::fmin(best, divergence[static_cast<std::size_t>(i)]);
  if (!std::isfinite(best)) return n;
  const double tie = best + 1e-12 * std::fabs(best);
  for (std::int64_t i = n; i >= first; --i)
    if (divergence[static_cast<std::size_t>(i)] <= tie) return i;
  return n;
}

class EntropyObserver : public MagnitudeHistogramObserver {
 public:
  explicit EntropyObserver(const QuantScheme& scheme, EntropyOptions entropy_options = {}, ObserverOptions options = {})
      : MagnitudeHistogramObserver(scheme, options, validated(entropy_options).bins, entropy_options.max_bins),
        entropy_options_(entropy_options) {}

  const char* name() const override { return "EntropyObserver"; }
  const EntropyOptions& entropy_options() const { return entropy_options_; }

 protected:
  float choose_amax(const MagnitudeHistogram& histogram, float min_seen, float) const override {
    if (!histogram.has_range()) return 0.0f;
    const std::int64_t levels = entropy_quantized_bins(scheme(), min_seen >= 0.0f);
    return static_cast<float>(histogram.edge(entropy_threshold_bin(histogram.counts(), entropy_options_.start_bin, levels)));
  }

 private:
  static const EntropyOptions& validated(const EntropyOptions& o) {
    const char* fn = "shrink::quant::EntropyObserver";
    detail::validate_magnitude_bins(fn, o.bins, o.max_bins);
    if (o.start_bin < 1 || o.start_bin > o.bins)
      fail(fn, "options.start_bin", o.start_bin, "a start bin in [1, options.bins = " + std::to_string(o.bins) + "]");
    return o;
  }

  EntropyOptions entropy_options_;
};

}  // namespace shrink::quant
