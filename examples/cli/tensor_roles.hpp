// Which tensors `shrink quantize` and `shrink prune` leave alone unless told otherwise (--force): the ones a
// practitioner keeps in full precision because compressing them costs much accuracy for few bytes, or grows them.
//
// By name, over the dot-separated parts of Hugging Face / PyTorch names (case-insensitive):
//   embedding    a part containing "embed" (embed_tokens, word_embeddings, embed_positions), or wte / wpe / shared;
//   output head  a part "lm_head" or "embed_out", or the whole name "output.weight" (llama.cpp's head);
//   norm         a part containing "norm" (input_layernorm, LayerNorm, final_norm), or ln_f / ln_1 / ln_2 (GPT-2);
//   bias         the last part "bias" or ending in "_bias";
// and by shape: any tensor of rank < 2 (scalars, vectors: per-channel parameters would outnumber its values).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <regex>
#include <string>
#include <vector>

namespace shrink::cli {

// Splits "model.layers.0.q_proj.weight" into its lower-cased dot-separated parts.
inline std::vector<std::string> name_parts(const std::string& name) {
  std::vector<std::string> parts(1);
  for (const char c : name) {
    if (c == '.')
      parts.emplace_back();
    else
      parts.back().push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return parts;
}

// Why the defaults keep tensor `name` of rank `rank` as it is ("an embedding", ...), or "" when they do not.
inline std::string kept_by_default(const std::string& name, std::size_t rank) {
  const std::vector<std::string> parts = name_parts(name);
  auto any_part = [&](auto&& test) { return std::any_of(parts.begin(), parts.end(), test); };
  auto contains = [](const std::string& part, const char* text) { return part.find(text) != std::string::npos; };
  static const std::regex gpt2_norm("ln_?(f|[0-9]+)");
  if (any_part([](const std::string& p) { return p == "lm_head" || p == "embed_out"; }) || name == "output.weight")
    return "the output head";
  if (any_part([&](const std::string& p) { return contains(p, "embed") || p == "wte" || p == "wpe" || p == "shared"; }))
    return "an embedding";
  if (any_part([&](const std::string& p) { return contains(p, "norm") || std::regex_match(p, gpt2_norm); }))
    return "a norm";
  const std::string& last = parts.back();
  if (last == "bias" || (last.size() > 5 && last.compare(last.size() - 5, 5, "_bias") == 0)) return "a bias";
  if (rank < 2) return "rank " + std::to_string(rank);
  return "";
}

}  // namespace shrink::cli
