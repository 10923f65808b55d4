// Quantized tensors in safetensors files: shrink's storage convention (integer data + `_scale` +
// `_zero_point` tensors, the scheme in `__metadata__`), reading it back with every field checked, and
// dequantizing a whole file. Needs nlohmann_json 3.10 or later.
//
// The convention (format version 1). A tensor `w` compressed by shrink is stored as:
//   int8                 `w`            I8, the logical shape
//   uint8                `w`            U8, the logical shape
//   int4, uint4          `w`            U8, the logical shape with its last dimension ceil(L / 2): the packed
//                                       nibbles of core/int4.hpp (element 2j of a row in the low nibble of
//                                       byte j, two's complement for int4; a 0-d tensor takes one byte)
//                        `w_scale`      F32, qparams_shape(scheme, shape): [] (0-d, one value) per tensor, [C]
//                                       per channel, the tensor's shape with the axis divided by the group
//                                       size per group; finite and > 0
//                        `w_zero_point` affine schemes only: the parameter shape, I8 for int8/int4, U8 for
//                                       uint8/uint4 (as ONNX stores zero points in the data's type); inside
//                                       [qmin, qmax]. Symmetric schemes store none: it is 0, or the midpoint
//                                       symmetric_zero_point() for unsigned types.
//   fp8-e4m3, fp8-e5m2   `w`            F8_E4M3 / F8_E5M2, the logical shape, codes of w / scale
//                        `w_scale`      F32, [] per tensor or [C] per channel along `axis`
//   fp16, bf16           `w`            F16 / BF16, a plain cast (nothing else needed to read it)
// and one `__metadata__` entry per tensor, key "shrink.quant.<name>", whose value (metadata values are
// strings) is a compact JSON object:
//   integer: {"dtype":"int8|uint8|int4|uint4","scheme":"symmetric|affine",
//             "granularity":"per_tensor|per_channel|per_group","axis":0,"group_size":0,
//             "restricted_range":false,"reduce_range":false,"calibrator":"minmax","shape":[out,in]}
//   fp8:     {"dtype":"fp8_e4m3|fp8_e5m2","granularity":"per_tensor|per_channel","axis":0,
//             "calibrator":"amax","shape":[...]}
//   cast:    {"dtype":"fp16|bf16","cast_from":"F32","shape":[...]}
// "dtype", "shape" and (integer) "scheme" and "granularity" are required; "axis" is required per channel and
// per group (negative counts from the end; writers store it normalised), "group_size" per group;
// "restricted_range" and "reduce_range" default to false, "calibrator" (free text saying how the range was
// chosen) and "cast_from" to "". Unknown keys are errors. The file also carries "shrink.format_version":"1"
// whenever it holds any "shrink.quant." entry.
//
// Readers trust nothing: every metadata entry must be well-formed JSON of that form, name a tensor of the
// right dtype and shape, and have its `_scale` (and `_zero_point` exactly when affine) of the right dtype and
// shape; scales must be finite and > 0 and zero points inside [qmin, qmax]. A violation raises shrink::Error
// naming the file, the tensor and what was expected. (Integer values themselves need no check: any value of
// the storage type dequantizes to a finite number.)
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::io {

inline constexpr const char* kFormatVersionKey = "shrink.format_version";
inline constexpr const char* kFormatVersion = "1";
inline constexpr const char* kQuantMetadataPrefix = "shrink.quant.";

inline std::string quant_metadata_key(const std::string& name) { return kQuantMetadataPrefix + name; }
inline std::string scale_tensor_name(const std::string& name) { return name + "_scale"; }
inline std::string zero_point_tensor_name(const std::string& name) { return name + "_zero_point"; }

// How a stored tensor was compressed.
enum class StoredEncoding : std::uint8_t {
  integer,  // int8 / uint8 / int4 / uint4 with scales (and zero points)
  fp8,      // scaled FP8
  cast,     // FP16 / BF16, no parameters
};

// What one "shrink.quant.<name>" metadata entry says, validated.
struct QuantizationRecord {
  std::string name;
  StoredEncoding encoding = StoredEncoding::integer;
  quant::QuantScheme scheme;  // integer: the full scheme, axis normalised
  Fp8Format fp8_format = Fp8Format::e4m3;
  quant::Fp8ScaleGranularity fp8_granularity = quant::Fp8ScaleGranularity::per_tensor;
  int fp8_axis = -1;                       // fp8 per channel: the normalised axis; -1 per tensor
  ScalarType cast_type = ScalarType::f16;  // cast: f16 or bf16
  std::string cast_from;                   // cast: the dtype it was cast from ("F32"), informational
  std::string calibrator;                  // informational: how the range was chosen
  std::vector<std::int64_t> shape;         // the logical shape

  // "int8", "uint4", "fp8_e4m3", "bf16", ...
  std::string dtype_name() const {
    switch (encoding) {
      case StoredEncoding::integer: return quant::to_string(scheme.dtype);
      case StoredEncoding::fp8: return std::string("fp8_") + to_string(fp8_format);
      case StoredEncoding::cast: return cast_type == ScalarType::f16 ? "fp16" : "bf16";
    }
    return "?";
  }
  bool has_scale() const { return encoding != StoredEncoding::cast; }
  bool has_zero_point() const {
    return encoding == StoredEncoding::integer && scheme.symmetry == quant::Symmetry::affine;
  }
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
};

namespace detail {

// The dtype and shape of the tensor that holds a record's values.
inline ScalarType stored_data_dtype(const QuantizationRecord& r) {
  switch (r.encoding) {
    case StoredEncoding::integer: return r.scheme.dtype == quant::QuantDtype::int8 ? ScalarType::i8 : ScalarType::u8;
    case StoredEncoding::fp8: return r.fp8_format == Fp8Format::e4m3 ? ScalarType::f8_e4m3 : ScalarType::f8_e5m2;
    case StoredEncoding::cast: return r.cast_type;
  }
  return ScalarType::u8;
}
inline std::vector<std::int64_t> stored_data_shape(const QuantizationRecord& r) {
  std::vector<std::int64_t> s = r.shape;
  if (r.encoding == StoredEncoding::integer && quant::is_packed(r.scheme.dtype) && !s.empty())
    s.back() = int4_row_bytes(s.back());
  return s;
}
inline std::vector<std::int64_t> parameter_shape(const QuantizationRecord& r, const char* function) {
  if (r.encoding == StoredEncoding::integer)
    return quant::qparams_shape(r.scheme, Shape(r.shape), function).to_vector();
  if (r.encoding == StoredEncoding::fp8 && r.fp8_axis >= 0)
    return {r.shape[static_cast<std::size_t>(r.fp8_axis)]};
  return {};
}
inline ScalarType zero_point_dtype(const QuantizationRecord& r) {
  return quant::is_signed(r.scheme.dtype) ? ScalarType::i8 : ScalarType::u8;
}

// Parses a record's JSON text with nesting and duplicate keys refused before a tree is built.
inline nlohmann::json parse_record_json(const std::string& text, const std::function<void(const std::string&)>& bad) {
  using Event = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys;
  std::size_t array_items = 0;
  auto callback = [&](int depth, Event event, nlohmann::json& parsed) -> bool {
    if ((event == Event::object_start || event == Event::array_start) && depth > 1)
      bad("JSON nested deeper than an object holding a shape array");
    if (event == Event::object_start && depth > 0) bad("a JSON object inside the record: expected plain values");
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end && !keys.empty()) keys.pop_back();
    if (event == Event::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      bad("duplicate key " + quoted(parsed.get<std::string>()));
    if (event == Event::value && depth == 2 && ++array_items > static_cast<std::size_t>(kMaxRank))
      bad("an array longer than " + std::to_string(kMaxRank) + " entries: expected a shape of rank <= " +
          std::to_string(kMaxRank));
    return true;
  };
  try {
    return nlohmann::json::parse(text, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    std::string message = e.what();
    if (message.size() > 200) message = message.substr(0, 200) + "...";
    bad("not valid JSON: " + message);
  }
  return {};
}

}  // namespace detail

// Parses and validates the JSON text of the metadata entry of tensor `name` (the tensors themselves are not
// looked at). `label` names the file in errors.
inline QuantizationRecord parse_quantization_record(const std::string& name, const std::string& text,
                                                    const std::string& label = "metadata") {
  const char* fn = "shrink::io::parse_quantization_record";
  const std::string where = label + ": __metadata__ " + detail::quoted(quant_metadata_key(name));
  auto bad = [&](const std::string& what) { fail(fn, where + ": " + what); };
  const nlohmann::json j = detail::parse_record_json(text, bad);
  if (!j.is_object()) bad("is " + detail::json_type(j) + ": expected a JSON object such as {\"dtype\":\"int8\",...}");

  auto string_field = [&](const char* key, bool required) -> std::optional<std::string> {
    if (!j.contains(key)) {
      if (required) bad(std::string("no \"") + key + "\": expected one");
      return std::nullopt;
    }
    if (!j[key].is_string()) bad(std::string("\"") + key + "\" is " + detail::json_type(j[key]) + ": expected a string");
    const std::string value = j[key].get<std::string>();
    if (value.size() > 256) bad(std::string("\"") + key + "\" is " + std::to_string(value.size()) + " characters long: expected at most 256");
    return value;
  };
  auto bool_field = [&](const char* key) {
    if (!j.contains(key)) return false;
    if (!j[key].is_boolean()) bad(std::string("\"") + key + "\" is " + detail::json_type(j[key]) + ": expected true or false");
    return j[key].get<bool>();
  };
  auto integer_field = [&](const char* key, std::int64_t min, std::int64_t max) -> std::optional<std::int64_t> {
    if (!j.contains(key)) return std::nullopt;
    const nlohmann::json& v = j[key];
    const bool fits = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max)
                                             : v.is_number_integer() && v.get<std::int64_t>() >= min;
    if (!fits || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max)
      bad(std::string("\"") + key + "\" = " + v.dump() + ": expected an integer in [" + std::to_string(min) + ", " +
          std::to_string(max) + "]");
    return v.get<std::int64_t>();
  };
  auto allow_keys = [&](std::initializer_list<const char*> allowed) {
    for (const auto& item : j.items()) {
      bool known = false;
      for (const char* k : allowed) known = known || item.key() == k;
      if (!known) bad("unexpected key " + detail::quoted(item.key()) + " for dtype " + j["dtype"].dump());
    }
  };

  QuantizationRecord r;
  r.name = name;
  const std::string dtype = *string_field("dtype", true);
  if (!j.contains("shape")) bad("no \"shape\": expected the logical shape, e.g. [4096, 4096]");
  const nlohmann::json& shape = j["shape"];
  if (!shape.is_array()) bad("\"shape\" is " + detail::json_type(shape) + ": expected an array of sizes");
  std::uint64_t elements = 1;
  for (const auto& d : shape) {
    const auto size = detail::as_count(d, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!size) bad("\"shape\" = " + shape.dump() + ": expected non-negative integer sizes");
    if (!detail::checked_mul(elements, *size, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), elements))
      bad("\"shape\" = " + shape.dump() + ": element count overflows int64");
    r.shape.push_back(static_cast<std::int64_t>(*size));
  }
  if (elements == 0) bad("\"shape\" = " + shape.dump() + ": expected at least one element");
  const int rank = static_cast<int>(r.shape.size());

  auto read_axis = [&](bool required) -> int {
    const auto axis = integer_field("axis", -std::max(rank, 1), std::max(rank, 1) - 1);
    if (!axis) {
      if (required) bad("no \"axis\": expected the channel or group axis");
      return 0;
    }
    if (required && rank == 0) bad("\"axis\" given for a 0-d tensor: expected a tensor of rank >= 1");
    return static_cast<int>(*axis < 0 ? *axis + rank : *axis);
  };

  if (dtype == "int8" || dtype == "uint8" || dtype == "int4" || dtype == "uint4") {
    allow_keys({"dtype", "scheme", "granularity", "axis", "group_size", "restricted_range", "reduce_range",
                "calibrator", "shape"});
    r.encoding = StoredEncoding::integer;
    r.scheme.dtype = dtype == "int8"    ? quant::QuantDtype::int8
                     : dtype == "uint8" ? quant::QuantDtype::uint8
                     : dtype == "int4"  ? quant::QuantDtype::int4
                                        : quant::QuantDtype::uint4;
    const std::string scheme = *string_field("scheme", true);
    if (scheme != "symmetric" && scheme != "affine")
      bad("\"scheme\" = " + detail::quoted(scheme) + ": expected \"symmetric\" or \"affine\"");
    r.scheme.symmetry = scheme == "symmetric" ? quant::Symmetry::symmetric : quant::Symmetry::affine;
    const std::string granularity = *string_field("granularity", true);
    if (granularity == "per_tensor") {
      r.scheme.granularity = quant::Granularity::per_tensor;
      read_axis(false);
    } else if (granularity == "per_channel") {
      r.scheme.granularity = quant::Granularity::per_channel;
      r.scheme.axis = read_axis(true);
    } else if (granularity == "per_group") {
      r.scheme.granularity = quant::Granularity::per_group;
      r.scheme.axis = read_axis(true);
    } else {
      bad("\"granularity\" = " + detail::quoted(granularity) + ": expected \"per_tensor\", \"per_channel\" or \"per_group\"");
    }
    const auto group = integer_field("group_size", 0, std::numeric_limits<std::int64_t>::max());
    if (r.scheme.granularity == quant::Granularity::per_group) {
      const std::int64_t channels = r.shape[static_cast<std::size_t>(r.scheme.axis)];
      if (!group || *group <= 0 || channels % *group != 0)
        bad("\"group_size\" = " + (group ? std::to_string(*group) : std::string("(none)")) +
            ": expected a positive divisor of the size of axis " + std::to_string(r.scheme.axis) + " (" +
            std::to_string(channels) + ")");
      r.scheme.group_size = *group;
    } else if (group && *group != 0) {
      bad("\"group_size\" = " + std::to_string(*group) + ": expected 0 (or none) for " + granularity);
    }
    r.scheme.restricted_range = bool_field("restricted_range");
    r.scheme.reduce_range = bool_field("reduce_range");
    r.calibrator = string_field("calibrator", false).value_or("");
  } else if (dtype == "fp8_e4m3" || dtype == "fp8_e5m2") {
    allow_keys({"dtype", "granularity", "axis", "calibrator", "shape"});
    r.encoding = StoredEncoding::fp8;
    r.fp8_format = dtype == "fp8_e4m3" ? Fp8Format::e4m3 : Fp8Format::e5m2;
    const std::string granularity = *string_field("granularity", true);
    if (granularity == "per_tensor") {
      r.fp8_granularity = quant::Fp8ScaleGranularity::per_tensor;
      read_axis(false);
    } else if (granularity == "per_channel") {
      r.fp8_granularity = quant::Fp8ScaleGranularity::per_channel;
      r.fp8_axis = read_axis(true);
    } else {
      bad("\"granularity\" = " + detail::quoted(granularity) + ": expected \"per_tensor\" or \"per_channel\" for FP8");
    }
    r.calibrator = string_field("calibrator", false).value_or("");
  } else if (dtype == "fp16" || dtype == "bf16") {
    allow_keys({"dtype", "cast_from", "shape"});
    r.encoding = StoredEncoding::cast;
    r.cast_type = dtype == "fp16" ? ScalarType::f16 : ScalarType::bf16;
    r.cast_from = string_field("cast_from", false).value_or("");
  } else {
    bad("\"dtype\" = " + detail::quoted(dtype) + ": expected int8, uint8, int4, uint4, fp8_e4m3, fp8_e5m2, fp16 or bf16");
  }
  return r;
}

// The record's JSON text, as stored in the metadata (compact, keys in a fixed order).
inline std::string to_metadata_value(const QuantizationRecord& r) {
  nlohmann::ordered_json j;
  j["dtype"] = r.dtype_name();
  if (r.encoding == StoredEncoding::integer) {
    j["scheme"] = quant::to_string(r.scheme.symmetry);
    j["granularity"] = quant::to_string(r.scheme.granularity);
    j["axis"] = r.scheme.granularity == quant::Granularity::per_tensor ? 0 : r.scheme.axis;
    j["group_size"] = r.scheme.granularity == quant::Granularity::per_group ? r.scheme.group_size : 0;
    j["restricted_range"] = r.scheme.restricted_range;
    j["reduce_range"] = r.scheme.reduce_range;
    j["calibrator"] = r.calibrator;
  } else if (r.encoding == StoredEncoding::fp8) {
    j["granularity"] = quant::to_string(r.fp8_granularity);
    j["axis"] = r.fp8_axis < 0 ? 0 : r.fp8_axis;
    j["calibrator"] = r.calibrator;
  } else {
    j["cast_from"] = r.cast_from;
  }
  j["shape"] = r.shape;
  return j.dump();
}

// Records for what a writer is about to store (the scheme is checked against the shape, the axis normalised).
inline QuantizationRecord integer_record(const std::string& name, const quant::QuantScheme& scheme, const Shape& shape,
                                         std::string calibrator = {}) {
  const char* fn = "shrink::io::integer_record";
  if (shape.product() <= 0) fail(fn, "shape", to_string(shape), "at least one element");
  quant::quant_range(scheme);
  quant::qparams_shape(scheme, shape, fn);  // checks axis and group size
  QuantizationRecord r;
  r.name = name;
  r.encoding = StoredEncoding::integer;
  r.scheme = scheme;
  if (scheme.granularity == quant::Granularity::per_tensor) {
    r.scheme.axis = 0;
    r.scheme.group_size = 0;
  } else {
    r.scheme.axis = normalize_axis(scheme.axis, shape.rank, fn, "scheme.axis");
    if (scheme.granularity == quant::Granularity::per_channel) r.scheme.group_size = 0;
  }
  r.calibrator = std::move(calibrator);
  r.shape = shape.to_vector();
  return r;
}

inline QuantizationRecord fp8_record(const std::string& name, Fp8Format format, quant::Fp8ScaleGranularity granularity,
                                     int axis, const Shape& shape, std::string calibrator = {}) {
  const char* fn = "shrink::io::fp8_record";
  if (shape.product() <= 0) fail(fn, "shape", to_string(shape), "at least one element");
  QuantizationRecord r;
  r.name = name;
  r.encoding = StoredEncoding::fp8;
  r.fp8_format = format;
  r.fp8_granularity = granularity;
  r.fp8_axis = granularity == quant::Fp8ScaleGranularity::per_tensor ? -1 : normalize_axis(axis, shape.rank, fn);
  r.calibrator = std::move(calibrator);
  r.shape = shape.to_vector();
  return r;
}

inline QuantizationRecord cast_record(const std::string& name, ScalarType to, const Shape& shape,
                                      std::string cast_from = "F32") {
  const char* fn = "shrink::io::cast_record";
  if (to != ScalarType::f16 && to != ScalarType::bf16) fail(fn, "to", to_string(to), "f16 or bf16");
  if (shape.product() <= 0) fail(fn, "shape", to_string(shape), "at least one element");
  QuantizationRecord r;
  r.name = name;
  r.encoding = StoredEncoding::cast;
  r.cast_type = to;
  r.cast_from = std::move(cast_from);
  r.shape = shape.to_vector();
  return r;
}

// The tensors a record is stored in: the data, then `_scale`, then `_zero_point`, as present.
inline std::vector<TensorDeclaration> stored_tensors(const QuantizationRecord& r) {
  const char* fn = "shrink::io::stored_tensors";
  std::vector<TensorDeclaration> out{{r.name, detail::stored_data_dtype(r), detail::stored_data_shape(r)}};
  if (r.has_scale()) out.push_back({scale_tensor_name(r.name), ScalarType::f32, detail::parameter_shape(r, fn)});
  if (r.has_zero_point())
    out.push_back({zero_point_tensor_name(r.name), detail::zero_point_dtype(r), detail::parameter_shape(r, fn)});
  return out;
}

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

// The stored form of a QuantizedTensor (moved in: its data becomes the first tensor's bytes).
inline EncodedQuantization encode_quantized(const std::string& name, quant::QuantizedTensor q,
                                            std::string calibrator = {}) {
  const char* fn = "shrink::io::encode_quantized";
  quant::validate_qparams(q.qparams, q.scheme, q.shape, fn);
  if (static_cast<std::int64_t>(q.data.size()) != quant::quantized_data_bytes(q.scheme.dtype, q.shape))
    fail(fn, "q.data.size()", q.data.size(),
         std::to_string(quant::quantized_data_bytes(q.scheme.dtype, q.shape)) + " bytes for shape " + to_string(q.shape));
  EncodedQuantization e;
  e.record = integer_record(name, q.scheme, q.shape, std::move(calibrator));
  const std::vector<TensorDeclaration> declarations = stored_tensors(e.record);
  e.tensors.push_back({declarations[0], std::move(q.data)});
  e.tensors.push_back({declarations[1], detail::bytes_of(q.qparams.scale)});
  if (e.record.has_zero_point()) {
    ByteBuffer zp(q.qparams.zero_point.size());
    for (std::size_t i = 0; i < zp.size(); ++i) zp[i] = static_cast<std::uint8_t>(q.qparams.zero_point[i]);  // I8 as two's complement
    e.tensors.push_back({declarations[2], std::move(zp)});
  }
  return e;
}

inline EncodedQuantization encode_fp8(const std::string& name, quant::Fp8Tensor q, std::string calibrator = {}) {
  const char* fn = "shrink::io::encode_fp8";
  if (static_cast<std::int64_t>(q.data.size()) != q.numel())
    fail(fn, "q.data.size()", q.data.size(), std::to_string(q.numel()) + " codes for shape " + to_string(q.shape));
  const auto granularity = q.axis < 0 ? quant::Fp8ScaleGranularity::per_tensor : quant::Fp8ScaleGranularity::per_channel;
  EncodedQuantization e;
  e.record = fp8_record(name, q.format, granularity, q.axis, q.shape, std::move(calibrator));
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

namespace detail {

inline std::string shape_text(const std::vector<std::int64_t>& shape) { return nlohmann::json(shape).dump(); }

// Checks that tensor `tensor_name` exists with this dtype and shape.
inline void require_stored(const SafetensorsFile& file, const std::string& record_name, const std::string& tensor_name,
                           ScalarType dtype, const std::vector<std::int64_t>& shape, const char* role,
                           const char* function) {
  const std::string where = file.path() + ": tensor " + quoted(record_name) + " (" + quant_metadata_key(record_name) + ")";
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
  const std::vector<TensorDeclaration> declarations = stored_tensors(r);
  static const char* const roles[] = {"data", "scale", "zero point"};
  for (std::size_t k = 0; k < declarations.size(); ++k)
    require_stored(file, name, declarations[k].name, declarations[k].dtype, declarations[k].shape, roles[k], function);
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

inline std::vector<float> checked_scales(const SafetensorsFile& file, const QuantizationRecord& r, const char* function) {
  std::vector<float> scales = copy_floats(file, scale_tensor_name(r.name));
  for (std::size_t i = 0; i < scales.size(); ++i)
    if (!(scales[i] > 0.0f) || !std::isfinite(scales[i]))
      fail(function, file.path() + ": tensor " + quoted(scale_tensor_name(r.name)) + "[" + std::to_string(i) +
                         "] = " + shrink::to_text(scales[i]) + ": expected a finite scale > 0");
  return scales;
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

// Scales finite and > 0, zero points inside [qmin, qmax]: the parameter values, read out of the file.
inline void check_parameter_values(const SafetensorsFile& file, const QuantizationRecord& r, const char* function) {
  if (!r.has_scale()) return;
  checked_scales(file, r, function);
  if (!r.has_zero_point()) return;
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
// scale and zero-point values. A metadata entry that names no tensor, or a tensor claimed by two records, is an
// error.
inline std::vector<QuantizationRecord> quantization_records(const SafetensorsFile& file) {
  const char* fn = "shrink::io::quantization_records";
  const std::string prefix = kQuantMetadataPrefix;
  std::map<std::string, QuantizationRecord> by_name;
  for (const auto& entry : file.metadata()) {
    if (entry.first.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string name = entry.first.substr(prefix.size());
    if (!file.contains(name))
      fail(fn, file.path() + ": __metadata__ " + detail::quoted(entry.first) + " names no tensor of the file: expected "
                                                                               "a tensor " + detail::quoted(name));
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

// Names of the `_scale` / `_zero_point` tensors the records use (not model tensors of their own).
inline std::set<std::string> parameter_tensor_names(const std::vector<QuantizationRecord>& records) {
  std::set<std::string> names;
  for (const QuantizationRecord& r : records) {
    const std::vector<TensorDeclaration> stored = stored_tensors(r);
    for (std::size_t k = 1; k < stored.size(); ++k) names.insert(stored[k].name);
  }
  return names;
}

// Reads an int8/uint8/int4/uint4 tensor stored under the convention, with every parameter checked.
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
  if (r.has_zero_point()) {
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
  quant::validate_qparams(q.qparams, q.scheme, q.shape, fn);
  return q;
}

// Reads an FP8 tensor stored under the convention (codes + scales).
inline quant::Fp8Tensor read_fp8(const SafetensorsFile& file, const std::string& name) {
  const char* fn = "shrink::io::read_fp8";
  const auto record = quantization_record(file, name);
  if (!record || record->encoding != StoredEncoding::fp8)
    fail(fn, file.path() + ": tensor " + detail::quoted(name) + (record ? " is stored as " + record->dtype_name() : std::string(" has no shrink.quant metadata")) +
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
// stored parameters (FP16/BF16 casts widened); plain tensors are converted (F64, I64 and I32 round to the
// nearest float; BOOL gives 0 or 1; FP8 without a record is decoded with scale 1).
inline std::vector<float> read_float(const SafetensorsFile& file, const std::string& name) {
  const char* fn = "shrink::io::read_float";
  if (const auto record = quantization_record(file, name)) {
    std::vector<float> out(static_cast<std::size_t>(record->numel()));
    const Shape shape(record->shape);
    if (record->encoding == StoredEncoding::integer) {
      quant::dequantize_into(read_quantized(file, name), TensorView<float>(out.data(), shape));
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
    case ScalarType::f16: return detail::convert_bytes<std::uint16_t>(bytes, [](std::uint16_t v) { return half::from_bits(v).to_float(); });
    case ScalarType::bf16:
      return detail::convert_bytes<std::uint16_t>(bytes, [](std::uint16_t v) { return bfloat16::from_bits(v).to_float(); });
    case ScalarType::f8_e4m3:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return fp8_decode(v, Fp8Format::e4m3); });
    case ScalarType::f8_e5m2:
      return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return fp8_decode(v, Fp8Format::e5m2); });
    case ScalarType::i8: return detail::convert_bytes<std::int8_t>(bytes, [](std::int8_t v) { return static_cast<float>(v); });
    case ScalarType::u8: return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return static_cast<float>(v); });
    case ScalarType::i16: return detail::convert_bytes<std::int16_t>(bytes, [](std::int16_t v) { return static_cast<float>(v); });
    case ScalarType::i32: return detail::convert_bytes<std::int32_t>(bytes, [](std::int32_t v) { return static_cast<float>(v); });
    case ScalarType::i64: return detail::convert_bytes<std::int64_t>(bytes, [](std::int64_t v) { return static_cast<float>(v); });
    case ScalarType::boolean: return detail::convert_bytes<std::uint8_t>(bytes, [](std::uint8_t v) { return v ? 1.0f : 0.0f; });
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

struct DequantizeFileSummary {
  std::vector<std::string> dequantized;  // tensors written as F32 from their stored parameters
  std::vector<std::string> copied;       // tensors copied byte for byte
};

// Writes `out_path`: every tensor under the convention as F32 (dequantized, or widened from FP16/BF16), its
// `_scale` / `_zero_point` tensors and metadata entries dropped (and "shrink.format_version"); every other
// tensor and metadata entry copied unchanged. Tensors are laid out widest element first (each stays aligned).
// Every record is validated in full (quantization_records) before the output is created; `progress(name,
// index, count)` is called before each tensor is written. The output appears only when complete.
inline DequantizeFileSummary dequantize_file(
    const std::string& in_path, const std::string& out_path,
    const std::function<void(const std::string&, std::size_t, std::size_t)>& progress = {}) {
  const SafetensorsFile file(in_path);
  const std::vector<QuantizationRecord> records = quantization_records(file);
  const std::set<std::string> parameters = parameter_tensor_names(records);
  std::map<std::string, const QuantizationRecord*> record_of;
  for (const QuantizationRecord& r : records) record_of[r.name] = &r;

  struct Output {
    std::string name;
    ScalarType dtype;
    std::vector<std::int64_t> shape;
  };
  std::vector<Output> outputs;
  for (const TensorInfo& t : file.tensors()) {
    if (parameters.count(t.name)) continue;
    const auto found = record_of.find(t.name);
    if (found != record_of.end())
      outputs.push_back({t.name, ScalarType::f32, found->second->shape});
    else
      outputs.push_back({t.name, t.dtype, t.shape});
  }
  std::stable_sort(outputs.begin(), outputs.end(),
                   [](const Output& a, const Output& b) { return element_bits(a.dtype) > element_bits(b.dtype); });

  SafetensorsWriter writer(out_path);
  for (const Output& o : outputs) writer.add_tensor(o.name, o.dtype, o.shape);
  for (const auto& entry : file.metadata())
    if (entry.first != kFormatVersionKey && entry.first.compare(0, std::strlen(kQuantMetadataPrefix), kQuantMetadataPrefix) != 0)
      writer.add_metadata(entry.first, entry.second);
  writer.write_header();
  DequantizeFileSummary summary;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    if (progress) progress(o.name, i, outputs.size());
    if (record_of.count(o.name)) {
      const std::vector<float> values = read_float(file, o.name);
      writer.write(o.name, values.data(), values.size() * sizeof(float));
      summary.dequantized.push_back(o.name);
    } else {
      writer.write(o.name, file.bytes(o.name));
      summary.copied.push_back(o.name);
    }
  }
  writer.finish();
  return summary;
}

}  // namespace shrink::io
