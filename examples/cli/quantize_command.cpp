// `shrink quantize IN OUT`: calibrate and quantize (int8/uint8/int4/uint4) or cast (fp16/bf16/fp8) the selected
// tensors, store them under shrink's convention (shrink/io/quantized_safetensors.hpp), copy the rest; or quantize the
// selected Linear weights with GPTQ, AWQ or HQQ (--method, quantize_methods.hpp).
//
// Two passes keep memory to one tensor at a time: the first calibrates every selected tensor and keeps only
// its parameters (so every error surfaces before the output is created); the second streams the output,
// quantizing each tensor again with those parameters when its turn comes. A --method other than rtn cannot be
// replayed from parameters (GPTQ's integers follow its error feedback), so after the first pass it runs once per
// tensor, the groups of Linears that read one input together (one Hessian or factor at a time), and keeps each
// result in a scratch file (spill_file.hpp) until its turn in the second: every error still comes before the output.
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"
#include "calibration.hpp"
#include "candidates.hpp"
#include "checkpoint_output.hpp"
#include "commands.hpp"
#include "config_json.hpp"
#include "output_layout.hpp"
#include "paths.hpp"
#include "progress.hpp"
#include "quantize_gguf.hpp"
#include "quantize_methods.hpp"
#include "report.hpp"
#include "selection.hpp"
#include "shrink/io/compressed_tensors.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/metrics/error.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/observers/entropy.hpp"
#include "shrink/quant/observers/histogram.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/observers/mse.hpp"
#include "shrink/quant/observers/percentile.hpp"
#include "shrink/quant/quantize.hpp"
#include "spill_file.hpp"
#include "tensor_context.hpp"

namespace shrink::cli {

namespace {

enum class Target { integer, fp8, cast };

struct QuantizeSettings {
  std::string dtype;  // as given: int8, fp8-e4m3, ...
  Target target = Target::integer;
  quant::QuantScheme scheme;  // integer: axis as given (normalised per tensor)
  Fp8Format fp8_format = Fp8Format::e4m3;
  bool per_channel = true;  // fp8
  int axis = 0;
  ScalarType cast_type = ScalarType::f16;
  std::string calibrator = "minmax";  // minmax, percentile:P, histogram, entropy, mse
  double percentile = 99.99;
  bool compressed_tensors = false;  // --format compressed-tensors: the serving convention, not shrink's
  MethodSettings method;            // --method and its flags; rtn: the fields above
};

QuantizeSettings read_quantize_settings(const ArgParser& args) {
  QuantizeSettings s;
  s.method = read_method_settings(args);
  if (!s.method.is_rtn()) {
    s.target = Target::integer;
    s.scheme = s.method.scheme();
    s.dtype = quant::to_string(s.scheme.dtype);
    s.calibrator = s.method.method;
    return s;
  }
  s.dtype = args.choice("dtype", {"int8", "uint8", "int4", "uint4", "fp16", "bf16", "fp8-e4m3", "fp8-e5m2"}, "int8");
  s.compressed_tensors = args.choice("format", {"shrink", "compressed-tensors"}, "shrink") == "compressed-tensors";
  if (s.compressed_tensors && (s.dtype == "fp16" || s.dtype == "bf16" || s.dtype == "fp8-e5m2"))
    throw UsageError("--format compressed-tensors stores int4/uint4/int8/uint8 and fp8-e4m3 weights: --dtype " +
                     s.dtype + " has no compressed-tensors form");
  const std::string granularity = args.choice("granularity", {"tensor", "channel", "group"}, "channel");
  s.axis = static_cast<int>(args.integer("axis", -8, 7, granularity == "group" ? -1 : 0));
  auto refuse = [&](const char* option, const std::string& why) {
    if (args.has(option)) throw UsageError(std::string("--") + option + " does not apply to --dtype " + s.dtype + ": " + why);
  };
  if (s.dtype == "fp16" || s.dtype == "bf16") {
    s.target = Target::cast;
    s.cast_type = s.dtype == "fp16" ? ScalarType::f16 : ScalarType::bf16;
    for (const char* o : {"scheme", "granularity", "axis", "group-size", "calib"}) refuse(o, "a cast has no scales");
    for (const char* o : {"restricted-range", "reduce-range"}) refuse(o, "a cast has no integer range");
    return s;
  }
  if (s.dtype == "fp8-e4m3" || s.dtype == "fp8-e5m2") {
    s.target = Target::fp8;
    s.fp8_format = s.dtype == "fp8-e4m3" ? Fp8Format::e4m3 : Fp8Format::e5m2;
    if (granularity == "group") throw UsageError("--granularity group does not apply to FP8: expected tensor or channel");
    s.per_channel = granularity == "channel";
    refuse("scheme", "FP8 scales are symmetric");
    refuse("group-size", "FP8 scales are per tensor or per channel");
    refuse("calib", "FP8 scales come from the largest |x| (amax)");
    for (const char* o : {"restricted-range", "reduce-range"}) refuse(o, "FP8 has no integer range");
    s.calibrator = "amax";
    return s;
  }
  s.target = Target::integer;
  s.scheme.dtype = s.dtype == "int8"    ? quant::QuantDtype::int8
                   : s.dtype == "uint8" ? quant::QuantDtype::uint8
                   : s.dtype == "int4"  ? quant::QuantDtype::int4
                                        : quant::QuantDtype::uint4;
  s.scheme.symmetry = args.choice("scheme", {"symmetric", "affine"}, "symmetric") == "symmetric"
                          ? quant::Symmetry::symmetric
                          : quant::Symmetry::affine;
  s.scheme.granularity = granularity == "tensor"    ? quant::Granularity::per_tensor
                         : granularity == "channel" ? quant::Granularity::per_channel
                                                    : quant::Granularity::per_group;
  if (quant::is_packed(s.scheme.dtype) && s.scheme.granularity == quant::Granularity::per_tensor)
    throw UsageError("--dtype " + s.dtype + " needs --granularity channel or group: one scale for a whole tensor "
                     "leaves 16 levels for all of it");
  s.scheme.axis = s.axis;
  if (s.scheme.granularity == quant::Granularity::per_group)
    s.scheme.group_size = args.integer("group-size", 1, std::int64_t{1} << 31, 128);
  else if (args.has("group-size"))
    throw UsageError("--group-size needs --granularity group");
  s.scheme.restricted_range = args.flag_set("restricted-range");
  s.scheme.reduce_range = args.flag_set("reduce-range");

  const std::string calib = args.text("calib", "minmax");
  if (calib == "percentile" || calib.compare(0, 11, "percentile:") == 0) {
    if (calib.size() > 11) s.percentile = ArgParser::parse_number("--calib percentile:P", calib.substr(11), 0.0, 100.0);
    if (!(s.percentile > 0.0)) throw UsageError("--calib percentile:P: expected P in (0, 100]");
    s.calibrator = "percentile:" + number_text(s.percentile, "%g");
  } else if (calib == "minmax" || calib == "histogram" || calib == "entropy" || calib == "mse") {
    s.calibrator = calib;
  } else {
    throw UsageError("--calib = '" + calib + "': expected one of minmax|percentile:P|histogram|entropy|mse");
  }
  if (s.scheme.granularity == quant::Granularity::per_group && s.calibrator != "minmax")
    throw UsageError("--calib " + s.calibrator + " works per tensor or per channel: with --granularity group use "
                     "--calib minmax");
  return s;
}

std::unique_ptr<quant::Observer> make_observer(const QuantizeSettings& s, const quant::QuantScheme& scheme) {
  if (s.calibrator == "histogram") return std::make_unique<quant::HistogramObserver>(scheme);
  if (s.calibrator == "entropy") return std::make_unique<quant::EntropyObserver>(scheme);
  if (s.calibrator == "mse") return std::make_unique<quant::MseObserver>(scheme);
  if (s.calibrator.compare(0, 11, "percentile:") == 0) {
    quant::PercentileOptions options;
    options.percentile = s.percentile;
    return std::make_unique<quant::PercentileObserver>(scheme, options);
  }
  return std::make_unique<quant::MinMaxObserver>(scheme);
}

// What pass one decided for a selected tensor.
struct Plan {
  io::QuantizationRecord record;
  quant::QParams qparams;         // integer
  std::vector<float> fp8_scales;  // fp8
  std::string source_dtype;
  std::int64_t bytes_before = 0;
  double sqnr_db = 0.0;  // filled in pass two
  std::string skipped;   // why the tensor cannot take the scheme; empty when it can
  io::compressed_tensors::WeightArgs ct_args;  // --format compressed-tensors
  // --method gptq, awq, hqq: the stored tensors' bytes in the scratch file (io::stored_tensors order, AWQ's input
  // scale last), and what the method chose.
  std::vector<SpillRef> spilled;
  Json details;
};

std::int64_t declared_bytes(const io::TensorDeclaration& d) {
  return element_count(d.shape) * element_bits(d.dtype) / 8;
}

std::int64_t stored_bytes(const io::QuantizationRecord& record) {
  std::int64_t bytes = 0;
  for (const auto& d : io::stored_tensors(record)) bytes += declared_bytes(d);
  return bytes;
}

// Pass one of --method gptq, awq, hqq for one tensor: the checks of its shape against the method (a Linear weight
// [out, in] whose width the groups divide, smaller once stored) and its record; the method runs later
// (run_method). A tensor that cannot take it comes back with `skipped` saying why.
Plan plan_method(const io::TensorInfo& t, const QuantizeSettings& s) {
  Plan plan;
  plan.source_dtype = dtype_text(t.dtype);
  plan.bytes_before = static_cast<std::int64_t>(t.bytes);
  auto skip = [&](const std::string& why) {
    plan.skipped = why;
    return plan;
  };
  if (t.numel() == 0) return skip("has no elements");
  if (t.shape.size() != 2)
    return skip("has shape " + shape_text(t.shape) + ": --method " + s.method.method +
                " quantizes Linear weights [out, in]");
  const std::int64_t in = t.shape[1];
  const std::int64_t group = s.method.group_size;
  if (group > 0 && in % group != 0)
    return skip("--group-size " + std::to_string(group) + " does not divide the input width of shape " +
                shape_text(t.shape) + ": expected a divisor of " + std::to_string(in) + " (or 0: one scale per row)");
  plan.record = io::integer_record(t.name, s.scheme, Shape(t.shape), s.method.method, plan.source_dtype);
  if (s.method.method == "awq") io::set_input_scale(plan.record, input_scale_name(t.name));
  const std::int64_t after = stored_bytes(plan.record);
  if (after > plan.bytes_before)
    return skip("stored as " + s.dtype + " it would take " + std::to_string(after) + " bytes, more than its " +
                std::to_string(plan.bytes_before));
  return plan;
}

// Checks the scheme against one tensor's shape and calibrates it. A tensor that cannot take the scheme (empty, no
// such axis, groups that do not divide it, or larger once quantized) comes back with `skipped` saying why.
Plan calibrate(const io::SafetensorsFile& file, const io::TensorInfo& t, const QuantizeSettings& s) {
  Plan plan;
  plan.source_dtype = dtype_text(t.dtype);
  plan.bytes_before = static_cast<std::int64_t>(t.bytes);
  const Shape shape(t.shape);
  auto skip = [&](const std::string& why) {
    plan.skipped = why;
    return plan;
  };
  if (t.numel() == 0) return skip("has no elements");
  const int rank = static_cast<int>(t.shape.size());
  const bool needs_axis = s.target == Target::fp8 ? s.per_channel
                          : s.target == Target::integer && s.scheme.granularity != quant::Granularity::per_tensor;
  if (needs_axis && (s.axis < -rank || s.axis >= rank))
    return skip("--axis " + std::to_string(s.axis) + " is outside the shape " + shape_text(t.shape) +
                ": expected an axis in [" + std::to_string(-rank) + ", " + std::to_string(rank) + ")");
  if (s.target == Target::integer && s.scheme.granularity == quant::Granularity::per_group) {
    const int axis = s.axis < 0 ? s.axis + rank : s.axis;
    if (t.shape[static_cast<std::size_t>(axis)] % s.scheme.group_size != 0)
      return skip("--group-size " + std::to_string(s.scheme.group_size) + " does not divide axis " +
                  std::to_string(axis) + " of shape " + shape_text(t.shape) + ": expected a divisor of " +
                  std::to_string(t.shape[static_cast<std::size_t>(axis)]));
  }
  if (s.target == Target::cast)
    plan.record = io::cast_record(t.name, s.cast_type, shape, dtype_text(t.dtype));
  else if (s.target == Target::fp8)
    plan.record =
        io::fp8_record(t.name, s.fp8_format,
                       s.per_channel ? quant::Fp8ScaleGranularity::per_channel : quant::Fp8ScaleGranularity::per_tensor,
                       s.axis, shape, s.calibrator, plan.source_dtype);
  else
    plan.record = io::integer_record(t.name, s.scheme, shape, s.calibrator, plan.source_dtype);
  const std::int64_t after = stored_bytes(plan.record);
  if (after > plan.bytes_before)
    return skip("stored as " + s.dtype + " it would take " + std::to_string(after) + " bytes, more than its " +
                std::to_string(plan.bytes_before));
  if (s.target == Target::cast) return plan;

  const std::vector<float> x = io::read_float(file, t.name);
  require_finite(x, t.shape);
  const TensorView<const float> view(x.data(), shape);
  if (s.target == Target::fp8) {
    plan.fp8_scales = quant::quantize_fp8(view, s.fp8_format, plan.record.fp8_granularity, s.axis).scale;
    return plan;
  }
  const std::unique_ptr<quant::Observer> observer = make_observer(s, plan.record.scheme);
  observer->observe(view);
  plan.qparams = observer->qparams();
  return plan;
}

ByteBuffer float_bytes(const std::vector<float>& values) {
  ByteBuffer out(values.size() * sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// The stored bytes of tensor `part` (0 data, 1 scale, 2 zero point) of a plan; the data part also measures SQNR.
ByteBuffer encode_part(const io::SafetensorsFile& file, Plan& plan, std::size_t part) {
  const io::QuantizationRecord& r = plan.record;
  if (part == 1) return float_bytes(r.encoding == io::StoredEncoding::fp8 ? plan.fp8_scales : plan.qparams.scale);
  if (part == 2) {
    ByteBuffer zp(plan.qparams.zero_point.size());
    for (std::size_t i = 0; i < zp.size(); ++i) zp[i] = static_cast<std::uint8_t>(plan.qparams.zero_point[i]);
    return zp;
  }
  const std::vector<float> x = io::read_float(file, r.name);
  const Shape shape(r.shape);
  const TensorView<const float> view(x.data(), shape);
  std::vector<float> restored(x.size());
  ByteBuffer data;
  if (r.encoding == io::StoredEncoding::integer) {
    quant::QuantizedTensor q = quant::quantize(view, r.scheme, plan.qparams);
    quant::dequantize_into(q, TensorView<float>(restored.data(), shape));
    data = std::move(q.data);
  } else if (r.encoding == io::StoredEncoding::fp8) {
    quant::Fp8QuantizeOptions options;
    options.scales = plan.fp8_scales;
    quant::Fp8Tensor q = quant::quantize_fp8(view, r.fp8_format, r.fp8_granularity, r.fp8_axis < 0 ? 0 : r.fp8_axis, options);
    quant::dequantize_fp8(q, TensorView<float>(restored.data(), shape));
    data = std::move(q.data);
  } else {
    io::EncodedQuantization e = io::encode_cast(r.name, view, r.cast_type, r.cast_from);
    data = std::move(e.tensors[0].bytes);
    for (std::size_t i = 0; i < restored.size(); ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, data.data() + 2 * i, 2);
      restored[i] = r.cast_type == ScalarType::f16 ? half::from_bits(bits).to_float() : bfloat16::from_bits(bits).to_float();
    }
  }
  plan.sqnr_db = metrics::error_stats(view, TensorView<const float>(restored.data(), shape)).sqnr_db;
  return data;
}

// The bytes of declaration `index` of io::compressed_tensors::declarations for a plan (--format compressed-tensors).
ByteBuffer encode_compressed_tensors_part(const io::SafetensorsFile& file, Plan& plan, std::size_t index) {
  namespace ct = io::compressed_tensors;
  const io::QuantizationRecord& r = plan.record;
  switch (ct::declarations(r, plan.ct_args)[index].part) {
    case ct::Part::scale: return encode_part(file, plan, 1);
    case ct::Part::shape: return ct::shape_tensor(r);
    case ct::Part::zero_point: {
      std::vector<std::int32_t> zero_points = plan.qparams.zero_point;
      if (zero_points.empty()) zero_points.assign(plan.qparams.scale.size(), quant::symmetric_zero_point(r.scheme));
      return ct::packed_zero_points(r, plan.ct_args, zero_points);
    }
    case ct::Part::data: break;
  }
  ByteBuffer data = encode_part(file, plan, 0);  // shrink's stored bytes (FP8 codes are the same), SQNR measured
  if (r.encoding == io::StoredEncoding::fp8) return data;
  quant::QuantizedTensor q;
  q.shape = Shape(r.shape);
  q.scheme = r.scheme;
  q.qparams = plan.qparams;
  q.data = std::move(data);
  return ct::packed_weight(q, plan.ct_args);
}

// The command line of `shrink quantize`.
void declare_quantize_options(ArgParser& args) {
  args.positional("IN", "input .safetensors file, checkpoint directory or sharded index .json")
      .positional("OUT", "output file; a new or empty directory when IN is a directory or an index (never the input)");
  declare_method_options(args);
  args.option("dtype", "TYPE", "int8|uint8|int4|uint4|fp16|bf16|fp8-e4m3|fp8-e5m2 (rtn)", "int8");
  args.option("scheme", "S", "symmetric|affine (integer types; hqq: affine only)", "symmetric; affine for awq and hqq");
  args.option("granularity", "G", "tensor|channel|group: what shares one scale", "channel");
  args.option("axis", "N", "channel axis, or the axis split into groups; negative counts from the end",
              "0, or -1 with --granularity group");
  args.option("group-size", "G",
              "elements of a group along --axis (--granularity group); gptq, awq, hqq: input columns per group, 0 for "
              "one scale per output row",
              "128; 64 for awq and hqq");
  args.option("calib", "C", "minmax|percentile:P|histogram|entropy|mse (integer types; group: minmax only)", "minmax");
  args.flag("restricted-range", "symmetric signed range [-127, 127] (TensorRT weights); unsigned [1, 255]");
  args.flag("reduce-range", "one bit less: int8 [-64, 63], uint8 [0, 127]");
  args.option("format", "F",
              "shrink|compressed-tensors|gguf: the convention OUT is written in; compressed-tensors (what vLLM and "
              "transformers load) also writes config.json beside OUT, from the one beside IN; gguf (llama.cpp) "
              "takes a GGUF IN, or a Hugging Face Llama checkpoint, and --type",
              "shrink");
  args.option("type", "T",
              "q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q5_k|q6_k|f16|bf16|f32 (--format gguf): the type of the linears; the "
              "output head and rows that are not whole blocks (or super-blocks) take llama-quantize's choice");
  TensorSelection::declare(args);
  args.flag("json", "print a JSON summary on stdout");
  args.epilog(
      "example: shrink quantize model.safetensors model-int4.safetensors --dtype int4 --granularity group\n"
      "         --group-size 64 --scheme affine\n"
      "         shrink quantize model.safetensors model-gptq.safetensors --method gptq\n"
      "         --calibration stats.safetensors --bits 4 --group-size 128\n"
      "         shrink quantize model.gguf model-q4_0.gguf --format gguf --type q4_0\n"
      "         shrink quantize model.gguf model-q4_0.gguf --format gguf --type q4_0 --method gptq --act-order\n"
      "         --calibration stats.safetensors   (stats from shrink_llm --write-calibration-stats)\n"
      "--method awq also writes LINEAR.input_scale [in] per Linear (the record's \"input_scale\"): the weight is\n"
      "dequantized then divided by it column by column, or the layer's input is divided by it.");
}

// Pass one's decisions: a plan per tensor to quantize, and why each other tensor of the input is copied.
struct Planned {
  std::map<std::string, Plan> plans;
  std::map<std::string, std::string> notes;
  std::int64_t kept_by_default = 0;  // by tensor_roles.hpp's rules
  std::int64_t not_applicable = 0;   // could not take the scheme
  std::int64_t float_tensors = 0;    // float tensors not already quantized
};

// Pass one over one file (a shard): the selected tensors (float, not already under the convention, not kept by
// default unless --force), each checked and calibrated, added to `planned`.
void plan_tensors(const io::SafetensorsFile& file, const TensorSelection& selection, const QuantizeSettings& settings,
                  const Progress& progress, Planned& planned) {
  Candidates candidates = find_candidates(file, selection, "quantize");
  planned.notes.insert(candidates.notes.begin(), candidates.notes.end());
  planned.kept_by_default += candidates.kept_by_default;
  planned.float_tensors += candidates.float_tensors;
  const std::vector<const io::TensorInfo*>& selected = candidates.tensors;
  for (std::size_t i = 0; i < selected.size(); ++i) {
    const io::TensorInfo& t = *selected[i];
    progress.step((settings.method.is_rtn() ? "calibrating " : "checking ") + t.name, i, selected.size());
    Plan plan = in_tensor_context(
        t.name, [&] { return settings.method.is_rtn() ? calibrate(file, t, settings) : plan_method(t, settings); });
    if (plan.skipped.empty() && settings.compressed_tensors) {
      const io::compressed_tensors::Expressible e = io::compressed_tensors::weight_args(plan.record);
      if (e.args)
        plan.ct_args = *e.args;
      else
        plan.skipped = e.why_not + ": no compressed-tensors form";
    }
    if (!plan.skipped.empty()) {
      planned.notes[t.name] = "skipped: " + plan.skipped;
      ++planned.not_applicable;
      continue;
    }
    planned.plans.emplace(t.name, std::move(plan));
  }
}

// Where an output tensor comes from: a part of a plan (0 data, 1 scale, 2 zero point), or the input (plan null).
struct Part {
  Plan* plan = nullptr;
  std::size_t index = 0;
};

struct OutputLayout {
  std::vector<io::TensorDeclaration> declarations;  // in the order they are written
  std::map<std::string, Part> parts;
};

// The output's tensors for one file's `tensors`, each name once, laid out for alignment.
OutputLayout output_layout(const std::vector<io::TensorInfo>& tensors, std::map<std::string, Plan>& plans,
                           bool compressed_tensors) {
  OutputLayout layout;
  for (const io::TensorInfo& t : tensors) {
    const auto found = plans.find(t.name);
    if (found == plans.end()) {
      layout.declarations.push_back({t.name, t.dtype, t.shape});
      layout.parts[t.name] = Part{nullptr, 0};
      continue;
    }
    std::vector<io::TensorDeclaration> stored;
    if (compressed_tensors)
      for (const auto& d : io::compressed_tensors::declarations(found->second.record, found->second.ct_args))
        stored.push_back(d.tensor);
    else
      stored = io::stored_tensors(found->second.record);
    for (std::size_t k = 0; k < stored.size(); ++k) {
      layout.declarations.push_back(stored[k]);
      layout.parts[stored[k].name] = Part{&found->second, k};
    }
  }
  std::set<std::string> names;
  for (const auto& d : layout.declarations)
    if (!names.insert(d.name).second)
      throw shrink::Error("tensor \"" + d.name +
                          "\" would be written twice: the input already has a tensor of "
                          "that name, which shrink's convention needs for the scales, zero points or input scale of "
                          "another; rename it or --exclude the tensor it belongs to");
  sort_for_alignment(layout.declarations);
  return layout;
}

// --method gptq, awq, hqq, between the passes: every planned tensor's statistics checked first (present, of its input
// width, from enough rows), then the method run group by group (the Linears that read one input share its Hessian or
// factor, read once), each result's bytes put in the scratch file and its record's calibrator set.
void run_method(const io::Checkpoint& input, const QuantizeSettings& settings, const io::CalibrationStatsFile* stats,
                std::map<std::string, Plan>& plans, SpillFile& spill, const Progress& progress) {
  const MethodSettings& m = settings.method;
  std::vector<std::string> names;  // in input order
  for (const io::TensorInfo& t : input.tensors())
    if (plans.count(t.name)) names.push_back(t.name);
  std::vector<std::vector<std::string>> groups;
  if (stats != nullptr) {
    for (const std::string& name : names)
      in_tensor_context(name, [&] {
        require_statistics(*stats, name, plans.at(name).record.shape.back(), m.needs(), m.min_samples, m.method);
      });
    groups = input_groups(*stats, names);
  } else {
    for (const std::string& name : names) groups.push_back({name});
  }
  io::CheckpointReader reader(input);
  std::size_t done = 0;
  for (const std::vector<std::string>& group : groups) {
    const GroupInput shared = in_tensor_context(group.front(), [&] {
      return read_group_input(m, stats, stats != nullptr ? stats->source(linear_of(group.front())) : "");
    });
    for (const std::string& name : group) {
      progress.step(m.method + " " + name, done++, names.size());
      Plan& plan = plans.at(name);
      in_tensor_context(name, [&] {
        const std::vector<float> x = io::read_float(reader.file_of(name), name);
        require_finite(x, plan.record.shape);
        MethodOutcome r = quantize_linear(m, TensorView<const float>(x.data(), Shape(plan.record.shape)), shared);
        plan.record.calibrator = r.calibrator;
        plan.sqnr_db = r.sqnr_db;
        plan.details = std::move(r.details);
        io::EncodedQuantization e =
            io::encode_quantized(name, std::move(r.quantized), plan.record.calibrator, plan.source_dtype);
        if (plan.record.has_input_scale()) io::add_input_scale(e, plan.record.input_scale, r.input_scale);
        const std::vector<io::TensorDeclaration> planned = io::stored_tensors(plan.record);
        if (e.tensors.size() != planned.size()) throw std::logic_error("shrink quantize: the method's storage changed");
        for (std::size_t k = 0; k < planned.size(); ++k) {
          const io::TensorDeclaration& d = e.tensors[k].declaration;
          if (d.name != planned[k].name || d.dtype != planned[k].dtype || d.shape != planned[k].shape)
            throw std::logic_error("shrink quantize: the method stored " + d.name + " unlike its plan");
          plan.spilled.push_back(spill.append(e.tensors[k].bytes));
        }
      });
    }
  }
}

// Pass two: streams the output, quantizing each planned tensor again with its parameters when its turn comes.
void write_output(const std::string& out, const io::SafetensorsFile& file, const std::map<std::string, Plan>& plans,
                  bool has_records, bool compressed_tensors, const OutputLayout& layout, const SpillFile& spill,
                  const Progress& progress) {
  io::SafetensorsWriter writer(out);
  for (const auto& d : layout.declarations) writer.add_tensor(d.name, d.dtype, d.shape);
  for (const auto& m : file.metadata()) writer.add_metadata(m.first, m.second);
  if (!compressed_tensors) {
    for (const auto& p : plans)
      if (file.contains(p.first))
        writer.add_metadata(io::quant_metadata_key(p.first), io::to_metadata_value(p.second.record));
    if (!plans.empty() || has_records) writer.add_metadata(io::kFormatVersionKey, io::kFormatVersion);
  }
  writer.write_header();
  for (std::size_t i = 0; i < layout.declarations.size(); ++i) {
    const io::TensorDeclaration& d = layout.declarations[i];
    const Part& part = layout.parts.at(d.name);
    progress.step("writing " + d.name, i, layout.declarations.size());
    if (part.plan == nullptr) {
      writer.write(d.name, file.bytes(d.name));
      continue;
    }
    const ByteBuffer bytes = in_tensor_context(part.plan->record.name, [&] {
      if (!part.plan->spilled.empty()) return spill.read(part.plan->spilled.at(part.index));
      return compressed_tensors ? encode_compressed_tensors_part(file, *part.plan, part.index)
                                : encode_part(file, *part.plan, part.index);
    });
    writer.write(d.name, bytes.data(), bytes.size());
  }
  writer.finish();
}

// The report, in input order: one line (or JSON entry) per tensor, why each copied tensor was left alone, and the
// totals.
void report(const std::string& in, const std::string& out, const std::vector<io::TensorInfo>& tensors_in,
            const Planned& planned, const QuantizeSettings& settings, const Json& calibration, bool json) {
  Json tensors = Json::array();
  std::int64_t before = 0, after = 0, quantized = 0, copied = 0;
  std::vector<std::string> lines;
  for (const io::TensorInfo& t : tensors_in) {
    Json entry;
    entry["name"] = t.name;
    const auto found = planned.plans.find(t.name);
    std::int64_t bytes_after = static_cast<std::int64_t>(t.bytes);
    if (found != planned.plans.end()) {
      const Plan& plan = found->second;
      bytes_after = stored_bytes(plan.record);
      entry["action"] = plan.record.encoding == io::StoredEncoding::cast ? "cast" : "quantized";
      entry["dtype"] = plan.record.dtype_name();
      entry["source_dtype"] = plan.source_dtype;
      entry["shape"] = plan.record.shape;
      entry["calibrator"] = plan.record.calibrator;
      entry["sqnr_db"] = json_number(plan.sqnr_db);
      if (!settings.method.is_rtn()) entry["details"] = plan.details;
      if (plan.record.has_input_scale()) entry["input_scale"] = plan.record.input_scale;
      ++quantized;
      char line[512];
      std::snprintf(line, sizeof line, "%-9s %-8s %s %s: %lld -> %lld bytes, SQNR %s dB",
                    entry["action"].get<std::string>().c_str(), plan.record.dtype_name().c_str(), t.name.c_str(),
                    shape_text(plan.record.shape).c_str(), static_cast<long long>(t.bytes),
                    static_cast<long long>(bytes_after), number_text(plan.sqnr_db, "%.1f").c_str());
      lines.push_back(line);
      if (plan.record.has_input_scale()) lines.back() += ", input divided by " + plan.record.input_scale;
    } else {
      const auto note = planned.notes.find(t.name);
      entry["action"] = "copied";
      entry["dtype"] = dtype_text(t.dtype);
      entry["source_dtype"] = dtype_text(t.dtype);
      entry["shape"] = t.shape;
      entry["sqnr_db"] = nullptr;
      entry["note"] = note == planned.notes.end() ? Json(nullptr) : Json(note->second);
      ++copied;
      std::string line = "copied    " + dtype_text(t.dtype);
      line.resize(std::max<std::size_t>(line.size() + 1, 19), ' ');
      line += t.name + " " + shape_text(t.shape);
      if (note != planned.notes.end()) line += " (" + note->second + ")";
      lines.push_back(line);
    }
    entry["bytes_before"] = t.bytes;
    entry["bytes_after"] = bytes_after;
    before += static_cast<std::int64_t>(t.bytes);
    after += bytes_after;
    tensors.push_back(entry);
  }
  const double ratio = after == 0 ? 0.0 : static_cast<double>(before) / static_cast<double>(after);
  if (json) {
    Json summary;
    summary["input"] = in;
    summary["output"] = out;
    summary["dtype"] = settings.dtype;
    summary["method"] = settings.method.method;
    if (!calibration.is_null()) summary["calibration"] = calibration;
    summary["tensors"] = tensors;
    summary["totals"] = {{"quantized", quantized},
                         {"copied", copied},
                         {"kept_by_default", planned.kept_by_default},
                         {"skipped", planned.not_applicable},
                         {"bytes_before", before},
                         {"bytes_after", after},
                         {"compression_ratio", json_number(ratio)}};
    print_json(summary);
  } else {
    for (const auto& l : lines) std::printf("%s\n", l.c_str());
    std::printf(
        "%s: %lld tensors quantized, %lld copied (%lld kept by default, %lld could not take the scheme), "
        "%s -> %s (%.2fx smaller)\n",
        out.c_str(), static_cast<long long>(quantized), static_cast<long long>(copied),
        static_cast<long long>(planned.kept_by_default), static_cast<long long>(planned.not_applicable),
        bytes_text(before).c_str(), bytes_text(after).c_str(), ratio);
  }
}

}  // namespace

int run_quantize_command(int argc, char** argv) {
  const std::string command = "shrink quantize";
  return run_command(command, [&] {
    ArgParser args(
        command,
        "Quantize or cast the weights of a safetensors file. Selected float tensors are calibrated on their\n"
        "own values and stored under shrink's convention: integers + NAME_scale (+ NAME_zero_point when\n"
        "affine) + a \"shrink.quant.NAME\" metadata entry. Other tensors are copied unchanged. By default\n"
        "embeddings, the output head, norms, biases and tensors of rank < 2 are kept (--force to quantize\n"
        "them), and a tensor that cannot take the scheme is copied with a note; the report says why each\n"
        "tensor was left alone. Nothing to quantize at all is an error. --method gptq, awq or hqq quantizes\n"
        "the selected Linear weights [out, in] with that method instead (gptq and awq from the statistics of\n"
        "--calibration FILE). --format gguf requantizes a llama.cpp GGUF file into its block formats (--type).");
    declare_quantize_options(args);
    if (!args.parse(argc, argv)) return kExitOk;
    if (args.choice("format", {"shrink", "compressed-tensors", "gguf"}, "shrink") == "gguf")
      return run_quantize_gguf(command, args);
    if (args.has("type")) throw UsageError("--type applies to --format gguf only: write --dtype for safetensors");
    const QuantizeSettings settings = read_quantize_settings(args);
    const TensorSelection selection(args);
    const std::string in = args.arg("IN");
    const std::string out = args.arg("OUT");
    const io::Checkpoint input = io::open_checkpoint(in);
    CheckpointOutput output(input, in, out);
    const std::vector<io::TensorInfo> tensors = input.tensors();
    selection.require_each_pattern_matches(tensor_names(tensors));
    std::unique_ptr<io::CalibrationStatsFile> stats;
    Json calibration;
    if (!settings.method.calibration.empty()) {
      stats = std::make_unique<io::CalibrationStatsFile>(settings.method.calibration);
      const std::vector<std::string> unused = unused_statistics(*stats, tensor_names(tensors));
      warn_unused_statistics(command, *stats, unused);
      calibration = {{"file", stats->path()}, {"unused_statistics", unused}};
    }

    // Pass one, shard by shard (one open at a time); then every layout, so a name clash in any shard stops the run
    // before anything is written.
    bool any_records = false;
    for (const io::CheckpointShard& shard : input.shards)
      any_records = any_records || !io::quantization_records(io::open_shard(shard)).empty();
    nlohmann::ordered_json config;
    if (settings.compressed_tensors) {
      if (any_records)
        throw shrink::Error(in +
                            " holds tensors under shrink's convention, which compressed-tensors cannot read: "
                            "expected a float model (run `shrink dequantize` first)");
      config = output.is_directory() ? read_config_file(input.directory + "/config.json") : read_model_config(in, out);
    }
    const Progress progress(command);
    Planned planned;
    for (const io::CheckpointShard& shard : input.shards)
      plan_tensors(io::open_shard(shard), selection, settings, progress, planned);
    if (planned.plans.empty()) throw_nothing_to_do("quantize", planned.float_tensors, planned.notes);
    std::vector<OutputLayout> layouts;
    std::set<std::string> names;
    for (const io::CheckpointShard& shard : input.shards) {
      layouts.push_back(output_layout(shard.tensors, planned.plans, settings.compressed_tensors));
      for (const auto& d : layouts.back().declarations)
        if (!names.insert(d.name).second)
          throw shrink::Error("tensor \"" + d.name +
                              "\" would be written twice: another shard has a tensor of that "
                              "name, which shrink's convention needs for the scales or zero points of another; "
                              "rename it or --exclude the tensor it belongs to");
    }
    SpillFile spill(output.scratch_directory());
    if (!settings.method.is_rtn()) run_method(input, settings, stats.get(), planned.plans, spill, progress);
    for (std::size_t k = 0; k < input.shards.size(); ++k) {
      const io::SafetensorsFile file = io::open_shard(input.shards[k]);
      const bool has_records = !io::quantization_records(file).empty();
      write_output(output.shard_path(k), file, planned.plans, has_records, settings.compressed_tensors, layouts[k],
                   spill, progress);
    }
    if (settings.compressed_tensors) {
      std::vector<const io::TensorInfo*> unquantized;
      for (const io::TensorInfo& t : tensors)
        if (!planned.plans.count(t.name)) unquantized.push_back(&t);
      config["quantization_config"] = io::compressed_tensors::quantization_config(planned.plans.begin()->second.ct_args,
                                                                                  ignored_linear_layers(unquantized));
      // A checkpoint directory gets it in place of the input's copy; a file output beside OUT, once OUT is complete.
      if (output.is_directory()) output.write_file("config.json", config.dump(2) + "\n");
    }
    output.commit();
    if (settings.compressed_tensors && !output.is_directory()) write_model_config(out, config);
    report(in, out, tensors, planned, settings, calibration, args.flag_set("json"));
    return kExitOk;
  });
}

}  // namespace shrink::cli
