// Storage size of tensors: quantized (data + scales + zero points) and dense floating point, and their ratio.
//
// A quantized tensor is counted as it would be stored for deployment:
//   data        quantized_data_bytes(dtype, shape): one byte per 8-bit value, 4-bit values packed two per
//               byte with each row of the last dimension padded to whole bytes (core/int4.hpp)
//   scales      4 bytes (float32) per parameter, qparams_shape(scheme, shape).product() parameters
//   zero points 1 byte per parameter for affine schemes (8-bit and 4-bit types alike), 4 bytes (float32) for
//               fractional ones (scheme.float_zero_point, HQQ); none for symmetric schemes, whose zero point is
//               implied by the dtype
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::metrics {

inline constexpr std::int64_t kScaleBytes = 4;      // float32
inline constexpr std::int64_t kZeroPointBytes = 1;  // int8/uint8 (4-bit zero points are not packed)
inline constexpr std::int64_t kFloatZeroPointBytes = 4;  // float32: a fractional zero point

// Bytes of a dense tensor of `shape` stored as `type` (f32, f16, bf16, f8_e4m3, ...); 4-bit types are
// counted packed, each row of the last dimension padded to whole bytes (core/int4.hpp).
inline std::int64_t dense_bytes(const Shape& shape, ScalarType type = ScalarType::f32) {
  if (element_bits(type) == 4) return int4_packed_bytes(shape);
  return shape.product() * element_bits(type) / 8;
}

struct QuantizedSize {
  std::int64_t data_bytes = 0;
  std::int64_t scale_bytes = 0;
  std::int64_t zero_point_bytes = 0;
  std::int64_t parameters = 0;  // scale (and zero point) count
  std::int64_t elements = 0;    // logical elements of the tensor

  std::int64_t total_bytes() const { return data_bytes + scale_bytes + zero_point_bytes; }
  // Storage bits per logical element, parameters included (e.g. 4.3125 for int4 affine per group of 128).
  double bits_per_element() const {
    return elements == 0 ? 0.0 : 8.0 * static_cast<double>(total_bytes()) / static_cast<double>(elements);
  }
};

// Size of a tensor of `shape` quantized under `scheme` (the scheme's axis and group size are checked).
inline QuantizedSize quantized_size(const Shape& shape, const quant::QuantScheme& scheme) {
  const char* fn = "shrink::metrics::quantized_size";
  QuantizedSize size;
  size.elements = shape.product();
  size.parameters = quant::qparams_shape(scheme, shape, fn).product();
  size.data_bytes = quant::quantized_data_bytes(scheme.dtype, shape);
  size.scale_bytes = size.parameters * kScaleBytes;
  const std::int64_t zero_point_bytes = scheme.float_zero_point ? kFloatZeroPointBytes : kZeroPointBytes;
  size.zero_point_bytes = scheme.symmetry == quant::Symmetry::affine ? size.parameters * zero_point_bytes : 0;
  return size;
}

// Size of a QuantizedTensor, after checking that its data and parameter counts match its shape and scheme.
inline QuantizedSize quantized_size(const quant::QuantizedTensor& tensor) {
  const char* fn = "shrink::metrics::quantized_size";
  const QuantizedSize size = quantized_size(tensor.shape, tensor.scheme);
  if (static_cast<std::int64_t>(tensor.data.size()) != size.data_bytes)
    fail(fn, "tensor.data.size()", tensor.data.size(),
         std::to_string(size.data_bytes) + " bytes for " + quant::to_string(tensor.scheme.dtype) + " shape " +
             to_string(tensor.shape));
  if (tensor.qparams.size() != size.parameters)
    fail(fn, "tensor.qparams.scale.size()", tensor.qparams.scale.size(),
         std::to_string(size.parameters) + " parameters for a " + quant::to_string(tensor.scheme.granularity) +
             " scheme over shape " + to_string(tensor.shape));
  return size;
}

// original / compressed, e.g. dense_bytes(shape) / quantized_size(shape, scheme).total_bytes().
inline double compression_ratio(std::int64_t original_bytes, std::int64_t compressed_bytes) {
  const char* fn = "shrink::metrics::compression_ratio";
  if (original_bytes < 0) fail(fn, "original_bytes", original_bytes, "a size >= 0");
  if (compressed_bytes <= 0) fail(fn, "compressed_bytes", compressed_bytes, "a size > 0");
  return static_cast<double>(original_bytes) / static_cast<double>(compressed_bytes);
}

}  // namespace shrink::metrics
