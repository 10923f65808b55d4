// Loads a llama-architecture GGUF (llama.cpp's layout) into LlamaWeights: the configuration from the metadata, each
// tensor dequantized to float32 (io/gguf.hpp) after checking its shape against that configuration.
//
// Names and shapes (row-major, [out, in] for linears): token_embd.weight [vocab, width], output.weight (optional,
// else tied to the embedding), output_norm.weight [width]; per block i, blk.i.attn_norm.weight and
// blk.i.ffn_norm.weight [width], attn_q [width, width], attn_k / attn_v [kv_heads * head_dim, width],
// attn_output [width, width], ffn_gate / ffn_up [ffn, width], ffn_down [width, ffn]. llama.cpp's converter stores
// the q/k rows permuted so that RoPE rotates adjacent pairs (x[2i], x[2i+1]), the order llama_forward.hpp uses.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/io/gguf.hpp"

namespace llm {

inline LlamaConfig read_llama_config(const shrink::io::GgufFile& file, const std::string& path) {
  const char* fn = "llm::read_llama_config";
  const std::string arch = file.get_string("general.architecture");
  if (arch != "llama") shrink::fail(fn, (path + ": general.architecture").c_str(), arch, "\"llama\"");
  auto count = [&](const char* key) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(file.get_uint(key), std::uint64_t{1} << 40));
  };
  LlamaConfig c;
  c.blocks = count("llama.block_count");
  c.width = count("llama.embedding_length");
  c.ffn = count("llama.feed_forward_length");
  c.heads = count("llama.attention.head_count");
  c.kv_heads = file.has("llama.attention.head_count_kv") ? count("llama.attention.head_count_kv") : c.heads;
  c.rope_base =
      file.has("llama.rope.freq_base") ? static_cast<float>(file.get_float("llama.rope.freq_base")) : 10000.0f;
  c.norm_eps = static_cast<float>(file.get_float("llama.attention.layer_norm_rms_epsilon"));
  if (file.has("llama.context_length")) c.context = count("llama.context_length");
  const shrink::io::GgufTensorInfo& embedding = file.tensor("token_embd.weight");
  c.vocab = embedding.shape.size() == 2 ? embedding.shape[0] : 0;
  if (file.has("llama.vocab_size") && count("llama.vocab_size") != c.vocab)
    shrink::fail(fn, (path + ": llama.vocab_size").c_str(), count("llama.vocab_size"),
                 "the rows of token_embd.weight (" + std::to_string(c.vocab) + ")");
  if (file.has("llama.rope.dimension_count") &&
      count("llama.rope.dimension_count") != c.width / std::max<std::int64_t>(c.heads, 1))
    shrink::fail(fn, (path + ": llama.rope.dimension_count").c_str(), count("llama.rope.dimension_count"),
                 "the head dimension (RoPE over whole heads)");
  check_config(c, path);
  return c;
}

namespace detail {

// A tensor of `shape`, dequantized, all values finite; an error names the tensor otherwise.
inline std::vector<float> load_tensor(const shrink::io::GgufFile& file, const std::string& path,
                                      const std::string& name, const std::vector<std::int64_t>& shape) {
  const char* fn = "llm::load_llama_gguf";
  const shrink::io::GgufTensorInfo* info = file.find_tensor(name);
  if (info == nullptr) shrink::fail(fn, (path + ": tensor").c_str(), name, "present in a llama GGUF");
  if (info->shape != shape)
    shrink::fail(fn, (path + ": " + name + ".shape").c_str(), shrink::to_string(shrink::Shape(info->shape)),
                 shrink::to_string(shrink::Shape(shape)) + ", as the model's metadata implies");
  std::vector<float> values = file.dequantize(*info);
  shrink::cpu::require_finite(values.data(), static_cast<std::int64_t>(values.size()), fn,
                              (path + ": " + name).c_str());
  return values;
}

inline FloatMatrix load_matrix(const shrink::io::GgufFile& file, const std::string& path, const std::string& name,
                               std::int64_t rows, std::int64_t cols) {
  FloatMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.values = load_tensor(file, path, name, {rows, cols});
  return m;
}

}  // namespace detail

// Every weight of the model as float32. Errors name the file, the tensor and what was expected.
inline LlamaWeights load_llama_gguf(const std::string& path) {
  const shrink::io::GgufFile file = shrink::io::GgufFile::open(path);
  LlamaWeights w;
  w.config = read_llama_config(file, path);
  const LlamaConfig& c = w.config;
  w.embedding = detail::load_matrix(file, path, "token_embd.weight", c.vocab, c.width);
  if (file.find_tensor("output.weight") != nullptr)
    w.head = detail::load_matrix(file, path, "output.weight", c.vocab, c.width);
  w.output_norm = detail::load_tensor(file, path, "output_norm.weight", {c.width});
  w.blocks.resize(static_cast<std::size_t>(c.blocks));
  for (std::int64_t b = 0; b < c.blocks; ++b) {
    BlockWeights& block = w.blocks[static_cast<std::size_t>(b)];
    const std::string prefix = "blk." + std::to_string(b) + ".";
    block.attn_norm = detail::load_tensor(file, path, prefix + "attn_norm.weight", {c.width});
    block.ffn_norm = detail::load_tensor(file, path, prefix + "ffn_norm.weight", {c.width});
    for (LinearSlot s : kLinearSlots) {
      const std::int64_t out = s == LinearSlot::k || s == LinearSlot::v       ? c.kv_width()
                               : s == LinearSlot::gate || s == LinearSlot::up ? c.ffn
                                                                              : c.width;
      const std::int64_t in = s == LinearSlot::down ? c.ffn : c.width;
      block.linear(s) = detail::load_matrix(file, path, prefix + gguf_stem(s) + ".weight", out, in);
    }
  }
  return w;
}

}  // namespace llm
