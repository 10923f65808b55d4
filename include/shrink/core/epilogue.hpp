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
#include <type_traits>

#include "shrink/core/activation.hpp"
#include "shrink/core/affine.hpp"
#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"
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
    return Support::no("epilogue.x_scales.shape", to_string(e.x_scales.shape()), "an empty view: " + why);
  if (!is_empty_view(e.w_scales))
    return Support::no("epilogue.w_scales.shape", to_string(e.w_scales.shape()), "an empty view: " + why);
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

// The epilogue as one operation, the same on the host and the device: what a checked Epilogue becomes for a product
// (linear/epilogue_check.hpp's make_epilogue_op), a few pointers and numbers that every CPU and CUDA kernel takes by
// value and applies per element:
//   sx = x_scales[m · x_step] (1 without),  sw = w_scales[n · w_step] (1 without),  b = bias[n] (0 without)
//   v  = act(acc · (sx · sw) + b)                                              value(acc, sx, n)
//   out = v (float), v rounded to nearest even (half, bfloat16: core/half.hpp's encoders, the same bits on both
//         sides), epilogue_int8(v) (int8)                                       output<Out>(v)
// Pointers are host or device memory, as the product's; a product whose operands carry their scales puts them here
// (with_scales), so the arithmetic is written once. A split of K sums its partial accumulators first, then applies
// value once (cuda/kernels/common/epilogue.cuh's finish_splits_kernel).
struct EpilogueOp {
  const float* x_scales = nullptr;  // sx: [M] (x_step 1) or [1] (x_step 0), or null for 1
  const float* w_scales = nullptr;  // sw: [N] (w_step 1) or [1] (w_step 0), or null for 1
  const float* bias = nullptr;      // [N], or null for 0
  std::int64_t x_step = 0;
  std::int64_t w_step = 0;
  Activation activation = Activation::none;
  float out_scale = 1.0f;      // int8 outputs: finite, > 0
  float inv_out_scale = 1.0f;  // 1.0f / out_scale

  // The same operation with other scales: those an operand carries (a QuantizedTensor's, a packed weight's).
  EpilogueOp with_scales(const float* xs, std::int64_t xs_step, const float* ws, std::int64_t ws_step) const {
    EpilogueOp op = *this;
    op.x_scales = xs;
    op.x_step = xs_step;
    op.w_scales = ws;
    op.w_step = ws_step;
    return op;
  }

  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float x_scale(std::int64_t m) const {
    return x_scales != nullptr ? load(x_scales + m * x_step) : 1.0f;
  }
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float w_scale(std::int64_t n) const {
    return w_scales != nullptr ? load(w_scales + n * w_step) : 1.0f;
  }
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float bias_at(std::int64_t n) const {
    return bias != nullptr ? load(bias + n) : 0.0f;  // +0.0f: −0 becomes +0 with or without a bias
  }

  // v = act(acc · (sx · sw[n]) + bias[n]) for an accumulator of a row whose scale is sx.
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float value(float acc, float sx, std::int64_t n) const {
    return value(acc, sx, w_scale(n), bias_at(n));
  }
  // The same with sw and b already loaded (a kernel that checks them first). Host callers are SHRINK_NO_CONTRACT
  // functions too, so that this inlines into them (GCC inlines only across equal options).
#if !defined(__CUDA_ARCH__)
  SHRINK_NO_CONTRACT
#endif
  SHRINK_HOST_DEVICE float value(float acc, float sx, float sw, float b) const {
#if !defined(__CUDA_ARCH__)
    SHRINK_NO_CONTRACT_BODY
#endif
    return epilogue_value(acc, scale_product(sx, sw), b, activation);
  }

  // v in the output type Out: float, half, bfloat16 or int8.
  template <class Out>
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE Out output(float v) const {
    if constexpr (std::is_same<Out, float>::value) {
      return v;
    } else if constexpr (std::is_same<Out, std::int8_t>::value) {
      return epilogue_int8(v, out_scale, inv_out_scale);
    } else {
      static_assert(std::is_same<Out, half>::value || std::is_same<Out, bfloat16>::value,
                    "epilogue outputs are float, half, bfloat16 or int8");
      return Out(v);
    }
  }

 private:
  // Read-only loads: through the read-only data cache on the device.
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE static float load(const float* p) {
#if defined(__CUDA_ARCH__)
    return __ldg(p);
#else
    return *p;
#endif
  }
  SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE static float scale_product(float sx, float sw) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(sx, sw);
#else
    return sx * sw;
#endif
  }
};

}  // namespace shrink
