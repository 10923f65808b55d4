// The CPU kernels of the CSR matrix product (cpu/csr_product.hpp): y = W · x over the stored values of a CSR weight
// [N, K], as sparse dot products with few rows of X or as rows of a k-major Xᵀ chunk, AVX-512 or AVX2. Each checks
// the column indices as it reads them (in range, strictly increasing within a row) and returns false on a bad one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "shrink/cpu/lane_sums.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// A CSR matrix [rows, cols] as the kernels read it: sparse::Csr's arrays, not owned.
struct CsrRows {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const std::int32_t* row_offsets = nullptr;     // rows + 1 entries
  const std::int32_t* column_indices = nullptr;  // nnz entries
  const float* values = nullptr;                 // nnz entries
};

inline constexpr std::int64_t kCsrDotRows = 8;           // up to this many rows of X: sparse dot products
inline constexpr std::int64_t kCsrChunkBytes = 3 << 19;  // 1.5 MB: the Xᵀ chunk the stored values pick rows of, in L2

// Y rows as sparse dot products: yt[n, m] = Σ_i values[i] · x[m, idx[i]] for m < rows (≤ 8); false on a bad index.
inline bool csr_dots(const CsrRows& w, const float* x, std::int64_t ldx, std::int64_t rows, float* yt) {
  bool bad = false;
  const std::int32_t* idx = w.column_indices;
  const float* val = w.values;
  const auto cols = static_cast<std::uint32_t>(w.cols);
  for (std::int64_t n = 0; n < w.rows; ++n) {
    float acc[kCsrDotRows] = {};
    std::int32_t previous = -1;
    for (std::int32_t i = w.row_offsets[static_cast<std::size_t>(n)];
         i < w.row_offsets[static_cast<std::size_t>(n + 1)]; ++i) {
      const std::int32_t k = idx[i];
      bad |= k <= previous || static_cast<std::uint32_t>(k) >= cols;
      previous = k;
      const std::int32_t safe = bad ? 0 : k;
      for (std::int64_t m = 0; m < rows; ++m) acc[m] += val[i] * x[m * ldx + safe];
    }
    for (std::int64_t m = 0; m < rows; ++m) yt[n * rows + m] = acc[m];
  }
  return !bad;
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
namespace detail {
// _mm512_mask_i32gather_ps(0, live, k, base, 4): base[k] in the live lanes, 0 in the others. Without optimization
// GCC defines the intrinsic as a macro that hands the mask to its builtin as a short, which -Wsign-conversion
// reports in the caller's code; there the builtin is called with the mask converted explicitly.
SHRINK_TARGET_AVX512 inline __m512 gather16(__mmask16 live, __m512i k, const float* base) {
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
  return __builtin_ia32_gathersiv16sf(_mm512_setzero_ps(), base, reinterpret_cast<__v16si>(k), static_cast<short>(live),
                                      4);
#else
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), live, k, base, 4);
#endif
}
}  // namespace detail

// csr_dots with AVX-512: 16 stored values a step, their columns checked (in range, increasing) before they are used as
// gather indices (a bad lane is masked off, never read), x[m, columns] gathered for each of the rows of X.
template <int Rows>
SHRINK_TARGET_AVX512 bool csr_dots_avx512(const CsrRows& w, const float* x, std::int64_t ldx, float* yt) {
  const std::int32_t* idx = w.column_indices;
  const float* val = w.values;
  const __m512i cols = _mm512_set1_epi32(static_cast<std::int32_t>(w.cols));
  __mmask16 bad = 0;
  for (std::int64_t n = 0; n < w.rows; ++n) {
    __m512 acc[static_cast<std::size_t>(Rows)];
    for (int i = 0; i < Rows; ++i) acc[i] = _mm512_setzero_ps();
    __m512i previous = _mm512_set1_epi32(-1);  // lane 15: the last column of the step before
    const std::int32_t end = w.row_offsets[static_cast<std::size_t>(n + 1)];
    for (std::int32_t i = w.row_offsets[static_cast<std::size_t>(n)]; i < end; i += 16) {
      const __mmask16 live =
          end - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (end - i)) - 1);
      const __m512i k = _mm512_maskz_loadu_epi32(live, idx + i);
      const __m512i before = _mm512_maskz_alignr_epi32(0xFFFF, k, previous, 15);  // each lane's predecessor
      const __mmask16 ok = _mm512_mask_cmplt_epu32_mask(live, k, cols) & _mm512_mask_cmpgt_epi32_mask(live, k, before);
      bad |= static_cast<__mmask16>(live & ~ok);
      previous = k;
      const __m512 v = _mm512_maskz_loadu_ps(ok, val + i);
      for (int r = 0; r < Rows; ++r) acc[r] = _mm512_fmadd_ps(v, detail::gather16(ok, k, x + r * ldx), acc[r]);
    }
    for (int r = 0; r < Rows; ++r) yt[n * Rows + r] = detail::sum_lanes16(acc[r]);
  }
  return bad == 0;
}

// yt[n, 0 .. 16V) = Σ_i values[i] · xt[idx[i], 0 .. 16V) for every row n; xt rows hold 16V floats.
template <int V>
SHRINK_TARGET_AVX512 bool csr_rows_avx512(const CsrRows& w, const float* xt, float* yt) {
  bool bad = false;
  const std::int32_t* idx = w.column_indices;
  const float* val = w.values;
  const auto cols = static_cast<std::uint32_t>(w.cols);
  for (std::int64_t n = 0; n < w.rows; ++n) {
    __m512 acc[static_cast<std::size_t>(V)];
    for (int v = 0; v < V; ++v) acc[v] = _mm512_setzero_ps();
    std::int32_t previous = -1;
    for (std::int32_t i = w.row_offsets[static_cast<std::size_t>(n)];
         i < w.row_offsets[static_cast<std::size_t>(n + 1)]; ++i) {
      const std::int32_t k = idx[i];
      bad |= k <= previous || static_cast<std::uint32_t>(k) >= cols;
      previous = k;
      const float* row = xt + static_cast<std::int64_t>(bad ? 0 : k) * 16 * V;
      const __m512 a = _mm512_set1_ps(val[i]);
      for (int v = 0; v < V; ++v) acc[v] = _mm512_fmadd_ps(a, _mm512_loadu_ps(row + 16 * v), acc[v]);
    }
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(yt + n * 16 * V + 16 * v, acc[v]);
  }
  return !bad;
}

// The same with 8-float registers; xt rows hold 8V floats. Stored values alternate between two sets of accumulators
// (summed at the end): with few registers a row's multiply-adds would otherwise wait on each other's latency.
template <int V>
SHRINK_TARGET_AVX2_FMA bool csr_rows_avx2(const CsrRows& w, const float* xt, float* yt) {
  bool bad = false;
  const std::int32_t* idx = w.column_indices;
  const float* val = w.values;
  const auto cols = static_cast<std::uint32_t>(w.cols);
  std::int32_t previous = -1;
  // The Xᵀ row of stored value i, its column checked (in range, above the row's previous one).
  auto row_of = [&](std::int32_t i) {
    const std::int32_t k = idx[i];
    bad |= k <= previous || static_cast<std::uint32_t>(k) >= cols;
    previous = k;
    return xt + static_cast<std::int64_t>(bad ? 0 : k) * 8 * V;
  };
  for (std::int64_t n = 0; n < w.rows; ++n) {
    __m256 even[static_cast<std::size_t>(V)], odd[static_cast<std::size_t>(V)];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) even[v] = odd[v] = _mm256_setzero_ps();
    previous = -1;
    std::int32_t i = w.row_offsets[static_cast<std::size_t>(n)];
    const std::int32_t end = w.row_offsets[static_cast<std::size_t>(n + 1)];
    for (; i + 1 < end; i += 2) {
      const float* row0 = row_of(i);
      const float* row1 = row_of(i + 1);
      const __m256 a0 = _mm256_broadcast_ss(val + i), a1 = _mm256_broadcast_ss(val + i + 1);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) {
        even[v] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(row0 + 8 * v), even[v]);
        odd[v] = _mm256_fmadd_ps(a1, _mm256_loadu_ps(row1 + 8 * v), odd[v]);
      }
    }
    if (i < end) {
      const float* row0 = row_of(i);
      const __m256 a0 = _mm256_broadcast_ss(val + i);
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) even[v] = _mm256_fmadd_ps(a0, _mm256_loadu_ps(row0 + 8 * v), even[v]);
    }
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(yt + n * 8 * V + 8 * v, _mm256_add_ps(even[v], odd[v]));
  }
  return !bad;
}

template <int Lanes, std::size_t... I>
bool csr_rows_dispatch(int registers, const CsrRows& w, const float* xt, float* yt, std::index_sequence<I...>) {
  bool ok = true;
  ((registers == static_cast<int>(I + 1) ? (ok = Lanes == 16 ? csr_rows_avx512<static_cast<int>(I + 1)>(w, xt, yt)
                                                             : csr_rows_avx2<static_cast<int>(I + 1)>(w, xt, yt),
                                            0)
                                         : 0),
   ...);
  return ok;
}
#endif

}  // namespace shrink::cpu
