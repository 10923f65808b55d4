// exp and log of floats: eight lanes at a time (AVX2 + FMA) and one at a time (scalar twins, bit-identical).
//
// exp(x): x = n ln2 + r with n = round(x log2 e) and |r| <= ln2 / 2, e^x = 2^n e^r.
//   e^r ~ 1 + r (1 + r (c1 + r (c2 + ... + r c5))), a degree-6 polynomial fitted for relative error (how:
//   benchmarks/notes/cpu_vector_math.md); 2^n goes straight into the exponent bits.
//   Error: at most 8.72e-8 relative (1.04 ulp) over [kExpMin, kExpMax].
//   Outside: x < kExpMin (about -87.3365, where e^x drops below FLT_MIN) flushes to +0 on purpose — the subnormal
//   results are dropped, -inf included; x > kExpMax (about 88.7228, the last float whose e^x rounds to finite)
//   gives +inf, as correctly rounded exp does; NaN gives NaN.
// log(x): x = 2^e m with m in [sqrt(1/2), sqrt 2), f = m - 1 exact, ln x = e ln2 + ln(1 + f),
//   ln(1 + f) ~ f + f^2 R(f) with R of degree 7 (fitted the same way, for relative error of ln(1 + f)).
//   Error: at most 9.61e-8 relative (1.16 ulp) for every positive finite float but 1, which gives exactly +0. The
//   bound is relative near x = 1 too, no absolute fallback: there e = 0, f is exact and is the leading term.
//   Subnormals are scaled by 2^23 first. +0 and -0 give -inf, negatives (-inf included) NaN, +inf +inf, NaN NaN.
//   (The exhaustive figures come from a one-off run over all 2^32 inputs, which also found vector == scalar for
//   every one; tests/cpu/test_vector_math.cpp samples densely and checks against 2e-7.)
//
// Scalar twins: exp_scalar / log_scalar run the same steps with std::fma and plain float operations, in the same
// order, with the same constants, so lane for lane they return the same bits as exp8 / log8 (NaN payloads
// included: both quiet the input's NaN the same way). The losses use them for row tails and on CPUs without
// AVX2 + FMA. Where the translation unit is compiled without FMA (-mfma / -march), std::fma is a libm call: correct
// on every CPU but far slower than the vector path, so use exp8 / log8 for the bulk of a row. The identity needs
// IEEE float semantics: round to nearest, no -ffast-math, no flush-to-zero / denormals-are-zero modes. The code
// contains no multiply that feeds an add outside an explicit fma, so -ffp-contract cannot change it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "shrink/core/config.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

namespace detail::vmath {

inline float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

inline std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Smallest float whose e^x is at least FLT_MIN (-126 ln2 rounded up): below it exp flushes to +0.
inline constexpr float kExpMin = -0x1.5d589ep+6f;
// Largest float whose e^x rounds to a finite float: above it exp is +inf.
inline constexpr float kExpMax = 0x1.62e42ep+6f;
inline constexpr float kLog2e = 0x1.715476p+0f;
// 1.5 * 2^23: x log2e + this has unit spacing, so the sum rounds x log2e to the nearest integer (ties even) and
// holds it in its low mantissa bits.
inline constexpr float kRoundShift = 0x1.8p+23f;
// ln2 = kLn2Hi + kLn2Lo + O(1e-16); n * kLn2Hi is exact inside an fma.
inline constexpr float kLn2Hi = 0x1.62e430p-1f;
inline constexpr float kLn2Lo = -0x1.05c610p-29f;
// e^r ~ 1 + r (1 + r (c1 + r (c2 + r (c3 + r (c4 + r c5))))) on |r| <= ln2 / 2.
inline constexpr float kExpC1 = 0x1.ffffacp-2f;
inline constexpr float kExpC2 = 0x1.5554a8p-3f;
inline constexpr float kExpC3 = 0x1.559b82p-5f;
inline constexpr float kExpC4 = 0x1.122788p-7f;
inline constexpr float kExpC5 = 0x1.384eb4p-10f;

// Bits of sqrt(1/2) rounded to float: x's bits minus these carry into the exponent exactly when m >= sqrt 2.
inline constexpr std::uint32_t kSqrtHalfBits = 0x3F3504F3u;
inline constexpr std::uint32_t kMantissaMask = 0x007FFFFFu;
inline constexpr float kMinNormal = 0x1p-126f;
inline constexpr float kSubnormalScale = 0x1p+23f;
// ln(1 + f) ~ f + f^2 (c0 + f (c1 + ... + f c7)) on f in [sqrt(1/2) - 1, sqrt 2 - 1].
inline constexpr float kLogC0 = -0x1.fffffap-2f;
inline constexpr float kLogC1 = 0x1.5556f2p-2f;
inline constexpr float kLogC2 = -0x1.00049ap-2f;
inline constexpr float kLogC3 = 0x1.98d2c0p-3f;
inline constexpr float kLogC4 = -0x1.535d30p-3f;
inline constexpr float kLogC5 = 0x1.318524p-3f;
inline constexpr float kLogC6 = -0x1.25049ep-3f;
inline constexpr float kLogC7 = 0x1.65c77cp-4f;

}  // namespace detail::vmath

#if defined(SHRINK_CPU_AVX2_DISPATCH)

// e^x in each lane; callers are SHRINK_TARGET_AVX2_FMA functions reached after use_avx2_fma().
SHRINK_TARGET_AVX2_FMA SHRINK_FORCE_INLINE __m256 exp8(__m256 x) {
  using namespace detail::vmath;
  // max/min return their second operand for NaN: NaN lanes compute on kExpMin and are replaced at the end.
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(kExpMin)), _mm256_set1_ps(kExpMax));
  const __m256 shifted = _mm256_fmadd_ps(xc, _mm256_set1_ps(kLog2e), _mm256_set1_ps(kRoundShift));
  const __m256 n = _mm256_sub_ps(shifted, _mm256_set1_ps(kRoundShift));
  // r = x - n ln2: the first step is exact, the second adds ln2's next 24 bits.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(kExpC5), r, _mm256_set1_ps(kExpC4));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC3));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC2));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExpC1));
  q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
  const __m256 p = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.0f));
  // 2^n p: shifted's low bits are n, and << 23 drops the rest, leaving n in the exponent field. The result stays
  // normal: n = -126 only with r > 0 (p >= 1), n = 128 only with r < 0 (p < 1).
  const __m256i scaled = _mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(shifted), 23));
  __m256 y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(kExpMin), _CMP_LT_OQ), _mm256_castsi256_ps(scaled));
  // Above kExpMax or NaN: x * inf is +inf, or x's NaN quieted.
  const __m256 big = _mm256_cmp_ps(x, _mm256_set1_ps(kExpMax), _CMP_NLE_UQ);
  return _mm256_blendv_ps(y, _mm256_mul_ps(x, _mm256_set1_ps(std::numeric_limits<float>::infinity())), big);
}

// ln x in each lane; callers are SHRINK_TARGET_AVX2_FMA functions reached after use_avx2_fma().
SHRINK_TARGET_AVX2_FMA SHRINK_FORCE_INLINE __m256 log8(__m256 x) {
  using namespace detail::vmath;
  // Subnormals (and the lanes <= 0, overwritten below) are scaled by 2^23 and get 23 taken off the exponent.
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(kMinNormal), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(kSubnormalScale)), tiny);
  // x = 2^e m, m in [sqrt(1/2), sqrt 2): e = (bits - bits(sqrt(1/2))) >> 23, m = low 23 bits + bits(sqrt(1/2)).
  const __m256i ix = _mm256_sub_epi32(_mm256_castps_si256(xs), _mm256_set1_epi32(static_cast<int>(kSqrtHalfBits)));
  const __m256 e =
      _mm256_add_ps(_mm256_cvtepi32_ps(_mm256_srai_epi32(ix, 23)), _mm256_and_ps(tiny, _mm256_set1_ps(-23.0f)));
  const __m256i m_bits = _mm256_add_epi32(_mm256_and_si256(ix, _mm256_set1_epi32(static_cast<int>(kMantissaMask))),
                                          _mm256_set1_epi32(static_cast<int>(kSqrtHalfBits)));
  const __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(m_bits), _mm256_set1_ps(1.0f));  // exact: m in [1/2, 2]
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(kLogC7), f, _mm256_set1_ps(kLogC6));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC5));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC4));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC3));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC2));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC1));
  q = _mm256_fmadd_ps(q, f, _mm256_set1_ps(kLogC0));
  const __m256 log_m = _mm256_fmadd_ps(_mm256_mul_ps(f, f), q, f);
  // e ln2 + ln m, e * kLn2Hi exact inside the last fma; for e = 0 the result is log_m untouched.
  __m256 y = _mm256_fmadd_ps(e, _mm256_set1_ps(kLn2Lo), log_m);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(kLn2Hi), y);
  const __m256 zero = _mm256_setzero_ps();
  y = _mm256_blendv_ps(y, _mm256_set1_ps(-std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
  // +inf and NaN: x + x is +inf, or x's NaN quieted.
  const __m256 inf_or_nan = _mm256_cmp_ps(x, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ);
  y = _mm256_blendv_ps(y, _mm256_add_ps(x, x), inf_or_nan);
  return _mm256_blendv_ps(y, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()),
                          _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
}

// e^x in sixteen lanes with exp8's steps (same reduction, same polynomial), the scaling by 2^n done by vscalefps:
// the same bits as exp8 lane for lane, +0 below kExpMin, +inf above kExpMax, NaN for NaN. 14 instructions per
// 16 lanes. Callers are SHRINK_TARGET_AVX512 functions reached after use_avx512().
SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 exp16(__m512 x) {
  using namespace detail::vmath;
  // max and min return their second operand for NaN, so NaN lanes keep x and stay NaN through the arithmetic.
  // Past 128 every result is +inf already (scalef by 2^185 at most), and n stays exact.
  // (Masked forms with every lane on: GCC 12 warns about the unmasked forms' undefined pass-through operand.)
  const __m512 lo = _mm512_set1_ps(kExpMin), hi = _mm512_set1_ps(128.0f);
  const __m512 xc = _mm512_mask_min_ps(hi, 0xFFFF, hi, _mm512_mask_max_ps(lo, 0xFFFF, lo, x));
  const __m512 shifted = _mm512_fmadd_ps(xc, _mm512_set1_ps(kLog2e), _mm512_set1_ps(kRoundShift));
  const __m512 n = _mm512_sub_ps(shifted, _mm512_set1_ps(kRoundShift));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(kExpC5), r, _mm512_set1_ps(kExpC4));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC3));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC2));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExpC1));
  q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
  const __m512 p = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.0f));
  // Lanes below kExpMin (-inf included) become +0, as exp8 flushes them; NaN compares unordered and is kept.
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpMin), _CMP_NLT_UQ);
  return _mm512_maskz_scalef_ps(keep, p, n);
}

#endif  // SHRINK_CPU_AVX2_DISPATCH

// e^x with exp8's steps and bits, one float at a time.
inline float exp_scalar(float x) {
  using namespace detail::vmath;
  float xc = x > kExpMin ? x : kExpMin;  // as _mm256_max_ps: NaN -> kExpMin
  xc = xc < kExpMax ? xc : kExpMax;
  const float shifted = std::fma(xc, kLog2e, kRoundShift);
  const float n = shifted - kRoundShift;
  float r = std::fma(-n, kLn2Hi, xc);
  r = std::fma(-n, kLn2Lo, r);
  float q = std::fma(kExpC5, r, kExpC4);
  q = std::fma(q, r, kExpC3);
  q = std::fma(q, r, kExpC2);
  q = std::fma(q, r, kExpC1);
  q = std::fma(q, r, 1.0f);
  const float p = std::fma(q, r, 1.0f);
  float y = from_bits(to_bits(p) + (to_bits(shifted) << 23));
  if (x < kExpMin) y = 0.0f;
  if (!(x <= kExpMax)) y = x * std::numeric_limits<float>::infinity();
  return y;
}

// ln x with log8's steps and bits, one float at a time.
inline float log_scalar(float x) {
  using namespace detail::vmath;
  const bool tiny = x < kMinNormal;
  const float xs = tiny ? x * kSubnormalScale : x;
  const std::uint32_t ix = to_bits(xs) - kSqrtHalfBits;
  // Two's-complement view and arithmetic shift, as _mm256_srai_epi32 (what GCC, Clang and MSVC do; C++20 requires
  // both).
  const float e = static_cast<float>(static_cast<std::int32_t>(ix) >> 23) + (tiny ? -23.0f : 0.0f);
  const float f = from_bits((ix & kMantissaMask) + kSqrtHalfBits) - 1.0f;
  float q = std::fma(kLogC7, f, kLogC6);
  q = std::fma(q, f, kLogC5);
  q = std::fma(q, f, kLogC4);
  q = std::fma(q, f, kLogC3);
  q = std::fma(q, f, kLogC2);
  q = std::fma(q, f, kLogC1);
  q = std::fma(q, f, kLogC0);
  const float log_m = std::fma(f * f, q, f);
  float y = std::fma(e, kLn2Lo, log_m);
  y = std::fma(e, kLn2Hi, y);
  if (x == 0.0f) y = -std::numeric_limits<float>::infinity();
  if (!(x < std::numeric_limits<float>::infinity())) y = x + x;
  if (x < 0.0f) y = std::numeric_limits<float>::quiet_NaN();
  return y;
}

}  // namespace shrink::cpu
