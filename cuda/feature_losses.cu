// Host-callable feature losses (shrink/cuda/feature_losses.hpp): validation, then the kept-row count, the kernels of
// shrink/cuda/kernels/feature_losses.cuh and the fixed-order reduction, for float, half and bfloat16 features.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/feature_losses.cuh"
#include "shrink/cuda/feature_losses.hpp"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"
#include "shrink/distill/attention_transfer.hpp"

namespace shrink::cuda {

std::size_t feature_loss_workspace_bytes(std::int64_t rows) {
  return detail::workspace_bytes(rows, 0, "shrink::cuda::feature_loss_workspace_bytes");
}

std::size_t attention_transfer_workspace_bytes(std::int64_t samples, std::int64_t positions) {
  const char* fn = "shrink::cuda::attention_transfer_workspace_bytes";
  if (positions < 1) fail(fn, "positions", positions, "at least one position");
  if (samples < 1) fail(fn, "samples", samples, "at least one sample");
  return detail::workspace_bytes(samples, 2 * static_cast<std::size_t>(samples * positions) * sizeof(double), fn);
}

namespace detail {
namespace {

// An optional view is absent when it holds no memory (TensorView{}), as distill's feature losses say.
template <class T>
bool absent(const TensorView<T>& v) {
  return v.data() == nullptr && (v.rank() == 0 || v.numel() == 0);
}

template <class T>
const TensorView<T>* wanted(const TensorView<T>& grad) {
  return absent(grad) ? nullptr : &grad;
}

// A gradient view, when given: the shape of its input.
template <class T>
void require_gradient_shape(const TensorView<T>& grad, const Shape& input_shape, const char* fn, const char* name,
                            const char* input) {
  require_cuda_memory(grad, fn, name);
  if (grad.shape() != input_shape)
    fail(fn, field(name, "shape").c_str(), to_string(grad.shape()),
         std::string("the shape of ") + input + ", " + to_string(input_shape) + " (or TensorView{} for none)");
}

void require_feature_options(const distill::FeatureLossOptions& o, const char* fn) {
  require_reduction(o.reduction, fn);
  require_grad_scale(o.grad_scale, fn);
}

// Every view of a feature loss on the current device: student, teacher, and the gradients and row mask when given.
template <class T>
void require_current_devices(const TensorView<const T>& student, const TensorView<const T>& teacher,
                             const TensorView<T>* grad_student, const TensorView<T>* grad_teacher,
                             const distill::FeatureLossOptions& options, bool masked, const char* fn) {
  detail::require_current_device(student.device(), fn, "student");
  detail::require_current_device(teacher.device(), fn, "teacher");
  if (grad_student != nullptr) detail::require_current_device(grad_student->device(), fn, "grad_student");
  if (grad_teacher != nullptr) detail::require_current_device(grad_teacher->device(), fn, "grad_teacher");
  if (masked) detail::require_current_device(options.row_mask.device(), fn, "options.row_mask");
}

enum class PairLoss { mse, cosine };

// Every check of mse and cosine embedding, then the launch; grad_* may be null, target is cosine's (may be empty).
template <class T>
void pair_loss(PairLoss kind, const TensorView<const T>& student, const TensorView<const T>& teacher,
               const TensorView<const std::int8_t>& target, const TensorView<T>* grad_student,
               const TensorView<T>* grad_teacher, DeviceLoss out, Workspace workspace, Stream stream,
               const distill::FeatureLossOptions& options, double margin, Synchronize synchronize, const char* fn) {
  const RowLayout s = device_rows(student, fn, "student");
  if (teacher.shape() != student.shape())
    fail(fn, "teacher.shape", to_string(teacher.shape()), "the shape of student, " + to_string(student.shape()));
  const RowLayout t = device_rows(teacher, fn, "teacher");
  Shape leading = student.shape();
  leading.rank -= 1;
  RowLayout gs, gt;
  if (grad_student != nullptr) {
    require_gradient_shape(*grad_student, student.shape(), fn, "grad_student", "student");
    gs = device_rows(*grad_student, fn, "grad_student");
  }
  if (grad_teacher != nullptr) {
    require_gradient_shape(*grad_teacher, teacher.shape(), fn, "grad_teacher", "teacher");
    gt = device_rows(*grad_teacher, fn, "grad_teacher");
  }
  const std::uint8_t* mask = per_row_view(options.row_mask, s.rows, fn, "options.row_mask", &leading);
  require_feature_options(options, fn);
  const std::int8_t* y = nullptr;
  if (kind == PairLoss::cosine) {
    y = per_row_view(target, s.rows, fn, "target", &leading);
    if (!(margin >= -1.0 && margin <= 1.0)) fail(fn, "options.margin", margin, "a margin in [-1, 1]");
  }
  require_device_loss(out, options.reduction, fn);
  detail::require_workspace(workspace, feature_loss_workspace_bytes(s.rows), "feature_loss_workspace_bytes(rows)", fn);
  require_current_devices(student, teacher, grad_student, grad_teacher, options, mask != nullptr, fn);
  if (y != nullptr) detail::require_current_device(target.device(), fn, "target");

  const kernels::LossWorkspace ws = kernels::split_workspace(workspace.data, s.rows);
  kernels::start<std::int32_t>(ws, s.rows, mask, nullptr, 0, 0, stream);
  kernels::feature_losses::PairArgs<T> a;
  a.student = student.data();
  a.teacher = teacher.data();
  a.rows = s.rows;
  a.cols = s.cols;
  a.student_stride = s.row_stride;
  a.teacher_stride = t.row_stride;
  a.grad_student = grad_student != nullptr ? grad_student->data() : nullptr;
  a.grad_teacher = grad_teacher != nullptr ? grad_teacher->data() : nullptr;
  a.grad_student_stride = gs.row_stride;
  a.grad_teacher_stride = gt.row_stride;
  a.mask = mask;
  a.reduction = options.reduction;
  a.grad_scale = options.grad_scale;
  a.accumulate = options.accumulate;
  a.target = y;
  a.margin = margin;
  a.ws = ws;
  if (kind == PairLoss::mse) {
    kernels::feature_losses::launch_mse(a, stream);
    kernels::finish(ws, s.rows, options.reduction, s.cols, out, stream);
  } else {
    kernels::feature_losses::launch_cosine(a, stream);
    kernels::finish(ws, s.rows, options.reduction, 1, out, stream);
  }
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

// [B, C, spatial...] as samples of C channels of P contiguous positions, checked as distill's attention transfer does.
using distill::attention_pair_samples;
using distill::attention_samples;
using distill::Samples;

template <class T>
void attention_loss(const TensorView<const T>& student, const TensorView<const T>& teacher,
                    const TensorView<T>* grad_student, const TensorView<T>* grad_teacher, DeviceLoss out,
                    Workspace workspace, Stream stream, const distill::FeatureLossOptions& options,
                    Synchronize synchronize, const char* fn) {
  require_cuda_memory(student, fn, "student");
  require_cuda_memory(teacher, fn, "teacher");
  const auto [s, t] = attention_pair_samples(student, teacher, fn);
  Samples gs, gt;
  if (grad_student != nullptr) {
    require_gradient_shape(*grad_student, student.shape(), fn, "grad_student", "student");
    gs = attention_samples(*grad_student, fn, "grad_student");
  }
  if (grad_teacher != nullptr) {
    require_gradient_shape(*grad_teacher, teacher.shape(), fn, "grad_teacher", "teacher");
    gt = attention_samples(*grad_teacher, fn, "grad_teacher");
  }
  const Shape samples_shape{s.count};
  const std::uint8_t* mask = per_row_view(options.row_mask, s.count, fn, "options.row_mask", &samples_shape);
  require_feature_options(options, fn);
  require_device_loss(out, options.reduction, fn);
  detail::require_workspace(workspace, attention_transfer_workspace_bytes(s.count, s.positions),
                            "attention_transfer_workspace_bytes(samples, positions)", fn);
  require_current_devices(student, teacher, grad_student, grad_teacher, options, mask != nullptr, fn);

  const kernels::LossWorkspace ws = kernels::split_workspace(workspace.data, s.count);
  kernels::start<std::int32_t>(ws, s.count, mask, nullptr, 0, 0, stream);
  kernels::feature_losses::AttentionArgs<T> a;
  a.student = {student.data(),
               s.channels,
               s.sample_stride,
               s.channel_stride,
               grad_student != nullptr ? grad_student->data() : nullptr,
               gs.sample_stride,
               gs.channel_stride};
  a.teacher = {teacher.data(),
               t.channels,
               t.sample_stride,
               t.channel_stride,
               grad_teacher != nullptr ? grad_teacher->data() : nullptr,
               gt.sample_stride,
               gt.channel_stride};
  a.samples = s.count;
  a.positions = s.positions;
  a.mask = mask;
  a.reduction = options.reduction;
  a.grad_scale = options.grad_scale;
  a.accumulate = options.accumulate;
  a.ws = ws;
  kernels::feature_losses::launch_attention(a, stream);
  kernels::finish(ws, s.count, options.reduction, s.positions, out, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

}  // namespace
}  // namespace detail

template <class T>
void mse_loss(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss out, Workspace workspace,
              Stream stream, const distill::FeatureLossOptions& options, Synchronize synchronize) {
  detail::pair_loss<T>(detail::PairLoss::mse, student, teacher, {}, nullptr, nullptr, out, workspace, stream, options,
                       0.0, synchronize, "shrink::cuda::mse_loss");
}

template <class T>
void mse_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher, TensorView<T> grad_student,
                        TensorView<T> grad_teacher, DeviceLoss out, Workspace workspace, Stream stream,
                        const distill::FeatureLossOptions& options, Synchronize synchronize) {
  detail::pair_loss<T>(detail::PairLoss::mse, student, teacher, {}, detail::wanted(grad_student),
                       detail::wanted(grad_teacher), out, workspace, stream, options, 0.0, synchronize,
                       "shrink::cuda::mse_loss_with_grad");
}

template <class T>
void cosine_embedding_loss(TensorView<const T> student, TensorView<const T> teacher,
                           TensorView<const std::int8_t> target, DeviceLoss out, Workspace workspace, Stream stream,
                           const distill::CosineEmbeddingOptions& options, Synchronize synchronize) {
  detail::pair_loss<T>(detail::PairLoss::cosine, student, teacher, target, nullptr, nullptr, out, workspace, stream,
                       options, options.margin, synchronize, "shrink::cuda::cosine_embedding_loss");
}

template <class T>
void cosine_embedding_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher,
                                     TensorView<const std::int8_t> target, TensorView<T> grad_student,
                                     TensorView<T> grad_teacher, DeviceLoss out, Workspace workspace, Stream stream,
                                     const distill::CosineEmbeddingOptions& options, Synchronize synchronize) {
  detail::pair_loss<T>(detail::PairLoss::cosine, student, teacher, target, detail::wanted(grad_student),
                       detail::wanted(grad_teacher), out, workspace, stream, options, options.margin, synchronize,
                       "shrink::cuda::cosine_embedding_loss_with_grad");
}

template <class T>
void attention_transfer_loss(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss out,
                             Workspace workspace, Stream stream, const distill::FeatureLossOptions& options,
                             Synchronize synchronize) {
  detail::attention_loss<T>(student, teacher, nullptr, nullptr, out, workspace, stream, options, synchronize,
                            "shrink::cuda::attention_transfer_loss");
}

template <class T>
void attention_transfer_loss_with_grad(distill::input_view<T> student, distill::input_view<T> teacher,
                                       TensorView<T> grad_student, TensorView<T> grad_teacher, DeviceLoss out,
                                       Workspace workspace, Stream stream, const distill::FeatureLossOptions& options,
                                       Synchronize synchronize) {
  detail::attention_loss<T>(student, teacher, detail::wanted(grad_student), detail::wanted(grad_teacher), out,
                            workspace, stream, options, synchronize, "shrink::cuda::attention_transfer_loss_with_grad");
}

#define SHRINK_INSTANTIATE_FEATURE_LOSSES(T)                                                                           \
  template void mse_loss<T>(TensorView<const T>, TensorView<const T>, DeviceLoss, Workspace, Stream,                   \
                            const distill::FeatureLossOptions&, Synchronize);                                          \
  template void mse_loss_with_grad<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, TensorView<T>,          \
                                      DeviceLoss, Workspace, Stream, const distill::FeatureLossOptions&, Synchronize); \
  template void cosine_embedding_loss<T>(TensorView<const T>, TensorView<const T>, TensorView<const std::int8_t>,      \
                                         DeviceLoss, Workspace, Stream, const distill::CosineEmbeddingOptions&,        \
                                         Synchronize);                                                                 \
  template void cosine_embedding_loss_with_grad<T>(                                                                    \
      TensorView<const T>, TensorView<const T>, TensorView<const std::int8_t>, TensorView<T>, TensorView<T>,           \
      DeviceLoss, Workspace, Stream, const distill::CosineEmbeddingOptions&, Synchronize);                             \
  template void attention_transfer_loss<T>(TensorView<const T>, TensorView<const T>, DeviceLoss, Workspace, Stream,    \
                                           const distill::FeatureLossOptions&, Synchronize);                           \
  template void attention_transfer_loss_with_grad<T>(TensorView<const T>, TensorView<const T>, TensorView<T>,          \
                                                     TensorView<T>, DeviceLoss, Workspace, Stream,                     \
                                                     const distill::FeatureLossOptions&, Synchronize);
SHRINK_INSTANTIATE_FEATURE_LOSSES(float)
SHRINK_INSTANTIATE_FEATURE_LOSSES(half)
SHRINK_INSTANTIATE_FEATURE_LOSSES(bfloat16)
#undef SHRINK_INSTANTIATE_FEATURE_LOSSES

}  // namespace shrink::cuda
