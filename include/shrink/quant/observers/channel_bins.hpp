// What the histogram observers share: a batch's finite range and bin counts per channel, the clipping range type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/cpu/histogram.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

// The range an observer clips to, per tensor or per channel; qparams come from it through
// scale_zero_point_from_range.
struct ClippingRange {
  float min = 0.0f;
  float max = 0.0f;
};

namespace detail {

// A channel's binning rule and where its counts go; a null `counts` leaves the channel out.
template <class Binning>
struct ChannelBins {
  Binning binning;
  std::int64_t* counts = nullptr;  // binning.bins entries
};

// Adds every element of the batch to its channel's counts. Channel c is the rows (o, c) of the
// [outer, channels, inner] view. Channels with many elements a bin go through cpu::BinCounter; others
// are counted directly, row by row when rows are long, element by element in memory order when short.
template <class Binning>
void count_channel_bins(const QuantScheme& scheme, const ObservedBatch& batch, const std::vector<ChannelBins<Binning>>& channels) {
  constexpr std::int64_t kLongRow = 256;
  constexpr std::int64_t kElementsPerBinForLanes = 16;
  const bool per_tensor = scheme.granularity == Granularity::per_tensor;
  const AxisSplit s = per_tensor ? AxisSplit{1, 1, batch.numel()} : batch.split;
  std::int32_t bins = 0;
  for (const ChannelBins<Binning>& ch : channels) bins = std::max(bins, ch.binning.bins);
  if (s.inner >= kLongRow) {
    const bool lanes = s.outer * s.inner >= kElementsPerBinForLanes * bins;
    cpu::BinCounter counter(lanes ? bins : 0);
    for (std::int64_t c = 0; c < s.channels; ++c) {
      const ChannelBins<Binning>& ch = channels[static_cast<std::size_t>(c)];
      if (ch.counts == nullptr) continue;
      for (std::int64_t o = 0; o < s.outer; ++o) {
        const float* row = batch.data + (o * s.channels + c) * s.inner;
        if (lanes) {
          counter.add(ch.binning, row, s.inner);
        } else {
          cpu::count_bins(ch.binning, row, s.inner, ch.counts);
        }
      }
      if (lanes) counter.flush_into(ch.counts, ch.binning.bins);
    }
    return;
  }
  const float* x = batch.data;
  for (std::int64_t o = 0; o < s.outer; ++o) {
    for (std::int64_t c = 0; c < s.channels; ++c, x += s.inner) {
      const ChannelBins<Binning>& ch = channels[static_cast<std::size_t>(c)];
      if (ch.counts == nullptr) continue;
      for (std::int64_t i = 0; i < s.inner; ++i) {
        const std::int32_t bin = cpu::bin_index(ch.binning, x[i]);
        if (bin < ch.binning.bins) ++ch.counts[bin];
      }
    }
  }
}

// Throws when a channel has never seen a finite value (possible only with ignore_nonfinite).
inline void require_channels_seen(const std::vector<float>& mins, const std::vector<float>& maxs, const char* function,
                                  const char* observer) {
  for (std::size_t c = 0; c < mins.size(); ++c)
    if (!(mins[c] <= maxs[c]))
      fail(function, std::string(observer) + ": " + (mins.size() == 1 ? std::string("the tensor") : "channel " + std::to_string(c)) +
                         " has seen no finite value (every element observed was NaN or infinite)");
}

}  // namespace detail
}  // namespace shrink::quant
