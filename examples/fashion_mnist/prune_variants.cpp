// The pruning rows: global magnitude pruning one-shot (50/80/90 %) and gradual to 90 % while fine-tuning, and 2:4
// one-shot and after a masked fine-tune. All three Linear weights are pruned; biases never are.
#include <algorithm>
#include <chrono>

#include "random.hpp"
#include "shrink/cpu/eigen.hpp"
#include "shrink/prune/apply.hpp"
#include "shrink/prune/iterative.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/prune/schedule.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/sparse/memory.hpp"
#include "stopwatch.hpp"
#include "training.hpp"
#include "variants.hpp"

namespace fmnist {

namespace {

using shrink::prune::Mask;

std::vector<shrink::TensorView<const float>> weight_views(const Mlp& model) {
  std::vector<shrink::TensorView<const float>> views;
  for (const Linear& l : model.layers) views.push_back(shrink::as_view(l.weight));
  return views;
}

void apply_masks(Mlp& model, const std::vector<Mask>& masks) {
  for (std::size_t k = 0; k < masks.size(); ++k)
    shrink::prune::apply_mask(shrink::as_view(model.layers[k].weight), masks[k]);
}

double masked_fraction(const std::vector<Mask>& masks) {
  std::int64_t kept = 0, all = 0;
  for (const Mask& m : masks) {
    kept += m.count_kept();
    all += m.size();
  }
  return 1.0 - static_cast<double>(kept) / static_cast<double>(all);
}

// Unstructured rows are stored as CSR: fp32 values, int32 column indices and row offsets.
std::int64_t csr_model_bytes(const Mlp& model, const std::vector<Mask>& masks) {
  std::int64_t bytes = float32_bias_bytes(model);
  for (const Mask& m : masks) bytes += shrink::sparse::csr_bytes(m.shape()[0], m.count_kept(), shrink::ScalarType::f32);
  return bytes;
}

// 2:4 rows are stored N:M compressed: the two kept fp32 values of every four, and one position byte each.
std::int64_t nm_model_bytes(const Mlp& model) {
  std::int64_t bytes = float32_bias_bytes(model);
  for (const Linear& l : model.layers)
    bytes += shrink::sparse::nm_compressed_bytes(l.weight.rows(), l.weight.cols(), {2, 4}, shrink::ScalarType::f32);
  return bytes;
}

Variant pruned_variant(std::string name, std::string group, Mlp model, const std::vector<Mask>& masks, bool nm,
                       std::chrono::steady_clock::time_point start) {
  Variant v;
  v.name = std::move(name);
  v.group = std::move(group);
  v.sparsity = masked_fraction(masks);
  v.weight_bytes = nm ? nm_model_bytes(model) : csr_model_bytes(model, masks);
  v.storage = nm ? "2:4 compressed: fp32 values + 1 index byte each" : "CSR: fp32 values + int32 indices";
  v.logits = float_logits(std::move(model));
  v.build_seconds = seconds_since(start);
  return v;
}

TrainSchedule finetune_schedule(const Settings& s, int epochs) {
  TrainSchedule t;
  t.epochs = epochs;
  t.batch_size = s.batch_size;
  t.learning_rate = s.finetune_learning_rate;
  t.batch_seed = derive_seed(s.seed, SeedStream::finetune_batches);
  return t;
}

Variant one_shot_magnitude(const Mlp& teacher, double amount) {
  const auto start = std::chrono::steady_clock::now();
  Mlp model = teacher;
  const std::vector<Mask> masks =
      shrink::prune::global_unstructured_masks(weight_views(model), shrink::prune::Amount::fraction(amount));
  apply_masks(model, masks);
  const std::string percent = std::to_string(static_cast<int>(amount * 100.0 + 0.5));
  return pruned_variant("magnitude " + percent + "%, one-shot", "magnitude pruning", std::move(model), masks, false,
                        start);
}

// Zhu & Gupta: sparsity s_t rises from 0 to 90 % over the first gradual_pruning_share of the fine-tuning steps,
// pruning every gradual_frequency steps (global magnitude over the kept weights); the remaining steps fine-tune at 90
// %.
Variant gradual_magnitude(const VariantInputs& in, double final_sparsity) {
  const auto start = std::chrono::steady_clock::now();
  const Settings& s = in.settings;
  Mlp model = in.teacher;
  std::vector<Mask> masks;
  for (const Linear& l : model.layers) masks.emplace_back(shrink::Shape{l.weight.rows(), l.weight.cols()});
  const std::int64_t steps =
      s.gradual_epochs * steps_per_epoch(static_cast<std::int64_t>(in.split.teacher_train.size()), s.batch_size);
  shrink::prune::GradualSchedule schedule;
  schedule.final_sparsity = final_sparsity;
  schedule.frequency = s.gradual_frequency;
  // The last pruning step: a multiple of the frequency, so that the schedule validates.
  schedule.end_step =
      std::max<std::int64_t>(
          1, static_cast<std::int64_t>(s.gradual_pruning_share * static_cast<double>(steps)) / s.gradual_frequency) *
      s.gradual_frequency;
  schedule.validate();
  const StepHook prune_on_schedule = [&schedule](std::int64_t step, Mlp& m, std::vector<Mask>& current) {
    if (!schedule.is_pruning_step(step)) return;
    current = shrink::prune::global_prune_to_sparsity(weight_views(m), schedule.sparsity_at(step), current);
    apply_masks(m, current);
  };
  train(model, in.data.train.images, in.split.teacher_train, finetune_schedule(s, s.gradual_epochs),
        cross_entropy_loss(in.data.train.labels), &masks, prune_on_schedule);
  const std::string percent = std::to_string(static_cast<int>(final_sparsity * 100.0 + 0.5));
  return pruned_variant("magnitude " + percent + "%, gradual + fine-tune (" + epochs_text(s.gradual_epochs) + ")",
                        "magnitude pruning", std::move(model), masks, false, start);
}

}  // namespace

std::vector<Variant> magnitude_pruning_variants(const VariantInputs& in) {
  return {one_shot_magnitude(in.teacher, 0.5), one_shot_magnitude(in.teacher, 0.8), one_shot_magnitude(in.teacher, 0.9),
          gradual_magnitude(in, 0.9)};
}

std::vector<Variant> nm_variants(const VariantInputs& in) {
  const Settings& s = in.settings;
  auto start = std::chrono::steady_clock::now();
  Mlp model = in.teacher;
  std::vector<Mask> masks;
  for (const Linear& l : model.layers) masks.push_back(shrink::prune::nm_mask(shrink::as_view(l.weight), {2, 4}));
  apply_masks(model, masks);
  std::vector<Variant> rows;
  rows.push_back(pruned_variant("2:4, one-shot", "2:4", model, masks, true, start));

  start = std::chrono::steady_clock::now();
  train(model, in.data.train.images, in.split.teacher_train, finetune_schedule(s, s.nm_finetune_epochs),
        cross_entropy_loss(in.data.train.labels), &masks);
  rows.push_back(pruned_variant("2:4, masked fine-tune (" + epochs_text(s.nm_finetune_epochs) + ")", "2:4",
                                std::move(model), masks, true, start));
  return rows;
}

}  // namespace fmnist
