// MseObserver: the clipping amax that minimises the squared error of fake quantization over the |x| histogram.
//
// Reference: NVIDIA pytorch-quantization, calib/histogram.py (_compute_amax_mse). With the |x|
// histogram of magnitude_histogram.hpp (n bins of width w, counts h):
//   - candidates: amax_i = float((i + 0.5) * w), the bin centres, for i in [start_bin, n) (start_bin 128);
//   - each candidate's clipping range [max(min(min_seen, 0), -amax), min(max(max_seen, 0), amax)] gives
//     (s, zp) through scale_zero_point_from_range for the scheme, so dtype, symmetry, restricted range
//     and reduce_range all shape the error (NVIDIA uses its own symmetric quantizer instead);
//   - error(i) = sum_j h_j * ((clamp(nearbyint(c_j * (1 / s)) + zp, qmin, qmax) - zp) * s - c_j)^2, with
//     the bin centres c_j = (j + 0.5) * w, in double (summed in four interleaved partial sums, j mod 4);
//     magnitudes of negative values are scored on the positive side of the quantizer;
//   - the amax is the FIRST candidate at the minimum (NVIDIA's argmin).
// Cost: qparams() evaluates n - start_bin candidates of O(n) each per channel, about 2 ms for 2048 bins.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/observers/magnitude_histogram.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct MseOptions {
  std::int64_t bins = 2048;       // |x| bins the first range is split into, in [2, 2^24]
  std::int64_t start_bin = 128;   // first candidate bin centre, in [0, bins)
  std::int64_t max_bins = 16384;  // growth limit before bins merge in pairs, in [bins, 2^24]
};

// Squared error of fake-quantizing every bin centre with (scale, zero_point), weighted by the counts:
//   v = clamp(c_j * (1 / s), qmin - zp, qmax - zp), error_j = h_j * (nearbyint(v) * s - c_j)^2
// (the same as clamping after rounding, the bounds being integers), summed as magnitude_interleaved_sum.
// centres[j] = (j + 0.5) * bin width, weights[j] = h_j as doubles; `terms` is scratch space.
SHRINK_NO_CONTRACT inline double histogram_quantization_error(const std::vector<double>& centres, const std::vector<double>& weights,
                                                             ScaleZeroPoint p, QuantRange range, std::vector<double>& terms) {
  SHRINK_NO_CONTRACT_BODY
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: (v + kRound) - kRound rounds half to even
  const double scale = p.scale;
  const double inverse = 1.0 / scale;
  const double low = static_cast<double>(range.qmin - p.zero_point);
  const double high = static_cast<double>(range.qmax - p.zero_point);
  const std::size_t n = centres.size();
  terms.resize(n);
  for (std::size_t j = 0; j < n; ++j) {
    const double v = std::min(std::max(centres[j] * inverse, low), high);
    const double error = ((v + kRound) - kRound) * scale - centres[j];
    terms[j] = error * error * weights[j];
  }
  return detail::magnitude_interleaved_sum(terms.data(), static_cast<std::int64_t>(n));
}

// Bin centres (j + 0.5) * bin_width and the counts, as doubles, for histogram_quantization_error.
inline void histogram_centres_and_weights(const std::vector<std::int64_t>& counts, double bin_width,
                                          std::vector<double>& centres, std::vector<double>& weights) {
  centres.resize(counts.size());
  weights.resize(counts.size());
  for (std::size_t j = 0; j < counts.size(); ++j) {
    centres[j] = (static_cast<double>(j) + 0.5) * bin_width;
    weights[j] = static_cast<double>(counts[j]);
  }
}

// The bin whose centre is the MSE-optimal amax for `scheme`, given the histogram's running min and max.
inline std::int64_t mse_amax_bin(const MagnitudeHistogram& histogram, float min_seen, float max_seen,
                                 const QuantScheme& scheme, std::int64_t start_bin) {
  const std::int64_t n = histogram.size();
  const QuantRange range = quant_range(scheme);
  double best = std::numeric_limits<double>::infinity();
  std::int64_t best_bin = n - 1;
  std::vector<double> centres, weights;
  histogram_centres_and_weights(histogram.counts(), histogram.bin_width(), centres, weights);
  // Each candidate's error on the current executor, then the first minimum in candidate order.
  const std::int64_t first = std::min(start_bin, n - 1);
  std::vector<double> errors(static_cast<std::size_t>(n - first));
  parallel_for(n - first, chunk_size(n - first, 8.0 * static_cast<double>(n)), [&](std::int64_t b, std::int64_t e) {
    std::vector<double> terms;
    for (std::int64_t i = first + b; i < first + e; ++i) {
      const float amax = static_cast<float>((static_cast<double>(i) + 0.5) * histogram.bin_width());
      const ClippingRange clip = MagnitudeHistogramObserver::clip_to_amax(amax, min_seen, max_seen);
      const ScaleZeroPoint p =
          scale_zero_point_from_range(clip.min, clip.max, scheme, "shrink::quant::MseObserver::qparams");
      errors[static_cast<std::size_t>(i - first)] = histogram_quantization_error(centres, weights, p, range, terms);
    }
  });
  for (std::int64_t i = first; i < n; ++i) {
    if (errors[static_cast<std::size_t>(i - first)] < best) {
      best = errors[static_cast<std::size_t>(i - first)];
      best_bin = i;
    }
  }
  return best_bin;
}

class MseObserver : public MagnitudeHistogramObserver {
 public:
  explicit MseObserver(const QuantScheme& scheme, MseOptions mse_options = {}, ObserverOptions options = {})
      : MagnitudeHistogramObserver(scheme, options, validated(mse_options).bins, mse_options.max_bins),
        mse_options_(mse_options) {}

  const char* name() const override { return "MseObserver"; }
  const MseOptions& mse_options() const { return mse_options_; }

 protected:
  float choose_amax(const MagnitudeHistogram& histogram, float min_seen, float max_seen) const override {
    if (!histogram.has_range()) return 0.0f;
    const std::int64_t i = mse_amax_bin(histogram, min_seen, max_seen, scheme(), mse_options_.start_bin);
    return static_cast<float>((static_cast<double>(i) + 0.5) * histogram.bin_width());
  }

 private:
  static const MseOptions& validated(const MseOptions& o) {
    const char* fn = "shrink::quant::MseObserver";
    detail::validate_magnitude_bins(fn, o.bins, o.max_bins);
    if (o.start_bin < 0 || o.start_bin >= o.bins)
      fail(fn, "options.start_bin", o.start_bin, "a start bin in [0, options.bins = " + std::to_string(o.bins) + ")");
    return o;
  }

  MseOptions mse_options_;
};

}  // namespace shrink::quant
