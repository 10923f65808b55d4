// The float32 form of a llama-architecture model (SmolLM2, Llama 2/3 style): its configuration and weights, as the
// LLM example compresses them. Linear weights are PyTorch's [out, in], row-major.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"

namespace llm {

struct LlamaConfig {
  std::int64_t blocks = 0;
  std::int64_t width = 0;     // model dimension (embedding length)
  std::int64_t ffn = 0;       // SwiGLU hidden width
  std::int64_t heads = 0;     // query heads
  std::int64_t kv_heads = 0;  // key/value heads (grouped-query attention: heads / kv_heads queries share one)
  std::int64_t vocab = 0;
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  std::int64_t context = 0;  // positions the model was trained on (llama.context_length); 0: not stated

  std::int64_t head_dim() const { return width / heads; }
  std::int64_t kv_width() const { return kv_heads * head_dim(); }
};

// Checks the relations the forward pass relies on; `source` names where the values came from.
inline void check_config(const LlamaConfig& c, const std::string& source) {
  const char* fn = "llm::check_config";
  auto positive = [&](std::int64_t v, const char* what) {
    if (v <= 0 || v > (std::int64_t{1} << 24))
      shrink::fail(fn, (source + ": " + what).c_str(), v, "a count in [1, 2^24]");
  };
  positive(c.blocks, "block_count");
  positive(c.width, "embedding_length");
  positive(c.ffn, "feed_forward_length");
  positive(c.heads, "attention.head_count");
  positive(c.kv_heads, "attention.head_count_kv");
  positive(c.vocab, "vocabulary size");
  if (c.context < 0 || c.context > (std::int64_t{1} << 24))
    shrink::fail(fn, (source + ": context_length").c_str(), c.context, "0 (not stated) or a count in [1, 2^24]");
  if (c.width % c.heads != 0)
    shrink::fail(fn, (source + ": attention.head_count").c_str(), c.heads,
                 "a divisor of embedding_length " + std::to_string(c.width));
  if (c.heads % c.kv_heads != 0)
    shrink::fail(fn, (source + ": attention.head_count_kv").c_str(), c.kv_heads,
                 "a divisor of head_count " + std::to_string(c.heads));
  if (c.head_dim() % 2 != 0)
    shrink::fail(fn, (source + ": head dimension").c_str(), c.head_dim(), "an even size (RoPE rotates pairs)");
  if (!(c.rope_base > 1.0f) || !(c.rope_base < 1e12f))
    shrink::fail(fn, (source + ": rope.freq_base").c_str(), c.rope_base, "a finite base > 1");
  if (!(c.norm_eps > 0.0f) || !(c.norm_eps < 1.0f))
    shrink::fail(fn, (source + ": attention.layer_norm_rms_epsilon").c_str(), c.norm_eps, "an epsilon in (0, 1)");
}

// A row-major float matrix [rows, cols].
struct FloatMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> values;

  FloatMatrix() = default;
  FloatMatrix(std::int64_t r, std::int64_t c) : rows(r), cols(c), values(static_cast<std::size_t>(r * c)) {}
  shrink::TensorView<const float> view() const { return {values.data(), shrink::Shape{rows, cols}}; }
  shrink::TensorView<float> view() { return {values.data(), shrink::Shape{rows, cols}}; }
  float* row(std::int64_t r) { return values.data() + r * cols; }
  const float* row(std::int64_t r) const { return values.data() + r * cols; }
};

// The seven linears of a block, in the order the forward pass runs them.
enum class LinearSlot : int { q, k, v, o, gate, up, down };
inline constexpr int kLinearsPerBlock = 7;
inline constexpr std::array<LinearSlot, kLinearsPerBlock> kLinearSlots = {
    LinearSlot::q, LinearSlot::k, LinearSlot::v, LinearSlot::o, LinearSlot::gate, LinearSlot::up, LinearSlot::down};

// GGUF's tensor name stem of a slot (blk.<i>.<stem>.weight).
inline const char* gguf_stem(LinearSlot s) {
  switch (s) {
    case LinearSlot::q: return "attn_q";
    case LinearSlot::k: return "attn_k";
    case LinearSlot::v: return "attn_v";
    case LinearSlot::o: return "attn_output";
    case LinearSlot::gate: return "ffn_gate";
    case LinearSlot::up: return "ffn_up";
    case LinearSlot::down: return "ffn_down";
  }
  return "?";
}

// The activations a linear reads: q, k and v read the same normed input, gate and up another.
enum class LinearInput : int { attention, attention_output, ffn, ffn_down };
inline constexpr int kLinearInputs = 4;
inline LinearInput input_of(LinearSlot s) {
  switch (s) {
    case LinearSlot::q:
    case LinearSlot::k:
    case LinearSlot::v: return LinearInput::attention;
    case LinearSlot::o: return LinearInput::attention_output;
    case LinearSlot::gate:
    case LinearSlot::up: return LinearInput::ffn;
    case LinearSlot::down: return LinearInput::ffn_down;
  }
  return LinearInput::attention;
}

struct BlockWeights {
  std::vector<float> attn_norm;  // [width]
  std::vector<float> ffn_norm;   // [width]
  std::array<FloatMatrix, kLinearsPerBlock> linears;

  FloatMatrix& linear(LinearSlot s) { return linears[static_cast<std::size_t>(s)]; }
  const FloatMatrix& linear(LinearSlot s) const { return linears[static_cast<std::size_t>(s)]; }
};

struct LlamaWeights {
  LlamaConfig config;
  FloatMatrix embedding;  // [vocab, width]; also the output head (tied embeddings) unless `head` is set
  FloatMatrix head;       // [vocab, width] or empty
  std::vector<float> output_norm;
  std::vector<BlockWeights> blocks;

  const FloatMatrix& output_head() const { return head.values.empty() ? embedding : head; }
};

}  // namespace llm
