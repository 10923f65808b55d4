// quantize / dequantize: float tensors to int8, uint8, int4, uint4 and back, per tensor, channel or group.
//
// Formulas (PyTorch's quantize_per_tensor / quantize_per_channel / dequantize, in float32):
//   q  = clamp(nearbyint(x * (1.0f / scale)) + zero_point, qmin, qmax)   (round half to even)
//   x' = (q - zero_point) * scale
// with [qmin, qmax] = quant_range(scheme). Parameters are indexed as described in qparams_shape.
// Fractional zero points (scheme.float_zero_point, HQQ's), core/affine.hpp's FractionalAffineParams in float32:
//   q  = clamp(nearbyint(float(x * (1.0f / scale)) + z), qmin, qmax)
//   x' = (float(q) - z) * scale
// are read by quantize, quantize_into and dequantize / dequantize_into (a scalar loop per run); fake_quantize refuses
// them (validate_qparams).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/cpu/param_runs.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {
namespace detail {

inline cpu::ParamLayout param_layout(const QuantScheme& scheme, const Shape& shape, const char* function) {
  cpu::ParamLayout layout;
  layout.split = scheme_split(scheme, shape, function);
  switch (scheme.granularity) {
    case Granularity::per_tensor: layout.group = layout.split.channels; break;
    case Granularity::per_channel: layout.group = 1; break;
    case Granularity::per_group:
      layout.group = scheme.group_size;
      layout.per_outer_inner = true;
      break;
  }
  return layout;
}

inline std::vector<AffineParams> affine_params(const QParams& q, const QuantScheme& scheme) {
  const QuantRange r = quant_range(scheme);
  std::vector<AffineParams> params;
  params.reserve(q.scale.size());
  for (std::size_t i = 0; i < q.scale.size(); ++i) params.emplace_back(q.scale[i], q.zero_point[i], r.qmin, r.qmax);
  return params;
}

// Fractional zero points (validated parameters with q.fractional()).
inline std::vector<FractionalAffineParams> fractional_params(const QParams& q, const QuantScheme& scheme) {
  const QuantRange r = quant_range(scheme);
  std::vector<FractionalAffineParams> params;
  params.reserve(q.scale.size());
  for (std::size_t i = 0; i < q.scale.size(); ++i)
    params.emplace_back(q.scale[i], q.float_zero_point[i], r.qmin, r.qmax);
  return params;
}

// Contiguous input: the view's own memory, or a row-major copy kept alive in `storage`.
inline const float* contiguous_input(const TensorView<const float>& x, std::vector<float>& storage) {
  if (x.is_contiguous()) return x.data();
  storage = contiguous_copy(x);
  return storage.data();
}

// Checks every argument of a quantization of x; returns the parameter layout.
inline cpu::ParamLayout check_quantize_args(const TensorView<const float>& x, const QuantScheme& scheme,
                                            const QParams& qparams, const char* function,
                                            FloatZeroPoints float_zero_points = FloatZeroPoints::refused) {
  require_host_view(x, function, "x");
  require_nonempty(x, function, "x");
  validate_qparams(qparams, scheme, x.shape(), function, float_zero_points);
  return param_layout(scheme, x.shape(), function);
}

// 8-bit quantization of contiguous input with checked parameters; false when x held NaN or +-inf.
// The runs go to the executor (cpu/param_runs.hpp), each element written once: the same bytes on any executor.
template <class Q>
bool quantize_bytes(const float* x, Q* out, const cpu::ParamLayout& layout, const std::vector<AffineParams>& params) {
  std::atomic<bool> finite{true};
  cpu::for_each_param_run(
      layout,
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        if (!cpu::quantize_run(x + off, out + off, len, params[static_cast<std::size_t>(p)])) finite.store(false);
      },
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        if (!cpu::quantize_run_varying(x + off, out + off, len, params.data() + p)) finite.store(false);
      });
  return finite.load();
}

// Fractional zero points: core/affine.hpp's scalar formula over each run (element k of a varying run takes
// parameter param + k); false when x held NaN or +-inf.
template <class Q>
bool quantize_bytes(const float* x, Q* out, const cpu::ParamLayout& layout,
                    const std::vector<FractionalAffineParams>& params) {
  std::atomic<bool> finite{true};
  auto run = [&](std::int64_t off, std::int64_t len, const FractionalAffineParams* p, std::int64_t step) {
    bool ok = true;
    for (std::int64_t i = 0; i < len; ++i) {
      ok = ok && std::isfinite(x[off + i]);
      out[off + i] = static_cast<Q>(quantize_value(x[off + i], p[i * step]));
    }
    if (!ok) finite.store(false);
  };
  cpu::for_each_param_run(
      layout, [&](std::int64_t off, std::int64_t len, std::int64_t p) { run(off, len, params.data() + p, 0); },
      [&](std::int64_t off, std::int64_t len, std::int64_t p) { run(off, len, params.data() + p, 1); });
  return finite.load();
}

template <class Q>
void dequantize_bytes(const Q* q, float* out, const cpu::ParamLayout& layout,
                      const std::vector<FractionalAffineParams>& params) {
  auto run = [&](std::int64_t off, std::int64_t len, const FractionalAffineParams* p, std::int64_t step) {
    for (std::int64_t i = 0; i < len; ++i) out[off + i] = dequantize_value(q[off + i], p[i * step]);
  };
  cpu::for_each_param_run(
      layout, [&](std::int64_t off, std::int64_t len, std::int64_t p) { run(off, len, params.data() + p, 0); },
      [&](std::int64_t off, std::int64_t len, std::int64_t p) { run(off, len, params.data() + p, 1); });
}

template <class Q>
void dequantize_bytes(const Q* q, float* out, const cpu::ParamLayout& layout, const std::vector<AffineParams>& params) {
  cpu::for_each_param_run(
      layout,
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        cpu::dequantize_run(q + off, out + off, len, params[static_cast<std::size_t>(p)]);
      },
      [&](std::int64_t off, std::int64_t len, std::int64_t p) {
        cpu::dequantize_run_varying(q + off, out + off, len, params.data() + p);
      });
}

// Quantizes contiguous input with checked parameters into `out` (quantized_data_bytes(scheme.dtype, shape)
// bytes), checking for NaN/inf in the same pass: when one is found the error names it and the content
// of `out` is meaningless, so callers pass storage the user cannot see yet.
// The fused pass of quantize_checking_finite with either kind of parameters.
template <class Params>
bool quantize_with(const float* x, const Shape& shape, QuantDtype dtype, const cpu::ParamLayout& layout,
                   const std::vector<Params>& params, std::uint8_t* out) {
  switch (dtype) {
    case QuantDtype::int8: return quantize_bytes(x, reinterpret_cast<std::int8_t*>(out), layout, params);
    case QuantDtype::uint8: return quantize_bytes(x, out, layout, params);
    case QuantDtype::int4:
    case QuantDtype::uint4: {
      // One value a byte first (uint4 values fit in int8), then nibbles; not zero-filled: fully overwritten.
      const std::unique_ptr<std::int8_t[]> values(new std::int8_t[static_cast<std::size_t>(shape.product())]);
      const bool finite = quantize_bytes(x, values.get(), layout, params);
      if (finite) cpu::pack_int4_rows(values.get(), shape, out);
      return finite;
    }
  }
  return true;
}

inline void quantize_checking_finite(const float* x, const Shape& shape, const QuantScheme& scheme,
                                     const QParams& qparams, const cpu::ParamLayout& layout, std::uint8_t* out,
                                     const char* function) {
  const bool finite = qparams.fractional()
                          ? quantize_with(x, shape, scheme.dtype, layout, fractional_params(qparams, scheme), out)
                          : quantize_with(x, shape, scheme.dtype, layout, affine_params(qparams, scheme), out);
  if (!finite) cpu::require_finite(x, shape.product(), function, "x");
}

// Quantizes into the caller's `out` only once the whole input has proven finite: the single fused pass
// writes a private staging copy, which is then copied out (a quarter of the input's bytes for 8-bit).
inline void quantize_into_caller_storage(const TensorView<const float>& x, const QuantScheme& scheme,
                                         const QParams& qparams, const cpu::ParamLayout& layout, std::uint8_t* out,
                                         const char* function) {
  std::vector<float> storage;
  const float* data = contiguous_input(x, storage);
  const std::size_t bytes = static_cast<std::size_t>(quantized_data_bytes(scheme.dtype, x.shape()));
  const std::unique_ptr<std::uint8_t[]> staging(new std::uint8_t[bytes]);  // not zero-filled: fully overwritten
  quantize_checking_finite(data, x.shape(), scheme, qparams, layout, staging.get(), function);
  std::memcpy(out, staging.get(), bytes);
}

template <class Params>
void dequantize_with(const std::uint8_t* q, const Shape& shape, QuantDtype dtype, const cpu::ParamLayout& layout,
                     const std::vector<Params>& params, float* out) {
  switch (dtype) {
    case QuantDtype::int8: dequantize_bytes(reinterpret_cast<const std::int8_t*>(q), out, layout, params); return;
    case QuantDtype::uint8: dequantize_bytes(q, out, layout, params); return;
    case QuantDtype::int4:
    case QuantDtype::uint4: {
      const std::unique_ptr<std::int8_t[]> values(new std::int8_t[static_cast<std::size_t>(shape.product())]);
      cpu::unpack_int4_rows(q, shape, is_signed(dtype), values.get());
      dequantize_bytes(values.get(), out, layout, params);
      return;
    }
  }
}

inline void dequantize_validated(const std::uint8_t* q, const Shape& shape, const QuantScheme& scheme,
                                 const QParams& qparams, float* out, const char* function) {
  const cpu::ParamLayout layout = param_layout(scheme, shape, function);
  if (qparams.fractional())
    dequantize_with(q, shape, scheme.dtype, layout, fractional_params(qparams, scheme), out);
  else
    dequantize_with(q, shape, scheme.dtype, layout, affine_params(qparams, scheme), out);
}

template <class T>
void require_contiguous_output(const TensorView<T>& out, const Shape& expected, const char* function, const char* argument) {
  require_host_view(out, function, argument);
  if (out.shape() != expected) fail(function, argument, "a view of shape " + to_string(out.shape()), "shape " + to_string(expected));
  require_contiguous(out, function, argument);
}

// Shape of the packed bytes of a 4-bit tensor: the last dimension becomes ceil(L / 2).
inline Shape packed_shape(const Shape& shape) {
  Shape p = shape;
  if (p.rank > 0) p.values[p.rank - 1] = int4_row_bytes(p.values[p.rank - 1]);
  return p;
}

}  // namespace detail

// Quantizes x (any strides) with the given parameters (integer or fractional zero points) into a new tensor.
inline QuantizedTensor quantize(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams) {
  const char* fn = "shrink::quant::quantize";
  const cpu::ParamLayout layout = detail::check_quantize_args(x, scheme, qparams, fn, FloatZeroPoints::accepted);
  std::vector<float> storage;
  const float* data = detail::contiguous_input(x, storage);
  QuantizedTensor q;
  q.shape = x.shape();
  q.scheme = scheme;
  q.qparams = qparams;
  q.data.resize(static_cast<std::size_t>(quantized_data_bytes(scheme.dtype, q.shape)));  // every byte written next
  detail::quantize_checking_finite(data, q.shape, scheme, qparams, layout, q.data.data(), fn);
  return q;
}

// Quantizes x with min/max parameters of x itself (MinMaxObserver semantics, per the scheme's granularity).
inline QuantizedTensor quantize(TensorView<const float> x, const QuantScheme& scheme) {
  return quantize(x, scheme, minmax_qparams(x, scheme));
}

// Quantizes into caller storage. `out` is written only after all of x proved finite (a NaN or inf leaves
// it untouched), at the cost of a private staging buffer of out's size. int8 schemes: `out` has x's shape.
inline void quantize_into(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams,
                          TensorView<std::int8_t> out) {
  const char* fn = "shrink::quant::quantize_into";
  if (scheme.dtype != QuantDtype::int8)
    fail(fn, "scheme.dtype", to_string(scheme.dtype), "int8 for an int8 output view (uint8/int4/uint4 write bytes)");
  const cpu::ParamLayout layout = detail::check_quantize_args(x, scheme, qparams, fn, FloatZeroPoints::accepted);
  detail::require_contiguous_output(out, x.shape(), fn, "out");
  detail::quantize_into_caller_storage(x, scheme, qparams, layout, reinterpret_cast<std::uint8_t*>(out.data()), fn);
}

// uint8 schemes: `out` has x's shape; int4/uint4 schemes: x's shape with the last dimension ceil(L / 2)
// (packed, core/int4.hpp).
inline void quantize_into(TensorView<const float> x, const QuantScheme& scheme, const QParams& qparams,
                          TensorView<std::uint8_t> out) {
  const char* fn = "shrink::quant::quantize_into";
  if (scheme.dtype == QuantDtype::int8)
    fail(fn, "scheme.dtype", to_string(scheme.dtype), "uint8, int4 or uint4 for a byte output view (int8 writes int8_t)");
  const cpu::ParamLayout layout = detail::check_quantize_args(x, scheme, qparams, fn, FloatZeroPoints::accepted);
  detail::require_contiguous_output(out, is_packed(scheme.dtype) ? detail::packed_shape(x.shape()) : x.shape(), fn, "out");
  detail::quantize_into_caller_storage(x, scheme, qparams, layout, out.data(), fn);
}

// Dequantizes into caller storage of the tensor's shape (contiguous).
inline void dequantize_into(const QuantizedTensor& q, TensorView<float> out) {
  const char* fn = "shrink::quant::dequantize_into";
  validate_qparams(q.qparams, q.scheme, q.shape, fn, FloatZeroPoints::accepted);
  if (static_cast<std::int64_t>(q.data.size()) != quantized_data_bytes(q.scheme.dtype, q.shape))
    fail(fn, "q.data.size()", q.data.size(),
         std::to_string(quantized_data_bytes(q.scheme.dtype, q.shape)) + " bytes for shape " + to_string(q.shape));
  if (q.shape.product() == 0) fail(fn, "q.shape", to_string(q.shape), "at least one element");
  detail::require_contiguous_output(out, q.shape, fn, "out");
  detail::dequantize_validated(q.data.data(), q.shape, q.scheme, q.qparams, out.data(), fn);
}

inline std::vector<float> dequantize(const QuantizedTensor& q) {
  std::vector<float> out(static_cast<std::size_t>(q.shape.product()));
  dequantize_into(q, TensorView<float>(out.data(), q.shape));
  return out;
}

// Dequantizes int8 values held by the caller (contiguous, the shape of `out`).
inline void dequantize_into(TensorView<const std::int8_t> q, const QuantScheme& scheme, const QParams& qparams,
                            TensorView<float> out) {
  const char* fn = "shrink::quant::dequantize_into";
  if (scheme.dtype != QuantDtype::int8) fail(fn, "scheme.dtype", to_string(scheme.dtype), "int8 for int8 values");
  detail::require_contiguous_output(q, out.shape(), fn, "q");
  detail::require_contiguous_output(out, q.shape(), fn, "out");
  require_nonempty(out, fn, "out");
  validate_qparams(qparams, scheme, out.shape(), fn, FloatZeroPoints::accepted);
  detail::dequantize_validated(reinterpret_cast<const std::uint8_t*>(q.data()), out.shape(), scheme, qparams, out.data(), fn);
}

// Dequantizes uint8 values (the shape of `out`) or packed 4-bit values (that shape with the last
// dimension ceil(L / 2)) held by the caller.
inline void dequantize_into(TensorView<const std::uint8_t> q, const QuantScheme& scheme, const QParams& qparams,
                            TensorView<float> out) {
  const char* fn = "shrink::quant::dequantize_into";
  if (scheme.dtype == QuantDtype::int8) fail(fn, "scheme.dtype", "int8", "uint8, int4 or uint4 for byte values");
  detail::require_contiguous_output(q, is_packed(scheme.dtype) ? detail::packed_shape(out.shape()) : out.shape(), fn, "q");
  detail::require_contiguous_output(out, out.shape(), fn, "out");
  require_nonempty(out, fn, "out");
  validate_qparams(qparams, scheme, out.shape(), fn, FloatZeroPoints::accepted);
  detail::dequantize_validated(q.data(), out.shape(), scheme, qparams, out.data(), fn);
}

}  // namespace shrink::quant
