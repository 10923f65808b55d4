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

namespace shrink::cpu {

// A PackedInt4Weight as a weight source of the panel driver (cpu/gemm_panel.hpp): each block dequantized into the
// driver's buffer.
struct Int4PanelSource {
  const PackedInt4Weight& weight;
  std::int64_t rows = weight.rows, cols = weight.cols;
  std::int64_t block_k = kPanelBlockK;

  const float* floats(std::int64_t p, std::int64_t k0, std::int64_t kc, float* buffer) const {
    dequantize_int4_panel(weight, p, k0, kc, buffer);
    return buffer;
  }
  void prefetch(std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) const {
    prefetch_part_l2(weight.panels.data() + (p * cols + k0) * kInt4PanelBytes,
                     static_cast<std::size_t>(kc * kInt4PanelBytes), step, steps);
  }
};

// y[m, n] = op(Σ_k x[m, k] · w[n, k]) (the epilogue operation in float), w dequantized as above, for the M rows of x
// (row stride ldx, contiguous along k) into y (row stride ldy). Arguments are checked by the caller. Runs on the
// current executor, cut as cpu/gemm_panel.hpp's for_each_panel_part cuts it (the same bits on any executor).
inline void gemm_int4_panels(const float* x, std::int64_t ldx, std::int64_t m_total, const PackedInt4Weight& w,
                             float* y, std::int64_t ldy, const EpilogueOp& op) {
  gemm_panel_source(x, ldx, m_total, Int4PanelSource{w}, y, ldy, op);
}

}  // namespace shrink::cpu
