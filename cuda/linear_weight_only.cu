// Host-callable weight-only GEMM (shrink/linear/weight_only_cuda.hpp): the checks behind can_implement, the plan (path,
// K slices, workspace), then the launches of shrink/cuda/kernels/linear_weight_only.cuh; instantiated for half and
// bfloat16.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "host_checks.hpp"
#include "shrink/core/epilogue_check.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/linear_weight_only.cuh"
#include "shrink/cuda/view_checks.hpp"
#include "shrink/linear/weight_only_cuda.hpp"

namespace shrink::cuda {

using kernels::linear_weight_only::WeightKind;

namespace {

constexpr int kMaxSplitK = 1024;
constexpr int kBlocksPerMultiprocessor = 4;  // 128-thread blocks resident per SM that the split aims for
constexpr std::int64_t kMinSliceK = 512;     // automatic slices keep at least this many k: partials stay small

bool has_zero_points(const WeightOnlyWeight& w) {
  return !(w.zero_points.rank() == 0 && w.zero_points.data() == nullptr);
}

// W's data and scales against x [M, K]: int8 [N, K] + [N] with K a multiple of 16; int4 / uint4 [N, K / 2] +
// [N, K / group_size] with group_size 64 or 128 dividing K, and zero points of the scales' shape or none.
Support check_weight(const WeightOnlyWeight& w, const Shape& x_shape, const Device& device) {
  const std::int64_t k = x_shape.values[1];
  const bool int4 = w.dtype == quant::QuantDtype::int4 || w.dtype == quant::QuantDtype::uint4;
  if (w.dtype != quant::QuantDtype::int8 && !int4)
    return Support::no("w.dtype", quant::to_string(w.dtype),
                       "int8 (per output row) or int4 / uint4 (per group, with or without zero points)");
  if (int4 && w.group_size != 64 && w.group_size != 128)
    return Support::no("w.group_size", std::to_string(w.group_size), "64 or 128");
  if (!int4 && w.group_size != 0)
    return Support::no("w.group_size", std::to_string(w.group_size), "0 for int8 (one scale per output row)");
  if (!int4 && k % 16 != 0)
    return Support::no("x.shape", to_string(x_shape), "K a multiple of 16 (16-byte int8 weight rows)");
  if (int4 && k % w.group_size != 0)
    return Support::no("x.shape", to_string(x_shape), "K a multiple of w.group_size = " + std::to_string(w.group_size));
  Support s = check_device_view(w.data, "w.data", DeviceViewRules{2, device.index, 16});
  if (!s) return s;
  const std::int64_t n = w.data.size(0);
  if (!int4 && w.data.size(1) != k)
    return Support::no("w.data.shape", to_string(w.data.shape()), "[N, " + std::to_string(k) + "]: K equal to x's");
  if (int4 && w.data.size(1) * 2 != k)
    return Support::no("w.data.shape", to_string(w.data.shape()),
                       "[N, " + std::to_string(k / 2) + "]: K / 2 bytes a row, two int4 a byte");
  s = check_device_view(w.scales, "w.scales", DeviceViewRules{int4 ? 2 : 1, device.index, alignof(float)});
  if (!s) return s;
  const Shape expected = int4 ? Shape{n, k / w.group_size} : Shape{n};
  if (w.scales.shape() != expected)
    return Support::no("w.scales.shape", to_string(w.scales.shape()),
                       to_string(expected) + (int4 ? " (one scale per row and group)" : " (one scale per row)"));
  if (has_zero_points(w)) {
    if (!int4)
      return Support::no("w.zero_points", to_string(w.zero_points.shape()),
                         "an empty view: int8 weights are symmetric (zero points are for int4 and uint4)");
    s = check_device_view(w.zero_points, "w.zero_points", DeviceViewRules{2, device.index, alignof(std::int32_t)});
    if (!s) return s;
    if (w.zero_points.shape() != expected)
      return Support::no("w.zero_points.shape", to_string(w.zero_points.shape()),
                         to_string(expected) + " (one zero point per row and group, as the scales) or an empty view");
  }
  return Support::yes();
}

template <class T>
Support check_args(const LinearWeightOnlyArgs<T>& a) {
  Support s = check_device_view(a.x, "x", DeviceViewRules{2, -1, 16});
  if (!s) return s;
  const std::int64_t m = a.x.size(0), k = a.x.size(1);
  const Device device = a.x.device();
  if (m > kWeightOnlyMaxRows)
    return Support::no("x.shape", to_string(a.x.shape()),
                       "at most " + std::to_string(kWeightOnlyMaxRows) +
                           " rows M (weight-only is for small batches: use the dense or W8A8 path)");
  if (!(s = check_weight(a.w, a.x.shape(), device))) return s;
  const std::int64_t n = a.w.rows();
  if (n >= (std::int64_t{1} << 30))
    return Support::no("w.data.shape", to_string(a.w.data.shape()), "fewer than 2^30 output rows N");
  if (!(s = check_device_view(a.out, "out", DeviceViewRules{2, device.index, alignof(T)}))) return s;
  if (a.out.size(0) != m || a.out.size(1) != n)
    return Support::no("out.shape", to_string(a.out.shape()), to_string(Shape{m, n}) + " ([M, N])");
  EpilogueRules rules = epilogue_rules<T>(m, n, device);
  rules.no_scales = "w carries its own scales";
  if (!(s = check_epilogue(a.epilogue, rules))) return s;
  switch (a.path) {
    case WeightOnlyPath::automatic:
    case WeightOnlyPath::cuda_core:
    case WeightOnlyPath::tensor_core: break;
    default:
      return Support::no("path", std::to_string(static_cast<int>(a.path)), "automatic, cuda_core or tensor_core");
  }
  if (a.split_k < 0 || a.split_k > kMaxSplitK)
    return Support::no("split_k", std::to_string(a.split_k),
                       "0 (automatic) or a slice count in [1, " + std::to_string(kMaxSplitK) + "]");
  const char* overlapped = views_overlap(a.out, a.x)                                       ? "x"
                           : views_overlap(a.out, a.w.data)                                ? "w.data"
                           : views_overlap(a.out, a.w.scales)                              ? "w.scales"
                           : has_zero_points(a.w) && views_overlap(a.out, a.w.zero_points) ? "w.zero_points"
                                                                                           : nullptr;
  if (overlapped != nullptr)
    return Support::no("out", std::string("memory overlapping ") + overlapped, "a separate output");
  return check_epilogue_apart(a.epilogue, byte_span(a.out));
}

// How one call runs: the path, the K slices and the workspace they need.
struct Plan {
  bool tensor_cores = false;
  int slices = 1;
  std::int64_t k_slice = 0;
  std::size_t workspace = kStatusBytes;
};

template <class T>
WeightOnlyPath resolve_path(const LinearWeightOnlyArgs<T>& a) {
  if (a.path != WeightOnlyPath::automatic) return a.path;
  const std::int64_t m = a.x.size(0);
  const std::int64_t most_cuda_core_rows = a.w.dtype == quant::QuantDtype::int8 ? 4 : 2;
  return m <= most_cuda_core_rows ? WeightOnlyPath::cuda_core : WeightOnlyPath::tensor_core;
}

// `multiprocessors` is read from the device only when a.split_k is 0.
template <class T>
Plan make_plan(const LinearWeightOnlyArgs<T>& a, int multiprocessors) {
  Plan plan;
  plan.tensor_cores = resolve_path(a) == WeightOnlyPath::tensor_core;
  const std::int64_t m = a.x.size(0), k = a.x.size(1), n = a.w.rows();
  const std::int64_t rows_per_block = plan.tensor_cores ? kernels::linear_weight_only::kMmaRowsPerBlock
                                                        : kernels::linear_weight_only::kCoreRowsPerBlock;
  const std::int64_t m_blocks =
      plan.tensor_cores ? 1
                        : (m + kernels::linear_weight_only::cuda_core_rows_per_block(static_cast<int>(m)) - 1) /
                              kernels::linear_weight_only::cuda_core_rows_per_block(static_cast<int>(m));
  const std::int64_t blocks = (n + rows_per_block - 1) / rows_per_block * m_blocks;
  const std::int64_t k_blocks = (k + kernels::linear_weight_only::kBlockK - 1) / kernels::linear_weight_only::kBlockK;
  std::int64_t wanted = a.split_k;
  if (wanted == 0) {  // enough blocks to fill the device, slices of at least kMinSliceK
    const std::int64_t target = static_cast<std::int64_t>(kBlocksPerMultiprocessor) * multiprocessors;
    wanted = std::max<std::int64_t>(1, std::min((target + blocks - 1) / blocks, k / kMinSliceK));
  }
  wanted = std::min(wanted, k_blocks);
  plan.k_slice = (k_blocks + wanted - 1) / wanted * kernels::linear_weight_only::kBlockK;
  plan.slices = static_cast<int>((k + plan.k_slice - 1) / plan.k_slice);
  if (plan.slices > 1)
    plan.workspace += static_cast<std::size_t>(plan.slices) * static_cast<std::size_t>(m * n) * sizeof(float);
  return plan;
}

int current_multiprocessors() {
  int device = 0, multiprocessors = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  return multiprocessors;
}

void require_compute_capability_80(const char* fn) {
  int device = 0, major = 0, minor = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  if (major < 8)
    fail(fn, "the current device", "compute capability " + std::to_string(major) + "." + std::to_string(minor),
         "8.0 or later (mma.sync with bfloat16)");
}

// x and out of one call against a plan: the planned shapes on the planned device, laid out as the kernels read them,
// apart from the weight, the bias and each other (O(1): nothing is read).
template <class T>
Support check_call(const LinearWeightOnlyArgs<T>& planned, const TensorView<const T>& x, const TensorView<T>& out) {
  Support s = check_device_view(x, "x", DeviceViewRules{2, planned.x.device().index, 16});
  if (!s) return s;
  if (x.shape() != planned.x.shape())
    return Support::no("x.shape", to_string(x.shape()), to_string(planned.x.shape()) + " (the planned shape)");
  if (!(s = check_device_view(out, "out", DeviceViewRules{2, planned.x.device().index, alignof(T)}))) return s;
  if (out.shape() != planned.out.shape())
    return Support::no("out.shape", to_string(out.shape()), to_string(planned.out.shape()) + " (the planned shape)");
  const WeightOnlyWeight& w = planned.w;
  const char* overlapped = views_overlap(out, x)                                     ? "x"
                           : views_overlap(out, w.data)                              ? "w.data"
                           : views_overlap(out, w.scales)                            ? "w.scales"
                           : has_zero_points(w) && views_overlap(out, w.zero_points) ? "w.zero_points"
                                                                                     : nullptr;
  if (overlapped != nullptr)
    return Support::no("out", std::string("memory overlapping ") + overlapped, "a separate output");
  return check_epilogue_apart(planned.epilogue, byte_span(out));
}

}  // namespace

class LinearWeightOnlyPlanAccess {
 public:
  template <class T>
  static LinearWeightOnlyPlan<T> make(const LinearWeightOnlyArgs<T>& args, const Plan& plan, int device) {
    LinearWeightOnlyPlan<T> p;
    p.args_ = args;
    p.tensor_cores_ = plan.tensor_cores;
    p.slices_ = plan.slices;
    p.k_slice_ = plan.k_slice;
    p.workspace_ = plan.workspace;
    p.device_ = device;
    return p;
  }

  // The launches of a checked call: the planned weight and epilogue, this call's x and out.
  template <class T>
  static void launch(const LinearWeightOnlyPlan<T>& plan, const TensorView<const T>& x, const TensorView<T>& out,
                     const Workspace& workspace, cudaStream_t stream) {
    const LinearWeightOnlyArgs<T>& a = plan.args_;
    kernels::linear_weight_only::Problem<T> p;
    p.x = x.data();
    p.w = a.w.data.data();
    p.scales = a.w.scales.data();
    p.zero_points = has_zero_points(a.w) ? a.w.zero_points.data() : nullptr;
    p.zero_point_bias = a.w.dtype == quant::QuantDtype::uint4 ? 0 : 8;
    p.int4_flip = a.w.dtype == quant::QuantDtype::uint4 ? 0u : 0x88888888u;
    // The int8 weight's scales per output row go through the epilogue; int4's group scales are inside the sums.
    const EpilogueOp op = make_epilogue_op(a.epilogue, x.size(0), a.w.rows());
    p.op = a.w.dtype == quant::QuantDtype::int8 ? op.with_scales(nullptr, 0, a.w.scales.data(), 1) : op;
    p.out = out.data();
    p.status = static_cast<int*>(workspace.data);
    p.partials =
        plan.slices_ > 1 ? reinterpret_cast<float*>(static_cast<char*>(workspace.data) + kStatusBytes) : nullptr;
    p.m = static_cast<int>(x.size(0));
    p.n = static_cast<int>(a.w.rows());
    p.k = x.size(1);
    p.group_size = static_cast<int>(a.w.group_size);
    p.k_slice = plan.k_slice_;
    p.slices = plan.slices_;
    SHRINK_CUDA_CHECK(cudaMemsetAsync(workspace.data, 0, sizeof(int), stream));
    if (a.w.dtype == quant::QuantDtype::int8)
      kernels::linear_weight_only::launch<T, WeightKind::int8>(p, plan.tensor_cores_, stream);
    else
      kernels::linear_weight_only::launch<T, WeightKind::int4>(p, plan.tensor_cores_, stream);
  }
};

namespace {

// The plan of arguments check_args has accepted: the current device must be x's and of compute capability 8.0 or
// later; its multiprocessors are read when the K slices are left to the plan.
template <class T>
LinearWeightOnlyPlan<T> plan_checked(const LinearWeightOnlyArgs<T>& args, const char* fn) {
  detail::require_current_device(args.x.device(), fn, "x");
  require_compute_capability_80(fn);
  return LinearWeightOnlyPlanAccess::make(args, make_plan(args, args.split_k > 0 ? 0 : current_multiprocessors()),
                                          args.x.device().index);
}

// A call's workspace against the plan's.
void require_plan_workspace(const Workspace& workspace, std::size_t bytes, const char* query, const char* fn) {
  detail::require_pointer(workspace.data, 16, fn, "workspace.data");
  detail::require_workspace(workspace, bytes, query, fn);
}

}  // namespace

template <class T>
Support can_implement_linear_weight_only(const LinearWeightOnlyArgs<T>& args) {
  return check_args(args);
}

template <class T>
WeightOnlyPath linear_weight_only_path(const LinearWeightOnlyArgs<T>& args) {
  require_supported(check_args(args), "shrink::cuda::linear_weight_only_path");
  return resolve_path(args);
}

template <class T>
std::size_t linear_weight_only_workspace_bytes(const LinearWeightOnlyArgs<T>& args) {
  require_supported(check_args(args), "shrink::cuda::linear_weight_only_workspace_bytes");
  return make_plan(args, args.split_k > 0 ? 0 : current_multiprocessors()).workspace;
}

template <class T>
void linear_weight_only(const LinearWeightOnlyArgs<T>& args, Workspace workspace, Stream stream,
                        Synchronize synchronize) {
  const char* fn = "shrink::cuda::linear_weight_only";
  require_supported(check_args(args), fn);
  detail::require_pointer(workspace.data, 16, fn, "workspace.data");
  const char* query = "linear_weight_only_workspace_bytes(args)";
  if (args.split_k > 0)  // the plan needs no device: the workspace is checked before any CUDA call
    detail::require_workspace(workspace, make_plan(args, 0).workspace, query, fn);
  else
    detail::require_workspace(workspace, kStatusBytes, query, fn);
  const LinearWeightOnlyPlan<T> plan = plan_checked(args, fn);
  detail::require_workspace(workspace, plan.workspace_bytes(), query, fn);  // the slices' size, now the device is read
  LinearWeightOnlyPlanAccess::launch(plan, args.x, args.out, workspace, static_cast<cudaStream_t>(stream));
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
LinearWeightOnlyPlan<T> make_plan(const LinearWeightOnlyArgs<T>& args) {
  const char* fn = "shrink::cuda::make_plan(LinearWeightOnlyArgs)";
  require_supported(check_args(args), fn);
  return plan_checked(args, fn);
}

template <class T>
void run(const LinearWeightOnlyPlan<T>& plan, TensorView<const T> x, TensorView<T> out, Workspace workspace,
         Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::run(LinearWeightOnlyPlan)";
  if (plan.empty()) fail(fn, "plan", "a default-constructed plan", "a plan made by make_plan(args)");
  require_supported(check_call(plan.args(), x, out), fn);
  require_plan_workspace(workspace, plan.workspace_bytes(), "plan.workspace_bytes()", fn);
  detail::require_current_device(x.device(), fn, "x");
  LinearWeightOnlyPlanAccess::launch(plan, x, out, workspace, static_cast<cudaStream_t>(stream));
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_GEMM_WEIGHT_ONLY(T)                                                                \
  template Support can_implement_linear_weight_only<T>(const LinearWeightOnlyArgs<T>&);                       \
  template WeightOnlyPath linear_weight_only_path<T>(const LinearWeightOnlyArgs<T>&);                         \
  template std::size_t linear_weight_only_workspace_bytes<T>(const LinearWeightOnlyArgs<T>&);                 \
  template void linear_weight_only<T>(const LinearWeightOnlyArgs<T>&, Workspace, Stream, Synchronize);        \
  template LinearWeightOnlyPlan<T> make_plan<T>(const LinearWeightOnlyArgs<T>&);                              \
  template void run<T>(const LinearWeightOnlyPlan<T>&, TensorView<const T>, TensorView<T>, Workspace, Stream, \
                       Synchronize);

SHRINK_INSTANTIATE_GEMM_WEIGHT_ONLY(half)
SHRINK_INSTANTIATE_GEMM_WEIGHT_ONLY(bfloat16)

#undef SHRINK_INSTANTIATE_GEMM_WEIGHT_ONLY

}  // namespace shrink::cuda
