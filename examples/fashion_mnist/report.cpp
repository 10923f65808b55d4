// Printing the results table and writing results.json (see report.hpp).
#include "report.hpp"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shrink/core/error.hpp"

namespace fmnist {

namespace {

// 2143272 -> "2,143,272".
std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n);
  for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<std::size_t>(at), ",");
  return digits;
}

nlohmann::ordered_json settings_json(const Settings& s) {
  nlohmann::ordered_json j;
  j["seed"] = s.seed;
  j["quick"] = s.quick;
  j["data_dir"] = s.data_dir;
  j["data"] = {{"validation_images", s.validation_images},
               {"student_images", s.student_images},
               {"calibration_images", s.calibration_images},
               {"split",
                "one seeded permutation of the 60,000 training images: the last validation_images are held "
                "out (never trained on), the rest train the teacher; its first student_images are the "
                "students' labelled subset, the next calibration_images calibrate INT8 activations"}};
  j["quantization"] = {{"weights", "int8 symmetric, one scale per output row (axis 0), every layer"},
                       {"activations", "uint8 affine, one scale and zero point per layer input, static"},
                       {"integer_matmul", "shrink::cpu::linear_int8 (int32 accumulation), ReLU fused"}};
  j["pruning"] = {{"pruned", "fc1.weight, fc2.weight, fc3.weight (biases never)"},
                  {"magnitude", "global: one |w| threshold over the three weights"},
                  {"bytes",
                   "unstructured: CSR (fp32 values, int32 indices); 2:4: compressed values + 1 index byte "
                   "each; biases fp32 in every row"}};
  j["teacher"] = {{"architecture", "784-512-256-10, ReLU"},
                  {"optimizer", "Adam (0.9, 0.999, 1e-8), cosine decay to 0"},
                  {"epochs", s.teacher_epochs},
                  {"batch_size", s.batch_size},
                  {"learning_rate", s.teacher_learning_rate}};
  j["gradual_pruning"] = {{"final_sparsity", 0.9},
                          {"epochs", s.gradual_epochs},
                          {"pruning_share_of_steps", s.gradual_pruning_share},
                          {"frequency_steps", s.gradual_frequency},
                          {"learning_rate", s.finetune_learning_rate}};
  j["nm_finetune"] = {
      {"pattern", "2:4"}, {"epochs", s.nm_finetune_epochs}, {"learning_rate", s.finetune_learning_rate}};
  j["students"] = {{"architecture", "784-" + std::to_string(s.student_hidden) + "-10, ReLU"},
                   {"epochs", s.student_epochs},
                   {"batch_size", s.student_batch_size},
                   {"learning_rate", s.student_learning_rate},
                   {"kd_temperature", s.kd_temperature},
                   {"kd_alpha", s.kd_alpha}};
  return j;
}

}  // namespace

void print_report(const RunReport& report) {
  std::printf("\n| variant | test acc %% | Δ vs FP32 (points) | weight bytes | stored as | sparsity |\n");
  std::printf("|---|---:|---:|---:|---|---:|\n");
  for (const ResultRow& r : report.rows)
    std::printf("| %s | %.2f | %+.2f | %s | %s | %.1f %% |\n", r.name.c_str(), r.test_accuracy, r.delta_points,
                with_thousands(r.weight_bytes).c_str(), r.storage.c_str(), 100.0 * r.sparsity);
  std::printf("\n");
  for (const TargetCheck& t : report.targets)
    std::printf("%s  %s: %s\n", t.pass ? "PASS" : "MISS", t.target.c_str(), t.measured.c_str());
  std::printf("\ntime:");
  for (const auto& [stage, seconds] : report.stage_seconds) std::printf(" %s %.1f s,", stage.c_str(), seconds);
  std::printf(" total %.1f s\n", report.total_seconds);
}

void write_json_report(const std::string& path, const RunReport& report) {
  nlohmann::ordered_json j;
  j["settings"] = settings_json(report.settings);
  j["teacher"] = {{"final_epoch_train_loss", report.teacher_final_loss},
                  {"safetensors_round_trip_exact", report.teacher_file_round_trip_exact}};
  j["rows"] = nlohmann::ordered_json::array();
  for (const ResultRow& r : report.rows)
    j["rows"].push_back({{"variant", r.name},
                         {"group", r.group},
                         {"test_accuracy_percent", r.test_accuracy},
                         {"delta_vs_fp32_points", r.delta_points},
                         {"validation_accuracy_percent", r.validation_accuracy},
                         {"weight_bytes", r.weight_bytes},
                         {"stored_as", r.storage},
                         {"sparsity", r.sparsity},
                         {"build_seconds", r.build_seconds},
                         {"eval_seconds", r.eval_seconds}});
  j["targets"] = nlohmann::ordered_json::array();
  for (const TargetCheck& t : report.targets)
    j["targets"].push_back({{"target", t.target}, {"measured", t.measured}, {"pass", t.pass}});
  j["stage_seconds"] = nlohmann::ordered_json::object();
  for (const auto& [stage, seconds] : report.stage_seconds) j["stage_seconds"][stage] = seconds;
  j["total_seconds"] = report.total_seconds;
  std::ofstream out(path);
  if (!out) shrink::fail("fmnist::write_json_report", "path", path, "a writable file");
  out << j.dump(2) << "\n";
  if (!out) shrink::fail("fmnist::write_json_report", "path", path, "a file that takes the whole report");
}

}  // namespace fmnist
