// The stored form of a compressed tensor under the convention of io/quant_record.hpp: the bytes of its data,
// `_scale`, `_zero_point` and input-scale tensors and its metadata entry, ready for a SafetensorsWriter.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/dtype.hpp"
#include "shrink/core/view.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/quantized_tensor.hpp"

namespace shrink::io {
// One tensor's bytes ready for a SafetensorsWriter.
struct EncodedTensor {
  TensorDeclaration declaration;
  ByteBuffer bytes;
};

// Everything that stores one compressed tensor: its tensors (in stored_tensors order) and its metadata entry.
struct EncodedQuantization {
  QuantizationRecord record;
  std::vector<EncodedTensor> tensors;

  // Declares the tensors and adds the metadata entry and the format version.
  void declare(SafetensorsWriter& writer) const {
    for (const EncodedTensor& t : tensors)
      writer.add_tensor(t.declaration.name, t.declaration.dtype, t.declaration.shape);
    writer.add_metadata(quant_metadata_key(record.name), to_metadata_value(record));
    writer.add_metadata(kFormatVersionKey, kFormatVersion);
  }
  // Writes the tensors' bytes, in declaration order.
  void write(SafetensorsWriter& writer) const {
    for (const EncodedTensor& t : tensors) writer.write(t.declaration.name, t.bytes.data(), t.bytes.size());
  }
  const EncodedTensor& tensor(const std::string& tensor_name) const {
    for (const EncodedTensor& t : tensors)
      if (t.declaration.name == tensor_name) return t;
    fail("shrink::io::EncodedQuantization::tensor", "no tensor " + detail::quoted(tensor_name));
  }
};

namespace detail {

template <class T>
ByteBuffer bytes_of(const std::vector<T>& values) {
  ByteBuffer out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

}  // namespace detail

// The stored form of a QuantizedTensor (moved in: its data becomes the first tensor's bytes). Fractional zero points
// (scheme.float_zero_point, HQQ) are stored as an F32 `_zero_point` under "zero_point":"float" (io/quant_record.hpp).
inline EncodedQuantization encode_quantized(const std::string& name, quant::QuantizedTensor q,
                                            std::string calibrator = {}, std::string source_dtype = {}) {
  const char* fn = "shrink::io::encode_quantized";
  quant::validate_qparams(q.qparams, q.scheme, q.shape, fn, quant::FloatZeroPoints::accepted);
  if (static_cast<std::int64_t>(q.data.size()) != quant::quantized_data_bytes(q.scheme.dtype, q.shape))
    fail(fn, "q.data.size()", q.data.size(),
         std::to_string(quant::quantized_data_bytes(q.scheme.dtype, q.shape)) + " bytes for shape " +
             to_string(q.shape));
  EncodedQuantization e;
  e.record = integer_record(name, q.scheme, q.shape, std::move(calibrator), std::move(source_dtype));
  const std::vector<TensorDeclaration> declarations = stored_tensors(e.record);
  e.tensors.push_back({declarations[0], std::move(q.data)});
  e.tensors.push_back({declarations[1], detail::bytes_of(q.qparams.scale)});
  if (q.qparams.fractional()) {
    e.tensors.push_back({declarations[2], detail::bytes_of(q.qparams.float_zero_point)});  // F32, "zero_point":"float"
  } else if (e.record.has_zero_point()) {
    ByteBuffer zp(q.qparams.zero_point.size());
    for (std::size_t i = 0; i < zp.size(); ++i)
      zp[i] = static_cast<std::uint8_t>(q.qparams.zero_point[i]);  // I8 as two's complement
    e.tensors.push_back({declarations[2], std::move(zp)});
  }
  return e;
}

// Adds the input scale s [in] (AWQ's; F32 tensor `tensor`) to an encoded integer tensor of rank 2 whose integers are
// those of W·diag(s): readers then give W (io/quant_record.hpp). Nothing changes unless every check passes.
inline void add_input_scale(EncodedQuantization& e, const std::string& tensor, const std::vector<float>& input_scale) {
  const char* fn = "shrink::io::add_input_scale";
  if (e.record.has_input_scale()) fail(fn, "e.record.input_scale", detail::quoted(e.record.input_scale), "none yet");
  QuantizationRecord record = e.record;
  set_input_scale(record, tensor);
  const std::int64_t in = record.shape.back();
  if (static_cast<std::int64_t>(input_scale.size()) != in)
    fail(fn, "input_scale.size()", input_scale.size(), "the record's input width " + std::to_string(in));
  for (std::size_t i = 0; i < input_scale.size(); ++i)
    if (!(input_scale[i] > 0.0f) || !std::isfinite(input_scale[i]))
      fail(fn, ("input_scale[" + std::to_string(i) + "]").c_str(), input_scale[i], "a finite input scale > 0");
  e.tensors.push_back({stored_tensors(record).back(), detail::bytes_of(input_scale)});
  e.record = std::move(record);
}

inline EncodedQuantization encode_fp8(const std::string& name, quant::Fp8Tensor q, std::string calibrator = {},
                                      std::string source_dtype = {}) {
  const char* fn = "shrink::io::encode_fp8";
  if (static_cast<std::int64_t>(q.data.size()) != q.numel())
    fail(fn, "q.data.size()", q.data.size(), std::to_string(q.numel()) + " codes for shape " + to_string(q.shape));
  const auto granularity =
      q.axis < 0 ? quant::Fp8ScaleGranularity::per_tensor : quant::Fp8ScaleGranularity::per_channel;
  EncodedQuantization e;
  e.record = fp8_record(name, q.format, granularity, q.axis, q.shape, std::move(calibrator), std::move(source_dtype));
  const std::vector<TensorDeclaration> declarations = stored_tensors(e.record);
  const std::int64_t scales = Shape(declarations[1].shape).product();
  if (static_cast<std::int64_t>(q.scale.size()) != scales)
    fail(fn, "q.scale.size()", q.scale.size(), std::to_string(scales) + " scales");
  for (float s : q.scale)
    if (!(s > 0.0f) || !std::isfinite(s)) fail(fn, "q.scale", s, "finite scales > 0");
  e.tensors.push_back({declarations[0], std::move(q.data)});
  e.tensors.push_back({declarations[1], detail::bytes_of(q.scale)});
  return e;
}

// Casts x to FP16 or BF16 (round to nearest even) and records it.
inline EncodedQuantization encode_cast(const std::string& name, TensorView<const float> x, ScalarType to,
                                       std::string cast_from = "F32") {
  EncodedQuantization e;
  e.record = cast_record(name, to, x.shape(), std::move(cast_from));
  ByteBuffer bytes(static_cast<std::size_t>(x.numel()) * 2);
  if (to == ScalarType::f16)
    quant::cast_to_half(x, TensorView<half>(reinterpret_cast<half*>(bytes.data()), x.shape()));
  else
    quant::cast_to_bfloat16(x, TensorView<bfloat16>(reinterpret_cast<bfloat16*>(bytes.data()), x.shape()));
  e.tensors.push_back({stored_tensors(e.record)[0], std::move(bytes)});
  return e;
}

}  // namespace shrink::io
