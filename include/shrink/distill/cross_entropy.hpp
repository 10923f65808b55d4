// Cross-entropy with hard labels and its gradient to the logits, as F.cross_entropy(logits, labels,
// ignore_index=..., label_smoothing=eps, reduction=...) defines it (no class weights).
//
// Per kept row with label y (q = softmax(z)):
//   loss = (1 - eps) * (-log q_y) + eps * mean_j(-log q_j)
//   dloss/dz_j = q_j - (1 - eps) [j == y] - eps / V
// A row whose label is ignore_index is absent like a masked row (reduction.hpp); 'mean' divides by the rows
// left. A -inf logit is a masked vocabulary entry; at the label (or anywhere, with eps > 0) it makes the loss
// +inf, as in PyTorch. Labels are int64 or int32, one per row, in [0, V) or equal to ignore_index.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/softmax_rows.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"
#include "shrink/distill/soft_target.hpp"

namespace shrink::distill {

namespace detail {

// Labels as one int64 per row; a label of a kept row must be ignore_index or in [0, V).
template <class L>
std::vector<std::int64_t> checked_labels(const TensorView<L>& labels, std::int64_t rows, std::int64_t vocab,
                                         const RowMask& mask, std::int64_t ignore_index, const char* function) {
  static_assert(std::is_same_v<std::remove_const_t<L>, std::int64_t> || std::is_same_v<std::remove_const_t<L>, std::int32_t>,
                "labels must be int64 or int32");
  if (!labels.device().is_cpu()) fail(function, "labels.device", "cuda", "a host view");
  if (labels.numel() != rows)
    fail(function, "labels.shape", to_string(labels.shape()), "one label per row (" + std::to_string(rows) + ")");
  if (!labels.is_contiguous()) fail(function, "labels.strides", to_string(labels.strides()), "contiguous labels");
  std::vector<std::int64_t> out(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t y = static_cast<std::int64_t>(labels.data()[r]);
    if (mask.kept(r) && y != ignore_index && (y < 0 || y >= vocab))
      fail(function, "labels", "label " + std::to_string(y) + " at row " + std::to_string(r),
           "a class in [0, " + std::to_string(vocab) + ") or ignore_index (" + std::to_string(ignore_index) + ")");
    out[static_cast<std::size_t>(r)] = y;
  }
  return out;
}

// A validated cross-entropy problem: rows kept (mask and labels), their maxes.
template <class T>
struct CrossEntropyPlan {
  Rows<const T> logits;
  std::vector<std::int64_t> labels;
  std::vector<std::uint8_t> kept;  // 1 where the row counts
  std::int64_t kept_count = 0;
  std::vector<float> maxes;
};

// logits_name: the argument errors about the logits name (distillation_loss calls them student).
template <class T, class L>
CrossEntropyPlan<T> plan_cross_entropy(const TensorView<const T>& logits, const TensorView<L>& labels,
                                       const CrossEntropyOptions& o, const char* fn, const char* logits_name = "logits") {
  CrossEntropyPlan<T> plan;
  plan.logits = as_rows(logits, fn, logits_name);
  require_unit_interval(o.label_smoothing, fn, "options.label_smoothing");
  require_grad_scale(o.grad_scale, fn);
  const RowMask mask = row_mask(o.row_mask, plan.logits.rows, fn);
  plan.labels = checked_labels(labels, plan.logits.rows, plan.logits.cols, mask, o.ignore_index, fn);
  plan.kept.assign(static_cast<std::size_t>(plan.logits.rows), 0);
  for (std::int64_t r = 0; r < plan.logits.rows; ++r) {
    const bool k = mask.kept(r) && plan.labels[static_cast<std::size_t>(r)] != o.ignore_index;
    plan.kept[static_cast<std::size_t>(r)] = k ? 1 : 0;
    plan.kept_count += k ? 1 : 0;
  }
  plan.maxes = scanned_row_maxes(plan.logits, RowMask{plan.kept.data()}, fn, logits_name);
  return plan;
}

// Runs a validated plan: per-row losses, and the gradient when grad != nullptr.
template <class T>
Loss run_cross_entropy(const CrossEntropyPlan<T>& plan, const Rows<T>* grad, const CrossEntropyOptions& o) {
  const std::int64_t n = plan.logits.cols;
  const double eps = o.label_smoothing;
  const double c = o.grad_scale / reduction_divisor(o.reduction, plan.kept_count, 1);
  std::vector<double> per_row(static_cast<std::size_t>(plan.logits.rows), 0.0);
  // Rows in chunks on the current executor, each row's loss and gradient its own.
  parallel_for(plan.logits.rows, row_chunk(plan.logits.rows, n), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::size_t ri = static_cast<std::size_t>(r);
      if (!plan.kept[ri]) {
        if (grad != nullptr && !o.accumulate) std::fill(grad->row(r), grad->row(r) + n, cpu::float_to_element<T>(0.0f));
        continue;
      }
      const T* z = plan.logits.row(r);
      const std::int64_t y = plan.labels[ri];
      const float m = plan.maxes[ri];
      const cpu::RowSums s = cpu::single_sums(z, n, m, 1.0f);
      const double log_s = std::log(s.first);
      const double a_y = static_cast<double>(cpu::element_to_float(z[y])) - m;
      const double nll = log_s - a_y;
      per_row[ri] = eps > 0.0 ? (1.0 - eps) * nll + eps * (log_s - s.cross / static_cast<double>(n)) : nll;
      if (grad != nullptr) {
        T* g = grad->row(r);
        const float before = cpu::element_to_float(g[y]);  // the label entry is written exactly below
        const double uniform = c * eps / static_cast<double>(n);
        cpu::scaled_softmax_gradient(z, g, n, m, 1.0f, static_cast<float>(c / s.first), static_cast<float>(uniform),
                                     o.accumulate);
        const double q_y = std::exp(a_y) / s.first;
        const double value = c * (q_y - (1.0 - eps)) - uniform;
        g[y] = cpu::float_to_element<T>(static_cast<float>(o.accumulate ? before + value : value));
      }
    }
  });
  return reduce_rows(std::move(per_row), o.reduction, plan.kept_count, 1);
}

}  // namespace detail

// Cross-entropy of logits [..., V] against labels [...], reduced.
template <class S, class L>
Loss cross_entropy(const TensorView<S>& logits, const TensorView<L>& labels, const CrossEntropyOptions& options = {}) {
  using T = std::remove_const_t<S>;
  static_assert(is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  const char* fn = "shrink::distill::cross_entropy";
  const detail::CrossEntropyPlan<T> plan = detail::plan_cross_entropy<T>(logits, labels, options, fn);
  return detail::run_cross_entropy<T>(plan, nullptr, options);
}

// cross_entropy and its gradient to the logits, written to (or added to) grad_logits.
template <class S, class L, class G>
Loss cross_entropy_with_grad(const TensorView<S>& logits, const TensorView<L>& labels, const TensorView<G>& grad_logits,
                             const CrossEntropyOptions& options = {}) {
  using T = std::remove_const_t<S>;
  static_assert(is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  static_assert(std::is_same_v<G, T>, "grad_logits must be a mutable view of the logits' element type");
  const char* fn = "shrink::distill::cross_entropy";
  const detail::CrossEntropyPlan<T> plan = detail::plan_cross_entropy<T>(logits, labels, options, fn);
  const Rows<T> g = gradient_rows(grad_logits, plan.logits, fn, "grad_logits", "logits");
  return detail::run_cross_entropy<T>(plan, &g, options);
}

}  // namespace shrink::distill
