// The CPU kernels of the N:M sparse matrix product (cpu/nm_product.hpp): sparse dot products of each compressed weight
// row with a few rows of X, any n:m in scalar code, 2:4 with AVX-512 (16 kept values a step, picked with vpermt2ps) and
// AVX2 (8 a step, picked with two vpermps and a blend). Each checks the positions as it reads them and returns false
// on a bad one.
#pragma once

#include <cstdint>

#include "shrink/cpu/lane_sums.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// An N:M compressed float weight [rows, cols] as the kernels read it: sparse::NmCompressed's arrays, not owned.
struct NmRows {
  std::int64_t rows = 0;
  std::int64_t cols = 0;                    // dense columns, a multiple of group
  int kept = 2;                             // n: kept values per group
  int group = 4;                            // m: columns per group
  std::int64_t kept_per_row = 0;            // cols / group · kept
  const float* values = nullptr;            // [rows, kept_per_row]
  const std::uint8_t* positions = nullptr;  // same layout: position of each value within its group
};

inline constexpr std::int64_t kNmDotRows = 12;   // rows of X per pass of the dot products
inline constexpr std::int64_t kNmDotChunks = 4;  // passes (AVX-512 2:4) before expanding panels pays off

// yt[r, m] = Σ kept w[r, ·] · x[m, ·] for the weight rows r in [r0, r1) from group g0 on; false on a bad position.
inline bool nm_dots_scalar(const NmRows& w, const float* x, std::int64_t ldx, std::int64_t rows, std::int64_t r0,
                           std::int64_t r1, std::int64_t g0, float* yt, bool accumulate) {
  const int n = w.kept, m = w.group;
  const std::int64_t groups = w.cols / m;
  bool bad = false;
  for (std::int64_t r = r0; r < r1; ++r) {
    float acc[kNmDotRows] = {};
    const std::size_t base = static_cast<std::size_t>(r * w.kept_per_row);
    for (std::int64_t g = g0; g < groups; ++g) {
      int previous = -1;
      for (int j = 0; j < n; ++j) {
        const std::size_t at = base + static_cast<std::size_t>(g * n + j);
        const int p = w.positions[at];
        bad |= p <= previous || p >= m;
        previous = p;
        const std::int64_t col = bad ? 0 : g * m + p;
        for (std::int64_t i = 0; i < rows; ++i) acc[i] += w.values[at] * x[i * ldx + col];
      }
    }
    for (std::int64_t i = 0; i < rows; ++i) yt[r * rows + i] = accumulate ? yt[r * rows + i] + acc[i] : acc[i];
  }
  return !bad;
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// 2:4 dot products of every weight row with MR rows of x, 8 groups (16 kept values, 32 columns) a step; the groups
// past the last whole step are left to the scalar loop (returned: the first group not done).
template <int MR>
SHRINK_TARGET_AVX512 bool nm24_dots_avx512(const NmRows& w, const float* x, std::int64_t ldx, float* yt,
                                           std::int64_t& groups_done) {
  const std::int64_t kept = w.kept_per_row;
  const std::int64_t steps = kept / 16;
  groups_done = steps * 8;
  // Lane l holds a value of group l / 2 of the step: its column is 4 · (l / 2) + position.
  const __m512i group_base = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512i four = _mm512_set1_epi32(4);
  __mmask16 bad = 0;
  for (std::int64_t r = 0; r < w.rows; ++r) {
    const float* values = w.values + r * kept;
    const std::uint8_t* positions = w.positions + r * kept;
    __m512 acc[static_cast<std::size_t>(MR)];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (std::int64_t s = 0; s < steps; ++s) {
      const __m512 v = _mm512_loadu_ps(values + 16 * s);
      const __m512i p =
          _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(positions + 16 * s)));
      // Valid pairs: the first position below the second (its neighbour), every position below 4.
      const __m512i partner = _mm512_maskz_shuffle_epi32(0xFFFF, p, _MM_PERM_CDAB);  // each lane's pair partner
      bad |= static_cast<__mmask16>((_mm512_cmplt_epi32_mask(p, partner) ^ 0x5555) | _mm512_cmpge_epu32_mask(p, four));
      const __m512i column = _mm512_add_epi32(group_base, p);
      for (int i = 0; i < MR; ++i) {
        const float* row = x + i * ldx + 32 * s;
        const __m512 picked = _mm512_permutex2var_ps(_mm512_loadu_ps(row), column, _mm512_loadu_ps(row + 16));
        acc[i] = _mm512_fmadd_ps(v, picked, acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) yt[r * MR + i] = detail::sum_lanes16(acc[i]);
  }
  return bad == 0;
}

// 2:4 dot products of every weight row with MR rows of x, 4 groups (8 kept values, 16 columns) a step; the groups past
// the last whole step are left to the scalar loop (returned: the first group not done).
template <int MR>
SHRINK_TARGET_AVX2_FMA bool nm24_dots_avx2(const NmRows& w, const float* x, std::int64_t ldx, float* yt,
                                           std::int64_t& groups_done) {
  const std::int64_t kept = w.kept_per_row;
  const std::int64_t steps = kept / 8;
  groups_done = steps * 4;
  // Lane l holds a value of group l / 2 of the step: its column is 4 · (l / 2) + position, in the low 8 columns for
  // lanes 0-3 and the high 8 for lanes 4-7 (vpermps reads the index modulo 8).
  const __m256i group_base = _mm256_setr_epi32(0, 0, 4, 4, 0, 0, 4, 4);
  const __m256i first_of_pair = _mm256_setr_epi32(-1, 0, -1, 0, -1, 0, -1, 0);
  const __m256i three = _mm256_set1_epi32(3);
  __m256i bad = _mm256_setzero_si256();
  for (std::int64_t r = 0; r < w.rows; ++r) {
    const float* values = w.values + r * kept;
    const std::uint8_t* positions = w.positions + r * kept;
    __m256 acc[static_cast<std::size_t>(MR)];
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) acc[i] = _mm256_setzero_ps();
    for (std::int64_t s = 0; s < steps; ++s) {
      const __m256 v = _mm256_loadu_ps(values + 8 * s);
      const __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(positions + 8 * s)));
      // Valid pairs: the first position below the second (its neighbour), every position below 4.
      const __m256i partner = _mm256_shuffle_epi32(p, _MM_SHUFFLE(2, 3, 0, 1));
      const __m256i below_partner = _mm256_cmpgt_epi32(partner, p);
      bad = _mm256_or_si256(
          bad, _mm256_or_si256(_mm256_xor_si256(below_partner, first_of_pair), _mm256_cmpgt_epi32(p, three)));
      const __m256i column = _mm256_add_epi32(group_base, p);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const float* row = x + i * ldx + 16 * s;
        const __m256 low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row), column);
        const __m256 high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(row + 8), column);
        acc[i] = _mm256_fmadd_ps(v, _mm256_blend_ps(low, high, 0xF0), acc[i]);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) yt[r * MR + i] = detail::sum_lanes8(acc[i]);
  }
  return _mm256_testz_si256(bad, bad) != 0;
}
#endif

}  // namespace shrink::cpu
