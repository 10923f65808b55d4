// Sequential (layer-by-layer) calibration, as GPTQ and SparseGPT run it ("true sequential"): the calibration windows'
// hidden states go through the model block after block, and inside a block its four linear inputs come in the
// order the forward pass reads them:
//   attention (q, k, v)  ->  attention_output (o)  ->  ffn (gate, up)  ->  ffn_down (down)
// Each input's Hessian (quant/hessian.hpp) and mean |x| are gathered over every calibration token from the block as it
// stands, its earlier linears already compressed, the Hessian's linears are compressed from the float weights, and the
// next input follows. The block's output, all of it compressed, is the next block's input. One Hessian lives at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "compressed_linear.hpp"
#include "llama_forward.hpp"
#include "llama_model.hpp"
#include "perplexity.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/hessian.hpp"

namespace llm {

inline constexpr std::array<LinearInput, kLinearInputs> kLinearInputOrder = {
    LinearInput::attention, LinearInput::attention_output, LinearInput::ffn, LinearInput::ffn_down};

// The linears reading one input.
inline std::vector<LinearSlot> slots_reading(LinearInput input) {
  std::vector<LinearSlot> out;
  for (LinearSlot s : kLinearSlots)
    if (input_of(s) == input) out.push_back(s);
  return out;
}

struct SequentialTiming {
  double forward_seconds = 0.0;  // the calibration windows' passes through the blocks (gathering Hessians)
  double method_seconds = 0.0;   // the method itself, Hessians given
  std::int64_t tokens = 0;       // calibration tokens
};

// What a method is given for one linear input of one block, over every calibration token.
struct StageStats {
  shrink::quant::Hessian hessian;  // H = (2 / n) Σ xᵀx
  std::vector<float> mean_abs;     // mean |x_j| (AWQ's s_x)
};

// A symmetric relative perturbation of every Hessian, H_ij ← H_ij·(1 + eps·u_ij) with u_ij uniform in [−1, 1] from
// `seed` (shrink_llm --hessian-jitter): how far a row moves when its statistics move by float rounding's order.
struct HessianJitter {
  double eps = 0.0;  // 0: none
  std::uint64_t seed = 1;
};

inline void jitter_hessian(shrink::quant::Hessian& h, const HessianJitter& jitter) {
  std::uint64_t state = jitter.seed;
  auto next_u = [&state] {  // splitmix64, then 53 bits to [−1, 1)
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  };
  const std::int64_t n = h.features;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j <= i; ++j) {
      const double v = h.values[static_cast<std::size_t>(i * n + j)] * (1.0 + jitter.eps * next_u());
      h.values[static_cast<std::size_t>(i * n + j)] = h.values[static_cast<std::size_t>(j * n + i)] = v;
    }
}

namespace detail {

// Gathers one linear input's statistics in one block.
class StageTap final : public ActivationTap {
 public:
  explicit StageTap(LinearInput input) : input_(input) {}
  void observe(std::int64_t, LinearInput input, shrink::TensorView<const float> x) override {
    if (input != input_) return;
    hessian.observe(x);
    mean_abs.observe(x);
  }
  shrink::quant::HessianObserver hessian;
  shrink::quant::ActivationMeanAbsObserver mean_abs;

 private:
  LinearInput input_;
};

}  // namespace detail

// The model with every block linear compressed by `method(block, input, StageStats, float block weights,
// compressed block)`, which sets the compressed block's linears reading `input` (and may change the block's norms
// and the linears not compressed yet). Calibration windows: `ids` by `span`; each Hessian perturbed by `jitter`.
template <class Method>
CompressedModel compress_sequential(const LlamaWeights& w, SharedHead head, const std::vector<std::int32_t>& ids,
                                    const WindowSpan& span, Method&& method, SequentialTiming* timing = nullptr,
                                    const HessianJitter& jitter = {}) {
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  require_span(ids, span, "calibration text");
  const LlamaConfig& c = w.config;
  CompressedModel m;
  m.config = c;
  m.embedding = &w.embedding;
  m.head = std::move(head);
  m.output_norm = w.output_norm;
  m.blocks.resize(w.blocks.size());

  SequentialTiming t;
  t.tokens = span.tokens();
  std::vector<FloatMatrix> hidden;
  for (std::int64_t i = 0; i < span.count; ++i) hidden.push_back(embed(m, ids.data() + i * span.window, span.window));
  const detail::RopeTable rope(span.window, c.head_dim(), c.rope_base);
  BlockBuffers buf(span.window, c);
  FloatMatrix x(span.window, c.width);

  for (std::size_t b = 0; b < w.blocks.size(); ++b) {
    const auto block = static_cast<std::int64_t>(b);
    const BlockWeights& source = w.blocks[b];
    CompressedBlock& out = m.blocks[b];
    out.attn_norm = source.attn_norm;
    out.ffn_norm = source.ffn_norm;
    for (LinearSlot s : kLinearSlots)
      out.linear(s) = CompressedLinear(shrink::cpu::pack_weight(source.linear(s).view()));
    for (LinearInput input : kLinearInputOrder) {
      auto start = clock::now();
      detail::StageTap tap(input);
      for (const FloatMatrix& h : hidden) {
        x.values = h.values;
        forward_block(out, block, c, rope, x, buf, &tap, &input);
      }
      StageStats stats{tap.hessian.hessian(), tap.mean_abs.mean_abs()};
      if (jitter.eps != 0.0) jitter_hessian(stats.hessian, jitter);
      t.forward_seconds += seconds_since(start);
      start = clock::now();
      method(block, input, stats, source, out);
      t.method_seconds += seconds_since(start);
    }
    const auto start = clock::now();
    for (FloatMatrix& h : hidden) forward_block(out, block, c, rope, h, buf);
    t.forward_seconds += seconds_since(start);
  }
  if (timing) *timing = t;
  return m;
}

}  // namespace llm
