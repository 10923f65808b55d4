// What the histogram observers share: a batch's finite range and bin counts per channel, the clipping range type.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
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
// On the current executor: channels in parallel, or with few channels the pieces of each, counted apart and added
// up after; counts are integers, so every executor gives the same counts.
template <class Binning>
void count_channel_bins(const QuantScheme& scheme, const ObservedBatch& batch, const std::vector<ChannelBins<Binning>>& channels) {
  constexpr std::int64_t kLongRow = 256;
  constexpr std::int64_t kElementsPerBinForLanes = 16;
  constexpr std::int64_t kPiece = std::int64_t{1} << 18;  // elements of a piece when few channels share the work
  const bool per_tensor = scheme.granularity == Granularity::per_tensor;
  const AxisSplit s = per_tensor ? AxisSplit{1, 1, batch.numel()} : batch.split;
  std::int32_t bins = 0;
  for (const ChannelBins<Binning>& ch : channels) bins = std::max(bins, ch.binning.bins);
  if (s.inner >= kLongRow) {
    const bool lanes = s.outer * s.inner >= kElementsPerBinForLanes * bins;
    // Elements [begin, end) of channel c (its rows laid end to end) into counts.
    auto count_elements = [&](const ChannelBins<Binning>& ch, std::int64_t c, std::int64_t begin, std::int64_t end,
                              cpu::BinCounter& counter, std::int64_t* counts) {
      for (std::int64_t o = begin / s.inner; o * s.inner < end; ++o) {
        const std::int64_t from = std::max(begin, o * s.inner), to = std::min(end, (o + 1) * s.inner);
        const float* row = batch.data + (o * s.channels + c) * s.inner + (from - o * s.inner);
        if (lanes)
          counter.add(ch.binning, row, to - from);
        else
          cpu::count_bins(ch.binning, row, to - from, counts);
      }
      if (lanes) counter.flush_into(counts, ch.binning.bins);
    };
    const std::int64_t per_channel = s.outer * s.inner;
    if (s.channels >= 8 || per_channel <= kPiece) {
      parallel_for(s.channels, chunk_size(s.channels, 4.0 * static_cast<double>(per_channel)),
                   [&](std::int64_t c0, std::int64_t c1) {
                     cpu::BinCounter counter(lanes ? bins : 0);
                     for (std::int64_t c = c0; c < c1; ++c) {
                       const ChannelBins<Binning>& ch = channels[static_cast<std::size_t>(c)];
                       if (ch.counts != nullptr) count_elements(ch, c, 0, per_channel, counter, ch.counts);
                     }
                   });
      return;
    }
    const std::int64_t pieces = (per_channel + kPiece - 1) / kPiece;
    for (std::int64_t c = 0; c < s.channels; ++c) {
      const ChannelBins<Binning>& ch = channels[static_cast<std::size_t>(c)];
      if (ch.counts == nullptr) continue;
      std::vector<std::vector<std::int64_t>> piece_counts(static_cast<std::size_t>(pieces));
      parallel_for(pieces, 1, [&](std::int64_t p0, std::int64_t p1) {
        cpu::BinCounter counter(lanes ? bins : 0);
        for (std::int64_t p = p0; p < p1; ++p) {
          std::vector<std::int64_t>& counts = piece_counts[static_cast<std::size_t>(p)];
          counts.assign(static_cast<std::size_t>(ch.binning.bins), 0);
          count_elements(ch, c, p * kPiece, std::min(per_channel, (p + 1) * kPiece), counter, counts.data());
        }
      });
      for (const std::vector<std::int64_t>& counts : piece_counts)
        for (std::int32_t j = 0; j < ch.binning.bins; ++j) ch.counts[j] += counts[static_cast<std::size_t>(j)];
    }
    return;
  }
  // Short rows: ranges of channels in parallel, each task walking all outer indices for its own channels.
  parallel_for(s.channels, chunk_size(s.channels, 4.0 * static_cast<double>(s.outer * s.inner)),
               [&](std::int64_t c0, std::int64_t c1) {
                 for (std::int64_t o = 0; o < s.outer; ++o) {
                   for (std::int64_t c = c0; c < c1; ++c) {
                     const ChannelBins<Binning>& ch = channels[static_cast<std::size_t>(c)];
                     if (ch.counts == nullptr) continue;
                     const float* x = batch.data + (o * s.channels + c) * s.inner;
                     for (std::int64_t i = 0; i < s.inner; ++i) {
                       const std::int32_t bin = cpu::bin_index(ch.binning, x[i]);
                       if (bin < ch.binning.bins) ++ch.counts[bin];
                     }
                   }
                 }
               });
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
