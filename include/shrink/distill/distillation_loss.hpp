// The combined distillation objective of Hinton et al.: alpha * KD + (1 - alpha) * CE, with its gradient.
//
//   loss = alpha * kl_div(student, teacher, T)  +  (1 - alpha) * cross_entropy(student, labels)
// KD is soft_target.hpp's kl_div (T^2 scaled) against full teacher logits or a TopKTeacher (topk_teacher.hpp);
// CE is cross_entropy.hpp's at temperature 1. Each part has its own reduction (KD batchmean, CE mean by
// default); Reduction::none needs both none and gives alpha * kd_row + (1 - alpha) * ce_row per row. The row
// mask applies to both parts; a row labelled ignore_index drops out of CE only (the teacher still teaches it).
// A part with weight 0 is not computed (its value would not matter, and 0 * inf would be NaN).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/distill/cross_entropy.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"

namespace shrink::distill {

namespace detail {

// The teacher argument as the internal functions take it: full logits as a const view, a TopKTeacher as is.
template <class T, class U>
TensorView<const T> as_const_teacher(const TensorView<U>& teacher) {
  static_assert(std::is_same_v<std::remove_const_t<U>, T>, "student and teacher logits must have the same element type");
  return teacher;
}

template <class T, class Index>
const TopKTeacher<T, Index>& as_const_teacher(const TopKTeacher<T, Index>& teacher) {
  return teacher;
}

template <class T>
Loss kd_part(const TensorView<const T>& student, const TensorView<const T>& teacher, const TensorView<T>* grad,
             const SoftTargetOptions& o) {
  return soft_target_loss<T>(SoftDivergence::forward_kl, 0.0, student, teacher, grad, o);
}

template <class T, class Index>
Loss kd_part(const TensorView<const T>& student, const TopKTeacher<T, Index>& teacher, const TensorView<T>* grad,
             const SoftTargetOptions& o) {
  return topk_loss<T, Index>(SoftDivergence::forward_kl, 0.0, student, teacher, grad, o);
}

template <class T>
void check_kd_teacher_shape(const TensorView<const T>& student, const TensorView<const T>& teacher, const char* fn) {
  require_same_shape(student, teacher, fn, "teacher", "student");
}

template <class T, class Index>
void check_kd_teacher_shape(const TensorView<const T>& student, const TopKTeacher<T, Index>& teacher, const char* fn) {
  const Rows<const T> l = as_rows(teacher.logits, fn, "teacher.logits");
  const Rows<const T> s = as_rows(student, fn, "student");
  if (l.rows != s.rows) fail(fn, "teacher.logits", rows_text(l.rows, l.cols), "one row per student row");
}

template <class T, class Teacher, class L>
Loss distillation_loss(const TensorView<const T>& student, const Teacher& teacher, const TensorView<L>& labels,
                       const TensorView<T>* grad, const DistillationOptions& o) {
  const char* fn = "shrink::distill::distillation_loss";
  require_unit_interval(o.alpha, fn, "options.alpha");
  require_temperature(o.temperature, fn);  // even when alpha = 0 leaves the KD part out
  require_grad_scale(o.grad_scale, fn);
  if ((o.kd_reduction == Reduction::none) != (o.ce_reduction == Reduction::none))
    fail(fn, "options.kd_reduction", to_string(o.kd_reduction),
         std::string("none for both parts or for neither (ce_reduction is ") + to_string(o.ce_reduction) + ")");
  const double alpha = o.alpha;
  // CE is validated first and runs last, adding to what KD wrote: a failure anywhere leaves the outputs alone.
  const CrossEntropyOptions ce = ce_options(o, o.grad_scale * (1.0 - alpha), true);
  const CrossEntropyPlan<T> plan = plan_cross_entropy<T>(student, labels, ce, fn, "student");
  check_kd_teacher_shape(student, teacher, fn);
  Rows<T> g;
  if (grad != nullptr) g = gradient_rows(*grad, plan.logits, fn);
  Loss kd;
  if (alpha > 0.0) {
    kd = kd_part(student, teacher, grad, kd_options(o, o.grad_scale * alpha, o.accumulate));
  } else if (grad != nullptr && !o.accumulate) {
    for (std::int64_t r = 0; r < g.rows; ++r) std::fill(g.row(r), g.row(r) + g.cols, cpu::float_to_element<T>(0.0f));
  }
  Loss hard;
  if (alpha < 1.0) hard = run_cross_entropy<T>(plan, grad != nullptr ? &g : nullptr, ce);
  Loss total;
  total.value = alpha * kd.value + (1.0 - alpha) * hard.value;
  if (o.kd_reduction == Reduction::none) {
    total.per_row.assign(static_cast<std::size_t>(plan.logits.rows), 0.0);
    for (std::size_t r = 0; r < total.per_row.size(); ++r)
      total.per_row[r] = (alpha > 0.0 ? alpha * kd.per_row[r] : 0.0) + (alpha < 1.0 ? (1.0 - alpha) * hard.per_row[r] : 0.0);
  }
  return total;
}

}  // namespace detail

// alpha * kl_div + (1 - alpha) * cross_entropy; teacher: full logits (a TensorView) or a TopKTeacher.
template <class S, class Teacher, class L>
Loss distillation_loss(const TensorView<S>& student, const Teacher& teacher, const TensorView<L>& labels,
                       const DistillationOptions& options = {}) {
  using T = std::remove_const_t<S>;
  static_assert(is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  return detail::distillation_loss<T>(student, detail::as_const_teacher<T>(teacher), labels, nullptr, options);
}

// distillation_loss and its gradient to the student logits.
template <class S, class Teacher, class L, class G>
Loss distillation_loss_with_grad(const TensorView<S>& student, const Teacher& teacher, const TensorView<L>& labels,
                                 const TensorView<G>& grad_student, const DistillationOptions& options = {}) {
  using T = std::remove_const_t<S>;
  static_assert(is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::distillation_loss<T>(student, detail::as_const_teacher<T>(teacher), labels, &grad_student, options);
}

}  // namespace shrink::distill
