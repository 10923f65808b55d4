// The output stage shared by the CPU linear layers (Y[M, N] = X[M, K] · W[N, K]ᵀ): scales, bias, activation.
//
//   out[m, n] = act(acc[m, n] · (row_scale[m] · col_scale[n]) + bias[n])        in float, in that order
//
// acc is the reduction over k (int32 for INT8 × INT8, converted to float first; float for the other paths),
// row_scale the activation's scale (per token or per tensor; 1 for float activations) and col_scale the weight's
// (per output channel or per tensor; 1 for float weights). Activations: none, ReLU max(v, 0), GELU with erf
// 0.5·v·(1 + erf(v/√2)) (PyTorch's default), SiLU v / (1 + exp(−v)). Every operation rounds on its own (no fused
// multiply-add, whatever the compiler flags), so the CUDA epilogue (cuda/gemm_int8_epilogue.cuh) can match it bit for
// bit. The epilogue is a struct so it can grow without changing the entry points: output_scale requantizes int8
// outputs (cpu/linear_output.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "shrink/core/view.hpp"
#include "shrink/cpu/no_contract.hpp"

namespace shrink::cpu {

enum class Activation : std::uint8_t { none, relu, gelu, silu };

inline const char* to_string(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::silu: return "silu";
  }
  return "?";
}

struct LinearEpilogue {
  TensorView<const float> bias;  // [N] host floats, or an empty view for no bias
  Activation activation = Activation::none;
  // int8 outputs only (ignored otherwise): q = clamp(nearbyint(v · (1.0f / output_scale)), −128, 127), the symmetric
  // int8 quantize of quant/quantize.hpp (round half to even); finite and > 0.
  float output_scale = 0.0f;

  static LinearEpilogue with_bias(TensorView<const float> bias, Activation activation = Activation::none) {
    LinearEpilogue e;
    e.bias = bias;
    e.activation = activation;
    return e;
  }
};

namespace detail {

inline float activate(float v, Activation a) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0.0f ? v : 0.0f;
    case Activation::gelu: return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    case Activation::silu: return v / (1.0f + std::exp(-v));
  }
  return v;
}

// One run of `count` outputs of a row: out[j] = act(acc[j] · (row_scale · col_scale[j]) + bias[j]);
// col_scale and bias may be null (1 and 0).
SHRINK_NO_CONTRACT inline void finish_run(const float* acc, float row_scale, const float* col_scale, const float* bias,
                                          Activation activation, float* out, std::int64_t count) {
  SHRINK_NO_CONTRACT_BODY
  for (std::int64_t j = 0; j < count; ++j) {
    const float scale = col_scale != nullptr ? row_scale * col_scale[j] : row_scale;
    const float v = acc[j] * scale + (bias != nullptr ? bias[j] : 0.0f);
    out[j] = activation == Activation::none ? v : activate(v, activation);
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
