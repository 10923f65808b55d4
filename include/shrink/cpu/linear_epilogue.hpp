// The CPU loops of the matrix-product epilogue (core/epilogue.hpp's formula, v = act(acc · (sx · sw) + bias)) over
// runs of a row: finish_run on accumulators in row order, finish_transposed on Yᵀ.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/view.hpp"

namespace shrink::cpu {

namespace detail {

// One run of `count` outputs of a row: out[j] = act(acc[j] · (row_scale · col_scale[j]) + bias[j]);
// col_scale and bias may be null (1 and 0). No contraction here either: epilogue_value inlines only into a function
// compiled with its options.
SHRINK_NO_CONTRACT inline void finish_run(const float* acc, float row_scale, const float* col_scale, const float* bias,
                                          Activation activation, float* out, std::int64_t count) {
  SHRINK_NO_CONTRACT_BODY
  for (std::int64_t j = 0; j < count; ++j) {
    const float scale = col_scale != nullptr ? row_scale * col_scale[j] : row_scale;
    out[j] = epilogue_value(acc[j], scale, bias != nullptr ? bias[j] : 0.0f, activation);
  }
}

// Writes out[m0 + i, n] = act(yt[n, i] + bias[n]) for i < rows from yt [N, width] (Yᵀ of a chunk of rows).
inline void finish_transposed(const float* yt, std::int64_t width, std::int64_t rows, std::int64_t n_total,
                              std::int64_t m0, const float* bias, Activation activation, TensorView<float>& out) {
  constexpr std::int64_t kBlock = 64;  // outputs gathered from yt per step
  float run[kBlock];
  for (std::int64_t n0 = 0; n0 < n_total; n0 += kBlock) {
    const std::int64_t count = std::min(kBlock, n_total - n0);
    for (std::int64_t i = 0; i < rows; ++i) {
      for (std::int64_t j = 0; j < count; ++j) run[j] = yt[(n0 + j) * width + i];
      finish_run(run, 1.0f, nullptr, bias != nullptr ? bias + n0 : nullptr, activation, &out(m0 + i, n0), count);
    }
  }
}

}  // namespace detail
}  // namespace shrink::cpu
