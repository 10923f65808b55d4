// `shrink prune IN OUT --method ...`: zero weights of the selected tensors (magnitude, global, random, structured,
// N:M or Wanda masks from shrink/prune) and write them back dense, in their own dtype; copy the rest. SparseGPT
// (prune/sparsegpt.hpp) also updates the weights it keeps, from the Hessians of `--calibration FILE`: it runs before
// the output is written, the Linears that read one input together (one factor at a time), each result kept in a
// scratch file (spill_file.hpp) until its turn, so every error comes before the output and memory holds one tensor.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "calibration.hpp"
#include "candidates.hpp"
#include "checkpoint_output.hpp"
#include "commands.hpp"
#include "output_layout.hpp"
#include "paths.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "selection.hpp"
#include "shrink/io/dequantize_file.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/prune/sparsegpt.hpp"
#include "shrink/prune/structured.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/prune/wanda.hpp"
#include "spill_file.hpp"
#include "tensor_context.hpp"

namespace shrink::cli {

namespace {

struct PruneSettings {
  std::string method;
  double sparsity = 0.0;
  prune::NmPattern pattern{2, 4};
  bool use_pattern = false;  // nm, or wanda with --n/--m
  int dim = 0;
  prune::NormOrder norm = prune::NormOrder::l2;
  std::uint64_t seed = 0;
  std::string activations;
  std::string calibration;  // wanda: act_norm; sparsegpt: hessian
  double damp = 0.01;       // sparsegpt: λ = damp · mean(diag H)
  std::int64_t min_samples = 128;
};

PruneSettings read_prune_settings(const ArgParser& args) {
  PruneSettings s;
  s.method = args.choice("method", {"magnitude", "global", "random", "structured", "nm", "wanda", "sparsegpt"}, "");
  if (s.method.empty()) throw UsageError("--method is required: magnitude|global|random|structured|nm|wanda|sparsegpt");
  auto only_for = [&](const char* option, std::initializer_list<const char*> methods) {
    if (!args.has(option)) return;
    for (const char* m : methods)
      if (s.method == m) return;
    std::string list;
    for (const char* m : methods) list += (list.empty() ? "" : " or ") + std::string(m);
    throw UsageError(std::string("--") + option + " does not apply to --method " + s.method + ": only to " + list);
  };
  only_for("n", {"nm", "wanda", "sparsegpt"});
  only_for("m", {"nm", "wanda", "sparsegpt"});
  only_for("dim", {"structured"});
  only_for("norm", {"structured"});
  only_for("seed", {"random"});
  only_for("activations", {"wanda"});
  only_for("calibration", {"wanda", "sparsegpt"});
  only_for("damp", {"sparsegpt"});
  only_for("min-samples", {"wanda", "sparsegpt"});

  s.use_pattern = s.method == "nm" || args.has("n") || args.has("m");
  if (s.use_pattern) {
    s.pattern.m = static_cast<int>(args.integer("m", 2, 256, 4));
    s.pattern.n = static_cast<int>(args.integer("n", 1, 255, 2));
    if (s.pattern.n >= s.pattern.m)
      throw UsageError("--n " + std::to_string(s.pattern.n) + " --m " + std::to_string(s.pattern.m) +
                       ": expected n < m (keep n of every m)");
    if (args.has("sparsity"))
      throw UsageError("--sparsity does not apply to an N:M pattern, which prunes 1 - n/m of every group");
  } else {
    if (!args.has("sparsity")) throw UsageError("--sparsity S is required for --method " + s.method);
    s.sparsity = args.number("sparsity", 0.0, 1.0, 0.0, /*max_exclusive=*/true);
  }
  s.dim = static_cast<int>(args.integer("dim", -8, 7, 0));
  const std::string norm = args.choice("norm", {"1", "2", "inf"}, "2");
  s.norm = norm == "1" ? prune::NormOrder::l1 : norm == "2" ? prune::NormOrder::l2 : prune::NormOrder::inf;
  s.seed = static_cast<std::uint64_t>(args.integer("seed", 0, INT64_MAX, 0));
  if (s.method == "wanda") {
    if (args.has("activations") && args.has("calibration"))
      throw UsageError("--method wanda takes its activation norms from --activations or --calibration: give one");
    if (!args.has("activations") && !args.has("calibration"))
      throw UsageError(
          "--method wanda needs --activations FILE: a safetensors file holding, under each weight's "
          "name, its per-input-channel activation norms [in] or sample activations [..., in]; or "
          "--calibration FILE, a calibration statistics file holding <linear>.act_norm");
    if (args.has("min-samples") && !args.has("calibration"))
      throw UsageError("--min-samples applies to the statistics of --calibration, not to --activations");
    s.activations = args.text("activations", "");
  }
  if (s.method == "sparsegpt" && !args.has("calibration"))
    throw UsageError(
        "--method sparsegpt needs --calibration FILE: the statistics of each Linear's input (a file "
        "written by shrink::io::save_calibration_stats, holding <linear>.hessian)");
  s.calibration = args.text("calibration", "");
  s.damp = args.number("damp", 0.0, 100.0, 0.01);
  s.min_samples = args.integer("min-samples", 1, INT64_MAX, 128);
  return s;
}

// A seed for one tensor: the user's seed mixed with an FNV-1a hash of the name, so a tensor's mask does not
// depend on which other tensors are selected.
std::uint64_t tensor_seed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return seed ^ h;
}

// Why the flags cannot apply to tensor t ("" when they can): such a tensor is copied with a note.
std::string shape_mismatch(const io::TensorInfo& t, const PruneSettings& s) {
  const int rank = static_cast<int>(t.shape.size());
  if (t.numel() == 0) return "has no elements";
  if (s.method == "structured") {
    if (rank < 2) return "has shape " + shape_text(t.shape) + ": structured pruning needs rank >= 2";
    if (s.dim < -rank || s.dim >= rank)
      return "--dim " + std::to_string(s.dim) + " is outside the shape " + shape_text(t.shape) +
             ": expected a dim in [" + std::to_string(-rank) + ", " + std::to_string(rank) + ")";
  }
  if (s.method == "wanda" && rank != 2)
    return "has shape " + shape_text(t.shape) + ": Wanda prunes Linear weights [out, in]";
  if (s.method == "sparsegpt" && rank != 2)
    return "has shape " + shape_text(t.shape) + ": SparseGPT prunes Linear weights [out, in]";
  if (s.use_pattern && (rank < 1 || t.shape.back() % s.pattern.m != 0))
    return "has shape " + shape_text(t.shape) +
           ": an N:M pattern needs a last dimension divisible by m = " + std::to_string(s.pattern.m);
  return "";
}

// Per-input-channel activation norms for Wanda from the activations file: [in] norms, or samples [..., in].
std::vector<float> input_norms(const io::SafetensorsFile& activations, const io::TensorInfo& weight) {
  if (!activations.contains(weight.name))
    throw shrink::Error(activations.path() + ": no tensor \"" + weight.name +
                        "\": expected the activation norms [in] or sample activations [..., in] of this weight");
  const std::vector<std::int64_t> shape = io::logical_shape(activations, weight.name);
  const std::int64_t in = weight.shape[1];
  if (shape.empty() || shape.back() != in)
    throw shrink::Error(activations.path() + ": tensor \"" + weight.name + "\" has shape " + shape_text(shape) +
                        ": expected [" + std::to_string(in) + "] norms or [..., " + std::to_string(in) + "] activations");
  const std::vector<float> values = io::read_float(activations, weight.name);
  if (shape.size() == 1) return values;  // wanda_mask checks them (finite, >= 0)
  prune::ActivationNormObserver observer;
  observer.observe(TensorView<const float>(values.data(), Shape(shape)));
  return observer.norms();
}

// Wanda's norms from the calibration file: act_norm [in] of the weight's Linear (or of the one it shares its input
// with), checked when read.
std::vector<float> calibration_norms(const io::CalibrationStatsFile& stats, const io::TensorInfo& weight) {
  std::vector<float> norms;
  for (double v : stats.act_norm(linear_of(weight.name))) norms.push_back(static_cast<float>(v));
  return norms;
}

prune::Mask mask_for(const io::SafetensorsFile& file, const io::SafetensorsFile* activations,
                     const io::CalibrationStatsFile* stats, const io::TensorInfo& t, const PruneSettings& s) {
  const std::vector<float> values = io::read_float(file, t.name);
  require_finite(values, t.shape);
  const TensorView<const float> w(values.data(), Shape(t.shape));
  const prune::Amount amount = prune::Amount::fraction(s.sparsity);
  if (s.method == "magnitude") return prune::l1_unstructured_mask(w, amount);
  if (s.method == "random") return prune::random_unstructured_mask(w.shape(), amount, tensor_seed(s.seed, t.name));
  if (s.method == "structured") return prune::ln_structured_mask(w, amount, s.norm, s.dim);
  if (s.method == "nm") return prune::nm_mask(w, s.pattern);
  const std::vector<float> norms = stats != nullptr ? calibration_norms(*stats, t) : input_norms(*activations, t);
  return s.use_pattern ? prune::wanda_nm_mask(w, norms, s.pattern) : prune::wanda_mask(w, norms, amount);
}

// The command line of `shrink prune`.
void declare_prune_options(ArgParser& args) {
  args.positional("IN", "input .safetensors file, checkpoint directory or sharded index .json")
      .positional("OUT", "output file; a new or empty directory when IN is a directory or an index (never the input)");
  args.option("method", "M",
              "magnitude (smallest |w| of each tensor), global (smallest |w| over all selected tensors), random, "
              "structured (whole slices by Ln norm), nm (keep N of every M along the last dim), wanda "
              "(|w| * activation norm, per output row), sparsegpt (SparseGPT: masks from the input Hessian, the kept "
              "weights updated to make up for the pruned ones)");
  args.option("sparsity", "S", "fraction pruned, in [0, 1) (not with N:M patterns)");
  args.option("n", "N", "nm / wanda / sparsegpt: keep N of every M", "2");
  args.option("m", "M", "nm / wanda / sparsegpt: group size M along the last (input) dimension", "4");
  args.option("dim", "D", "structured: the dim whose slices are pruned (0: output rows of [out, in])", "0");
  args.option("norm", "P", "structured: 1|2|inf, the slice norm", "2");
  args.option("seed", "K", "random: seed (mixed with each tensor's name)", "0");
  args.option("activations", "FILE",
              "wanda: safetensors file with, under each weight's name, norms [in] or activations [..., in]");
  args.option("calibration", "FILE",
              "sparsegpt: calibration statistics of each Linear's input (<linear>.hessian, .samples; see "
              "docs/cli.md); wanda: their <linear>.act_norm, in place of --activations");
  args.option("damp", "F", "sparsegpt: damping, F times the mean Hessian diagonal added to it", "0.01");
  args.option("min-samples", "N",
              "sparsegpt, wanda with --calibration: fewest calibration rows a Linear's "
              "statistics may come from",
              "128");
  TensorSelection::declare(args);
  args.flag("json", "print a JSON summary on stdout");
  args.epilog(
      "example: shrink prune model.safetensors model-24.safetensors --method nm --n 2 --m 4\n"
      "         shrink prune model.safetensors model-sparse.safetensors --method sparsegpt --calibration\n"
      "         stats.safetensors --sparsity 0.5");
}

// The tensors to prune (by name), and why each other float tensor is copied.
struct Selected {
  std::set<std::string> tensors;
  std::map<std::string, std::string> notes;
  std::int64_t kept_by_default = 0;  // by tensor_roles.hpp's rules
  std::int64_t not_applicable = 0;   // the flags do not fit its shape
  std::int64_t float_tensors = 0;    // float tensors not already quantized
};

// Adds the tensors of one file (a shard) to prune: float, not under the convention, not kept by default unless
// --force, and of a shape the flags fit.
void select_tensors(const io::SafetensorsFile& file, const TensorSelection& selection, const PruneSettings& settings,
                    Selected& selected) {
  Candidates candidates = find_candidates(file, selection, "prune");
  selected.notes.insert(candidates.notes.begin(), candidates.notes.end());
  selected.kept_by_default += candidates.kept_by_default;
  selected.float_tensors += candidates.float_tensors;
  for (const io::TensorInfo* candidate : candidates.tensors) {
    const io::TensorInfo& t = *candidate;
    const std::string mismatch = shape_mismatch(t, settings);
    if (!mismatch.empty()) {
      selected.notes[t.name] = "skipped: " + mismatch;
      ++selected.not_applicable;
      continue;
    }
    selected.tensors.insert(t.name);
  }
}

// --method global: every selected tensor's mask, computed together before writing (the one step that holds every
// selected tensor at once: one threshold over all of them); other methods: none here.
std::map<std::string, prune::Mask> global_masks(const io::Checkpoint& input, const std::set<std::string>& selected,
                                                const PruneSettings& settings) {
  std::map<std::string, prune::Mask> masks;
  if (settings.method != "global" || selected.empty()) return masks;
  std::vector<std::vector<float>> values;
  std::vector<io::TensorInfo> infos;
  for (const io::CheckpointShard& shard : input.shards) {
    const io::SafetensorsFile file = io::open_shard(shard);
    for (const io::TensorInfo& t : shard.tensors) {
      if (!selected.count(t.name)) continue;
      values.push_back(io::read_float(file, t.name));
      infos.push_back(t);
      in_tensor_context(t.name, [&] { require_finite(values.back(), t.shape); });
    }
  }
  std::vector<TensorView<const float>> views;
  for (std::size_t i = 0; i < infos.size(); ++i) views.emplace_back(values[i].data(), Shape(infos[i].shape));
  std::vector<prune::Mask> global = prune::global_unstructured_masks(views, prune::Amount::fraction(settings.sparsity));
  for (std::size_t i = 0; i < infos.size(); ++i) masks.emplace(infos[i].name, std::move(global[i]));
  return masks;
}

// The stored bytes of tensor t with the elements its mask prunes set to zero.
ByteBuffer pruned_bytes(const io::SafetensorsFile& file, const io::TensorInfo& t, const prune::Mask& mask) {
  // Zero bits are +0 in every float format: clear the pruned elements' bytes in place of a typed write.
  const io::ByteView source = file.bytes(t.name);
  ByteBuffer bytes(source.size);
  std::memcpy(bytes.data(), source.data, source.size);
  const std::size_t width = static_cast<std::size_t>(element_bits(t.dtype) / 8);
  for (std::int64_t k = 0; k < mask.size(); ++k)
    if (!mask.kept(k)) std::memset(bytes.data() + static_cast<std::size_t>(k) * width, 0, width);
  return bytes;
}

// The calibration file's statistics for every chosen tensor (in input order), checked before any work: present, of
// the weight's input width, from enough rows, holding what the method reads (Wanda's act_norm values read and
// checked too: they are small).
void check_statistics(const io::CalibrationStatsFile& stats, const std::vector<io::TensorInfo>& tensors,
                      const std::set<std::string>& chosen, const PruneSettings& s) {
  StatisticsNeeds needs;
  needs.act_norm = s.method == "wanda";
  needs.hessian = s.method == "sparsegpt";
  for (const io::TensorInfo& t : tensors) {
    if (!chosen.count(t.name)) continue;
    in_tensor_context(t.name, [&] {
      require_statistics(stats, t.name, t.shape.back(), needs, s.min_samples, s.method);
      if (needs.act_norm) calibration_norms(stats, t);
    });
  }
}

// --method sparsegpt, before the output is written: SparseGPT group by group (the Linears that read one input share
// the factor of its Hessian, made once and released after the group), each pruned weight's bytes, in its own dtype,
// put in the scratch file. Returns where each lies.
std::map<std::string, SpillRef> run_sparsegpt(const io::Checkpoint& input, const std::vector<io::TensorInfo>& tensors,
                                              const std::set<std::string>& chosen, const PruneSettings& s,
                                              const io::CalibrationStatsFile& stats, SpillFile& spill,
                                              const Progress& progress) {
  prune::SparseGptOptions options;
  if (s.use_pattern)
    options.pattern = s.pattern;
  else
    options.sparsity = s.sparsity;
  options.damp_percent = s.damp;
  std::vector<std::string> names;  // in input order
  for (const io::TensorInfo& t : tensors)
    if (chosen.count(t.name)) names.push_back(t.name);
  io::CheckpointReader reader(input);
  std::map<std::string, SpillRef> results;
  for (const std::vector<std::string>& group : input_groups(stats, names)) {
    const quant::InverseHessianFactor factor = in_tensor_context(group.front(), [&] {
      return input_factor(stats, stats.source(linear_of(group.front())), prune::inverse_hessian_options(options));
    });
    for (const std::string& name : group) {
      progress.step("sparsegpt " + name, results.size(), names.size());
      in_tensor_context(name, [&] {
        const io::SafetensorsFile& file = reader.file_of(name);
        const io::TensorInfo& t = file.info(name);
        const std::vector<float> x = io::read_float(file, name);
        require_finite(x, t.shape);
        const prune::SparseGptResult r =
            prune::sparsegpt_prune(TensorView<const float>(x.data(), Shape(t.shape)), factor, options);
        results[name] = spill.append(io::float_values_as(r.weight, t.dtype));
      });
    }
  }
  return results;
}

// Streams the output: the chosen tensors pruned (SparseGPT's from the scratch file; others with their mask from
// `masks`, or one computed when their turn comes), the others copied, all laid out for alignment.
void write_output(const std::string& out, const io::SafetensorsFile& file, const std::set<std::string>& chosen,
                  std::map<std::string, prune::Mask>& masks, const io::SafetensorsFile* activations,
                  const io::CalibrationStatsFile* stats, const std::map<std::string, SpillRef>& results,
                  const SpillFile& spill, const PruneSettings& settings, const Progress& progress) {
  std::vector<io::TensorDeclaration> declarations;
  for (const io::TensorInfo& t : file.tensors()) declarations.push_back({t.name, t.dtype, t.shape});
  sort_for_alignment(declarations);
  io::SafetensorsWriter writer(out);
  for (const auto& d : declarations) writer.add_tensor(d.name, d.dtype, d.shape);
  for (const auto& m : file.metadata()) writer.add_metadata(m.first, m.second);
  writer.write_header();
  for (std::size_t i = 0; i < declarations.size(); ++i) {
    const io::TensorInfo& t = file.info(declarations[i].name);
    if (!chosen.count(t.name)) {
      writer.write(t.name, file.bytes(t.name));
      continue;
    }
    progress.step(t.name, i, declarations.size());
    const auto result = results.find(t.name);
    if (result != results.end()) {
      const ByteBuffer bytes = spill.read(result->second);
      writer.write(t.name, bytes.data(), bytes.size());
      continue;
    }
    const prune::Mask mask = in_tensor_context(t.name, [&] {
      const auto found = masks.find(t.name);
      return found != masks.end() ? found->second : mask_for(file, activations, stats, t, settings);
    });
    const ByteBuffer bytes = pruned_bytes(file, t, mask);
    writer.write(t.name, bytes.data(), bytes.size());
    masks.erase(t.name);
  }
  writer.finish();
}

// What the report shows: a JSON entry per tensor, a line per pruned one, and the pruned tensors' totals.
struct PruneReport {
  Json tensors = Json::array();
  std::int64_t elements = 0, zeros = 0;
  std::vector<std::string> lines;
};

// Adds to the report one written file (a shard) and its input's `tensors`, read back so the sparsity shown is the
// sparsity stored.
void read_report(const std::string& out, const std::vector<io::TensorInfo>& tensors,
                 const std::set<std::string>& chosen, const std::map<std::string, std::string>& notes,
                 PruneReport& report) {
  const io::SafetensorsFile written(out);
  for (const io::TensorInfo& t : tensors) {
    Json entry;
    entry["name"] = t.name;
    const bool pruned = chosen.count(t.name) != 0;
    entry["action"] = pruned ? "pruned" : "copied";
    entry["dtype"] = dtype_text(t.dtype);
    entry["shape"] = t.shape;
    if (pruned) {
      const std::int64_t z = count_zeros(io::read_float(written, t.name));
      entry["elements"] = t.numel();
      entry["zeros"] = z;
      entry["sparsity"] = fraction(z, t.numel());
      report.elements += t.numel();
      report.zeros += z;
      char line[512];
      std::snprintf(line, sizeof line, "pruned  %s %s: sparsity %.4f", t.name.c_str(), shape_text(t.shape).c_str(),
                    fraction(z, t.numel()));
      report.lines.push_back(line);
    } else {
      const auto note = notes.find(t.name);
      entry["note"] = note == notes.end() ? Json(nullptr) : Json(note->second);
      if (note != notes.end())
        report.lines.push_back("copied  " + t.name + " " + shape_text(t.shape) + " (" + note->second + ")");
    }
    report.tensors.push_back(entry);
  }
}

// Prints the report: a JSON summary (--json), or a line per pruned tensor and the totals.
void print_report(const std::string& in, const std::string& out, std::size_t tensor_count, const PruneReport& r,
                  const Selected& selected, const PruneSettings& settings, const Json& calibration, bool json) {
  const std::size_t pruned = selected.tensors.size();
  if (json) {
    Json report;
    report["input"] = in;
    report["output"] = out;
    report["method"] = settings.method;
    report["target_sparsity"] = settings.use_pattern ? Json(nullptr) : Json(settings.sparsity);
    report["pattern"] = settings.use_pattern ? Json(prune::to_string(settings.pattern)) : Json(nullptr);
    if (!calibration.is_null()) report["calibration"] = calibration;
    report["tensors"] = r.tensors;
    report["totals"] = {{"pruned", pruned},
                        {"copied", tensor_count - pruned},
                        {"kept_by_default", selected.kept_by_default},
                        {"skipped", selected.not_applicable},
                        {"elements", r.elements},
                        {"zeros", r.zeros},
                        {"sparsity", fraction(r.zeros, r.elements)}};
    print_json(report);
  } else {
    for (const auto& l : r.lines) std::printf("%s\n", l.c_str());
    std::printf(
        "%s: %zu tensors pruned (%s), %zu copied (%lld kept by default, %lld did not fit the method); sparsity "
        "of the pruned tensors %.4f\n",
        out.c_str(), pruned, settings.method.c_str(), tensor_count - pruned,
        static_cast<long long>(selected.kept_by_default), static_cast<long long>(selected.not_applicable),
        fraction(r.zeros, r.elements));
  }
}

}  // namespace

int run_prune_command(int argc, char** argv) {
  const std::string command = "shrink prune";
  return run_command(command, [&] {
    ArgParser args(command,
                   "Prune the weights of a safetensors file: selected float tensors get a mask from the chosen method\n"
                   "and are written back dense, in their own dtype, with the pruned elements set to zero. Other\n"
                   "tensors are copied unchanged. By default embeddings, the output head, norms, biases and tensors\n"
                   "of rank < 2 are kept (--force to prune them), and a tensor whose shape the method does not fit\n"
                   "is copied with a note; the report says why each tensor was left alone. Nothing to prune at all\n"
                   "is an error. --method sparsegpt (from the Hessians of --calibration FILE) also updates the\n"
                   "weights it keeps, to make up for those it prunes.");
    declare_prune_options(args);
    if (!args.parse(argc, argv)) return kExitOk;
    const PruneSettings settings = read_prune_settings(args);
    const TensorSelection selection(args);
    const std::string in = args.arg("IN");
    const std::string out = args.arg("OUT");
    const bool json = args.flag_set("json");
    const io::Checkpoint input = io::open_checkpoint(in);
    CheckpointOutput output(input, in, out);
    const std::vector<io::TensorInfo> tensors = input.tensors();
    selection.require_each_pattern_matches(tensor_names(tensors));

    Selected selected;
    for (const io::CheckpointShard& shard : input.shards)
      select_tensors(io::open_shard(shard), selection, settings, selected);
    if (selected.tensors.empty()) throw_nothing_to_do("prune", selected.float_tensors, selected.notes);
    std::unique_ptr<io::SafetensorsFile> activations;
    if (!settings.activations.empty()) activations = std::make_unique<io::SafetensorsFile>(settings.activations);
    std::unique_ptr<io::CalibrationStatsFile> stats;
    Json calibration;
    if (!settings.calibration.empty()) {
      stats = std::make_unique<io::CalibrationStatsFile>(settings.calibration);
      const std::vector<std::string> unused = unused_statistics(*stats, tensor_names(tensors));
      warn_unused_statistics(command, *stats, unused);
      calibration = {{"file", stats->path()}, {"unused_statistics", unused}};
      check_statistics(*stats, tensors, selected.tensors, settings);
    }

    const Progress progress(command);
    std::map<std::string, prune::Mask> masks = global_masks(input, selected.tensors, settings);  // else one at a time
    SpillFile spill(output.scratch_directory());
    const std::map<std::string, SpillRef> results =
        settings.method == "sparsegpt"
            ? run_sparsegpt(input, tensors, selected.tensors, settings, *stats, spill, progress)
            : std::map<std::string, SpillRef>{};
    for (std::size_t k = 0; k < input.shards.size(); ++k)
      write_output(output.shard_path(k), io::open_shard(input.shards[k]), selected.tensors, masks, activations.get(),
                   stats.get(), results, spill, settings, progress);
    output.commit();
    PruneReport report;
    for (std::size_t k = 0; k < input.shards.size(); ++k)
      read_report(output.final_shard_path(k), input.shards[k].tensors, selected.tensors, selected.notes, report);
    print_report(in, out, tensors.size(), report, selected, settings, calibration, json);
    return kExitOk;
  });
}

}  // namespace shrink::cli
