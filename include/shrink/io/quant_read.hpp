// Reading compressed tensors back from a safetensors file under the convention of io/quant_record.hpp: every record
// checked against the file (metadata, tensors, scale, zero-point and input-scale values), QuantizedTensor and
// Fp8Tensor out, and any tensor as float32 (dequantized, divided by its input scale, widened or converted).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"

namespace shrink::io {
namespace detail {

inline std::string shape_text(const std::vector<std::int64_t>& shape) { return nlohmann::json(shape).dump(); }

// Checks that tensor `tensor_name` exists with this dtype and shape.
inline void require_stored(const SafetensorsFile& file, const std::string& record_name, const std::string& tensor_name,
                           ScalarType dtype, const std::vector<std::int64_t>& shape, const char* role,
                           const char* function) {
  const std::string where =
      file.path() + ": tensor " + quoted(record_name) + " (" + quant_metadata_key(record_name) + ")";
  if (!file.contains(tensor_name))
    fail(function, where + ": no " + role + " tensor " + quoted(tensor_name) + ": expected one of dtype " +
                       safetensors_dtype_name(dtype) + " and shape " + shape_text(shape));
  const TensorInfo& t = file.info(tensor_name);
  if (t.dtype != dtype || t.shape != shape)
    fail(function, where + ": " + role + " tensor " + quoted(tensor_name) + " has dtype " +
                       safetensors_dtype_name(t.dtype) + " and shape " + shape_text(t.shape) + ": expected " +
                       safetensors_dtype_name(dtype) + " " + shape_text(shape));
}

inline void require_format_version(const SafetensorsFile& file, const char* function) {
  const auto found = file.metadata().find(kFormatVersionKey);
  if (found == file.metadata().end())
    fail(function, file.path() + ": __metadata__ has shrink.quant entries but no \"" + kFormatVersionKey +
                       "\": expected \"" + kFormatVersion + "\"");
  if (found->second != kFormatVersion)
    fail(function, file.path() + ": __metadata__ \"" + kFormatVersionKey + "\" = " + quoted(found->second) +
                       ": expected \"" + kFormatVersion + "\" (a newer shrink wrote this file?)");
}

// A record parsed from the file's metadata, with its tensors' presence, dtypes and shapes checked.
inline QuantizationRecord checked_record(const SafetensorsFile& file, const std::string& name, const std::string& text,
                                         const char* function) {
  require_format_version(file, function);
  const QuantizationRecord r = parse_quantization_record(name, text, file.path());
  // An input scale holding another record's data (a parameter of another, or one shared by two records, shows up as a
  // tensor in two records: quantization_records, which sees them all).
  if (r.has_input_scale() && file.metadata().count(quant_metadata_key(r.input_scale)))
    fail(function, file.path() + ": tensor " + quoted(name) + " (" + quant_metadata_key(name) +
                       "): input scale tensor " + quoted(r.input_scale) + " is the data of tensor " +
                       quoted(r.input_scale) + "'s record: expected a tensor of its own, F32 [" +
                       std::to_string(r.shape.back()) + "]");
  for (const TensorDeclaration& d : stored_tensors(r)) {
    const char* role = d.name == name                      ? "data"
                       : d.name == scale_tensor_name(name) ? "scale"
                       : d.name == r.input_scale           ? "input scale"
                                                           : "zero point";
    require_stored(file, name, d.name, d.dtype, d.shape, role, function);
  }
  if (!r.has_zero_point() && r.encoding == StoredEncoding::integer && file.contains(zero_point_tensor_name(name)))
    fail(function, file.path() + ": tensor " + quoted(name) + " has a " + quoted(zero_point_tensor_name(name)) +
                       " tensor but a symmetric scheme: expected no zero point tensor (or \"scheme\":\"affine\")");
  return r;
}

// The little-endian F32 values of a tensor, copied out (files may leave them unaligned).
inline std::vector<float> copy_floats(const SafetensorsFile& file, const std::string& name) {
  const ByteView bytes = file.bytes(name);
  std::vector<float> out(bytes.size / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), bytes.data, out.size() * sizeof(float));
  return out;
}

inline std::vector<float> checked_scales(const SafetensorsFile& file, const QuantizationRecord& r,
                                         const char* function) {
  std::vector<float> scales = copy_floats(file, scale_tensor_name(r.name));
  for (std::size_t i = 0; i < scales.size(); ++i)
    if (!(scales[i] > 0.0f) || !std::isfinite(scales[i]))
      fail(function, file.path() + ": tensor " + quoted(scale_tensor_name(r.name)) + "[" + std::to_string(i) +
                         "] = " + shrink::to_text(scales[i]) + ": expected a finite scale > 0");
  return scales;
}

// The input scale s of a record that has one, every value finite and > 0.
inline std::vector<float> checked_input_scale(const SafetensorsFile& file, const QuantizationRecord& r,
                                              const char* function) {
  std::vector<float> s = copy_floats(file, r.input_scale);
  for (std::size_t i = 0; i < s.size(); ++i)
    if (!(s[i] > 0.0f) || !std::isfinite(s[i]))
      fail(function, file.path() + ": tensor " + quoted(r.input_scale) + "[" + std::to_string(i) +
                         "] = " + shrink::to_text(s[i]) + ": expected a finite input scale > 0 (of tensor " +
                         quoted(r.name) + ")");
  return s;
}

}  // namespace detail

// The record of tensor `name`, checked against the file's tensors; nothing when the tensor is stored plainly.
inline std::optional<QuantizationRecord> quantization_record(const SafetensorsFile& file, const std::string& name) {
  const auto found = file.metadata().find(quant_metadata_key(name));
  if (found == file.metadata().end()) return std::nullopt;
  return detail::checked_record(file, name, found->second, "shrink::io::quantization_record");
}

// Whether tensor `name` is stored under the convention (its metadata entry is checked when present).
inline bool is_quantized(const SafetensorsFile& file, const std::string& name) {
  return quantization_record(file, name).has_value();
}

namespace detail {

// Scales and input scales finite and > 0, integer zero points inside [qmin, qmax], fractional ones finite: the
// parameter values, read out of the file.
inline void check_parameter_values(const SafetensorsFile& file, const QuantizationRecord& r, const char* function) {
  if (!r.has_scale()) return;
  checked_scales(file, r, function);
  if (r.has_input_scale()) checked_input_scale(file, r, function);
  if (!r.has_zero_point()) return;
  if (r.scheme.float_zero_point) {
    const std::vector<float> zp = copy_floats(file, zero_point_tensor_name(r.name));
    for (std::size_t i = 0; i < zp.size(); ++i)
      if (!std::isfinite(zp[i]))
        fail(function, file.path() + ": tensor " + quoted(zero_point_tensor_name(r.name)) + "[" + std::to_string(i) +
                           "] = " + shrink::to_text(zp[i]) +
                           ": expected a finite zero point (fractional: \"zero_point\":\"float\")");
    return;
  }
  const quant::QuantRange range = quant::quant_range(r.scheme);
  const ByteView zp = file.bytes(zero_point_tensor_name(r.name));
  for (std::size_t i = 0; i < zp.size; ++i) {
    const auto byte = static_cast<std::uint8_t>(zp.data[i]);
    const std::int32_t v = quant::is_signed(r.scheme.dtype) ? static_cast<std::int8_t>(byte) : byte;
    if (v < range.qmin || v > range.qmax)
      fail(function, file.path() + ": tensor " + quoted(zero_point_tensor_name(r.name)) + "[" + std::to_string(i) +
                         "] = " + std::to_string(v) + ": expected a zero point in [" + std::to_string(range.qmin) +
                         ", " + std::to_string(range.qmax) + "] for " + r.dtype_name() +
                         (r.scheme.restricted_range ? " (restricted range)" : "") +
                         (r.scheme.reduce_range ? " (reduce range)" : ""));
  }
}

}  // namespace detail

// Every record of the file, in the file order of their data tensors, each checked in full: metadata, tensors,
// scale, zero-point and input-scale values. A metadata entry that names no tensor, or a tensor claimed by two records
// (an input scale naming another record's tensor among them), is an error.
inline std::vector<QuantizationRecord> quantization_records(const SafetensorsFile& file) {
  const char* fn = "shrink::io::quantization_records";
  const std::string prefix = kQuantMetadataPrefix;
  std::map<std::string, QuantizationRecord> by_name;
  for (const auto& entry : file.metadata()) {
    if (entry.first.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = entry.first.substr(prefix.size());
    if (!file.contains(name))
      fail(fn, file.path() + ": __metadata__ " + detail::quoted(entry.first) +
                   " names no tensor of the file: expected "
                   "a tensor " +
                   detail::quoted(name));
    by_name.emplace(name, detail::checked_record(file, name, entry.second, fn));
  }
  for (const auto& item : by_name) detail::check_parameter_values(file, item.second, fn);
  std::map<std::string, std::string> owner;  // stored tensor -> record
  for (const auto& item : by_name)
    for (const TensorDeclaration& t : stored_tensors(item.second)) {
      const auto inserted = owner.emplace(t.name, item.first);
      if (!inserted.second)
        fail(fn, file.path() + ": tensor " + detail::quoted(t.name) + " belongs to both " +
                     detail::quoted(inserted.first->second) + " and " + detail::quoted(item.first) +
                     ": expected each tensor in one record");
    }
  std::vector<QuantizationRecord> out;
  for (const TensorInfo& t : file.tensors()) {
    const auto found = by_name.find(t.name);
    if (found != by_name.end()) out.push_back(found->second);
  }
  return out;
}

// Names of the `_scale` / `_zero_point` / input-scale tensors the records use (not model tensors of their own).
inline std::set<std::string> parameter_tensor_names(const std::vector<QuantizationRecord>& records) {
  std::set<std::string> names;
  for (const QuantizationRecord& r : records) {
    const std::vector<TensorDeclaration> stored = stored_tensors(r);
    for (std::size_t k = 1; k < stored.size(); ++k) names.insert(stored[k].name);
  }
  return names;
}

// Reads an int8/uint8/int4/uint4 tensor stored under the convention, with every parameter checked: the stored integers
// and parameters (fractional zero points in qparams.float_zero_point), so with an input scale those of W·diag(s)
// (read_input_scale gives s, read_float W).
inline quant::QuantizedTensor read_quantized(const SafetensorsFile& file, const std::string& name) {
  const char* fn = "shrink::io::read_quantized";
  const auto record = quantization_record(file, name);
  if (!record)
    fail(fn, file.path() + ": tensor " + detail::quoted(name) + " has no " + detail::quoted(quant_metadata_key(name)) +
                 " metadata: expected a tensor quantized under shrink's convention");
  if (record->encoding != StoredEncoding::integer)
    fail(fn, file.path() + ": tensor " + detail::quoted(name) + " is stored as " + record->dtype_name() +
                 ": expected int8, uint8, int4 or uint4 (read FP8 with read_fp8, any tensor with read_float)");
  const QuantizationRecord& r = *record;
  quant::QuantizedTensor q;
  q.shape = Shape(r.shape);
  q.scheme = r.scheme;
  q.qparams.shape = quant::qparams_shape(r.scheme, q.shape, fn);
  detail::check_parameter_values(file, r, fn);
  q.qparams.scale = detail::copy_floats(file, scale_tensor_name(name));
  if (r.scheme.float_zero_point) {
    q.qparams.float_zero_point = detail::copy_floats(file, zero_point_tensor_name(name));
  } else if (r.has_zero_point()) {
    const ByteView zp = file.bytes(zero_point_tensor_name(name));
    q.qparams.zero_point.resize(zp.size);
    for (std::size_t i = 0; i < zp.size; ++i) {
      const auto byte = static_cast<std::uint8_t>(zp.data[i]);
      q.qparams.zero_point[i] = quant::is_signed(r.scheme.dtype) ? static_cast<std::int8_t>(byte) : byte;
    }
  } else {
    q.qparams.zero_point.assign(q.qparams.scale.size(), quant::symmetric_zero_point(r.scheme));
  }
  const ByteView data = file.bytes(name);
  q.data.resize(data.size);
  if (data.size > 0) std::memcpy(q.data.data(), data.data, data.size);
  quant::validate_qparams(q.qparams, q.scheme, q.shape, fn, quant::FloatZeroPoints::accepted);
  return q;
}

// The input scale s [in] of tensor `name`, every value checked finite and > 0; empty when the tensor has no record or
// its record no input scale.
inline std::vector<float> read_input_scale(const SafetensorsFile& file, const std::string& name) {
  const auto record = quantization_record(file, name);
  if (!record || !record->has_input_scale()) return {};
  return detail::checked_input_scale(file, *record, "shrink::io::read_input_scale");
}

// Reads an FP8 tensor stored under the convention (codes + scales).
inline quant::Fp8Tensor read_fp8(const SafetensorsFile& file, const std::string& name) {
  const char* fn = "shrink::io::read_fp8";
  const auto record = quantization_record(file, name);
  if (!record || record->encoding != StoredEncoding::fp8)
    fail(fn, file.path() + ": tensor " + detail::quoted(name) +
                 (record ? " is stored as " + record->dtype_name() : std::string(" has no shrink.quant metadata")) +
                 ": expected an FP8 tensor with scales under shrink's convention");
  quant::Fp8Tensor q;
  q.shape = Shape(record->shape);
  q.format = record->fp8_format;
  q.axis = record->fp8_axis;
  q.scale = detail::checked_scales(file, *record, fn);
  const ByteView data = file.bytes(name);
  q.data.resize(data.size);
  if (data.size > 0) std::memcpy(q.data.data(), data.data, data.size);
  return q;
}

namespace detail {

template <class Element, class Convert>
std::vector<float> convert_bytes(const ByteView& bytes, Convert convert) {
  std::vector<float> out(bytes.size / sizeof(Element));
  for (std::size_t i = 0; i < out.size(); ++i) {
    Element v;
    std::memcpy(&v, bytes.data + i * sizeof(Element), sizeof(Element));
    out[i] = convert(v);
  }
  return out;
}

}  // namespace detail

// Any tensor of the file as float32 values, row-major: tensors under the convention are dequantized with their
// stored parameters, and divided by their input scale when they have one (w = v / s[c], io/quant_record.hpp), FP16/BF16
// casts widened; plain tensors are converted (F64, I64 and I32 round to the nearest float; BOOL gives 0 or 1; FP8
// without a record is decoded with scale 1).
inline std::vector<float> read_float(const SafetensorsFile& file, const std::string& name) {
  const char* fn = "shrink::io::read_float";
  if (const auto record = quantization_record(file, name)) {
    std::vector<float> out(static_cast<std::size_t>(record->numel()));
    const Shape shape(record->shape);
    if (record->encoding == StoredEncoding::integer) {
      quant::dequantize_into(read_quantized(file, name), TensorView<float>(out.data(), shape));
      if (record->has_input_scale()) divide_by_input_scale(out, detail::checked_input_scale(file, *record, fn));
      return out;
    }
    if (record->encoding == StoredEncoding::fp8) {
      quant::dequantize_fp8(read_fp8(file, name), TensorView<float>(out.data(), shape));
      return out;
    }
  }
  const TensorInfo& t = file.info(name);
  const ByteView bytes = file.bytes(name);
  switch (t.dtype) {
    case ScalarType::f32: return detail::copy_floats(file, name);
    case ScalarType::f64: return detail::convert_bytes<double>(bytes, [](double v) { return static_cast<float>(v); });
    case ScalarType::f16:
      return detail::convert_bytes<std::uint16_t>(bytes, [](std::uint16_t v) { return half::from_bits(v).to_float(); });
    case ScalarType::bf16:
      return detail::convert_bytes<std::uint16_t>(bytes,
                                                  [](std::uint16_t v) { return bfloat16::from_bits(v).to_float(); });
    case ScalarType::f8_e4m3:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return fp8_decode(v, Fp8Format::e4m3); });
    case ScalarType::f8_e5m2:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return fp8_decode(v, Fp8Format::e5m2); });
    case ScalarType::i8:
      return detail::convert_bytes<std::int8_t>(bytes, [](std::int8_t v) { return static_cast<float>(v); });
    case ScalarType::u8:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return static_cast<float>(v); });
    case ScalarType::i16:
      return detail::convert_bytes<std::int16_t>(bytes, [](std::int16_t v) { return static_cast<float>(v); });
    case ScalarType::i32:
      return detail::convert_bytes<std::int32_t>(bytes, [](std::int32_t v) { return static_cast<float>(v); });
    case ScalarType::i64:
      return detail::convert_bytes<std::int64_t>(bytes, [](std::int64_t v) { return static_cast<float>(v); });
    case ScalarType::boolean:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return v ? 1.0f : 0.0f; });
    case ScalarType::i4:
    case ScalarType::u4: break;
  }
  fail(fn, file.path() + ": tensor " + detail::quoted(name) + " has a dtype with no float reading");
}

// The logical shape of any tensor: the record's for tensors under the convention, the stored one otherwise.
inline std::vector<std::int64_t> logical_shape(const SafetensorsFile& file, const std::string& name) {
  if (const auto record = quantization_record(file, name)) return record->shape;
  return file.info(name).shape;
}

}  // namespace shrink::io
