// Weight-only linear layers on the CPU: Y[M, N] = X[M, K] · W[N, K]ᵀ with the weight stored in fewer bits — int8
// (symmetric, per tensor or per output channel), int4 / uint4 (symmetric or affine: a scale and a zero point per group
// of inputs, per output channel or per tensor), half (FP16) or
// bfloat16 (BF16) — converted to float on the fly inside the product kernel; the arithmetic is float (FMA), only the
// weight's storage shrinks. Activations and outputs are float, or half / bfloat16 (the CPU twin of the GPU's
// W8A16 / W4A16 kernels, shrink/linear/weight_only_cuda.hpp).
//
//   out[m, n] = act(s[n] · Σ_k x[m, k] · q[n, k] + bias[n])          int8: q the stored integers, s the scales
//   out[m, n] = act(Σ_k x[m, k] · ((q[n, k] − zp[n, k / g]) · s[n, k / g]) + bias[n])
//                                                                     4-bit, groups of g inputs: dequantized in float
//                                                                     (zp an integer, or a float: HQQ's fractional one)
//   out[m, n] = act(Σ_k x[m, k] · float(w[n, k]) + bias[n])          half / bfloat16
//
// Half / bfloat16 activations are converted to float (exactly), the product and epilogue run in float, and each
// output is rounded to nearest even (overflow to ±inf, as a cast). Kernels: cpu/gemm_panel.hpp and
// cpu/gemm_int4_panel.hpp. Pack the weight once with pack_weight / pack_weight_int4 (cpu/packed_weight.hpp,
// cpu/packed_int4_weight.hpp); the overloads taking an unpacked weight pack it on every call. NaN and inf in x or W
// propagate as IEEE arithmetic does.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/gemm_int4_panel.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/packed_int4_weight.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cpu {

// Packs an int8 symmetric weight [N, K] (zero points 0), per tensor or per output channel (axis 0), with its scales.
inline PackedWeight<std::int8_t> pack_weight(const quant::QuantizedTensor& w) {
  const char* fn = "shrink::cpu::pack_weight";
  if (w.scheme.dtype != quant::QuantDtype::int8)
    fail(fn, "w.scheme.dtype", quant::to_string(w.scheme.dtype),
         quant::is_packed(w.scheme.dtype) ? "int8 (an int4 or uint4 weight packs with shrink::cpu::pack_weight_int4)"
                                          : "int8 (weight-only int8)");
  if (w.shape.rank != 2) fail(fn, "w.shape", to_string(w.shape), "a 2-D weight [N, K]");
  if (w.shape.product() == 0) fail(fn, "w.shape", to_string(w.shape), "at least one element");
  const bool per_channel = w.scheme.granularity == quant::Granularity::per_channel;
  if (per_channel && w.scheme.axis != 0 && w.scheme.axis != -2)
    fail(fn, "w.scheme.axis", w.scheme.axis, "axis 0 (one scale per output row)");
  if (!per_channel && w.scheme.granularity != quant::Granularity::per_tensor)
    fail(fn, "w.scheme.granularity", to_string(w.scheme.granularity), "per_tensor or per_channel (axis 0)");
  quant::validate_qparams(w.qparams, w.scheme, w.shape, fn);
  if (static_cast<std::int64_t>(w.data.size()) != w.shape.product())
    fail(fn, "w.data.size()", w.data.size(), std::to_string(w.shape.product()) + " bytes, one per element");
  for (std::size_t i = 0; i < w.qparams.zero_point.size(); ++i)
    if (w.qparams.zero_point[i] != 0)
      fail(fn, ("w.qparams.zero_point[" + std::to_string(i) + "]").c_str(), w.qparams.zero_point[i],
           "0: a symmetric int8 weight (zero points are taken for int4 and uint4 weights, by "
           "shrink::cpu::pack_weight_int4)");
  PackedWeight<std::int8_t> p = pack_panels<std::int8_t>(w.int8_view(), [](std::int8_t v) { return v; });
  p.per_channel = per_channel;
  p.scales.assign(static_cast<std::size_t>(p.rows), w.qparams.scale[0]);
  if (per_channel) std::copy(w.qparams.scale.begin(), w.qparams.scale.end(), p.scales.begin());
  return p;
}

// Packs a 4-bit weight [N, K] as quant::quantize writes it (packed nibbles, a scale and a zero point per parameter):
// int4 or uint4, symmetric or affine (zero points, GPTQ / AWQ style), per group along the input axis (per_group,
// axis 1 or -1: parameters [N, K / group_size]), per output channel (per_channel, axis 0 or -2: [N]) or per tensor.
// A channel or the tensor is one group of K inputs. w[n, k] = (q[n, k] − zp[n, g]) · s[n, g], as quant::dequantize;
// with fractional zero points (scheme.float_zero_point, HQQ) w[n, k] = (float(q[n, k]) − z[n, g]) · s[n, g] in float,
// bit for bit quant::dequantize's.
inline PackedInt4Weight pack_weight_int4(const quant::QuantizedTensor& w) {
  const char* fn = "shrink::cpu::pack_weight_int4";
  const quant::QuantScheme& scheme = w.scheme;
  if (scheme.dtype != quant::QuantDtype::int4 && scheme.dtype != quant::QuantDtype::uint4)
    fail(fn, "w.scheme.dtype", quant::to_string(scheme.dtype),
         scheme.dtype == quant::QuantDtype::int8 ? "int4 or uint4 (an int8 weight packs with shrink::cpu::pack_weight)"
                                                 : "int4 or uint4");
  if (w.shape.rank != 2) fail(fn, "w.shape", to_string(w.shape), "a 2-D weight [N, K]");
  if (w.shape.product() == 0) fail(fn, "w.shape", to_string(w.shape), "at least one element");
  const std::int64_t n_total = w.shape.values[0], k_total = w.shape.values[1];
  std::int64_t group = k_total;  // per tensor and per channel: one group of K
  if (scheme.granularity == quant::Granularity::per_group) {
    if (scheme.axis != 1 && scheme.axis != -1)
      fail(fn, "w.scheme.axis", scheme.axis, "axis 1 (groups of consecutive inputs k of a row)");
    group = scheme.group_size;
  } else if (scheme.granularity == quant::Granularity::per_channel && scheme.axis != 0 && scheme.axis != -2) {
    fail(fn, "w.scheme.axis", scheme.axis, "axis 0 (one scale per output row) for a per-channel weight");
  }
  // The group size divides K, the scales are finite and > 0, the zero points inside the dtype's range (or, fractional,
  // finite).
  quant::validate_qparams(w.qparams, scheme, w.shape, fn, quant::FloatZeroPoints::accepted);
  if (static_cast<std::int64_t>(w.data.size()) != n_total * int4_row_bytes(k_total))
    fail(fn, "w.data.size()", w.data.size(),
         std::to_string(n_total * int4_row_bytes(k_total)) + " bytes (rows of ceil(K / 2) packed bytes)");

  PackedInt4Weight p;
  p.rows = n_total;
  p.cols = k_total;
  p.group_size = group;
  // Unsigned values and zero points become their signed equivalents (q − 8, zp − 8): q − zp is unchanged.
  const bool is_signed = quant::is_signed(scheme.dtype);
  const int offset = is_signed ? 0 : 8;
  const bool fractional = w.qparams.fractional();
  const bool affine = std::any_of(w.qparams.zero_point.begin(), w.qparams.zero_point.end(),
                                  [&](std::int32_t zp) { return zp != offset; });
  p.panels.assign(static_cast<std::size_t>(p.panel_count() * k_total * kInt4PanelBytes), std::uint8_t{0});
  p.scales.assign(static_cast<std::size_t>(p.panel_count() * p.groups() * kPanelWidth), 0.0f);
  if (affine) p.zero_points.assign(p.scales.size(), std::int8_t{0});
  if (fractional) {  // kept as given; the offset goes back on q (cpu/packed_int4_weight.hpp)
    p.float_zero_points.assign(p.scales.size(), 0.0f);
    p.value_offset = offset;
  }
  const std::int64_t row_bytes = int4_row_bytes(k_total);
  const std::int64_t row_params = static_cast<std::int64_t>(w.qparams.scale.size()) / n_total;  // 0 per tensor
  for (std::int64_t n = 0; n < n_total; ++n) {
    const std::int64_t panel = n / kPanelWidth, lane = n % kPanelWidth;
    const std::uint8_t* row = w.data.data() + n * row_bytes;
    std::uint8_t* dst = p.panels.data() + panel * k_total * kInt4PanelBytes + lane / 2;
    const int shift = lane % 2 == 0 ? 0 : 4;
    for (std::int64_t k = 0; k < k_total; ++k)
      dst[k * kInt4PanelBytes] |= static_cast<std::uint8_t>(((load_int4(row, k, is_signed) - offset) & 0xF) << shift);
    for (std::int64_t g = 0; g < p.groups(); ++g) {
      const std::size_t from = static_cast<std::size_t>(n * row_params + g);  // row_params is G, 1 or 0
      const std::size_t to = static_cast<std::size_t>((panel * p.groups() + g) * kPanelWidth + lane);
      p.scales[to] = w.qparams.scale[from];
      if (affine) p.zero_points[to] = static_cast<std::int8_t>(w.qparams.zero_point[from] - offset);
      if (fractional) p.float_zero_points[to] = w.qparams.float_zero_point[from];
    }
  }
  return p;
}

}  // namespace shrink::cpu

namespace shrink::linear::detail {

using cpu::kInt4PanelBytes;
using cpu::kPanelWidth;
using cpu::pack_weight;
using cpu::pack_weight_int4;
using cpu::PackedInt4Weight;
using cpu::PackedWeight;

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
      static_cast<std::int64_t>(w.scales.size()) != w.panel_count() * w.groups() * kPanelWidth ||
      (w.affine() && w.zero_points.size() != w.scales.size()) ||
      (w.fractional() &&
       (w.affine() || w.float_zero_points.size() != w.scales.size() || (w.value_offset != 0 && w.value_offset != 8))))
    return Support::no("w", "an inconsistent PackedInt4Weight", "the result of pack_weight_int4");
  return Support::yes();
}

template <class T>
std::size_t packed_bytes(const PackedWeight<T>& w) {
  return w.panels.size() * sizeof(T);
}
inline std::size_t packed_bytes(const PackedInt4Weight& w) { return w.panels.size(); }

// The epilogue operation of a checked epilogue with a packed weight: the int8 weight's scales per output channel
// (those of half, bfloat16, float and int4 weights are inside the product).
template <class T>
EpilogueOp weight_only_op(const Epilogue& e, std::int64_t m, const PackedWeight<T>& w) {
  const EpilogueOp op = make_epilogue_op(e, m, w.rows);
  return w.scales.empty() ? op : op.with_scales(nullptr, 0, w.scales.data(), 1);
}
inline EpilogueOp weight_only_op(const Epilogue& e, std::int64_t m, const PackedInt4Weight& w) {
  return make_epilogue_op(e, m, w.rows);
}

// The float product of either packed form on float rows (row stride ldx) into y (row stride ldy), epilogue included.
template <class T>
void weight_only_product(const float* x, std::int64_t ldx, std::int64_t m, const PackedWeight<T>& w, float* y,
                         std::int64_t ldy, const EpilogueOp& op) {
  gemm_panels(x, ldx, m, w, y, ldy, op);
}
inline void weight_only_product(const float* x, std::int64_t ldx, std::int64_t m, const PackedInt4Weight& w, float* y,
                                std::int64_t ldy, const EpilogueOp& op) {
  gemm_int4_panels(x, ldx, m, w, y, ldy, op);
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

// The layer for any activation type once checked: float runs in place; half / bfloat16 through float rows and a float
// result, each output then rounded to nearest even.
template <class A, class W>
void weight_only_checked(const TensorView<const A>& x, const W& w, const TensorView<A>& out, const Epilogue& epilogue) {
  const EpilogueOp op = weight_only_op(epilogue, x.size(0), w);
  if constexpr (std::is_same<A, float>::value) {
    std::vector<float> storage;
    std::int64_t ldx = 0;
    const float* xs = contiguous_rows(x, storage, ldx);
    RowOutput<float> staged(out);
    weight_only_product(xs, ldx, x.size(0), w, staged.rows().data(), staged.rows().stride(0), op);
    staged.finish();
  } else {
    const std::int64_t m_total = x.size(0), k_total = x.size(1), n_total = w.rows;
    std::vector<float> xs(static_cast<std::size_t>(m_total * k_total));
    for (std::int64_t m = 0; m < m_total; ++m)
      for (std::int64_t k = 0; k < k_total; ++k)
        xs[static_cast<std::size_t>(m * k_total + k)] = static_cast<float>(x(m, k));
    std::vector<float> y(static_cast<std::size_t>(m_total * n_total));
    weight_only_product(xs.data(), k_total, m_total, w, y.data(), n_total, op);
    cpu::convert_rows(op, y.data(), n_total, out);
  }
}

template <class A, class W>
void linear_weight_only_any(const TensorView<const A>& x, const W& w, const TensorView<A>& out,
                            const Epilogue& epilogue, const char* fn) {
  require_supported(check_weight_only(x, w, out, epilogue), fn);
  weight_only_checked(x, w, out, epilogue);
}

// What a planned call checks: x and out against the planned weight, apart from it, the bias and each other (O(1)).
template <class A, class W>
Support check_planned_call(const TensorView<const A>& x, const W& w, const TensorView<A>& out,
                           const Epilogue& epilogue) {
  Support s = check_activations(x, w.cols);
  if (!s) return s;
  s = check_output(out, x.size(0), w.rows);
  if (!s) return s;
  if (views_overlap(x, out)) return Support::no("out", "memory overlapping x", "a separate output");
  s = check_no_overlap(out, w.panels.data(), packed_bytes(w), "w");
  if (!s) return s;
  return check_epilogue_apart(epilogue, byte_span(out));
}

// Packs an int8 (symmetric, per tensor or channel) or 4-bit (int4 / uint4, symmetric or affine, per tensor, channel
// or group) QuantizedTensor and runs the layer.
template <class A>
void linear_weight_only_quantized(const TensorView<const A>& x, const quant::QuantizedTensor& w,
                                  const TensorView<A>& out, const Epilogue& epilogue, const char* fn) {
  if (quant::is_packed(w.scheme.dtype))
    linear_weight_only_any(x, pack_weight_int4(w), out, epilogue, fn);
  else if (w.scheme.dtype == quant::QuantDtype::int8)
    linear_weight_only_any(x, pack_weight(w), out, epilogue, fn);
  else
    fail(fn, "w.scheme.dtype", quant::to_string(w.scheme.dtype),
         "int8 (symmetric, per tensor or channel) or int4 / uint4 (symmetric or affine, per tensor, channel or group)");
}

}  // namespace shrink::linear::detail

namespace shrink::cpu {

template <class T>
Support can_implement_linear_weight_only(const TensorView<const float>& x, const PackedWeight<T>& w,
                                         const TensorView<float>& out, const Epilogue& epilogue = {}) {
  Support s = linear::detail::check_packed_weight(w);
  if (!s) return s;
  s = linear::detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  return linear::detail::check_no_overlap(out, w.panels.data(), w.panels.size() * sizeof(T), "w");
}

// out = act(X · Wᵀ (· scales) + bias) with a packed float, half, bfloat16 or int8 weight.
template <class T>
void linear_weight_only(TensorView<const float> x, const PackedWeight<T>& w, TensorView<float> out,
                        const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_weight_only(x, w, out, epilogue), "shrink::cpu::linear_weight_only");
  std::vector<float> storage;
  std::int64_t ldx = 0;
  const float* xs = linear::detail::contiguous_rows(x, storage, ldx);
  linear::detail::RowOutput<float> staged(out);
  cpu::gemm_panels(xs, ldx, x.size(0), w, staged.rows().data(), staged.rows().stride(0),
                   linear::detail::weight_only_op(epilogue, x.size(0), w));
  staged.finish();
}

// A 4-bit weight (cpu/packed_int4_weight.hpp): out = act(X · ((Q − Z) · S)ᵀ + bias), dequantized in float.
inline Support can_implement_linear_weight_only(const TensorView<const float>& x, const PackedInt4Weight& w,
                                                const TensorView<float>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_weight_only(x, w, out, epilogue);
}
inline void linear_weight_only(TensorView<const float> x, const PackedInt4Weight& w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}

// The same, packing a QuantizedTensor on every call: int8 symmetric per tensor or per channel along axis 0
// (pack_weight), or int4 / uint4, symmetric or affine, per tensor, channel or group along axis 1 (pack_weight_int4).
inline void linear_weight_only(TensorView<const float> x, const quant::QuantizedTensor& w, TensorView<float> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
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
  return linear::detail::check_weight_only(x, w, out, epilogue);
}
template <class T>
Support can_implement_linear_weight_only(const TensorView<const bfloat16>& x, const PackedWeight<T>& w,
                                         const TensorView<bfloat16>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_weight_only(x, w, out, epilogue);
}
inline Support can_implement_linear_weight_only(const TensorView<const half>& x, const PackedInt4Weight& w,
                                                const TensorView<half>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_weight_only(x, w, out, epilogue);
}
inline Support can_implement_linear_weight_only(const TensorView<const bfloat16>& x, const PackedInt4Weight& w,
                                                const TensorView<bfloat16>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_weight_only(x, w, out, epilogue);
}

template <class T>
void linear_weight_only(TensorView<const half> x, const PackedWeight<T>& w, TensorView<half> out,
                        const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
template <class T>
void linear_weight_only(TensorView<const bfloat16> x, const PackedWeight<T>& w, TensorView<bfloat16> out,
                        const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const half> x, const PackedInt4Weight& w, TensorView<half> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const bfloat16> x, const PackedInt4Weight& w, TensorView<bfloat16> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_any(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
// An int8 or 4-bit QuantizedTensor, packed on every call.
inline void linear_weight_only(TensorView<const half> x, const quant::QuantizedTensor& w, TensorView<half> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}
inline void linear_weight_only(TensorView<const bfloat16> x, const quant::QuantizedTensor& w, TensorView<bfloat16> out,
                               const Epilogue& epilogue = {}) {
  linear::detail::linear_weight_only_quantized(x, w, out, epilogue, "shrink::cpu::linear_weight_only");
}

// ---- plans for repeated calls -----------------------------------------------------------------------------------

// linear_weight_only prepared for repeated calls: a packed weight W (PackedWeight<T> or PackedInt4Weight) and the
// epilogue, checked once when the plan is made (the weight's layout, the bias read for NaN and inf); run(plan, x, out)
// then checks only x and out, in O(1), and computes the bits the one-call form gives. The plan holds W by pointer and
// the bias by view: both must outlive it, unchanged.
template <class W>
class LinearWeightOnlyPlan {
 public:
  LinearWeightOnlyPlan() = default;  // empty: run refuses it
  LinearWeightOnlyPlan(const W& w, const Epilogue& epilogue) : w_(&w), epilogue_(epilogue) {
    const char* fn = "shrink::cpu::make_plan(weight-only)";
    require_supported(linear::detail::check_packed_weight(w), fn);
    require_supported(check_epilogue(epilogue, epilogue_rules<float>(1, w.rows, Device::host())), fn);
  }
  LinearWeightOnlyPlan(W&&, const Epilogue&) = delete;  // a temporary weight would not outlive the plan

  const W& weight() const { return *w_; }
  const Epilogue& epilogue() const { return epilogue_; }
  bool empty() const { return w_ == nullptr; }

 private:
  const W* w_ = nullptr;
  Epilogue epilogue_;
};

template <class T>
LinearWeightOnlyPlan<PackedWeight<T>> make_plan(const PackedWeight<T>& w, const Epilogue& epilogue = {}) {
  return LinearWeightOnlyPlan<PackedWeight<T>>(w, epilogue);
}
inline LinearWeightOnlyPlan<PackedInt4Weight> make_plan(const PackedInt4Weight& w, const Epilogue& epilogue = {}) {
  return LinearWeightOnlyPlan<PackedInt4Weight>(w, epilogue);
}
template <class T>
void make_plan(PackedWeight<T>&&, const Epilogue& = {}) = delete;
void make_plan(PackedInt4Weight&&, const Epilogue& = {}) = delete;

// The planned layer on activations x [M, K] (float, half or bfloat16, any strides) into out [M, N] of x's type.
template <class W, class A>
void run(const LinearWeightOnlyPlan<W>& plan, TensorView<const A> x, TensorView<A> out) {
  static_assert(std::is_same<A, float>::value || std::is_same<A, half>::value || std::is_same<A, bfloat16>::value,
                "weight-only activations are float, half or bfloat16");
  const char* fn = "shrink::cpu::run(LinearWeightOnlyPlan)";
  if (plan.empty()) fail(fn, "plan", "an empty plan", "a plan made by make_plan(w, epilogue)");
  require_supported(linear::detail::check_planned_call(x, plan.weight(), out, plan.epilogue()), fn);
  linear::detail::weight_only_checked(x, plan.weight(), out, plan.epilogue());
}
}  // namespace shrink::cpu
