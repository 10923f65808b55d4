// Horizontal sums of SIMD float registers, for kernels whose accumulators run along k (dot products).
#pragma once

#include "shrink/cpu/simd.hpp"

namespace shrink::cpu::detail {

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// The sum of a register's 8 lanes.
SHRINK_TARGET_AVX2 inline float sum_lanes8(__m256 v) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// The sum of a register's 16 lanes. The zero-masked extracts are the unmasked instructions without GCC 12's
// -Wmaybe-uninitialized false alarm about their undefined pass-through operand.
SHRINK_TARGET_AVX512 inline float sum_lanes16(__m512 v) {
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
  const __m256 s8 = _mm256_add_ps(lo, hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
#endif

}  // namespace shrink::cpu::detail
