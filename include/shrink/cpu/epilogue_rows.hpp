// The CPU loops of the epilogue operation (core/epilogue.hpp's EpilogueOp) over runs of a row: finish_run from
// accumulators in row order, finish_transposed from Yᵀ, convert_rows for an output finished in float first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

namespace detail {

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// finish_run for float accumulators and outputs without an activation, 8 at a time: v = acc · (sx · sw) + b as
// EpilogueOp::value computes it, a multiplication then an addition, each rounded (AVX2 without FMA: nothing to fuse),
// so every value is the scalar loop's bit for bit (+0 for a −0 accumulator included). Returns how many were done.
SHRINK_TARGET_AVX2 inline std::int64_t finish_float_run_avx2(const EpilogueOp& op, const float* acc, float sx,
                                                             std::int64_t n0, std::int64_t count, float* out) {
  const __m256 row_scale = _mm256_set1_ps(sx);
  const bool scales_per_column = op.w_scales != nullptr && op.w_step != 0;
  const __m256 column_scale = _mm256_set1_ps(op.w_scale(n0));  // 1, or the one scale of w, when not per column
  std::int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256 sw = scales_per_column ? _mm256_loadu_ps(op.w_scales + (n0 + j) * op.w_step) : column_scale;
    const __m256 b = op.bias != nullptr ? _mm256_loadu_ps(op.bias + n0 + j) : _mm256_setzero_ps();
    _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(acc + j), _mm256_mul_ps(row_scale, sw)), b));
  }
  return j;
}
#endif

}  // namespace detail

// out[j] = op.output<Out>(op.value(acc[j], sx, n0 + j)) for j < count: a run of `count` outputs of a row whose scale
// is sx, starting at column n0. acc (float, or exact int32 sums) may be out itself when both are float. Float runs
// without an activation take the AVX2 loop where the CPU has it (the same bits).
template <class Out, class Acc>
SHRINK_NO_CONTRACT void finish_run(const EpilogueOp& op, const Acc* acc, float sx, std::int64_t n0, std::int64_t count,
                                   Out* out) {
  SHRINK_NO_CONTRACT_BODY
  std::int64_t j = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if constexpr (std::is_same<Out, float>::value && std::is_same<Acc, float>::value)
    if (op.activation == Activation::none && (op.w_scales == nullptr || op.w_step == 0 || op.w_step == 1) &&
        count >= 8 && use_avx2())
      j = detail::finish_float_run_avx2(op, acc, sx, n0, count, out);
#endif
  for (; j < count; ++j) out[j] = op.output<Out>(op.value(static_cast<float>(acc[j]), sx, n0 + j));
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
