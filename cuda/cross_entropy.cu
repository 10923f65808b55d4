// Host-callable cross-entropy (shrink/cuda/cross_entropy.hpp): validation, then the kept-row count, the row kernel
// of shrink/cuda/kernels/cross_entropy.cuh and the fixed-order reduction, for float, half and bfloat16 logits and int32 or
// int64 labels.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/cross_entropy.cuh"
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"

namespace shrink::cuda {

std::size_t cross_entropy_workspace_bytes(std::int64_t rows) {
  return detail::workspace_bytes(rows, 0, "shrink::cuda::cross_entropy_workspace_bytes");
}

namespace detail {

template <class T, class Label>
void cross_entropy(TensorView<const T> logits, TensorView<const Label> labels, const TensorView<T>* grad,
                   DeviceLoss out, Workspace workspace, Stream stream, const distill::CrossEntropyOptions& options,
                   Synchronize synchronize) {
  const char* fn = grad != nullptr ? "shrink::cuda::cross_entropy_with_grad" : "shrink::cuda::cross_entropy";
  const RowLayout z = device_rows(logits, fn, "logits");
  RowLayout g;
  if (grad != nullptr) {
    g = device_rows(*grad, fn, "grad_logits");
    require_same_rows(z, g, fn, "grad_logits", "logits");
  }
  const Label* y = per_row_view(labels, z.rows, fn, "labels");
  if (y == nullptr) fail(fn, "labels", "an empty view", "one label per row (" + std::to_string(z.rows) + ")");
  const std::uint8_t* mask = per_row_view(options.row_mask, z.rows, fn, "options.row_mask");
  if (!(options.label_smoothing >= 0.0f && options.label_smoothing <= 1.0f))
    fail(fn, "options.label_smoothing", options.label_smoothing, "a value in [0, 1]");
  require_reduction(options.reduction, fn);
  require_grad_scale(options.grad_scale, fn);
  require_device_loss(out, options.reduction, fn);
  detail::require_workspace(workspace, cross_entropy_workspace_bytes(z.rows), "cross_entropy_workspace_bytes(rows)",
                            fn);
  detail::require_current_device(logits.device(), fn, "logits");
  detail::require_current_device(labels.device(), fn, "labels");
  if (grad != nullptr) detail::require_current_device(grad->device(), fn, "grad_logits");
  if (mask != nullptr) detail::require_current_device(options.row_mask.device(), fn, "options.row_mask");

  const kernels::LossWorkspace ws = kernels::split_workspace(workspace.data, z.rows);
  kernels::start(ws, z.rows, mask, y, options.ignore_index, z.cols, stream);
  kernels::cross_entropy::Args<T, Label> a;
  a.logits = logits.data();
  a.rows = z.rows;
  a.cols = z.cols;
  a.logits_stride = z.row_stride;
  a.labels = y;
  a.mask = mask;
  a.ignore_index = options.ignore_index;
  a.smoothing = options.label_smoothing;
  a.reduction = options.reduction;
  a.grad_scale = options.grad_scale;
  a.accumulate = options.accumulate;
  a.grad = grad != nullptr ? grad->data() : nullptr;
  a.grad_stride = g.row_stride;
  a.ws = ws;
  kernels::cross_entropy::launch(a, stream);
  kernels::finish(ws, z.rows, options.reduction, 1, out, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_CROSS_ENTROPY(T, Label)                                                          \
  template void cross_entropy<T, Label>(TensorView<const T>, TensorView<const Label>, const TensorView<T>*, \
                                        DeviceLoss, Workspace, Stream, const distill::CrossEntropyOptions&, \
                                        Synchronize);
SHRINK_INSTANTIATE_CROSS_ENTROPY(float, std::int32_t)
SHRINK_INSTANTIATE_CROSS_ENTROPY(float, std::int64_t)
SHRINK_INSTANTIATE_CROSS_ENTROPY(half, std::int32_t)
SHRINK_INSTANTIATE_CROSS_ENTROPY(half, std::int64_t)
SHRINK_INSTANTIATE_CROSS_ENTROPY(bfloat16, std::int32_t)
SHRINK_INSTANTIATE_CROSS_ENTROPY(bfloat16, std::int64_t)
#undef SHRINK_INSTANTIATE_CROSS_ENTROPY

}  // namespace detail
}  // namespace shrink::cuda
