// Weight-only linear layers on the CPU: Y[M, N] = X[M, K] · W[N, K]ᵀ with the weight stored in fewer bits — int8
// (symmetric, per tensor or per output channel), int4 (symmetric, one scale per group of inputs), half (FP16) or
// bfloat16 (BF16) — converted to float on the fly inside the product kernel; the arithmetic is float (FMA), only the
// weight's storage shrinks. Activations and outputs are float, or half / bfloat16 (the CPU twin of the GPU's
// W8A16 / W4A16 kernels, shrink/cuda/gemm_weight_only.hpp).
//
//   out[m, n] = act(s[n] · Σ_k x[m, k] · q[n, k] + bias[n])          int8: q the stored integers, s the scales
//   out[m, n] = act(Σ_k x[m, k] · (q[n, k] · s[n, k / g]) + bias[n])   int4, groups of g inputs: dequantized in float
//   out[m, n] = act(Σ_k x[m, k] · float(w[n, k]) + bias[n])          half / bfloat16
//
// Half / bfloat16 activations are converted to float (exactly), the product and epilogue run in float, and each
// output is rounded to nearest even (overflow to ±inf, as a cast).
// With few rows (M ≤ 12) the product is bound by reading the weight, so 1- or 2-byte weights run up to 4× or 2×
// faster than float ones; with many rows it is bound by arithmetic and runs at about the float speed
// (cpu/gemm_panel.hpp). Pack the weight once with pack_weight / pack_weight_int4 (cpu/packed_weight.hpp,
// cpu/packed_int4_weight.hpp); the overloads taking an unpacked weight pack it on every call. NaN and inf in x or W
// propagate as IEEE arithmetic does.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/gemm_int4_panel.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/linear_check.hpp"
#include "shrink/cpu/linear_epilogue.hpp"
#include "shrink/cpu/packed_int4_weight.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/quant/quantized_tensor.hpp"

namespace shrink::cpu {

namespace detail {

template <class T>
Support check_packed_weight(const PackedWeight<T>& w) {
  if (w.rows <= 0 || w.cols <= 0)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}), "a packed weight with at least one element");
  const bool scales_ok =
      std::is_same<T, std::int8_t>::value ? static_cast<std::int64_t>(w.scales.size()) == w.rows : w.scales.empty();
  if (static_cast<std::int64_t>(w.panels.size()) != w.panel_count() * w.cols * kPanelWidth || !scales_ok)
    return Support::no("w", "an inconsistent PackedWeight", "the result of pack_weight");
  return Support::yes();
}

inline Support check_packed_weight(const PackedInt4Weight& w) {
  if (w.rows <= 0 || w.cols <= 0)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}), "a packed weight with at least one element");
  if (w.group_size <= 0 || w.cols % w.group_size != 0)
    return Support::no("w.group_size", std::to_string(w.group_size), "a divisor of K = " + std::to_string(w.cols));
  if (static_cast<std::int64_t>(w.panels.size()) != w.panel_count() * w.cols * kInt4PanelBytes ||
      static_cast<std::int64_t>(w.scales.size()) != w.panel_count() * w.groups() * kPanelWidth)
    return Support::no("w", "an inconsistent PackedInt4Weight", "the result of pack_weight_int4");
  return Support::yes();
}

template <class T>
std::size_t packed_bytes(const PackedWeight<T>& w) {
  return w.panels.size() * sizeof(T);
}
inline std::size_t packed_bytes(const PackedInt4Weight& w) { return w.panels.size(); }

// The float product of either packed form on float rows (row stride ldx) into y (row stride ldy), epilogue included.
template <class T>
void weight_only_product(const float* x, std::int64_t ldx, std::int64_t m, const PackedWeight<T>& w, float* y,
                         std::int64_t ldy, const Epilogue& e) {
  gemm_panels(x, ldx, m, w, y, ldy, w.scales.empty() ? nullptr : w.scales.data(), bias_data(e), e.activation);
}
inline void weight_only_product(const float* x, std::int64_t ldx, std::int64_t m, const PackedInt4Weight& w, float* y,
                                std::int64_t ldy, const Epilogue& e) {
  gemm_int4_panels(x, ldx, m, w, y, ldy, bias_data(e), e.activation);
}

// Activations (float, half or bfloat16) against a packed weight, the output of the activations' type.
template <class A, class W>
Support check_weight_only(const TensorView<const A>& x, const W& w, const TensorView<A>& out,
                          const Epilogue& epilogue) {
  Support s = check_packed_weight(w);
  if (!s) return s;
  s = check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  return check_no_overlap(out, w.panels.data(), packed_bytes(w), "w");
}

// The checked layer for any activation type: float runs in place; half / bfloat16 through float rows and a float
// result, each output then rounded to nearest even.
template <class A, class W>
void linear_weight_only_any(const TensorView<const A>& x, const W& w, const TensorView<A>& out,
                            const Epilogue& epilogue, const char* fn) {
  require_supported(check_weight_only(x, w, out, epilogue), fn);
  if constexpr (std::is_same<A, float>::value) {
    std::vector<float> storage;
    std::int64_t ldx = 0;
    const float* xs = contiguous_rows(x, storage, ldx);
    weight_only_product(xs, ldx, x.size(0), w, out.data(), out.stride(0), epilogue);
  } else {
    const std::int64_t m_total = x.size(0), k_total = x.size(1), n_total = w.rows;
    std::vector<float> xs(static_cast<std::size_t>(m_total * k_total));
    for (std::int64_t m = 0; m < m_total; ++m)
      for (std::int64_t k = 0; k < k_total; ++k) xs[static_cast<std::size_t>(m * k_total + k)] = static_cast<float>(x(m, k));
    std::vector<float> y(static_cast<std::size_t>(m_total * n_total));
    weight_only_product(xs.data(), k_total, m_total, w, y.data(), n_total, epilogue);
    for (std::int64_t m = 0; m < m_total; ++m)
      for (std::int64_t n = 0; n < n_total; ++n) out(m, n) = A(y[static_cast<std::size_t>(m * n_total + n)]);
  }
}

// Packs an int8 (per tensor or channel) or int4 (per group) symmetric QuantizedTensor and runs the layer.
template <class A>
void linear_weight_only_quantized(const TensorView<const A>& x, const quant::QuantizedTensor& w,
                                  const TensorView<A>& out, const Epilogue& epilogue, const char* fn) {
  if (w.scheme.dtype == quant::QuantDtype::int4)
    linear_weight_only_any(x, pack_weight_int4(w), out, epilogue, fn);
  else if (w.scheme.dtype == quant::QuantDtype::int8)
    linear_weight_only_any(x, pack_weight(w), out, epilogue, fn);
  else
    fail(fn, "w.scheme.dtype", quant::to_string(w.scheme.dtype),
         "int8 (per tensor or channel) or int4 (per group), symmetric");
}

}  // namespace detail

template <class T>
Support can_implement_linear_weight_only(const TensorView<const float>& x, const PackedWeight<T>& w,
                                         const TensorView<float>& out, const Epilogue& epilogue = {}) {
  Support s = detail::check_packed_weight(w);
  if (!s) return s;
  s = detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  return detail::check_no_overlap(out, w.panels.data(), w.panels.size() * sizeof(T), "w");
}

// out = act(X · Wᵀ (· scales) + bias) with a packed float, half, bfloat16 or int8 weight.
template <class T>
void linear_weight_only(TensorView<const float> x, const PackedWeight<T>& w, TensorView<float> out,
                        const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_weight_only(x, w, out, epilogue), "shrink::cpu::linear_weight_only");
  std::vector<float> storage;
  std::int64_t ldx = 0;
  const float* xs = detail::contiguous_rows(x, storage, ldx);
  detail::gemm_panels(xs, ldx, x.size(0), w, out.data(), out.stride(0), w.scales.empty() ? nullptr : w.scales.data(),
                      detail::bias_data(epilogue), epilogue.activation);
}

// A per-group int4 weight (cpu/packed_int4_weight.hpp): out = act(X · (Q · S)ᵀ + bias), dequantized in float.
inline Support can_implement_linear_weight_only(const TensorView<const float>& x, const PackedInt4Weight& w,
                                                const TensorView<float>& out, const Epilogue& epilogue = {}) {
  return detail::check_weight_only(x, w, out, epilogue);
}
inline void linear_weight_only(TensorView<const float> x, const PackedInt4Weight& w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}

// The same, packing a symmetric QuantizedTensor on every call: int8 per tensor or per channel along axis 0
// (pack_weight), or int4 per group along axis 1 (pack_weight_int4).
inline void linear_weight_only(TensorView<const float> x, const quant::QuantizedTensor& w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_weight_only(TensorView<const float> x, const quant::QuantizedTensor& w, const float* bias,
                               TensorView<float> out, Activation activation = Activation::none) {
  Epilogue e;
  if (bias != nullptr && w.shape.rank == 2) e.bias = TensorView<const float>(bias, Shape{w.shape.values[0]});
  e.activation = activation;
  linear_weight_only(x, w, out, e);
}

// Half and bfloat16 weights [N, K] (host views, any strides), packed on every call.
inline void linear_weight_only(TensorView<const float> x, TensorView<const half> w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  linear_weight_only(x, pack_weight(w), out, epilogue);
}
inline void linear_weight_only(TensorView<const float> x, TensorView<const bfloat16> w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  linear_weight_only(x, pack_weight(w), out, epilogue);
}

// ---- Half and bfloat16 activations and outputs (x converted to float exactly; outputs rounded to nearest even) ----

template <class T>
Support can_implement_linear_weight_only(const TensorView<const half>& x, const PackedWeight<T>& w,
                                         const TensorView<half>& out, const Epilogue& epilogue = {}) {
  return detail::check_weight_only(x, w, out, epilogue);
}
template <class T>
Support can_implement_linear_weight_only(const TensorView<const bfloat16>& x, const PackedWeight<T>& w,
                                         const TensorView<bfloat16>& out, const Epilogue& epilogue = {}) {
  return detail::check_weight_only(x, w, out, epilogue);
}
inline Support can_implement_linear_weight_only(const TensorView<const half>& x, const PackedInt4Weight& w,
                                                const TensorView<half>& out, const Epilogue& epilogue = {}) {
  return detail::check_weight_only(x, w, out, epilogue);
}
inline Support can_implement_linear_weight_only(const TensorView<const bfloat16>& x, const PackedInt4Weight& w,
                                                const TensorView<bfloat16>& out, const Epilogue& epilogue = {}) {
  return detail::check_weight_only(x, w, out, epilogue);
}

template <class T>
void linear_weight_only(TensorView<const half> x, const PackedWeight<T>& w, TensorView<half> out,
                        const Epilogue& epilogue = {}) {
  detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
template <class T>
void linear_weight_only(TensorView<const bfloat16> x, const PackedWeight<T>& w, TensorView<bfloat16> out,
                        const Epilogue& epilogue = {}) {
  detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const half> x, const PackedInt4Weight& w, TensorView<half> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const bfloat16> x, const PackedInt4Weight& w, TensorView<bfloat16> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
// An int8 or int4 symmetric QuantizedTensor, packed on every call.
inline void linear_weight_only(TensorView<const half> x, const quant::QuantizedTensor& w, TensorView<half> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const bfloat16> x, const quant::QuantizedTensor& w, TensorView<bfloat16> out,
                               const Epilogue& epilogue = {}) {
  detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}

}  // namespace shrink::cpu
