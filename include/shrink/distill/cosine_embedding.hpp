// Feature distillation by cosine embedding, F.cosine_embedding_loss(student, teacher, target, margin, reduction),
// with its gradients.
//
// Student and teacher features [..., D] of one shape are rows of D (feature_rows.hpp); target y_r in {+1, -1} per
// row. PyTorch 1.13's formula, per row (eps = 1e-12, sums in double):
//   A = sum_j s_j^2 + eps,   B = sum_j t_j^2 + eps,   cos = sum_j s_j t_j / sqrt(A * B)
//   loss_r = 1 - cos                  where y_r = +1
//          = max(0, cos - margin)     where y_r = -1
// reduced per row (mean = batchmean = sum / kept rows, PyTorch's 'mean'). With g = d loss_r / d cos
// (-1 for y = +1; for y = -1, 1 where cos - margin >= 0, as autograd's clamp_min, else 0):
//   d loss / d s_j = g (t_j / sqrt(A B) - cos s_j / A) / divisor * grad_scale
//   d loss / d t_j = g (s_j / sqrt(A B) - cos t_j / B) / divisor * grad_scale
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/distill/feature_rows.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {

namespace feature_detail {

// PyTorch's EPSILON in cosine_embedding_loss, added to each squared magnitude.
inline constexpr double kCosineEpsilon = 1e-12;

template <class T>
Loss cosine_embedding(const TensorView<const T>& student, const TensorView<const T>& teacher,
                      const TensorView<const std::int8_t>& target, const TensorView<T>* grad_student,
                      const TensorView<T>* grad_teacher, const CosineEmbeddingOptions& options, const char* function) {
  const FeaturePair pair = check_feature_pair(student, teacher, grad_student, grad_teacher, options, function);
  const std::int64_t rows = pair.student.count;
  const std::int64_t d = pair.student.length;
  const std::int8_t* y = nullptr;
  if (!absent(target)) {
    Shape leading = student.shape();
    leading.rank -= 1;
    check_per_row_view(target, leading, rows, function, "target");
    y = target.data();
    for (std::int64_t r = 0; r < rows; ++r)
      if (y[r] != 1 && y[r] != -1)
        fail(function, ("target[" + std::to_string(r) + "]").c_str(), static_cast<int>(y[r]), "+1 or -1");
  }
  if (!(options.margin >= -1.0 && options.margin <= 1.0))
    fail(function, "options.margin", options.margin, "a margin in [-1, 1]");

  const std::int64_t kept = pair.mask.kept_count(rows);
  const double scale = options.grad_scale / reduction_divisor(options.reduction, kept, 1);
  const bool accumulate = options.accumulate;
  std::vector<double> per_row(static_cast<std::size_t>(rows), 0.0);
  feature_detail::for_each_feature_row(pair, student, teacher, grad_student, grad_teacher, accumulate,
                                       [&](std::int64_t r, const T* s, const T* t, T* gs, T* gt) {
                                         double dot = 0.0, ss = 0.0, tt = 0.0;
                                         for (std::int64_t j = 0; j < d; ++j) {
                                           const double sj = load(s[j]);
                                           const double tj = load(t[j]);
                                           dot += sj * tj;
                                           ss += sj * sj;
                                           tt += tj * tj;
                                         }
                                         const double a = ss + kCosineEpsilon;
                                         const double b = tt + kCosineEpsilon;
                                         const double denominator = std::sqrt(a * b);
                                         const double cos = dot / denominator;
                                         const bool similar = y == nullptr || y[r] == 1;
                                         double slope = -1.0;  // d loss_r / d cos
                                         if (similar) {
                                           per_row[static_cast<std::size_t>(r)] = 1.0 - cos;
                                         } else {
                                           const double hinge = cos - options.margin;
                                           per_row[static_cast<std::size_t>(r)] = hinge > 0.0 ? hinge : 0.0;
                                           slope = hinge >= 0.0 ? 1.0 : 0.0;
                                         }
                                         if (!gs && !gt) return;
                                         const double g = slope * scale;
                                         for (std::int64_t j = 0; j < d; ++j) {
                                           const double sj = load(s[j]);
                                           const double tj = load(t[j]);
                                           if (gs)
                                             write_gradient(gs[j], g * (tj / denominator - cos * sj / a), accumulate);
                                           if (gt)
                                             write_gradient(gt[j], g * (sj / denominator - cos * tj / b), accumulate);
                                         }
                                       });
  return reduce_rows(std::move(per_row), options.reduction, kept, 1);
}

}  // namespace feature_detail

// F.cosine_embedding_loss(student, teacher, target, margin, reduction) over rows of [..., D], masked rows absent.
// target: +1 or -1 per row, shape = the leading dims or [rows], contiguous; TensorView{} = every row +1.
// T: float, half, bfloat16 (deduced from const views; with mutable views name it).
template <class T>
Loss cosine_embedding_loss(TensorView<const T> student, TensorView<const T> teacher,
                           TensorView<const std::int8_t> target = {}, const CosineEmbeddingOptions& options = {}) {
  return feature_detail::cosine_embedding<T>(student, teacher, target, nullptr, nullptr, options,
                                             "shrink::distill::cosine_embedding_loss");
}

// cosine_embedding_loss and its gradients, written in T into grad_student and grad_teacher (each of its input's
// shape, or TensorView{} when not wanted); options.accumulate adds into them instead. Nothing is written when a
// check fails. T is deduced from the gradient views.
template <class T>
Loss cosine_embedding_loss_with_grad(input_view<T> student, input_view<T> teacher, TensorView<const std::int8_t> target,
                                     TensorView<T> grad_student, TensorView<T> grad_teacher,
                                     const CosineEmbeddingOptions& options = {}) {
  return feature_detail::cosine_embedding<T>(student, teacher, target, feature_detail::wanted(grad_student),
                                             feature_detail::wanted(grad_teacher), options,
                                             "shrink::distill::cosine_embedding_loss_with_grad");
}

}  // namespace shrink::distill
