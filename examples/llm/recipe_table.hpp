// The recipe table of the LLM example: for each recipe, compress every block linear, then measure perplexity on
// the evaluation span, with the weight bytes as stored, the time to compress and the forward pass's tokens/s.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "llama_forward.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"

namespace llm {

struct TableRow {
  std::string recipe;
  std::string path;
  Perplexity eval;
  double delta_percent = 0.0;  // perplexity change from the first row (base), in percent
  std::int64_t weight_bytes = 0;
  double compress_seconds = 0.0;     // the method, statistics given
  double calibration_seconds = 0.0;  // sequential recipes: the calibration passes through the blocks
};

struct Table {
  std::vector<TableRow> rows;
  std::int64_t calibration_tokens = 0;
  double calibration_seconds = 0.0;
};

struct TableInputs {
  const LlamaWeights* weights = nullptr;
  std::vector<std::int32_t> eval_ids;
  WindowSpan eval_span;
  std::vector<std::int32_t> calibration_ids;
  WindowSpan calibration_span;
  HessianJitter hessian_jitter;      // the sequential recipes' Hessians perturbed (0: not)
  std::vector<std::string> recipes;  // names from kRecipes, base first
};

// `progress` is called after each row (for printing as the table grows).
template <class Progress>
Table run_table(const TableInputs& in, Progress&& progress) {
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const LlamaWeights& w = *in.weights;
  require_span(in.eval_ids, in.eval_span, "evaluation text");
  std::vector<const RecipeInfo*> recipes;
  bool calibrated = false, sequential = false;
  for (const std::string& name : in.recipes) {
    recipes.push_back(&recipe_info(name));
    calibrated |= recipes.back()->calibrated;
    sequential |= recipes.back()->sequential;
  }
  if (calibrated || sequential) require_span(in.calibration_ids, in.calibration_span, "calibration text");

  const auto head = float_head(w);
  Table table;
  std::unique_ptr<CalibrationStats> stats;
  if (calibrated) {  // the float model's linear inputs over the calibration span
    const auto start = clock::now();
    stats =
        std::make_unique<CalibrationStats>(float_model_statistics(w, head, in.calibration_ids, in.calibration_span));
    table.calibration_tokens = in.calibration_span.tokens();
    table.calibration_seconds = seconds_since(start);
  }
  for (const RecipeInfo* r : recipes) {
    TableRow row;
    row.recipe = r->name;
    row.path = r->path;
    const auto start = clock::now();
    SequentialTiming timing;
    const CompressedModel m = r->sequential ? compress_model_sequential(w, *r, head, in.calibration_ids,
                                                                        in.calibration_span, &timing, in.hessian_jitter)
                                            : compress_model(w, *r, head, stats.get());
    row.compress_seconds = r->sequential ? timing.method_seconds : seconds_since(start);
    row.calibration_seconds = timing.forward_seconds;
    row.weight_bytes = m.linear_bytes();
    row.eval = evaluate(m, in.eval_ids, in.eval_span, "evaluation text");
    const double base = table.rows.empty() ? row.eval.perplexity() : table.rows.front().eval.perplexity();
    row.delta_percent = 100.0 * (row.eval.perplexity() / base - 1.0);
    table.rows.push_back(row);
    progress(table.rows.back());
  }
  return table;
}

inline void print_table_header(std::FILE* out) {
  std::fprintf(out, "%-16s %-26s %11s %9s %10s %11s %8s %9s\n", "recipe", "path", "perplexity", "change", "weight MB",
               "compress s", "calib s", "tokens/s");
}

inline void print_table_row(std::FILE* out, const TableRow& r) {
  std::fprintf(out, "%-16s %-26s %11.4f %+8.2f%% %10.2f %11.2f %8.2f %9.1f\n", r.recipe.c_str(), r.path.c_str(),
               r.eval.perplexity(), r.delta_percent, static_cast<double>(r.weight_bytes) / 1e6, r.compress_seconds,
               r.calibration_seconds, r.eval.tokens_per_second());
  std::fflush(out);
}

}  // namespace llm
