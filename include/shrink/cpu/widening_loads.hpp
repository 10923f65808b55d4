// Vector loads that widen 8 (AVX2) or 16 (AVX-512) stored elements (float, half, bfloat16, int8) to floats; shared
// by the kernels that read any of these element types (softmax rows, KL rows, the float GEMM panels).
#pragma once

#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"

#if defined(SHRINK_CPU_AVX2_DISPATCH)
#include <immintrin.h>

namespace shrink::cpu::detail {

SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE __m256 load8(const half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// A bfloat16 is the top half of a float (a NaN stays a NaN).
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE __m256 load8(const bfloat16* p) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16));
}
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE __m256 load8(const std::int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The conversions use the zero-masked forms with every lane on: the same instructions as the unmasked ones, without
// GCC 12's -Wmaybe-uninitialized false alarm about their undefined pass-through operand.
inline constexpr __mmask16 kAllLanes16 = 0xFFFF;

SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 load16(const half* p) {
  return _mm512_maskz_cvtph_ps(kAllLanes16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 load16(const bfloat16* p) {
  const __m512i wide =
      _mm512_maskz_cvtepu16_epi32(kAllLanes16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAllLanes16, wide, 16));
}
SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 load16(const std::int8_t* p) {
  const __m512i wide = _mm512_maskz_cvtepi8_epi32(kAllLanes16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm512_maskz_cvtepi32_ps(kAllLanes16, wide);
}

}  // namespace shrink::cpu::detail
#endif
