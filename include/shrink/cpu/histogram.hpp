// CPU histogram binning: torch.histc's linear rule and shrink's |x| rule, counted in one pass per run.
//
// Elements are counted into eight interleaved 16-bit histograms (lanes), so runs of equal indices (zeros,
// constants) do not serialise on one counter; a skipped element gets the spare index `bins`. With AVX2 the
// indices of eight floats go from a vector register straight to the counters; otherwise a SIMD loop writes
// a block of indices that a scalar loop then counts.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// torch.histc(x, bins, min=lo, max=hi) on the CPU (torch 1.13, HistogramKernel.cpp, LINEAR_INTERPOLATION):
//   pos = (int64)(((x - lo) * bins) / (hi - lo))   in float32, truncated
// x == hi lands in the last bin (pos == bins becomes bins - 1); x outside [lo, hi] and NaN are skipped.
// When hi == lo the quotient is 0/0; torch's cast of that NaN is undefined, here the element goes to bin 0.
struct HistcBinning {
  float lo;
  float hi;
  std::int32_t bins;
  // Set when every element to be counted lies in [lo, hi] (a min/max pass showed it): the vector loops
  // then skip the range check. The result is the same either way.
  bool all_inside = false;
};

// shrink's magnitude histograms (observers/magnitude_histogram.hpp) over [0, bins / inv_width]:
//   pos = min(floor(|x| * inv_width), bins - 1)
// with the product in float32 (inv_width rounded to float) when inv_width lies in [2^-120, 2^120], as
// it does unless max|x| is below ~1e-33, and in double otherwise. The top edge and anything past it
// land in the last bin; NaN and +-inf are skipped.
struct MagnitudeBinning {
  double inv_width;
  std::int32_t bins;
  // Set when every element to be counted is finite: the vector loops then skip the finiteness check.
  bool all_finite = false;

  bool in_float() const { return inv_width >= 0x1p-120 && inv_width <= 0x1p120; }
};

// Bin of one element, or `bins` when the element is skipped.
inline std::int32_t bin_index(const HistcBinning& b, float x) {
  if (!(x >= b.lo && x <= b.hi)) return b.bins;
  float q = ((x - b.lo) * static_cast<float>(b.bins)) / (b.hi - b.lo);
  q = q > 0.0f ? q : 0.0f;  // 0/0 when hi == lo
  q = std::min(q, static_cast<float>(b.bins - 1));
  return static_cast<std::int32_t>(q);
}

inline std::int32_t bin_index(const MagnitudeBinning& b, float x) {
  const float a = std::fabs(x);
  if (!(a <= FLT_MAX)) return b.bins;
  if (b.in_float()) return static_cast<std::int32_t>(std::min(a * static_cast<float>(b.inv_width), static_cast<float>(b.bins - 1)));
  return static_cast<std::int32_t>(std::min(static_cast<double>(a) * b.inv_width, static_cast<double>(b.bins - 1)));
}

namespace detail {

// Scalar tail shared by the SIMD loops.
template <class Binning>
void bin_indices_scalar(const Binning& b, const float* x, std::int64_t begin, std::int64_t n, std::int32_t* out) {
  for (std::int64_t k = begin; k < n; ++k) out[k] = bin_index(b, x[k]);
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// Bins of eight floats under the torch.histc rule (`bins` for skipped ones), the constants hoisted; without
// kCheckRange every element must lie in [lo, hi].
template <bool kCheckRange>
struct HistcBinningAvx2 {
  __m256 lo, hi, range, scale, last, zero;
  __m256i spare;

  SHRINK_TARGET_AVX2 explicit HistcBinningAvx2(const HistcBinning& b)
      : lo(_mm256_set1_ps(b.lo)), hi(_mm256_set1_ps(b.hi)), range(_mm256_set1_ps(b.hi - b.lo)),
        scale(_mm256_set1_ps(static_cast<float>(b.bins))), last(_mm256_set1_ps(static_cast<float>(b.bins - 1))),
        zero(_mm256_setzero_ps()), spare(_mm256_set1_epi32(b.bins)) {}

  SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE __m256i operator()(__m256 v) const {
    __m256 q = _mm256_div_ps(_mm256_mul_ps(_mm256_sub_ps(v, lo), scale), range);
    q = _mm256_min_ps(_mm256_max_ps(q, zero), last);  // max(NaN, 0) is 0
    if constexpr (!kCheckRange) return _mm256_cvttps_epi32(q);
    const __m256 inside = _mm256_and_ps(_mm256_cmp_ps(v, lo, _CMP_GE_OQ), _mm256_cmp_ps(v, hi, _CMP_LE_OQ));
    return _mm256_blendv_epi8(spare, _mm256_cvttps_epi32(q), _mm256_castps_si256(inside));
  }
};

// Bins of eight floats under the magnitude rule with the product in float (b.in_float()); without
// kCheckFinite every element must be finite.
template <bool kCheckFinite>
struct MagnitudeBinningAvx2 {
  __m256 sign, max_finite, inv_width, last;
  __m256i spare;

  SHRINK_TARGET_AVX2 explicit MagnitudeBinningAvx2(const MagnitudeBinning& b)
      : sign(_mm256_set1_ps(-0.0f)), max_finite(_mm256_set1_ps(FLT_MAX)),
        inv_width(_mm256_set1_ps(static_cast<float>(b.inv_width))),
        last(_mm256_set1_ps(static_cast<float>(b.bins - 1))), spare(_mm256_set1_epi32(b.bins)) {}

  SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE __m256i operator()(__m256 v) const {
    const __m256 a = _mm256_andnot_ps(sign, v);
    const __m256i pos = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_mul_ps(a, inv_width), last));
    if constexpr (!kCheckFinite) return pos;
    const __m256 finite = _mm256_cmp_ps(a, max_finite, _CMP_LE_OQ);
    return _mm256_blendv_epi8(spare, pos, _mm256_castps_si256(finite));
  }
};

// Calls f with the vector binning for b: the unchecked form where b promises every element qualifies.
template <class F>
void with_vector_binning(const HistcBinning& b, F&& f) {
  if (b.all_inside)
    f(HistcBinningAvx2<false>(b));
  else
    f(HistcBinningAvx2<true>(b));
}
template <class F>
void with_vector_binning(const MagnitudeBinning& b, F&& f) {
  if (b.all_finite)
    f(MagnitudeBinningAvx2<false>(b));
  else
    f(MagnitudeBinningAvx2<true>(b));
}
inline bool has_float_vector_binning(const HistcBinning&) { return true; }
inline bool has_float_vector_binning(const MagnitudeBinning& b) { return b.in_float(); }

SHRINK_TARGET_AVX2 inline std::int64_t bin_indices_avx2(const HistcBinning& b, const float* x, std::int64_t n,
                                                        std::int32_t* out) {
  const HistcBinningAvx2<true> bin(b);
  std::int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), bin(_mm256_loadu_ps(x + k)));
  return k;
}

SHRINK_TARGET_AVX2 inline std::int64_t bin_indices_avx2(const MagnitudeBinning& b, const float* x, std::int64_t n,
                                                        std::int32_t* out) {
  std::int64_t k = 0;
  if (b.in_float()) {
    const MagnitudeBinningAvx2<true> bin(b);
    for (; k + 8 <= n; k += 8)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k), bin(_mm256_loadu_ps(x + k)));
    return k;
  }
  const __m256 sign = _mm256_set1_ps(-0.0f), max_finite = _mm256_set1_ps(FLT_MAX);
  const __m256i spare = _mm256_set1_epi32(b.bins);
  const __m256d inv_width = _mm256_set1_pd(b.inv_width), last = _mm256_set1_pd(static_cast<double>(b.bins - 1));
  for (; k + 8 <= n; k += 8) {
    const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k));
    const __m256 finite = _mm256_cmp_ps(a, max_finite, _CMP_LE_OQ);
    const __m256d low = _mm256_min_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)), inv_width), last);
    const __m256d high = _mm256_min_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)), inv_width), last);
    const __m256i pos = _mm256_set_m128i(_mm256_cvttpd_epi32(high), _mm256_cvttpd_epi32(low));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                        _mm256_blendv_epi8(spare, pos, _mm256_castps_si256(finite)));
  }
  return k;
}

// Adds one to lane j's counter of pos[j], j = 0..7, moving the indices to general registers two at a time.
template <std::int64_t kStride>
SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE void increment_lanes_avx2(__m256i pos, std::uint16_t* lanes, std::int64_t step) {
  const std::int64_t s = kStride ? kStride : step;
  const __m128i low = _mm256_castsi256_si128(pos), high = _mm256_extracti128_si256(pos, 1);
  const auto p01 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(low));
  const auto p23 = static_cast<std::uint64_t>(_mm_extract_epi64(low, 1));
  const auto p45 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(high));
  const auto p67 = static_cast<std::uint64_t>(_mm_extract_epi64(high, 1));
  ++lanes[0 * s + static_cast<std::uint32_t>(p01)];
  ++lanes[1 * s + static_cast<std::uint32_t>(p01 >> 32)];
  ++lanes[2 * s + static_cast<std::uint32_t>(p23)];
  ++lanes[3 * s + static_cast<std::uint32_t>(p23 >> 32)];
  ++lanes[4 * s + static_cast<std::uint32_t>(p45)];
  ++lanes[5 * s + static_cast<std::uint32_t>(p45 >> 32)];
  ++lanes[6 * s + static_cast<std::uint32_t>(p67)];
  ++lanes[7 * s + static_cast<std::uint32_t>(p67 >> 32)];
}

// Bins of 32 consecutive floats, in four registers.
struct Indices32 {
  __m256i a, b, c, d;
};

template <class VectorBinning>
SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE Indices32 bin32_avx2(const VectorBinning& bin, const float* x) {
  return {bin(_mm256_loadu_ps(x)), bin(_mm256_loadu_ps(x + 8)), bin(_mm256_loadu_ps(x + 16)), bin(_mm256_loadu_ps(x + 24))};
}

template <std::int64_t kStride>
SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE void increment32_avx2(const Indices32& p, std::uint16_t* lanes, std::int64_t step) {
  increment_lanes_avx2<kStride>(p.a, lanes, step);
  increment_lanes_avx2<kStride>(p.b, lanes, step);
  increment_lanes_avx2<kStride>(p.c, lanes, step);
  increment_lanes_avx2<kStride>(p.d, lanes, step);
}

// Counts x[0..n) (n a multiple of 32) into eight lanes `stride` counters apart, element k into lane k % 8.
// The indices of the next 32 elements are computed before this 32 are counted: a counter's address must be
// known well before its load issues, or loads run ahead of stores to the same counter and get replayed.
// Two sets of registers take turns, so no index vector is copied from one to the other.
template <std::int64_t kStride, class VectorBinning>
SHRINK_TARGET_AVX2 void count_lanes_avx2(const VectorBinning& bin, const float* x, std::int64_t n,
                                         std::uint16_t* lanes, std::int64_t stride) {
  if (n == 0) return;
  Indices32 p = bin32_avx2(bin, x);
  std::int64_t k = 32;
  for (; k + 64 <= n; k += 64) {
    const Indices32 q = bin32_avx2(bin, x + k);
    increment32_avx2<kStride>(p, lanes, stride);
    p = bin32_avx2(bin, x + k + 32);
    increment32_avx2<kStride>(q, lanes, stride);
  }
  if (k < n) {
    const Indices32 q = bin32_avx2(bin, x + k);
    increment32_avx2<kStride>(p, lanes, stride);
    p = q;
  }
  increment32_avx2<kStride>(p, lanes, stride);
}
#endif

#if defined(SHRINK_CPU_SSE2)
inline __m128i select_epi32(__m128 mask, __m128i yes, __m128i no) {
  const __m128i m = _mm_castps_si128(mask);
  return _mm_or_si128(_mm_and_si128(m, yes), _mm_andnot_si128(m, no));
}

inline std::int64_t bin_indices_sse2(const HistcBinning& b, const float* x, std::int64_t n, std::int32_t* out) {
  const __m128 lo = _mm_set1_ps(b.lo), hi = _mm_set1_ps(b.hi);
  const __m128 range = _mm_set1_ps(b.hi - b.lo), scale = _mm_set1_ps(static_cast<float>(b.bins));
  const __m128 last = _mm_set1_ps(static_cast<float>(b.bins - 1)), zero = _mm_setzero_ps();
  const __m128i spare = _mm_set1_epi32(b.bins);
  std::int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const __m128 v = _mm_loadu_ps(x + k);
    __m128 q = _mm_div_ps(_mm_mul_ps(_mm_sub_ps(v, lo), scale), range);
    q = _mm_min_ps(_mm_max_ps(q, zero), last);  // max(NaN, 0) is 0
    const __m128 inside = _mm_and_ps(_mm_cmpge_ps(v, lo), _mm_cmple_ps(v, hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), select_epi32(inside, _mm_cvttps_epi32(q), spare));
  }
  return k;
}

inline std::int64_t bin_indices_sse2(const MagnitudeBinning& b, const float* x, std::int64_t n, std::int32_t* out) {
  const __m128 sign = _mm_set1_ps(-0.0f), max_finite = _mm_set1_ps(FLT_MAX);
  const __m128i spare = _mm_set1_epi32(b.bins);
  std::int64_t k = 0;
  if (b.in_float()) {
    const __m128 inv_width = _mm_set1_ps(static_cast<float>(b.inv_width));
    const __m128 last = _mm_set1_ps(static_cast<float>(b.bins - 1));
    for (; k + 4 <= n; k += 4) {
      const __m128 a = _mm_andnot_ps(sign, _mm_loadu_ps(x + k));
      const __m128 finite = _mm_cmple_ps(a, max_finite);
      const __m128i pos = _mm_cvttps_epi32(_mm_min_ps(_mm_mul_ps(a, inv_width), last));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), select_epi32(finite, pos, spare));
    }
    return k;
  }
  const __m128d inv_width = _mm_set1_pd(b.inv_width), last = _mm_set1_pd(static_cast<double>(b.bins - 1));
  for (; k + 4 <= n; k += 4) {
    const __m128 a = _mm_andnot_ps(sign, _mm_loadu_ps(x + k));
    const __m128 finite = _mm_cmple_ps(a, max_finite);
    const __m128d low = _mm_min_pd(_mm_mul_pd(_mm_cvtps_pd(a), inv_width), last);
    const __m128d high = _mm_min_pd(_mm_mul_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)), inv_width), last);
    const __m128i pos = _mm_unpacklo_epi64(_mm_cvttpd_epi32(low), _mm_cvttpd_epi32(high));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), select_epi32(finite, pos, spare));
  }
  return k;
}
#endif

}  // namespace detail

// Bin indices of x[0..n) into out[0..n) (`bins` for skipped elements), through the widest SIMD level on.
template <class Binning>
void bin_indices(const Binning& b, const float* SHRINK_RESTRICT x, std::int64_t n, std::int32_t* SHRINK_RESTRICT out) {
  std::int64_t done = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) done = detail::bin_indices_avx2(b, x, n, out);
#endif
#if defined(SHRINK_CPU_SSE2)
  if (done == 0 && use_sse2()) done = detail::bin_indices_sse2(b, x, n, out);
#endif
  detail::bin_indices_scalar(b, x, done, n, out);
}

// Adds x[0..n) binned by `binning` straight to counts[0..bins): for runs too short to repay BinCounter's
// eight lanes (a few elements a bin).
template <class Binning>
void count_bins(const Binning& binning, const float* x, std::int64_t n, std::int64_t* counts) {
  constexpr std::int64_t kBlock = 128;
  std::int32_t index[kBlock];
  for (std::int64_t start = 0; start < n; start += kBlock) {
    const std::int64_t len = std::min<std::int64_t>(kBlock, n - start);
    bin_indices(binning, x + start, len, index);
    for (std::int64_t k = 0; k < len; ++k)
      if (index[k] < binning.bins) ++counts[index[k]];
  }
}

// Counts binned elements of many runs, then adds the totals to a caller's int64 histogram.
// Reuse one counter for all runs of a histogram: it owns eight copies of the bins, counted round robin.
class BinCounter {
 public:
  // Room for binnings of up to `capacity` bins.
  explicit BinCounter(std::int32_t capacity)
      : capacity_(capacity),
        stride_(static_cast<std::int64_t>(capacity) + 1 + kLanePad),
        lanes_(static_cast<std::size_t>(kLanes * stride_), 0) {}

  std::int32_t capacity() const { return capacity_; }

  // Counts x[0..n) binned by `binning` (binning.bins <= capacity()).
  template <class Binning>
  void add(const Binning& binning, const float* x, std::int64_t n) {
    for (std::int64_t start = 0; start < n; start += kMaxRun) {
      const std::int64_t len = std::min(kMaxRun, n - start);
      const std::int64_t per_lane = (len + kLanes - 1) / kLanes;  // most one lane can receive from this run
      if (lane_load_ + per_lane > kLaneMax) fold();
      add_run(binning, x + start, len);
      lane_load_ += per_lane;
    }
  }

  // Adds the counts gathered since the last flush to counts[0..bins) (skipped elements, counted at
  // index `bins`, are dropped) and starts again from zero.
  void flush_into(std::int64_t* counts, std::int32_t bins) {
    fold();
    if (totals_.empty()) return;
    for (std::int32_t j = 0; j < bins; ++j) counts[j] += totals_[static_cast<std::size_t>(j)];
    totals_.clear();
  }

 private:
  static constexpr int kLanes = 8;
  static constexpr std::int64_t kBlock = 128;  // short phases let the loads of one overlap the counting of the last
  // 16-bit lanes keep eight copies of 2048 bins within a 32 KB L1 cache. Elements go to the lanes round
  // robin, so a run of n adds at most ceil(n / 8) to any counter; the lanes are folded into 64-bit totals
  // before that bound could pass 65535.
  static constexpr std::int64_t kLaneMax = 65535;
  // Lanes of 2049 counters would start 4098 bytes apart, so the same bin of two lanes would share the low
  // 12 address bits and stall loads behind unrelated stores (4K aliasing); the padding staggers them.
  static constexpr std::int64_t kLanePad = 96;
  static constexpr std::int64_t kMaxRun = kLanes * kLaneMax;
  static constexpr std::int64_t kCommonStride = 2048 + 1 + kLanePad;  // 2048 bins, PyTorch's and NVIDIA's default

  // Counts a run of at most kMaxRun elements: whole blocks with a fixed trip count, then the tail.
  template <class Binning>
  void add_run(const Binning& binning, const float* x, std::int64_t n) {
    std::int32_t index[kBlock];
    std::uint16_t* const lanes = lanes_.data();
    const std::int64_t stride = stride_;
    std::int64_t start = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
    if (use_avx2() && detail::has_float_vector_binning(binning)) {
      start = n / 32 * 32;
      detail::with_vector_binning(binning, [&](const auto& bin) {
        if (stride == kCommonStride)
          detail::count_lanes_avx2<kCommonStride>(bin, x, start, lanes, stride);
        else
          detail::count_lanes_avx2<0>(bin, x, start, lanes, stride);
      });
    }
#endif
    for (; start + kBlock <= n; start += kBlock) {
      bin_indices(binning, x + start, kBlock, index);
      if (stride == kCommonStride)
        count_block<kCommonStride>(lanes, index, stride);
      else
        count_block<0>(lanes, index, stride);
    }
    bin_indices(binning, x + start, n - start, index);
    for (std::int64_t k = 0; k < n - start; ++k) ++lanes[(k % kLanes) * stride + index[k]];
  }

  // Counts one block of indices, element k into lane k % kLanes. With the stride known at compile time each
  // increment addresses its lane through a constant displacement: one instruction fewer an element.
  template <std::int64_t kStride>
  static void count_block(std::uint16_t* lanes, const std::int32_t* index, std::int64_t stride) {
    const std::int64_t step = kStride ? kStride : stride;
    for (std::int64_t k = 0; k < kBlock; k += kLanes)
      for (int lane = 0; lane < kLanes; ++lane) ++lanes[lane * step + index[k + lane]];
  }

  void fold() {
    if (lane_load_ == 0) return;
    if (totals_.empty()) totals_.assign(static_cast<std::size_t>(stride_), 0);
    for (int lane = 0; lane < kLanes; ++lane) {
      std::uint16_t* l = lanes_.data() + lane * stride_;
      for (std::int64_t j = 0; j < stride_; ++j) totals_[static_cast<std::size_t>(j)] += l[j];
      std::fill(l, l + stride_, std::uint16_t{0});
    }
    lane_load_ = 0;
  }

  std::int32_t capacity_;
  std::int64_t stride_;               // capacity + 1 counters a lane, then the padding
  std::vector<std::uint16_t> lanes_;
  std::vector<std::int64_t> totals_;  // folded counts while a flush is pending
  std::int64_t lane_load_ = 0;        // bound on any lane counter since the last fold
};

}  // namespace shrink::cpu
