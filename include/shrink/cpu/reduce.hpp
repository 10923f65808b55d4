// CPU reductions shared by observers and checks: ranges of finite values, the first non-finite element.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/config.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/cpu/simd.hpp"

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

#if defined(SHRINK_CPU_AVX2_DISPATCH)
namespace avx2 {
// As finite_range below, eight floats a vector, over whole blocks of 32. The careful form (non-finite values
// masked and counted) costs three more operations a vector, so blocks of 4096 first take a fast pass that
// only tracks min, max and the largest magnitude bit pattern; a block whose magnitudes reach the infinity
// pattern (NaN or inf inside) is done again carefully.
SHRINK_TARGET_AVX2 inline FiniteRange finite_range_careful(const float* SHRINK_RESTRICT x, std::int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  __m256 lo = _mm256_set1_ps(kInf), hi = _mm256_set1_ps(-kInf);
  __m256i bad = _mm256_setzero_si256();
  for (std::int64_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 finite_or_nan = _mm256_add_ps(v, _mm256_sub_ps(v, v));
    lo = _mm256_min_ps(finite_or_nan, lo);
    hi = _mm256_max_ps(finite_or_nan, hi);
    bad = _mm256_sub_epi32(bad, _mm256_castps_si256(_mm256_cmp_ps(finite_or_nan, finite_or_nan, _CMP_UNORD_Q)));
  }
  alignas(32) float lanes_lo[8], lanes_hi[8];
  alignas(32) std::int32_t lanes_bad[8];
  _mm256_store_ps(lanes_lo, lo);
  _mm256_store_ps(lanes_hi, hi);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes_bad), bad);
  FiniteRange r;
  for (int l = 0; l < 8; ++l) {
    r.min = std::min(r.min, lanes_lo[l]);
    r.max = std::max(r.max, lanes_hi[l]);
    r.nonfinite += lanes_bad[l];
  }
  return r;
}

SHRINK_TARGET_AVX2 inline FiniteRange finite_range(const float* SHRINK_RESTRICT x, std::int64_t n, std::int64_t& done) {
  constexpr std::int64_t kBlock = 4096;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
  FiniteRange r;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += kBlock) {
    const std::int64_t len = std::min(kBlock, (n - i) / 32 * 32);
    __m256 lo[4], hi[4];
    __m256i magnitude[4];
    for (int k = 0; k < 4; ++k) {
      lo[k] = _mm256_set1_ps(kInf);
      hi[k] = _mm256_set1_ps(-kInf);
      magnitude[k] = _mm256_setzero_si256();
    }
    for (std::int64_t j = 0; j < len; j += 32) {
      for (int k = 0; k < 4; ++k) {  // four independent chains hide the min/max latency
        const __m256 v = _mm256_loadu_ps(x + i + j + 8 * k);
        lo[k] = _mm256_min_ps(v, lo[k]);
        hi[k] = _mm256_max_ps(v, hi[k]);
        magnitude[k] = _mm256_max_epi32(magnitude[k], _mm256_and_si256(_mm256_castps_si256(v), magnitude_mask));
      }
    }
    const __m256i largest = _mm256_max_epi32(_mm256_max_epi32(magnitude[0], magnitude[1]),
                                             _mm256_max_epi32(magnitude[2], magnitude[3]));
    const __m256i nonfinite = _mm256_cmpgt_epi32(largest, _mm256_set1_epi32(0x7F7FFFFF));  // >= inf's pattern
    if (!_mm256_testz_si256(nonfinite, nonfinite)) {
      r.merge(finite_range_careful(x + i, len));
    } else {
      alignas(32) float lanes_lo[8], lanes_hi[8];
      _mm256_store_ps(lanes_lo, _mm256_min_ps(_mm256_min_ps(lo[0], lo[1]), _mm256_min_ps(lo[2], lo[3])));
      _mm256_store_ps(lanes_hi, _mm256_max_ps(_mm256_max_ps(hi[0], hi[1]), _mm256_max_ps(hi[2], hi[3])));
      for (int l = 0; l < 8; ++l) {
        r.min = std::min(r.min, lanes_lo[l]);
        r.max = std::max(r.max, lanes_hi[l]);
      }
    }
    if (len < kBlock) {
      i += len;
      break;
    }
  }
  done = i;
  return r;
}
}  // namespace avx2
#endif

// One pass over a run. A non-finite v turns into NaN through v + (v - v); min/max then ignore it
// (minps/maxps return their second operand when the first is NaN) and an unordered compare counts it.
inline FiniteRange finite_range(const float* SHRINK_RESTRICT x, std::int64_t n) {
  FiniteRange r;
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (n >= 32 && use_avx2()) r = avx2::finite_range(x, n, i);
#endif
#if defined(SHRINK_CPU_SSE2)
  if (i == 0 && n >= 16 && use_sse2()) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    __m128 lo[4], hi[4];
    __m128i bad = _mm_setzero_si128();
    for (int k = 0; k < 4; ++k) {
      lo[k] = _mm_set1_ps(kInf);
      hi[k] = _mm_set1_ps(-kInf);
    }
    for (; i + 16 <= n; i += 16) {
      for (int k = 0; k < 4; ++k) {  // four independent chains hide the min/max latency
        const __m128 v = _mm_loadu_ps(x + i + 4 * k);
        const __m128 finite_or_nan = _mm_add_ps(v, _mm_sub_ps(v, v));
        lo[k] = _mm_min_ps(finite_or_nan, lo[k]);
        hi[k] = _mm_max_ps(finite_or_nan, hi[k]);
        bad = _mm_sub_epi32(bad, _mm_castps_si128(_mm_cmpunord_ps(finite_or_nan, finite_or_nan)));
      }
    }
    alignas(16) float lanes_lo[4], lanes_hi[4];
    alignas(16) std::int32_t lanes_bad[4];
    _mm_store_ps(lanes_lo, _mm_min_ps(_mm_min_ps(lo[0], lo[1]), _mm_min_ps(lo[2], lo[3])));
    _mm_store_ps(lanes_hi, _mm_max_ps(_mm_max_ps(hi[0], hi[1]), _mm_max_ps(hi[2], hi[3])));
    _mm_store_si128(reinterpret_cast<__m128i*>(lanes_bad), bad);
    for (int l = 0; l < 4; ++l) {
      r.min = std::min(r.min, lanes_lo[l]);
      r.max = std::max(r.max, lanes_hi[l]);
      r.nonfinite += lanes_bad[l];
    }
  }
#endif
  for (; i < n; ++i) {
    const float v = x[i];
    if (std::isfinite(v)) {
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

inline constexpr std::int64_t kRangeChunk = std::int64_t{1} << 16;  // elements a task of a parallel range covers

// finite_range of a long run on the current executor: fixed chunks of kRangeChunk elements, their ranges merged in
// chunk order, so every executor gives the same bits (±0 included).
inline FiniteRange finite_range_parallel(const float* x, std::int64_t n) {
  const std::int64_t chunks = (n + kRangeChunk - 1) / kRangeChunk;
  if (chunks <= 1) return finite_range(x, n);
  std::vector<FiniteRange> parts(static_cast<std::size_t>(chunks));
  parallel_for(chunks, chunk_size(chunks, static_cast<double>(kRangeChunk)), [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c)
      parts[static_cast<std::size_t>(c)] =
          finite_range(x + c * kRangeChunk, std::min(kRangeChunk, n - c * kRangeChunk));
  });
  FiniteRange r;
  for (const FiniteRange& p : parts) r.merge(p);
  return r;
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
  const double row_cost = static_cast<double>(split.inner);
  if (!per_outer_inner) {
    // Each group's rows in the serial order (o, then c), groups in parallel: each range written by one task.
    parallel_for(groups, chunk_size(groups, row_cost * static_cast<double>(split.outer * group)),
                 [&](std::int64_t g0, std::int64_t g1) {
                   for (std::int64_t g = g0; g < g1; ++g)
                     for (std::int64_t o = 0; o < split.outer; ++o)
                       for (std::int64_t c = g * group; c < (g + 1) * group; ++c)
                         ranges[g].merge(finite_range(x + (o * split.channels + c) * split.inner, split.inner));
                 });
    return;
  }
  // Per outer index in parallel: entries (o, ·, ·) belong to o alone.
  parallel_for(split.outer, chunk_size(split.outer, row_cost * static_cast<double>(split.channels)),
               [&](std::int64_t o0, std::int64_t o1) {
                 for (std::int64_t o = o0; o < o1; ++o) {
                   for (std::int64_t c = 0; c < split.channels; ++c) {
                     const float* row = x + (o * split.channels + c) * split.inner;
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
               });
}

}  // namespace shrink::cpu
