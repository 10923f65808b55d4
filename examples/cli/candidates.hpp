// The tensors `shrink quantize` and `shrink prune` may work on: float, not already stored under shrink's convention,
// chosen by --include / --exclude, and not kept by default (tensor_roles.hpp) unless --force names them; with a note
// for each float tensor left alone, saying why.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "report.hpp"
#include "selection.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "tensor_roles.hpp"

namespace shrink::cli {

struct Candidates {
  std::vector<const io::TensorInfo*> tensors;  // in file order
  std::map<std::string, std::string> notes;    // tensor left alone -> why
  std::int64_t float_tensors = 0;              // float tensors not already quantized
  std::int64_t kept_by_default = 0;
};

inline std::vector<std::string> tensor_names(const std::vector<io::TensorInfo>& tensors) {
  std::vector<std::string> names;
  for (const io::TensorInfo& t : tensors) names.push_back(t.name);
  return names;
}

// `verb` ("quantize", "prune") completes the note "kept by default, --force to <verb>". The caller checks first that
// each --include and --force pattern matches a tensor of the whole input (require_each_pattern_matches), since a
// sharded checkpoint comes here one shard at a time.
inline Candidates find_candidates(const io::SafetensorsFile& file, const TensorSelection& selection,
                                  const std::string& verb) {
  std::set<std::string> quantized;  // the stored tensors of records under the convention: copied as they are
  for (const auto& r : io::quantization_records(file))
    for (const auto& d : io::stored_tensors(r)) quantized.insert(d.name);

  Candidates c;
  for (const io::TensorInfo& t : file.tensors()) {
    if (quantized.count(t.name)) {
      c.notes[t.name] = "already quantized";
      continue;
    }
    if (!is_floating(t.dtype)) continue;
    ++c.float_tensors;
    if (!selection.selected(t.name)) {
      c.notes[t.name] = "not selected";
      continue;
    }
    const std::string role = kept_by_default(t.name, t.shape.size());
    if (!role.empty() && !selection.forced(t.name)) {
      c.notes[t.name] = role + ": kept by default, --force to " + verb;
      ++c.kept_by_default;
      continue;
    }
    c.tensors.push_back(&t);
  }
  return c;
}

}  // namespace shrink::cli
