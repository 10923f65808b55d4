// The AVX2 kernels of dense -> CSR (sparse/csr.hpp) and the choice of them: count the kept elements of a float row
// (nonzero, or set in a mask) while checking they are finite, then append them and their column indices by left-packing
// 8 lanes at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shrink/core/config.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// The 8 keep bits of elements flat .. flat + 7 of a mask (the caller knows they all exist, so a second word is read
// only when they straddle one).
inline unsigned mask_bits8(const std::uint64_t* words, std::int64_t flat) {
  const std::int64_t shift = flat & 63;
  std::uint64_t bits = words[flat >> 6] >> shift;
  if (shift > 56) bits |= words[(flat >> 6) + 1] << (64 - shift);
  return static_cast<unsigned>(bits & 0xFFu);
}

// Left-pack permutations: entry k lists the set bits of k in increasing order (then zeros), for vpermps/vpermd.
inline const std::int32_t (*left_pack_table())[8] {
  static const auto table = [] {
    struct Table {
      alignas(32) std::int32_t entry[256][8];
    } t{};
    for (unsigned keep = 0; keep < 256; ++keep) {
      int next = 0;
      for (int lane = 0; lane < 8; ++lane)
        if ((keep >> lane) & 1u) t.entry[keep][next++] = lane;
    }
    return t;
  }();
  return table.entry;
}

// Kept elements of one contiguous float row (nonzero ones, or those whose mask bit is set when mask_words is not
// null) and whether every element is finite; the last cols % 8 are left to the caller.
SHRINK_TARGET_AVX2 inline std::int64_t count_row_avx2(const float* row, std::int64_t cols,
                                                      const std::uint64_t* mask_words, std::int64_t flat,
                                                      bool& finite) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i largest = _mm256_setzero_si256();
  std::int64_t count = 0;
  const std::int64_t whole = cols / 8 * 8;
  for (std::int64_t c = 0; c < whole; c += 8) {
    const __m256 v = _mm256_loadu_ps(row + c);
    largest = _mm256_max_epu32(largest, _mm256_and_si256(_mm256_castps_si256(v), magnitude));
    const unsigned keep =
        mask_words != nullptr
            ? mask_bits8(mask_words, flat + c)
            : static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    count += __builtin_popcount(keep);
  }
  // Finite when no magnitude reaches the infinity code: unsigned max of the 8 lanes.
  largest = _mm256_max_epu32(largest, _mm256_shuffle_epi32(largest, 0x4E));
  largest = _mm256_max_epu32(largest, _mm256_shuffle_epi32(largest, 0xB1));
  largest = _mm256_max_epu32(largest, _mm256_permute2x128_si256(largest, largest, 1));
  finite = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm256_castsi256_si128(largest))) < 0x7F800000u;
  return count;
}

// Appends a row's kept values and column indices (whole 8-lane steps only) by left-packing: each step stores 8 values
// and 8 indices and advances by the kept count, so the arrays need 7 slots of slack past the last kept element.
SHRINK_TARGET_AVX2 inline std::size_t fill_row_avx2(const float* row, std::int64_t cols,
                                                    const std::uint64_t* mask_words, std::int64_t flat,
                                                    float* SHRINK_RESTRICT values,
                                                    std::int32_t* SHRINK_RESTRICT indices) {
  const std::int32_t(*pack)[8] = left_pack_table();
  const std::int64_t whole = cols / 8 * 8;
  __m256i column = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  std::size_t k = 0;
  for (std::int64_t c = 0; c < whole; c += 8) {
    const __m256 v = _mm256_loadu_ps(row + c);
    const unsigned keep =
        mask_words != nullptr
            ? mask_bits8(mask_words, flat + c)
            : static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_UQ)));
    const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(pack[keep]));
    _mm256_storeu_ps(values + k, _mm256_permutevar8x32_ps(v, order));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(indices + k), _mm256_permutevar8x32_epi32(column, order));
    column = _mm256_add_epi32(column, eight);
    k += static_cast<std::size_t>(__builtin_popcount(keep));
  }
  return k;
}
#endif

// Whether rows of T with this column stride go through the kernels above: contiguous float rows on an AVX2 CPU.
template <class T>
bool csr_vector_rows(std::int64_t col_stride) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if constexpr (std::is_same<T, float>::value) return col_stride == 1 && use_avx2();
#else
  (void)col_stride;
#endif
  return false;
}

// count_row_avx2 when vector_rows (from csr_vector_rows), else 0 with finite left as it is.
template <class T>
std::int64_t count_row_vector(bool vector_rows, const T* row, std::int64_t cols, const std::uint64_t* mask_words,
                              std::int64_t flat, bool& finite) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if constexpr (std::is_same<T, float>::value)
    if (vector_rows) return count_row_avx2(row, cols, mask_words, flat, finite);
#else
  (void)vector_rows, (void)row, (void)cols, (void)mask_words, (void)flat, (void)finite;
#endif
  return 0;
}

// fill_row_avx2 when vector_rows, else nothing appended.
template <class T>
std::size_t fill_row_vector(bool vector_rows, const T* row, std::int64_t cols, const std::uint64_t* mask_words,
                            std::int64_t flat, T* SHRINK_RESTRICT values, std::int32_t* SHRINK_RESTRICT indices) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if constexpr (std::is_same<T, float>::value)
    if (vector_rows) return fill_row_avx2(row, cols, mask_words, flat, values, indices);
#else
  (void)vector_rows, (void)row, (void)cols, (void)mask_words, (void)flat, (void)values, (void)indices;
#endif
  return 0;
}

}  // namespace shrink::cpu
