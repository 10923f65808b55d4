// The column walk GPTQ (quant/gptq.hpp) and SparseGPT (prune/sparsegpt.hpp) share: a Linear weight's columns visited
// one after another, each column's error spread over the columns after it through the upper factor U of the damped
// inverse Hessian (quant/inverse_hessian.hpp), with lazy block updates (Frantar et al. 2022; Frantar & Alistarh 2023).
//
// With W [out, in] in double (column-major, processing order) and U upper [in, in] (UᵀU = H⁻¹):
//   for each column i, in blocks [b0, b1) and runs [s0, s1) inside them:
//     e_i = visit(i)                          the method's choice for column i: e_i = (w_i − ŵ_i) / U_ii, every row
//     W[:, i+1:s1] −= e_i · U[i, i+1:s1]      rank-1 inside the run (at most kColumnRun columns)
//   after each run    W[:, s1:b1] −= E[:, s0:s1] · U[s0:s1, s1:b1]
//   after each block  W[:, b1:]   −= E[:, b0:b1] · U[b0:b1, b1:]          (cpu/gemm_f64.hpp)
// Spans: a method that decides several columns at once (a group's quantization parameters, a mask block, an N:M
// run) names their lengths L. Span [kL, min((k + 1)L, in)) is read whole when column kL comes up, and the walk makes
// it hold every update of the columns before it: blocks are rounded down to a multiple of the spans' least common
// multiple (at least one), and a run ends before any span that starts inside it (past its first column) and would
// reach past its end. The result is then the unblocked algorithm's (every update applied at once) up to float order,
// whatever the block size. Rows are independent: they run in fixed chunks of kColumnWalkRowChunk rows on the current
// executor, so the bytes do not depend on the thread count.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "shrink/core/executor.hpp"
#include "shrink/cpu/gemm_f64.hpp"

namespace shrink::quant {

// Rows per task (a constant, so chunks do not follow the executor), and columns updated rank-1 before one product
// updates the rest of a block.
inline constexpr std::int64_t kColumnWalkRowChunk = 64;
inline constexpr Eigen::Index kColumnRun = 16;

// The rows of one chunk: W[first + k, j] is at w[k + j·ld] for k < count.
struct ColumnWalkRows {
  std::int64_t first = 0;
  Eigen::Index count = 0;
  double* w = nullptr;
  Eigen::Index ld = 0;

  double* column(Eigen::Index j) const { return w + j * ld; }
};

// The lazy block width the walk uses for a requested block_size (>= 1) and span lengths (each >= 1) over `columns`
// columns: block_size rounded down to a multiple of the spans' least common multiple, at least one multiple.
inline std::int64_t column_walk_block(std::int64_t block_size, const std::vector<std::int64_t>& spans,
                                      std::int64_t columns) {
  std::int64_t unit = 1;
  for (std::int64_t l : spans) {
    unit = std::lcm(unit, l);
    if (unit >= columns) return std::max<std::int64_t>(columns, 1);  // one block holds every column
  }
  return std::max<std::int64_t>(1, block_size / unit) * unit;
}

// Runs the walk over w [out, in] (column-major, processing order; updated in place) with u [in, in] upper.
// visit(const ColumnWalkRows& rows, Eigen::Index i, double* e) reads and decides column i of the chunk's rows (and,
// at a span start, the span's columns, then up to date), and writes e[k] = (w − ŵ) / U_ii for k < rows.count; it may
// write to the method's outputs for those rows only.
template <class Visit>
void walk_columns(Eigen::MatrixXd& w, const Eigen::MatrixXd& u, std::int64_t block_size,
                  const std::vector<std::int64_t>& spans, Visit&& visit) {
  const std::int64_t out = w.rows();
  const Eigen::Index n = w.cols();
  const std::int64_t block = column_walk_block(block_size, spans, n);
  // The end of the run starting at s0 inside block [.., b1).
  auto run_end = [&](Eigen::Index s0, Eigen::Index b1) {
    Eigen::Index s1 = std::min<Eigen::Index>(s0 + kColumnRun, b1);
    for (bool cut = true; cut;) {
      cut = false;
      for (std::int64_t l : spans) {
        const Eigen::Index t = (s1 - 1) / l * l;  // the last span start before s1
        if (t > s0 && std::min<Eigen::Index>(t + l, n) > s1) {
          s1 = t;
          cut = true;
        }
      }
    }
    return s1;
  };
  parallel_for(out, kColumnWalkRowChunk, [&](std::int64_t r0, std::int64_t r1) {
    const Eigen::Index ld = static_cast<Eigen::Index>(out);
    const ColumnWalkRows rows{r0, static_cast<Eigen::Index>(r1 - r0), w.data() + r0, ld};
    const Eigen::Index count = rows.count;
    Eigen::MatrixXd err(count, static_cast<Eigen::Index>(block));
    for (Eigen::Index b0 = 0; b0 < n; b0 += block) {
      const Eigen::Index b1 = std::min<Eigen::Index>(b0 + block, n);
      for (Eigen::Index s0 = b0; s0 < b1;) {
        const Eigen::Index s1 = run_end(s0, b1);
        for (Eigen::Index i = s0; i < s1; ++i) {
          double* e = err.data() + (i - b0) * count;
          visit(rows, i, e);
          for (Eigen::Index j = i + 1; j < s1; ++j) {
            const double uij = u(i, j);
            double* wj = rows.column(j);
            for (Eigen::Index k = 0; k < count; ++k) wj[k] -= e[k] * uij;
          }
        }
        if (s1 < b1)
          cpu::gemm_f64_subtract(count, b1 - s1, s1 - s0, err.data() + (s0 - b0) * count, count,
                                 cpu::GemmF64B{&u(s0, s1), 1, n}, rows.column(s1), ld);
        s0 = s1;
      }
      if (b1 < n)
        cpu::gemm_f64_subtract(count, n - b1, b1 - b0, err.data(), count, cpu::GemmF64B{&u(b0, b1), 1, n},
                               rows.column(b1), ld);
    }
  });
}

}  // namespace shrink::quant
