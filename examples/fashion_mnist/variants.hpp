// What every compression variant yields (a way to compute logits, and its stored size), and what building one needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataset.hpp"
#include "mlp.hpp"
#include "settings.hpp"

namespace fmnist {

struct Variant {
  std::string name;
  std::function<RowMatrix(const RowMatrix& images)> logits;
  std::int64_t weight_bytes = 0;  // weights as stored (see `storage`) + biases as float32
  std::string storage;            // how the weights are stored, e.g. "int8 + fp32 scale per row"
  double sparsity = 0.0;          // zero weights / all weights of the three Linear layers (biases excluded)
  double build_seconds = 0.0;     // calibration, pruning, fine-tuning or training
  std::string group;              // the row group: "precision", "int8", "prune", "2:4", "student"
};

// Everything a variant may read: the teacher loaded back from its file, the data, the split and the settings.
struct VariantInputs {
  const Mlp& teacher;
  const FashionMnist& data;
  const TrainingSplit& split;
  const Settings& settings;
};

// A variant whose logits are those of a float model (kept alive by the returned function).
inline std::function<RowMatrix(const RowMatrix&)> float_logits(Mlp model) {
  auto shared = std::make_shared<const Mlp>(std::move(model));
  return [shared](const RowMatrix& images) { return forward(*shared, images); };
}

// "1 epoch", "6 epochs".
inline std::string epochs_text(int epochs) { return std::to_string(epochs) + (epochs == 1 ? " epoch" : " epochs"); }

inline std::int64_t float32_bias_bytes(const Mlp& model) { return model.bias_count() * 4; }

inline double zero_weight_fraction(const Mlp& model) {
  std::int64_t zeros = 0;
  for (const Linear& l : model.layers) zeros += (l.weight.array() == 0.0f).count();
  return static_cast<double>(zeros) / static_cast<double>(model.weight_count());
}

// FP32, FP16, BF16, INT8 weight-only with each calibrator, INT8 weights and activations (quant_variants.cpp).
std::vector<Variant> precision_variants(const VariantInputs& in);
std::vector<Variant> int8_weight_variants(const VariantInputs& in);
std::vector<Variant> int8_activation_variants(const VariantInputs& in);

// Magnitude pruning one-shot and gradual, 2:4 one-shot and fine-tuned (prune_variants.cpp).
std::vector<Variant> magnitude_pruning_variants(const VariantInputs& in);
std::vector<Variant> nm_variants(const VariantInputs& in);

// The small students, cross-entropy only and with the teacher's soft targets (distill_variants.cpp).
std::vector<Variant> student_variants(const VariantInputs& in);

}  // namespace fmnist
