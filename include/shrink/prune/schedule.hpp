// Gradual pruning schedule of Zhu & Gupta (2017), "To prune, or not to prune", section 3.
//
// Sparsity rises from initial_sparsity s_i to final_sparsity s_f over n = (end_step - begin_step) / frequency
// pruning steps t = t0 + k * dt (t0 = begin_step, dt = frequency, k = 0..n):
//   s_t = s_f + (s_i - s_f) * (1 - (t - t0) / (n * dt))^3
// fast at first, while many weights are redundant, and slower as fewer remain. Between pruning steps the
// sparsity is that of the last pruning step (the mask changes only on pruning steps). Before begin_step the
// paper has not started pruning, so the sparsity is 0 (not s_i); from end_step on it is s_f. Feed sparsity_at(step)
// to prune_to_sparsity (iterative.hpp) on each pruning step.
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"

namespace shrink::prune {

struct GradualSchedule {
  double initial_sparsity = 0.0;  // s_i, reached at begin_step; in [0, 1)
  double final_sparsity = 0.0;    // s_f, reached at end_step; in [s_i, 1)
  std::int64_t begin_step = 0;    // t0, the first pruning step
  std::int64_t end_step = 0;      // t0 + n * dt, the last pruning step; after begin_step
  std::int64_t frequency = 1;     // dt, steps between pruning steps; divides end_step - begin_step

  // Throws shrink::Error naming the first field out of range.
  void validate() const {
    constexpr const char* function = "shrink::prune::GradualSchedule";
    if (!(initial_sparsity >= 0.0 && initial_sparsity < 1.0))
      fail(function, "initial_sparsity", initial_sparsity, "a fraction in [0, 1)");
    if (!(final_sparsity >= initial_sparsity && final_sparsity < 1.0))
      fail(function, "final_sparsity", final_sparsity,
           "a fraction in [initial_sparsity, 1) = [" + shrink::to_text(initial_sparsity) + ", 1)");
    if (end_step <= begin_step)
      fail(function, "end_step", end_step, "a step after begin_step (" + std::to_string(begin_step) + ")");
    if (frequency < 1) fail(function, "frequency", frequency, "at least 1 step");
    if ((end_step - begin_step) % frequency != 0)
      fail(function, "frequency", frequency,
           "a divisor of end_step - begin_step (" + std::to_string(end_step - begin_step) + ")");
  }

  // Number n of pruning intervals: pruning steps are begin_step + k * frequency, k = 0..n.
  std::int64_t intervals() const {
    validate();
    return (end_step - begin_step) / frequency;
  }

  bool is_pruning_step(std::int64_t step) const {
    validate();
    return step >= begin_step && step <= end_step && (step - begin_step) % frequency == 0;
  }

  // Target sparsity in force at `step`: 0 before begin_step, s_t of the last pruning step t <= step, s_f after.
  double sparsity_at(std::int64_t step) const {
    const std::int64_t n = intervals();
    if (step < begin_step) return 0.0;
    if (step >= end_step) return final_sparsity;
    const std::int64_t k = (step - begin_step) / frequency;  // pruning steps done since t0, less one
    const double remaining = 1.0 - static_cast<double>(k) / static_cast<double>(n);
    return final_sparsity + (initial_sparsity - final_sparsity) * remaining * remaining * remaining;
  }
};

}  // namespace shrink::prune
