// A whole safetensors file dequantized: every tensor stored under the convention of io/quant_record.hpp written back
// (as read_float gives it: with an input scale, the weight W) in the dtype it had before compression (or one dtype for
// all), everything else copied, the output appearing only when complete.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/dtype.hpp"
#include "shrink/core/half.hpp"
#include "shrink/io/quant_read.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/io/safetensors.hpp"

namespace shrink::io {

// The dtype dequantized tensors are written in.
enum class DequantizeTo : std::uint8_t {
  source,  // the dtype the tensor had before compression, as its record says; F32 when it says nothing
  f32,
  f16,
  bf16,
};

struct DequantizeFileSummary {
  std::vector<std::string> dequantized;        // tensors written from their stored parameters
  std::vector<ScalarType> dequantized_dtypes;  // the dtype each of them was written in
  std::map<std::string, std::string> notes;    // why a tensor was not written in its source dtype
  std::vector<std::string> copied;             // tensors copied byte for byte
};

// float32 values as the bytes of `type` (F16/BF16 round to nearest even; F64 widens exactly).
inline ByteBuffer float_values_as(const std::vector<float>& values, ScalarType type) {
  ByteBuffer out(values.size() * static_cast<std::size_t>(element_bits(type) / 8));
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (type == ScalarType::f32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else if (type == ScalarType::f64) {
      const double v = values[i];
      std::memcpy(out.data() + 8 * i, &v, 8);
    } else {
      const std::uint16_t bits = type == ScalarType::f16 ? half(values[i]).to_bits() : bfloat16(values[i]).to_bits();
      std::memcpy(out.data() + 2 * i, &bits, 2);
    }
  }
  return out;
}

namespace detail {

// The dtype a record's tensor is written in, and a note when `source` cannot be honoured.
inline ScalarType dequantized_dtype(const QuantizationRecord& r, DequantizeTo to, std::string& note) {
  switch (to) {
    case DequantizeTo::f32: return ScalarType::f32;
    case DequantizeTo::f16: return ScalarType::f16;
    case DequantizeTo::bf16: return ScalarType::bf16;
    case DequantizeTo::source: break;
  }
  const std::string source = r.original_dtype();
  const auto type = safetensors_dtype_from_name(source);
  if (type &&
      (*type == ScalarType::f32 || *type == ScalarType::f16 || *type == ScalarType::bf16 || *type == ScalarType::f64))
    return *type;
  note = source.empty() ? "no source dtype recorded (an older file): written as F32"
                        : "source dtype " + quoted(source) + " is not a float dtype: written as F32";
  return ScalarType::f32;
}

}  // namespace detail

// Writes `out_path`: every tensor under the convention dequantized (or widened from FP16/BF16; divided by its input
// scale when it has one) and written in the dtype `to` says: by default the dtype it had before compression (F32 for
// files that do not record it); its `_scale` / `_zero_point` / input-scale tensors and metadata entries dropped (and
// "shrink.format_version"); every other tensor and metadata entry copied unchanged. Tensors are laid out widest
// element first (each stays aligned). Every record is validated in full (quantization_records) before the output is
// created; `progress(name, index, count)` is called before each tensor is written. The output appears only when
// complete.
inline DequantizeFileSummary dequantize_file(
    const std::string& in_path, const std::string& out_path,
    const std::function<void(const std::string&, std::size_t, std::size_t)>& progress = {},
    DequantizeTo to = DequantizeTo::source) {
  const SafetensorsFile file(in_path);
  const std::vector<QuantizationRecord> records = quantization_records(file);
  const std::set<std::string> parameters = parameter_tensor_names(records);
  std::map<std::string, const QuantizationRecord*> record_of;
  for (const QuantizationRecord& r : records) record_of[r.name] = &r;

  DequantizeFileSummary summary;
  struct Output {
    std::string name;
    ScalarType dtype;
    std::vector<std::int64_t> shape;
  };
  std::vector<Output> outputs;
  for (const TensorInfo& t : file.tensors()) {
    if (parameters.count(t.name)) continue;
    const auto found = record_of.find(t.name);
    if (found != record_of.end()) {
      std::string note;
      outputs.push_back({t.name, detail::dequantized_dtype(*found->second, to, note), found->second->shape});
      if (!note.empty()) summary.notes[t.name] = note;
    } else {
      outputs.push_back({t.name, t.dtype, t.shape});
    }
  }
  std::stable_sort(outputs.begin(), outputs.end(),
                   [](const Output& a, const Output& b) { return element_bits(a.dtype) > element_bits(b.dtype); });

  SafetensorsWriter writer(out_path);
  for (const Output& o : outputs) writer.add_tensor(o.name, o.dtype, o.shape);
  for (const auto& entry : file.metadata())
    if (entry.first != kFormatVersionKey &&
        entry.first.compare(0, std::strlen(kQuantMetadataPrefix), kQuantMetadataPrefix) != 0)
      writer.add_metadata(entry.first, entry.second);
  writer.write_header();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Output& o = outputs[i];
    if (progress) progress(o.name, i, outputs.size());
    if (record_of.count(o.name)) {
      const ByteBuffer bytes = float_values_as(read_float(file, o.name), o.dtype);
      writer.write(o.name, bytes.data(), bytes.size());
      summary.dequantized.push_back(o.name);
      summary.dequantized_dtypes.push_back(o.dtype);
    } else {
      writer.write(o.name, file.bytes(o.name));
      summary.copied.push_back(o.name);
    }
  }
  writer.finish();
  return summary;
}

}  // namespace shrink::io
