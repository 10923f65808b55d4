// The student rows: a 784-64-10 MLP trained on the fixed labelled subset with cross-entropy alone, and the same
// student (same initialisation, batch order and epochs) with Hinton's distillation loss from the teacher.
#include <chrono>
#include <cstdio>

#include "random.hpp"
#include "stopwatch.hpp"
#include "training.hpp"
#include "variants.hpp"

namespace fmnist {

namespace {

Variant student_variant(std::string name, Mlp model, double seconds) {
  Variant v;
  v.name = std::move(name);
  v.group = "student";
  v.storage = "fp32";
  v.weight_bytes = model.weight_count() * 4 + float32_bias_bytes(model);
  v.logits = float_logits(std::move(model));
  v.build_seconds = seconds;
  return v;
}

}  // namespace

std::vector<Variant> student_variants(const VariantInputs& in) {
  const Settings& s = in.settings;
  const ImageSet subset = select_rows(in.data.train, in.split.student_subset);
  std::vector<std::int64_t> rows(subset.labels.size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int64_t>(i);

  TrainSchedule schedule;
  schedule.epochs = s.student_epochs;
  schedule.batch_size = s.student_batch_size;
  schedule.learning_rate = s.student_learning_rate;
  schedule.batch_seed = derive_seed(s.seed, SeedStream::student_batches);
  const std::vector<std::int64_t> widths{kPixels, s.student_hidden, kClasses};
  const std::uint64_t init_seed = derive_seed(s.seed, SeedStream::student_init);

  Mlp cross_entropy_student = he_initialized_mlp(widths, init_seed);
  const TrainLog ce = train(cross_entropy_student, subset.images, rows, schedule, cross_entropy_loss(subset.labels));

  const auto start = std::chrono::steady_clock::now();
  const RowMatrix teacher_logits = forward(in.teacher, subset.images);
  Mlp distilled_student = he_initialized_mlp(widths, init_seed);
  train(distilled_student, subset.images, rows, schedule,
        distillation_loss(subset.labels, teacher_logits, s.kd_temperature, s.kd_alpha));
  const double kd_seconds = seconds_since(start);

  const std::string size = "784-" + std::to_string(s.student_hidden) + "-10";
  const std::string data = std::to_string(subset.labels.size()) + " labels";
  std::vector<Variant> out;
  out.push_back(student_variant("student " + size + ", " + data + ", cross-entropy", std::move(cross_entropy_student),
                                ce.seconds));
  char kd_name[64];
  std::snprintf(kd_name, sizeof kd_name, ", KD (T=%g, alpha=%g)", s.kd_temperature, s.kd_alpha);
  out.push_back(student_variant("student " + size + ", " + data + kd_name, std::move(distilled_student), kd_seconds));
  return out;
}

}  // namespace fmnist
