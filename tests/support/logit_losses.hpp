// What the logit-loss tests (soft targets, top-k teachers, cross entropy, the distillation loss) share: the poison
// their gradients start as, a loss with its gradient, a loss computed in double, and the three divergences by name.
#pragma once

#include <vector>

#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::test {

// What a gradient holds before the call: an element that still holds it was not written.
inline constexpr float kLogitPoison = -777.25f;

// A loss and the gradient its _with_grad call wrote.
template <class T>
struct LossAndGrad {
  distill::Loss loss;
  std::vector<T> grad;
};

// A loss computed in double: the reduced value, the per-row values and the gradient.
struct ReferenceLoss {
  double value = 0.0;
  std::vector<double> per_row, grad;
};

// The three divergences of soft_target.hpp (distill/options.hpp's SoftDivergence), each also against a top-k
// teacher (topk_teacher.hpp).
inline const distill::SoftDivergence kDivergences[] = {
    distill::SoftDivergence::forward_kl, distill::SoftDivergence::reverse_kl, distill::SoftDivergence::jensen_shannon};

}  // namespace shrink::test
