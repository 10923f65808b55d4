// `shrink_llm --write-calibration-stats FILE`: the statistics `shrink quantize IN.gguf OUT.gguf --format gguf
// --method gptq|awq --calibration FILE` reads (io/calibration_stats.hpp), from the float model's forward pass over the
// calibration windows: per block and linear input, the Hessian H = (2 / n) Σ xᵀx and the mean |x| over every
// calibration token, named as the GGUF's linears:
//   blk.N.attn_q       the attention input (attn_k and attn_v: same_input_as attn_q)
//   blk.N.attn_output  the attention's output
//   blk.N.ffn_gate     the MLP input (ffn_up: same_input_as ffn_gate)
//   blk.N.ffn_down     silu(gate) ⊙ up
// Every input of every block is gathered in one pass (SmolLM2-135M: 30 blocks, about 0.8 GB of double Hessians), as
// the float model computes them: nothing is compressed on the way (the LLM table's GPTQ rows calibrate sequentially
// instead, sequential.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "llama_forward.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/hessian.hpp"

namespace llm {

// Per block and linear input: the Hessian and mean |x| observers.
class InputStatisticsTap final : public ActivationTap {
 public:
  explicit InputStatisticsTap(std::int64_t blocks) : inputs_(static_cast<std::size_t>(blocks)) {}

  void observe(std::int64_t block, LinearInput input, shrink::TensorView<const float> x) override {
    Observed& o = inputs_.at(static_cast<std::size_t>(block))[static_cast<std::size_t>(input)];
    o.hessian.observe(x);
    o.mean_abs.observe(x);
  }

  // The statistics named as the file comment says, and the aliases of the linears sharing an input.
  void save(const std::string& path) const {
    std::map<std::string, shrink::io::LinearInputStats> linears;
    std::map<std::string, std::string> aliases;
    for (std::size_t b = 0; b < inputs_.size(); ++b) {
      const std::string prefix = "blk." + std::to_string(b) + ".";
      for (LinearInput input :
           {LinearInput::attention, LinearInput::attention_output, LinearInput::ffn, LinearInput::ffn_down}) {
        const Observed& o = inputs_[b][static_cast<std::size_t>(input)];
        const std::vector<LinearSlot> slots = slots_reading(input);
        const std::string source = prefix + gguf_stem(slots.front());
        shrink::io::LinearInputStats s;
        const shrink::quant::Hessian h = o.hessian.hessian();
        s.samples = h.samples;
        s.hessian = h.values;
        for (double v : o.mean_abs.sum_abs()) s.act_abs_mean.push_back(v / static_cast<double>(o.mean_abs.samples()));
        linears[source] = std::move(s);
        for (std::size_t k = 1; k < slots.size(); ++k) aliases[prefix + gguf_stem(slots[k])] = source;
      }
    }
    shrink::io::save_calibration_stats(path, linears, aliases);
  }

 private:
  struct Observed {
    shrink::quant::HessianObserver hessian;
    shrink::quant::ActivationMeanAbsObserver mean_abs;
  };
  std::vector<std::array<Observed, kLinearInputs>> inputs_;
};

// Runs the calibration windows through the float model (the table's base recipe) and writes the statistics to path
// (atomically); returns the tokens seen.
inline std::int64_t write_calibration_statistics(const LlamaWeights& w, const std::vector<std::int32_t>& ids,
                                                 const WindowSpan& span, const std::string& path) {
  const CompressedModel base = compress_model(w, kRecipes[0], float_head(w), nullptr);
  InputStatisticsTap tap(w.config.blocks);
  const Perplexity p = evaluate(base, ids, span, "calibration text", &tap);
  tap.save(path);
  return p.tokens;
}

}  // namespace llm
