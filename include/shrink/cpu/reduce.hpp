// CPU reductions shared by observers and checks: ranges of finite values, the first non-finite element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "shrink/core/axis.hpp"
#include "shrink/core/config.hpp"

namespace shrink::cpu {

// Range of the finite elements of a run; min > max (+inf, -inf) when there is none.
struct FiniteRange {
  float min = std::numeric_limits<float>::infinity();
  float max = -std::numeric_limits<float>::infinity();
  std::int64_t nonfinite = 0;  // NaN and +-inf elements skipped

  void merge(const FiniteRange& o) {
    min = std::fmin(min, o.min);
    max = std::fmax(max, o.max);
    nonfinite += o.nonfinite;
  }
};

// One pass, vectorisable: eight independent lanes, non-finite values (x - x != 0) masked out.
inline FiniteRange finite_range(const float* SHRINK_RESTRICT x, std::int64_t n) {
  constexpr int kLanes = 8;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo[kLanes], hi[kLanes];
  std::int32_t bad[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    lo[l] = kInf;
    hi[l] = -kInf;
    bad[l] = 0;
  }
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = x[i + l];
      const bool finite = (v - v) == 0.0f;
      lo[l] = std::min(lo[l], finite ? v : kInf);
      hi[l] = std::max(hi[l], finite ? v : -kInf);
      bad[l] += finite ? 0 : 1;
    }
  }
  FiniteRange r;
  for (int l = 0; l < kLanes; ++l) {
    r.min = std::min(r.min, lo[l]);
    r.max = std::max(r.max, hi[l]);
    r.nonfinite += bad[l];
  }
  for (; i < n; ++i) {
    const float v = x[i];
    if ((v - v) == 0.0f) {
      r.min = std::min(r.min, v);
      r.max = std::max(r.max, v);
    } else {
      ++r.nonfinite;
    }
  }
  return r;
}

// Index of the first NaN or +-inf element, or -1.
inline std::int64_t first_nonfinite(const float* x, std::int64_t n) {
  constexpr std::int64_t kBlock = 4096;
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t len = std::min(kBlock, n - start);
    if (finite_range(x + start, len).nonfinite == 0) continue;
    for (std::int64_t i = start; i < start + len; ++i)
      if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

// Finite ranges of a contiguous tensor seen as [outer, channels, inner], one per channel group:
// entry (o, c / group, i) covers channels [c, c + group) of outer index o and inner index i, where
// `per_outer_inner` keeps outer and inner apart (per-group layout) and otherwise entries are per channel.
// `ranges` has outer * (channels / group) * inner entries when per_outer_inner, else channels / group.
inline void finite_ranges_per_channel(const float* x, const AxisSplit& split, std::int64_t group,
                                      bool per_outer_inner, FiniteRange* ranges) {
  const std::int64_t groups = split.channels / group;
  const std::int64_t count = per_outer_inner ? split.outer * groups * split.inner : groups;
  for (std::int64_t k = 0; k < count; ++k) ranges[k] = FiniteRange{};
  for (std::int64_t o = 0; o < split.outer; ++o) {
    for (std::int64_t c = 0; c < split.channels; ++c) {
      const float* row = x + (o * split.channels + c) * split.inner;
      if (!per_outer_inner) {
        ranges[c / group].merge(finite_range(row, split.inner));
        continue;
      }
      FiniteRange* out = ranges + (o * groups + c / group) * split.inner;
      for (std::int64_t i = 0; i < split.inner; ++i) {
        const float v = row[i];
        if (std::isfinite(v)) {
          out[i].min = std::fmin(out[i].min, v);
          out[i].max = std::fmax(out[i].max, v);
        } else {
          ++out[i].nonfinite;
        }
      }
    }
  }
}

}  // namespace shrink::cpu
