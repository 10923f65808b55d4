// Fake quantization (quantize then dequantize in float) and its straight-through gradient.
//
// As PyTorch's fake_quantize_per_tensor_affine / fake_quantize_per_channel_affine:
//   q    = nearbyint(x * (1.0f / scale)) + zero_point
//   y    = (clamp(q, qmin, qmax) - zero_point) * scale
//   mask = qmin <= q <= qmax      (where the straight-through estimator passes the gradient)
//   dL/dx = dL/dy * mask
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/cpu/param_runs.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {
namespace detail {

inline void fake_quantize_checked(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams,
                                  TensorView<float> out, std::uint8_t* mask, const char* fn) {
  const std::vector<AffineParams> params = affine_params(qparams, scheme);
  std::vector<float> storage;
  const float* data = contiguous_input(x, storage);
  cpu::require_finite(data, x.numel(), fn, "x");
  cpu::for_each_param_run(
      param_layout(scheme, x.shape(), fn),
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        cpu::fake_quantize_run(data + off, out.data() + off, mask ? mask + off : nullptr, len,
                               params[static_cast<std::size_t>(p)]);
      },
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        cpu::fake_quantize_run_varying(data + off, out.data() + off, mask ? mask + off : nullptr, len, params.data() + p);
      });
}

}  // namespace detail

// Writes the fake-quantized x into `out` (contiguous, x's shape; may be x itself when x is contiguous).
inline void fake_quantize(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams,
                          TensorView<float> out) {
  const char* fn = "shrink::quant::fake_quantize";
  detail::check_quantize_args(x, scheme, qparams, fn);
  detail::require_contiguous_output(out, x.shape(), fn, "out");
  detail::fake_quantize_checked(x, scheme, qparams, out, nullptr, fn);
}

// Same, and the straight-through mask (1 = gradient passes) into `mask` (contiguous, x's shape).
inline void fake_quantize(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams,
                          TensorView<float> out, TensorView<std::uint8_t> mask) {
  const char* fn = "shrink::quant::fake_quantize";
  detail::check_quantize_args(x, scheme, qparams, fn);
  detail::require_contiguous_output(out, x.shape(), fn, "out");
  detail::require_contiguous_output(mask, x.shape(), fn, "mask");
  detail::fake_quantize_checked(x, scheme, qparams, out, mask.data(), fn);
}

inline std::vector<float> fake_quantize(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams) {
  std::vector<float> out(static_cast<std::size_t>(x.numel()));
  fake_quantize(x, scheme, qparams, TensorView<float>(out.data(), x.shape()));
  return out;
}

// Straight-through estimator: grad_in = grad_out * mask (grad_in may be grad_out itself).
inline void fake_quantize_backward(TensorView<const float> grad_out, TensorView<const std::uint8_t> mask,
                                   TensorView<float> grad_in) {
  const char* fn = "shrink::quant::fake_quantize_backward";
  detail::require_contiguous_output(grad_out, grad_out.shape(), fn, "grad_out");
  detail::require_contiguous_output(mask, grad_out.shape(), fn, "mask");
  detail::require_contiguous_output(grad_in, grad_out.shape(), fn, "grad_in");
  const std::int64_t n = grad_out.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t m = mask.data()[i];
    if (m > 1) fail(fn, ("mask[" + std::to_string(i) + "]").c_str(), int{m}, "0 or 1");
  }
  for (std::int64_t i = 0; i < n; ++i) grad_in.data()[i] = mask.data()[i] ? grad_out.data()[i] : 0.0f;
}

}  // namespace shrink::quant
