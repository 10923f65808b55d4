// The options and shared specs of the distillation losses, apart from any computation: what the CPU losses (distill/)
// and the CUDA ones (cuda/) both take, and the per-class term of the top-k teacher both compute.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "shrink/core/view.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {

// The three divergences between the soft targets, and the function each is (in messages).
enum class SoftDivergence { forward_kl, reverse_kl, jensen_shannon };

inline const char* soft_divergence_name(SoftDivergence d) {
  switch (d) {
    case SoftDivergence::forward_kl: return "shrink::distill::kl_div";
    case SoftDivergence::reverse_kl: return "shrink::distill::reverse_kl_div";
    case SoftDivergence::jensen_shannon: return "shrink::distill::jensen_shannon";
  }
  return "shrink::distill";
}

// Options of the soft-target losses (kl_div, reverse_kl_div, jensen_shannon), full or top-k teacher.
struct SoftTargetOptions {
  float temperature = 1.0f;                    // T > 0: both distributions are softmax(z / T)
  Reduction reduction = Reduction::batchmean;  // see reduction.hpp
  double grad_scale = 1.0;                     // the upstream gradient: grad = grad_scale * dloss/dz
  bool accumulate = false;                     // add to grad_student instead of overwriting it
  TensorView<const std::uint8_t> row_mask{};   // optional: one entry per row, 0 = padding (absent)
  // true: every kept row is checked (NaN, +inf, no finite logit) before anything is written, so a bad batch
  // leaves the outputs untouched; the logits are then read twice. false: each row is checked just before it is
  // used, one read of the logits (1.6-1.8x faster on batches larger than the caches); a bad row still throws
  // shrink::Error, but gradient rows before it may already hold their values.
  bool validate_first = true;
};

struct CrossEntropyOptions {
  std::int64_t ignore_index = -100;           // rows with this label are absent
  float label_smoothing = 0.0f;               // eps in [0, 1]
  Reduction reduction = Reduction::mean;      // see reduction.hpp ('mean' and 'batchmean' both divide by kept rows)
  double grad_scale = 1.0;                    // the upstream gradient
  bool accumulate = false;                    // add to the gradient instead of overwriting it
  TensorView<const std::uint8_t> row_mask{};  // optional: one entry per row, 0 = padding (absent)
};

struct DistillationOptions {
  float alpha = 0.5f;        // weight of the KD part, in [0, 1]
  float temperature = 1.0f;  // T of the KD part
  Reduction kd_reduction = Reduction::batchmean;
  Reduction ce_reduction = Reduction::mean;
  std::int64_t ignore_index = -100;           // CE rows with this label are absent from CE
  float label_smoothing = 0.0f;               // CE's eps in [0, 1]
  double grad_scale = 1.0;                    // the upstream gradient
  bool accumulate = false;                    // add to grad_student instead of overwriting it
  TensorView<const std::uint8_t> row_mask{};  // optional: one entry per row, 0 = padding (absent)
};

// The options of the two parts of distillation_loss, from the caller's (shared with the CUDA backend).
inline SoftTargetOptions kd_options(const DistillationOptions& o, double scale, bool accumulate) {
  SoftTargetOptions k;
  k.temperature = o.temperature;
  k.reduction = o.kd_reduction;
  k.grad_scale = scale;
  k.accumulate = accumulate;
  k.row_mask = o.row_mask;
  return k;
}

inline CrossEntropyOptions ce_options(const DistillationOptions& o, double scale, bool accumulate) {
  CrossEntropyOptions c;
  c.ignore_index = o.ignore_index;
  c.label_smoothing = o.label_smoothing;
  c.reduction = o.ce_reduction;
  c.grad_scale = scale;
  c.accumulate = accumulate;
  c.row_mask = o.row_mask;
  return c;
}
// Options of every feature loss.
struct FeatureLossOptions {
  Reduction reduction = Reduction::mean;
  double grad_scale = 1.0;  // the upstream gradient d(outer loss)/d(this loss): every gradient is multiplied by it
  bool accumulate = false;  // true: gradient += the new gradient (absent rows untouched); false: overwritten
  // Optional, one byte per row, shape = the input's leading dims or [rows], contiguous; 0 = padding: the row is
  // absent (adds nothing, gradient 0, not counted by mean/batchmean). TensorView{} = every row counts.
  TensorView<const std::uint8_t> row_mask{};
};

template <class T>
struct type_identity {
  using type = T;
};
// TensorView<const T> with T not deduced from it: the *_with_grad functions deduce T from their gradient views, so
// mutable student and teacher views convert to const ones.
template <class T>
using input_view = TensorView<const typename type_identity<T>::type>;

// FeatureLossOptions plus the hinge margin of the y = -1 rows.
struct CosineEmbeddingOptions : FeatureLossOptions {
  double margin = 0.0;  // in [-1, 1]: a y = -1 row costs max(0, cos - margin)
};

// A teacher stored as its top-k logits per row (distill/topk_teacher.hpp).
template <class T, class Index>
struct TopKTeacher {
  TensorView<const T> logits;           // [..., k]: the teacher's k largest logits of each row, in any order
  TensorView<const Index> indices;      // [..., k]: their vocabulary entries, distinct within a row
  TensorView<const float> tail_mass{};  // optional, one per row: teacher probability outside the k, in [0, 1)
};

// One coarse class of the divergence, from its probabilities and their logs (log space keeps classes whose
// probability underflows float, such as logits 2e4 below the row's max, finite).
struct ClassTerm {
  double loss;  // the class's term of D
  double h;     // q_c * dD/dq_c
};

inline ClassTerm coarse_term(SoftDivergence kind, double beta, double log_p, double log_q) {
  const double p = std::exp(log_p), q = std::exp(log_q);
  switch (kind) {
    case SoftDivergence::forward_kl:  // p log(p/q); q * (-p/q) = -p
      return {p > 0.0 ? p * (log_p - log_q) : 0.0, -p};
    case SoftDivergence::reverse_kl: {  // q log(q/p); q * (log(q/p) + 1)
      if (!(q > 0.0)) return {0.0, 0.0};
      const double l = log_q - log_p;
      return {q * l, q * (l + 1.0)};
    }
    case SoftDivergence::jensen_shannon: {  // beta p log(p/m) + (1-beta) q log(q/m); q * (1-beta) log(q/m)
      // log m = log(beta p + (1 - beta) q), as a log-sum-exp of the two logs.
      const double a = beta > 0.0 ? std::log(beta) + log_p : -std::numeric_limits<double>::infinity();
      const double b = beta < 1.0 ? std::log1p(-beta) + log_q : -std::numeric_limits<double>::infinity();
      const double top = std::max(a, b);
      if (top == -std::numeric_limits<double>::infinity()) return {0.0, 0.0};
      const double log_m = top + std::log(std::exp(a - top) + std::exp(b - top));
      const double lq = q > 0.0 ? log_q - log_m : 0.0;
      const double lp = p > 0.0 ? log_p - log_m : 0.0;
      return {beta * p * lp + (1.0 - beta) * q * lq, (1.0 - beta) * q * lq};
    }
  }
  return {0.0, 0.0};
}

}  // namespace shrink::distill
