// The |x| histogram behind the Entropy, Percentile and MSE observers, and the observer base they share.
//
// Reference: NVIDIA pytorch-quantization, calib/histogram.py (HistogramCalibrator.collect). The histogram
// counts |x| in bins of one width starting at 0:
//   - the first batch with a nonzero max|x| = m sets width = m / bins; zeros seen before that go to bin 0;
//   - an element lands in bin min(floor(|x| * inv_width), count - 1), inv_width = bins / m, with the
//     product in float32 (double where inv_width is outside [2^-120, 2^120]; see cpu::MagnitudeBinning);
//   - a later batch with a larger max|x| = m' appends bins of the same width up to ceil(m' * inv_width)
//     bins (NVIDIA grows the same way); past max_bins, neighbouring bins are merged in pairs (the width
//     doubles) until the count fits, an addition of shrink's that bounds memory and search time;
//   - edge k of the histogram is k * width (k in [0, count]).
// The observers turn the amax their search picks into the clipping range
//   [max(min(min_seen, 0), -amax), min(max(max_seen, 0), amax)]
// (min_seen, max_seen: the running finite min and max, widened to include 0 as every shrink range is):
// data past amax on both sides gives [-amax, amax], non-negative data [0, min(max_seen, amax)],
// non-positive data [max(min_seen, -amax), 0]; qparams follow from scale_zero_point_from_range.
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
#include "shrink/cpu/histogram.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/observers/channel_bins.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

class MagnitudeHistogram {
 public:
  MagnitudeHistogram(std::int64_t bins, std::int64_t max_bins) : bins_(bins), max_bins_(max_bins) {}

  // True once a nonzero |x| has set the bin width.
  bool has_range() const { return !counts_.empty(); }
  std::int64_t size() const { return static_cast<std::int64_t>(counts_.size()); }
  const std::vector<std::int64_t>& counts() const { return counts_; }
  std::int64_t* counts_data() { return counts_.data(); }
  double bin_width() const { return width_; }
  // Upper edge of bin k - 1, lower edge of bin k: k * width.
  double edge(std::int64_t k) const { return static_cast<double>(k) * width_; }
  // Elements counted so far, zeros seen before the first range included.
  std::int64_t total() const {
    std::int64_t t = zeros_before_range_;
    for (std::int64_t c : counts_) t += c;
    return t;
  }

  // Counts `n` zeros while no range exists yet (they join bin 0 when one does).
  void add_zeros_before_range(std::int64_t n) { zeros_before_range_ += n; }

  // Makes the bins reach max_abs > 0 (see the file comment).
  void cover(double max_abs) {
    if (!has_range()) {
      width_ = max_abs / static_cast<double>(bins_);
      inv_width_ = static_cast<double>(bins_) / max_abs;
      counts_.assign(static_cast<std::size_t>(bins_), 0);
      counts_[0] = zeros_before_range_;
      zeros_before_range_ = 0;
      return;
    }
    const double reach = max_abs * inv_width_;  // in bins of the current width
    if (!(std::ceil(reach) > static_cast<double>(size()))) return;
    int halvings = 0;
    while (std::ceil(std::ldexp(reach, -halvings)) > static_cast<double>(max_bins_)) ++halvings;
    if (halvings > 0) merge(halvings);
    counts_.resize(static_cast<std::size_t>(std::ceil(std::ldexp(reach, -halvings))), 0);
  }

  cpu::MagnitudeBinning binning() const { return cpu::MagnitudeBinning{inv_width_, static_cast<std::int32_t>(size())}; }

 private:
  // Merges runs of 2^halvings bins: the width grows by 2^halvings.
  void merge(int halvings) {
    const std::int64_t group = halvings >= 62 ? std::numeric_limits<std::int64_t>::max() : (std::int64_t{1} << halvings);
    std::vector<std::int64_t> merged(static_cast<std::size_t>((size() - 1) / group + 1), 0);
    for (std::int64_t j = 0; j < size(); ++j) merged[static_cast<std::size_t>(j / group)] += counts_[static_cast<std::size_t>(j)];
    counts_.swap(merged);
    width_ = std::ldexp(width_, halvings);
    inv_width_ = std::ldexp(inv_width_, -halvings);
  }

  std::int64_t bins_;
  std::int64_t max_bins_;
  std::vector<std::int64_t> counts_;
  double width_ = 0.0;
  double inv_width_ = 0.0;
  std::int64_t zeros_before_range_ = 0;
};

namespace detail {

// Sum of terms[0..n) in four interleaved partial sums (term j goes to sum j mod 4), added in order at
// the end: four independent chains instead of one, and an order the numpy reference repeats exactly.
SHRINK_NO_CONTRACT inline double magnitude_interleaved_sum(const double* terms, std::int64_t n) {
  SHRINK_NO_CONTRACT_BODY
  double lane[4] = {0.0, 0.0, 0.0, 0.0};
  std::int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int l = 0; l < 4; ++l) lane[l] = lane[l] + terms[j + l];
  for (; j < n; ++j) lane[j & 3] = lane[j & 3] + terms[j];
  return ((lane[0] + lane[1]) + lane[2]) + lane[3];
}

// Checks the histogram sizes shared by the |x| observers' options.
inline void validate_magnitude_bins(const char* function, std::int64_t bins, std::int64_t max_bins) {
  constexpr std::int64_t kMostBins = std::int64_t{1} << 24;
  if (bins < 2 || bins > kMostBins) fail(function, "options.bins", bins, "a bin count in [2, 16777216]");
  if (max_bins < bins || max_bins > kMostBins)
    fail(function, "options.max_bins", max_bins, "a bin count in [options.bins = " + std::to_string(bins) + ", 16777216]");
}

}  // namespace detail

// Base of EntropyObserver, PercentileObserver and MseObserver: one |x| histogram and one running finite
// [min, max] per tensor or per channel; a subclass picks the amax from them.
class MagnitudeHistogramObserver : public Observer {
 public:
  // The amax the search picks, per tensor or per channel.
  std::vector<float> amax() const {
    require_observed("amax");
    std::vector<float> result(histograms_.size());
    // Channels on the current executor: each search reads its own histogram and writes its own entry.
    parallel_for(static_cast<std::int64_t>(result.size()), 1, [&](std::int64_t c0, std::int64_t c1) {
      for (auto c = static_cast<std::size_t>(c0); c < static_cast<std::size_t>(c1); ++c)
        result[c] = choose_amax(histograms_[c], mins_[c], maxs_[c]);
    });
    return result;
  }

  // [max(min(min_seen, 0), -amax), min(max(max_seen, 0), amax)] per tensor or per channel.
  std::vector<ClippingRange> clipping_ranges() const {
    const std::vector<float> a = amax();
    std::vector<ClippingRange> ranges(a.size());
    for (std::size_t c = 0; c < a.size(); ++c) ranges[c] = clip_to_amax(a[c], mins_[c], maxs_[c]);
    return ranges;
  }

  const MagnitudeHistogram& histogram(std::int64_t channel = 0) const {
    if (channel < 0 || channel >= static_cast<std::int64_t>(histograms_.size()))
      fail("shrink::quant::MagnitudeHistogramObserver::histogram", "channel", channel,
           "a channel in [0, " + std::to_string(histograms_.size()) + ") (observe a batch first)");
    return histograms_[static_cast<std::size_t>(channel)];
  }
  // Running finite min and max per tensor or per channel (+inf, -inf before any finite value).
  const std::vector<float>& min_values() const { return mins_; }
  const std::vector<float>& max_values() const { return maxs_; }

  static ClippingRange clip_to_amax(float amax, float min_seen, float max_seen) {
    ClippingRange r;
    r.min = std::fmax(std::fmin(min_seen, 0.0f), -amax);
    r.max = std::fmin(std::fmax(max_seen, 0.0f), amax);
    return r;
  }

  void reset() override {
    Observer::reset();
    histograms_.clear();
    mins_.clear();
    maxs_.clear();
  }

 protected:
  MagnitudeHistogramObserver(const QuantScheme& scheme, ObserverOptions options, std::int64_t bins, std::int64_t max_bins)
      : Observer(scheme, options), bins_(bins), max_bins_(max_bins) {}

  // The amax for one histogram; min_seen <= max_seen.
  virtual float choose_amax(const MagnitudeHistogram& histogram, float min_seen, float max_seen) const = 0;

  void accumulate(const ObservedBatch& batch) override {
    const std::vector<cpu::FiniteRange> ranges = detail::batch_ranges(batch, scheme());
    reject_nonfinite(batch, detail::count_nonfinite(ranges));
    const std::size_t channels = ranges.size();
    const std::int64_t per_channel = batch.numel() / static_cast<std::int64_t>(channels);
    std::vector<MagnitudeHistogram> next = histograms_;
    std::vector<float> mins = mins_, maxs = maxs_;
    next.resize(channels, MagnitudeHistogram(bins_, max_bins_));
    mins.resize(channels, std::numeric_limits<float>::infinity());
    maxs.resize(channels, -std::numeric_limits<float>::infinity());
    std::vector<detail::ChannelBins<cpu::MagnitudeBinning>> bins(channels);
    for (std::size_t c = 0; c < channels; ++c) {
      const cpu::FiniteRange& r = ranges[c];
      if (r.min > r.max) continue;  // nothing finite in this channel
      mins[c] = std::fmin(mins[c], r.min);
      maxs[c] = std::fmax(maxs[c], r.max);
      const double max_abs = std::fmax(-static_cast<double>(r.min), static_cast<double>(r.max));
      if (max_abs == 0.0 && !next[c].has_range()) {
        next[c].add_zeros_before_range(per_channel - r.nonfinite);
        continue;
      }
      if (max_abs > 0.0) next[c].cover(max_abs);
      bins[c].binning = next[c].binning();
      bins[c].binning.all_finite = r.nonfinite == 0;
      bins[c].counts = next[c].counts_data();
    }
    detail::count_channel_bins(scheme(), batch, bins);
    histograms_.swap(next);
    mins_.swap(mins);
    maxs_.swap(maxs);
  }

  QParams compute_qparams() const override {
    const std::vector<ClippingRange> ranges = clipping_ranges();
    std::vector<float> lows(ranges.size()), highs(ranges.size());
    for (std::size_t c = 0; c < ranges.size(); ++c) {
      lows[c] = ranges[c].min;
      highs[c] = ranges[c].max;
    }
    const std::string fn = std::string("shrink::quant::") + name() + "::qparams";
    return qparams_from_ranges(lows, highs, scheme(), param_shape(), fn.c_str());
  }

 private:
  void require_observed(const char* what) const {
    const std::string fn = std::string("shrink::quant::") + name() + "::" + what;
    if (batches_seen() == 0) fail(fn.c_str(), std::string(name()) + " has observed no batch: call observe() first");
    detail::require_channels_seen(mins_, maxs_, fn.c_str(), name());
  }

  std::int64_t bins_;
  std::int64_t max_bins_;
  std::vector<MagnitudeHistogram> histograms_;
  std::vector<float> mins_, maxs_;
};

}  // namespace shrink::quant
