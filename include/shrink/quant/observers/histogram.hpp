// HistogramObserver: PyTorch 1.13's HistogramObserver (histogram of x, L2-optimal clipping), per tensor or per channel.
//
// Each batch joins a running histogram of `bins` bins exactly as torch's forward() does it, and qparams()
// runs torch's _non_linear_param_search on it: the clipping range [new_min, new_max] then gives the scale
// and zero point through scale_zero_point_from_range (torch's _calculate_qparams). The arithmetic and its
// quirks are in pytorch_histogram.hpp. The search quantizes onto 2^bits levels (256 for int8/uint8, 16
// for int4/uint4, 2^scheme.bits when set), whatever reduce_range says, as torch's dst_nbins does. Scales match torch's;
// so do zero points, except symmetric uint8 under reduce_range, where shrink's symmetric_zero_point (64) stays inside
// [0, 127] and torch keeps 128.
//
// Per channel (an extension: torch's observer is per tensor only), every channel along scheme.axis keeps
// its own torch state and is searched on its own. Elements are counted in int64 before becoming torch's
// float32 bins, so a bin is exact up to 2^24 counts a batch (torch's per-thread float32 counters stop
// growing there). With ObserverOptions::ignore_nonfinite, NaN and +-inf are left out of the ranges and
// the histogram; a channel with no finite value in a batch keeps its state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/cpu/histogram.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/observers/channel_bins.hpp"
#include "shrink/quant/observers/pytorch_histogram.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct HistogramOptions {
  std::int64_t bins = 2048;          // histogram bins, in [1, 2^20]
  std::int64_t upsample_rate = 128;  // grid refinement when a batch widens the range, in [1, 2^16]
};

class HistogramObserver : public Observer {
 public:
  explicit HistogramObserver(const QuantScheme& scheme, HistogramOptions histogram_options = {},
                             ObserverOptions options = {})
      : Observer(scheme, options), histogram_options_(histogram_options) {
    const char* fn = "shrink::quant::HistogramObserver";
    if (histogram_options.bins < 1 || histogram_options.bins > (std::int64_t{1} << 20))
      fail(fn, "histogram_options.bins", histogram_options.bins, "a bin count in [1, 1048576]");
    if (histogram_options.upsample_rate < 1 || histogram_options.upsample_rate > (std::int64_t{1} << 16))
      fail(fn, "histogram_options.upsample_rate", histogram_options.upsample_rate, "an upsample rate in [1, 65536]");
  }

  const char* name() const override { return "HistogramObserver"; }
  const HistogramOptions& histogram_options() const { return histogram_options_; }

  // Levels the L2 search quantizes onto: 2^bits of the scheme's dtype.
  std::int64_t destination_bins() const { return std::int64_t{1} << range_bits(scheme()); }

  // torch's buffers (histogram, min_val, max_val) of one channel (0 per tensor).
  const pytorch::HistogramState& state(std::int64_t channel = 0) const {
    if (channel < 0 || channel >= static_cast<std::int64_t>(states_.size()))
      fail("shrink::quant::HistogramObserver::state", "channel", channel,
           "a channel in [0, " + std::to_string(states_.size()) + ") (observe a batch first)");
    return states_[static_cast<std::size_t>(channel)];
  }

  // The [min, max] the L2 search keeps, per tensor or per channel: what qparams() quantizes.
  std::vector<ClippingRange> clipping_ranges() const {
    const char* fn = "shrink::quant::HistogramObserver::clipping_ranges";
    if (batches_seen() == 0) fail(fn, std::string(name()) + " has observed no batch: call observe() first");
    std::vector<float> mins(states_.size()), maxs(states_.size());
    for (std::size_t c = 0; c < states_.size(); ++c) {
      mins[c] = states_[c].min_val;
      maxs[c] = states_[c].max_val;
    }
    detail::require_channels_seen(mins, maxs, fn, name());
    std::vector<ClippingRange> ranges(states_.size());
    for (std::size_t c = 0; c < states_.size(); ++c)
      ranges[c] = pytorch::non_linear_param_search(states_[c], destination_bins());
    return ranges;
  }

  void reset() override {
    Observer::reset();
    states_.clear();
  }

 protected:
  void accumulate(const ObservedBatch& batch) override {
    const std::vector<cpu::FiniteRange> ranges = detail::batch_ranges(batch, scheme());
    reject_nonfinite(batch, detail::count_nonfinite(ranges));
    const std::int64_t bins = histogram_options_.bins;
    const std::int64_t upsample = histogram_options_.upsample_rate;
    std::vector<pytorch::HistogramState> next = states_;
    next.resize(ranges.size());
    std::vector<pytorch::ForwardStep> steps(ranges.size());
    std::vector<std::int64_t> counts(ranges.size() * static_cast<std::size_t>(bins), 0);
    std::vector<detail::ChannelBins<cpu::HistcBinning>> channels(ranges.size());
    for (std::size_t c = 0; c < ranges.size(); ++c) {
      if (ranges[c].min > ranges[c].max) continue;  // nothing finite in this channel
      steps[c] = pytorch::plan_forward(next[c], ranges[c].min, ranges[c].max, bins, upsample);
      channels[c].binning = steps[c].histc;
      channels[c].binning.all_inside = ranges[c].nonfinite == 0 && steps[c].histc.lo <= ranges[c].min &&
                                       ranges[c].max <= steps[c].histc.hi;
      channels[c].counts = counts.data() + c * static_cast<std::size_t>(bins);
    }
    detail::count_channel_bins(scheme(), batch, channels);
    for (std::size_t c = 0; c < ranges.size(); ++c)
      if (channels[c].counts != nullptr) pytorch::apply_forward(next[c], steps[c], channels[c].counts, bins, upsample);
    states_.swap(next);
  }

  QParams compute_qparams() const override {
    const std::vector<ClippingRange> ranges = clipping_ranges();
    std::vector<float> mins(ranges.size()), maxs(ranges.size());
    for (std::size_t c = 0; c < ranges.size(); ++c) {
      mins[c] = ranges[c].min;
      maxs[c] = ranges[c].max;
    }
    return qparams_from_ranges(mins, maxs, scheme(), param_shape(), "shrink::quant::HistogramObserver::qparams");
  }

 private:
  HistogramOptions histogram_options_;
  std::vector<pytorch::HistogramState> states_;
};

}  // namespace shrink::quant
