// Host API of the CUDA feature distillation losses, with their gradients (compiled in cuda/feature_losses.cu; plain
// C++, no CUDA headers): mean squared error, cosine embedding and attention transfer.
//
// The same functions as distill/feature_mse.hpp, cosine_embedding.hpp and attention_transfer.hpp: the same options
// (distill::FeatureLossOptions, distill::CosineEmbeddingOptions; row masks and targets as CUDA views), values,
// reductions, grad_scale and accumulate, the same layouts ([..., D] rows with a contiguous last dimension and one row
// stride; [B, C, spatial...] samples with contiguous spatial dimensions, any sample and channel strides, student and
// teacher channel counts free). Device code: shrink/cuda/kernels/feature_losses.cuh, one block per row (sample).
//
// Two phases, as CUB: the workspace query, then the call, which enqueues on `stream`, allocates nothing and returns at
// once; the loss lands in device memory (DeviceLoss). Host checks throw shrink::Error before any CUDA call (shapes,
// layouts, devices, options, as the CPU checks them). Device checks go to the status word, read with
// Synchronize::yes or check_status: kNonFinite (NaN or inf in a kept row or sample; the CPU checks masked rows too),
// kBadIndex (a cosine target other than +1 or -1). Gradient views: TensorView{} when not wanted; they must not overlap
// each other or the inputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"

namespace shrink::cuda {

// Workspace of mse_loss and cosine_embedding_loss (with or without gradients) on `rows` rows.
std::size_t feature_loss_workspace_bytes(std::int64_t rows);

// Workspace of attention_transfer_loss (with or without gradients) on `samples` samples of `positions` positions (the
// product of the spatial dimensions): one double per sample plus 2 * samples * positions doubles.
std::size_t attention_transfer_workspace_bytes(std::int64_t samples, std::int64_t positions);

// F.mse_loss(student, teacher, reduction) over rows of [..., D]. T: float, half, bfloat16 (deduced from const views;
// with mutable views name it: mse_loss<float>(...)).
template <class T>
void mse_loss(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss out, Workspace workspace,
              Stream stream, const distill::FeatureLossOptions& options = {},
              Synchronize synchronize = Synchronize::no);

// mse_loss and its gradients into grad_student and grad_teacher (each of its input's shape, or TensorView{}); T is
// deduced from the gradient views (name it when both are TensorView{}).
template <class T>
void mse_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher, TensorView<T> grad_student,
                        TensorView<T> grad_teacher, DeviceLoss out, Workspace workspace, Stream stream,
                        const distill::FeatureLossOptions& options = {}, Synchronize synchronize = Synchronize::no);

// F.cosine_embedding_loss(student, teacher, target, margin, reduction) over rows of [..., D]; target: int8 +1 or -1
// per row (the leading dims' shape or [rows], contiguous), TensorView{} = every row +1.
template <class T>
void cosine_embedding_loss(TensorView<const T> student, TensorView<const T> teacher,
                           TensorView<const std::int8_t> target, DeviceLoss out, Workspace workspace, Stream stream,
                           const distill::CosineEmbeddingOptions& options = {},
                           Synchronize synchronize = Synchronize::no);

template <class T>
void cosine_embedding_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher,
                                     TensorView<const std::int8_t> target, TensorView<T> grad_student,
                                     TensorView<T> grad_teacher, DeviceLoss out, Workspace workspace, Stream stream,
                                     const distill::CosineEmbeddingOptions& options = {},
                                     Synchronize synchronize = Synchronize::no);

// Attention transfer between student [B, Cs, spatial...] and teacher [B, Ct, spatial...], reduced over samples
// (options.row_mask is [B]).
template <class T>
void attention_transfer_loss(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss out,
                             Workspace workspace, Stream stream, const distill::FeatureLossOptions& options = {},
                             Synchronize synchronize = Synchronize::no);

template <class T>
void attention_transfer_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher,
                                       TensorView<T> grad_student, TensorView<T> grad_teacher, DeviceLoss out,
                                       Workspace workspace, Stream stream,
                                       const distill::FeatureLossOptions& options = {},
                                       Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
