// `shrink inspect` on a GGUF file: version, metadata and the tensor table with totals (see inspect_gguf.hpp).
#include "inspect_gguf.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "report.hpp"
#include "shrink/io/gguf.hpp"

namespace shrink::cli {

namespace {

// A scalar's value as JSON (numbers, bools and strings as themselves); an array as its summary, "[string x 49152]".
Json value_json(const io::GgufFile& file, const io::GgufMetadataEntry& e) {
  using io::GgufValueType;
  const auto type = static_cast<GgufValueType>(e.type);
  if (e.is_array()) return file.value_text(e);
  if (type == GgufValueType::string) return file.get_string(e.key);
  if (type == GgufValueType::boolean) return file.get_bool(e.key);
  if (type == GgufValueType::float32 || type == GgufValueType::float64) return file.get_float(e.key);
  if (type == GgufValueType::int8 || type == GgufValueType::int16 || type == GgufValueType::int32 ||
      type == GgufValueType::int64)
    return file.get_int(e.key);
  return file.get_uint(e.key);
}

void print_json_listing(const std::string& path, const io::GgufFile& file) {
  Json metadata = Json::array();
  for (const io::GgufMetadataEntry& e : file.metadata()) {
    Json entry;
    entry["key"] = e.key;
    entry["type"] = e.type_name();
    if (e.is_array()) entry["count"] = e.count;
    entry["value"] = value_json(file, e);
    metadata.push_back(entry);
  }
  Json tensors = Json::array();
  std::int64_t elements = 0, bytes = 0;
  for (const io::GgufTensorInfo& t : file.tensors()) {
    elements += t.elements();
    bytes += static_cast<std::int64_t>(t.bytes);
    tensors.push_back({{"name", t.name},
                       {"type", io::gguf_type_name(t.type)},
                       {"type_id", t.type},
                       {"shape", t.shape},
                       {"elements", t.elements()},
                       {"bytes", t.bytes},
                       {"offset", t.offset},
                       {"dequantizable", io::gguf_type_supported(t.type)}});
  }
  Json out;
  out["file"] = path;
  out["format"] = "gguf";
  out["version"] = file.version();
  out["alignment"] = file.alignment();
  out["metadata"] = metadata;
  out["tensors"] = tensors;
  out["totals"] = {{"tensors", file.tensors().size()}, {"elements", elements}, {"bytes", bytes}};
  print_json(out);
}

// Prints rows with each column but the last padded to its width plus two spaces, trailing spaces trimmed.
void print_rows(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  for (const auto& row : rows) {
    std::string line = indent;
    for (std::size_t c = 0; c < row.size(); ++c)
      line += c + 1 < row.size() ? row[c] + std::string(widths[c] - row[c].size() + 2, ' ') : row[c];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

void print_table(const std::string& path, const io::GgufFile& file) {
  std::int64_t elements = 0, bytes = 0;
  for (const io::GgufTensorInfo& t : file.tensors()) {
    elements += t.elements();
    bytes += static_cast<std::int64_t>(t.bytes);
  }
  std::printf("%s: GGUF version %u, %zu metadata keys, %zu tensors, %s of data\n", path.c_str(), file.version(),
              file.metadata().size(), file.tensors().size(), bytes_text(bytes).c_str());
  std::printf("metadata:\n");
  std::vector<std::vector<std::string>> keys;
  for (const io::GgufMetadataEntry& e : file.metadata()) keys.push_back({e.key, e.type_name(), file.value_text(e)});
  print_rows(keys, "  ");
  std::vector<std::vector<std::string>> rows{{"name", "type", "shape", "bytes"}};
  for (const io::GgufTensorInfo& t : file.tensors())
    rows.push_back({t.name, io::gguf_type_name(t.type), shape_text(t.shape), std::to_string(t.bytes)});
  print_rows(rows, "");
  std::printf("total: %zu tensors, %lld elements, %lld bytes\n", file.tensors().size(),
              static_cast<long long>(elements), static_cast<long long>(bytes));
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::equal(magic, magic + 4, "GGUF");
}

void inspect_gguf(const std::string& path, bool json) {
  const io::GgufFile file = io::GgufFile::open(path);
  if (json)
    print_json_listing(path, file);
  else
    print_table(path, file);
}

}  // namespace shrink::cli
