// Mini-batch training of an Mlp with Adam and cosine learning-rate decay, optionally under pruning masks, with the
// losses of shrink::distill (cross-entropy, and Hinton's distillation loss against a teacher's logits).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "mlp.hpp"
#include "shrink/prune/mask.hpp"

namespace fmnist {

// Writes dloss/dlogits of one mini-batch into `grad_logits` and returns the loss; `rows` are the batch's row
// indices in the training matrix.
using BatchLoss =
    std::function<double(const RowMatrix& logits, const std::vector<std::int64_t>& rows, RowMatrix& grad_logits)>;

// Called before every step (0-based) with the model and its masks; may prune further (gradual pruning).
using StepHook = std::function<void(std::int64_t step, Mlp& model, std::vector<shrink::prune::Mask>& masks)>;

struct TrainSchedule {
  int epochs = 1;
  std::int64_t batch_size = 128;
  double learning_rate = 1e-3;   // peak; lr_t = lr * (1 + cos(pi * t / steps)) / 2
  std::uint64_t batch_seed = 0;  // the order of the rows in each epoch
};

struct TrainLog {
  std::int64_t steps = 0;
  double last_epoch_loss = 0.0;  // mean batch loss of the last epoch
  double seconds = 0.0;
};

std::int64_t steps_per_epoch(std::int64_t rows, std::int64_t batch_size);

// Trains `model` on the rows `rows` of `x`. With masks (one per layer), pruned weights get no update and stay 0:
// gradients go through shrink::prune::mask_gradient, weights through apply_mask after every step.
TrainLog train(Mlp& model, const RowMatrix& x, const std::vector<std::int64_t>& rows, const TrainSchedule& schedule,
               const BatchLoss& loss, std::vector<shrink::prune::Mask>* masks = nullptr, const StepHook& hook = {});

// The losses keep references to their arguments, which must outlive them.

// Mean cross-entropy against `labels` (one per row of the training matrix): shrink::distill::cross_entropy_with_grad.
BatchLoss cross_entropy_loss(const Labels& labels);

// alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - alpha) * CE (batchmean, mean):
// shrink::distill::distillation_loss_with_grad; `teacher_logits` has one row per row of the training matrix.
BatchLoss distillation_loss(const Labels& labels, const RowMatrix& teacher_logits, double temperature, double alpha);

}  // namespace fmnist
