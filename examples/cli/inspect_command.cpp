// `shrink inspect FILE [--json]`: every tensor's dtype, shape, bytes and sparsity, how it is quantized, totals.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/quantized_safetensors.hpp"

namespace shrink::cli {

namespace {

std::string scheme_text(const io::QuantizationRecord& r) {
  switch (r.encoding) {
    case io::StoredEncoding::integer: {
      std::string s = r.dtype_name() + " " + quant::to_string(r.scheme.symmetry) + " " +
                      quant::to_string(r.scheme.granularity);
      if (r.scheme.granularity != quant::Granularity::per_tensor) s += " axis " + std::to_string(r.scheme.axis);
      if (r.scheme.granularity == quant::Granularity::per_group) s += " group " + std::to_string(r.scheme.group_size);
      if (r.scheme.restricted_range) s += " restricted";
      if (r.scheme.reduce_range) s += " reduced";
      if (!r.calibrator.empty()) s += " (" + r.calibrator + ")";
      return s;
    }
    case io::StoredEncoding::fp8: {
      std::string s = r.dtype_name() + " " + quant::to_string(r.fp8_granularity);
      if (r.fp8_axis >= 0) s += " axis " + std::to_string(r.fp8_axis);
      return s;
    }
    case io::StoredEncoding::cast: return r.dtype_name() + (r.cast_from.empty() ? "" : " from " + r.cast_from);
  }
  return "";
}

Json record_json(const io::QuantizationRecord& r, std::int64_t stored_bytes) {
  Json q;
  q["dtype"] = r.dtype_name();
  if (r.encoding == io::StoredEncoding::integer) {
    q["scheme"] = quant::to_string(r.scheme.symmetry);
    q["granularity"] = quant::to_string(r.scheme.granularity);
    q["axis"] = r.scheme.axis;
    q["group_size"] = r.scheme.group_size;
    q["restricted_range"] = r.scheme.restricted_range;
    q["reduce_range"] = r.scheme.reduce_range;
    q["calibrator"] = r.calibrator;
  } else if (r.encoding == io::StoredEncoding::fp8) {
    q["granularity"] = quant::to_string(r.fp8_granularity);
    q["axis"] = r.fp8_axis;
    q["calibrator"] = r.calibrator;
  } else {
    q["cast_from"] = r.cast_from;
  }
  q["shape"] = r.shape;
  q["stored_bytes"] = stored_bytes;  // data + scales + zero points
  return q;
}

}  // namespace

int run_inspect_command(int argc, char** argv) {
  const std::string command = "shrink inspect";
  return run_command(command, [&] {
    ArgParser args(command,
                   "List every tensor of a safetensors file: dtype, shape, bytes, sparsity (the fraction of elements\n"
                   "that are exactly zero, after dequantizing tensors stored under shrink's convention) and how each\n"
                   "quantized tensor is stored; then the totals.");
    args.positional("FILE", "a .safetensors file").flag("json", "print JSON on stdout instead of a table");
    if (!args.parse(argc, argv)) return kExitOk;
    const bool json = args.flag_set("json");

    const io::SafetensorsFile file(args.arg("FILE"));
    const std::vector<io::QuantizationRecord> records = io::quantization_records(file);
    std::map<std::string, const io::QuantizationRecord*> record_of;
    std::map<std::string, std::string> parameter_of;  // `_scale` / `_zero_point` tensor -> its record
    for (const io::QuantizationRecord& r : records) {
      record_of[r.name] = &r;
      const auto stored = io::stored_tensors(r);
      for (std::size_t k = 1; k < stored.size(); ++k) parameter_of[stored[k].name] = r.name;
    }

    const Progress progress(command);
    Json tensors = Json::array();
    std::int64_t total_bytes = 0, model_elements = 0, model_zeros = 0, model_tensors = 0;
    std::vector<std::vector<std::string>> rows;
    const auto& infos = file.tensors();
    for (std::size_t i = 0; i < infos.size(); ++i) {
      const io::TensorInfo& t = infos[i];
      progress.step(t.name, i, infos.size());
      total_bytes += static_cast<std::int64_t>(t.bytes);
      Json entry;
      entry["name"] = t.name;
      entry["dtype"] = dtype_text(t.dtype);
      entry["shape"] = t.shape;
      entry["bytes"] = t.bytes;
      std::vector<std::string> row{t.name, dtype_text(t.dtype), shape_text(t.shape), std::to_string(t.bytes)};

      const auto parameter = parameter_of.find(t.name);
      const auto record = record_of.find(t.name);
      const std::vector<float> values = io::read_float(file, t.name);
      const std::int64_t elements = static_cast<std::int64_t>(values.size());
      const std::int64_t zeros = count_zeros(values);
      entry["elements"] = elements;
      entry["zeros"] = zeros;
      entry["sparsity"] = fraction(zeros, elements);
      row.push_back(number_text(fraction(zeros, elements), "%.4f"));
      if (parameter != parameter_of.end()) {
        entry["parameter_of"] = parameter->second;
        row.push_back((t.name == io::scale_tensor_name(parameter->second) ? "scales of " : "zero points of ") +
                      parameter->second);
      } else {
        ++model_tensors;
        model_elements += elements;
        model_zeros += zeros;
        if (record != record_of.end()) {
          std::int64_t stored = 0;
          for (const auto& d : io::stored_tensors(*record->second))
            stored += static_cast<std::int64_t>(file.info(d.name).bytes);
          entry["quantization"] = record_json(*record->second, stored);
          row.push_back(scheme_text(*record->second));
        } else {
          row.push_back("");
        }
      }
      tensors.push_back(entry);
      rows.push_back(row);
    }

    Json totals;
    totals["tensors"] = infos.size();
    totals["model_tensors"] = model_tensors;
    totals["quantized_tensors"] = records.size();
    totals["bytes"] = total_bytes;
    totals["elements"] = model_elements;
    totals["zeros"] = model_zeros;
    totals["sparsity"] = fraction(model_zeros, model_elements);

    if (json) {
      Json out;
      out["file"] = file.path();
      const auto version = file.metadata().find(io::kFormatVersionKey);
      out["format_version"] = version == file.metadata().end() ? Json(nullptr) : Json(version->second);
      out["metadata"] = file.metadata();
      out["tensors"] = tensors;
      out["totals"] = totals;
      print_json(out);
      return kExitOk;
    }
    std::vector<std::size_t> widths{4, 5, 5, 5, 8};
    const std::vector<std::string> header{"name", "dtype", "shape", "bytes", "sparsity", "stored as"};
    for (const auto& row : rows)
      for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
    auto print_row = [&](const std::vector<std::string>& row) {
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        std::string cell = row[c];
        if (c < widths.size()) cell.append(widths[c] - cell.size() + 2, ' ');
        line += cell;
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      std::printf("%s\n", line.c_str());
    };
    std::printf("%s: %zu tensors, %s of data\n", file.path().c_str(), infos.size(), bytes_text(total_bytes).c_str());
    print_row(header);
    for (const auto& row : rows) print_row(row);
    std::printf("total: %lld model tensors (%zu quantized), %lld elements, %lld bytes, sparsity %.4f\n",
                static_cast<long long>(model_tensors), records.size(), static_cast<long long>(model_elements),
                static_cast<long long>(total_bytes), fraction(model_zeros, model_elements));
    return kExitOk;
  });
}

}  // namespace shrink::cli
