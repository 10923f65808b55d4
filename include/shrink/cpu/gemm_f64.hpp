// C −= A·B in double, the one product the calibration methods' factorisations and updates are made of
// (cpu/cholesky.hpp, quant/gptq.hpp): C [m, n] and A [m, k] column-major with leading dimensions, B [k, n] with any
// two strides (so Bᵀ of a column-major matrix needs no copy).
//
//   AVX-512  tiles of 16 rows × 8 columns (16 accumulators), AVX2 + FMA  tiles of 8 × 6 (12 accumulators): A and B are
//            packed by blocks (kGemmF64BlockK deep; kGemmF64BlockM rows of A kept in L2, B's columns streamed from a
//            packed block) into micro-panels a tile reads contiguously, zero-padded at the edges; each tile sums
//            Σ_p A(i, p)·B(p, j) over one k block with one rounding per multiply-add, then subtracts it from C.
//   other    Eigen's product (SSE2), by blocks of 64 columns when only the lower triangle is asked for.
// The order of the sums depends on the SIMD level, not on the data or the thread count: on one machine the result is
// the same every run.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// B(p, j) = data[p·stride_k + j·stride_n].
struct GemmF64B {
  const double* data;
  std::ptrdiff_t stride_k;
  std::ptrdiff_t stride_n;
};

// Which part of C the caller needs: all of it, or the lower triangle (i >= j; tiles crossing the diagonal are
// computed whole, so some entries above it change too).
enum class GemmF64Part { all, lower };

inline constexpr std::ptrdiff_t kGemmF64BlockK = 256;  // k per packed block
inline constexpr std::ptrdiff_t kGemmF64BlockM = 96;   // rows of A per packed block: 96 × 256 doubles = 192 KB (L2)
inline constexpr std::ptrdiff_t kGemmF64BlockN = 768;  // columns of B per packed block: 1.5 MB

namespace gemm_f64_detail {

// A's rows [i0, i0 + mc) and depth [p0, p0 + kc) into micro-panels of MR rows: panel r holds, for each p, MR values.
template <int MR>
void pack_a(const double* a, std::ptrdiff_t lda, std::ptrdiff_t i0, std::ptrdiff_t mc, std::ptrdiff_t p0,
            std::ptrdiff_t kc, double* out) {
  for (std::ptrdiff_t r = 0; r < mc; r += MR) {
    const std::ptrdiff_t rows = std::min<std::ptrdiff_t>(MR, mc - r);
    for (std::ptrdiff_t p = 0; p < kc; ++p) {
      const double* src = a + (i0 + r) + (p0 + p) * lda;
      std::ptrdiff_t i = 0;
      for (; i < rows; ++i) out[i] = src[i];
      for (; i < MR; ++i) out[i] = 0.0;
      out += MR;
    }
  }
}

// B's depth [p0, p0 + kc) and columns [j0, j0 + nc) into micro-panels of NR columns.
template <int NR>
void pack_b(const GemmF64B& b, std::ptrdiff_t p0, std::ptrdiff_t kc, std::ptrdiff_t j0, std::ptrdiff_t nc,
            double* out) {
  for (std::ptrdiff_t c = 0; c < nc; c += NR) {
    const std::ptrdiff_t cols = std::min<std::ptrdiff_t>(NR, nc - c);
    for (std::ptrdiff_t p = 0; p < kc; ++p) {
      const double* src = b.data + (p0 + p) * b.stride_k + (j0 + c) * b.stride_n;
      std::ptrdiff_t j = 0;
      for (; j < cols; ++j) out[j] = src[j * b.stride_n];
      for (; j < NR; ++j) out[j] = 0.0;
      out += NR;
    }
  }
}

// C[0:rows, 0:cols] −= tile (MR × NR, column-major).
template <int MR, int NR>
void subtract_tile(const double* tile, double* c, std::ptrdiff_t ldc, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  for (std::ptrdiff_t j = 0; j < cols; ++j)
    for (std::ptrdiff_t i = 0; i < rows; ++i) c[i + j * ldc] -= tile[i + j * MR];
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// One 8 × 6 tile over kc: 12 accumulators of 4 doubles.
SHRINK_TARGET_AVX2_FMA inline void tile_avx2(std::ptrdiff_t kc, const double* a, const double* b, double* c,
                                             std::ptrdiff_t ldc, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  __m256d acc[6][2];
  for (auto& column : acc) column[0] = column[1] = _mm256_setzero_pd();
  for (std::ptrdiff_t p = 0; p < kc; ++p, a += 8, b += 6) {
    const __m256d a0 = _mm256_load_pd(a), a1 = _mm256_load_pd(a + 4);
    for (int j = 0; j < 6; ++j) {
      const __m256d bj = _mm256_broadcast_sd(b + j);
      acc[j][0] = _mm256_fmadd_pd(a0, bj, acc[j][0]);
      acc[j][1] = _mm256_fmadd_pd(a1, bj, acc[j][1]);
    }
  }
  if (rows == 8 && cols == 6) {
    for (int j = 0; j < 6; ++j) {
      double* cj = c + j * ldc;
      _mm256_storeu_pd(cj, _mm256_sub_pd(_mm256_loadu_pd(cj), acc[j][0]));
      _mm256_storeu_pd(cj + 4, _mm256_sub_pd(_mm256_loadu_pd(cj + 4), acc[j][1]));
    }
    return;
  }
  alignas(32) double tile[8 * 6];
  for (int j = 0; j < 6; ++j) {
    _mm256_store_pd(tile + 8 * j, acc[j][0]);
    _mm256_store_pd(tile + 8 * j + 4, acc[j][1]);
  }
  subtract_tile<8, 6>(tile, c, ldc, rows, cols);
}

// One 16 × 8 tile over kc: 16 accumulators of 8 doubles.
SHRINK_TARGET_AVX512 inline void tile_avx512(std::ptrdiff_t kc, const double* a, const double* b, double* c,
                                             std::ptrdiff_t ldc, std::ptrdiff_t rows, std::ptrdiff_t cols) {
  __m512d acc[8][2];
  for (auto& column : acc) column[0] = column[1] = _mm512_setzero_pd();
  for (std::ptrdiff_t p = 0; p < kc; ++p, a += 16, b += 8) {
    const __m512d a0 = _mm512_load_pd(a), a1 = _mm512_load_pd(a + 8);
    for (int j = 0; j < 8; ++j) {
      const __m512d bj = _mm512_set1_pd(b[j]);
      acc[j][0] = _mm512_fmadd_pd(a0, bj, acc[j][0]);
      acc[j][1] = _mm512_fmadd_pd(a1, bj, acc[j][1]);
    }
  }
  if (rows == 16 && cols == 8) {
    for (int j = 0; j < 8; ++j) {
      double* cj = c + j * ldc;
      _mm512_storeu_pd(cj, _mm512_sub_pd(_mm512_loadu_pd(cj), acc[j][0]));
      _mm512_storeu_pd(cj + 8, _mm512_sub_pd(_mm512_loadu_pd(cj + 8), acc[j][1]));
    }
    return;
  }
  alignas(64) double tile[16 * 8];
  for (int j = 0; j < 8; ++j) {
    _mm512_store_pd(tile + 16 * j, acc[j][0]);
    _mm512_store_pd(tile + 16 * j + 8, acc[j][1]);
  }
  subtract_tile<16, 8>(tile, c, ldc, rows, cols);
}
#endif

// The packed loops around one tile kernel.
template <int MR, int NR, class Tile>
void gemm_packed(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const double* a, std::ptrdiff_t lda,
                 const GemmF64B& b, double* c, std::ptrdiff_t ldc, GemmF64Part part, Tile tile) {
  thread_local AlignedVector<double> packed_a, packed_b;
  const std::ptrdiff_t round_m = (kGemmF64BlockM + MR - 1) / MR * MR;
  const std::ptrdiff_t round_n = (kGemmF64BlockN + NR - 1) / NR * NR;
  packed_a.resize(static_cast<std::size_t>(round_m * kGemmF64BlockK));
  packed_b.resize(static_cast<std::size_t>(round_n * kGemmF64BlockK));
  const bool lower = part == GemmF64Part::lower;
  for (std::ptrdiff_t j0 = 0; j0 < n; j0 += kGemmF64BlockN) {
    const std::ptrdiff_t nc = std::min(kGemmF64BlockN, n - j0);
    for (std::ptrdiff_t p0 = 0; p0 < k; p0 += kGemmF64BlockK) {
      const std::ptrdiff_t kc = std::min(kGemmF64BlockK, k - p0);
      pack_b<NR>(b, p0, kc, j0, nc, packed_b.data());
      for (std::ptrdiff_t i0 = lower ? j0 / MR * MR : 0; i0 < m; i0 += kGemmF64BlockM) {
        const std::ptrdiff_t mc = std::min(kGemmF64BlockM, m - i0);
        pack_a<MR>(a, lda, i0, mc, p0, kc, packed_a.data());
        for (std::ptrdiff_t jr = 0; jr < nc; jr += NR) {
          const std::ptrdiff_t cols = std::min<std::ptrdiff_t>(NR, nc - jr);
          for (std::ptrdiff_t ir = 0; ir < mc; ir += MR) {
            const std::ptrdiff_t row = i0 + ir, rows = std::min<std::ptrdiff_t>(MR, mc - ir);
            if (lower && row + rows <= j0 + jr) continue;  // the tile lies wholly above the diagonal
            tile(kc, packed_a.data() + ir * kc, packed_b.data() + jr * kc, c + row + (j0 + jr) * ldc, ldc, rows, cols);
          }
        }
      }
    }
  }
}

}  // namespace gemm_f64_detail

// C(i, j) −= Σ_p A(i, p)·B(p, j) for i < m, j < n, p < k, with A(i, p) = a[i + p·lda] and C(i, j) = c[i + j·ldc].
inline void gemm_f64_subtract(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, const double* a, std::ptrdiff_t lda,
                              const GemmF64B& b, double* c, std::ptrdiff_t ldc, GemmF64Part part = GemmF64Part::all) {
  if (m <= 0 || n <= 0 || k <= 0) return;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512()) {
    gemm_f64_detail::gemm_packed<16, 8>(m, n, k, a, lda, b, c, ldc, part, gemm_f64_detail::tile_avx512);
    return;
  }
  if (use_avx2_fma()) {
    gemm_f64_detail::gemm_packed<8, 6>(m, n, k, a, lda, b, c, ldc, part, gemm_f64_detail::tile_avx2);
    return;
  }
#endif
  using Outer = Eigen::OuterStride<>;
  using Strided = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  const Eigen::Map<const Eigen::MatrixXd, 0, Outer> am(a, m, k, Outer(lda));
  const Eigen::Map<const Eigen::MatrixXd, 0, Strided> bm(b.data, k, n, Strided(b.stride_n, b.stride_k));
  Eigen::Map<Eigen::MatrixXd, 0, Outer> cm(c, m, n, Outer(ldc));
  if (part == GemmF64Part::all) {
    cm.noalias() -= am * bm;
    return;
  }
  constexpr std::ptrdiff_t block = 64;
  for (std::ptrdiff_t j = 0; j < n && j < m; j += block) {
    const std::ptrdiff_t w = std::min(block, n - j);
    cm.block(j, j, m - j, w).noalias() -= am.middleRows(j, m - j) * bm.middleCols(j, w);
  }
}

}  // namespace shrink::cpu
