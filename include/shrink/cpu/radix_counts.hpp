// The counting kernels of the magnitude threshold's radix select (prune/threshold.hpp): magnitude keys of floats,
// pass 1 (++counts[key >> 16], non-candidates of a mask in a spare bucket), pass 2 (the low 16 bits of one bucket),
// the below / equal bit words of the mask pass, and 32-bit counters folded into 64-bit totals; AVX2 where it pays.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// |x| as float bits (half and bfloat16 are widened exactly first, so their magnitudes order the same way).
inline std::uint32_t select_key(float x) { return shrink::float_to_bits(x) & 0x7FFFFFFFu; }

constexpr std::uint32_t kNonfiniteSelectKey = 0x7F800000u;  // keys from here up are +-inf and NaN
constexpr std::int64_t kHighBuckets = 0x8000;               // top 16 bits of a key: bit 31 is clear
constexpr std::int64_t kSkipBucket = kHighBuckets;          // where pass 1 counts elements that are not candidates
constexpr std::int64_t kLowBuckets = 0x10000;
// Software prefetch distance in floats (16 KB): the counting loops keep too few loads in flight for the hardware
// prefetcher, which stops at 4 KB pages; measured best of 256..16384 on 64M floats (benchmarks/notes/prune_select.md).
constexpr std::int64_t kPrefetchAhead = 4096;

// 32-bit counters folded into 64-bit totals before any could overflow.
class KeyCounter {
 public:
  explicit KeyCounter(std::int64_t buckets)
      : counts_(static_cast<std::size_t>(buckets), 0), totals_(static_cast<std::size_t>(buckets), 0) {}

  // Room for n more increments; returns the counters to add them to.
  std::uint32_t* reserve(std::int64_t n) {
    if (load_ + n > 0xFFFFFFFFll) fold();
    load_ += n;
    return counts_.data();
  }
  const std::vector<std::int64_t>& totals() {
    fold();
    return totals_;
  }

 private:
  void fold() {
    for (std::size_t b = 0; b < counts_.size(); ++b) totals_[b] += counts_[b];
    std::fill(counts_.begin(), counts_.end(), 0u);
    load_ = 0;
  }

  std::vector<std::uint32_t> counts_;
  std::vector<std::int64_t> totals_;
  std::int64_t load_ = 0;
};

inline bool is_candidate(const std::uint64_t* words, std::int64_t flat) {
  return words == nullptr || ((words[flat >> 6] >> (flat & 63)) & 1u);
}

// Pass 1 without a mask: ++counts[key >> 16] for every element.
inline void count_high_scalar(const float* x, std::int64_t begin, std::int64_t n, std::uint32_t* counts) {
  for (std::int64_t i = begin; i < n; ++i) ++counts[select_key(x[i]) >> 16];
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// Keys go from the vector register to general registers two at a time: the counting is scalar either way, and
// this saves the shift and mask an element.
SHRINK_TARGET_AVX2 inline std::int64_t count_high_avx2(const float* x, std::int64_t n, std::uint32_t* counts) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if ((i & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(x + i + kPrefetchAhead), _MM_HINT_T0);
    const __m256i keys =
        _mm256_srli_epi32(_mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), magnitude), 16);
    const __m128i low = _mm256_castsi256_si128(keys), high = _mm256_extracti128_si256(keys, 1);
    const auto k01 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(low));
    const auto k23 = static_cast<std::uint64_t>(_mm_extract_epi64(low, 1));
    const auto k45 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(high));
    const auto k67 = static_cast<std::uint64_t>(_mm_extract_epi64(high, 1));
    ++counts[static_cast<std::uint32_t>(k01)];
    ++counts[k01 >> 32];
    ++counts[static_cast<std::uint32_t>(k23)];
    ++counts[k23 >> 32];
    ++counts[static_cast<std::uint32_t>(k45)];
    ++counts[k45 >> 32];
    ++counts[static_cast<std::uint32_t>(k67)];
    ++counts[k67 >> 32];
  }
  return i;
}

// Pass 2 without a mask: most elements lie outside the bucket, so eight are compared at once and only matches
// are counted.
SHRINK_TARGET_AVX2 inline std::int64_t count_low_avx2(const float* x, std::int64_t n, std::uint32_t bucket,
                                                      std::uint32_t* counts) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i wanted = _mm256_set1_epi32(static_cast<int>(bucket));
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if ((i & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(x + i + kPrefetchAhead), _MM_HINT_T0);
    const __m256i keys = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), magnitude);
    auto hits = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_srli_epi32(keys, 16), wanted))));
    while (hits) {
      ++counts[select_key(x[i + __builtin_ctz(hits)]) & 0xFFFFu];
      hits &= hits - 1;
    }
  }
  return i;
}

// Bits of the elements x[0..8) whose key is below t (lt) and equal to t (eq), bit j for element j.
SHRINK_TARGET_AVX2 inline void compare_keys_avx2(const float* x, __m256i t, unsigned& lt, unsigned& eq) {
  const __m256i keys =
      _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)), _mm256_set1_epi32(0x7FFFFFFF));
  lt = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(t, keys))));
  eq = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(t, keys))));
}

// Below and equal bits of 64 elements (keys < 2^31, so signed compares are exact).
SHRINK_TARGET_AVX2 inline void compare_word_avx2(const float* x, std::uint32_t threshold, std::uint64_t& below,
                                                 std::uint64_t& equal) {
  const __m256i t = _mm256_set1_epi32(static_cast<int>(threshold));
  below = 0;
  equal = 0;
  for (int j = 0; j < 64; j += 8) {
    if ((j & 15) == 0) _mm_prefetch(reinterpret_cast<const char*>(x + j + kPrefetchAhead), _MM_HINT_T0);
    unsigned lt = 0, eq = 0;
    compare_keys_avx2(x + j, t, lt, eq);
    below |= static_cast<std::uint64_t>(lt) << j;
    equal |= static_cast<std::uint64_t>(eq) << j;
  }
}
#endif

inline void compare_word_scalar(const float* x, std::int64_t n, std::uint32_t threshold, std::uint64_t& below,
                                std::uint64_t& equal) {
  below = 0;
  equal = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    const std::uint32_t key = select_key(x[j]);
    below |= static_cast<std::uint64_t>(key < threshold) << j;
    equal |= static_cast<std::uint64_t>(key == threshold) << j;
  }
}

// Below and equal bits of n <= 64 elements: AVX2 for a whole word, else the scalar loop.
inline void compare_word(const float* x, std::int64_t n, std::uint32_t threshold, std::uint64_t& below,
                         std::uint64_t& equal) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (n == 64 && use_avx2()) {
    compare_word_avx2(x, threshold, below, equal);
    return;
  }
#endif
  compare_word_scalar(x, n, threshold, below, equal);
}

// Pass 1 over one run: candidates by their top 16 bits; non-candidates in the spare bucket unless non-finite (those
// count where they are, so pass 1 also finds every NaN and inf).
inline void count_high(const float* x, std::int64_t base, std::int64_t n, const std::uint64_t* words,
                       std::uint32_t* counts) {
  if (words == nullptr) {
    std::int64_t done = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
    if (use_avx2()) done = count_high_avx2(x, n, counts);
#endif
    count_high_scalar(x, done, n, counts);
    return;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t key = select_key(x[i]);
    const bool counted = is_candidate(words, base + i) || key >= kNonfiniteSelectKey;
    ++counts[counted ? key >> 16 : kSkipBucket];
  }
}

// Pass 2 over one run: the low 16 bits of the candidates whose top 16 bits are `bucket`.
inline void count_low(const float* x, std::int64_t base, std::int64_t n, const std::uint64_t* words,
                      std::uint32_t bucket, std::uint32_t* counts) {
  std::int64_t i = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (words == nullptr && use_avx2()) i = count_low_avx2(x, n, bucket, counts);
#endif
  for (; i < n; ++i) {
    const std::uint32_t key = select_key(x[i]);
    if ((key >> 16) == bucket && is_candidate(words, base + i)) ++counts[key & 0xFFFFu];
  }
}

}  // namespace shrink::cpu
