// Host-callable soft-target losses (shrink/cuda/soft_target.hpp): validation, the choice of row path, then the kernels
// of shrink/cuda/kernels/soft_target.cuh, instantiated for float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/soft_target.cuh"
#include "shrink/cuda/soft_target.hpp"
#include "shrink/distill/logit_rows.hpp"

namespace shrink::cuda {

using namespace detail;

const char* to_string(SoftTargetPath path) {
  switch (path) {
    case SoftTargetPath::automatic: return "automatic";
    case SoftTargetPath::generic: return "generic";
    case SoftTargetPath::shared_row: return "shared_row";
    case SoftTargetPath::cluster: return "cluster";
  }
  return "?";
}

namespace {

using kernels::soft_target::Divergence;
using kernels::soft_target::kVec;

constexpr int kMaxClusterSize = 8;  // the portable cluster size

const char* function_name(Divergence d, bool with_grad) {
  switch (d) {
    case Divergence::forward_kl: return with_grad ? "shrink::cuda::kl_div_with_grad" : "shrink::cuda::kl_div";
    case Divergence::reverse_kl:
      return with_grad ? "shrink::cuda::reverse_kl_div_with_grad" : "shrink::cuda::reverse_kl_div";
    case Divergence::jensen_shannon:
      return with_grad ? "shrink::cuda::jensen_shannon_with_grad" : "shrink::cuda::jensen_shannon";
  }
  return "shrink::cuda::soft_target";
}

Divergence divergence_of(SoftTargetLoss loss) {
  switch (loss) {
    case SoftTargetLoss::kl_div: return Divergence::forward_kl;
    case SoftTargetLoss::reverse_kl_div: return Divergence::reverse_kl;
    case SoftTargetLoss::jensen_shannon: return Divergence::jensen_shannon;
  }
  fail("shrink::cuda::soft_target_plan", "loss", static_cast<int>(loss), "a SoftTargetLoss");
}

std::int64_t round_up(std::int64_t n, std::int64_t step) { return (n + step - 1) / step * step; }

// Threads for a CTA over `columns` elements: one per 16-byte chunk, in warps, from 64 to kMaxThreads.
template <class T>
int threads_for(std::int64_t columns) {
  const std::int64_t wanted = round_up((columns + kVec<T> - 1) / kVec<T>, 32);
  return static_cast<int>(std::clamp<std::int64_t>(wanted, 64, kernels::soft_target::kMaxThreads));
}

// Elements of shared memory per tensor for a slice of `columns`: room for the slice from any misaligned start.
template <class T>
std::int64_t stage_capacity(std::int64_t columns) {
  return round_up(columns, kVec<T>) + kVec<T>;
}

template <class T>
std::size_t stage_bytes(std::int64_t columns) {
  return static_cast<std::size_t>(2 * stage_capacity<T>(columns)) * sizeof(T);
}

// Columns per CTA of a cluster of `blocks` CTAs.
template <class T>
std::int64_t cluster_slice(std::int64_t columns, int blocks) {
  return round_up((columns + blocks - 1) / blocks, kVec<T>);
}

struct DeviceLimits {
  int multiprocessors = 0;
  int compute_capability = 0;              // 10 * major + minor
  std::int64_t shared_per_block_optin = 0;  // dynamic + static a CTA may use after opting in
  std::int64_t shared_per_multiprocessor = 0;
};

DeviceLimits current_device_limits() {
  int device = 0, value = 0;
  DeviceLimits d;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&d.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  int major = 0, minor = 0;
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  d.compute_capability = 10 * major + minor;
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  d.shared_per_block_optin = value;
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  d.shared_per_multiprocessor = value;
  return d;
}

template <class T, Divergence D, bool kGrad, SoftTargetPath P>
constexpr auto kernel_of() {
  return &kernels::soft_target::soft_target_kernel<T, D, kGrad, P>;
}

// A staged kernel's static shared memory, and the dynamic bytes it may then have (opting in to all of them).
template <class Kernel>
std::int64_t dynamic_shared_limit(Kernel kernel, const DeviceLimits& d) {
  cudaFuncAttributes attributes{};
  SHRINK_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const std::int64_t limit = d.shared_per_block_optin - static_cast<std::int64_t>(attributes.sharedSizeBytes);
  SHRINK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit)));
  return limit;
}

// Whether the cluster kernel runs sm_90 code here (not sm_80 code, nor PTX of compute_80 compiled for this device).
template <class Kernel>
bool has_cluster_code(Kernel kernel) {
  cudaFuncAttributes attributes{};
  SHRINK_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return attributes.binaryVersion >= 90 && attributes.ptxVersion >= 90;
}

cudaLaunchConfig_t cluster_config(int blocks, int threads, std::size_t bytes, cudaLaunchAttribute* attribute,
                                  unsigned grid, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid, 1, 1);
  config.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  config.dynamicSmemBytes = bytes;
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = static_cast<unsigned>(blocks);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// Clusters of `blocks` CTAs that fit on the device at once (0: none).
template <class Kernel>
int active_clusters(Kernel kernel, int blocks, int threads, std::size_t bytes) {
  cudaLaunchAttribute attribute{};
  const cudaLaunchConfig_t config =
      cluster_config(blocks, threads, bytes, &attribute, static_cast<unsigned>(blocks), nullptr);
  int clusters = 0;
  SHRINK_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
  return clusters;
}

std::string bytes_text(std::size_t bytes) { return std::to_string(bytes) + " bytes"; }

template <class T, Divergence D, bool kGrad>
SoftTargetPlan shared_row_plan(std::int64_t cols, const DeviceLimits& d) {
  SoftTargetPlan plan;
  plan.path = SoftTargetPath::shared_row;
  plan.threads = threads_for<T>(cols);
  plan.shared_bytes = stage_bytes<T>(cols);
  const std::int64_t limit = dynamic_shared_limit(kernel_of<T, D, kGrad, SoftTargetPath::shared_row>(), d);
  if (static_cast<std::int64_t>(plan.shared_bytes) > limit)
    plan.unsupported = "the shared_row path: the student and teacher rows (V = " + std::to_string(cols) + ") take " +
                       bytes_text(plan.shared_bytes) + " of shared memory, more than the " +
                       bytes_text(static_cast<std::size_t>(limit)) + " a CTA may use on this device";
  return plan;
}

// The cluster path with `blocks` CTAs a row (0: the fewest that fit, preferring slices that leave room for two CTAs
// an SM when `two_per_sm_bytes` > 0).
template <class T, Divergence D, bool kGrad>
SoftTargetPlan cluster_plan(std::int64_t cols, const DeviceLimits& d, int blocks, std::int64_t two_per_sm_bytes) {
  const auto kernel = kernel_of<T, D, kGrad, SoftTargetPath::cluster>();
  SoftTargetPlan plan;
  plan.path = SoftTargetPath::cluster;
  if (d.compute_capability < 90 || !has_cluster_code(kernel)) {
    plan.unsupported = "the cluster path: thread-block clusters need a device of compute capability 9.0 or above "
                       "running shrink_cuda's sm_90 code (this device is sm_" +
                       std::to_string(d.compute_capability) + ")";
    return plan;
  }
  const std::int64_t limit = dynamic_shared_limit(kernel, d);
  auto fill = [&](int c) {
    plan.cluster_size = c;
    plan.threads = threads_for<T>(cluster_slice<T>(cols, c));
    plan.shared_bytes = stage_bytes<T>(cluster_slice<T>(cols, c));
  };
  auto fits = [&](int c, std::int64_t bytes_limit) {
    const std::size_t bytes = stage_bytes<T>(cluster_slice<T>(cols, c));
    return static_cast<std::int64_t>(bytes) <= bytes_limit &&
           active_clusters(kernel, c, threads_for<T>(cluster_slice<T>(cols, c)), bytes) > 0;
  };
  if (blocks != 0) {
    fill(blocks);
    if (static_cast<std::int64_t>(plan.shared_bytes) > limit)
      plan.unsupported = "the cluster path with " + std::to_string(blocks) + " CTAs a row: slices of V = " +
                         std::to_string(cols) + " take " + bytes_text(plan.shared_bytes) +
                         " of shared memory each, more than the " + bytes_text(static_cast<std::size_t>(limit)) +
                         " a CTA may use on this device";
    else if (!fits(blocks, limit))
      plan.unsupported = "the cluster path with " + std::to_string(blocks) + " CTAs of " +
                         bytes_text(plan.shared_bytes) +
                         " of shared memory each: no such cluster fits this device (cudaOccupancyMaxActiveClusters = 0)";
    return plan;
  }
  if (two_per_sm_bytes > 0)
    for (int c : {2, 4, 8})
      if (fits(c, std::min(limit, two_per_sm_bytes))) {
        fill(c);
        return plan;
      }
  for (int c = 2; c <= kMaxClusterSize; ++c)
    if (fits(c, limit)) {
      fill(c);
      return plan;
    }
  fill(kMaxClusterSize);
  plan.unsupported = "the cluster path: slices of V = " + std::to_string(cols) + " over " +
                     std::to_string(kMaxClusterSize) + " CTAs take " + bytes_text(plan.shared_bytes) +
                     " of shared memory each, more than fits one CTA on this device";
  return plan;
}

// automatic: a loss without gradient (forward or reverse KL) reads each row once anyway: generic. Otherwise the
// staged paths, preferring shared memory per CTA that lets two CTAs share an SM (one stages while the other
// computes), then larger slices, then generic.
template <class T, Divergence D, bool kGrad>
SoftTargetPlan make_plan(std::int64_t cols, SoftTargetPath wanted, int cluster_size) {
  const DeviceLimits d = current_device_limits();
  SoftTargetPlan generic;
  generic.path = SoftTargetPath::generic;
  generic.threads = threads_for<T>(cols);
  switch (wanted) {
    case SoftTargetPath::generic: return generic;
    case SoftTargetPath::shared_row: return shared_row_plan<T, D, kGrad>(cols, d);
    case SoftTargetPath::cluster: return cluster_plan<T, D, kGrad>(cols, d, cluster_size, 0);
    case SoftTargetPath::automatic: break;
  }
  if (!kGrad && D != Divergence::jensen_shannon) return generic;
  // Two CTAs an SM: half the SM's shared memory, less the 1 KiB the driver reserves a CTA and the static scratch.
  const std::int64_t two_per_sm =
      d.shared_per_multiprocessor / 2 - 1024 - static_cast<std::int64_t>(sizeof(kernels::soft_target::Scratch));
  const SoftTargetPlan shared = shared_row_plan<T, D, kGrad>(cols, d);
  if (shared.unsupported.empty() && static_cast<std::int64_t>(shared.shared_bytes) <= two_per_sm) return shared;
  const SoftTargetPlan cluster = cluster_plan<T, D, kGrad>(cols, d, 0, two_per_sm);
  if (cluster.unsupported.empty()) return cluster;
  if (shared.unsupported.empty()) return shared;
  return generic;
}

// A plan with how many CTAs (clusters on the cluster path) the device holds at once: the grid is that many, or the
// row count if smaller (grid-stride over the rest).
struct Resolved {
  SoftTargetPlan plan;
  std::int64_t resident = 1;
};

// make_plan and the occupancy query, remembered per device, row length and requested path: the attribute and
// occupancy calls then run once, not on every call (they would sit between a caller's timing events).
template <class T, Divergence D, bool kGrad>
Resolved resolve(std::int64_t cols, SoftTargetPath wanted, int cluster_size) {
  static std::mutex mutex;
  static std::map<std::tuple<int, std::int64_t, int, int>, Resolved> cache;
  int device = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  const auto key = std::make_tuple(device, cols, static_cast<int>(wanted), cluster_size);
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  Resolved r;
  r.plan = make_plan<T, D, kGrad>(cols, wanted, cluster_size);
  if (r.plan.unsupported.empty()) {
    int multiprocessors = 0, per_sm = 0;
    SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
    switch (r.plan.path) {
      case SoftTargetPath::generic:
        SHRINK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel_of<T, D, kGrad, SoftTargetPath::generic>(), r.plan.threads, 0));
        r.resident = static_cast<std::int64_t>(std::max(per_sm, 1)) * multiprocessors;
        break;
      case SoftTargetPath::shared_row:
        SHRINK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, kernel_of<T, D, kGrad, SoftTargetPath::shared_row>(), r.plan.threads, r.plan.shared_bytes));
        r.resident = static_cast<std::int64_t>(std::max(per_sm, 1)) * multiprocessors;
        break;
      case SoftTargetPath::cluster:
        r.resident = std::max(active_clusters(kernel_of<T, D, kGrad, SoftTargetPath::cluster>(), r.plan.cluster_size,
                                              r.plan.threads, r.plan.shared_bytes),
                              1);
        break;
      case SoftTargetPath::automatic: break;
    }
  }
  cache.emplace(key, r);
  return r;
}

template <class T, Divergence D, bool kGrad>
void launch(const kernels::soft_target::Params<T>& params, const Resolved& r, cudaStream_t stream) {
  const SoftTargetPlan& plan = r.plan;
  const auto grid = static_cast<unsigned>(std::min<std::int64_t>(params.rows, r.resident) * plan.cluster_size);
  const unsigned threads = static_cast<unsigned>(plan.threads);
  switch (plan.path) {
    case SoftTargetPath::generic: {
      const auto kernel = kernel_of<T, D, kGrad, SoftTargetPath::generic>();
      kernel<<<grid, threads, 0, stream>>>(params);
      SHRINK_CUDA_CHECK_LAUNCH(soft_target_kernel);
      return;
    }
    case SoftTargetPath::shared_row: {
      const auto kernel = kernel_of<T, D, kGrad, SoftTargetPath::shared_row>();
      kernel<<<grid, threads, plan.shared_bytes, stream>>>(params);
      SHRINK_CUDA_CHECK_LAUNCH(soft_target_kernel);
      return;
    }
    case SoftTargetPath::cluster: {
      const auto kernel = kernel_of<T, D, kGrad, SoftTargetPath::cluster>();
      cudaLaunchAttribute attribute{};
      const cudaLaunchConfig_t config =
          cluster_config(plan.cluster_size, plan.threads, plan.shared_bytes, &attribute, grid, stream);
      SHRINK_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params));
      return;
    }
    case SoftTargetPath::automatic: break;
  }
  fail("shrink::cuda::soft_target", "plan.path", to_string(plan.path), "a resolved path");
}

template <class T>
distill::Rows<const T> device_rows(const TensorView<const T>& v, const char* fn, const char* name) {
  if (!v.device().is_cuda()) fail(fn, name, "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
  const distill::Rows<const T> rows = distill::flatten_rows(v, fn, name);
  require_pointer(v.data(), alignof(T), fn, name);
  return rows;
}

// Shared body of the six calls; grad == nullptr computes the loss only.
template <class T, Divergence D, bool kGrad>
void soft_target_loss(double beta, const TensorView<const T>& student, const TensorView<const T>& teacher,
                      const TensorView<T>* grad, const DeviceLoss& loss, const SoftTargetOptions& o,
                      const Workspace& workspace, Stream stream, Synchronize synchronize) {
  const char* fn = function_name(D, kGrad);
  using distill::require_same_shape;
  const distill::Rows<const T> zs = device_rows(student, fn, "student");
  if (zs.cols > kMaxSoftTargetColumns)
    fail(fn, "student.shape", to_string(student.shape()),
         "a last dimension V of at most kMaxSoftTargetColumns = " + std::to_string(kMaxSoftTargetColumns));
  const distill::Rows<const T> zt = device_rows(teacher, fn, "teacher");
  require_same_shape(student, teacher, fn, "teacher", "student");
  distill::require_temperature(o.temperature, fn);
  distill::require_grad_scale(o.grad_scale, fn);
  if (D == Divergence::jensen_shannon) distill::require_unit_interval(beta, fn, "beta");
  const bool masked = o.row_mask.data() != nullptr;
  if (masked) {
    if (!o.row_mask.device().is_cuda())
      fail(fn, "options.row_mask", "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
    distill::row_mask(o.row_mask, zs.rows, fn);  // one entry per row, contiguous
  }
  distill::Rows<const T> zg;
  if constexpr (kGrad) {
    if (!grad->device().is_cuda())
      fail(fn, "grad_student", "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
    require_same_shape(student, *grad, fn, "grad_student", "student");
    zg = distill::flatten_rows(TensorView<const T>(*grad), fn, "grad_student");
    require_pointer(grad->data(), alignof(T), fn, "grad_student");
  }
  const int reduction = static_cast<int>(o.reduction);
  if (reduction < static_cast<int>(distill::Reduction::none) || reduction > static_cast<int>(distill::Reduction::batchmean))
    fail(fn, "options.reduction", reduction, "a distill::Reduction");
  const int path = static_cast<int>(o.path);
  if (path < static_cast<int>(SoftTargetPath::automatic) || path > static_cast<int>(SoftTargetPath::cluster))
    fail(fn, "options.path", path, "a SoftTargetPath");
  if (o.cluster_size != 0 && o.path != SoftTargetPath::cluster)
    fail(fn, "options.cluster_size", o.cluster_size, "0 unless options.path is SoftTargetPath::cluster");
  if (o.cluster_size != 0 && (o.cluster_size < 2 || o.cluster_size > kMaxClusterSize))
    fail(fn, "options.cluster_size", o.cluster_size, "0 (chosen) or a cluster of 2 to 8 CTAs");
  require_pointer(loss.value, alignof(double), fn, "loss.value");
  if (loss.per_row != nullptr || o.reduction == distill::Reduction::none)
    require_pointer(loss.per_row, alignof(double), fn, "loss.per_row");
  const std::size_t needed = soft_target_workspace_bytes(zs.rows);
  require_workspace(workspace, needed, "soft_target_workspace_bytes(" + std::to_string(zs.rows) + ")", fn);
  require_current_device(student.device(), fn, "student");
  require_current_device(teacher.device(), fn, "teacher");
  if constexpr (kGrad) require_current_device(grad->device(), fn, "grad_student");
  if (masked) require_current_device(o.row_mask.device(), fn, "options.row_mask");

  const Resolved resolved = resolve<T, D, kGrad>(zs.cols, o.path, o.cluster_size);
  const SoftTargetPlan& plan = resolved.plan;
  if (!plan.unsupported.empty()) fail(fn, "options.path", to_string(o.path), plan.unsupported);

  char* const base = static_cast<char*>(workspace.data);
  kernels::soft_target::Params<T> p;
  p.student = zs.data;
  p.teacher = zt.data;
  p.grad = kGrad ? grad->data() : nullptr;
  p.rows = zs.rows;
  p.cols = static_cast<int>(zs.cols);
  p.stride_s = zs.row_stride;
  p.stride_t = zt.row_stride;
  p.stride_g = kGrad ? zg.row_stride : 0;
  p.mask = masked ? o.row_mask.data() : nullptr;
  p.kept_count =
      masked ? reinterpret_cast<const unsigned long long*>(base + kernels::soft_target::kKeptOffset) : nullptr;
  p.kept_rows = zs.rows;
  p.losses =
      loss.per_row != nullptr ? loss.per_row : reinterpret_cast<double*>(base + kernels::soft_target::kLossesOffset);
  p.status = reinterpret_cast<int*>(base);
  const double t = o.temperature;
  p.log2e_over_t = static_cast<float>(kernels::soft_target::kLog2e / t);
  p.temperature = t;
  p.beta = beta;
  p.grad_scale = o.grad_scale;
  p.reduction = o.reduction;
  p.accumulate = o.accumulate;
  p.degenerate = D == Divergence::jensen_shannon && (beta == 0.0 || beta == 1.0);
  p.slice = plan.path == SoftTargetPath::cluster ? static_cast<int>(cluster_slice<T>(zs.cols, plan.cluster_size))
                                                 : p.cols;
  p.stage_capacity = plan.path == SoftTargetPath::generic ? 0 : static_cast<int>(stage_capacity<T>(p.slice));

  SHRINK_CUDA_CHECK(cudaMemsetAsync(workspace.data, 0, kStatusBytes, stream));
  if (masked) {
    kernels::soft_target::count_kept_kernel<<<1, 1024, 0, stream>>>(
        p.mask, p.rows, reinterpret_cast<unsigned long long*>(base + kernels::soft_target::kKeptOffset));
    SHRINK_CUDA_CHECK_LAUNCH(count_kept_kernel);
  }
  launch<T, D, kGrad>(p, resolved, stream);
  kernels::soft_target::finish_kernel<<<1, kernels::soft_target::kFinishThreads, 0, stream>>>(
      p.losses, p.rows, p.kept_count, p.kept_rows, zs.cols, o.reduction, loss.value);
  SHRINK_CUDA_CHECK_LAUNCH(finish_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T, Divergence D>
SoftTargetPlan plan_for(std::int64_t columns, bool with_grad, const SoftTargetOptions& options) {
  return with_grad ? resolve<T, D, true>(columns, options.path, options.cluster_size).plan
                   : resolve<T, D, false>(columns, options.path, options.cluster_size).plan;
}

}  // namespace

std::size_t soft_target_workspace_bytes(std::int64_t rows) {
  if (rows < 0) fail("shrink::cuda::soft_target_workspace_bytes", "rows", rows, "a row count >= 0");
  return static_cast<std::size_t>(
      round_up(static_cast<std::int64_t>(kernels::soft_target::kLossesOffset) + 8 * rows, 16));
}

template <class T>
SoftTargetPlan soft_target_plan(SoftTargetLoss loss, std::int64_t columns, bool with_grad,
                                const SoftTargetOptions& options) {
  const char* fn = "shrink::cuda::soft_target_plan";
  if (columns < 1 || columns > kMaxSoftTargetColumns)
    fail(fn, "columns", columns, "a row length in [1, " + std::to_string(kMaxSoftTargetColumns) + "]");
  if (options.cluster_size != 0 && (options.cluster_size < 2 || options.cluster_size > kMaxClusterSize))
    fail(fn, "options.cluster_size", options.cluster_size, "0 (chosen) or a cluster of 2 to 8 CTAs");
  switch (divergence_of(loss)) {
    case Divergence::forward_kl: return plan_for<T, Divergence::forward_kl>(columns, with_grad, options);
    case Divergence::reverse_kl: return plan_for<T, Divergence::reverse_kl>(columns, with_grad, options);
    case Divergence::jensen_shannon: return plan_for<T, Divergence::jensen_shannon>(columns, with_grad, options);
  }
  return {};
}

template <class T>
void kl_div(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss loss, const SoftTargetOptions& options,
            Workspace workspace, Stream stream, Synchronize synchronize) {
  soft_target_loss<T, Divergence::forward_kl, false>(0.0, student, teacher, nullptr, loss, options, workspace, stream,
                                                      synchronize);
}

template <class T>
void kl_div_with_grad(TensorView<const T> student, TensorView<const T> teacher, TensorView<T> grad_student,
                      DeviceLoss loss, const SoftTargetOptions& options, Workspace workspace, Stream stream,
                      Synchronize synchronize) {
  soft_target_loss<T, Divergence::forward_kl, true>(0.0, student, teacher, &grad_student, loss, options, workspace,
                                                     stream, synchronize);
}

template <class T>
void reverse_kl_div(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss loss,
                    const SoftTargetOptions& options, Workspace workspace, Stream stream, Synchronize synchronize) {
  soft_target_loss<T, Divergence::reverse_kl, false>(0.0, student, teacher, nullptr, loss, options, workspace, stream,
                                                      synchronize);
}

template <class T>
void reverse_kl_div_with_grad(TensorView<const T> student, TensorView<const T> teacher, TensorView<T> grad_student,
                              DeviceLoss loss, const SoftTargetOptions& options, Workspace workspace, Stream stream,
                              Synchronize synchronize) {
  soft_target_loss<T, Divergence::reverse_kl, true>(0.0, student, teacher, &grad_student, loss, options, workspace,
                                                     stream, synchronize);
}

template <class T>
void jensen_shannon(TensorView<const T> student, TensorView<const T> teacher, double beta, DeviceLoss loss,
                    const SoftTargetOptions& options, Workspace workspace, Stream stream, Synchronize synchronize) {
  soft_target_loss<T, Divergence::jensen_shannon, false>(beta, student, teacher, nullptr, loss, options, workspace,
                                                          stream, synchronize);
}

template <class T>
void jensen_shannon_with_grad(TensorView<const T> student, TensorView<const T> teacher, double beta,
                              TensorView<T> grad_student, DeviceLoss loss, const SoftTargetOptions& options,
                              Workspace workspace, Stream stream, Synchronize synchronize) {
  soft_target_loss<T, Divergence::jensen_shannon, true>(beta, student, teacher, &grad_student, loss, options,
                                                         workspace, stream, synchronize);
}

#define SHRINK_INSTANTIATE_SOFT_TARGET(T)                                                                           \
  template SoftTargetPlan soft_target_plan<T>(SoftTargetLoss, std::int64_t, bool, const SoftTargetOptions&);       \
  template void kl_div<T>(TensorView<const T>, TensorView<const T>, DeviceLoss, const SoftTargetOptions&, Workspace, \
                          Stream, Synchronize);                                                                     \
  template void kl_div_with_grad<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, DeviceLoss,           \
                                    const SoftTargetOptions&, Workspace, Stream, Synchronize);                      \
  template void reverse_kl_div<T>(TensorView<const T>, TensorView<const T>, DeviceLoss, const SoftTargetOptions&,  \
                                  Workspace, Stream, Synchronize);                                                  \
  template void reverse_kl_div_with_grad<T>(TensorView<const T>, TensorView<const T>, TensorView<T>, DeviceLoss,   \
                                            const SoftTargetOptions&, Workspace, Stream, Synchronize);              \
  template void jensen_shannon<T>(TensorView<const T>, TensorView<const T>, double, DeviceLoss,                    \
                                  const SoftTargetOptions&, Workspace, Stream, Synchronize);                        \
  template void jensen_shannon_with_grad<T>(TensorView<const T>, TensorView<const T>, double, TensorView<T>,       \
                                            DeviceLoss, const SoftTargetOptions&, Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_SOFT_TARGET(float)
SHRINK_INSTANTIATE_SOFT_TARGET(half)
SHRINK_INSTANTIATE_SOFT_TARGET(bfloat16)
#undef SHRINK_INSTANTIATE_SOFT_TARGET

}  // namespace shrink::cuda
