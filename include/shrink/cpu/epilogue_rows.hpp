// The CPU loops of the epilogue operation (core/epilogue.hpp's EpilogueOp) over runs of a row: finish_run from
// accumulators in row order, finish_transposed from Yᵀ, convert_rows for an output finished in float first.
#pragma once

#include <algorithm>
#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/core/view.hpp"

namespace shrink::cpu {

// out[j] = op.output<Out>(op.value(acc[j], sx, n0 + j)) for j < count: a run of `count` outputs of a row whose scale
// is sx, starting at column n0. acc (float, or exact int32 sums) may be out itself when both are float.
template <class Out, class Acc>
SHRINK_NO_CONTRACT void finish_run(const EpilogueOp& op, const Acc* acc, float sx, std::int64_t n0, std::int64_t count,
                                   Out* out) {
  SHRINK_NO_CONTRACT_BODY
  for (std::int64_t j = 0; j < count; ++j) out[j] = op.output<Out>(op.value(static_cast<float>(acc[j]), sx, n0 + j));
}

// out[m0 + i, n] from yt [N, width] (Yᵀ of the rows m0 .. m0 + rows − 1, side by side), i < rows.
template <class Out>
void finish_transposed(const EpilogueOp& op, const float* yt, std::int64_t width, std::int64_t rows,
                       std::int64_t n_total, std::int64_t m0, TensorView<Out>& out) {
  constexpr std::int64_t kBlock = 64;  // outputs gathered from yt per step
  float run[kBlock];
  for (std::int64_t n0 = 0; n0 < n_total; n0 += kBlock) {
    const std::int64_t count = std::min(kBlock, n_total - n0);
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < count; ++j) run[j] = yt[(n0 + j) * width + i];
      finish_run(op, run, op.x_scale(m0 + i), n0, count, &out(m0 + i, n0));
    }
  }
}

// out[m, n] = op.output<Out>(v[m, n]) for values v [M, N] (row stride ldv) the operation already finished in float:
// the products that accumulate in a float output first, then give a 16-bit one.
template <class Out>
void convert_rows(const EpilogueOp& op, const float* v, std::int64_t ldv, const TensorView<Out>& out) {
  for (std::int64_t m = 0; m < out.size(0); ++m)
    for (std::int64_t n = 0; n < out.size(1); ++n) out(m, n) = op.output<Out>(v[m * ldv + n]);
}

}  // namespace shrink::cpu
