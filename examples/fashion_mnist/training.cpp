// The training loop and its two losses (see training.hpp).
#include "training.hpp"

#include <chrono>
#include <cmath>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "adam.hpp"
#include "random.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cpu/eigen.hpp"
#include "shrink/distill/cross_entropy.hpp"
#include "shrink/distill/distillation_loss.hpp"
#include "shrink/prune/apply.hpp"
#include "stopwatch.hpp"

namespace fmnist {

namespace {

shrink::TensorView<const float> logits_view(const RowMatrix& logits) { return shrink::as_view(logits); }
shrink::TensorView<float> grad_view(RowMatrix& grad) { return shrink::as_view(grad); }

Labels batch_labels(const Labels& labels, const std::vector<std::int64_t>& rows) {
  Labels out;
  out.reserve(rows.size());
  for (std::int64_t r : rows) out.push_back(labels[static_cast<std::size_t>(r)]);
  return out;
}

// Adam's moments of pruned weights (gradient 0) shrink by beta each step into subnormal floats, which x86 computes
// about a hundred times slower; while it lives, subnormal inputs and results count as 0 (the MXCSR FTZ and DAZ bits).
class SubnormalsFlushedToZero {
 public:
#if defined(__SSE2__)
  SubnormalsFlushedToZero() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero); }
  ~SubnormalsFlushedToZero() { _mm_setcsr(saved_); }

 private:
  static constexpr unsigned kFlushToZero = 0x8000;
  static constexpr unsigned kDenormalsAreZero = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace

std::int64_t steps_per_epoch(std::int64_t rows, std::int64_t batch_size) {
  return (rows + batch_size - 1) / batch_size;
}

TrainLog train(Mlp& model, const RowMatrix& x, const std::vector<std::int64_t>& rows, const TrainSchedule& schedule,
               const BatchLoss& loss, std::vector<shrink::prune::Mask>* masks, const StepHook& hook) {
  const auto start = std::chrono::steady_clock::now();
  const SubnormalsFlushedToZero fast_floats;
  const auto n = static_cast<std::int64_t>(rows.size());
  const std::int64_t per_epoch = steps_per_epoch(n, schedule.batch_size);
  const std::int64_t total_steps = per_epoch * schedule.epochs;
  Adam adam(model);
  Random random(schedule.batch_seed);
  std::vector<shrink::prune::Mask> no_masks;
  std::vector<shrink::prune::Mask>& active_masks = masks != nullptr ? *masks : no_masks;
  if (!active_masks.empty() && active_masks.size() != model.layers.size())
    shrink::fail("fmnist::train", "masks.size()", active_masks.size(),
                 "one mask per layer (" + std::to_string(model.layers.size()) + ")");
  std::vector<std::int64_t> order = rows;
  Gradients grads;
  RowMatrix grad_logits;
  TrainLog log;
  for (int epoch = 0; epoch < schedule.epochs; ++epoch) {
    random.shuffle(order);
    double epoch_loss = 0.0;
    for (std::int64_t b = 0; b < per_epoch; ++b) {
      const std::int64_t step = epoch * per_epoch + b;
      if (hook) hook(step, model, active_masks);
      const std::int64_t begin = b * schedule.batch_size;
      const std::int64_t end = std::min(n, begin + schedule.batch_size);
      const std::vector<std::int64_t> batch(order.begin() + begin, order.begin() + end);
      const ForwardTrace trace = forward_trace(model, x(batch, Eigen::all));
      grad_logits.resize(trace.logits.rows(), trace.logits.cols());
      epoch_loss += loss(trace.logits, batch, grad_logits);
      backward(model, trace, grad_logits, grads);
      for (std::size_t k = 0; k < active_masks.size(); ++k)
        shrink::prune::mask_gradient(shrink::as_view(grads.weight[k]), active_masks[k]);
      const double progress = static_cast<double>(step) / static_cast<double>(total_steps);
      const auto lr =
          static_cast<float>(schedule.learning_rate * 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress)));
      adam.step(model, grads, lr);
      // Adam's moments can move a weight whose gradient is 0: the mask puts it back to 0.
      for (std::size_t k = 0; k < active_masks.size(); ++k)
        shrink::prune::apply_mask(shrink::as_view(model.layers[k].weight), active_masks[k]);
      ++log.steps;
    }
    log.last_epoch_loss = epoch_loss / static_cast<double>(per_epoch);
  }
  log.seconds = seconds_since(start);
  return log;
}

BatchLoss cross_entropy_loss(const Labels& labels) {
  return [&labels](const RowMatrix& logits, const std::vector<std::int64_t>& rows, RowMatrix& grad_logits) {
    const Labels y = batch_labels(labels, rows);
    const shrink::TensorView<const std::int64_t> y_view(y.data(), shrink::Shape{static_cast<std::int64_t>(y.size())});
    return shrink::distill::cross_entropy_with_grad(logits_view(logits), y_view, grad_view(grad_logits)).value;
  };
}

BatchLoss distillation_loss(const Labels& labels, const RowMatrix& teacher_logits, double temperature, double alpha) {
  shrink::distill::DistillationOptions options;
  options.temperature = static_cast<float>(temperature);
  options.alpha = static_cast<float>(alpha);
  return [&labels, &teacher_logits, options](const RowMatrix& logits, const std::vector<std::int64_t>& rows,
                                             RowMatrix& grad_logits) {
    const Labels y = batch_labels(labels, rows);
    const shrink::TensorView<const std::int64_t> y_view(y.data(), shrink::Shape{static_cast<std::int64_t>(y.size())});
    const RowMatrix teacher = teacher_logits(rows, Eigen::all);
    return shrink::distill::distillation_loss_with_grad(logits_view(logits), logits_view(teacher), y_view,
                                                        grad_view(grad_logits), options)
        .value;
  };
}

}  // namespace fmnist
