// Magnitude threshold selection by a two-pass radix select over float bit patterns, and the mask pass after it.
//
// Non-negative floats order like their bit patterns read as unsigned integers, so the k-th smallest |w| is found
// without sorting or copying: pass 1 counts the top 16 bits of each |w| (the sign is cleared, so 32768 buckets)
// and finds the bucket holding rank k; pass 2 counts the low 16 bits of only the elements in that bucket. Two
// reads of the weights and two small histograms; then one more read writes the masks.
//
// Candidates are the elements a pruner may still prune: every element, or those a current mask keeps. Their
// global order is (tensor position in the list, then row-major index); among equal |w| the higher global index is
// pruned first (amount.hpp's tie rule). +0 and -0 are equal magnitudes; subnormals order as they should. NaN and
// +-inf anywhere, kept or not, are refused.
//
// The counting passes and, when no tie at the threshold stays, the mask pass run in pieces on the current executor
// (core/executor.hpp); the counts are integers and each mask word is written by one task, so every executor gives
// the same threshold and masks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/radix_counts.hpp"
#include "shrink/prune/mask.hpp"

namespace shrink::prune {

// Pruning every candidate with |w| < value(), and of the `at` candidates with |w| == value() the `at_pruned` with
// the highest global indices, prunes exactly pruned() == k candidates.
struct MagnitudeThreshold {
  std::uint32_t bits = 0;       // the threshold |w| as float bits (sign clear); 0 when k = 0
  std::int64_t below = 0;       // candidates with |w| < threshold: all pruned
  std::int64_t at = 0;          // candidates with |w| == threshold; 0 when k = 0
  std::int64_t at_pruned = 0;   // of those, pruned: the last at_pruned in global order
  std::int64_t candidates = 0;  // candidates counted (every element, or those the current masks keep)

  float value() const { return shrink::bits_to_float(bits); }
  std::int64_t pruned() const { return below + at_pruned; }
};

namespace detail {

template <class T>
inline constexpr bool is_prunable_weight =
    std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;

constexpr std::int64_t kGatherBlock = 4096;                       // elements gathered at a time from other layouts
constexpr std::int64_t kContiguousChunk = std::int64_t{1} << 30;  // keeps 32-bit counters from overflowing
// One tensor's weights with the mask of its current candidates (nullptr: all of them).
template <class T>
struct WeightSource {
  TensorView<const T> view;
  const Mask* current = nullptr;
};

// Calls fn(base, values, n) over runs of consecutive row-major elements [base, base + n) as floats; base is a
// multiple of 64, so a run starts on a mask word. Contiguous float views are read in place, others gathered.
template <class T, class Fn>
void for_each_float_run(const TensorView<const T>& v, Fn&& fn) {
  const std::int64_t n = v.numel();
  if constexpr (std::is_same<T, float>::value) {
    if (v.is_contiguous()) {
      for (std::int64_t base = 0; base < n; base += kContiguousChunk)
        fn(base, v.data() + base, std::min(kContiguousChunk, n - base));
      return;
    }
  }
  float block[kGatherBlock];
  std::int64_t filled = 0, base = 0;
  const std::int64_t length = cpu::row_length(v.shape());
  const std::int64_t stride = cpu::row_stride(v.strides());
  cpu::for_each_row(v.shape(), v.strides(), [&](std::int64_t, std::int64_t offset) {
    const T* row = v.data() + offset;
    for (std::int64_t i = 0; i < length; ++i) {
      block[filled++] = static_cast<float>(row[i * stride]);
      if (filled == kGatherBlock) {
        fn(base, static_cast<const float*>(block), filled);
        base += filled;
        filled = 0;
      }
    }
  });
  if (filled) fn(base, static_cast<const float*>(block), filled);
}

constexpr std::int64_t kCountPiece = std::int64_t{1} << 21;  // elements a task counts (a multiple of 64)

// Totals over every candidate of the sources of count(x, base, n, words, counters), which adds n elements to
// `buckets` 32-bit counters: contiguous tensors in pieces on the current executor, each task with its own
// KeyCounter added to the totals at its end; others walked by for_each_float_run. Counts are integers, so any
// executor gives the same totals.
template <class T, class Count>
std::vector<std::int64_t> count_keys(const std::vector<WeightSource<T>>& sources, std::int64_t buckets, Count&& count) {
  std::vector<std::int64_t> totals(static_cast<std::size_t>(buckets), 0);
  std::mutex totals_mutex;
  auto add = [&](cpu::KeyCounter& counter) {
    const std::vector<std::int64_t>& t = counter.totals();
    std::lock_guard<std::mutex> lock(totals_mutex);
    for (std::size_t b = 0; b < totals.size(); ++b) totals[b] += t[b];
  };
  for (const auto& s : sources) {
    const std::uint64_t* words = s.current ? s.current->words().data() : nullptr;
    if (!s.view.is_contiguous()) {
      cpu::KeyCounter counter(buckets);
      for_each_float_run(s.view, [&](std::int64_t base, const float* x, std::int64_t n) {
        count(x, base, n, words, counter.reserve(n));
      });
      add(counter);
      continue;
    }
    const std::int64_t n = s.view.numel(), pieces = (n + kCountPiece - 1) / kCountPiece;
    parallel_for(pieces, 1, [&](std::int64_t p0, std::int64_t p1) {
      cpu::KeyCounter counter(buckets);
      std::vector<float> converted;
      for (std::int64_t p = p0; p < p1; ++p) {
        const std::int64_t base = p * kCountPiece, len = std::min(kCountPiece, n - base);
        const float* x = nullptr;
        if constexpr (std::is_same<T, float>::value) {
          x = s.view.data() + base;
        } else {
          converted.resize(static_cast<std::size_t>(len));
          for (std::int64_t i = 0; i < len; ++i)
            converted[static_cast<std::size_t>(i)] = static_cast<float>(s.view.data()[base + i]);
          x = converted.data();
        }
        count(x, base, len, words, counter.reserve(len));
      }
      add(counter);
    });
  }
  return totals;
}

// Smallest b with counts[0] + ... + counts[b] >= rank (1-based); `before` gets the sum below b.
inline std::int64_t bucket_of_rank(const std::vector<std::int64_t>& counts, std::int64_t rank, std::int64_t& before) {
  before = 0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    if (before + counts[b] >= rank) return static_cast<std::int64_t>(b);
    before += counts[b];
  }
  return -1;  // rank above the total: callers check k first
}

// "<argument>[i]" for one tensor, "<argument>[t][i]" for one of a list.
inline std::string element_name(const char* argument, std::size_t tensor, std::size_t tensors, std::int64_t index) {
  std::string name = argument;
  if (tensors > 1) name += "[" + std::to_string(tensor) + "]";
  return name + "[" + std::to_string(index) + "]";
}

// Throws for the first NaN or inf in list order (pass 1 found one).
template <class T>
[[noreturn]] void fail_nonfinite(const std::vector<WeightSource<T>>& sources, const char* function,
                                 const char* argument) {
  for (std::size_t s = 0; s < sources.size(); ++s) {
    std::int64_t found = -1;
    float value = 0.0f;
    for_each_float_run(sources[s].view, [&](std::int64_t base, const float* x, std::int64_t n) {
      for (std::int64_t i = 0; i < n && found < 0; ++i)
        if (cpu::select_key(x[i]) >= cpu::kNonfiniteSelectKey) found = base + i, value = x[i];
    });
    if (found >= 0)
      fail(function, element_name(argument, s, sources.size(), found).c_str(), value,
           "finite values (the index is row-major)");
  }
  fail(function, std::string(argument) + ": a non-finite value vanished between two reads");
}

// Checks shared by every entry point: host memory, at least one element, masks of the right shapes.
template <class T>
void check_sources(const std::vector<WeightSource<T>>& sources, const char* function, const char* argument) {
  static_assert(is_prunable_weight<T>, "magnitude pruning takes float, half or bfloat16 weights");
  if (sources.empty()) fail(function, argument, "an empty list", "at least one tensor");
  for (std::size_t s = 0; s < sources.size(); ++s) {
    const std::string name = sources.size() > 1 ? std::string(argument) + "[" + std::to_string(s) + "]" : argument;
    require_host_view(sources[s].view, function, name.c_str());
    require_nonempty(sources[s].view, function, name.c_str());
    const Mask* current = sources[s].current;
    if (current != nullptr && current->shape() != sources[s].view.shape()) {
      const std::string mask_name = sources.size() > 1 ? "current[" + std::to_string(s) + "].shape" : "current.shape";
      fail(function, mask_name.c_str(), to_string(current->shape()),
           "the shape of " + name + ", " + to_string(sources[s].view.shape()));
    }
  }
}

// Candidates over every source: all elements, or the ones the current masks keep.
template <class T>
std::int64_t count_candidates(const std::vector<WeightSource<T>>& sources) {
  std::int64_t n = 0;
  for (const auto& s : sources) n += s.current ? s.current->count_kept() : s.view.numel();
  return n;
}

// The radix select itself; sources already checked, 0 <= k <= candidates.
template <class T>
MagnitudeThreshold select_threshold(const std::vector<WeightSource<T>>& sources, std::int64_t k,
                                    std::int64_t candidates, const char* function, const char* argument) {
  MagnitudeThreshold result;
  result.candidates = candidates;
  const std::vector<std::int64_t> high_totals =
      count_keys(sources, cpu::kHighBuckets + 1,
                 [](const float* x, std::int64_t base, std::int64_t n, const std::uint64_t* words,
                    std::uint32_t* counts) { cpu::count_high(x, base, n, words, counts); });
  for (std::int64_t b = cpu::kNonfiniteSelectKey >> 16; b < cpu::kHighBuckets; ++b)
    if (high_totals[static_cast<std::size_t>(b)] != 0) fail_nonfinite(sources, function, argument);
  if (k == 0) return result;

  std::int64_t below_bucket = 0;
  const auto bucket = static_cast<std::uint32_t>(bucket_of_rank(high_totals, k, below_bucket));
  const std::vector<std::int64_t> low_totals =
      count_keys(sources, cpu::kLowBuckets,
                 [bucket](const float* x, std::int64_t base, std::int64_t n, const std::uint64_t* words,
                          std::uint32_t* counts) { cpu::count_low(x, base, n, words, bucket, counts); });
  std::int64_t below_low = 0;
  const auto low_bits = static_cast<std::uint32_t>(bucket_of_rank(low_totals, k - below_bucket, below_low));
  result.bits = (bucket << 16) | low_bits;
  result.below = below_bucket + below_low;
  result.at = low_totals[low_bits];
  result.at_pruned = k - result.below;
  return result;
}

// Masks from a threshold: each source's current mask (or all kept) with the threshold's k candidates pruned.
// The first at - at_pruned candidates at the threshold, in global order, stay.
template <class T>
std::vector<Mask> threshold_masks(const std::vector<WeightSource<T>>& sources, const MagnitudeThreshold& threshold) {
  std::vector<Mask> masks;
  masks.reserve(sources.size());
  std::int64_t ties_to_keep = threshold.at - threshold.at_pruned;
  for (const auto& s : sources) {
    masks.push_back(s.current ? *s.current : Mask(s.view.shape()));
    if (threshold.pruned() == 0) continue;
    std::uint64_t* out = masks.back().mutable_words().data();
    // One run of elements [base, base + n): words below the threshold, and the ties past those kept, pruned.
    auto prune_run = [&](std::int64_t base, const float* x, std::int64_t n) {
      for (std::int64_t j = 0; j < n; j += 64) {
        const std::int64_t len = std::min<std::int64_t>(64, n - j);
        std::uint64_t below = 0, equal = 0;
        cpu::compare_word(x + j, len, threshold.bits, below, equal);
        std::uint64_t& word = out[(base + j) >> 6];
        equal &= word;                       // only candidates count as ties
        while (equal && ties_to_keep > 0) {  // the lowest-index ties stay
          equal &= equal - 1;
          --ties_to_keep;
        }
        word &= ~(below | equal);
      }
    };
    if constexpr (std::is_same<T, float>::value) {
      if (ties_to_keep == 0 && s.view.is_contiguous()) {
        // No tie stays: every word depends on its own elements alone, pieces in parallel.
        const std::int64_t n = s.view.numel(), pieces = (n + kCountPiece - 1) / kCountPiece;
        parallel_for(pieces, 1, [&](std::int64_t p0, std::int64_t p1) {
          for (std::int64_t p = p0; p < p1; ++p)
            prune_run(p * kCountPiece, s.view.data() + p * kCountPiece, std::min(kCountPiece, n - p * kCountPiece));
        });
        continue;
      }
    }
    for_each_float_run(s.view, prune_run);  // ties kept in global order: one pass in that order
  }
  return masks;
}

template <class T>
std::vector<WeightSource<T>> sources_of(const std::vector<TensorView<const T>>& views) {
  std::vector<WeightSource<T>> sources;
  sources.reserve(views.size());
  for (const auto& v : views) sources.push_back({v, nullptr});
  return sources;
}

inline void require_rank(std::int64_t k, std::int64_t candidates, const char* function) {
  if (k < 0 || k > candidates)
    fail(function, "k", k, "a count in [0, " + std::to_string(candidates) + "], the candidates");
}

}  // namespace detail

// The threshold pruning exactly k of the elements of `weights` (as a list: concatenated in list order) by |w|.
template <class T>
MagnitudeThreshold select_magnitude_threshold(const std::vector<TensorView<const T>>& weights, std::int64_t k) {
  constexpr const char* function = "shrink::prune::select_magnitude_threshold";
  const auto sources = detail::sources_of(weights);
  detail::check_sources(sources, function, "weights");
  const std::int64_t candidates = detail::count_candidates(sources);
  detail::require_rank(k, candidates, function);
  return detail::select_threshold(sources, k, candidates, function, "weights");
}

template <class T>
MagnitudeThreshold select_magnitude_threshold(const TensorView<T>& weights, std::int64_t k) {
  return select_magnitude_threshold(std::vector<TensorView<const std::remove_const_t<T>>>{weights}, k);
}

// The same among the elements the current masks keep (one mask a tensor, in the same order).
template <class T>
MagnitudeThreshold select_magnitude_threshold(const std::vector<TensorView<const T>>& weights,
                                              const std::vector<Mask>& current, std::int64_t k) {
  constexpr const char* function = "shrink::prune::select_magnitude_threshold";
  if (current.size() != weights.size())
    fail(function, "current.size", current.size(), "one mask a tensor (" + std::to_string(weights.size()) + ")");
  auto sources = detail::sources_of(weights);
  for (std::size_t s = 0; s < sources.size(); ++s) sources[s].current = &current[s];
  detail::check_sources(sources, function, "weights");
  const std::int64_t candidates = detail::count_candidates(sources);
  detail::require_rank(k, candidates, function);
  return detail::select_threshold(sources, k, candidates, function, "weights");
}

}  // namespace shrink::prune
