// The record of a quantized tensor in a safetensors file: shrink's storage convention (integer data + `_scale` +
// `_zero_point` tensors, the scheme in `__metadata__`), its JSON metadata entry parsed with every field checked, and
// the records a writer stores. Needs nlohmann_json 3.10 or later.
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
//                                       Fractional zero points ("zero_point":"float", affine only, HQQ's): F32,
//                                       the parameter shape, finite (they may leave [qmin, qmax]); the value is
//                                       then (float(q) − z) · scale in float32 (core/affine.hpp).
//   fp8-e4m3, fp8-e5m2   `w`            F8_E4M3 / F8_E5M2, the logical shape, codes of w / scale
//                        `w_scale`      F32, [] per tensor or [C] per channel along `axis`
//   fp16, bf16           `w`            F16 / BF16, a plain cast (nothing else needed to read it)
// and one `__metadata__` entry per tensor, key "shrink.quant.<name>", whose value (metadata values are
// strings) is a compact JSON object:
//   integer: {"dtype":"int8|uint8|int4|uint4","scheme":"symmetric|affine",
//             "granularity":"per_tensor|per_channel|per_group","axis":0,"group_size":0,
//             "restricted_range":false,"reduce_range":false,"calibrator":"minmax","source_dtype":"BF16",
//             "shape":[out,in]}
//   fp8:     {"dtype":"fp8_e4m3|fp8_e5m2","granularity":"per_tensor|per_channel","axis":0,
//             "calibrator":"amax","source_dtype":"F32","shape":[...]}
//   cast:    {"dtype":"fp16|bf16","cast_from":"F32","shape":[...]}
// "dtype", "shape" and (integer) "scheme" and "granularity" are required; "axis" is required per channel and
// per group (negative counts from the end; writers store it normalised), "group_size" per group;
// "restricted_range" and "reduce_range" default to false, "bits" (a narrower range held in the dtype, 2..its width,
// QuantScheme::bits) to 0, "zero_point" ("float": fractional zero points, QuantScheme::float_zero_point; affine
// only; absent: integer ones, as in files of older writers) to integer, "calibrator" (free text saying how the range
// was chosen) and "cast_from" to "". "source_dtype" (integer and fp8; F32, F16, BF16 or F64) is the dtype the tensor
// had before quantization, absent in files of older writers. Unknown keys are errors. The file also carries
// "shrink.format_version":"1" whenever it holds any "shrink.quant." entry.
//
// The input scale (AWQ; optional, integer records of rank 2 only): "input_scale":"<tensor>" names a tensor of the
// same file, F32 [in] (in = the last logical dimension), every value finite and > 0. The stored tensor is then that of
// W·diag(s) (each input column c multiplied by s[c] before quantizing), and the record's value, what every reader
// gives, is the weight W itself:
//   w[r, c] = v[r, c] / s[c]          v = the dequantized value above; one float32 division, rounded to nearest
// (never a product with a reciprocal: one rounding, so any IEEE reader gets the same bits). The layer it belongs to
// computes x·Wᵀ, or equally v·(x / s) on its input x. Decided: F32 only, as `_scale`; the tensor belongs to the
// record as its `_scale` does (one of its stored tensors: never the record's own data, `_scale` or `_zero_point`,
// nor a tensor of another record); FP8 and cast records take none (no writer needs it). Absent in older files.
//
// Readers trust nothing: every metadata entry must be well-formed JSON of that form, name a tensor of the
// right dtype and shape, and have its `_scale` (and `_zero_point` exactly when affine) of the right dtype and
// shape; scales and input scales must be finite and > 0, integer zero points inside [qmin, qmax] and fractional ones
// finite. A violation raises
// shrink::Error naming the file, the tensor and what was expected. (Integer values themselves need no check: any value
// of the storage type dequantizes to a finite number.)
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/qparams.hpp"
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
  std::string source_dtype;                // integer, fp8: the dtype before quantization ("BF16"); "" when unrecorded
  std::string input_scale;                 // integer, rank 2: the F32 tensor [in] s, value = x / s[c]; "" when none
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
  // The dtype the tensor had before it was compressed ("F32", "BF16", ...); "" when the file does not say.
  std::string original_dtype() const { return encoding == StoredEncoding::cast ? cast_from : source_dtype; }
  bool has_scale() const { return encoding != StoredEncoding::cast; }
  bool has_zero_point() const {
    return encoding == StoredEncoding::integer && scheme.symmetry == quant::Symmetry::affine;
  }
  bool has_input_scale() const { return !input_scale.empty(); }
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
  if (r.encoding == StoredEncoding::fp8 && r.fp8_axis >= 0) return {r.shape[static_cast<std::size_t>(r.fp8_axis)]};
  return {};
}
inline ScalarType zero_point_dtype(const QuantizationRecord& r) {
  if (r.scheme.float_zero_point) return ScalarType::f32;
  return quant::is_signed(r.scheme.dtype) ? ScalarType::i8 : ScalarType::u8;
}

// Why record `r` cannot take tensor `tensor` as its input scale ("" when it can): see the top of this file.
inline std::string input_scale_problem(const QuantizationRecord& r, const std::string& tensor) {
  if (r.encoding != StoredEncoding::integer)
    return "an input scale on a " + r.dtype_name() + " record: expected one on an integer record only";
  if (r.shape.size() != 2)
    return "an input scale on a record of shape " + nlohmann::json(r.shape).dump() +
           ": expected a Linear weight [out, in] (rank 2)";
  if (tensor.empty()) return "an empty name: expected the name of an F32 tensor [" + std::to_string(r.shape[1]) + "]";
  if (tensor == r.name || tensor == scale_tensor_name(r.name) || tensor == zero_point_tensor_name(r.name))
    return "names the record's own tensor " + quoted(tensor) + ": expected a tensor of its own, F32 [" +
           std::to_string(r.shape[1]) + "]";
  return "";
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
      bad("an array longer than " + std::to_string(kMaxRank) +
          " entries: expected a shape of rank <= " + std::to_string(kMaxRank));
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
    if (!j[key].is_string())
      bad(std::string("\"") + key + "\" is " + detail::json_type(j[key]) + ": expected a string");
    const std::string value = j[key].get<std::string>();
    if (value.size() > 256)
      bad(std::string("\"") + key + "\" is " + std::to_string(value.size()) + " characters long: expected at most 256");
    return value;
  };
  auto bool_field = [&](const char* key) {
    if (!j.contains(key)) return false;
    if (!j[key].is_boolean())
      bad(std::string("\"") + key + "\" is " + detail::json_type(j[key]) + ": expected true or false");
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
  auto source_dtype_field = [&]() -> std::string {
    const std::string value = string_field("source_dtype", false).value_or("");
    if (!value.empty() && value != "F32" && value != "F16" && value != "BF16" && value != "F64")
      bad("\"source_dtype\" = " + detail::quoted(value) + ": expected \"F32\", \"F16\", \"BF16\" or \"F64\"");
    return value;
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
    if (!detail::checked_mul(elements, *size, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
                             elements))
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
    allow_keys({"dtype", "scheme", "granularity", "axis", "group_size", "restricted_range", "reduce_range", "bits",
                "zero_point", "calibrator", "source_dtype", "input_scale", "shape"});
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
      bad("\"granularity\" = " + detail::quoted(granularity) +
          ": expected \"per_tensor\", \"per_channel\" or \"per_group\"");
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
    r.scheme.bits = static_cast<int>(integer_field("bits", 0, quant::bit_width(r.scheme.dtype)).value_or(0));
    if (r.scheme.bits == 1)
      bad("\"bits\" = 1: expected 0 (the dtype's width) or 2.." + std::to_string(quant::bit_width(r.scheme.dtype)));
    if (r.scheme.bits == 2 && r.scheme.reduce_range) bad("\"bits\" = 2 with \"reduce_range\": expected one of them");
    if (const auto zero_point = string_field("zero_point", false)) {
      if (*zero_point != "float")
        bad("\"zero_point\" = " + detail::quoted(*zero_point) +
            ": expected \"float\" (fractional zero points) or no \"zero_point\" (integer ones)");
      if (r.scheme.symmetry != quant::Symmetry::affine)
        bad("\"zero_point\" = \"float\" with \"scheme\":\"symmetric\": expected fractional zero points with an "
            "affine scheme only");
      r.scheme.float_zero_point = true;
    }
    r.calibrator = string_field("calibrator", false).value_or("");
    r.source_dtype = source_dtype_field();
    if (const auto input_scale = string_field("input_scale", false)) {
      const std::string problem = detail::input_scale_problem(r, *input_scale);
      if (!problem.empty()) bad("\"input_scale\" = " + detail::quoted(*input_scale) + ": " + problem);
      r.input_scale = *input_scale;
    }
  } else if (dtype == "fp8_e4m3" || dtype == "fp8_e5m2") {
    allow_keys({"dtype", "granularity", "axis", "calibrator", "source_dtype", "shape"});
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
    r.source_dtype = source_dtype_field();
  } else if (dtype == "fp16" || dtype == "bf16") {
    allow_keys({"dtype", "cast_from", "shape"});
    r.encoding = StoredEncoding::cast;
    r.cast_type = dtype == "fp16" ? ScalarType::f16 : ScalarType::bf16;
    r.cast_from = string_field("cast_from", false).value_or("");
  } else {
    bad("\"dtype\" = " + detail::quoted(dtype) +
        ": expected int8, uint8, int4, uint4, fp8_e4m3, fp8_e5m2, fp16 or bf16");
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
    if (r.scheme.bits != 0) j["bits"] = r.scheme.bits;  // absent in files of older writers: the dtype's width
    if (r.scheme.float_zero_point) j["zero_point"] = "float";  // absent: integer zero points
    j["calibrator"] = r.calibrator;
    if (!r.source_dtype.empty()) j["source_dtype"] = r.source_dtype;
    if (r.has_input_scale()) j["input_scale"] = r.input_scale;
  } else if (r.encoding == StoredEncoding::fp8) {
    j["granularity"] = quant::to_string(r.fp8_granularity);
    j["axis"] = r.fp8_axis < 0 ? 0 : r.fp8_axis;
    j["calibrator"] = r.calibrator;
    if (!r.source_dtype.empty()) j["source_dtype"] = r.source_dtype;
  } else {
    j["cast_from"] = r.cast_from;
  }
  j["shape"] = r.shape;
  return j.dump();
}

// Records for what a writer is about to store (the scheme is checked against the shape, the axis normalised).
inline QuantizationRecord integer_record(const std::string& name, const quant::QuantScheme& scheme, const Shape& shape,
                                         std::string calibrator = {}, std::string source_dtype = {}) {
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
  r.source_dtype = std::move(source_dtype);
  r.shape = shape.to_vector();
  return r;
}

inline QuantizationRecord fp8_record(const std::string& name, Fp8Format format, quant::Fp8ScaleGranularity granularity,
                                     int axis, const Shape& shape, std::string calibrator = {},
                                     std::string source_dtype = {}) {
  const char* fn = "shrink::io::fp8_record";
  if (shape.product() <= 0) fail(fn, "shape", to_string(shape), "at least one element");
  QuantizationRecord r;
  r.name = name;
  r.encoding = StoredEncoding::fp8;
  r.fp8_format = format;
  r.fp8_granularity = granularity;
  r.fp8_axis = granularity == quant::Fp8ScaleGranularity::per_tensor ? -1 : normalize_axis(axis, shape.rank, fn);
  r.calibrator = std::move(calibrator);
  r.source_dtype = std::move(source_dtype);
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

// Gives an integer record of rank 2 the input scale `tensor` (F32 [in], declared by stored_tensors; see the top of this
// file): its stored values become those of W·diag(s).
inline void set_input_scale(QuantizationRecord& record, const std::string& tensor) {
  const std::string problem = detail::input_scale_problem(record, tensor);
  if (!problem.empty()) fail("shrink::io::set_input_scale", "tensor", detail::quoted(tensor), problem);
  record.input_scale = tensor;
}

// The tensors a record is stored in: the data, then `_scale`, then `_zero_point`, then the input scale, as present.
inline std::vector<TensorDeclaration> stored_tensors(const QuantizationRecord& r) {
  const char* fn = "shrink::io::stored_tensors";
  std::vector<TensorDeclaration> out{{r.name, detail::stored_data_dtype(r), detail::stored_data_shape(r)}};
  if (r.has_scale()) out.push_back({scale_tensor_name(r.name), ScalarType::f32, detail::parameter_shape(r, fn)});
  if (r.has_zero_point())
    out.push_back({zero_point_tensor_name(r.name), detail::zero_point_dtype(r), detail::parameter_shape(r, fn)});
  if (r.has_input_scale()) out.push_back({r.input_scale, ScalarType::f32, {r.shape.back()}});
  return out;
}

// w[r, c] = v[r, c] / s[c] in place, for dequantized values v [rows, in] row-major and the input scale s [in] (its
// values checked by the caller): one float division each, the convention's formula (see the top of this file).
inline void divide_by_input_scale(std::vector<float>& values, const std::vector<float>& input_scale) {
  const char* fn = "shrink::io::divide_by_input_scale";
  const std::size_t in = input_scale.size();
  if (in == 0 || values.size() % in != 0)
    fail(fn, "values.size()", values.size(), "a multiple of input_scale.size() = " + std::to_string(in) + " (>= 1)");
  for (std::size_t row = 0; row < values.size(); row += in)
    for (std::size_t c = 0; c < in; ++c) values[row + c] /= input_scale[c];
}

}  // namespace shrink::io
