// Host API of the CUDA soft-target losses against a top-k teacher, with gradients to every student logit (compiled in
// cuda/topk_teacher.cu; plain C++, no CUDA headers).
//
// The same functions as distill/topk_teacher.hpp: the k + 1 coarsened classes (the k stored entries and the rest),
// kl_div, reverse_kl_div and jensen_shannon between them times T^2, the same teacher (distill::TopKTeacher, its views
// on the device), options (distill::SoftTargetOptions, its row mask a CUDA view; validate_first has no effect here,
// see below), values, reductions, grad_scale and accumulate. Device code: shrink/cuda/kernels/topk_teacher.cuh (one block
// per row; extra memory one double per row; a bitmap of (V + 31) / 32 words in shared memory, which bounds V by the
// device's shared memory: about 1.8 million on sm_80 and sm_90).
//
// Two phases, as CUB: topk_workspace_bytes(rows), then the call, which enqueues on `stream`, allocates nothing and
// returns at once; the loss lands in device memory (DeviceLoss). Host checks throw shrink::Error before any CUDA call:
// views on the current CUDA device with contiguous last dimensions and one row stride, k logits and k indices for
// each student row, k <= V, the gradient of the student's rows and columns, the tail one float per row, the options.
// Device checks go to the status word, read with Synchronize::yes or check_status: kNonFinite (NaN or +inf in a kept
// row of either side, or a kept row all -inf), kBadIndex (an index outside [0, V) or repeated within a kept row),
// kBadTailMass (a kept row's tail outside [0, 1)). As everywhere in shrink::cuda the outputs are written before the
// host hears of a failed device check, whatever options.validate_first says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"

namespace shrink::cuda {

// Workspace of every call below on `rows` rows: the status word, the kept-row count and one double per row.
std::size_t topk_workspace_bytes(std::int64_t rows);

namespace detail {

// grad == nullptr: the loss only; beta: Jensen-Shannon's weight (ignored by the KLs). T: float, half, bfloat16;
// Index: int32, int64.
template <class T, class Index>
void topk_loss(distill::SoftDivergence kind, double beta, TensorView<const T> student,
               const distill::TopKTeacher<T, Index>& teacher, const TensorView<T>* grad, DeviceLoss out,
               Workspace workspace, Stream stream, const distill::SoftTargetOptions& options, Synchronize synchronize);

// S: the student view's element type, G: the gradient's (T when there is none).
template <class S, class T, class G = T>
void check_topk_types() {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>,
                "student and teacher logits must have the same element type");
  static_assert(distill::is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
}

}  // namespace detail

// T^2 * KL(p || q) over the k + 1 coarsened classes, reduced.
template <class S, class T, class Index>
void kl_div(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher, DeviceLoss out,
            Workspace workspace, Stream stream, const distill::SoftTargetOptions& options = {},
            Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::forward_kl, 0.0, student, teacher, nullptr, out, workspace,
                              stream, options, synchronize);
}

// kl_div and its gradient to the student logits, written to (or added to) grad_student.
template <class S, class T, class Index, class G>
void kl_div_with_grad(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher,
                      const TensorView<G>& grad_student, DeviceLoss out, Workspace workspace, Stream stream,
                      const distill::SoftTargetOptions& options = {}, Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T, G>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::forward_kl, 0.0, student, teacher, &grad_student, out, workspace,
                              stream, options, synchronize);
}

// T^2 * KL(q || p) over the k + 1 coarsened classes, reduced.
template <class S, class T, class Index>
void reverse_kl_div(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher, DeviceLoss out,
                    Workspace workspace, Stream stream, const distill::SoftTargetOptions& options = {},
                    Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::reverse_kl, 0.0, student, teacher, nullptr, out, workspace,
                              stream, options, synchronize);
}

template <class S, class T, class Index, class G>
void reverse_kl_div_with_grad(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher,
                              const TensorView<G>& grad_student, DeviceLoss out, Workspace workspace, Stream stream,
                              const distill::SoftTargetOptions& options = {},
                              Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T, G>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::reverse_kl, 0.0, student, teacher, &grad_student, out, workspace,
                              stream, options, synchronize);
}

// T^2 * (beta KL(p || m) + (1 - beta) KL(q || m)) over the k + 1 coarsened classes, m = beta p + (1 - beta) q.
template <class S, class T, class Index>
void jensen_shannon(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher, double beta,
                    DeviceLoss out, Workspace workspace, Stream stream, const distill::SoftTargetOptions& options = {},
                    Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::jensen_shannon, beta, student, teacher, nullptr, out, workspace,
                              stream, options, synchronize);
}

template <class S, class T, class Index, class G>
void jensen_shannon_with_grad(const TensorView<S>& student, const distill::TopKTeacher<T, Index>& teacher, double beta,
                              const TensorView<G>& grad_student, DeviceLoss out, Workspace workspace, Stream stream,
                              const distill::SoftTargetOptions& options = {},
                              Synchronize synchronize = Synchronize::no) {
  detail::check_topk_types<S, T, G>();
  detail::topk_loss<T, Index>(distill::SoftDivergence::jensen_shannon, beta, student, teacher, &grad_student, out,
                              workspace, stream, options, synchronize);
}

}  // namespace shrink::cuda
