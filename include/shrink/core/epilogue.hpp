// The output stage of every matrix product Y[M, N] = X[M, K] · W[N, K]ᵀ, on both backends (linear/):
//
//   v[m, n]   = act(acc[m, n] · (sx[m] · sw[n]) + bias[n])          in float, each operation rounded on its own
//   out[m, n] = v                                                 float
//               v rounded to nearest, ties to even                half, bfloat16
//               clamp(nearbyint(v · (1.0f / out_scale)), −128, 127)   int8 (quant/quantize.hpp's symmetric int8)
//
// acc is the reduction over k: exact int32 for int8 × int8, converted to float; float otherwise. sx is the
// activations' scale (per token [M] or per tensor [1]; 1 for float activations), sw the weights' (per output channel
// [N] or per tensor [1]; 1 for float weights). act is core/activation.hpp's. Every operation rounds on its
// own (no fused multiply-add on the host or the device), so both backends compute the same bits for none and ReLU.
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/activation.hpp"
#include "shrink/core/affine.hpp"
#include "shrink/core/config.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"

namespace shrink {

// Host views for the CPU paths, device views for the CUDA ones. The scales are for int8 operands that carry none of
// their own (2:4 int8, the CUDA W8A8 GEMM); where an operand carries its scales (a QuantizedTensor, a weight-only
// weight) or has none (float), they stay empty.
struct Epilogue {
  TensorView<const float> x_scales;  // sx: [M] per token or [1] per tensor, or empty
  TensorView<const float> w_scales;  // sw: [N] per output channel or [1] per tensor, or empty
  TensorView<const float> bias;      // [N], or empty for none
  Activation activation = Activation::none;
  float out_scale = 0.0f;  // int8 outputs only: finite, > 0, with a finite inverse

  static Epilogue with_bias(TensorView<const float> bias, Activation activation = Activation::none) {
    Epilogue e;
    e.bias = bias;
    e.activation = activation;
    return e;
  }
};

// An optional vector left out: a default (rank-0, null) view or a [0] view.
inline bool is_empty_view(const TensorView<const float>& v) {
  return (v.rank() == 0 && v.data() == nullptr) || (v.rank() == 1 && v.size(0) == 0);
}

// The epilogue of a product whose operands carry their own scales or have none: both scale views empty (`why` says
// which, in the message).
inline Support check_no_scales(const Epilogue& e, const std::string& why) {
  if (!is_empty_view(e.x_scales))
    return Support::no("epilogue.x_scales", to_string(e.x_scales.shape()), "an empty view: " + why);
  if (!is_empty_view(e.w_scales))
    return Support::no("epilogue.w_scales", to_string(e.w_scales.shape()), "an empty view: " + why);
  return Support::yes();
}

// v = act(acc · scale + bias), scale = sx · sw (computed by the caller, once per pair), bias 0 for none.
#if !defined(__CUDA_ARCH__)
SHRINK_NO_CONTRACT
#endif
SHRINK_HOST_DEVICE inline float epilogue_value(float acc, float scale, float bias, Activation activation) {
#if defined(__CUDA_ARCH__)
  return activate(__fadd_rn(__fmul_rn(acc, scale), bias), activation);
#else
  SHRINK_NO_CONTRACT_BODY
  return activate(acc * scale + bias, activation);
#endif
}

// The int8 output of v: the symmetric int8 quantize with out_scale, given its inverse 1.0f / out_scale.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::int8_t epilogue_int8(float v, float out_scale, float inv_out_scale) {
  return static_cast<std::int8_t>(quantize_value(v, AffineParams(out_scale, inv_out_scale, 0, -128, 127)));
}

}  // namespace shrink
