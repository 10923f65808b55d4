// A whole safetensors file dequantized: every tensor stored under the convention of io/quant_record.hpp written as
// float32, everything else copied, the output appearing only when complete.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/io/quant_read.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/io/safetensors.hpp"

namespace shrink::io {
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
    if (entry.first != kFormatVersionKey &&
        entry.first.compare(0, std::strlen(kQuantMetadataPrefix), kQuantMetadataPrefix) != 0)
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
