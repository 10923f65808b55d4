// CPU loops of the float casts: float <-> half / bfloat16 over contiguous runs and scaled FP8 encode/decode.
// Validation lives in quant/cast.hpp.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

#if defined(SHRINK_CPU_AVX2_DISPATCH)
namespace avx2 {
// vcvtps2ph with round-to-nearest-even gives the same bits as detail::float_to_half_bits, NaN payloads included.
SHRINK_TARGET_AVX2_F16C inline std::int64_t float_to_half(const float* SHRINK_RESTRICT x, std::uint16_t* SHRINK_RESTRICT bits,
                                                          std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i b = _mm256_cvtps_ph(_mm256_loadu_ps(x + i + 8), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i + 8), b);
  }
  return i;
}

SHRINK_TARGET_AVX2_F16C inline std::int64_t half_to_float(const std::uint16_t* SHRINK_RESTRICT bits,
                                                          float* SHRINK_RESTRICT out, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))));
    _mm256_storeu_ps(out + i + 8, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i + 8))));
  }
  return i;
}

// bfloat16 is the top half of a float rounded to nearest even at bit 16; NaN keeps its top bits, quieted.
// Eight floats to eight bfloat16 bit patterns, one per 32-bit lane.
SHRINK_TARGET_AVX2 inline __m256i bfloat16_bits8(const float* p) {
  const __m256i v = _mm256_castps_si256(_mm256_loadu_ps(p));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(v, _mm256_set1_epi32(0x7FFF)), lsb);
  const __m256i is_nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
  const __m256i quieted = _mm256_or_si256(v, _mm256_set1_epi32(static_cast<int>(shrink::kFloatQuietBit)));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quieted, is_nan), 16);
}

SHRINK_TARGET_AVX2 inline std::int64_t float_to_bfloat16(const float* SHRINK_RESTRICT x, std::uint16_t* SHRINK_RESTRICT bits,
                                                     std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i packed = _mm256_packus_epi32(bfloat16_bits8(x + i), bfloat16_bits8(x + i + 8));  // per 128-bit lane
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(bits + i), _mm256_permute4x64_epi64(packed, 0xD8));
  }
  return i;
}

SHRINK_TARGET_AVX2 inline std::int64_t bfloat16_to_float(const std::uint16_t* SHRINK_RESTRICT bits,
                                                     float* SHRINK_RESTRICT out, std::int64_t n) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), infinity = _mm256_set1_epi32(0x7F800000);
  const __m256i quiet = _mm256_set1_epi32(static_cast<int>(shrink::kFloatQuietBit));
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + i))), 16);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, magnitude), infinity);
    _mm256_storeu_ps(out + i, _mm256_castsi256_ps(_mm256_or_si256(v, _mm256_and_si256(is_nan, quiet))));
  }
  return i;
}
}  // namespace avx2
#endif

// The element loops work on the bit patterns: half and bfloat16 are standard-layout structs whose only member
// is the uint16_t, so a pointer to one is a pointer to its bits.
inline void float_to_half(const float* SHRINK_RESTRICT x, half* out, std::int64_t n) {
  std::uint16_t* SHRINK_RESTRICT bits = reinterpret_cast<std::uint16_t*>(out);
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2_f16c()) i = avx2::float_to_half(x, bits, n);
#endif
  for (; i < n; ++i) bits[i] = shrink::float_to_half_bits(x[i]);
}

inline void half_to_float(const half* x, float* SHRINK_RESTRICT out, std::int64_t n) {
  const std::uint16_t* SHRINK_RESTRICT bits = reinterpret_cast<const std::uint16_t*>(x);
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2_f16c()) i = avx2::half_to_float(bits, out, n);
#endif
  for (; i < n; ++i) out[i] = shrink::half_bits_to_float(bits[i]);
}

inline void float_to_bfloat16(const float* SHRINK_RESTRICT x, bfloat16* out, std::int64_t n) {
  std::uint16_t* SHRINK_RESTRICT bits = reinterpret_cast<std::uint16_t*>(out);
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) i = avx2::float_to_bfloat16(x, bits, n);
#endif
  for (; i < n; ++i) bits[i] = shrink::float_to_bfloat16_bits(x[i]);
}

inline void bfloat16_to_float(const bfloat16* x, float* SHRINK_RESTRICT out, std::int64_t n) {
  const std::uint16_t* SHRINK_RESTRICT bits = reinterpret_cast<const std::uint16_t*>(x);
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) i = avx2::bfloat16_to_float(bits, out, n);
#endif
  for (; i < n; ++i) out[i] = shrink::bfloat16_bits_to_float(bits[i]);
}

// out_i = fp8(x_i / scale), one scale for the run.
template <Fp8Format F>
void encode_fp8_run(const float* SHRINK_RESTRICT x, std::uint8_t* SHRINK_RESTRICT out, std::int64_t n, float scale,
                    bool saturate) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = shrink::fp8_encode<F>(x[i] / scale, saturate);
}

// out_i = fp8(x_i / scale_i), a scale per element (per-channel quantization along the last axis).
template <Fp8Format F>
void encode_fp8_run(const float* SHRINK_RESTRICT x, std::uint8_t* SHRINK_RESTRICT out, std::int64_t n,
                    const float* SHRINK_RESTRICT scales, bool saturate) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = shrink::fp8_encode<F>(x[i] / scales[i], saturate);
}

// The float value of every FP8 code: decoding is a table lookup.
template <Fp8Format F>
std::array<float, 256> fp8_decode_table() {
  std::array<float, 256> table{};
  for (std::size_t code = 0; code < 256; ++code) table[code] = shrink::fp8_decode<F>(static_cast<std::uint8_t>(code));
  return table;
}

// out_i = value(code_i) * scale.
inline void decode_fp8_run(const std::uint8_t* SHRINK_RESTRICT codes, float* SHRINK_RESTRICT out, std::int64_t n,
                           const float* SHRINK_RESTRICT table, float scale) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = table[codes[i]] * scale;
}

// out_i = value(code_i) * scale_i.
inline void decode_fp8_run(const std::uint8_t* SHRINK_RESTRICT codes, float* SHRINK_RESTRICT out, std::int64_t n,
                           const float* SHRINK_RESTRICT table, const float* SHRINK_RESTRICT scales) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = table[codes[i]] * scales[i];
}

}  // namespace shrink::cpu
