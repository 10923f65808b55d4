// The CPU loops of the matrix-product epilogue (core/epilogue.hpp's formulas) over runs of a row: finish_run and
// finish_transposed make v = act(acc · (sx · sw) + bias) from accumulators in row order or from Yᵀ, store_outputs
// writes v as float, half, bfloat16 or requantized int8.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"

namespace shrink::cpu {

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

// out[j] = the `Out` form of the float epilogue values v[j], j < count.
template <class Out>
void store_outputs(const float* v, Out* out, std::int64_t count, const Epilogue& epilogue) {
  if constexpr (std::is_same<Out, float>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = v[j];
  } else if constexpr (std::is_same<Out, half>::value || std::is_same<Out, bfloat16>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = Out(v[j]);
  } else {
    static_assert(std::is_same<Out, std::int8_t>::value, "outputs are float, half, bfloat16 or int8");
    const float inverse = 1.0f / epilogue.out_scale;
    for (std::int64_t j = 0; j < count; ++j) out[j] = epilogue_int8(v[j], epilogue.out_scale, inverse);
  }
}

}  // namespace shrink::cpu
