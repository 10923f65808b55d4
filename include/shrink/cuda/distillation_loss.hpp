// Host API of the CUDA distillation objective alpha * KD + (1 - alpha) * CE and its gradient (compiled in
// cuda/distillation_loss.cu; plain C++, no CUDA headers).
//
// The same function as distill/distillation_loss.hpp, term for term: the same options (distill::DistillationOptions,
// its row mask a CUDA view), the KD part kl_div against full teacher logits (shrink/cuda/soft_target.hpp) or a
// distill::TopKTeacher (shrink/cuda/topk_teacher.hpp), the CE part cross_entropy (shrink/cuda/cross_entropy.hpp),
// each with its own reduction (none for both or for neither), ignore_index rows out of CE only, a part of weight 0
// not computed. It composes those calls on `stream`: KD writes the gradient (grad_scale * alpha, the caller's
// accumulate; with alpha = 0 and no accumulate the gradient is zeroed instead), CE adds to it (grad_scale *
// (1 - alpha)), then one small kernel writes value = alpha * kd + (1 - alpha) * ce and, when out.per_row is given
// (required with Reduction::none), alpha * kd_row + (1 - alpha) * ce_row per row (0 for absent rows).
//
// Two phases, as CUB: distillation_loss_workspace_bytes(rows), then the call, which enqueues on `stream`, allocates
// nothing and returns at once. Every host check of both parts runs before anything is enqueued (shrink::Error, and
// nothing is written). The workspace starts with a status word holding both parts' device checks (kNonFinite,
// kBadIndex, kBadTailMass as in the parts' headers): Synchronize::yes, or check_status on the workspace later, reads it.
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

// Workspace of every call below on `rows` rows, either teacher: the status word, the KD and CE workspaces, and the
// two parts' values and per-row losses, each 16-byte aligned.
std::size_t distillation_loss_workspace_bytes(std::int64_t rows);

namespace detail {

// grad == nullptr: the loss only. T: float, half, bfloat16; Teacher: TensorView<const T> (full logits) or
// distill::TopKTeacher<T, Index> (Index int32 or int64); Label: int32, int64.
template <class T, class Teacher, class Label>
void distillation_loss(TensorView<const T> student, const Teacher& teacher, TensorView<const Label> labels,
                       const TensorView<T>* grad, DeviceLoss out, Workspace workspace, Stream stream,
                       const distill::DistillationOptions& options, Synchronize synchronize);

// The teacher as the compiled functions take it: full logits as a const view, a TopKTeacher as is.
template <class T, class U>
TensorView<const T> distillation_teacher(const TensorView<U>& teacher) {
  static_assert(std::is_same_v<std::remove_const_t<U>, T>, "student and teacher logits must have the same element type");
  return teacher;
}

template <class T, class U, class Index>
const distill::TopKTeacher<T, Index>& distillation_teacher(const distill::TopKTeacher<U, Index>& teacher) {
  static_assert(std::is_same_v<U, T>, "student and teacher logits must have the same element type");
  return teacher;
}

}  // namespace detail

// alpha * kl_div(student, teacher, T) + (1 - alpha) * cross_entropy(student, labels), reduced, into *out.value (and
// out.per_row). student [..., V]; teacher: full logits [..., V] (a TensorView) or a TopKTeacher; labels [...].
template <class S, class Teacher, class L>
void distillation_loss(const TensorView<S>& student, const Teacher& teacher, const TensorView<L>& labels,
                       DeviceLoss out, Workspace workspace, Stream stream,
                       const distill::DistillationOptions& options = {}, Synchronize synchronize = Synchronize::no) {
  using T = std::remove_const_t<S>;
  static_assert(distill::is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  detail::distillation_loss<T>(student, detail::distillation_teacher<T>(teacher),
                               TensorView<const std::remove_const_t<L>>(labels), nullptr, out, workspace, stream,
                               options, synchronize);
}

// distillation_loss and its gradient to the student logits, written to (or, with options.accumulate, added to)
// grad_student.
template <class S, class Teacher, class L, class G>
void distillation_loss_with_grad(const TensorView<S>& student, const Teacher& teacher, const TensorView<L>& labels,
                                 const TensorView<G>& grad_student, DeviceLoss out, Workspace workspace,
                                 Stream stream, const distill::DistillationOptions& options = {},
                                 Synchronize synchronize = Synchronize::no) {
  using T = std::remove_const_t<S>;
  static_assert(distill::is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  detail::distillation_loss<T>(student, detail::distillation_teacher<T>(teacher),
                               TensorView<const std::remove_const_t<L>>(labels), &grad_student, out, workspace, stream,
                               options, synchronize);
}

}  // namespace shrink::cuda
