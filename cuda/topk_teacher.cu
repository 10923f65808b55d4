// Host-callable top-k teacher losses (shrink/cuda/topk_teacher.hpp): validation, then the kept-row count, the row
// kernel of shrink/cuda/kernels/topk_teacher.cuh and the fixed-order reduction, for float, half and bfloat16 logits and int32
// or int64 indices.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"
#include "shrink/cuda/kernels/topk_teacher.cuh"
#include "shrink/cuda/topk_teacher.hpp"

namespace shrink::cuda {

std::size_t topk_workspace_bytes(std::int64_t rows) {
  return detail::workspace_bytes(rows, 0, "shrink::cuda::topk_workspace_bytes");
}

namespace detail {
namespace {

const char* topk_name(distill::SoftDivergence kind, bool with_grad) {
  using distill::SoftDivergence;
  switch (kind) {
    case SoftDivergence::forward_kl: return with_grad ? "shrink::cuda::kl_div_with_grad" : "shrink::cuda::kl_div";
    case SoftDivergence::reverse_kl:
      return with_grad ? "shrink::cuda::reverse_kl_div_with_grad" : "shrink::cuda::reverse_kl_div";
    case SoftDivergence::jensen_shannon:
      return with_grad ? "shrink::cuda::jensen_shannon_with_grad" : "shrink::cuda::jensen_shannon";
  }
  return "shrink::cuda";
}

}  // namespace

template <class T, class Index>
void topk_loss(distill::SoftDivergence kind, double beta, TensorView<const T> student,
               const distill::TopKTeacher<T, Index>& teacher, const TensorView<T>* grad, DeviceLoss out,
               Workspace workspace, Stream stream, const distill::SoftTargetOptions& options, Synchronize synchronize) {
  const char* fn = topk_name(kind, grad != nullptr);
  const RowLayout zs = device_rows(student, fn, "student");
  const RowLayout tl = device_rows(teacher.logits, fn, "teacher.logits");
  const RowLayout ti = device_rows(teacher.indices, fn, "teacher.indices");
  if (tl.rows != zs.rows)
    fail(fn, "teacher.logits", rows_text(tl), "one row of k logits per student row (" + std::to_string(zs.rows) + ")");
  require_same_rows(tl, ti, fn, "teacher.indices", "teacher.logits");
  if (tl.cols > zs.cols) fail(fn, "teacher.logits", rows_text(tl), "k <= V (" + std::to_string(zs.cols) + ")");
  RowLayout g;
  if (grad != nullptr) {
    g = device_rows(*grad, fn, "grad_student");
    require_same_rows(zs, g, fn, "grad_student", "student");
  }
  if (!(options.temperature > 0.0f) || !std::isfinite(options.temperature))
    fail(fn, "options.temperature", options.temperature, "a finite temperature > 0");
  require_reduction(options.reduction, fn);
  require_grad_scale(options.grad_scale, fn);
  if (kind == distill::SoftDivergence::jensen_shannon && !(beta >= 0.0 && beta <= 1.0))
    fail(fn, "beta", beta, "a value in [0, 1]");
  const std::uint8_t* mask = per_row_view(options.row_mask, zs.rows, fn, "options.row_mask");
  const float* tail = per_row_view(teacher.tail_mass, zs.rows, fn, "teacher.tail_mass");
  require_device_loss(out, options.reduction, fn);
  detail::require_workspace(workspace, topk_workspace_bytes(zs.rows), "topk_workspace_bytes(rows)", fn);
  detail::require_current_device(student.device(), fn, "student");
  detail::require_current_device(teacher.logits.device(), fn, "teacher.logits");
  detail::require_current_device(teacher.indices.device(), fn, "teacher.indices");
  if (tail != nullptr) detail::require_current_device(teacher.tail_mass.device(), fn, "teacher.tail_mass");
  if (grad != nullptr) detail::require_current_device(grad->device(), fn, "grad_student");
  if (mask != nullptr) detail::require_current_device(options.row_mask.device(), fn, "options.row_mask");
  const std::size_t room = kernels::topk_teacher::max_bitmap_bytes();
  if (kernels::topk_teacher::bitmap_bytes(zs.cols) > room)
    fail(fn, "student.shape", to_string(student.shape()),
         "V <= " + std::to_string(room / sizeof(unsigned) * 32) + " (the row's index bitmap in shared memory)");

  const kernels::LossWorkspace ws = kernels::split_workspace(workspace.data, zs.rows);
  kernels::start<std::int32_t>(ws, zs.rows, mask, nullptr, 0, 0, stream);
  kernels::topk_teacher::Args<T, Index> a;
  a.student = student.data();
  a.rows = zs.rows;
  a.cols = zs.cols;
  a.student_stride = zs.row_stride;
  a.teacher = teacher.logits.data();
  a.k = tl.cols;
  a.teacher_stride = tl.row_stride;
  a.indices = teacher.indices.data();
  a.index_stride = ti.row_stride;
  a.tail = tail;
  a.mask = mask;
  a.kind = kind;
  a.beta = beta;
  a.temperature = options.temperature;
  a.reduction = options.reduction;
  a.grad_scale = options.grad_scale;
  a.accumulate = options.accumulate;
  a.grad = grad != nullptr ? grad->data() : nullptr;
  a.grad_stride = g.row_stride;
  a.ws = ws;
  kernels::topk_teacher::launch(a, stream);
  kernels::finish(ws, zs.rows, options.reduction, zs.cols, out, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_TOPK(T, Index)                                                                    \
  template void topk_loss<T, Index>(distill::SoftDivergence, double, TensorView<const T>,                    \
                                    const distill::TopKTeacher<T, Index>&, const TensorView<T>*, DeviceLoss, \
                                    Workspace, Stream, const distill::SoftTargetOptions&, Synchronize);
SHRINK_INSTANTIATE_TOPK(float, std::int32_t)
SHRINK_INSTANTIATE_TOPK(float, std::int64_t)
SHRINK_INSTANTIATE_TOPK(half, std::int32_t)
SHRINK_INSTANTIATE_TOPK(half, std::int64_t)
SHRINK_INSTANTIATE_TOPK(bfloat16, std::int32_t)
SHRINK_INSTANTIATE_TOPK(bfloat16, std::int64_t)
#undef SHRINK_INSTANTIATE_TOPK

}  // namespace detail
}  // namespace shrink::cuda
