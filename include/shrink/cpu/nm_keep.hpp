// The N:M selection kernels of prune/nm.hpp: which elements of a group of magnitude keys to keep (rank below n:
// larger keys first, the lower index among equals), for one group or, with AVX2, for 2:4 / n:4 over whole mask words.
#pragma once

#include <algorithm>
#include <cstdint>
#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// Bit j of the result keeps element j of one group of `size` keys: its rank (elements beating it: larger, or equal
// with a lower index) is below `keep`. Pairwise for small groups, a sort of the indices otherwise.
inline std::uint64_t group_keep_bits(const std::int32_t* key, int size, int keep) {
  if (size <= 16) {
    std::uint64_t bits = 0;
    for (int i = 0; i < size; ++i) {
      int rank = 0;
      for (int j = 0; j < i; ++j) rank += key[j] >= key[i];
      for (int j = i + 1; j < size; ++j) rank += key[j] > key[i];
      bits |= static_cast<std::uint64_t>(rank < keep) << i;
    }
    return bits;
  }
  return 0;  // large groups go through group_keep_list
}

// The kept positions of a large group, by a partial sort of its indices (score descending, index ascending).
inline void group_keep_list(const std::int32_t* key, int size, int keep, int* order) {
  for (int i = 0; i < size; ++i) order[i] = i;
  std::partial_sort(order, order + keep, order + size,
                    [key](int a, int b) { return key[a] > key[b] || (key[a] == key[b] && a < b); });
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// m = 4 over a contiguous run of `words` * 64 floats: writes one mask word per 16 groups and returns the largest
// magnitude key seen (for the NaN/inf check). Each lane ranks its element against its group's three others,
// reached by in-lane rotations; j beats i when key_j > key_i, or key_j == key_i and j < i (the wrapped rotations).
SHRINK_TARGET_AVX2 inline std::int32_t nm4_mask_words_avx2(const float* x, std::int64_t words, int keep,
                                                           std::uint64_t* out) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i wrap1 = _mm256_setr_epi32(0, 0, 0, 1, 0, 0, 0, 1);  // i + 1 >= 4
  const __m256i wrap2 = _mm256_setr_epi32(0, 0, 1, 1, 0, 0, 1, 1);  // i + 2 >= 4
  const __m256i wrap3 = _mm256_setr_epi32(0, 1, 1, 1, 0, 1, 1, 1);  // i + 3 >= 4
  const __m256i minus_keep = _mm256_set1_epi32(-keep);
  __m256i largest = _mm256_setzero_si256();
  for (std::int64_t w = 0; w < words; ++w) {
    std::uint64_t word = 0;
    for (int v = 0; v < 8; ++v) {
      const __m256i s =
          _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + w * 64 + v * 8)), magnitude);
      largest = _mm256_max_epi32(largest, s);
      // key_j > key_i - wrap is key_j >= key_i where j < i: one compare for both cases (keys are >= 0).
      const __m256i b1 = _mm256_cmpgt_epi32(_mm256_shuffle_epi32(s, 0x39), _mm256_sub_epi32(s, wrap1));
      const __m256i b2 = _mm256_cmpgt_epi32(_mm256_shuffle_epi32(s, 0x4E), _mm256_sub_epi32(s, wrap2));
      const __m256i b3 = _mm256_cmpgt_epi32(_mm256_shuffle_epi32(s, 0x93), _mm256_sub_epi32(s, wrap3));
      const __m256i minus_rank = _mm256_add_epi32(_mm256_add_epi32(b1, b2), b3);  // compares give -1 for true
      const __m256i kept = _mm256_cmpgt_epi32(minus_rank, minus_keep);            // rank < keep
      word |= static_cast<std::uint64_t>(static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(kept))))
              << (8 * v);
    }
    out[w] = word;
  }
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), largest);
  return *std::max_element(lanes, lanes + 8);
}
#endif

// m = 4 over whole 64-element words of a contiguous tensor whose last dimension is a multiple of 4 (so groups never
// straddle rows or words); returns the largest magnitude key.
inline std::int32_t nm4_mask_words(const float* x, std::int64_t words, int keep, std::uint64_t* out) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) return nm4_mask_words_avx2(x, words, keep, out);
#endif
  std::int32_t largest = 0;
  for (std::int64_t w = 0; w < words; ++w) {
    std::uint64_t word = 0;
    for (int g = 0; g < 16; ++g) {
      std::int32_t key[4];
      for (int j = 0; j < 4; ++j) key[j] = magnitude_bits(float_to_bits(x[w * 64 + g * 4 + j]));
      largest = std::max({largest, key[0], key[1], key[2], key[3]});
      word |= group_keep_bits(key, 4, keep) << (4 * g);
    }
    out[w] = word;
  }
  return largest;
}

}  // namespace shrink::cpu
