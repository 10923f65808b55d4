// PercentileObserver: the amax below which a given percentile of |x| lies, from the |x| histogram.
//
// Reference: NVIDIA pytorch-quantization, calib/histogram.py (_compute_amax_percentile). With the
// |x| histogram of magnitude_histogram.hpp and its running total T:
//   idx  = the first bin whose cumulative count reaches percentile / 100 * T (in double),
//   amax = edge idx + 1, the UPPER edge of that bin.
// NVIDIA returns the bin's lower edge; the upper edge keeps at least the percentile's share of the
// values inside [-amax, amax], and makes percentile 100 give max|x| (the observer then equals MinMax).
// amax is monotonic in the percentile. The clipping range follows from amax as in
// magnitude_histogram.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/observers/magnitude_histogram.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct PercentileOptions {
  double percentile = 99.99;      // in (0, 100]
  std::int64_t bins = 2048;       // |x| bins the first range is split into, in [2, 2^24]
  std::int64_t max_bins = 16384;  // growth limit before bins merge in pairs, in [bins, 2^24]
};

// The bin holding the percentile of the counts (its upper edge is the amax); 0 for empty counts.
inline std::int64_t percentile_bin(const std::vector<std::int64_t>& counts, double percentile) {
  std::int64_t total = 0;
  for (std::int64_t c : counts) total += c;
  if (total == 0) return 0;
  const double target = percentile / 100.0 * static_cast<double>(total);
  std::int64_t cumulative = 0;
  for (std::size_t j = 0; j < counts.size(); ++j) {
    cumulative += counts[j];
    if (static_cast<double>(cumulative) >= target) return static_cast<std::int64_t>(j);
  }
  return static_cast<std::int64_t>(counts.size()) - 1;
}

class PercentileObserver : public MagnitudeHistogramObserver {
 public:
  explicit PercentileObserver(const QuantScheme& scheme, PercentileOptions percentile_options = {},
                              ObserverOptions options = {})
      : MagnitudeHistogramObserver(scheme, options, validated(percentile_options).bins, percentile_options.max_bins),
        percentile_options_(percentile_options) {}

  const char* name() const override { return "PercentileObserver"; }
  const PercentileOptions& percentile_options() const { return percentile_options_; }

 protected:
  float choose_amax(const MagnitudeHistogram& histogram, float, float) const override {
    if (!histogram.has_range()) return 0.0f;
    return static_cast<float>(histogram.edge(percentile_bin(histogram.counts(), percentile_options_.percentile) + 1));
  }

 private:
  static const PercentileOptions& validated(const PercentileOptions& o) {
    const char* fn = "shrink::quant::PercentileObserver";
    if (!(o.percentile > 0.0 && o.percentile <= 100.0))
      fail(fn, "options.percentile", o.percentile, "a percentile in (0, 100]");
    detail::validate_magnitude_bins(fn, o.bins, o.max_bins);
    return o;
  }

  PercentileOptions percentile_options_;
};

}  // namespace shrink::quant
