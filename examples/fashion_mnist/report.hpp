// The results of a run: the table (printed as Markdown), the target checks, and the JSON file with the settings.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "settings.hpp"

namespace fmnist {

struct ResultRow {
  std::string name;
  std::string group;
  std::string storage;
  double test_accuracy = 0.0;        // %
  double validation_accuracy = 0.0;  // %, on the held-out part of the training set
  double delta_points = 0.0;         // test accuracy - FP32 test accuracy
  std::int64_t weight_bytes = 0;
  double sparsity = 0.0;
  double build_seconds = 0.0;
  double eval_seconds = 0.0;
};

struct TargetCheck {
  std::string target;    // e.g. "teacher >= 88 % test accuracy"
  std::string measured;  // e.g. "89.41 %"
  bool pass = false;
};

struct RunReport {
  Settings settings;
  std::vector<ResultRow> rows;
  std::vector<TargetCheck> targets;
  std::vector<std::pair<std::string, double>> stage_seconds;  // in run order
  double total_seconds = 0.0;
  double teacher_final_loss = 0.0;
  bool teacher_file_round_trip_exact = false;
};

// The Markdown table, then one PASS/MISS line per target.
void print_report(const RunReport& report);

// results.json: settings, rows, targets, stage times.
void write_json_report(const std::string& path, const RunReport& report);

}  // namespace fmnist
