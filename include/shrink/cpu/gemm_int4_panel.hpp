// The float product over a per-group int4 weight (cpu/packed_int4_weight.hpp): Y[M, N] = X[M, K] · Wᵀ with
// w[n, k] = q[n, k] · s[n, k / group], or (q[n, k] − z[n, k / group]) · s[n, k / group] when affine, dequantized in
// float one panel block at a time (256 k × 32 outputs, kept in L1; the zero point costs one integer subtraction a
// value there, shared by all M rows), then the float tiles of cpu/gemm_panel.hpp (AVX-512, AVX2, or Eigen's product)
// pass over it: the weight leaves memory once, at half a byte a value, whatever M. The result is that of
// dequantize-then-float-GEMM up to the order of the float sums.
#pragma once

#include <algorithm>
#include <cstdint>

#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/packed_int4_weight.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// y[m, n] = op(Σ_k x[m, k] · w[n, k]) (the epilogue operation in float), w dequantized as above, for the M rows of x
// (row stride ldx, contiguous along k) into y (row stride ldy). Arguments are checked by the caller. Runs on the
// current executor, cut as cpu/gemm_panel.hpp's for_each_panel_part cuts it (the same bits on any executor).
inline void gemm_int4_panels(const float* x, std::int64_t ldx, std::int64_t m_total, const PackedInt4Weight& w,
                             float* y, std::int64_t ldy, const EpilogueOp& op) {
  const std::int64_t n_total = w.rows, k_total = w.cols;
  auto finisher = [&](std::int64_t m0, std::int64_t m1) {
    return [=](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        float* row = y + m * ldy + n0;
        finish_run(op, row, op.x_scale(m), n0, n1 - n0, row);
      }
    };
  };
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  auto source = [&](std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) {
    prefetch_part_l2(w.panels.data() + (p * k_total + k0) * kInt4PanelBytes,
                     static_cast<std::size_t>(kc * kInt4PanelBytes), step, steps);
  };
  // The blocked product over each part, a panel block dequantized into the part's own buffer.
  auto run_parts = [&](auto rows_tag, auto tile) {
    for_each_panel_part(PanelPath::blocked, m_total, n_total, k_total,
                        [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
                          AlignedVector<float> block(static_cast<std::size_t>(kPanelBlockK * kPanelWidth));
                          auto panel = [&](std::int64_t p, std::int64_t k0, std::int64_t kc) -> const float* {
                            dequantize_int4_panel(w, p, k0, kc, block.data());
                            return block.data();
                          };
                          gemm_panels_blocked<decltype(rows_tag)::value>(x + m0 * ldx, ldx, m1 - m0, n0, n1, k_total,
                                                                         kPanelBlockK, y + m0 * ldy, ldy, panel, source,
                                                                         tile, finisher(m0, m1));
                        });
  };
  if (use_avx512()) {
    auto tile = [&](auto rows, const float* xs, const float* floats, std::int64_t kc, float* ys, int valid,
                    bool accumulate) {
      panel_tile_avx512<decltype(rows)::value>(xs, ldx, floats, kc, ys, ldy, valid, accumulate);
    };
    run_parts(std::integral_constant<int, kPanelRowsAvx512>{}, tile);
    return;
  }
  if (use_avx2_fma() && use_avx2_f16c()) {
    auto tile = [&](auto rows, const float* xs, const float* floats, std::int64_t kc, float* ys, int valid,
                    bool accumulate) {
      for (int half_index = 0; half_index < 2; ++half_index) {  // the panel's two halves of 16 outputs
        const int half_valid = std::min(16, valid - 16 * half_index);
        if (half_valid <= 0) break;
        panel_tile_avx2<decltype(rows)::value>(xs, ldx, floats + 16 * half_index, kc, ys + 16 * half_index, ldy,
                                               half_valid, accumulate);
      }
    };
    run_parts(std::integral_constant<int, kPanelRowsAvx2>{}, tile);
    return;
  }
#endif
  // Eigen's product, one whole panel dequantized at a time; parts of whole panels and all rows.
  for_each_panel_part(
      PanelPath::eigen, m_total, n_total, k_total, [&](std::int64_t, std::int64_t, std::int64_t n0, std::int64_t n1) {
        AlignedVector<float> whole(static_cast<std::size_t>(k_total * kPanelWidth));
        gemm_panels_eigen(x, ldx, m_total, n0, n1, k_total, y, ldy, [&](std::int64_t p) -> const float* {
          dequantize_int4_panel(w, p, 0, k_total, whole.data());
          return whole.data();
        });
        finisher(0, m_total)(n0, n1);
      });
}

}  // namespace shrink::cpu
