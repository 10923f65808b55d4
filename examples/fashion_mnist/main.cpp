// Fashion-MNIST end to end: train a teacher MLP, save it as safetensors, load it back, compress it every way the
// issue lists (16-bit casts, INT8 with each calibrator, INT8 activations, magnitude and 2:4 pruning, distillation
// into a small student), and report test accuracy, size and the targets as a table and as results.json.
//
//   build/release/examples/fashion_mnist/fashion_mnist [--data DIR] [--out DIR] [--seed K] [--epochs E] [--quick]
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "model_file.hpp"
#include "options.hpp"
#include "random.hpp"
#include "report.hpp"
#include "stopwatch.hpp"
#include "training.hpp"
#include "variants.hpp"

namespace fmnist {

namespace {

std::string format(const char* pattern, double a, double b = 0.0, double c = 0.0) {
  char text[160];
  std::snprintf(text, sizeof text, pattern, a, b, c);
  return text;
}

Mlp train_teacher(const FashionMnist& data, const TrainingSplit& split, const Settings& s, double& final_loss) {
  Mlp teacher = he_initialized_mlp({kPixels, 512, 256, kClasses}, derive_seed(s.seed, SeedStream::teacher_init));
  TrainSchedule schedule;
  schedule.epochs = s.teacher_epochs;
  schedule.batch_size = s.batch_size;
  schedule.learning_rate = s.teacher_learning_rate;
  schedule.batch_seed = derive_seed(s.seed, SeedStream::teacher_batches);
  final_loss = train(teacher, data.train.images, split.teacher_train, schedule, cross_entropy_loss(data.train.labels))
                   .last_epoch_loss;
  return teacher;
}

bool same_weights(const Mlp& a, const Mlp& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (std::size_t k = 0; k < a.layers.size(); ++k)
    if (a.layers[k].weight != b.layers[k].weight || a.layers[k].bias != b.layers[k].bias) return false;
  return true;
}

ResultRow evaluate(const Variant& v, const FashionMnist& data, const ImageSet& validation) {
  const auto start = Clock::now();
  ResultRow r;
  r.name = v.name;
  r.group = v.group;
  r.storage = v.storage;
  r.weight_bytes = v.weight_bytes;
  r.sparsity = v.sparsity;
  r.build_seconds = v.build_seconds;
  r.test_accuracy = accuracy_percent(v.logits(data.test.images), data.test.labels);
  r.validation_accuracy = accuracy_percent(v.logits(validation.images), validation.labels);
  r.eval_seconds = seconds_since(start);
  return r;
}

const ResultRow* find_row(const std::vector<ResultRow>& rows, const std::string& group, const std::string& name_part) {
  for (const ResultRow& r : rows)
    if (r.group == group && r.name.find(name_part) != std::string::npos) return &r;
  return nullptr;
}

std::vector<TargetCheck> check_targets(const std::vector<ResultRow>& rows) {
  std::vector<TargetCheck> checks;
  const ResultRow& fp32 = rows.front();
  checks.push_back(
      {"teacher (FP32) >= 88 % test accuracy", format("%.2f %%", fp32.test_accuracy), fp32.test_accuracy >= 88.0});
  for (const ResultRow& r : rows)
    if (r.group == "int8 weights")
      checks.push_back(
          {r.name + ": within 0.5 points of FP32", format("%+.2f points", r.delta_points), r.delta_points >= -0.5});
  if (const ResultRow* nm = find_row(rows, "2:4", "fine-tune"))
    checks.push_back(
        {nm->name + ": within 1 point of FP32", format("%+.2f points", nm->delta_points), nm->delta_points >= -1.0});
  const ResultRow* ce = find_row(rows, "student", "cross-entropy");
  const ResultRow* kd = find_row(rows, "student", "KD");
  if (ce != nullptr && kd != nullptr) {
    const double gain = kd->test_accuracy - ce->test_accuracy;
    checks.push_back({"KD student >= 1 point above the cross-entropy student",
                      format("%.2f %% vs %.2f %%: %+.2f points", kd->test_accuracy, ce->test_accuracy, gain),
                      gain >= 1.0});
  }
  return checks;
}

int run(int argc, char** argv) {
  const std::optional<Settings> parsed = parse_options(argc, argv);
  if (!parsed) return 0;
  const Settings& s = *parsed;
  const auto run_start = Clock::now();
  RunReport report;
  report.settings = s;
  const auto log = [&](const std::string& what) {
    std::fprintf(stderr, "[%6.1f s] %s\n", seconds_since(run_start), what.c_str());
  };
  const auto timed = [&](const std::string& stage, const std::function<void()>& work) {
    const auto start = Clock::now();
    work();
    report.stage_seconds.emplace_back(stage, seconds_since(start));
    log(stage + " done");
  };

  std::filesystem::create_directories(s.out_dir);
  FashionMnist data;
  timed("load data", [&] { data = load_fashion_mnist(s.data_dir); });
  const TrainingSplit split = split_training_set(static_cast<std::int64_t>(data.train.labels.size()), s.seed,
                                                 s.validation_images, s.student_images, s.calibration_images);
  const ImageSet validation = select_rows(data.train, split.validation);

  Mlp trained;
  timed("teacher training", [&] { trained = train_teacher(data, split, s, report.teacher_final_loss); });
  const std::string teacher_path = (std::filesystem::path(s.out_dir) / "teacher.safetensors").string();
  Mlp teacher;
  timed("save + reload teacher", [&] {
    save_mlp(teacher_path, trained,
             {{"architecture", "784-512-256-10 relu"},
              {"seed", std::to_string(s.seed)},
              {"epochs", std::to_string(s.teacher_epochs)}});
    teacher = load_mlp(teacher_path);
  });
  report.teacher_file_round_trip_exact = same_weights(trained, teacher);
  if (!report.teacher_file_round_trip_exact) log("warning: the reloaded teacher differs from the trained one");

  const VariantInputs in{teacher, data, split, s};
  const std::vector<std::pair<std::string, std::function<std::vector<Variant>(const VariantInputs&)>>> groups{
      {"fp32/fp16/bf16", precision_variants},
      {"int8 weights", int8_weight_variants},
      {"int8 weights + activations", int8_activation_variants},
      {"magnitude pruning", magnitude_pruning_variants},
      {"2:4", nm_variants},
      {"students", student_variants}};
  for (const auto& [stage, build] : groups)
    timed(stage, [&, &build = build] {
      for (const Variant& v : build(in)) {
        report.rows.push_back(evaluate(v, data, validation));
        log(v.name + format(": %.2f %%", report.rows.back().test_accuracy));
      }
    });
  for (ResultRow& r : report.rows) r.delta_points = r.test_accuracy - report.rows.front().test_accuracy;

  report.targets = check_targets(report.rows);
  report.total_seconds = seconds_since(run_start);
  report.targets.push_back(
      {"whole run under 10 minutes", format("%.0f s", report.total_seconds), report.total_seconds < 600.0});
  print_report(report);
  const std::string json_path = (std::filesystem::path(s.out_dir) / "results.json").string();
  write_json_report(json_path, report);
  std::printf("wrote %s and %s\n", teacher_path.c_str(), json_path.c_str());
  return 0;
}

}  // namespace

}  // namespace fmnist

int main(int argc, char** argv) {
  try {
    return fmnist::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
