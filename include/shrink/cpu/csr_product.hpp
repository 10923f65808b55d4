// The CSR sparse float product on the CPU (linear/csr.hpp's kernels and their choice): Y[M, N] = X[M, K] · W[N, K]ᵀ
// over the stored values of W only, out = op(Y) (core/epilogue.hpp).
//
//   dots     M ≤ 8 with AVX-512: sparse dot products (cpu/csr_dots.hpp), the columns of x gathered, 16 stored values
//            a step; the weight is read once.
//   rows     more rows with AVX-512, any M with AVX2 (whose gathers are slow): X transposed in chunks small enough to
//            stay in L2, each stored value broadcast and multiplied into a run of its Xᵀ row (one register of 8 rows
//            for M ≤ 8).
//   Eigen    (scalar / SSE2 levels) dot products in scalar code for M ≤ 8, else Eigen's sparse × dense product over the
//            CSR arrays mapped without a copy.
// The vector kernels check the column indices as they read them (in range, strictly increasing within a row); Eigen's
// product runs only once the caller has checked them all. Each row's sum is the same whatever the cut in parts, so
// every thread count gives the same bits. Tuning and figures: benchmarks/notes/cpu_linear.md.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/csr_dots.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// Calls part(rows r0 .. r1 − 1 of w as a CsrRows, r0) over ranges of about equal stored values, through parallel_for;
// `columns` rows of X (or Xᵀ columns) meet each stored value. The cut never changes a row's sum.
template <class Part>
void for_each_csr_part(const CsrRows& w, double columns, Part&& part) {
  const double per_row = 2.0 * columns * static_cast<double>(std::max<std::int32_t>(1, w.row_offsets[w.rows])) /
                         static_cast<double>(w.rows);
  const std::int64_t part_rows = chunk_size(w.rows, per_row);
  parallel_for(w.rows, part_rows, [&](std::int64_t r0, std::int64_t r1) {
    part(CsrRows{r1 - r0, w.cols, w.row_offsets + r0, w.column_indices, w.values}, r0);
  });
}

namespace detail {

// csr_dots with AVX-512 or in scalar code, for rows ≤ kCsrDotRows rows of X (a compile-time count for AVX-512).
template <std::size_t... I>
bool csr_dots_best(std::int64_t rows, const CsrRows& w, const float* x, std::int64_t ldx, float* yt,
                   std::index_sequence<I...>) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  bool ok = true;
  if (use_avx512()) {
    ((rows == static_cast<std::int64_t>(I + 1) ? (ok = csr_dots_avx512<static_cast<int>(I + 1)>(w, x, ldx, yt))
                                               : false),
     ...);
    return ok;
  }
#endif
  return csr_dots(w, x, ldx, rows, yt);
}

}  // namespace detail

// out[m, n] = op(Σ_{stored k of row n} x[m, k] · w[n, k]) for the M rows of x (row stride ldx, contiguous along k)
// into out (float or a 16-bit type, each output rounded once). Arguments are checked by the caller, the column
// indices excepted: indices_valid() is asked before Eigen's product, which relies on them. Returns false, out
// untouched, on an index out of [0, K) or not increasing within its row (the caller names it). Runs on the current
// executor.
template <class Out, class IndicesValid>
bool csr_product(const float* x, std::int64_t ldx, std::int64_t m_total, const CsrRows& w, TensorView<Out> out,
                 const EpilogueOp& op, IndicesValid&& indices_valid) {
  const std::int64_t n_total = w.rows, k_total = w.cols;
  std::atomic<bool> all_ok{true};
  bool dots = m_total <= kCsrDotRows;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  dots = dots && (use_avx512() || !use_avx2_fma());
#endif
  if (dots) {
    std::vector<float> yt(static_cast<std::size_t>(n_total * m_total));
    for_each_csr_part(w, static_cast<double>(m_total), [&](const CsrRows& part, std::int64_t r0) {
      if (!detail::csr_dots_best(m_total, part, x, ldx, yt.data() + r0 * m_total,
                                 std::make_index_sequence<kCsrDotRows>{}))
        all_ok.store(false);
    });
    if (!all_ok.load()) return false;
    finish_transposed(op, yt.data(), m_total, m_total, n_total, 0, out);
    return true;
  }

  // Xᵀ chunks [K, width]: the rows m0 .. m0 + width − 1 of X side by side, zero past M.
  int lanes = 0;
  std::int64_t max_width = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512()) {
    lanes = 16;
    max_width = 128;
  } else if (use_avx2_fma()) {
    lanes = 8;
    max_width = 64;
  }
#endif
  if (lanes == 0) {  // Eigen: Yᵀ = W · Xᵀ with W's arrays mapped as a row-major sparse matrix
    if (!indices_valid()) return false;
    using SparseMap = Eigen::Map<const Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t>>;
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    RowMajor xt(k_total, m_total);
    for (std::int64_t m = 0; m < m_total; ++m)
      for (std::int64_t k = 0; k < k_total; ++k) xt(k, m) = x[m * ldx + k];
    RowMajor yt(n_total, m_total);
    // Ranges of W's rows (maps of part of the arrays: the offsets stay absolute), each row's sum as for all of W.
    for_each_csr_part(w, static_cast<double>(m_total), [&](const CsrRows& part, std::int64_t r0) {
      const SparseMap part_w(part.rows, k_total, part.row_offsets[part.rows] - part.row_offsets[0], part.row_offsets,
                             w.column_indices, w.values);
      yt.middleRows(r0, part.rows).noalias() = part_w * xt;
    });
    finish_transposed(op, yt.data(), m_total, m_total, n_total, 0, out);
    return true;
  }
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  // Xᵀ chunks small enough to stay in L2 while the weight rows pick their rows at random (at least one register).
  max_width = std::min(max_width, std::max<std::int64_t>(lanes, kCsrChunkBytes / (k_total * 4) / lanes * lanes));
  const std::int64_t chunks = (m_total + max_width - 1) / max_width;
  const std::int64_t rows_per_chunk = (m_total + chunks - 1) / chunks;
  const std::int64_t width = (rows_per_chunk + lanes - 1) / lanes * lanes;
  const int registers = static_cast<int>(width / lanes);
  AlignedVector<float> xt(static_cast<std::size_t>(k_total * width * chunks));
  AlignedVector<float> yt(static_cast<std::size_t>(n_total * width * chunks));  // every chunk kept until all passed
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const std::int64_t m0 = c * rows_per_chunk, rows = std::min(rows_per_chunk, m_total - m0);
      float* chunk_xt = xt.data() + c * k_total * width;
      std::fill(chunk_xt, chunk_xt + k_total * width, 0.0f);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t k = 0; k < k_total; ++k) chunk_xt[k * width + i] = x[(m0 + i) * ldx + k];
    }
  });
  // Parts: a chunk of Xᵀ against a range of weight rows.
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c)
      for_each_csr_part(w, static_cast<double>(width), [&](const CsrRows& part, std::int64_t r0) {
        const float* chunk_xt = xt.data() + c * k_total * width;
        float* part_yt = yt.data() + c * n_total * width + r0 * width;
        const bool ok = lanes == 16
                            ? csr_rows_dispatch<16>(registers, part, chunk_xt, part_yt, std::make_index_sequence<8>{})
                            : csr_rows_dispatch<8>(registers, part, chunk_xt, part_yt, std::make_index_sequence<8>{});
        if (!ok) all_ok.store(false);
      });
  });
  if (!all_ok.load()) return false;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t m0 = c * rows_per_chunk, rows = std::min(rows_per_chunk, m_total - m0);
    finish_transposed(op, yt.data() + c * n_total * width, width, rows, n_total, m0, out);
  }
#endif
  return true;
}

}  // namespace shrink::cpu
