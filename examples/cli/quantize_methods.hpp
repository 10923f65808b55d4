// `shrink quantize --method gptq|awq|hqq`: the flags of the methods beyond round-to-nearest (rtn, the command's own
// calibrate-then-quantize) and their work on one Linear weight [out, in]: quant/gptq.hpp, quant/awq.hpp,
// quant/hqq.hpp, with the statistics of `--calibration FILE` (io/calibration_stats.hpp) for GPTQ and AWQ.
//
// Storage: 2-4 bits in int4/uint4, 5-8 in int8/uint8 with the record's "bits" (quant::narrow_int_scheme), int* when
// symmetric, uint* with zero points when affine; groups of --group-size input columns, or one scale per output row
// with 0. Decided:
//   - GPTQ's --act-order with groups quantizes with static groups (groups of original columns, parameters from the
//     weight before any update): the g_idx form permutes the layer's input, which shrink's file convention cannot
//     say, so the file holds the weight in its own column order and reads as any grouped tensor.
//   - AWQ stores the quantized W·diag(s) and s as the tensor "<linear>.input_scale" [in] F32, named by the record's
//     "input_scale" (io/quant_record.hpp): readers give W = dequantize(W·diag(s)) / s, and the layer computes
//     dequantize(W·diag(s)) · (x / s). A file cannot fold 1/s into whatever produces x (that needs the model's
//     structure), so the consumer divides x by s. s is searched per Linear (each Linear has its own input scale, so
//     nothing forces one s on the Linears sharing x).
//   - HQQ is affine (its zero point is what it optimises): --scheme symmetric is refused. It runs in its default form,
//     the paper's: fractional zero points, stored as an F32 `_zero_point` under the record's "zero_point":"float".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "calibration.hpp"
#include "report.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/metrics/error.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hqq.hpp"
#include "shrink/quant/quantize.hpp"

namespace shrink::cli {

struct MethodSettings {
  std::string method = "rtn";  // rtn, gptq, awq, hqq
  int bits = 4;
  quant::Symmetry symmetry = quant::Symmetry::symmetric;
  std::int64_t group_size = 128;  // 0: one scale per output row
  bool act_order = false;         // gptq
  bool static_groups = false;     // gptq with groups: --static-groups, or --act-order
  double damp = 0.01;             // gptq: λ = damp · mean(diag H)
  std::int64_t min_samples = 128;
  bool clip = true;         // awq: awq_clip_search
  std::string calibration;  // gptq, awq: the statistics file

  bool is_rtn() const { return method == "rtn"; }
  StatisticsNeeds needs() const {
    StatisticsNeeds n;
    n.hessian = method == "gptq" || method == "awq";
    n.act_abs_mean = method == "awq";
    return n;
  }
  quant::GptqOptions gptq_options() const {
    quant::GptqOptions o;
    o.bits = bits;
    o.symmetry = symmetry;
    o.group_size = group_size;
    o.act_order = act_order;
    o.static_groups = static_groups;
    o.damp_percent = damp;
    return o;
  }
  quant::AwqOptions awq_options() const {
    quant::AwqOptions o;
    o.bits = bits;
    o.symmetry = symmetry;
    o.group_size = group_size;
    return o;
  }
  quant::HqqOptions hqq_options() const {
    quant::HqqOptions o;
    o.bits = bits;
    o.group_size = group_size;
    return o;
  }
  // The stored scheme of every tensor the method quantizes.
  quant::QuantScheme scheme() const {
    return method == "hqq" ? quant::hqq_scheme(hqq_options()) : quant::narrow_int_scheme(bits, symmetry, group_size);
  }
};

// The method flags of `shrink quantize`, each refused where it does not apply (UsageError naming it).
inline void declare_method_options(ArgParser& args) {
  args.option("method", "M",
              "rtn (round to nearest, calibrated by --calib), gptq (GPTQ: rounding errors spread through the input "
              "Hessian), awq (AWQ: activation-aware input scales, then rtn), hqq (HQQ: half-quadratic scale and zero "
              "point, no calibration)",
              "rtn");
  args.option("calibration", "FILE",
              "gptq, awq: calibration statistics of each Linear's input (<linear>.hessian, .act_abs_mean, .samples; "
              "see docs/cli.md)");
  args.option("bits", "B", "gptq, awq, hqq: 2..8 bits (stored in int4/uint4 up to 4, int8/uint8 above)", "4");
  args.flag("act-order", "gptq: quantize columns in decreasing Hessian diagonal (with groups: static groups)");
  args.flag("static-groups", "gptq: group parameters from the weight before any update");
  args.option("damp", "F", "gptq: damping, F times the mean Hessian diagonal added to it", "0.01");
  args.option("min-samples", "N", "gptq, awq: fewest calibration rows a Linear's statistics may come from", "128");
  args.flag("no-clip", "awq: skip the clip search (each group's range as it is)");
}

inline MethodSettings read_method_settings(const ArgParser& args) {
  MethodSettings s;
  s.method = args.choice("method", {"rtn", "gptq", "awq", "hqq"}, "rtn");
  auto only_for = [&](const char* option, std::initializer_list<const char*> methods, const char* why = nullptr) {
    if (!args.has(option)) return;
    for (const char* m : methods)
      if (s.method == m) return;
    std::string list;
    for (const char* m : methods) list += (list.empty() ? "" : " or ") + std::string(m);
    throw UsageError(std::string("--") + option + " does not apply to --method " + s.method + ": only to " + list +
                     (why ? std::string(" (") + why + ")" : ""));
  };
  only_for("calibration", {"gptq", "awq"}, "HQQ and rtn work from the weights alone");
  only_for("bits", {"gptq", "awq", "hqq"}, "rtn stores --dtype");
  only_for("act-order", {"gptq"});
  only_for("static-groups", {"gptq"});
  only_for("damp", {"gptq"});
  only_for("min-samples", {"gptq", "awq"});
  only_for("no-clip", {"awq"});
  if (s.is_rtn()) return s;

  for (const char* o : {"dtype", "granularity", "axis", "calib", "restricted-range", "reduce-range"})
    if (args.has(o))
      throw UsageError(std::string("--") + o + " does not apply to --method " + s.method +
                       ": its storage follows --bits, --scheme and --group-size (int4/uint4 for 2-4 bits, int8/uint8 "
                       "for 5-8, groups along the input)");
  if (args.choice("format", {"shrink", "compressed-tensors"}, "shrink") == "compressed-tensors")
    throw UsageError("--format compressed-tensors takes --method rtn only: write --method " + s.method +
                     " in shrink's convention");
  s.bits = static_cast<int>(args.integer("bits", 2, 8, 4));
  s.group_size = args.integer("group-size", 0, std::int64_t{1} << 31, s.method == "gptq" ? 128 : 64);
  const std::string scheme =
      args.choice("scheme", {"symmetric", "affine"}, s.method == "gptq" ? "symmetric" : "affine");
  if (s.method == "hqq" && scheme == "symmetric")
    throw UsageError(
        "--scheme symmetric does not apply to --method hqq: HQQ optimises a zero point per group "
        "(affine, uint4/uint8)");
  s.symmetry = scheme == "symmetric" ? quant::Symmetry::symmetric : quant::Symmetry::affine;
  s.act_order = args.flag_set("act-order");
  s.static_groups = (args.flag_set("static-groups") || s.act_order) && s.group_size > 0;  // per row: static anyway
  s.damp = args.number("damp", 0.0, 100.0, 0.01);
  s.min_samples = args.integer("min-samples", 1, INT64_MAX, 128);
  s.clip = !args.flag_set("no-clip");
  if (s.method == "gptq" || s.method == "awq") {
    if (!args.has("calibration"))
      throw UsageError("--method " + s.method +
                       " needs --calibration FILE: the statistics of each Linear's input (a file written by "
                       "shrink::io::save_calibration_stats)");
    s.calibration = *args.value("calibration");
  }
  return s;
}

// What a group of Linears that read one input shares while it is worked on: GPTQ's factor of the input's Hessian
// (the Hessian itself released once factored); AWQ's Hessian and mean |x|. One group's at a time.
struct GroupInput {
  std::optional<quant::InverseHessianFactor> factor;
  std::optional<quant::Hessian> hessian;
  std::vector<float> act_abs_mean;
};

inline GroupInput read_group_input(const MethodSettings& s, const io::CalibrationStatsFile* stats,
                                   const std::string& source) {
  GroupInput g;
  if (s.method == "gptq") g.factor = input_factor(*stats, source, quant::inverse_hessian_options(s.gptq_options()));
  if (s.method == "awq") {
    g.hessian = stats->hessian(source);
    for (double v : stats->act_abs_mean(source)) g.act_abs_mean.push_back(static_cast<float>(v));
  }
  return g;
}

// What a method made of one Linear weight.
struct MethodOutcome {
  quant::QuantizedTensor quantized;  // AWQ: of W·diag(s)
  std::vector<float> input_scale;    // AWQ: s [in]; the layer's input is x / s
  std::string calibrator;            // the record's "calibrator": the method and what it chose
  double sqnr_db = 0.0;              // of the weight the layer computes with, against the original
  Json details = Json::object();     // for the JSON report
};

inline std::string input_scale_name(const std::string& weight) { return linear_of(weight) + ".input_scale"; }

// Quantizes weight `w` of tensor `name` with the method of `s` and the input its group shares.
inline MethodOutcome quantize_linear(const MethodSettings& s, TensorView<const float> w, const GroupInput& input) {
  MethodOutcome r;
  if (s.method == "gptq") {
    quant::GptqResult info;
    r.quantized = quant::gptq_quantize(w, *input.factor, s.gptq_options(), &info);
    r.calibrator = std::string("gptq") + (s.act_order ? " act_order" : "") + (s.static_groups ? " static_groups" : "") +
                   " damp=" + number_text(s.damp, "%g");
    r.details = {
        {"loss", json_number(info.loss)}, {"damping", json_number(info.damping)}, {"dead_inputs", info.dead_inputs}};
  } else if (s.method == "awq") {
    const quant::AwqOptions o = s.awq_options();
    const quant::AwqResult search = quant::awq_search({w}, *input.hessian, input.act_abs_mean, o);
    const std::vector<float> clip =
        s.clip ? quant::awq_clip_search(w, *input.hessian, search.scales, o) : std::vector<float>{};
    r.quantized = quant::awq_quantize(w, search.scales, o, clip);
    r.input_scale = search.scales;
    r.calibrator = "awq alpha=" + number_text(search.alpha, "%g") + (s.clip ? " clip" : "");
    r.details = {{"alpha", search.alpha},
                 {"loss", json_number(search.loss)},
                 {"rtn_loss", json_number(search.rtn_loss)},
                 {"clipped", s.clip}};
  } else {
    quant::HqqResult info;
    r.quantized = quant::hqq_quantize(w, s.hqq_options(), &info);
    r.calibrator = "hqq";
    r.details = {{"initial_error", json_number(info.initial_error)},
                 {"final_error", json_number(info.final_error)},
                 {"groups_improved", info.groups_improved}};
  }
  // The weight the layer computes with: dequantized, and for AWQ divided by s as every reader does.
  std::vector<float> restored = quant::dequantize(r.quantized);
  const std::int64_t in = w.size(1);
  if (!r.input_scale.empty()) io::divide_by_input_scale(restored, r.input_scale);
  std::vector<float> original(restored.size());
  for (std::int64_t o = 0; o < w.size(0); ++o)
    for (std::int64_t j = 0; j < in; ++j) original[static_cast<std::size_t>(o * in + j)] = w(o, j);
  const Shape shape = w.shape();
  r.sqnr_db = metrics::error_stats(TensorView<const float>(original.data(), shape),
                                   TensorView<const float>(restored.data(), shape))
                  .sqnr_db;
  return r;
}

}  // namespace shrink::cli
