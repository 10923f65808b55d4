// CPU loops packing one-value-per-byte 4-bit integers into nibbles and back (layout: core/int4.hpp).
#pragma once

#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// packed[j] = (values[2j] & 0xF) | (values[2j+1] << 4) for one row of `length` values (odd: last high nibble 0).
inline void pack_int4_row(const std::int8_t* SHRINK_RESTRICT values, std::uint8_t* SHRINK_RESTRICT packed,
                          std::int64_t length) {
  std::int64_t j = 0;  // counts packed bytes
#if defined(SHRINK_CPU_SSE2)
  if (use_sse2()) {
    // Each 16-bit lane holds a pair (even value in its low byte): (lane & 0x0F) | ((lane >> 4) & 0xF0).
    const __m128i low_nibble = _mm_set1_epi16(0x000F), high_nibble = _mm_set1_epi16(0x00F0);
    for (; 2 * j + 32 <= length; j += 16) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values + 2 * j));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values + 2 * j + 16));
      const __m128i pa = _mm_or_si128(_mm_and_si128(a, low_nibble), _mm_and_si128(_mm_srli_epi16(a, 4), high_nibble));
      const __m128i pb = _mm_or_si128(_mm_and_si128(b, low_nibble), _mm_and_si128(_mm_srli_epi16(b, 4), high_nibble));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(packed + j), _mm_packus_epi16(pa, pb));
    }
  }
#endif
  for (; 2 * j + 1 < length; ++j) packed[j] = pack_nibbles(values[2 * j], values[2 * j + 1]);
  if (length % 2) packed[length / 2] = pack_nibbles(values[length - 1], 0);
}

// values[i] = element i of a packed row, sign-extended when `is_signed`.
inline void unpack_int4_row(const std::uint8_t* SHRINK_RESTRICT packed, std::int8_t* SHRINK_RESTRICT values,
                            std::int64_t length, bool is_signed) {
  std::int64_t j = 0;  // counts packed bytes
#if defined(SHRINK_CPU_SSE2)
  if (use_sse2()) {
    const __m128i nibble = _mm_set1_epi8(0x0F);
    // Sign extension of a nibble: (n ^ 8) - 8; for unsigned types xor and subtract by 0.
    const __m128i bias = _mm_set1_epi8(is_signed ? 8 : 0);
    for (; 2 * j + 32 <= length; j += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + j));
      const __m128i lo = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(bytes, nibble), bias), bias);
      const __m128i hi = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(bytes, 4), nibble), bias), bias);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 2 * j), _mm_unpacklo_epi8(lo, hi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 2 * j + 16), _mm_unpackhi_epi8(lo, hi));
    }
  }
#endif
  for (std::int64_t i = 2 * j; i < length; ++i) values[i] = static_cast<std::int8_t>(load_int4(packed, i, is_signed));
}

// Whole tensors: rows of the last dimension of `shape`, each packed row padded to whole bytes.
// Rows in parallel on the current executor (core/executor.hpp), each written by one task.
inline void pack_int4_rows(const std::int8_t* values, const Shape& shape, std::uint8_t* packed) {
  const std::int64_t last = shape.rank == 0 ? 1 : shape.values[shape.rank - 1];
  if (last == 0) return;
  const std::int64_t rows = shape.product() / last, row_bytes = int4_row_bytes(last);
  parallel_for(rows, chunk_size(rows, 2.0 * static_cast<double>(last)), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) pack_int4_row(values + r * last, packed + r * row_bytes, last);
  });
}

inline void unpack_int4_rows(const std::uint8_t* packed, const Shape& shape, bool is_signed, std::int8_t* values) {
  const std::int64_t last = shape.rank == 0 ? 1 : shape.values[shape.rank - 1];
  if (last == 0) return;
  const std::int64_t rows = shape.product() / last, row_bytes = int4_row_bytes(last);
  parallel_for(rows, chunk_size(rows, 2.0 * static_cast<double>(last)), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) unpack_int4_row(packed + r * row_bytes, values + r * last, last, is_signed);
  });
}

}  // namespace shrink::cpu
