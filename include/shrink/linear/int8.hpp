// INT8 linear layers on the CPU: Y[M, N] = X[M, K] · W[N, K]ᵀ with int8/uint8 activations, int8 weights, exact int32
// accumulation and a dequantizing epilogue (core/epilogue.hpp):
//
//   out[m, n] = act(sx[m] · sw[n] · Σ_k (x[m, k] − zx[m]) · w[n, k] + bias[n])
//
// x: int8 or uint8, per tensor (symmetric or affine) or per token (per channel along axis 0: one scale and zero
//    point per row); the dynamic per-token quantizer quantize_rows_absmax makes it from float activations.
// w: int8, symmetric (every zero point 0), per tensor or per output channel (axis 0), packed once by
//    pack_int8_weight (cpu/packed_int8_weight.hpp: rows padded, Σ_k w[n, k] precomputed) so inference pays the
//    packing once.
// out: float, or half / bfloat16 / requantized int8 (cpu/epilogue_rows.hpp), the CPU twins of every output of the
//    CUDA W8A8 GEMM (linear/int8_cuda.hpp).
// Kernels (cpu/gemm_int8.hpp): AVX-512 VNNI vpdpbusd, AVX2 vpmaddwd, scalar; chosen at run time.
//
// Exactness: |x − zx| ≤ 128 for symmetric int8 activations (255 otherwise) and |w| ≤ 128, so the int32 sum
// cannot overflow while K · 128 · 128 ≤ 2^31 − 1, i.e. K ≤ 131071 (K ≤ 65793 for uint8 or affine activations,
// 255 · 128 per product). can_implement_* refuses larger K.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/gemm_int8.hpp"
#include "shrink/cpu/packed_int8_weight.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::linear::detail {

using cpu::int8_max_k;
using cpu::Int8ActivationRows;
using cpu::PackedInt8Weight;

inline Support check_int8_scales(const quant::QuantizedTensor& t, const char* name, std::int64_t expected_count) {
  const std::string n(name);
  if (t.scheme.float_zero_point || t.qparams.fractional())
    return Support::no(
        n + (t.scheme.float_zero_point ? ".scheme.float_zero_point" : ".qparams.float_zero_point.size()"),
        t.scheme.float_zero_point ? "true" : std::to_string(t.qparams.float_zero_point.size()),
        "integer zero points: fractional zero points (HQQ) are not supported by the int8 linear layers");
  if (static_cast<std::int64_t>(t.qparams.scale.size()) != expected_count)
    return Support::no(
        n + ".qparams.scale.size()", std::to_string(t.qparams.scale.size()),
        std::to_string(expected_count) + " scales for its " + to_string(t.scheme.granularity) + " scheme");
  if (t.qparams.zero_point.size() != t.qparams.scale.size())
    return Support::no(n + ".qparams.zero_point.size()", std::to_string(t.qparams.zero_point.size()),
                       "one zero point per scale (" + std::to_string(t.qparams.scale.size()) + ")");
  const quant::QuantRange r = quant::quant_range(t.scheme);
  for (std::size_t i = 0; i < t.qparams.scale.size(); ++i) {
    const float s = t.qparams.scale[i];
    if (!(s > 0.0f) || !std::isfinite(s))
      return Support::no(n + ".qparams.scale[" + std::to_string(i) + "]", shrink::to_text(s), "a finite scale > 0");
    const std::int32_t zp = t.qparams.zero_point[i];
    if (zp < r.qmin || zp > r.qmax)
      return Support::no(n + ".qparams.zero_point[" + std::to_string(i) + "]", std::to_string(zp),
                         "a zero point in [" + std::to_string(r.qmin) + ", " + std::to_string(r.qmax) + "]");
  }
  return Support::yes();
}

// A 2-D 8-bit QuantizedTensor per tensor or per channel along axis 0, with consistent data and parameters.
inline Support check_int8_operand(const quant::QuantizedTensor& t, const char* name, bool allow_uint8) {
  const std::string n(name);
  const quant::QuantDtype d = t.scheme.dtype;
  if (d != quant::QuantDtype::int8 && !(allow_uint8 && d == quant::QuantDtype::uint8))
    return Support::no(n + ".scheme.dtype", quant::to_string(d), allow_uint8 ? "int8 or uint8" : "int8");
  if (t.shape.rank != 2) return Support::no(n + ".shape", to_string(t.shape), "a 2-D tensor");
  if (t.shape.product() == 0) return Support::no(n + ".shape", to_string(t.shape), "at least one element");
  if (static_cast<std::int64_t>(t.data.size()) != t.shape.product())
    return Support::no(n + ".data.size()", std::to_string(t.data.size()),
                       std::to_string(t.shape.product()) + " bytes, one per element of " + to_string(t.shape));
  std::int64_t count = 1;
  if (t.scheme.granularity == quant::Granularity::per_channel) {
    if (t.scheme.axis != 0 && t.scheme.axis != -2)
      return Support::no(n + ".scheme.axis", std::to_string(t.scheme.axis),
                         "axis 0 (one scale per row) for a per-channel scheme");
    count = t.shape.values[0];
  } else if (t.scheme.granularity != quant::Granularity::per_tensor) {
    return Support::no(n + ".scheme.granularity", to_string(t.scheme.granularity),
                       "per_tensor or per_channel (axis 0)");
  }
  return check_int8_scales(t, name, count);
}

inline Support check_int8_weight(const quant::QuantizedTensor& w) {
  if (quant::is_packed(w.scheme.dtype))
    return Support::no("w.scheme.dtype", quant::to_string(w.scheme.dtype),
                       "int8 (an int4 or uint4 weight runs weight-only: shrink::cpu::pack_weight_int4 and "
                       "linear_weight_only)");
  Support s = check_int8_operand(w, "w", false);
  if (!s) return s;
  for (std::size_t i = 0; i < w.qparams.zero_point.size(); ++i)
    if (w.qparams.zero_point[i] != 0)
      return Support::no("w.qparams.zero_point[" + std::to_string(i) + "]", std::to_string(w.qparams.zero_point[i]),
                         "0: a symmetric int8 weight");
  return s;
}

inline Support check_packed_int8_weight(const PackedInt8Weight& w) {
  if (w.rows <= 0 || w.cols <= 0)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}), "a packed weight with at least one element");
  if (!w.consistent()) return Support::no("w", "an inconsistent PackedInt8Weight", "the result of pack_int8_weight");
  return Support::yes();
}

// Largest |x − zx| of an activation tensor's scheme: 128 for symmetric int8 (zero points 0), else 255.
inline std::int32_t largest_centred(const quant::QuantizedTensor& x) {
  if (x.scheme.dtype != quant::QuantDtype::int8) return 255;
  for (std::int32_t zp : x.qparams.zero_point)
    if (zp != 0) return 255;
  return 128;
}

inline Int8ActivationRows activation_rows(const quant::QuantizedTensor& x) {
  Int8ActivationRows a;
  a.data = x.data.data();
  a.rows = x.shape.values[0];
  a.cols = x.shape.values[1];
  a.row_stride = a.cols;
  a.is_signed = x.scheme.dtype == quant::QuantDtype::int8;
  a.zero_points = x.qparams.zero_point.data();
  a.zero_point_per_row = x.scheme.granularity == quant::Granularity::per_channel;
  return a;
}

// What both linear_int8 overloads check once x and a weight [N, K] of `w_bytes` int8 bytes at `w_data` are valid:
// K, its int32 bound, out, the epilogue, and out apart from x and the weight.
// A planned call (read_epilogue false) keeps the epilogue's values as make_plan read them and checks out apart only.
template <class Out>
Support check_int8_linear_operands(const quant::QuantizedTensor& x, std::int64_t n, std::int64_t k, const void* w_data,
                                   std::size_t w_bytes, const TensorView<Out>& out, const Epilogue& epilogue,
                                   bool read_epilogue = true) {
  if (x.shape.values[1] != k)
    return Support::no("x.shape", to_string(x.shape), "[M, " + std::to_string(k) + "]: K equal to the weight's");
  const std::int64_t max_k = int8_max_k(largest_centred(x));
  if (k > max_k)
    return Support::no("x.shape", to_string(x.shape),
                       "K ≤ " + std::to_string(max_k) + " for " + quant::to_string(x.scheme.dtype) + " " +
                           quant::to_string(x.scheme.symmetry) + " activations (int32 accumulation)");
  Support s = check_output(out, x.shape.values[0], n);
  if (!s) return s;
  s = read_epilogue ? check_epilogue(epilogue, epilogue_rules<Out>(x.shape.values[0], n, Device::host()), out)
                    : check_epilogue_apart(epilogue, byte_span(out));
  if (!s) return s;
  s = check_no_overlap(out, x.data.data(), x.data.size(), "x");
  if (!s) return s;
  return check_no_overlap(out, w_data, w_bytes, "w");
}

// linear_int8 once checked.
template <class Out>
void linear_int8_checked(const quant::QuantizedTensor& x, const PackedInt8Weight& w, const TensorView<Out>& out,
                         const Epilogue& epilogue) {
  // The scales the operands carry: x's per token (or per tensor), w's per output channel (a per-tensor one repeated).
  const bool per_token = x.scheme.granularity == quant::Granularity::per_channel;
  const EpilogueOp op = make_epilogue_op(epilogue, x.shape.values[0], w.rows)
                            .with_scales(x.qparams.scale.data(), per_token ? 1 : 0, w.scales.data(), 1);
  RowOutput<Out> staged(out);
  TensorView<Out>& rows = staged.rows();
  cpu::gemm_int8(activation_rows(x), w.kernel_rows(),
                 [&](std::int64_t m, std::int64_t n0, std::int64_t count, const std::int32_t* acc) {
                   cpu::finish_run(op, acc, op.x_scale(m), n0, count, &rows(m, n0));
                 });
  staged.finish();
}

}  // namespace shrink::linear::detail

namespace shrink::cpu {

// ---- weights --------------------------------------------------------------------------------------------------

// Whether a QuantizedTensor can be packed as a linear_int8 weight: int8, 2-D [N, K], symmetric (zero points 0),
// per tensor or per channel along axis 0, K ≤ 131071.
inline Support can_implement_pack_int8_weight(const quant::QuantizedTensor& w) {
  Support s = linear::detail::check_int8_weight(w);
  if (!s) return s;
  if (w.shape.values[1] > int8_max_k(128))
    return Support::no("w.shape", to_string(w.shape),
                       "K ≤ " + std::to_string(int8_max_k(128)) + " (int32 accumulation cannot overflow)");
  return s;
}

inline PackedInt8Weight pack_int8_weight(const quant::QuantizedTensor& w) {
  require_supported(can_implement_pack_int8_weight(w), "shrink::cpu::pack_int8_weight");
  return pack_int8_rows(reinterpret_cast<const std::int8_t*>(w.data.data()), w.shape.values[0], w.shape.values[1],
                        w.shape.values[1], 1, w.qparams.scale);
}

// ---- activations ----------------------------------------------------------------------------------------------

// Dynamic per-token quantization of float activations [M, K] (any strides): int8, symmetric, one scale per row,
// s[m] = max_k |x[m, k]| / 127.5 (PyTorch's symmetric formula, at least FLT_EPSILON), q = clamp(round(x / s)).
// NaN or ±inf in x is an error naming the first one.
inline quant::QuantizedTensor quantize_rows_absmax(TensorView<const float> x) {
  const char* fn = "shrink::cpu::quantize_rows_absmax";
  require_host_view(x, fn, "x");
  if (x.rank() != 2) fail(fn, "x.shape", to_string(x.shape()), "a 2-D tensor [M, K]");
  require_nonempty(x, fn, "x");
  return quant::quantize(x, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
}

// ---- linear ---------------------------------------------------------------------------------------------------

// Out: float, or half, bfloat16 and int8 (cpu/epilogue_rows.hpp; int8 needs epilogue.out_scale).
template <class Out>
Support can_implement_linear_int8(const quant::QuantizedTensor& x, const PackedInt8Weight& w,
                                  const TensorView<Out>& out, const Epilogue& epilogue = {}) {
  Support s = linear::detail::check_int8_operand(x, "x", true);
  if (!s) return s;
  s = linear::detail::check_packed_int8_weight(w);
  if (!s) return s;
  return linear::detail::check_int8_linear_operands(x, w.rows, w.cols, w.data.data(), w.data.size(), out, epilogue);
}

// The packed weight's checks without packing it.
template <class Out>
Support can_implement_linear_int8(const quant::QuantizedTensor& x, const quant::QuantizedTensor& w,
                                  const TensorView<Out>& out, const Epilogue& epilogue = {}) {
  Support s = can_implement_pack_int8_weight(w);
  if (!s) return s;
  s = linear::detail::check_int8_operand(x, "x", true);
  if (!s) return s;
  return linear::detail::check_int8_linear_operands(x, w.shape.values[0], w.shape.values[1], w.data.data(),
                                                    w.data.size(), out, epilogue);
}

// out[m, n] = act(sx[m] · sw[n] · Σ_k (x[m, k] − zx[m]) · w[n, k] + bias[n]); out is written only after every check.
// Out: float, or the twins of the CUDA outputs (cpu/epilogue_rows.hpp): half and bfloat16 (the float value rounded to
// nearest even) and int8 (requantized with epilogue.out_scale).
template <class Out>
void linear_int8(const quant::QuantizedTensor& x, const PackedInt8Weight& w, TensorView<Out> out,
                 const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_int8(x, w, out, epilogue), "shrink::cpu::linear_int8");
  linear::detail::linear_int8_checked(x, w, out, epilogue);
}

// The same with an unpacked weight (packed on every call: pack once with pack_int8_weight for repeated use).
template <class Out>
void linear_int8(const quant::QuantizedTensor& x, const quant::QuantizedTensor& w, TensorView<Out> out,
                 const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_int8(x, w, out, epilogue), "shrink::cpu::linear_int8");
  linear_int8(x, pack_int8_weight(w), out, epilogue);
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_int8(const quant::QuantizedTensor& x, const quant::QuantizedTensor& w, const float* bias,
                        TensorView<float> out, Activation activation = Activation::none) {
  Epilogue e;
  if (bias != nullptr && w.shape.rank == 2) e.bias = TensorView<const float>(bias, Shape{w.shape.values[0]});
  e.activation = activation;
  linear_int8(x, w, out, e);
}

inline void linear_int8(const quant::QuantizedTensor& x, const PackedInt8Weight& w, const float* bias,
                        TensorView<float> out, Activation activation = Activation::none) {
  Epilogue e;
  if (bias != nullptr) e.bias = TensorView<const float>(bias, Shape{w.rows});
  e.activation = activation;
  linear_int8(x, w, out, e);
}

// Float activations quantized per token on the fly (quantize_rows_absmax), then linear_int8: the W8A8 layer.
template <class Out>
void linear_int8_dynamic(TensorView<const float> x, const PackedInt8Weight& w, TensorView<Out> out,
                         const Epilogue& epilogue = {}) {
  const char* fn = "shrink::cpu::linear_int8_dynamic";
  Support s = linear::detail::check_activations(x, w.cols);
  if (!s) require_supported(s, fn);
  require_supported(linear::detail::check_packed_int8_weight(w), fn);
  require_supported(linear::detail::check_output(out, x.size(0), w.rows), fn);
  if (views_overlap(x, out)) fail(fn, "out", "memory overlapping x", "a separate output");
  linear_int8(quantize_rows_absmax(x), w, out, epilogue);
}

// ---- plans for repeated calls -----------------------------------------------------------------------------------

// linear_int8 prepared for repeated calls with outputs of type Out: the packed weight and the epilogue checked once
// when the plan is made (the weight's layout; the bias read for NaN and inf; out_scale for an int8 output);
// run(plan, x, out) then checks x (its scales, which come with every call) and out, and gives the one-call form's
// bytes. The plan holds the weight by pointer and the bias by view: both must outlive it, unchanged.
template <class Out>
class LinearInt8Plan {
 public:
  LinearInt8Plan() = default;  // empty: run refuses it
  LinearInt8Plan(const PackedInt8Weight& w, const Epilogue& epilogue) : w_(&w), epilogue_(epilogue) {
    const char* fn = "shrink::cpu::make_plan(PackedInt8Weight)";
    require_supported(linear::detail::check_packed_int8_weight(w), fn);
    require_supported(check_epilogue(epilogue, epilogue_rules<Out>(1, w.rows, Device::host())), fn);
  }
  LinearInt8Plan(PackedInt8Weight&&, const Epilogue&) = delete;  // a temporary weight would not outlive the plan

  const PackedInt8Weight& weight() const { return *w_; }
  const Epilogue& epilogue() const { return epilogue_; }
  bool empty() const { return w_ == nullptr; }

 private:
  const PackedInt8Weight* w_ = nullptr;
  Epilogue epilogue_;
};

// Out: float (the default), half, bfloat16 or int8, as linear_int8 writes them.
template <class Out = float>
LinearInt8Plan<Out> make_plan(const PackedInt8Weight& w, const Epilogue& epilogue = {}) {
  return LinearInt8Plan<Out>(w, epilogue);
}
template <class Out = float>
void make_plan(PackedInt8Weight&&, const Epilogue& = {}) = delete;

template <class Out>
void run(const LinearInt8Plan<Out>& plan, const quant::QuantizedTensor& x, TensorView<Out> out) {
  const char* fn = "shrink::cpu::run(LinearInt8Plan)";
  if (plan.empty()) fail(fn, "plan", "an empty plan", "a plan made by make_plan(w, epilogue)");
  const PackedInt8Weight& w = plan.weight();
  require_supported(linear::detail::check_int8_operand(x, "x", true), fn);
  require_supported(linear::detail::check_int8_linear_operands(x, w.rows, w.cols, w.data.data(), w.data.size(), out,
                                                               plan.epilogue(), false),
                    fn);
  linear::detail::linear_int8_checked(x, w, out, plan.epilogue());
}

// ---- raw int32 product ----------------------------------------------------------------------------------------

inline Support can_implement_gemm_s8s8s32(const TensorView<const std::int8_t>& x,
                                          const TensorView<const std::int8_t>& w, const TensorView<std::int32_t>& acc) {
  Support s = linear::detail::check_matrix(x, "x");
  if (!s) return s;
  s = linear::detail::check_matrix(w, "w");
  if (!s) return s;
  s = linear::detail::check_matrix(acc, "acc");
  if (!s) return s;
  const std::int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  if (w.size(1) != k)
    return Support::no("w.shape", to_string(w.shape()), "[N, " + std::to_string(k) + "]: K equal to x's");
  if (k > int8_max_k(128))
    return Support::no("x.shape", to_string(x.shape()),
                       "K ≤ " + std::to_string(int8_max_k(128)) + " (int32 accumulation cannot overflow)");
  if (acc.size(0) != m || acc.size(1) != n)
    return Support::no("acc.shape", to_string(acc.shape()), to_string(Shape{m, n}) + " ([M, N])");
  if (!linear::detail::elements_distinct(acc))
    return Support::no("acc.strides", to_string(acc.strides()), "strides that give every element its own address");
  if (views_overlap(acc, x)) return Support::no("acc", "memory overlapping x", "a separate output");
  if (views_overlap(acc, w)) return Support::no("acc", "memory overlapping w", "a separate output");
  return s;
}

// acc[m, n] = Σ_k x[m, k] · w[n, k], exact (x [M, K], w [N, K], acc [M, N]: any strides).
inline void gemm_s8s8s32(TensorView<const std::int8_t> x, TensorView<const std::int8_t> w,
                         TensorView<std::int32_t> acc) {
  require_supported(can_implement_gemm_s8s8s32(x, w, acc), "shrink::cpu::gemm_s8s8s32");
  const PackedInt8Weight packed =
      pack_int8_rows(w.data(), w.size(0), w.size(1), w.stride(0), w.stride(1), std::vector<float>{1.0f});
  cpu::Int8ActivationRows rows;
  rows.data = reinterpret_cast<const std::uint8_t*>(x.data());
  rows.rows = x.size(0);
  rows.cols = x.size(1);
  rows.row_stride = x.stride(0);
  rows.col_stride = x.stride(1);
  linear::detail::RowOutput<std::int32_t> staged(acc);
  TensorView<std::int32_t>& acc_rows = staged.rows();
  cpu::gemm_int8(rows, packed.kernel_rows(),
                 [&](std::int64_t m, std::int64_t n0, std::int64_t count, const std::int32_t* run) {
                   std::copy(run, run + count, &acc_rows(m, n0));
                 });
  staged.finish();
}

}  // namespace shrink::cpu
