// Products of a few rows with a long row-major matrix read once, as one generated token's attention reads a KV cache
// (the keys, then the values, of one head: P positions of d values):
//   row_dots(a, P, d, x, R, out):       out[r · P + p] = Σ_e a[p · d + e] · x[r · d + e]     (scores)
//   weighted_rows(a, P, d, w, R, out):  out[r · d + e] = Σ_p w[r · P + p] · a[p · d + e]     (weighted values)
// A matrix product would copy (pack) `a` on every call; these read it in place, 8 floats a vector with AVX2 and FMA
// (a scalar loop otherwise). Sums run in float, each in its own order: a float product's rounding, not bit for bit
// another product's.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

namespace detail {

inline void row_dots_scalar(const float* a, std::int64_t p_total, std::int64_t d, const float* x, std::int64_t r_total,
                            float* out) {
  for (std::int64_t p = 0; p < p_total; ++p)
    for (std::int64_t r = 0; r < r_total; ++r) {
      float s = 0.0f;
      for (std::int64_t e = 0; e < d; ++e) s += a[p * d + e] * x[r * d + e];
      out[r * p_total + p] = s;
    }
}

inline void weighted_rows_scalar(const float* a, std::int64_t p_total, std::int64_t d, const float* w,
                                 std::int64_t r_total, float* out) {
  std::fill(out, out + r_total * d, 0.0f);
  for (std::int64_t p = 0; p < p_total; ++p)
    for (std::int64_t r = 0; r < r_total; ++r)
      for (std::int64_t e = 0; e < d; ++e) out[r * d + e] += w[r * p_total + p] * a[p * d + e];
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
SHRINK_TARGET_AVX2_FMA inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

SHRINK_TARGET_AVX2_FMA inline void row_dots_avx2(const float* a, std::int64_t p_total, std::int64_t d, const float* x,
                                                 std::int64_t r_total, float* out) {
  const std::int64_t vector_end = d / 8 * 8;
  for (std::int64_t p = 0; p < p_total; ++p) {
    const float* row = a + p * d;
    for (std::int64_t r = 0; r < r_total; ++r) {
      const float* xr = x + r * d;
      __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();  // two chains: half the FMA latency
      std::int64_t e = 0;
      for (; e + 16 <= vector_end; e += 16) {
        even = _mm256_fmadd_ps(_mm256_loadu_ps(row + e), _mm256_loadu_ps(xr + e), even);
        odd = _mm256_fmadd_ps(_mm256_loadu_ps(row + e + 8), _mm256_loadu_ps(xr + e + 8), odd);
      }
      if (e < vector_end) even = _mm256_fmadd_ps(_mm256_loadu_ps(row + e), _mm256_loadu_ps(xr + e), even);
      float s = horizontal_sum(_mm256_add_ps(even, odd));
      for (e = vector_end; e < d; ++e) s += row[e] * xr[e];
      out[r * p_total + p] = s;
    }
  }
}

// out[r, e0 .. e0 + 8V) for up to 3 rows: 3V accumulators, the matrix's 8V columns read once a position.
template <std::size_t V>
SHRINK_TARGET_AVX2_FMA void weighted_columns_avx2(const float* a, std::int64_t p_total, std::int64_t d, std::int64_t e0,
                                                  const float* w, int rows, float* out) {
  __m256 acc[3][V];
  for (int r = 0; r < 3; ++r)
    for (std::size_t v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (std::int64_t p = 0; p < p_total; ++p) {
    __m256 column[V];
    for (std::size_t v = 0; v < V; ++v) column[v] = _mm256_loadu_ps(a + p * d + e0 + 8 * static_cast<std::int64_t>(v));
    for (int r = 0; r < rows; ++r) {
      const __m256 weight = _mm256_broadcast_ss(w + r * p_total + p);
      for (std::size_t v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(weight, column[v], acc[r][v]);
    }
  }
  for (int r = 0; r < rows; ++r)
    for (std::size_t v = 0; v < V; ++v)
      _mm256_storeu_ps(out + r * d + e0 + 8 * static_cast<std::int64_t>(v), acc[r][v]);
}

SHRINK_TARGET_AVX2_FMA inline void weighted_rows_avx2(const float* a, std::int64_t p_total, std::int64_t d,
                                                      const float* w, std::int64_t r_total, float* out) {
  for (std::int64_t r0 = 0; r0 < r_total; r0 += 3) {
    const int rows = static_cast<int>(std::min<std::int64_t>(3, r_total - r0));
    const float* wr = w + r0 * p_total;
    float* o = out + r0 * d;
    std::int64_t e = 0;
    for (; e + 32 <= d; e += 32) weighted_columns_avx2<4>(a, p_total, d, e, wr, rows, o);
    for (; e + 8 <= d; e += 8) weighted_columns_avx2<1>(a, p_total, d, e, wr, rows, o);
    for (; e < d; ++e)
      for (int r = 0; r < rows; ++r) {
        float s = 0.0f;
        for (std::int64_t p = 0; p < p_total; ++p) s += wr[r * p_total + p] * a[p * d + e];
        o[r * d + e] = s;
      }
  }
}
#endif

}  // namespace detail

// out[r · P + p] = Σ_e a[p · d + e] · x[r · d + e] for p < P, r < R: a [P, d] and x [R, d] row-major, out [R, P].
inline void row_dots(const float* a, std::int64_t p_total, std::int64_t d, const float* x, std::int64_t r_total,
                     float* out) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) return detail::row_dots_avx2(a, p_total, d, x, r_total, out);
#endif
  detail::row_dots_scalar(a, p_total, d, x, r_total, out);
}

// out[r · d + e] = Σ_p w[r · P + p] · a[p · d + e] for e < d, r < R: a [P, d] and w [R, P] row-major, out [R, d].
inline void weighted_rows(const float* a, std::int64_t p_total, std::int64_t d, const float* w, std::int64_t r_total,
                          float* out) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) return detail::weighted_rows_avx2(a, p_total, d, w, r_total, out);
#endif
  detail::weighted_rows_scalar(a, p_total, d, w, r_total, out);
}

}  // namespace shrink::cpu
