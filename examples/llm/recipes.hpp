// The compression recipes of the LLM example's table, each applied to every linear of every block (q, k, v, o,
// gate, up, down); the embedding, the norms and the output head stay float32.
//
//   base         the GGUF dequantized to float32                      cpu::linear_f32
//   fp16, bf16   weights rounded to half / bfloat16                   cpu::linear_weight_only
//   w8           int8 symmetric per output channel                    cpu::linear_weight_only
//   w8-g32       int8 symmetric per group of 32 (Q8_0's grid but float32 scales): the weight-only products read
//                int8 per tensor or per channel only, so the row computes with the dequantized weights
//                                                                      cpu::linear_f32
//   w8a8         w8's weights, activations int8 per token (dynamic)   cpu::linear_int8_dynamic
//   sq-w8a8      SmoothQuant (alpha 0.5) then w8a8                    cpu::linear_int8_dynamic
//   w4-g64       uint4 affine per group of 64 (round to nearest)      cpu::linear_weight_only
//   w4a8-g64     w4-g64's weights, activations int8 per token and group of 64 (dynamic, as llama.cpp's Q4_0 · Q8_0)
//                                                                      cpu::linear_w4a8
//   w3-g64       3-bit affine per group of 64: uint4 storage with the range [0, 7] (reduce_range)
//   mag-50       magnitude, 50% of each weight (torch's l1_unstructured)   cpu::linear_csr
//   wanda-50     Wanda, 50% of each output row                        cpu::linear_csr
//   mag-2:4      magnitude 2:4 along the input dimension              cpu::linear_nm
//   wanda-2:4    Wanda 2:4                                            cpu::linear_nm
//   gptq-w4-g64  GPTQ, 4-bit affine per group of 64 (uint4)           cpu::linear_weight_only
//   gptq-w4-g64-act   the same with act_order (the g_idx form: each linear gathers its input columns in GPTQ's order)
//   gptq-w3-g64, gptq-w3-g64-act   3-bit (uint4 storage, range [0, 7])
//   hqq-w4-g64   HQQ, 4-bit per group of 64, fractional zero points (the paper's form), no calibration
//                                                                      cpu::linear_weight_only
//   awq-w4-g64   AWQ, 4-bit affine per group of 64 (scales searched on the Hessian, the weight clip searched for
//                v, o, gate, up, down); 1/s folded into the RMSNorm for q/k/v and gate/up, an input scale for o
//                and down                                              cpu::linear_weight_only
//   sparsegpt-50 SparseGPT, 50% of each row's mask block of 128       cpu::linear_csr
//   sparsegpt-2:4  SparseGPT 2:4                                       cpu::linear_nm
//
// SmoothQuant's factors fold into the preceding RMSNorm for q/k/v and gate/up, into the up projection's output rows
// for down (down reads silu(gate) ⊙ up, linear in up), and stay an input scale for o (its input mixes the value
// heads that several query heads share, so no single preceding row can absorb a per-channel factor).
// Calibration (SmoothQuant's per-channel |x| maxima, Wanda's per-channel norms) comes from the float model's forward
// pass over the calibration text (CalibrationStats, an ActivationTap). The GPTQ rows calibrate sequentially instead
// (sequential.hpp): each linear input's Hessian from the model with everything before it already compressed, damping
// 0.01, blocks of 128 columns.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compressed_linear.hpp"
#include "llama_forward.hpp"
#include "llama_model.hpp"
#include "perplexity.hpp"
#include "sequential.hpp"
#include "shrink/core/error.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/w4a8.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/prune/sparsegpt.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/prune/wanda.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hqq.hpp"
#include "shrink/quant/inverse_hessian.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/smoothquant.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace llm {

enum class Recipe {
  base,
  fp16,
  bf16,
  w8,
  w8_g32,
  w8a8,
  sq_w8a8,
  w4_g64,
  w4a8_g64,
  w3_g64,
  mag_50,
  wanda_50,
  mag_24,
  wanda_24,
  gptq_w4_g64,
  gptq_w4_g64_act,
  gptq_w3_g64,
  gptq_w3_g64_act,
  hqq_w4_g64,
  awq_w4_g64,
  sparsegpt_50,
  sparsegpt_24,
};

struct RecipeInfo {
  Recipe recipe;
  const char* name;
  const char* path;  // the shrink CPU product it runs through
  bool calibrated;   // needs CalibrationStats
  bool sequential;   // calibrates block by block on the compressed model (sequential.hpp)
};

inline constexpr std::array<RecipeInfo, 22> kRecipes = {{
    {Recipe::base, "base", "linear_f32", false, false},
    {Recipe::fp16, "fp16", "linear_weight_only<half>", false, false},
    {Recipe::bf16, "bf16", "linear_weight_only<bfloat16>", false, false},
    {Recipe::w8, "w8", "linear_weight_only<int8>", false, false},
    {Recipe::w8_g32, "w8-g32", "linear_f32 (dequantized)", false, false},
    {Recipe::w8a8, "w8a8", "linear_int8_dynamic", false, false},
    {Recipe::sq_w8a8, "sq-w8a8", "linear_int8_dynamic", true, false},
    {Recipe::w4_g64, "w4-g64", "linear_weight_only<int4>", false, false},
    {Recipe::w4a8_g64, "w4a8-g64", "linear_w4a8", false, false},
    {Recipe::w3_g64, "w3-g64", "linear_weight_only<int4>", false, false},
    {Recipe::mag_50, "mag-50", "linear_csr", false, false},
    {Recipe::wanda_50, "wanda-50", "linear_csr", true, false},
    {Recipe::mag_24, "mag-2:4", "linear_nm", false, false},
    {Recipe::wanda_24, "wanda-2:4", "linear_nm", true, false},
    {Recipe::gptq_w4_g64, "gptq-w4-g64", "linear_weight_only<int4>", false, true},
    {Recipe::gptq_w4_g64_act, "gptq-w4-g64-act", "linear_weight_only<int4>", false, true},
    {Recipe::gptq_w3_g64, "gptq-w3-g64", "linear_weight_only<int4>", false, true},
    {Recipe::gptq_w3_g64_act, "gptq-w3-g64-act", "linear_weight_only<int4>", false, true},
    {Recipe::hqq_w4_g64, "hqq-w4-g64", "linear_weight_only<int4>", false, false},
    {Recipe::awq_w4_g64, "awq-w4-g64", "linear_weight_only<int4>", false, true},
    {Recipe::sparsegpt_50, "sparsegpt-50", "linear_csr", false, true},
    {Recipe::sparsegpt_24, "sparsegpt-2:4", "linear_nm", false, true},
}};

inline const RecipeInfo& recipe_info(const std::string& name) {
  for (const RecipeInfo& r : kRecipes)
    if (name == r.name) return r;
  std::string known;
  for (const RecipeInfo& r : kRecipes) known += std::string(known.empty() ? "" : ", ") + r.name;
  shrink::fail("llm::recipe_info", "recipe", name, "one of " + known);
}

// Per block and linear input: the |x| maxima (SmoothQuant) and the L2 norms (Wanda) over the calibration tokens.
class CalibrationStats final : public ActivationTap {
 public:
  explicit CalibrationStats(std::int64_t blocks) : inputs_(static_cast<std::size_t>(blocks)) {}

  void observe(std::int64_t block, LinearInput input, shrink::TensorView<const float> x) override {
    Observed& o = at(block, input);
    o.absmax.observe(x);
    o.norms.observe(x);
  }
  const shrink::quant::ActivationChannelAbsMax& absmax(std::int64_t block, LinearInput input) const {
    return at(block, input).absmax;
  }
  std::vector<float> norms(std::int64_t block, LinearInput input) const { return at(block, input).norms.norms(); }
  std::int64_t tokens() const { return inputs_.empty() ? 0 : inputs_[0][0].norms.tokens_seen(); }

 private:
  struct Observed {
    shrink::quant::ActivationChannelAbsMax absmax;
    shrink::prune::ActivationNormObserver norms;
  };
  Observed& at(std::int64_t block, LinearInput input) {
    return inputs_.at(static_cast<std::size_t>(block))[static_cast<std::size_t>(input)];
  }
  const Observed& at(std::int64_t block, LinearInput input) const {
    return inputs_.at(static_cast<std::size_t>(block))[static_cast<std::size_t>(input)];
  }
  std::vector<std::array<Observed, kLinearInputs>> inputs_;
};

namespace detail {

inline shrink::quant::QuantScheme w8_scheme() {
  return shrink::quant::QuantScheme::per_channel(shrink::quant::QuantDtype::int8, shrink::quant::Symmetry::symmetric,
                                                 0);
}

inline shrink::quant::QuantScheme uint_group_scheme(int bits) {
  auto s =
      shrink::quant::QuantScheme::per_group(shrink::quant::QuantDtype::uint4, shrink::quant::Symmetry::affine, 1, 64);
  s.reduce_range = bits == 3;  // [0, 7]: 3-bit values in 4-bit storage
  return s;
}

// SmoothQuant on one block's float weights (a copy), as the top of this file says; returns o's input scales.
inline std::vector<float> smooth_block(BlockWeights& w, const CalibrationStats& stats, std::int64_t block) {
  using shrink::quant::apply_smoothing;
  using shrink::quant::smoothing_scales;
  using shrink::quant::weight_channel_absmax;
  const float alpha = 0.5f;
  auto view = [&](LinearSlot s) { return w.linear(s).view(); };
  auto const_view = [&](LinearSlot s) { return shrink::TensorView<const float>(w.linear(s).view()); };
  auto norm_view = [](std::vector<float>& g) {
    return shrink::TensorView<float>(g.data(), static_cast<std::int64_t>(g.size()));
  };

  const auto s_attn = smoothing_scales(
      stats.absmax(block, LinearInput::attention).absmax(),
      weight_channel_absmax({const_view(LinearSlot::q), const_view(LinearSlot::k), const_view(LinearSlot::v)}), alpha);
  for (LinearSlot s : {LinearSlot::q, LinearSlot::k, LinearSlot::v}) apply_smoothing(s_attn, view(s));
  shrink::quant::fold_smoothing_into_norm(s_attn, norm_view(w.attn_norm));

  const auto s_ffn =
      smoothing_scales(stats.absmax(block, LinearInput::ffn).absmax(),
                       weight_channel_absmax({const_view(LinearSlot::gate), const_view(LinearSlot::up)}), alpha);
  for (LinearSlot s : {LinearSlot::gate, LinearSlot::up}) apply_smoothing(s_ffn, view(s));
  shrink::quant::fold_smoothing_into_norm(s_ffn, norm_view(w.ffn_norm));

  const auto s_down = smoothing_scales(stats.absmax(block, LinearInput::ffn_down), const_view(LinearSlot::down), alpha);
  apply_smoothing(s_down, view(LinearSlot::down));
  FloatMatrix& up = w.linear(LinearSlot::up);  // up's output row j feeds down's input j: divide it by s_j
  for (std::int64_t j = 0; j < up.rows; ++j)
    for (std::int64_t i = 0; i < up.cols; ++i) up.row(j)[i] /= s_down[static_cast<std::size_t>(j)];

  const auto s_o =
      smoothing_scales(stats.absmax(block, LinearInput::attention_output), const_view(LinearSlot::o), alpha);
  apply_smoothing(s_o, view(LinearSlot::o));
  return s_o;
}

inline CompressedLinear compress_linear(Recipe recipe, const FloatMatrix& weight, const CalibrationStats* stats,
                                        std::int64_t block, LinearSlot slot) {
  namespace cpu = shrink::cpu;
  using shrink::prune::Amount;
  const shrink::TensorView<const float> w = weight.view();
  const shrink::prune::NmPattern two_four{2, 4};
  switch (recipe) {
    case Recipe::base: return CompressedLinear(cpu::pack_weight(w));
    case Recipe::fp16: return CompressedLinear(cpu::pack_weight_as<shrink::half>(w));
    case Recipe::bf16: return CompressedLinear(cpu::pack_weight_as<shrink::bfloat16>(w));
    case Recipe::w8: return CompressedLinear(cpu::pack_weight(shrink::quant::quantize(w, w8_scheme())));
    case Recipe::w8_g32: {
      const std::vector<float> restored = shrink::quant::dequantize(
          shrink::quant::quantize(w, shrink::quant::QuantScheme::per_group(shrink::quant::QuantDtype::int8,
                                                                           shrink::quant::Symmetry::symmetric, 1, 32)));
      CompressedLinear l(cpu::pack_weight(shrink::TensorView<const float>(restored.data(), w.shape())));
      l.set_format_bytes(w.numel() + w.numel() / 32 * static_cast<std::int64_t>(sizeof(float)));  // int8 + a scale/32
      return l;
    }
    case Recipe::w8a8:
    case Recipe::sq_w8a8: return CompressedLinear(cpu::pack_int8_weight(shrink::quant::quantize(w, w8_scheme())));
    case Recipe::w4_g64:
      return CompressedLinear(cpu::pack_weight_int4(shrink::quant::quantize(w, uint_group_scheme(4))));
    case Recipe::w4a8_g64:
      return CompressedLinear(cpu::pack_weight_w4a8(shrink::quant::quantize(w, uint_group_scheme(4))));
    case Recipe::w3_g64:
      return CompressedLinear(cpu::pack_weight_int4(shrink::quant::quantize(w, uint_group_scheme(3))));
    case Recipe::mag_50:
      return CompressedLinear(shrink::sparse::to_csr(w, shrink::prune::l1_unstructured_mask(w, Amount::fraction(0.5))));
    case Recipe::wanda_50:
      return CompressedLinear(shrink::sparse::to_csr(
          w, shrink::prune::wanda_mask(w, stats->norms(block, input_of(slot)), Amount::fraction(0.5))));
    case Recipe::mag_24: return CompressedLinear(shrink::sparse::compress_nm(w, two_four));
    case Recipe::wanda_24:
      return CompressedLinear(shrink::sparse::compress_nm(
          w, shrink::prune::wanda_nm_mask(w, stats->norms(block, input_of(slot)), two_four), two_four));
    case Recipe::hqq_w4_g64: {
      shrink::quant::HqqOptions o;
      o.bits = 4;
      o.group_size = 64;
      return CompressedLinear(cpu::pack_weight_int4(shrink::quant::hqq_quantize(w, o)));
    }
    case Recipe::gptq_w4_g64:
    case Recipe::gptq_w4_g64_act:
    case Recipe::gptq_w3_g64:
    case Recipe::gptq_w3_g64_act:
    case Recipe::awq_w4_g64:
    case Recipe::sparsegpt_50:
    case Recipe::sparsegpt_24: break;  // sequential: compress_model_sequential
  }
  shrink::fail("llm::compress_linear", "recipe", static_cast<int>(recipe), "a known recipe");
}

}  // namespace detail

// The head's form in generation. The table keeps it float32 (float_head); generation, where a token's head product
// reads every byte of it (113 MB in float32 for SmolLM2, more than the 4-bit blocks), stores it as the recipe stores
// its linears where a float format does so (fp16, bf16), else int8 symmetric per output channel: w8's format, as
// llama.cpp keeps its token embedding Q8_0 under Q8_0 and Q4_0.
enum class HeadForm { f32, f16, bf16, int8 };

inline const char* head_form_name(HeadForm f) {
  switch (f) {
    case HeadForm::f32: return "f32";
    case HeadForm::f16: return "f16";
    case HeadForm::bf16: return "bf16";
    case HeadForm::int8: return "int8";
  }
  return "?";
}

inline HeadForm head_form_from_name(const std::string& name) {
  for (HeadForm f : {HeadForm::f32, HeadForm::f16, HeadForm::bf16, HeadForm::int8})
    if (name == head_form_name(f)) return f;
  shrink::fail("llm::head_form_from_name", "head form", "\"" + name + "\"", "f32, f16, bf16 or int8");
}

inline HeadForm generation_head_form(const RecipeInfo& r) {
  switch (r.recipe) {
    case Recipe::base: return HeadForm::f32;
    case Recipe::fp16: return HeadForm::f16;
    case Recipe::bf16: return HeadForm::bf16;
    default: return HeadForm::int8;
  }
}

inline SharedHead compress_head(const LlamaWeights& w, HeadForm form) {
  const Recipe as = form == HeadForm::f32    ? Recipe::base
                    : form == HeadForm::f16  ? Recipe::fp16
                    : form == HeadForm::bf16 ? Recipe::bf16
                                             : Recipe::w8;
  return std::make_shared<const CompressedLinear>(
      detail::compress_linear(as, w.output_head(), nullptr, 0, LinearSlot::q));
}

// The model under `recipe`, reading w's embedding (w must outlive it) and sharing the packed head. Calibrated
// recipes need `stats`.
inline CompressedModel compress_model(const LlamaWeights& w, const RecipeInfo& recipe, SharedHead head,
                                      const CalibrationStats* stats) {
  if (recipe.sequential)
    shrink::fail("llm::compress_model", "recipe", recipe.name, "a recipe without sequential calibration");
  if (recipe.calibrated && stats == nullptr)
    shrink::fail("llm::compress_model", "stats", "none",
                 std::string("calibration statistics: recipe ") + recipe.name + " needs them");
  CompressedModel m;
  m.config = w.config;
  m.embedding = &w.embedding;
  m.head = std::move(head);
  m.output_norm = w.output_norm;
  m.blocks.resize(w.blocks.size());
  for (std::size_t b = 0; b < w.blocks.size(); ++b) {
    const auto block = static_cast<std::int64_t>(b);
    CompressedBlock& out = m.blocks[b];
    const BlockWeights* source = &w.blocks[b];
    BlockWeights smoothed;
    std::vector<float> o_scales;
    if (recipe.recipe == Recipe::sq_w8a8) {
      smoothed = w.blocks[b];
      o_scales = detail::smooth_block(smoothed, *stats, block);
      source = &smoothed;
    }
    out.attn_norm = source->attn_norm;
    out.ffn_norm = source->ffn_norm;
    for (LinearSlot s : kLinearSlots)
      out.linear(s) = detail::compress_linear(recipe.recipe, source->linear(s), stats, block, s);
    out.linear(LinearSlot::o).set_input_scales(std::move(o_scales));
  }
  return m;
}

// SmoothQuant's and Wanda's statistics: every linear input of the float model (the base recipe, the table's float
// head) over the calibration windows.
inline CalibrationStats float_model_statistics(const LlamaWeights& w, SharedHead head,
                                               const std::vector<std::int32_t>& ids, const WindowSpan& span) {
  const CompressedModel base = compress_model(w, kRecipes[0], std::move(head), nullptr);
  CalibrationStats stats(w.config.blocks);
  evaluate(base, ids, span, "calibration text", &stats);
  return stats;
}

namespace detail {

// GPTQ on the linears reading `input`, with one factor of their shared Hessian.
inline void gptq_linears(const shrink::quant::GptqOptions& o, LinearInput input, const shrink::quant::Hessian& hessian,
                         const BlockWeights& source, CompressedBlock& out) {
  namespace quant = shrink::quant;
  const quant::InverseHessianFactor factor = quant::inverse_hessian_factor(hessian, quant::inverse_hessian_options(o));
  for (LinearSlot s : slots_reading(input)) {
    quant::GptqResult info;
    const quant::QuantizedTensor q = quant::gptq_quantize(source.linear(s).view(), factor, o, &info);
    CompressedLinear linear(shrink::cpu::pack_weight_int4(q));
    if (info.permuted_output) linear.set_input_order(info.order);
    out.linear(s) = std::move(linear);
  }
}

// SparseGPT on the linears reading `input`, one factor for them; CSR for unstructured, N:M compressed for a pattern.
inline void sparsegpt_linears(const shrink::prune::SparseGptOptions& o, LinearInput input,
                              const shrink::quant::Hessian& hessian, const BlockWeights& source, CompressedBlock& out) {
  namespace quant = shrink::quant;
  const quant::InverseHessianFactor factor =
      quant::inverse_hessian_factor(hessian, shrink::prune::inverse_hessian_options(o));
  for (LinearSlot s : slots_reading(input)) {
    const FloatMatrix& w = source.linear(s);
    const shrink::prune::SparseGptResult r = shrink::prune::sparsegpt_prune(w.view(), factor, o);
    const shrink::TensorView<const float> pruned(r.weight.data(), shrink::Shape{w.rows, w.cols});
    out.linear(s) = o.pattern ? CompressedLinear(shrink::sparse::compress_nm(pruned, r.mask, *o.pattern))
                              : CompressedLinear(shrink::sparse::to_csr(pruned, r.mask));
  }
}

// AWQ on the linears reading `input`: one search for them on the Hessian and their inputs' mean |x|; 1/s folded into
// the block's norm (attention, ffn) or kept as the layer's input scale (o, down); the weight clip searched for every
// linear but q and k (AWQ's practice: their errors meet in the attention scores).
inline void awq_linears(const shrink::quant::AwqOptions& o, LinearInput input, const shrink::quant::Hessian& hessian,
                        const std::vector<float>& mean_abs, const BlockWeights& source, CompressedBlock& out) {
  namespace quant = shrink::quant;
  const std::vector<LinearSlot> slots = slots_reading(input);
  std::vector<shrink::TensorView<const float>> weights;
  for (LinearSlot s : slots) weights.push_back(source.linear(s).view());
  const quant::AwqResult r = quant::awq_search(weights, hessian, mean_abs, o);
  for (std::size_t k = 0; k < slots.size(); ++k) {
    const bool clip = slots[k] != LinearSlot::q && slots[k] != LinearSlot::k;
    const std::vector<float> clip_max =
        clip ? quant::awq_clip_search(weights[k], hessian, r.scales, o) : std::vector<float>{};
    CompressedLinear linear(shrink::cpu::pack_weight_int4(quant::awq_quantize(weights[k], r.scales, o, clip_max)));
    if (input == LinearInput::attention_output || input == LinearInput::ffn_down) linear.set_input_scales(r.scales);
    out.linear(slots[k]) = std::move(linear);
  }
  auto norm = [](std::vector<float>& g) {
    return shrink::TensorView<float>(g.data(), static_cast<std::int64_t>(g.size()));
  };
  if (input == LinearInput::attention) quant::fold_smoothing_into_norm(r.scales, norm(out.attn_norm));
  if (input == LinearInput::ffn) quant::fold_smoothing_into_norm(r.scales, norm(out.ffn_norm));
}

}  // namespace detail

// A sequential recipe's model (sequential.hpp): `ids` by `span` are the calibration windows.
inline CompressedModel compress_model_sequential(const LlamaWeights& w, const RecipeInfo& recipe, SharedHead head,
                                                 const std::vector<std::int32_t>& ids, const WindowSpan& span,
                                                 SequentialTiming* timing, const HessianJitter& jitter = {}) {
  if (recipe.recipe == Recipe::sparsegpt_50 || recipe.recipe == Recipe::sparsegpt_24) {
    shrink::prune::SparseGptOptions o;
    if (recipe.recipe == Recipe::sparsegpt_24) o.pattern = shrink::prune::NmPattern{2, 4};
    return compress_sequential(
        w, std::move(head), ids, span,
        [&](std::int64_t, LinearInput input, const StageStats& stats, const BlockWeights& source,
            CompressedBlock& out) { detail::sparsegpt_linears(o, input, stats.hessian, source, out); },
        timing, jitter);
  }
  if (recipe.recipe == Recipe::awq_w4_g64) {
    shrink::quant::AwqOptions o;  // 4 bits, affine, groups of 64, a grid of 20
    return compress_sequential(
        w, std::move(head), ids, span,
        [&](std::int64_t, LinearInput input, const StageStats& stats, const BlockWeights& source,
            CompressedBlock& out) { detail::awq_linears(o, input, stats.hessian, stats.mean_abs, source, out); },
        timing, jitter);
  }
  shrink::quant::GptqOptions o;
  o.symmetry = shrink::quant::Symmetry::affine;
  o.group_size = 64;
  switch (recipe.recipe) {
    case Recipe::gptq_w4_g64:
    case Recipe::gptq_w4_g64_act: o.bits = 4; break;
    case Recipe::gptq_w3_g64:
    case Recipe::gptq_w3_g64_act: o.bits = 3; break;
    default: shrink::fail("llm::compress_model_sequential", "recipe", recipe.name, "a sequential recipe");
  }
  o.act_order = o.permuted_output =
      recipe.recipe == Recipe::gptq_w4_g64_act || recipe.recipe == Recipe::gptq_w3_g64_act;
  return compress_sequential(
      w, std::move(head), ids, span,
      [&](std::int64_t, LinearInput input, const StageStats& stats, const BlockWeights& source, CompressedBlock& out) {
        detail::gptq_linears(o, input, stats.hessian, source, out);
      },
      timing, jitter);
}

}  // namespace llm
