// CPU loops for affine quantization of contiguous runs: quantize, dequantize, fake-quantize.
//
// Every loop computes core/affine.hpp's per-element formulas (PyTorch's), the vector ones lane by lane: on x86 the
// SSE2 conversion cvtps2dq rounds half to even in the default rounding mode, exactly as nearbyint.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "shrink/core/affine.hpp"
#include "shrink/core/config.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

#if defined(SHRINK_CPU_SSE2)
namespace sse2 {

// Four floats to four clamped, rounded, zero-point-shifted int32; NaN/inf lanes are or-ed into `bad`.
SHRINK_FORCE_INLINE __m128i quantize4(__m128 x, __m128 inv_scale, __m128 low, __m128 high, __m128i zero_point,
                                      __m128& bad) {
  const __m128 zero_or_nan = _mm_sub_ps(x, x);
  bad = _mm_or_ps(bad, _mm_cmpunord_ps(zero_or_nan, zero_or_nan));
  const __m128 v = _mm_min_ps(_mm_max_ps(_mm_mul_ps(x, inv_scale), low), high);
  return _mm_add_epi32(_mm_cvtps_epi32(v), zero_point);
}

// Sixteen int32 lanes (already in range) narrowed to sixteen bytes.
template <class Q>
SHRINK_FORCE_INLINE __m128i narrow16(__m128i a, __m128i b, __m128i c, __m128i d) {
  const __m128i ab = _mm_packs_epi32(a, b);
  const __m128i cd = _mm_packs_epi32(c, d);
  return std::is_signed<Q>::value ? _mm_packs_epi16(ab, cd) : _mm_packus_epi16(ab, cd);
}

// Sixteen bytes widened to four vectors of four int32.
template <class Q>
SHRINK_FORCE_INLINE void widen16(__m128i bytes, __m128i out[4]) {
  __m128i lo16, hi16;
  if (std::is_signed<Q>::value) {  // sign-extend by unpacking into the high byte, then shifting down
    lo16 = _mm_srai_epi16(_mm_unpacklo_epi8(bytes, bytes), 8);
    hi16 = _mm_srai_epi16(_mm_unpackhi_epi8(bytes, bytes), 8);
    out[0] = _mm_srai_epi32(_mm_unpacklo_epi16(lo16, lo16), 16);
    out[1] = _mm_srai_epi32(_mm_unpackhi_epi16(lo16, lo16), 16);
    out[2] = _mm_srai_epi32(_mm_unpacklo_epi16(hi16, hi16), 16);
    out[3] = _mm_srai_epi32(_mm_unpackhi_epi16(hi16, hi16), 16);
  } else {
    const __m128i zero = _mm_setzero_si128();
    lo16 = _mm_unpacklo_epi8(bytes, zero);
    hi16 = _mm_unpackhi_epi8(bytes, zero);
    out[0] = _mm_unpacklo_epi16(lo16, zero);
    out[1] = _mm_unpackhi_epi16(lo16, zero);
    out[2] = _mm_unpacklo_epi16(hi16, zero);
    out[3] = _mm_unpackhi_epi16(hi16, zero);
  }
}

}  // namespace sse2
#endif

#if defined(SHRINK_CPU_AVX2_DISPATCH)
namespace avx2 {

// Thirty-two floats to thirty-two bytes; returns how many elements were done (a multiple of 32) and
// sets `nonfinite` when one of them was NaN or +-inf.
template <class Q>
SHRINK_TARGET_AVX2 std::int64_t quantize_run(const float* SHRINK_RESTRICT x, Q* SHRINK_RESTRICT q, std::int64_t n,
                                             const AffineParams& p, bool& nonfinite) {
  __m256 bad = _mm256_setzero_ps();
  const __m256 inv = _mm256_set1_ps(p.inv_scale), low = _mm256_set1_ps(p.low), high = _mm256_set1_ps(p.high);
  const __m256i zp = _mm256_set1_epi32(p.zero_point);
  const __m256i lane_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undo the per-128-bit-lane packs
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v[4];
    for (int k = 0; k < 4; ++k) {
      const __m256 in = _mm256_loadu_ps(x + i + 8 * k);
      const __m256 zero_or_nan = _mm256_sub_ps(in, in);  // NaN exactly for NaN and +-inf
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(zero_or_nan, zero_or_nan, _CMP_UNORD_Q));
      const __m256 scaled = _mm256_mul_ps(in, inv);
      v[k] = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(scaled, low), high)), zp);
    }
    const __m256i ab = _mm256_packs_epi32(v[0], v[1]);
    const __m256i cd = _mm256_packs_epi32(v[2], v[3]);
    const __m256i bytes = std::is_signed<Q>::value ? _mm256_packs_epi16(ab, cd) : _mm256_packus_epi16(ab, cd);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(bytes, lane_order));
  }
  nonfinite = nonfinite || _mm256_movemask_ps(bad) != 0;
  return i;
}

template <class Q>
SHRINK_TARGET_AVX2 std::int64_t dequantize_run(const Q* SHRINK_RESTRICT q, float* SHRINK_RESTRICT x, std::int64_t n,
                                               const AffineParams& p) {
  const __m256 scale = _mm256_set1_ps(p.scale);
  const __m256i zp = _mm256_set1_epi32(p.zero_point);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int k = 0; k < 4; ++k) {
      const __m128i eight = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i + 8 * k));
      const __m256i wide = std::is_signed<Q>::value ? _mm256_cvtepi8_epi32(eight) : _mm256_cvtepu8_epi32(eight);
      _mm256_storeu_ps(x + i + 8 * k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(wide, zp)), scale));
    }
  }
  return i;
}

}  // namespace avx2
#endif

// q[i] = quantize(x[i]) for n elements sharing one set of parameters. Q is std::int8_t or std::uint8_t.
// Returns false when an element was NaN or +-inf (its byte is then meaningless; the caller discards q).
template <class Q>
bool quantize_run(const float* SHRINK_RESTRICT x, Q* SHRINK_RESTRICT q, std::int64_t n, const AffineParams& p) {
  static_assert(sizeof(Q) == 1, "quantize_run writes bytes");
  std::int64_t i = 0;
  bool nonfinite = false;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (n >= 32 && use_avx2()) i = avx2::quantize_run(x, q, n, p, nonfinite);
#endif
#if defined(SHRINK_CPU_SSE2)
  const __m128 inv = _mm_set1_ps(p.inv_scale), low = _mm_set1_ps(p.low), high = _mm_set1_ps(p.high);
  const __m128i zp = _mm_set1_epi32(p.zero_point);
  __m128 bad = _mm_setzero_ps();
  for (; use_sse2() && i + 16 <= n; i += 16) {
    const __m128i a = sse2::quantize4(_mm_loadu_ps(x + i), inv, low, high, zp, bad);
    const __m128i b = sse2::quantize4(_mm_loadu_ps(x + i + 4), inv, low, high, zp, bad);
    const __m128i c = sse2::quantize4(_mm_loadu_ps(x + i + 8), inv, low, high, zp, bad);
    const __m128i d = sse2::quantize4(_mm_loadu_ps(x + i + 12), inv, low, high, zp, bad);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), sse2::narrow16<Q>(a, b, c, d));
  }
  nonfinite = nonfinite || _mm_movemask_ps(bad) != 0;
#endif
  for (; i < n; ++i) {
    nonfinite = nonfinite || !std::isfinite(x[i]);
    q[i] = static_cast<Q>(quantize_value(x[i], p));
  }
  return !nonfinite;
}

// q[i] = quantize(x[i]) with parameters params[i] (per-element, e.g. a row across channels).
// Returns false when an element was NaN or +-inf.
template <class Q>
bool quantize_run_varying(const float* SHRINK_RESTRICT x, Q* SHRINK_RESTRICT q, std::int64_t n,
                          const AffineParams* SHRINK_RESTRICT params) {
  bool finite = true;
  for (std::int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    q[i] = static_cast<Q>(quantize_value(x[i], params[i]));
  }
  return finite;
}

// x[i] = (q[i] - zp) * scale for n elements sharing one set of parameters.
template <class Q>
void dequantize_run(const Q* SHRINK_RESTRICT q, float* SHRINK_RESTRICT x, std::int64_t n, const AffineParams& p) {
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (n >= 32 && use_avx2()) i = avx2::dequantize_run(q, x, n, p);
#endif
#if defined(SHRINK_CPU_SSE2)
  const __m128 scale = _mm_set1_ps(p.scale);
  const __m128i zp = _mm_set1_epi32(p.zero_point);
  for (; use_sse2() && i + 16 <= n; i += 16) {
    __m128i v[4];
    sse2::widen16<Q>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), v);
    for (int k = 0; k < 4; ++k)
      _mm_storeu_ps(x + i + 4 * k, _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(v[k], zp)), scale));
  }
#endif
  for (; i < n; ++i) x[i] = dequantize_value(q[i], p);
}

template <class Q>
void dequantize_run_varying(const Q* SHRINK_RESTRICT q, float* SHRINK_RESTRICT x, std::int64_t n,
                            const AffineParams* SHRINK_RESTRICT params) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = dequantize_value(q[i], params[i]);
}

// x and y may be the same buffer (in place).
inline void fake_quantize_run(const float* x, float* y,
                              std::uint8_t* SHRINK_RESTRICT mask, std::int64_t n, const AffineParams& p) {
  std::int64_t i = 0;
#if defined(SHRINK_CPU_SSE2)
  const __m128 inv = _mm_set1_ps(p.inv_scale), scale = _mm_set1_ps(p.scale);
  const __m128 low = _mm_set1_ps(p.low), high = _mm_set1_ps(p.high);
  const __m128 low1 = _mm_set1_ps(p.low - 1.0f), high1 = _mm_set1_ps(p.high + 1.0f);
  for (; use_sse2() && i + 4 <= n; i += 4) {
    const __m128 v = _mm_min_ps(_mm_max_ps(_mm_mul_ps(_mm_loadu_ps(x + i), inv), low1), high1);
    const __m128 r = _mm_cvtepi32_ps(_mm_cvtps_epi32(v));
    _mm_storeu_ps(y + i, _mm_mul_ps(_mm_min_ps(_mm_max_ps(r, low), high), scale));
    if (mask) {
      const int inside = _mm_movemask_ps(_mm_and_ps(_mm_cmpge_ps(r, low), _mm_cmple_ps(r, high)));
      for (int k = 0; k < 4; ++k) mask[i + k] = static_cast<std::uint8_t>((inside >> k) & 1);
    }
  }
#endif
  for (; i < n; ++i) y[i] = fake_quantize_value(x[i], p, mask ? mask + i : nullptr);
}

inline void fake_quantize_run_varying(const float* x, float* y,
                                      std::uint8_t* SHRINK_RESTRICT mask, std::int64_t n,
                                      const AffineParams* SHRINK_RESTRICT params) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = fake_quantize_value(x[i], params[i], mask ? mask + i : nullptr);
}

}  // namespace shrink::cpu
