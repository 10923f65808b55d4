// Feature distillation by mean squared error, F.mse_loss(student, teacher, reduction), with its gradients.
//
// Student and teacher features [..., D] of one shape are rows of D (feature_rows.hpp). Per row r:
//   loss_r = sum_j (s_rj - t_rj)^2
// reduced as reduction.hpp says (mean = sum / (kept rows * D), PyTorch's 'mean'; batchmean = sum / kept rows).
//   d loss / d s_rj = 2 (s_rj - t_rj) / divisor * grad_scale,   d loss / d t_rj = -(d loss / d s_rj)
// where divisor is kept rows * D (mean), kept rows (batchmean) or 1 (sum, none).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/distill/feature_rows.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {
namespace feature_detail {

template <class T>
Loss mse(const TensorView<const T>& student, const TensorView<const T>& teacher, const TensorView<T>* grad_student,
         const TensorView<T>* grad_teacher, const FeatureLossOptions& options, const char* function) {
  const FeaturePair pair = check_feature_pair(student, teacher, grad_student, grad_teacher, options, function);
  const std::int64_t rows = pair.student.count;
  const std::int64_t d = pair.student.length;
  const std::int64_t kept = pair.mask.kept_count(rows);
  const double scale = 2.0 * options.grad_scale / reduction_divisor(options.reduction, kept, d);

  std::vector<double> per_row(static_cast<std::size_t>(rows), 0.0);
  feature_detail::for_each_feature_row(pair, student, teacher, grad_student, grad_teacher, options.accumulate,
                                       [&](std::int64_t r, const T* s, const T* t, T* gs, T* gt) {
                                         double sum = 0.0;
                                         for (std::int64_t j = 0; j < d; ++j) {
                                           const double diff =
                                               static_cast<double>(load(s[j])) - static_cast<double>(load(t[j]));
                                           sum += diff * diff;
                                           if (gs) write_gradient(gs[j], scale * diff, options.accumulate);
                                           if (gt) write_gradient(gt[j], -scale * diff, options.accumulate);
                                         }
                                         per_row[static_cast<std::size_t>(r)] = sum;
                                       });
  return reduce_rows(std::move(per_row), options.reduction, kept, d);
}

}  // namespace feature_detail

// F.mse_loss(student, teacher, reduction) over rows of [..., D], masked rows absent. T: float, half, bfloat16
// (deduced from const views; with mutable views name it: mse_loss<float>(...)).
template <class T>
Loss mse_loss(TensorView<const T> student, TensorView<const T> teacher, const FeatureLossOptions& options = {}) {
  return feature_detail::mse<T>(student, teacher, nullptr, nullptr, options, "shrink::distill::mse_loss");
}

// mse_loss and its gradients, written in T into grad_student and grad_teacher (each of its input's shape, or
// TensorView{} when not wanted); options.accumulate adds into them instead. Nothing is written when a check fails.
// T is deduced from the gradient views (give it, mse_loss_with_grad<half>(...), when both are TensorView{}).
template <class T>
Loss mse_loss_with_grad(input_view<T> student, input_view<T> teacher, TensorView<T> grad_student,
                        TensorView<T> grad_teacher, const FeatureLossOptions& options = {}) {
  return feature_detail::mse<T>(student, teacher, feature_detail::wanted(grad_student),
                                feature_detail::wanted(grad_teacher), options, "shrink::distill::mse_loss_with_grad");
}

}  // namespace shrink::distill
