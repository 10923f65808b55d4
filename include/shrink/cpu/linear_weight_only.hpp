// Weight-only linear layers on the CPU: Y[M, N] = X[M, K] · W[N, K]ᵀ with float activations and the weight stored in
// fewer bits — int8 (symmetric, per tensor or per output channel), half (FP16) or bfloat16 (BF16) — converted to
// float on the fly inside the product kernel; the arithmetic is float (FMA), only the weight's storage shrinks.
//
//   out[m, n] = act(s[n] · Σ_k x[m, k] · q[n, k] + bias[n])      int8: q the stored integers, s the scales
//   out[m, n] = act(Σ_k x[m, k] · float(w[n, k]) + bias[n])      half / bfloat16
//
// With few rows (M ≤ 12) the product is bound by reading the weight, so 1- or 2-byte weights run up to 4× or 2×
// faster than float ones; with many rows it is bound by arithmetic and runs at about the float speed
// (cpu/gemm_panel.hpp). Pack the weight once with pack_weight (cpu/packed_weight.hpp); the overloads taking an
// unpacked weight pack it on every call. NaN and inf in x or W propagate as IEEE arithmetic does.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/linear_check.hpp"
#include "shrink/cpu/linear_epilogue.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/quant/quantized_tensor.hpp"

namespace shrink::cpu {

namespace detail {

template <class T>
LinearSupport check_packed_weight(const PackedWeight<T>& w) {
  if (w.rows <= 0 || w.cols <= 0)
    return LinearSupport::no("w.shape", to_string(Shape{w.rows, w.cols}), "a packed weight with at least one element");
  const bool scales_ok =
      std::is_same<T, std::int8_t>::value ? static_cast<std::int64_t>(w.scales.size()) == w.rows : w.scales.empty();
  if (static_cast<std::int64_t>(w.panels.size()) != w.panel_count() * w.cols * kPanelWidth || !scales_ok)
    return LinearSupport::no("w", "an inconsistent PackedWeight", "the result of pack_weight");
  return LinearSupport::yes();
}

}  // namespace detail

template <class T>
LinearSupport can_implement_linear_weight_only(const TensorView<const float>& x, const PackedWeight<T>& w,
                                               const TensorView<float>& out, const LinearEpilogue& epilogue = {}) {
  LinearSupport s = detail::check_packed_weight(w);
  if (!s) return s;
  s = detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  return detail::check_no_overlap(out, w.panels.data(), w.panels.size() * sizeof(T), "w");
}

// out = act(X · Wᵀ (· scales) + bias) with a packed float, half, bfloat16 or int8 weight.
template <class T>
void linear_weight_only(TensorView<const float> x, const PackedWeight<T>& w, TensorView<float> out,
                        const LinearEpilogue& epilogue = {}) {
  require_supported(can_implement_linear_weight_only(x, w, out, epilogue), "shrink::cpu::linear_weight_only");
  std::vector<float> storage;
  std::int64_t ldx = 0;
  const float* xs = detail::contiguous_rows(x, storage, ldx);
  detail::gemm_panels(xs, ldx, x.size(0), w, out.data(), out.stride(0), w.scales.empty() ? nullptr : w.scales.data(),
                      detail::bias_data(epilogue), epilogue.activation);
}

// The same, packing an int8 symmetric QuantizedTensor (per tensor or per channel along axis 0) on every call.
inline void linear_weight_only(TensorView<const float> x, const quant::QuantizedTensor& w, TensorView<float> out,
                               const LinearEpilogue& epilogue = {}) {
  linear_weight_only(x, pack_weight(w), out, epilogue);
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_weight_only(TensorView<const float> x, const quant::QuantizedTensor& w, const float* bias,
                               TensorView<float> out, Activation activation = Activation::none) {
  LinearEpilogue e;
  if (bias != nullptr && w.shape.rank == 2) e.bias = TensorView<const float>(bias, Shape{w.shape.values[0]});
  e.activation = activation;
  linear_weight_only(x, w, out, e);
}

// Half and bfloat16 weights [N, K] (host views, any strides), packed on every call.
inline void linear_weight_only(TensorView<const float> x, TensorView<const half> w, TensorView<float> out,
                               const LinearEpilogue& epilogue = {}) {
  linear_weight_only(x, pack_weight(w), out, epilogue);
}
inline void linear_weight_only(TensorView<const float> x, TensorView<const bfloat16> w, TensorView<float> out,
                               const LinearEpilogue& epilogue = {}) {
  linear_weight_only(x, pack_weight(w), out, epilogue);
}

}  // namespace shrink::cpu
