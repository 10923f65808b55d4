// `shrink inspect FILE [--json]`: every tensor's dtype, shape, bytes and sparsity, how it is quantized, totals; for a
// GGUF file (recognised by its magic), its metadata and tensor table (inspect_gguf.cpp).
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "inspect_gguf.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/checkpoint.hpp"
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
      if (r.scheme.float_zero_point) s += " float zero points";
      if (!r.calibrator.empty()) s += " (" + r.calibrator + ")";
      if (r.has_input_scale()) s += ", divided by " + r.input_scale;
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
    if (r.scheme.float_zero_point) q["zero_point"] = "float";
    q["calibrator"] = r.calibrator;
    if (r.has_input_scale()) q["input_scale"] = r.input_scale;
  } else if (r.encoding == io::StoredEncoding::fp8) {
    q["granularity"] = quant::to_string(r.fp8_granularity);
    q["axis"] = r.fp8_axis;
    q["calibrator"] = r.calibrator;
  } else {
    q["cast_from"] = r.cast_from;
  }
  q["shape"] = r.shape;
  q["stored_bytes"] = stored_bytes;  // data + scales + zero points + input scale
  return q;
}

// The command line of `shrink inspect`.
void declare_inspect_options(ArgParser& args) {
  args.positional("FILE",
                  "a .safetensors file, a checkpoint directory, a sharded checkpoint's index .json or a GGUF file")
      .flag("json", "print JSON on stdout instead of a table");
}

// The file's quantization records by tensor name, and which record each `_scale` / `_zero_point` / input-scale tensor
// serves.
struct RecordIndex {
  std::map<std::string, const io::QuantizationRecord*> record_of;
  std::map<std::string, std::string> parameter_of;  // `_scale` / `_zero_point` / input-scale tensor -> its record
};

// Indexes the records (which must outlive the index).
RecordIndex index_records(const std::vector<io::QuantizationRecord>& records) {
  RecordIndex index;
  for (const io::QuantizationRecord& r : records) {
    index.record_of[r.name] = &r;
    const auto stored = io::stored_tensors(r);
    for (std::size_t k = 1; k < stored.size(); ++k) index.parameter_of[stored[k].name] = r.name;
  }
  return index;
}

// What the listing found: a JSON entry and a table row per tensor, and the totals.
struct Listing {
  Json tensors = Json::array();
  std::int64_t total_bytes = 0, model_elements = 0, model_zeros = 0, model_tensors = 0;
  std::vector<std::vector<std::string>> rows;
};

// Adds one tensor to the listing: its dtype, shape, bytes and sparsity, and what it is to the convention; `shard`
// names the file of a sharded checkpoint holding it (empty otherwise).
void list_tensor(const io::SafetensorsFile& file, const std::string& shard, const io::TensorInfo& t,
                 const RecordIndex& index, Listing& listing) {
  listing.total_bytes += static_cast<std::int64_t>(t.bytes);
  Json entry;
  entry["name"] = t.name;
  if (!shard.empty()) entry["shard"] = shard;
  entry["dtype"] = dtype_text(t.dtype);
  entry["shape"] = t.shape;
  entry["bytes"] = t.bytes;
  std::vector<std::string> row{t.name, dtype_text(t.dtype), shape_text(t.shape), std::to_string(t.bytes)};
  if (!shard.empty()) row.insert(row.begin() + 1, shard);

  const auto parameter = index.parameter_of.find(t.name);
  const auto record = index.record_of.find(t.name);
  const std::vector<float> values = io::read_float(file, t.name);
  const std::int64_t elements = static_cast<std::int64_t>(values.size());
  const std::int64_t zeros = count_zeros(values);
  entry["elements"] = elements;
  entry["zeros"] = zeros;
  entry["sparsity"] = fraction(zeros, elements);
  row.push_back(number_text(fraction(zeros, elements), "%.4f"));
  if (parameter != index.parameter_of.end()) {
    entry["parameter_of"] = parameter->second;
    const std::string& owner = parameter->second;
    row.push_back((t.name == io::scale_tensor_name(owner)        ? "scales of "
                   : t.name == io::zero_point_tensor_name(owner) ? "zero points of "
                                                                 : "input scale of ") +
                  owner);
  } else {
    ++listing.model_tensors;
    listing.model_elements += elements;
    listing.model_zeros += zeros;
    if (record != index.record_of.end()) {
      std::int64_t stored = 0;
      for (const auto& d : io::stored_tensors(*record->second))
        stored += static_cast<std::int64_t>(file.info(d.name).bytes);
      entry["quantization"] = record_json(*record->second, stored);
      row.push_back(scheme_text(*record->second));
    } else {
      row.push_back("");
    }
  }
  listing.tensors.push_back(entry);
  listing.rows.push_back(row);
}

// Every tensor of the checkpoint, shard by shard (one open at a time), each in its file's order; the metadata of
// its files, and the count of quantized tensors.
struct Contents {
  Listing listing;
  std::map<std::string, std::string> metadata;  // of every file (shards of one checkpoint agree on shared keys)
  std::size_t tensors = 0, quantized_tensors = 0;
};

Contents list_tensors(const io::Checkpoint& checkpoint, const Progress& progress) {
  Contents c;
  for (const io::CheckpointShard& shard : checkpoint.shards) {
    const io::SafetensorsFile file = io::open_shard(shard);
    const std::vector<io::QuantizationRecord> records = io::quantization_records(file);
    const RecordIndex index = index_records(records);
    const auto& infos = file.tensors();
    for (std::size_t i = 0; i < infos.size(); ++i) {
      progress.step(infos[i].name, i, infos.size());
      list_tensor(file, checkpoint.sharded() ? shard.file : std::string(), infos[i], index, c.listing);
    }
    c.metadata.insert(file.metadata().begin(), file.metadata().end());
    c.tensors += infos.size();
    c.quantized_tensors += records.size();
  }
  return c;
}

// The listing as JSON on stdout (--json): the file, its metadata, every tensor and the totals; for a sharded
// checkpoint also the index and each shard.
void print_json_listing(const std::string& path, const io::Checkpoint& checkpoint, const Contents& contents) {
  const Listing& listing = contents.listing;
  const std::size_t quantized_tensors = contents.quantized_tensors;
  Json totals;
  totals["tensors"] = contents.tensors;
  totals["model_tensors"] = listing.model_tensors;
  totals["quantized_tensors"] = quantized_tensors;
  totals["bytes"] = listing.total_bytes;
  totals["elements"] = listing.model_elements;
  totals["zeros"] = listing.model_zeros;
  totals["sparsity"] = fraction(listing.model_zeros, listing.model_elements);

  Json out;
  out["file"] = path;
  const auto version = contents.metadata.find(io::kFormatVersionKey);
  out["format_version"] = version == contents.metadata.end() ? Json(nullptr) : Json(version->second);
  out["metadata"] = contents.metadata;
  if (checkpoint.sharded()) {
    out["index"] = {{"path", checkpoint.index_path}, {"metadata", Json::parse(checkpoint.index_metadata.dump())}};
    Json shards = Json::array();
    for (const io::CheckpointShard& s : checkpoint.shards) {
      std::uint64_t bytes = 0;
      for (const io::TensorInfo& t : s.tensors) bytes += t.bytes;
      shards.push_back({{"file", s.file}, {"tensors", s.tensors.size()}, {"bytes", bytes}});
    }
    out["shards"] = shards;
  }
  out["tensors"] = listing.tensors;
  out["totals"] = totals;
  print_json(out);
}

// Prints one table row, each column but the last padded to its width plus two spaces, trailing spaces trimmed.
void print_row(const std::vector<std::string>& row, const std::vector<std::size_t>& widths) {
  std::string line;
  for (std::size_t c = 0; c < row.size(); ++c) {
    std::string cell = row[c];
    if (c < widths.size()) cell.append(widths[c] - cell.size() + 2, ' ');
    line += cell;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::printf("%s\n", line.c_str());
}

// The listing as a table: a heading line, one row per tensor, and the totals line.
void print_table(const std::string& path, const io::Checkpoint& checkpoint, const Contents& contents) {
  const Listing& listing = contents.listing;
  const std::size_t quantized_tensors = contents.quantized_tensors;
  std::vector<std::size_t> widths{4, 5, 5, 5, 8};
  std::vector<std::string> header{"name", "dtype", "shape", "bytes", "sparsity", "stored as"};
  if (checkpoint.sharded()) {
    header.insert(header.begin() + 1, "shard");
    widths.insert(widths.begin() + 1, 5);
  }
  for (const auto& row : listing.rows)
    for (std::size_t c = 0; c < widths.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  const std::string shards =
      checkpoint.sharded() ? " in " + std::to_string(checkpoint.shards.size()) + " shards" : std::string();
  std::printf("%s: %zu tensors%s, %s of data\n", path.c_str(), contents.tensors, shards.c_str(),
              bytes_text(listing.total_bytes).c_str());
  print_row(header, widths);
  for (const auto& row : listing.rows) print_row(row, widths);
  std::printf("total: %lld model tensors (%zu quantized), %lld elements, %lld bytes, sparsity %.4f\n",
              static_cast<long long>(listing.model_tensors), quantized_tensors,
              static_cast<long long>(listing.model_elements), static_cast<long long>(listing.total_bytes),
              fraction(listing.model_zeros, listing.model_elements));
}

}  // namespace

int run_inspect_command(int argc, char** argv) {
  const std::string command = "shrink inspect";
  return run_command(command, [&] {
    ArgParser args(command,
                   "List every tensor of a safetensors file: dtype, shape, bytes, sparsity (the fraction of elements\n"
                   "that are exactly zero, after dequantizing tensors stored under shrink's convention) and how each\n"
                   "quantized tensor is stored; then the totals. For a GGUF file: its version, metadata (long arrays\n"
                   "summarised) and every tensor's ggml type, shape and bytes, with the totals.");
    declare_inspect_options(args);
    if (!args.parse(argc, argv)) return kExitOk;
    const bool json = args.flag_set("json");
    if (is_gguf_file(args.arg("FILE"))) {
      inspect_gguf(args.arg("FILE"), json);
      return kExitOk;
    }

    const io::Checkpoint checkpoint = io::open_checkpoint(args.arg("FILE"));
    const Progress progress(command);
    const Contents contents = list_tensors(checkpoint, progress);
    if (json)
      print_json_listing(args.arg("FILE"), checkpoint, contents);
    else
      print_table(args.arg("FILE"), checkpoint, contents);
    return kExitOk;
  });
}

}  // namespace shrink::cli
