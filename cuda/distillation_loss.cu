// Host-callable distillation objective (shrink/cuda/distillation_loss.hpp): every host check of both parts, then the
// KD part (soft_target.hpp's or topk_teacher.hpp's kl_div), the CE part (cross_entropy.hpp) adding to its gradient,
// and one small kernel mixing their values and status words; for float, half and bfloat16 logits, full or top-k
// (int32 or int64 indices) teachers and int32 or int64 labels.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/cuda/distillation_loss.hpp"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/soft_target.hpp"
#include "shrink/cuda/topk_teacher.hpp"
#include "shrink/distill/logit_rows.hpp"

namespace shrink::cuda {
namespace {

std::size_t round_up_16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

// Byte offsets into the workspace, each a multiple of 16: the status word (both parts' bits), the KD part's workspace
// (room for either teacher), the CE part's, the two values, the two per-row arrays.
struct Layout {
  std::size_t kd = 0, ce = 0, kd_value = 0, ce_value = 0, kd_rows = 0, ce_rows = 0, total = 0;
};

Layout layout_of(std::int64_t rows) {
  const std::size_t per_row = round_up_16(static_cast<std::size_t>(rows) * sizeof(double));
  Layout l;
  l.kd = kStatusBytes;
  l.ce = l.kd + round_up_16(std::max(soft_target_workspace_bytes(rows), topk_workspace_bytes(rows)));
  l.kd_value = l.ce + round_up_16(cross_entropy_workspace_bytes(rows));
  l.ce_value = l.kd_value + 16;
  l.kd_rows = l.ce_value + 16;
  l.ce_rows = l.kd_rows + per_row;
  l.total = l.ce_rows + per_row;
  return l;
}

// Zeroes rows x cols elements of `word` size, row r at data + r * stride (0 bits are +0 in float, half and bfloat16).
template <class Word>
__global__ void zero_rows_kernel(Word* data, std::int64_t rows, std::int64_t cols, std::int64_t stride) {
  const std::int64_t n = rows * cols;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols, j = i - r * cols;
    data[r * stride + j] = Word{0};
  }
}

struct MixArgs {
  double alpha = 0.0;
  bool with_kd = false, with_ce = false;  // the parts that ran (a skipped part's memory is never read)
  const double* kd_value = nullptr;
  const double* ce_value = nullptr;
  const double* kd_rows = nullptr;
  const double* ce_rows = nullptr;
  const int* kd_status = nullptr;
  const int* ce_status = nullptr;
  std::int64_t rows = 0;
  double* value = nullptr;
  double* per_row = nullptr;  // null: not asked for
  int* status = nullptr;
};

// value = alpha * kd + (1 - alpha) * ce, per_row likewise, status = the parts' bits; a skipped part counts 0, as on
// the CPU (0 * inf would be NaN).
__global__ void mix_kernel(MixArgs a) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (a.per_row != nullptr)
    for (std::int64_t r = first; r < a.rows; r += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      a.per_row[r] = (a.with_kd ? a.alpha * a.kd_rows[r] : 0.0) + (a.with_ce ? (1.0 - a.alpha) * a.ce_rows[r] : 0.0);
  if (first == 0) {
    *a.value = (a.with_kd ? a.alpha * *a.kd_value : 0.0) + (a.with_ce ? (1.0 - a.alpha) * *a.ce_value : 0.0);
    *a.status = (a.with_kd ? *a.kd_status : 0) | (a.with_ce ? *a.ce_status : 0);
  }
}

constexpr int kMixThreads = 256;

Workspace part(const Workspace& w, std::size_t begin, std::size_t end) {
  return Workspace{static_cast<char*>(w.data) + begin, end - begin};
}

template <class U>
U* at(const Workspace& w, std::size_t offset) {
  return reinterpret_cast<U*>(static_cast<char*>(w.data) + offset);
}

// The KD part's host checks, as soft_target.cu (full logits) and topk_teacher.cu (top-k) make them.
template <class T>
void check_teacher(const TensorView<const T>& student, const detail::RowLayout& s, const TensorView<const T>& teacher,
                   const char* fn) {
  if (s.cols > kMaxSoftTargetColumns)
    fail(fn, "student.shape", to_string(student.shape()),
         "a last dimension V of at most kMaxSoftTargetColumns = " + std::to_string(kMaxSoftTargetColumns));
  detail::device_rows(teacher, fn, "teacher");
  distill::flatten_rows(teacher, fn, "teacher");
  distill::require_same_shape(student, teacher, fn, "teacher", "student");
}

template <class T, class Index>
void check_teacher(const TensorView<const T>&, const detail::RowLayout& s,
                   const distill::TopKTeacher<T, Index>& teacher, const char* fn) {
  using namespace detail;
  const RowLayout tl = device_rows(teacher.logits, fn, "teacher.logits");
  const RowLayout ti = device_rows(teacher.indices, fn, "teacher.indices");
  if (tl.rows != s.rows)
    fail(fn, "teacher.logits", rows_text(tl), "one row of k logits per student row (" + std::to_string(s.rows) + ")");
  require_same_rows(tl, ti, fn, "teacher.indices", "teacher.logits");
  if (tl.cols > s.cols) fail(fn, "teacher.logits", rows_text(tl), "k <= V (" + std::to_string(s.cols) + ")");
  per_row_view(teacher.tail_mass, s.rows, fn, "teacher.tail_mass");
}

// The gradient's checks: the student's rows for every part, the student's very shape for full logits.
template <class T>
void check_gradient_shape(const TensorView<const T>& student, const TensorView<const T>&, const TensorView<T>& grad,
                          const char* fn) {
  distill::require_same_shape(student, grad, fn, "grad_student", "student");
  distill::flatten_rows(TensorView<const T>(grad), fn, "grad_student");
}

template <class T, class Index>
void check_gradient_shape(const TensorView<const T>&, const distill::TopKTeacher<T, Index>&, const TensorView<T>&,
                          const char*) {}

template <class T>
void require_teacher_device(const TensorView<const T>& teacher, const char* fn) {
  detail::require_current_device(teacher.device(), fn, "teacher");
}

template <class T, class Index>
void require_teacher_device(const distill::TopKTeacher<T, Index>& teacher, const char* fn) {
  detail::require_current_device(teacher.logits.device(), fn, "teacher.logits");
  detail::require_current_device(teacher.indices.device(), fn, "teacher.indices");
  if (teacher.tail_mass.data() != nullptr)
    detail::require_current_device(teacher.tail_mass.device(), fn, "teacher.tail_mass");
}

// The KD part on its slice of the workspace.
template <class T>
void run_kd(const TensorView<const T>& student, const TensorView<const T>& teacher, const TensorView<T>* grad,
            DeviceLoss loss, Workspace ws, Stream stream, const distill::DistillationOptions& o, double scale) {
  SoftTargetOptions k;
  k.temperature = o.temperature;
  k.reduction = o.kd_reduction;
  k.grad_scale = scale;
  k.accumulate = o.accumulate;
  k.row_mask = o.row_mask;
  if (grad != nullptr) kl_div_with_grad<T>(student, teacher, *grad, loss, k, ws, stream, Synchronize::no);
  else kl_div<T>(student, teacher, loss, k, ws, stream, Synchronize::no);
}

template <class T, class Index>
void run_kd(const TensorView<const T>& student, const distill::TopKTeacher<T, Index>& teacher,
            const TensorView<T>* grad, DeviceLoss loss, Workspace ws, Stream stream,
            const distill::DistillationOptions& o, double scale) {
  const distill::SoftTargetOptions k = distill::kd_options(o, scale, o.accumulate);
  if (grad != nullptr) kl_div_with_grad(student, teacher, *grad, loss, ws, stream, k, Synchronize::no);
  else kl_div(student, teacher, loss, ws, stream, k, Synchronize::no);
}

// grad = 0 over its rows: one memset when they are contiguous, else a kernel that leaves the padding alone.
template <class T>
void zero_gradient(const TensorView<T>& grad, const detail::RowLayout& g, Stream stream) {
  if (g.rows == 1 || g.row_stride == g.cols) {
    SHRINK_CUDA_CHECK(cudaMemsetAsync(grad.data(), 0, static_cast<std::size_t>(g.rows * g.cols) * sizeof(T), stream));
    return;
  }
  using Word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint16_t>;
  static_assert(sizeof(Word) == sizeof(T), "logits are 2 or 4 bytes");
  constexpr int threads = 256;
  zero_rows_kernel<Word><<<kernels::grid_blocks(g.rows * g.cols, threads), threads, 0, stream>>>(
      reinterpret_cast<Word*>(grad.data()), g.rows, g.cols, g.row_stride);
  SHRINK_CUDA_CHECK_LAUNCH(zero_rows_kernel);
}

}  // namespace

std::size_t distillation_loss_workspace_bytes(std::int64_t rows) {
  if (rows < 1) fail("shrink::cuda::distillation_loss_workspace_bytes", "rows", rows, "at least one row");
  return layout_of(rows).total;
}

namespace detail {

template <class T, class Teacher, class Label>
void distillation_loss(TensorView<const T> student, const Teacher& teacher, TensorView<const Label> labels,
                       const TensorView<T>* grad, DeviceLoss out, Workspace workspace, Stream stream,
                       const distill::DistillationOptions& o, Synchronize synchronize) {
  const char* fn = grad != nullptr ? "shrink::cuda::distillation_loss_with_grad" : "shrink::cuda::distillation_loss";
  // Every check of both parts first: KD runs first and CE adds to its gradient, so nothing may fail in between.
  distill::require_unit_interval(o.alpha, fn, "options.alpha");
  distill::require_temperature(o.temperature, fn);  // even when alpha = 0 leaves the KD part out
  require_grad_scale(o.grad_scale, fn);
  require_reduction(o.kd_reduction, fn, "options.kd_reduction");
  require_reduction(o.ce_reduction, fn, "options.ce_reduction");
  if ((o.kd_reduction == distill::Reduction::none) != (o.ce_reduction == distill::Reduction::none))
    fail(fn, "options.kd_reduction", distill::to_string(o.kd_reduction),
         std::string("none for both parts or for neither (ce_reduction is ") + distill::to_string(o.ce_reduction) +
             ")");
  if (!(o.label_smoothing >= 0.0f && o.label_smoothing <= 1.0f))
    fail(fn, "options.label_smoothing", o.label_smoothing, "a value in [0, 1]");
  const RowLayout z = device_rows(student, fn, "student");
  distill::flatten_rows(student, fn, "student");
  const Label* y = per_row_view(labels, z.rows, fn, "labels");
  if (y == nullptr) fail(fn, "labels", "an empty view", "one label per row (" + std::to_string(z.rows) + ")");
  const std::uint8_t* mask = per_row_view(o.row_mask, z.rows, fn, "options.row_mask");
  if (mask != nullptr) distill::row_mask(o.row_mask, z.rows, fn);
  check_teacher(student, z, teacher, fn);
  RowLayout g;
  if (grad != nullptr) {
    g = device_rows(*grad, fn, "grad_student");
    require_same_rows(z, g, fn, "grad_student", "student");
    check_gradient_shape(student, teacher, *grad, fn);
  }
  require_device_loss(out, o.kd_reduction, fn);
  const Layout l = layout_of(z.rows);
  detail::require_workspace(workspace, l.total, "distillation_loss_workspace_bytes(rows)", fn);
  detail::require_current_device(student.device(), fn, "student");
  require_teacher_device(teacher, fn);
  detail::require_current_device(labels.device(), fn, "labels");
  if (grad != nullptr) detail::require_current_device(grad->device(), fn, "grad_student");
  if (mask != nullptr) detail::require_current_device(o.row_mask.device(), fn, "options.row_mask");

  const double alpha = o.alpha;
  const bool with_kd = alpha > 0.0, with_ce = alpha < 1.0;
  const bool rows_out = out.per_row != nullptr;
  if (with_kd) {
    const DeviceLoss kd{at<double>(workspace, l.kd_value), rows_out ? at<double>(workspace, l.kd_rows) : nullptr};
    run_kd(student, teacher, grad, kd, part(workspace, l.kd, l.ce), stream, o, o.grad_scale * alpha);
  } else if (grad != nullptr && !o.accumulate) {
    zero_gradient(*grad, g, stream);
  }
  if (with_ce) {
    // accumulate: CE adds to what KD wrote (or to the zeroed or caller's gradient when alpha = 0).
    const distill::CrossEntropyOptions ce = distill::ce_options(o, o.grad_scale * (1.0 - alpha), true);
    const DeviceLoss hard{at<double>(workspace, l.ce_value), rows_out ? at<double>(workspace, l.ce_rows) : nullptr};
    const Workspace ws = part(workspace, l.ce, l.kd_value);
    if (grad != nullptr) cross_entropy_with_grad(student, labels, *grad, hard, ws, stream, ce, Synchronize::no);
    else cross_entropy(student, labels, hard, ws, stream, ce, Synchronize::no);
  }
  MixArgs a;
  a.alpha = alpha;
  a.with_kd = with_kd;
  a.with_ce = with_ce;
  a.kd_value = at<double>(workspace, l.kd_value);
  a.ce_value = at<double>(workspace, l.ce_value);
  a.kd_rows = at<double>(workspace, l.kd_rows);
  a.ce_rows = at<double>(workspace, l.ce_rows);
  a.kd_status = at<int>(workspace, l.kd);
  a.ce_status = at<int>(workspace, l.ce);
  a.rows = z.rows;
  a.value = out.value;
  a.per_row = out.per_row;
  a.status = at<int>(workspace, 0);
  mix_kernel<<<rows_out ? kernels::grid_blocks(z.rows, kMixThreads) : 1u, kMixThreads, 0, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(mix_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_DISTILLATION(T, Label, ...)                                                               \
  template void distillation_loss<T, __VA_ARGS__, Label>(TensorView<const T>, const __VA_ARGS__&,                    \
                                                         TensorView<const Label>, const TensorView<T>*, DeviceLoss, \
                                                         Workspace, Stream, const distill::DistillationOptions&,    \
                                                         Synchronize);
#define SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(T, Label)                                \
  SHRINK_INSTANTIATE_DISTILLATION(T, Label, TensorView<const T>)                          \
  SHRINK_INSTANTIATE_DISTILLATION(T, Label, distill::TopKTeacher<T, std::int32_t>)        \
  SHRINK_INSTANTIATE_DISTILLATION(T, Label, distill::TopKTeacher<T, std::int64_t>)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(float, std::int32_t)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(float, std::int64_t)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(half, std::int32_t)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(half, std::int64_t)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(bfloat16, std::int32_t)
SHRINK_INSTANTIATE_DISTILLATION_TEACHERS(bfloat16, std::int64_t)
#undef SHRINK_INSTANTIATE_DISTILLATION_TEACHERS
#undef SHRINK_INSTANTIATE_DISTILLATION

}  // namespace detail
}  // namespace shrink::cuda
