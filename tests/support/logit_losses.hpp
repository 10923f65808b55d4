// What the logit-loss tests (soft targets, top-k teachers, cross entropy, the distillation loss) share: the poison
// their gradients start as, a loss with its gradient, a loss computed in double, and the three divergences by name.
#pragma once

#include <vector>

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

// The three divergences of soft_target.hpp, each also against a top-k teacher (topk_teacher.hpp).
enum class Divergence { kl, reverse, jsd };
inline const Divergence kDivergences[] = {Divergence::kl, Divergence::reverse, Divergence::jsd};

// The name of the function that computes d.
inline const char* divergence_name(Divergence d) {
  switch (d) {
    case Divergence::kl: return "kl_div";
    case Divergence::reverse: return "reverse_kl_div";
    case Divergence::jsd: return "jensen_shannon";
  }
  return "?";
}

}  // namespace shrink::test
