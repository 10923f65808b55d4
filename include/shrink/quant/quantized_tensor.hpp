// QuantizedTensor: owning result of quantization (integer data + shape + scheme + parameters).
#pragma once

#include <cstdint>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

// Bytes holding the integer values of a tensor of `shape` under `dtype` (4-bit types packed, see core/int4.hpp).
inline std::int64_t quantized_data_bytes(QuantDtype dtype, const Shape& shape) {
  return is_packed(dtype) ? int4_packed_bytes(shape) : shape.product();
}

struct QuantizedTensor {
  // int8: two's-complement bytes; uint8: plain bytes; int4/uint4: packed nibbles, rows of the last dimension
  // padded to whole bytes (core/int4.hpp).
  ByteBuffer data;
  Shape shape;  // logical shape of the tensor
  QuantScheme scheme;
  QParams qparams;

  std::int64_t numel() const { return shape.product(); }

  // Typed views of the 8-bit forms; 4-bit data is read through core/int4.hpp.
  TensorView<const std::int8_t> int8_view() const {
    if (scheme.dtype != QuantDtype::int8)
      fail("shrink::quant::QuantizedTensor::int8_view", "scheme.dtype", to_string(scheme.dtype), "int8");
    return TensorView<const std::int8_t>(reinterpret_cast<const std::int8_t*>(data.data()), shape);
  }
  TensorView<const std::uint8_t> uint8_view() const {
    if (scheme.dtype != QuantDtype::uint8)
      fail("shrink::quant::QuantizedTensor::uint8_view", "scheme.dtype", to_string(scheme.dtype), "uint8");
    return TensorView<const std::uint8_t>(data.data(), shape);
  }
  // The integer value of element `flat` (row-major index), whatever the dtype.
  std::int32_t value(std::int64_t flat) const {
    switch (scheme.dtype) {
      case QuantDtype::int8: return static_cast<std::int8_t>(data[static_cast<std::size_t>(flat)]);
      case QuantDtype::uint8: return data[static_cast<std::size_t>(flat)];
      default: break;
    }
    const std::int64_t last = shape.rank == 0 ? 1 : shape.values[shape.rank - 1];
    const std::uint8_t* row = data.data() + (flat / last) * int4_row_bytes(last);
    return load_int4(row, flat % last, is_signed(scheme.dtype));
  }
};

namespace detail {

// t.data from integers `values` [t.shape] row-major, inside the scheme's range.
inline void store_values(QuantizedTensor& t, const std::vector<std::int32_t>& values) {
  t.data.resize(static_cast<std::size_t>(quantized_data_bytes(t.scheme.dtype, t.shape)));
  if (is_packed(t.scheme.dtype)) {
    std::vector<std::int8_t> narrow(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) narrow[k] = static_cast<std::int8_t>(values[k]);  // 4-bit fits
    cpu::pack_int4_rows(narrow.data(), t.shape, t.data.data());
  } else {
    for (std::size_t k = 0; k < values.size(); ++k)
      t.data[k] = static_cast<std::uint8_t>(values[k] & 0xff);  // two's complement for int8
  }
}

// The tensor of `values` with parameters `params` (AffineParams or FractionalAffineParams), their zero points going to
// `zero_points` (QParams::zero_point or QParams::float_zero_point).
template <class Params, class ZeroPoint>
QuantizedTensor make_quantized_tensor(const Shape& shape, const QuantScheme& scheme,
                                      const std::vector<std::int32_t>& values, const std::vector<Params>& params,
                                      std::vector<ZeroPoint> QParams::*zero_points, const char* fn) {
  QuantizedTensor t;
  t.shape = shape;
  t.scheme = scheme;
  t.qparams.shape = qparams_shape(scheme, t.shape, fn);
  t.qparams.scale.resize(params.size());
  (t.qparams.*zero_points).resize(params.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    t.qparams.scale[k] = params[k].scale;
    (t.qparams.*zero_points)[k] = params[k].zero_point;
  }
  store_values(t, values);
  return t;
}

}  // namespace detail

// The QuantizedTensor of integers `values` [shape] row-major (inside the scheme's range) and their parameters `params`
// in qparams order ([out, groups] row-major per group, one per output row per channel), as the calibration methods
// (GPTQ, SparseGPT, HQQ) make them.
inline QuantizedTensor make_quantized_tensor(const Shape& shape, const QuantScheme& scheme,
                                             const std::vector<std::int32_t>& values,
                                             const std::vector<AffineParams>& params, const char* fn) {
  return detail::make_quantized_tensor(shape, scheme, values, params, &QParams::zero_point, fn);
}

// The same with fractional zero points (scheme.float_zero_point: HQQ's).
inline QuantizedTensor make_quantized_tensor(const Shape& shape, const QuantScheme& scheme,
                                             const std::vector<std::int32_t>& values,
                                             const std::vector<FractionalAffineParams>& params, const char* fn) {
  return detail::make_quantized_tensor(shape, scheme, values, params, &QParams::float_zero_point, fn);
}

}  // namespace shrink::quant
