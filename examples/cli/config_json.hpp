// The config.json that `shrink quantize --format compressed-tensors` writes beside OUT: the one beside IN (when there
// is one) with its "quantization_config" set, written under a temporary name and renamed once the weights are complete.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.hpp"
#include "shrink/core/error.hpp"
#include "shrink/io/compressed_tensors.hpp"
#include "tensor_roles.hpp"

namespace shrink::cli {

inline std::filesystem::path config_beside(const std::string& file) {
  return std::filesystem::absolute(std::filesystem::path(file)).parent_path() / "config.json";
}

// A model's config.json as a JSON object, or a new object when there is none at `source`.
inline nlohmann::ordered_json read_config_file(const std::filesystem::path& source) {
  if (!std::filesystem::exists(source)) return nlohmann::ordered_json::object();
  std::ifstream stream(source, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>()};
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, false);
  if (config.is_discarded() || !config.is_object())
    throw shrink::Error(source.string() + ": not a JSON object: expected the model's config.json");
  return config;
}

// The config.json to write for a file OUT: IN's (read and checked now, before any output exists) or a new object.
inline nlohmann::ordered_json read_model_config(const std::string& in, const std::string& out) {
  const std::filesystem::path source = config_beside(in);
  const std::filesystem::path target = config_beside(out);
  if (std::filesystem::exists(source) && std::filesystem::equivalent(source.parent_path(), target.parent_path()))
    throw UsageError("--format compressed-tensors writes config.json beside OUT, which would replace " +
                     source.string() + " of the input: expected OUT in another directory");
  return read_config_file(source);
}

// The Linear layers compressed-tensors must leave alone: every 2-D float `X.weight` not quantized, except embeddings
// (nn.Embedding, not Linear).
inline std::vector<std::string> ignored_linear_layers(const std::vector<const io::TensorInfo*>& unquantized) {
  std::vector<std::string> names;
  const std::string suffix = ".weight";
  for (const io::TensorInfo* t : unquantized) {
    const bool is_float = t->dtype == ScalarType::f32 || t->dtype == ScalarType::f16 || t->dtype == ScalarType::bf16 ||
                          t->dtype == ScalarType::f64;
    if (!is_float || t->shape.size() != 2 || t->name.size() <= suffix.size() ||
        t->name.compare(t->name.size() - suffix.size(), suffix.size(), suffix) != 0 ||
        kept_by_default(t->name, 2) == "an embedding")
      continue;
    names.push_back(t->name.substr(0, t->name.size() - suffix.size()));
  }
  return names;
}

// Writes config.json beside OUT: under a temporary name, then renamed over any file of that name.
inline void write_model_config(const std::string& out, const nlohmann::ordered_json& config) {
  const std::filesystem::path target = config_beside(out);
  const std::filesystem::path temporary =
      target.parent_path() / (".config.json.tmp-" + std::to_string(static_cast<long>(::getpid())));
  {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    stream << config.dump(2) << '\n';
    if (!stream.flush()) {
      std::error_code ignored;
      std::filesystem::remove(temporary, ignored);
      throw shrink::Error("cannot write " + temporary.string());
    }
  }
  std::filesystem::rename(temporary, target);
}

}  // namespace shrink::cli
