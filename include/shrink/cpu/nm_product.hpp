// The N:M sparse float product on the CPU (linear/nm.hpp's kernels and their choice): Y[M, N] = X[M, K] · W[N, K]ᵀ
// with W read as sparse::NmCompressed stores it (values + positions), out = op(Y) (core/epilogue.hpp).
//
//   dots      each weight row a sparse dot product with a pass of rows of X (cpu/nm_dots.hpp), reading the weight
//             once a pass at its compressed size: 2:4 with AVX-512 up to 48 rows (12 a pass) and AVX2 up to 4 rows;
//             any n:m in scalar code up to 12 rows otherwise.
//   expand    more rows: blocks of 32 weight rows expanded to dense float panels for the panel driver
//             (cpu/gemm_panel.hpp), at about the dense float speed (a CPU has no sparse unit; the notes in
//             benchmarks/notes/cpu_linear.md give what was tried).
// The dot kernels check the positions as they read them; the expanding path, which stores each value at its position,
// runs only once the caller has checked them all. Every output is computed by one part with the same
// instructions in the same order whatever the executor, so every thread count gives the same bits.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/nm_dots.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// An N:M weight as a source of the panel driver: rows 32p .. 32p + 31, columns k0 .. k0 + kc − 1 as a dense k-major
// panel, zeros, then each kept value stored at its column. Its positions must have been checked.
struct NmExpandSource {
  const NmRows& weight;
  std::int64_t rows = weight.rows, cols = weight.cols;
  std::int64_t block_k = std::max<std::int64_t>(1, kPanelBlockK / weight.group) * weight.group;

  const float* floats(std::int64_t p, std::int64_t k0, std::int64_t kc, float* buffer) const {
    const int n = weight.kept, m = weight.group;
    std::fill(buffer, buffer + kc * kPanelWidth, 0.0f);
    const std::int64_t r_end = std::min(rows, (p + 1) * kPanelWidth), first_group = k0 / m, groups = kc / m;
    for (std::int64_t r = p * kPanelWidth; r < r_end; ++r) {
      const float* values = weight.values + r * weight.kept_per_row + first_group * n;
      const std::uint8_t* positions = weight.positions + r * weight.kept_per_row + first_group * n;
      float* column = buffer + (r - p * kPanelWidth);
      for (std::int64_t g = 0; g < groups; ++g, column += m * kPanelWidth, values += n, positions += n)
        for (int t = 0; t < n; ++t) column[positions[t] * kPanelWidth] = values[t];
    }
    return buffer;
  }
  // The values and positions a block is made from: 32 rows, a run of each array per row; a few rows per step (the
  // rows sit kept_per_row apart, a stride the hardware prefetcher does not follow).
  void prefetch(std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) const {
    const std::int64_t panel_rows = std::min(kPanelWidth, rows - p * kPanelWidth);
    const std::int64_t per_step = (panel_rows + steps - 1) / steps;
    const std::int64_t begin = k0 / weight.group * weight.kept, count = kc / weight.group * weight.kept;
    const std::int64_t r0 = p * kPanelWidth + step * per_step;
    const std::int64_t r1 = std::min(p * kPanelWidth + panel_rows, r0 + per_step);
    for (std::int64_t r = r0; r < r1; ++r) {
      prefetch_part_l2(weight.values + r * weight.kept_per_row + begin, static_cast<std::size_t>(count) * sizeof(float),
                       0, 1);
      prefetch_part_l2(weight.positions + r * weight.kept_per_row + begin, static_cast<std::size_t>(count), 0, 1);
    }
  }
};

inline constexpr std::int64_t kNmDotRowsAvx2 = 4;  // AVX2 2:4: rows of X up to which the dot products run

enum class NmPath { dots, expand };

// The kernel family the CPU's level and the shape choose; `dot_rows`: the rows of X per pass of the dot products.
inline NmPath choose_nm_path(std::int64_t m_total, const NmRows& w, std::int64_t& dot_rows) {
  const bool two_of_four = w.kept == 2 && w.group == 4;
  dot_rows = kNmDotRows;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512())
    return m_total <= kNmDotRows || (two_of_four && m_total <= kNmDotChunks * kNmDotRows) ? NmPath::dots
                                                                                          : NmPath::expand;
  if (use_avx2_fma()) {
    dot_rows = kNmDotRowsAvx2;
    return two_of_four && m_total <= kNmDotRowsAvx2 ? NmPath::dots : NmPath::expand;
  }
#endif
  return m_total <= kNmDotRows ? NmPath::dots : NmPath::expand;
}

namespace detail {

// The dot products of the rows m0 .. m0 + rows − 1 of x with the weight rows of `part`, into yt [part rows, rows].
inline bool nm_dots_part(const NmRows& part, const float* x, std::int64_t ldx, std::int64_t rows, float* yt) {
  std::int64_t groups_done = 0;
  bool ok = true;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (part.kept == 2 && part.group == 4 && use_avx512()) {
    for_each_row_tile<kNmDotRows>(rows, [&](auto tile_rows, std::int64_t) {
      ok = nm24_dots_avx512<decltype(tile_rows)::value>(part, x, ldx, yt, groups_done) && ok;
    });
  } else if (part.kept == 2 && part.group == 4 && use_avx2_fma()) {
    for_each_row_tile<kNmDotRowsAvx2>(rows, [&](auto tile_rows, std::int64_t) {
      ok = nm24_dots_avx2<decltype(tile_rows)::value>(part, x, ldx, yt, groups_done) && ok;
    });
  }
#endif
  return nm_dots_scalar(part, x, ldx, rows, 0, part.rows, groups_done, yt, groups_done > 0) && ok;
}

// The part of w holding the weight rows r0 .. r1 − 1.
inline NmRows nm_row_range(const NmRows& w, std::int64_t r0, std::int64_t r1) {
  const std::size_t first = static_cast<std::size_t>(r0 * w.kept_per_row);
  return NmRows{r1 - r0, w.cols, w.kept, w.group, w.kept_per_row, w.values + first, w.positions + first};
}

}  // namespace detail

// out[m, n] = op(Σ_{kept k of row n} x[m, k] · w[n, k]) for the M rows of x (row stride ldx, contiguous along k) into
// out (rows contiguous). Arguments are checked by the caller, the positions excepted: positions_valid() is asked
// before the expanding path, which relies on them. Returns false, out untouched, on a position out of [0, m) or not
// increasing within its group (the caller names it). Runs on the current executor.
template <class PositionsValid>
bool nm_product(const float* x, std::int64_t ldx, std::int64_t m_total, const NmRows& w, TensorView<float> out,
                const EpilogueOp& op, PositionsValid&& positions_valid) {
  const std::int64_t n_total = w.rows;
  std::int64_t dot_rows = 0;
  const NmPath path = choose_nm_path(m_total, w, dot_rows);
  if (path == NmPath::expand) {
    if (!positions_valid()) return false;
    gemm_panel_source(x, ldx, m_total, NmExpandSource{w}, out.data(), out.stride(0), op);
    return true;
  }
  // Passes of rows of X, each against ranges of weight rows, into private storage checked before out is written.
  const std::int64_t chunks = (m_total + dot_rows - 1) / dot_rows;
  std::vector<float> yt(static_cast<std::size_t>(n_total * m_total));
  // Parts: a pass against a range of weight rows (the same sums whatever the cut).
  const std::int64_t part_rows =
      chunk_size(n_total, 2.0 * static_cast<double>(std::min(m_total, dot_rows) * w.kept_per_row));
  const std::int64_t row_parts = (n_total + part_rows - 1) / part_rows;
  std::atomic<bool> all_ok{true};
  parallel_for(chunks * row_parts, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t c = i / row_parts, r0 = i % row_parts * part_rows, r1 = std::min(n_total, r0 + part_rows);
      const std::int64_t m0 = c * dot_rows, rows = std::min(dot_rows, m_total - m0);
      // The pass's Yᵀ [N, rows] starts at yt + m0 · N; its part from weight row r0.
      if (!detail::nm_dots_part(detail::nm_row_range(w, r0, r1), x + m0 * ldx, ldx, rows,
                                yt.data() + m0 * n_total + r0 * rows))
        all_ok.store(false);
    }
  });
  if (!all_ok.load()) return false;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t m0 = c * dot_rows, rows = std::min(dot_rows, m_total - m0);
    finish_transposed(op, yt.data() + m0 * n_total, rows, rows, n_total, m0, out);
  }
  return true;
}

}  // namespace shrink::cpu
