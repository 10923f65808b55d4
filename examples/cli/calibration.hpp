// The calibration statistics file (`--calibration FILE`, shrink/io/calibration_stats.hpp) as `shrink quantize` and
// `shrink prune` use it: which Linear a weight belongs to, the checks a weight's statistics pass before any work
// (present, of the weight's input width, from enough calibration rows), the groups of weights that read one input
// (one Hessian and one factor per group), the Linears of the file the model lacks, and the factor of a Hessian with
// its failure said in the command's terms.
//
// A weight "NAME.weight" belongs to the Linear "NAME"; a weight whose name does not end in ".weight" to the Linear of
// its whole name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "report.hpp"
#include "shrink/core/error.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/quant/inverse_hessian.hpp"

namespace shrink::cli {

inline std::string linear_of(const std::string& weight) {
  const std::string suffix = ".weight";
  if (weight.size() > suffix.size() && weight.compare(weight.size() - suffix.size(), suffix.size(), suffix) == 0)
    return weight.substr(0, weight.size() - suffix.size());
  return weight;
}

// The statistics a method reads.
struct StatisticsNeeds {
  bool hessian = false;       // GPTQ, AWQ, SparseGPT
  bool act_norm = false;      // Wanda
  bool act_abs_mean = false;  // AWQ
};

// Checks that `stats` holds what `method` needs for the Linear of `weight`, whose input width is `in`, gathered
// over at least `min_samples` calibration rows. Throws shrink::Error naming the file, the Linear and what was
// expected (the caller adds the tensor's name).
inline void require_statistics(const io::CalibrationStatsFile& stats, const std::string& weight, std::int64_t in,
                               const StatisticsNeeds& needs, std::int64_t min_samples, const std::string& method) {
  const std::string linear = linear_of(weight);
  const std::string file = "calibration file " + stats.path();
  if (!stats.contains(linear))
    throw shrink::Error(file + " has no statistics for the Linear \"" + linear + "\": expected \"" + linear +
                        ".hessian\", \"" + linear + ".act_norm\" or \"" + linear + ".act_abs_mean\" (or \"" + linear +
                        ".same_input_as\" naming a Linear that has them), as --method " + method +
                        " needs; collect them on this model, or leave the tensor out with --exclude");
  const std::string& source = stats.source(linear);
  const std::string shared = source == linear ? "" : " (the statistics of \"" + source + "\", whose input it shares)";
  const std::int64_t features = stats.features(linear);
  if (features != in)
    throw shrink::Error(file + ": the statistics of \"" + linear + "\"" + shared + " have " + std::to_string(features) +
                        " features: expected the weight's input width " + std::to_string(in) +
                        " (statistics of another model?)");
  const std::int64_t samples = stats.samples(linear);
  if (samples < min_samples)
    throw shrink::Error(file + ": the statistics of \"" + linear + "\"" + shared + " come from " +
                        std::to_string(samples) + " calibration rows: expected at least " +
                        std::to_string(min_samples) + " (--min-samples)");
  auto require = [&](bool needed, bool present, const char* kind) {
    if (needed && !present)
      throw shrink::Error(file + " has no " + kind + " for \"" + linear + "\"" + shared + ": expected a tensor \"" +
                          source + "." + kind + "\", as --method " + method + " needs");
  };
  require(needs.hessian, stats.has_hessian(linear), "hessian");
  require(needs.act_norm, stats.has_act_norm(linear), "act_norm");
  require(needs.act_abs_mean, stats.has_act_abs_mean(linear), "act_abs_mean");
}

// `weights` grouped by the Linear whose statistics they read (same_input_as): groups in the order of their first
// weight, weights in the order given. Each group is worked on together, so its Hessian is read and factored once.
inline std::vector<std::vector<std::string>> input_groups(const io::CalibrationStatsFile& stats,
                                                          const std::vector<std::string>& weights) {
  std::vector<std::vector<std::string>> groups;
  std::map<std::string, std::size_t> group_of;
  for (const std::string& w : weights) {
    const std::string& source = stats.source(linear_of(w));
    const auto found = group_of.find(source);
    if (found == group_of.end()) {
      group_of.emplace(source, groups.size());
      groups.push_back({w});
    } else {
      groups[found->second].push_back(w);
    }
  }
  return groups;
}

// The Linears of `stats` (with statistics of their own or through an alias) that have no weight among `tensors`:
// neither "LINEAR.weight" nor "LINEAR".
inline std::vector<std::string> unused_statistics(const io::CalibrationStatsFile& stats,
                                                  const std::vector<std::string>& tensors) {
  std::set<std::string> linears;
  for (const std::string& t : tensors) linears.insert(linear_of(t));
  std::vector<std::string> unused;
  for (const std::string& l : stats.linears())
    if (!linears.count(l)) unused.push_back(l);
  return unused;
}

// One line on stderr when the file has statistics for Linears the model lacks: not an error (a file gathered on the
// whole model serves one shard of it too), but the sign of a file from another model when it is most of them.
inline void warn_unused_statistics(const std::string& command, const io::CalibrationStatsFile& stats,
                                   const std::vector<std::string>& unused) {
  if (unused.empty()) return;
  std::fprintf(stderr, "%s: warning: calibration file %s has statistics for %zu Linear%s the input lacks (\"%s\"%s)\n",
               command.c_str(), stats.path().c_str(), unused.size(), unused.size() == 1 ? "" : "s",
               unused.front().c_str(), unused.size() > 1 ? ", ..." : "");
}

// The factor (quant/inverse_hessian.hpp) of the Hessian of Linear `source`, read from `stats` (every value checked)
// and released once factored. A Hessian that is not positive-definite after damping is an Error in the command's
// terms (--damp).
inline quant::InverseHessianFactor input_factor(const io::CalibrationStatsFile& stats, const std::string& source,
                                                const quant::InverseHessianOptions& options) {
  const quant::Hessian h = stats.hessian(source);
  try {
    return quant::inverse_hessian_factor(h, options);
  } catch (const shrink::Error& e) {
    if (std::string(e.what()).find("positive-definite") == std::string::npos) throw;
    throw shrink::Error("calibration file " + stats.path() + ": the Hessian of \"" + source + "\" [" +
                        std::to_string(h.features) + ", " + std::to_string(h.features) +
                        "] is not positive-definite after damping by " + number_text(options.damp_percent, "%g") +
                        " of its mean diagonal (--damp): expected the Hessian of real inputs; raise --damp or "
                        "gather more calibration rows");
  }
}

}  // namespace shrink::cli
