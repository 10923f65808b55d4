// Casts of float tensors: to half / bfloat16 and back, and scaled FP8 (E4M3, E5M2) quantization per tensor or
// per channel. Element rules are those of core/half.hpp and core/fp8.hpp; the loops are in cpu/cast.hpp.
//
// half / bfloat16: out_i = round_to_nearest_even(x_i). Non-finite values are carried through as IEEE does
// (inf -> inf, NaN -> NaN, finite overflow -> inf); that is the documented behaviour, not an error.
//
// FP8 with scales (one per tensor, or one per index along `axis`):
//   stored  q_i   = fp8(x_i / scale)                 round to nearest even, saturating by default
//   decoded x'_i  = value(q_i) * scale
//   derived scale = amax * 2^margin / max_finite(format), clamped to [FLT_MIN, FLT_MAX], where amax is the
//                   largest finite |x_i| of the tensor or channel; a channel whose amax is 0 gets scale 1.
// With margin = 0, x / scale lands in [-max_finite, max_finite] (up to rounding, which saturation absorbs).
// NaN/inf in x is an error naming the first bad index unless options.allow_nonfinite is set.
//
// Every function checks all its arguments before writing anything.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/cast.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/reduce.hpp"

namespace shrink::quant {

enum class Fp8ScaleGranularity : std::uint8_t { per_tensor, per_channel };

inline const char* to_string(Fp8ScaleGranularity g) {
  return g == Fp8ScaleGranularity::per_tensor ? "per_tensor" : "per_channel";
}

struct Fp8QuantizeOptions {
  // true: |x / scale| past the largest finite value, and inf, clamp to +-max finite (CUDA's satfinite);
  // false: the OCP rules, NaN for E4M3 and +-inf for E5M2.
  bool saturate = true;
  // Explicit scales, finite and > 0: one per tensor, or one per index along the axis. Empty: derived from amax.
  std::vector<float> scales;
  // Headroom of derived scales in powers of two: scale = amax * 2^margin / max_finite (TransformerEngine's
  // margin). Ignored with explicit scales.
  float margin = 0.0f;
  // false: NaN/inf in x is an error. true: NaN encodes as NaN, inf as an overflow; amax skips them.
  bool allow_nonfinite = false;
};

// An FP8-quantized tensor: x ≈ value(data) * scale.
struct Fp8Tensor {
  ByteBuffer data;  // FP8 codes of `format` (core/fp8.hpp), row-major
  Shape shape;
  Fp8Format format = Fp8Format::e4m3;
  std::vector<float> scale;  // one entry per tensor, or shape[axis] entries
  int axis = -1;             // the channel axis (0 <= axis < rank) of per-channel scales; -1 per tensor

  std::int64_t numel() const { return shape.product(); }
  TensorView<const std::uint8_t> codes() const { return TensorView<const std::uint8_t>(data.data(), shape); }
};

namespace cast_detail {

template <class From, class To>
void check_cast_views(const TensorView<const From>& x, const TensorView<To>& out, const char* function) {
  require_host_view(x, function, "x");
  require_host_view(out, function, "out");
  require_nonempty(x, function, "x");
  if (out.shape() != x.shape())
    fail(function, "out", to_string(out.shape()), "the shape of x, " + to_string(x.shape()));
}

// Runs `loop(from, to, n)` over contiguous stretches and `element(value)` over strided ones.
template <class From, class To, class Loop, class Element>
void cast_views(const TensorView<const From>& x, const TensorView<To>& out, Loop loop, Element element) {
  if (x.is_contiguous() && out.is_contiguous()) {
    loop(x.data(), out.data(), x.numel());
    return;
  }
  const std::int64_t length = cpu::row_length(x.shape());
  const std::int64_t step_x = cpu::row_stride(x.strides());
  const std::int64_t step_out = cpu::row_stride(out.strides());
  cpu::for_each_row(x.shape(), x.strides(), out.strides(), [&](std::int64_t, std::int64_t at_x, std::int64_t at_out) {
    if (step_x == 1 && step_out == 1) {
      loop(x.data() + at_x, out.data() + at_out, length);
      return;
    }
    for (std::int64_t i = 0; i < length; ++i) out.data()[at_out + i * step_out] = element(x.data()[at_x + i * step_x]);
  });
}

// Where the scales of an FP8 tensor apply: [outer, channels, inner] around the axis (channels = 1 per tensor).
struct Fp8Layout {
  AxisSplit split;
  std::int64_t scale_count = 1;
  int axis = -1;  // normalised; -1 per tensor
};

inline Fp8Layout fp8_layout(const Shape& shape, Fp8ScaleGranularity granularity, int axis, const char* function) {
  Fp8Layout layout;
  if (granularity == Fp8ScaleGranularity::per_tensor) {
    layout.split = AxisSplit{1, 1, shape.product()};
    return layout;
  }
  layout.axis = normalize_axis(axis, shape.rank, function, "axis");
  layout.split = split_at_axis(shape, layout.axis);
  layout.scale_count = layout.split.channels;
  return layout;
}

inline std::string scale_count_text(const Fp8Layout& layout) {
  return layout.axis < 0
             ? std::string("1 scale (per tensor)")
             : std::to_string(layout.scale_count) + " scales (the size of axis " + std::to_string(layout.axis) + ")";
}

// Scales given by the caller: the right count, each finite and > 0. `argument` names the container.
inline void check_scales(const float* scales, std::int64_t count, const Fp8Layout& layout, const char* function,
                         const std::string& argument) {
  if (count != layout.scale_count)
    fail(function, argument.c_str(), std::to_string(count) + (count == 1 ? " value" : " values"),
         scale_count_text(layout));
  for (std::int64_t c = 0; c < count; ++c)
    if (!(std::isfinite(scales[c]) && scales[c] > 0.0f))
      fail(function, (argument + "[" + std::to_string(c) + "]").c_str(), scales[c], "a finite scale > 0");
}

// amax * 2^margin / max_finite, in double (correctly rounded to float for margin 0), kept a normal float.
inline float derived_scale(float amax, float margin, Fp8Format format) {
  if (amax == 0.0f) return 1.0f;
  const double scale =
      static_cast<double>(amax) / static_cast<double>(fp8_max_finite(format)) * std::exp2(static_cast<double>(margin));
  return static_cast<float>(std::fmin(std::fmax(scale, static_cast<double>(FLT_MIN)), static_cast<double>(FLT_MAX)));
}

template <Fp8Format F>
void encode_fp8(const float* x, std::uint8_t* codes, const Fp8Layout& layout, const float* scales, bool saturate) {
  const AxisSplit& s = layout.split;
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const std::int64_t row = o * s.channels * s.inner;
    if (s.inner == 1) {  // scales vary along the run
      cpu::encode_fp8_run<F>(x + row, codes + row, s.channels, scales, saturate);
      continue;
    }
    for (std::int64_t c = 0; c < s.channels; ++c)
      cpu::encode_fp8_run<F>(x + row + c * s.inner, codes + row + c * s.inner, s.inner, scales[c], saturate);
  }
}

template <Fp8Format F>
void decode_fp8(const std::uint8_t* codes, float* out, const Fp8Layout& layout, const float* scales) {
  const auto table = cpu::fp8_decode_table<F>();
  const AxisSplit& s = layout.split;
  for (std::int64_t o = 0; o < s.outer; ++o) {
    const std::int64_t row = o * s.channels * s.inner;
    if (s.inner == 1) {
      cpu::decode_fp8_run(codes + row, out + row, s.channels, table.data(), scales);
      continue;
    }
    for (std::int64_t c = 0; c < s.channels; ++c)
      cpu::decode_fp8_run(codes + row + c * s.inner, out + row + c * s.inner, s.inner, table.data(), scales[c]);
  }
}

// Quantizes contiguous x (already checked to be a non-empty host view) into checked outputs.
inline void quantize_fp8_checked(const float* x, std::int64_t n, Fp8Format format, const Fp8Layout& layout,
                                 const Fp8QuantizeOptions& options, std::uint8_t* codes, float* scales,
                                 const char* function) {
  if (!options.scales.empty())
    check_scales(options.scales.data(), static_cast<std::int64_t>(options.scales.size()), layout, function,
                 "options.scales");
  if (!std::isfinite(options.margin)) fail(function, "options.margin", options.margin, "a finite number");
  // One pass finds the non-finite elements and, when the scales are derived, each channel's finite amax.
  const AxisSplit& s = layout.split;
  const bool derive = options.scales.empty();
  std::vector<float> amax(static_cast<std::size_t>(derive ? layout.scale_count : 0), 0.0f);
  std::int64_t nonfinite = 0;
  for (std::int64_t o = 0; o < s.outer; ++o)
    for (std::int64_t c = 0; c < s.channels; ++c) {
      const cpu::FiniteRange r = cpu::finite_range(x + (o * s.channels + c) * s.inner, s.inner);
      nonfinite += r.nonfinite;
      if (derive && r.min <= r.max) {
        float& a = amax[static_cast<std::size_t>(layout.axis < 0 ? 0 : c)];
        a = std::fmax(a, std::fmax(-r.min, r.max));
      }
    }
  if (nonfinite > 0 && !options.allow_nonfinite) {
    const std::int64_t at = cpu::first_nonfinite(x, n);
    fail(function, ("x[" + std::to_string(at) + "]").c_str(), x[at],
         "finite values (set options.allow_nonfinite to encode NaN/inf)");
  }
  // Checks done; outputs from here on.
  for (std::int64_t c = 0; c < layout.scale_count; ++c)
    scales[c] = derive ? derived_scale(amax[static_cast<std::size_t>(c)], options.margin, format)
                       : options.scales[static_cast<std::size_t>(c)];
  if (format == Fp8Format::e4m3)
    encode_fp8<Fp8Format::e4m3>(x, codes, layout, scales, options.saturate);
  else
    encode_fp8<Fp8Format::e5m2>(x, codes, layout, scales, options.saturate);
}

// The names errors use: the public function and its arguments.
struct Fp8DequantizeNames {
  const char* function;
  const char* codes;
  const char* scales;
};

inline void dequantize_fp8_checked(const TensorView<const std::uint8_t>& codes, const TensorView<const float>& scales,
                                   Fp8Format format, Fp8ScaleGranularity granularity, int axis,
                                   const TensorView<float>& out, const Fp8DequantizeNames& names) {
  const char* function = names.function;
  require_host_view(codes, function, names.codes);
  require_host_view(scales, function, names.scales);
  require_host_view(out, function, "out");
  require_nonempty(codes, function, names.codes);
  require_contiguous(codes, function, names.codes);
  require_contiguous(scales, function, names.scales);
  require_contiguous(out, function, "out");
  if (out.shape() != codes.shape())
    fail(function, "out", to_string(out.shape()),
         "the shape of " + std::string(names.codes) + ", " + to_string(codes.shape()));
  const Fp8Layout layout = fp8_layout(codes.shape(), granularity, axis, function);
  check_scales(scales.data(), scales.numel(), layout, function, names.scales);
  if (format == Fp8Format::e4m3)
    decode_fp8<Fp8Format::e4m3>(codes.data(), out.data(), layout, scales.data());
  else
    decode_fp8<Fp8Format::e5m2>(codes.data(), out.data(), layout, scales.data());
}

}  // namespace cast_detail

// ---- half / bfloat16 ----------------------------------------------------------------------------------------
// x and out: non-empty host views of one shape, any strides; they must not overlap.

inline void cast_to_half(TensorView<const float> x, TensorView<half> out) {
  cast_detail::check_cast_views(x, out, "shrink::quant::cast_to_half");
  cast_detail::cast_views(x, out, cpu::float_to_half, [](float v) { return half(v); });
}

inline void cast_to_bfloat16(TensorView<const float> x, TensorView<bfloat16> out) {
  cast_detail::check_cast_views(x, out, "shrink::quant::cast_to_bfloat16");
  cast_detail::cast_views(x, out, cpu::float_to_bfloat16, [](float v) { return bfloat16(v); });
}

// Exact.
inline void cast_to_float(TensorView<const half> x, TensorView<float> out) {
  cast_detail::check_cast_views(x, out, "shrink::quant::cast_to_float");
  cast_detail::cast_views(x, out, cpu::half_to_float, [](half v) { return v.to_float(); });
}

// Exact.
inline void cast_to_float(TensorView<const bfloat16> x, TensorView<float> out) {
  cast_detail::check_cast_views(x, out, "shrink::quant::cast_to_float");
  cast_detail::cast_views(x, out, cpu::bfloat16_to_float, [](bfloat16 v) { return v.to_float(); });
}

// ---- FP8 ----------------------------------------------------------------------------------------------------

// Quantizes a non-empty host view of any strides (copied first when not contiguous). `axis` (negative counts
// from the end) is the channel axis of per-channel scales: 0 for Linear [out, in] and conv OIHW weights, 1 for
// transposed-conv IOHW weights; it is ignored per tensor.
inline Fp8Tensor quantize_fp8(TensorView<const float> x, Fp8Format format,
                              Fp8ScaleGranularity granularity = Fp8ScaleGranularity::per_tensor, int axis = 0,
                              const Fp8QuantizeOptions& options = {}) {
  const char* function = "shrink::quant::quantize_fp8";
  require_host_view(x, function, "x");
  require_nonempty(x, function, "x");
  const cast_detail::Fp8Layout layout = cast_detail::fp8_layout(x.shape(), granularity, axis, function);
  std::vector<float> copy;
  const float* data = x.data();
  if (!x.is_contiguous()) {
    copy = contiguous_copy(x);
    data = copy.data();
  }
  Fp8Tensor q;
  q.data.resize(static_cast<std::size_t>(x.numel()));
  q.scale.resize(static_cast<std::size_t>(layout.scale_count));
  cast_detail::quantize_fp8_checked(data, x.numel(), format, layout, options, q.data.data(), q.scale.data(), function);
  q.shape = x.shape();
  q.format = format;
  q.axis = layout.axis;
  return q;
}

// As quantize_fp8, into caller buffers, allocating nothing: x and codes contiguous and of one shape, scales
// contiguous with as many elements as there are scales (1, or the size of the axis).
inline void quantize_fp8_into(TensorView<const float> x, Fp8Format format, Fp8ScaleGranularity granularity, int axis,
                              const Fp8QuantizeOptions& options, TensorView<std::uint8_t> codes,
                              TensorView<float> scales) {
  const char* function = "shrink::quant::quantize_fp8_into";
  require_host_view(x, function, "x");
  require_host_view(codes, function, "codes");
  require_host_view(scales, function, "scales");
  require_nonempty(x, function, "x");
  require_contiguous(x, function, "x");
  require_contiguous(codes, function, "codes");
  require_contiguous(scales, function, "scales");
  if (codes.shape() != x.shape())
    fail(function, "codes", to_string(codes.shape()), "the shape of x, " + to_string(x.shape()));
  const cast_detail::Fp8Layout layout = cast_detail::fp8_layout(x.shape(), granularity, axis, function);
  if (scales.numel() != layout.scale_count)
    fail(function, "scales", "a view of " + std::to_string(scales.numel()) + " elements",
         cast_detail::scale_count_text(layout));
  cast_detail::quantize_fp8_checked(x.data(), x.numel(), format, layout, options, codes.data(), scales.data(),
                                    function);
}

// out_i = value(code_i) * scale, from raw codes and scales: codes and out contiguous host views of one shape,
// scales a contiguous view of 1 (per tensor) or shape[axis] (per channel) finite values > 0.
inline void dequantize_fp8_into(TensorView<const std::uint8_t> codes, TensorView<const float> scales, Fp8Format format,
                                Fp8ScaleGranularity granularity, int axis, TensorView<float> out) {
  cast_detail::dequantize_fp8_checked(codes, scales, format, granularity, axis, out,
                                      {"shrink::quant::dequantize_fp8_into", "codes", "scales"});
}

// out = value(q.data) * q.scale, into a contiguous host view of q.shape.
inline void dequantize_fp8(const Fp8Tensor& q, TensorView<float> out) {
  const char* function = "shrink::quant::dequantize_fp8";
  if (static_cast<std::int64_t>(q.data.size()) != q.numel())
    fail(function, "q.data", std::to_string(q.data.size()) + " bytes",
         std::to_string(q.numel()) + " (the elements of q.shape " + to_string(q.shape) + ")");
  if (q.axis < -1 || q.axis >= q.shape.rank)
    fail(function, "q.axis", q.axis, "-1 (per tensor) or an axis in [0, " + std::to_string(q.shape.rank) + ")");
  const Fp8ScaleGranularity granularity =
      q.axis < 0 ? Fp8ScaleGranularity::per_tensor : Fp8ScaleGranularity::per_channel;
  const TensorView<const float> scales(q.scale.data(), static_cast<std::int64_t>(q.scale.size()));
  cast_detail::dequantize_fp8_checked(q.codes(), scales, q.format, granularity, q.axis, out,
                                      {function, "q.data", "q.scale"});
}

}  // namespace shrink::quant
