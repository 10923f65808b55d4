// Host API of the CUDA cross-entropy with hard labels and its gradient (compiled in cuda/cross_entropy.cu; plain C++,
// no CUDA headers).
//
// The same function as distill/cross_entropy.hpp (F.cross_entropy with ignore_index and label smoothing): the same
// options (distill::CrossEntropyOptions, its row mask a CUDA view), values, -inf semantics, reductions, grad_scale and
// accumulate. Device code: shrink/cuda/kernels/cross_entropy.cuh (one block per row: an online-softmax pass, then the
// gradient pass; extra memory one double per row).
//
// Two phases, as CUB: cross_entropy_workspace_bytes(rows), then the call, which enqueues on `stream`, allocates
// nothing and returns at once. The loss lands in device memory (DeviceLoss). Host checks throw shrink::Error before
// any CUDA call: views on the current CUDA device, logits [..., V] with a contiguous last dimension and one row
// stride, labels (int32 or int64) one per row and contiguous, the gradient of the logits' rows and columns, the
// options. Device checks go to the status word: kNonFinite (NaN or +inf in a kept row, or a kept row all -inf),
// kBadIndex (a kept label outside [0, V) that is not ignore_index); Synchronize::yes or check_status reads it.
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

// Workspace of both calls below on `rows` rows: the status word, the kept-row count and one double per row.
std::size_t cross_entropy_workspace_bytes(std::int64_t rows);

namespace detail {

// grad == nullptr: the loss only. T: float, half, bfloat16; Label: int32, int64.
template <class T, class Label>
void cross_entropy(TensorView<const T> logits, TensorView<const Label> labels, const TensorView<T>* grad,
                   DeviceLoss out, Workspace workspace, Stream stream, const distill::CrossEntropyOptions& options,
                   Synchronize synchronize);

}  // namespace detail

// Cross-entropy of logits [..., V] against labels [...], reduced, into *out.value (and out.per_row).
template <class S, class L>
void cross_entropy(const TensorView<S>& logits, const TensorView<L>& labels, DeviceLoss out, Workspace workspace,
                   Stream stream, const distill::CrossEntropyOptions& options = {},
                   Synchronize synchronize = Synchronize::no) {
  using T = std::remove_const_t<S>;
  static_assert(distill::is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  detail::cross_entropy<T, std::remove_const_t<L>>(logits, labels, nullptr, out, workspace, stream, options,
                                                   synchronize);
}

// cross_entropy and its gradient to the logits, written to (or, with options.accumulate, added to) grad_logits.
template <class S, class L, class G>
void cross_entropy_with_grad(const TensorView<S>& logits, const TensorView<L>& labels, const TensorView<G>& grad_logits,
                             DeviceLoss out, Workspace workspace, Stream stream,
                             const distill::CrossEntropyOptions& options = {},
                             Synchronize synchronize = Synchronize::no) {
  using T = std::remove_const_t<S>;
  static_assert(distill::is_logit_type_v<T>, "logits must be float, shrink::half or shrink::bfloat16");
  static_assert(std::is_same_v<G, T>, "grad_logits must be a mutable view of the logits' element type");
  detail::cross_entropy<T, std::remove_const_t<L>>(logits, labels, &grad_logits, out, workspace, stream, options,
                                                   synchronize);
}

}  // namespace shrink::cuda
