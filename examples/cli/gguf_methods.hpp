// `shrink quantize IN.gguf OUT.gguf --format gguf --type T --method gptq|awq|hqq`: the methods onto the block grid of
// T (quant/block_grid.hpp), for every linear the plan requantizes to a block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, and
// the K-quants Q4_K, Q5_K, Q6_K, whose super-blocks' parameters each method chooses together); the
// output head, the embedding, a linear already of its type (copied, as llama-quantize does) and every other tensor
// keep the reference path (io/gguf_requantize.hpp).
//   gptq  quant::gptq_quantize_blocks with the Hessian of each linear's input (--calibration, one factor per input
//         shared by the linears reading it); --act-order quantizes with static groups (a block is a run of columns)
//   hqq   quant::hqq_quantize_blocks, no calibration
//   awq   quant::awq_search / awq_clip_search / awq_quantize_blocks with the Hessian and mean |x| of each input, the
//         factors s folded so that llama.cpp computes the same function with no extra tensor:
//           q, k, v      one s for the three, 1/s folded into blk.N.attn_norm
//           gate, up     one s for the two, 1/s folded into blk.N.ffn_norm
//           down         1/s folded into the rows of up (down reads silu(gate) ⊙ up, linear in up), searched first
//           attn_output  s = 1, the clip search alone: its input mixes the value heads that several query heads share
//                        (grouped-query attention), so no preceding row can absorb a per-channel factor
//         This needs llama's block layout (blk.N.attn_norm, ffn_norm and the seven linears, all on block types).
// A block's results are computed when its first tensor is written and dropped once its last is; everything the
// statistics must hold is checked before OUT is created.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calibration.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_requantize.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hqq.hpp"

namespace shrink::cli {

struct GgufMethod {
  std::string name = "rtn";  // rtn, gptq, awq, hqq
  quant::GptqOptions gptq;   // act_order, static_groups, damp_percent
  bool clip = true;          // awq
  std::int64_t min_samples = 128;
  std::string calibration;  // gptq, awq
};

// "blk.<N>.<stem>.weight" -> N and stem; false for any other name.
inline bool gguf_block_tensor(const std::string& name, std::int64_t& block, std::string& stem) {
  if (name.compare(0, 4, "blk.") != 0) return false;
  const std::size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4) return false;
  block = 0;
  for (std::size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || block > (std::int64_t{1} << 40)) return false;
    block = block * 10 + (name[i] - '0');
  }
  const std::string suffix = ".weight";
  if (name.size() <= dot + 1 + suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  stem = name.substr(dot + 1, name.size() - suffix.size() - dot - 1);
  return true;
}

inline const std::vector<std::string>& llama_linear_stems() {
  static const std::vector<std::string> stems = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                                 "ffn_gate", "ffn_up", "ffn_down"};
  return stems;
}

// Runs the method over a GGUF's linears and hands each tensor's bytes to requantize_gguf as it is written.
class GgufMethodRun {
 public:
  GgufMethodRun(const io::GgufFile& in, const std::vector<io::GgufTensorPlan>& plans, GgufMethod method)
      : in_(in), method_(std::move(method)) {
    const io::GgufTensorInfo* head = io::gguf_output_head(in);
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const io::GgufTensorPlan& p = plans[i];
      const io::GgufTensorInfo& t = in.tensors()[i];
      std::int64_t block = 0;
      std::string stem;
      if (&t == head || p.copied || !io::gguf_block_format(p.to_type) || !gguf_block_tensor(t.name, block, stem))
        continue;
      if (t.shape.size() != 2) continue;
      targets_[t.name] = {block, stem, p.to_type};
      remaining_[block] += 1;
    }
    if (method_.name == "gptq" || method_.name == "awq") {
      stats_ = std::make_unique<io::CalibrationStatsFile>(method_.calibration);
      check_statistics();
    }
    if (method_.name == "awq") check_awq_layout();
  }

  std::size_t linears() const { return targets_.size(); }

  // requantize_gguf's encoder: a target linear's blocks, or a norm AWQ changed; false for the rest.
  bool encode(const io::GgufTensorPlan& plan, const io::GgufTensorInfo& t, std::uint8_t* out, std::size_t bytes) {
    std::int64_t block = 0;
    std::string stem;
    if (!gguf_block_tensor(t.name, block, stem)) return false;
    const bool target = targets_.count(t.name) > 0;
    const bool norm = method_.name == "awq" && (stem == "attn_norm" || stem == "ffn_norm") && awq_blocks_.count(block);
    if (!target && !norm) return false;
    if (!done_.count(block)) done_[block] = run_block(block);
    BlockOutput& b = done_[block];
    if (norm) {
      const std::vector<float>& values = b.norms.at(stem);
      io::gguf_quantize(plan.to_type, values.data(), static_cast<std::int64_t>(values.size()), out);
      b.norms.erase(stem);
    } else {
      const std::vector<std::uint8_t>& encoded = b.linears.at(t.name);
      if (encoded.size() != bytes)
        fail("shrink quantize", "tensor \"" + t.name + "\": " + std::to_string(encoded.size()) + " bytes encoded, " +
                                    std::to_string(bytes) + " expected");
      std::memcpy(out, encoded.data(), bytes);
      b.linears.erase(t.name);
      --remaining_[block];
    }
    if (remaining_[block] == 0 && b.norms.empty()) done_.erase(block);  // every tensor of the block written
    return true;
  }

  // What the method chose, one line per linear (for the report).
  const std::map<std::string, std::string>& details() const { return details_; }

 private:
  struct Target {
    std::int64_t block = 0;
    std::string stem;
    std::uint32_t type = 0;
  };
  struct BlockOutput {
    std::map<std::string, std::vector<std::uint8_t>> linears;  // tensor name -> bytes
    std::map<std::string, std::vector<float>> norms;           // attn_norm / ffn_norm with 1/s folded (AWQ)
  };

  std::string name(std::int64_t block, const std::string& stem) const {
    return "blk." + std::to_string(block) + "." + stem + ".weight";
  }

  void check_statistics() const {
    StatisticsNeeds needs;
    needs.hessian = true;
    needs.act_abs_mean = method_.name == "awq";
    for (const auto& [tensor, target] : targets_) {
      const io::GgufTensorInfo& t = in_.tensor(tensor);
      try {
        require_statistics(*stats_, tensor, t.shape[1], needs, method_.min_samples, method_.name);
      } catch (const shrink::Error& e) {
        throw shrink::Error("tensor \"" + tensor + "\": " + e.what());
      }
    }
  }

  void check_awq_layout() {
    for (const auto& [block, count] : remaining_) {
      for (const std::string& stem : llama_linear_stems())
        if (!targets_.count(name(block, stem)))
          throw shrink::Error("--method awq folds its factors into llama's block layout: block " +
                              std::to_string(block) + " has no \"" + name(block, stem) +
                              "\" on a block type (every linear of a block, each in rows of whole blocks)");
      for (const char* norm : {"attn_norm", "ffn_norm"}) {
        const io::GgufTensorInfo* t = in_.find_tensor(name(block, norm));
        if (t == nullptr || t->shape.size() != 1 || t->shape[0] != in_.tensor(name(block, "attn_q")).shape[1])
          throw shrink::Error("--method awq folds 1/s into \"" + name(block, norm) +
                              "\": expected that norm, one value per input channel of the block's linears");
      }
      awq_blocks_.insert(block);
    }
  }

  std::vector<float> weight(std::int64_t block, const std::string& stem) const {
    return in_.dequantize(name(block, stem));
  }
  TensorView<const float> view(const std::vector<float>& w, std::int64_t block, const std::string& stem) const {
    const io::GgufTensorInfo& t = in_.tensor(name(block, stem));
    return TensorView<const float>(w.data(), Shape{t.shape[0], t.shape[1]});
  }

  std::vector<std::uint8_t> encode_blocks(const quant::BlockQuantized& q) const {
    const io::GgufTypeLayout layout = io::gguf_type_layout(io::gguf_type_of(q.format));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(q.rows * q.cols / layout.block_elements) *
                                    layout.block_bytes);
    io::encode_gguf_blocks(q, bytes.data());
    return bytes;
  }

  quant::BlockFormat format_of(const std::string& tensor) const {
    return *io::gguf_block_format(targets_.at(tensor).type);
  }

  BlockOutput run_block(std::int64_t block) {
    BlockOutput out;
    if (method_.name == "awq") {
      run_awq(block, out);
      return out;
    }
    std::map<std::string, std::optional<quant::InverseHessianFactor>> factors;  // per statistics source (gptq)
    for (const std::string& stem : llama_linear_stems()) {
      const std::string tensor = name(block, stem);
      if (!targets_.count(tensor)) continue;
      const std::vector<float> w = weight(block, stem);
      quant::BlockQuantized q;
      if (method_.name == "hqq") {
        quant::HqqResult info;
        q = quant::hqq_quantize_blocks(view(w, block, stem), format_of(tensor), quant::HqqOptions{}, &info);
        details_[tensor] =
            "hqq: " + std::to_string(info.groups_improved) + " of " + std::to_string(info.groups) + " blocks moved";
      } else {
        const std::string& source = stats_->source(linear_of(tensor));
        std::optional<quant::InverseHessianFactor>& f = factors[source];
        if (!f) f = input_factor(*stats_, source, quant::inverse_hessian_options(method_.gptq));
        quant::GptqResult info;
        q = quant::gptq_quantize_blocks(view(w, block, stem), *f, format_of(tensor), method_.gptq, &info);
        details_[tensor] = "gptq: loss " + number_text(info.loss, "%.6g");
      }
      out.linears[tensor] = encode_blocks(q);
    }
    return out;
  }

  // AWQ over the linears reading one input; returns s.
  std::vector<float> awq_group(std::int64_t block, const std::vector<std::string>& stems,
                               std::map<std::string, std::vector<float>>& weights, BlockOutput& out, bool search) {
    const std::string first = name(block, stems.front());
    const std::string& source = stats_->source(linear_of(first));
    const quant::Hessian h = stats_->hessian(source);
    quant::AwqOptions o;
    o.block_format = format_of(first);
    std::vector<TensorView<const float>> views;
    for (const std::string& stem : stems) views.push_back(view(weights[stem], block, stem));
    std::vector<float> s(static_cast<std::size_t>(h.features), 1.0f);
    std::string chosen = "awq: s = 1 (clip search only)";
    if (search) {
      std::vector<float> mean_abs;
      for (double v : stats_->act_abs_mean(source)) mean_abs.push_back(static_cast<float>(v));
      const quant::AwqResult r = quant::awq_search(views, h, mean_abs, o);
      s = r.scales;
      chosen = "awq: alpha " + number_text(r.alpha, "%g") + ", loss / rtn " + number_text(r.loss / r.rtn_loss, "%.4f");
    }
    for (std::size_t k = 0; k < stems.size(); ++k) {
      const std::vector<float> clip = method_.clip ? quant::awq_clip_search(views[k], h, s, o) : std::vector<float>{};
      out.linears[name(block, stems[k])] = encode_blocks(quant::awq_quantize_blocks(views[k], s, o, clip));
      details_[name(block, stems[k])] = chosen + (method_.clip ? ", clip" : "");
    }
    return s;
  }

  void run_awq(std::int64_t block, BlockOutput& out) {
    std::map<std::string, std::vector<float>> w;
    for (const std::string& stem : llama_linear_stems()) w[stem] = weight(block, stem);
    // down first: its 1/s goes into up's rows before gate and up are searched.
    const std::vector<float> s_down = awq_group(block, {"ffn_down"}, w, out, true);
    const std::int64_t up_in = in_.tensor(name(block, "ffn_up")).shape[1];
    for (std::size_t r = 0; r < s_down.size(); ++r)
      for (std::int64_t j = 0; j < up_in; ++j)
        w["ffn_up"][r * static_cast<std::size_t>(up_in) + static_cast<std::size_t>(j)] /= s_down[r];
    const std::vector<float> s_ffn = awq_group(block, {"ffn_gate", "ffn_up"}, w, out, true);
    const std::vector<float> s_attn = awq_group(block, {"attn_q", "attn_k", "attn_v"}, w, out, true);
    awq_group(block, {"attn_output"}, w, out, false);
    for (const auto& [stem, s] : {std::pair<const char*, const std::vector<float>*>{"attn_norm", &s_attn},
                                  std::pair<const char*, const std::vector<float>*>{"ffn_norm", &s_ffn}}) {
      std::vector<float> gamma = in_.dequantize(name(block, stem));
      for (std::size_t j = 0; j < gamma.size(); ++j) gamma[j] /= (*s)[j];
      out.norms[stem] = std::move(gamma);
    }
  }

  const io::GgufFile& in_;
  GgufMethod method_;
  std::unique_ptr<io::CalibrationStatsFile> stats_;
  std::map<std::string, Target> targets_;          // tensor name -> what it becomes
  std::map<std::int64_t, std::size_t> remaining_;  // block -> target linears not written yet
  std::set<std::int64_t> awq_blocks_;              // blocks whose norms AWQ rewrites
  std::map<std::int64_t, BlockOutput> done_;
  std::map<std::string, std::string> details_;
};

}  // namespace shrink::cli
