// The 2:4 packing kernels of sparse/nm_compressed.hpp, over 64-bit keep-mask words: the filled positions of each
// group by table lookup (two groups a byte), the check for a group keeping 3 or 4, and with AVX2 the values of whole
// words gathered by vpshufb while their magnitudes are checked for NaN and inf.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// Kept count -> filled positions of a 2:4 group, for the fast path: nibble of kept bits -> (positions, valid).
struct Fill2of4 {
  std::uint8_t first, second;
  bool valid;  // at most 2 kept
};
inline const Fill2of4* fill_2of4_table() {
  static const auto table = [] {
    struct Table {
      Fill2of4 entry[16];
    } t{};
    for (unsigned kept = 0; kept < 16; ++kept) {
      unsigned chosen = kept;
      for (unsigned p = 0; p < 4 && __builtin_popcount(chosen) < 2; ++p) chosen |= 1u << p;  // lowest unused
      const int first = __builtin_ctz(chosen);
      const int second = __builtin_ctz(chosen & (chosen - 1));
      t.entry[kept] =
          Fill2of4{static_cast<std::uint8_t>(first), static_cast<std::uint8_t>(second), __builtin_popcount(kept) <= 2};
    }
    return t;
  }();
  return table.entry;
}

// True when some 4-bit group of a mask word keeps 3 or 4: per-nibble popcounts, then count + 5 reaches bit 3.
inline bool word_has_overfull_2of4_group(std::uint64_t word) {
  const std::uint64_t pairs = word - ((word >> 1) & 0x5555555555555555u);
  const std::uint64_t nibbles = (pairs & 0x3333333333333333u) + ((pairs >> 2) & 0x3333333333333333u);
  return ((nibbles + 0x5555555555555555u) & 0x8888888888888888u) != 0;
}

// Per-byte lookups for 2:4 (a byte of mask bits is 2 groups), valid where each nibble keeps at most 2:
// positions: the 4 position bytes of the 2 groups; metadata: their 2 mma.sp nibbles.
struct TwoGroupTables {
  std::uint32_t positions[256];
  std::uint8_t metadata[256];
};
inline const TwoGroupTables& two_group_tables() {
  static const TwoGroupTables tables = [] {
    TwoGroupTables t{};
    const Fill2of4* fill = fill_2of4_table();
    for (unsigned byte = 0; byte < 256; ++byte) {
      const Fill2of4 low = fill[byte & 0xFu], high = fill[byte >> 4];
      t.positions[byte] = static_cast<std::uint32_t>(low.first) | static_cast<std::uint32_t>(low.second) << 8 |
                          static_cast<std::uint32_t>(high.first) << 16 | static_cast<std::uint32_t>(high.second) << 24;
      t.metadata[byte] =
          static_cast<std::uint8_t>(static_cast<unsigned>(low.first) | static_cast<unsigned>(low.second) << 2 |
                                    (static_cast<unsigned>(high.first) | static_cast<unsigned>(high.second) << 2) << 4);
    }
    return t;
  }();
  return tables;
}

// Writes the positions of `word_count` whole mask words (16 groups, 32 position bytes each).
inline void write_2of4_positions(const std::uint64_t* words, std::int64_t word_count, std::uint8_t* positions) {
  const TwoGroupTables& tables = two_group_tables();
  for (std::int64_t w = 0; w < word_count; ++w) {
    std::uint32_t four[8];
    for (int b = 0; b < 8; ++b) four[b] = tables.positions[(words[w] >> (8 * b)) & 0xFFu];
    std::memcpy(positions + 32 * w, four, sizeof four);
  }
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// vpshufb controls that gather the two filled positions of the 2:4 groups in a 16-byte lane into its low 8 bytes,
// zeroing (control byte 0x80) a filled position the mask prunes. A lane holds one group of float (indexed by its
// nibble) or two of a 16-bit type (indexed by their byte).
template <int kElementBytes>
const std::uint8_t (*pack_2of4_controls())[16] {
  static const auto table = [] {
    constexpr int kGroups = 4 / kElementBytes;  // 1 or 2 groups in 16 bytes
    struct Table {
      alignas(16) std::uint8_t entry[1 << (4 * kGroups)][16];
    } t{};
    const Fill2of4* fill = fill_2of4_table();
    for (unsigned bits = 0; bits < (1u << (4 * kGroups)); ++bits) {
      for (int b = 0; b < 16; ++b) t.entry[bits][b] = 0x80;
      for (int g = 0; g < kGroups; ++g) {
        const unsigned nibble = (bits >> (4 * g)) & 0xFu;
        const int chosen[2] = {fill[nibble].first, fill[nibble].second};
        for (int k = 0; k < 2; ++k)
          if ((nibble >> chosen[k]) & 1u)
            for (int b = 0; b < kElementBytes; ++b)
              t.entry[bits][(2 * g + k) * kElementBytes + b] =
                  static_cast<std::uint8_t>((4 * g + chosen[k]) * kElementBytes + b);
      }
    }
    return t;
  }();
  return table.entry;
}

// The controls of two adjacent lanes whose mask bits start at `bit`.
SHRINK_TARGET_AVX2 inline __m256i two_lane_controls(const std::uint8_t (*control)[16], std::uint64_t word, int bit,
                                                    int lane_bits, unsigned lane_mask) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(control[(word >> (bit + lane_bits)) & lane_mask]),
                             reinterpret_cast<const __m128i*>(control[(word >> bit) & lane_mask]));
}

// 2:4 values of `word_count` whole mask words of a contiguous float or 16-bit tensor: per 32 bytes read, a shuffle
// by the lane's mask bits, then two lanes' low halves stored together. Returns false, with the output incomplete, when
// a group keeps more than 2 (the caller then finds and names it); `largest` gets the largest magnitude bits seen.
template <class T>
SHRINK_TARGET_AVX2 bool compress_2of4_words_avx2(const T* dense, const std::uint64_t* words, std::int64_t word_count,
                                                 T* values, std::uint32_t& largest) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 2, "float or 16-bit values");
  constexpr int kLaneBits = 16 / static_cast<int>(sizeof(T));  // elements (and mask bits) in 16 bytes
  constexpr unsigned kLaneMask = (1u << kLaneBits) - 1;
  const std::uint8_t(*control)[16] = pack_2of4_controls<static_cast<int>(sizeof(T))>();
  const __m256i magnitude = sizeof(T) == 4 ? _mm256_set1_epi32(0x7FFFFFFF) : _mm256_set1_epi16(0x7FFF);
  __m256i most = _mm256_setzero_si256();
  for (std::int64_t w = 0; w < word_count; ++w) {
    const std::uint64_t word = words[w];
    if (word_has_overfull_2of4_group(word)) return false;
    const T* x = dense + 64 * w;
    T* out = values + 32 * w;
    for (int bit = 0; bit < 64; bit += 4 * kLaneBits) {  // 4 lanes read, 2 lanes written
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + bit));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + bit + 2 * kLaneBits));
      if constexpr (sizeof(T) == 4) {
        most = _mm256_max_epu32(most, _mm256_max_epu32(_mm256_and_si256(a, magnitude), _mm256_and_si256(b, magnitude)));
      } else {
        most = _mm256_max_epu16(most, _mm256_max_epu16(_mm256_and_si256(a, magnitude), _mm256_and_si256(b, magnitude)));
      }
      const __m256i packed_a = _mm256_shuffle_epi8(a, two_lane_controls(control, word, bit, kLaneBits, kLaneMask));
      const __m256i packed_b =
          _mm256_shuffle_epi8(b, two_lane_controls(control, word, bit + 2 * kLaneBits, kLaneBits, kLaneMask));
      // Quadwords 0 and 2 hold each lane's output: a's two to the low half, b's two to the high half.
      const __m256i joined =
          _mm256_blend_epi32(_mm256_permute4x64_epi64(packed_a, 0x88), _mm256_permute4x64_epi64(packed_b, 0x88), 0xF0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + bit / 2), joined);
    }
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), most);
  for (std::uint32_t lane : lanes)
    largest = std::max(largest, sizeof(T) == 4 ? lane : std::max(lane & 0xFFFFu, lane >> 16));
  return true;
}
#endif

// The 2:4 values and positions of `word_count` whole mask words of a contiguous float, half or bfloat16 tensor by the
// AVX2 kernel, and whether those values are finite. False, with the output incomplete, for other types, without
// AVX2, or when a group keeps more than 2.
template <class T>
bool compress_2of4_words(const T* dense, const std::uint64_t* words, std::int64_t word_count, T* values,
                         std::uint8_t* positions, bool& finite) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  constexpr bool kVectorType =
      std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;
  if constexpr (kVectorType) {
    if (use_avx2()) {
      std::uint32_t largest = 0;
      if (!compress_2of4_words_avx2(dense, words, word_count, values, largest)) return false;
      write_2of4_positions(words, word_count, positions);
      const std::uint32_t infinity = std::is_same<T, float>::value  ? 0x7F800000u
                                     : std::is_same<T, half>::value ? 0x7C00u
                                                                    : 0x7F80u;
      finite = largest < infinity;
      return true;
    }
  }
#else
  (void)dense, (void)words, (void)word_count, (void)values, (void)positions, (void)finite;
#endif
  return false;
}

}  // namespace shrink::cpu
