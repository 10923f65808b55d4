// Host-callable W8A8 GEMM, epilogue and per-token quantizer (shrink/linear/int8_cuda.hpp): argument checks, the choice
// of path, tile configuration and K split, then the launches of shrink/cuda/kernels/linear_int8_mma.cuh (here),
// linear_int8_wgmma.cuh (linear_int8.sm90a.cu), linear_int8_epilogue.cuh and quantize_rows.cuh.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "host_checks.hpp"
#include "linear_int8_launch.hpp"
#include "shrink/core/epilogue_check.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/epilogue.cuh"
#include "shrink/cuda/kernels/linear_int8_epilogue.cuh"
#include "shrink/cuda/kernels/linear_int8_layout.hpp"
#include "shrink/cuda/kernels/linear_int8_mma.cuh"
#include "shrink/cuda/kernels/quantize_rows.cuh"
#include "shrink/cuda/view_checks.hpp"
#include "shrink/linear/int8_cuda.hpp"

#if !defined(SHRINK_CUDA_HAS_SM90A)
#define SHRINK_CUDA_HAS_SM90A 0
#endif

namespace shrink::cuda {

using kernels::linear_int8::OutputKind;

const char* to_string(LinearInt8Path path) {
  switch (path) {
    case LinearInt8Path::automatic: return "automatic";
    case LinearInt8Path::mma_sync: return "mma_sync";
    case LinearInt8Path::wgmma: return "wgmma";
  }
  return "?";
}

namespace {

// Sizes the kernels index with int: M and N up to 2^30, and K ≤ 131071 (the int32 bound of cpu::int8_max_k).
constexpr std::int64_t kMaxRows = std::int64_t{1} << 30;
constexpr std::int64_t kMaxK = 131071;

// ---- checks (host only: no CUDA call) ---------------------------------------------------------------------------

Support no(const std::string& argument, const std::string& value, const std::string& expected) {
  return Support::no(argument, value, expected);
}

bool aligned(const void* pointer, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

// A 2-D device matrix with contiguous rows that do not overlap (row stride ≥ columns).
template <class T>
Support check_device_rows(const TensorView<T>& v, const std::string& name, int device) {
  Support s = check_device_view(v, name, DeviceViewRules{2, device, 0, false});
  if (!s) return s;
  if (v.size(1) > 1 && v.stride(1) != 1)
    return no(name + ".strides", to_string(v.strides()), "contiguous rows (stride 1 along the second dimension)");
  if (v.size(0) > 1 && v.stride(0) < v.size(1))
    return no(name + ".strides", to_string(v.strides()),
              "a row stride of at least " + std::to_string(v.size(1)) + " (rows must not overlap)");
  if (v.size(0) > kMaxRows || v.size(1) > kMaxRows)
    return no(name + ".shape", to_string(v.shape()), "at most 2^30 rows and columns");
  return s;
}

// The output variant reduced to what the checks and the kernels need.
struct OutputView {
  OutputKind kind = OutputKind::f32;
  void* data = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0;
  std::size_t element_bytes = 4;
  std::pair<std::uintptr_t, std::uintptr_t> span;
  Support layout;  // check_device_rows of the view
};

template <class T>
constexpr OutputKind kind_of() {
  if constexpr (std::is_same<T, float>::value)
    return OutputKind::f32;
  else if constexpr (std::is_same<T, half>::value)
    return OutputKind::f16;
  else if constexpr (std::is_same<T, bfloat16>::value)
    return OutputKind::bf16;
  else
    return OutputKind::s8;
}

OutputView describe_output(const LinearInt8Output& out, int device) {
  return std::visit(
      [device](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::element_type;
        OutputView o;
        o.kind = kind_of<T>();
        o.data = v.data();
        o.element_bytes = sizeof(T);
        o.layout = check_device_rows(v, "out", device);
        if (o.layout) {
          o.rows = v.size(0);
          o.cols = v.size(1);
          o.row_stride = v.stride(0);
          o.span = byte_span(v);
        }
        return o;
      },
      out);
}

// Everything of the epilogue and the output for an [M, N] result, with the operands on `device`: the one check of
// core/epilogue_check.hpp (scales none for linear_int8, whose operands carry them; required for the epilogue alone),
// the output's layout and shape, the output apart from the vectors.
Support check_epilogue_and_output(const Epilogue& e, const LinearInt8Output& output, std::int64_t m, std::int64_t n,
                                  int device, EpilogueScales scales) {
  EpilogueRules rules = std::visit(
      [&](const auto& v) {
        using T = typename std::decay_t<decltype(v)>::element_type;
        return epilogue_rules<T>(m, n, Device::cuda(device), scales);
      },
      output);
  rules.no_scales = "linear_int8 takes the scales with its operands: x.scales and w.scales";
  Support s = check_epilogue(e, rules);
  if (!s) return s;
  const OutputView out = describe_output(output, device);
  if (!out.layout) return out.layout;
  if (out.rows != m || out.cols != n)
    return no("out.shape", to_string(Shape{out.rows, out.cols}), to_string(Shape{m, n}) + " ([M, N])");
  return check_epilogue_apart(e, out.span);
}

// ---- plans --------------------------------------------------------------------------------------------------------

constexpr std::int64_t kSmallM = 64;       // M up to this takes the small mma_sync tiles (and, automatic, mma_sync)
constexpr std::int64_t kTargetCtas = 256;  // K is split while the tiles alone give fewer CTAs than this ...
constexpr std::int64_t kMinKTilesPerSplit = 4;  // ... into pieces of 4 k-tiles at least ...
constexpr std::int64_t kMaxSplits = 16;         // ... 16 at most

enum class Kernel { mma_small, mma_large, wgmma };

struct Tiling {
  int bm, bn, bk;
};

Tiling tiling(Kernel kernel) {
  switch (kernel) {
    case Kernel::mma_small:
      return {kernels::linear_int8::MmaSmall::kBM, kernels::linear_int8::MmaSmall::kBN,
              kernels::linear_int8::MmaSmall::kBK};
    case Kernel::mma_large:
      return {kernels::linear_int8::MmaLarge::kBM, kernels::linear_int8::MmaLarge::kBN,
              kernels::linear_int8::MmaLarge::kBK};
    case Kernel::wgmma: break;
  }
  return {kernels::linear_int8::WgmmaConfig::kBM, kernels::linear_int8::WgmmaConfig::kBN,
          kernels::linear_int8::WgmmaConfig::kBK};
}

struct Plan {
  Kernel kernel = Kernel::mma_small;
  std::int64_t tiles_m = 0, tiles_n = 0;
  std::int64_t k_tiles = 0, per_split = 0, splits = 1;
  std::size_t partial_bytes = 0;  // int32 partial sums of the K splits, after the status word
};

Plan make_plan(Kernel kernel, std::int64_t m, std::int64_t n, std::int64_t k) {
  const Tiling t = tiling(kernel);
  Plan p;
  p.kernel = kernel;
  p.tiles_m = (m + t.bm - 1) / t.bm;
  p.tiles_n = (n + t.bn - 1) / t.bn;
  p.k_tiles = (k + t.bk - 1) / t.bk;
  const std::int64_t tiles = p.tiles_m * p.tiles_n;
  std::int64_t splits = 1;
  // The partial sums cost 8 · M · N bytes a split (written, then read): at most half the weight's N · K bytes.
  if (tiles < kTargetCtas)
    splits =
        std::min({(kTargetCtas + tiles - 1) / tiles, kMaxSplits,
                  std::max<std::int64_t>(1, p.k_tiles / kMinKTilesPerSplit), std::max<std::int64_t>(1, k / (16 * m))});
  p.per_split = (p.k_tiles + splits - 1) / splits;
  p.splits = (p.k_tiles + p.per_split - 1) / p.per_split;  // no empty split
  if (p.splits > 1) p.partial_bytes = static_cast<std::size_t>(p.splits * m * n) * sizeof(std::int32_t);
  return p;
}

Kernel mma_kernel(std::int64_t m) { return m <= kSmallM ? Kernel::mma_small : Kernel::mma_large; }

// The workspace every path `path` may take needs (automatic: the larger of its two candidates).
std::size_t workspace_for(LinearInt8Path path, std::int64_t m, std::int64_t n, std::int64_t k) {
  std::size_t partial = 0;
  if (path != LinearInt8Path::wgmma) partial = make_plan(mma_kernel(m), m, n, k).partial_bytes;
  if (SHRINK_CUDA_HAS_SM90A && path != LinearInt8Path::mma_sync)
    partial = std::max(partial, make_plan(Kernel::wgmma, m, n, k).partial_bytes);
  return kStatusBytes + partial;
}

// ---- launches -----------------------------------------------------------------------------------------------------

int compute_capability(int device) {
  int major = 0, minor = 0;
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

// The kernel the path takes on `device` (an error for a forced path the device or the build cannot run).
Kernel choose_kernel(LinearInt8Path path, std::int64_t m, int device, const char* fn) {
  const int cc = compute_capability(device);
  if (cc < 80)
    fail(fn, "device", "sm_" + std::to_string(cc), "a GPU of compute capability 8.0 or later (int8 mma.sync)");
  switch (path) {
    case LinearInt8Path::mma_sync: return mma_kernel(m);
    case LinearInt8Path::wgmma:
      if (!SHRINK_CUDA_HAS_SM90A)
        fail(fn, "path", "wgmma",
             "a path this build has: shrink_cuda holds no sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90)");
      if (cc != 90)
        fail(fn, "path", "wgmma",
             "a device of compute capability 9.0 (wgmma is sm_90a only; device " + std::to_string(device) + " is sm_" +
                 std::to_string(cc) + ")");
      return Kernel::wgmma;
    case LinearInt8Path::automatic: break;
  }
  return SHRINK_CUDA_HAS_SM90A && cc == 90 && m > kSmallM ? Kernel::wgmma : mma_kernel(m);
}

template <class C>
void launch_mma(const kernels::linear_int8::GemmParams& params, int splits, int device, cudaStream_t stream) {
  const auto kernel = kernels::linear_int8::gemm_int8_mma_kernel<C>;
  static std::atomic<std::uint64_t> configured{0};
  kernels::linear_int8::allow_shared_memory(kernel, C::kSharedBytes, device, configured);
  const dim3 grid(static_cast<unsigned>(params.tiles_m) * static_cast<unsigned>(params.tiles_n), 1,
                  static_cast<unsigned>(splits));
  kernel<<<grid, C::kThreads, C::kSharedBytes, stream>>>(params);
  SHRINK_CUDA_CHECK_LAUNCH(gemm_int8_mma_kernel);
}

// The device form of a checked epilogue's operation for an [M, N] result.
kernels::linear_int8::EpilogueParams epilogue_params(const EpilogueOp& op, const LinearInt8Output& output,
                                                     std::int64_t m, std::int64_t n, int device, int* status) {
  const OutputView out = describe_output(output, device);
  kernels::linear_int8::EpilogueParams p;
  p.op = op;
  p.kind = out.kind;
  p.out = out.data;
  p.ld_out = out.row_stride;
  p.pairs = aligned(out.data, 2 * out.element_bytes) && (m == 1 || out.row_stride % 2 == 0);
  p.status = status;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  return p;
}

// The epilogue over int32 sums in memory: Σ of `splits` [M, N] slices split_stride apart (row stride ld_acc), into p's
// output.
void launch_epilogue(const std::int32_t* acc, std::int64_t ld_acc, std::int64_t split_stride, int splits,
                     const kernels::linear_int8::EpilogueParams& p, cudaStream_t stream) {
  auto launch = [&](auto* out) {
    kernels::launch_finish_splits(acc, ld_acc, split_stride, splits, p.m, p.n, p.op, out, p.ld_out, p.status, stream);
  };
  switch (p.kind) {
    case OutputKind::f32: launch(static_cast<float*>(p.out)); break;
    case OutputKind::f16: launch(static_cast<half*>(p.out)); break;
    case OutputKind::bf16: launch(static_cast<bfloat16*>(p.out)); break;
    case OutputKind::s8: launch(static_cast<std::int8_t*>(p.out)); break;
    case OutputKind::s32: break;  // never asked for: the GEMM writes raw sums itself
  }
}

std::pair<std::uintptr_t, std::uintptr_t> workspace_span(const Workspace& w) {
  const auto begin = reinterpret_cast<std::uintptr_t>(w.data);
  return {begin, begin + w.bytes};
}

}  // namespace

// ---- GEMM ---------------------------------------------------------------------------------------------------------

namespace {

// An int8 operand [rows, K] whose rows check_device_rows has accepted: values as the kernels load them, scales [rows]
// or [1] on the same device.
Support check_loads_and_scales(const Int8Operand& operand, const char* name, int device, const char* meaning) {
  const std::string values = std::string(name) + ".values";
  if (!aligned(operand.values.data(), 16))
    return no(values, "a pointer not 16-byte aligned", "rows starting on 16-byte boundaries (cp.async 16-byte loads)");
  if (operand.values.size(0) > 1 && operand.values.stride(0) % 16 != 0)
    return no(values + ".strides", to_string(operand.values.strides()),
              "a row stride that is a multiple of 16 bytes (cp.async 16-byte loads)");
  return check_epilogue_vector(operand.scales, std::string(name) + ".scales", operand.values.size(0), true,
                               Device::cuda(device), meaning);
}

// What linear_int8 and linear_int8_dynamic check of the weight, K, the path, the epilogue and the output once x's
// rows [M, K] are valid.
Support check_weight_and_rest(const Int8Operand& w, const Epilogue& epilogue, const LinearInt8Output& output,
                              LinearInt8Path path, std::int64_t m, std::int64_t k, int device) {
  Support s = check_device_rows(w.values, "w.values", device);
  if (!s) return s;
  const std::int64_t n = w.values.size(0);
  if (w.values.size(1) != k)
    return no("w.values.shape", to_string(w.values.shape()), "[N, " + std::to_string(k) + "]: K equal to x's");
  if (k % 16 != 0)
    return no("x.shape", to_string(Shape{m, k}), "K a multiple of 16 (the kernels load 16 bytes of a row at a time)");
  if (k > kMaxK) return no("x.shape", to_string(Shape{m, k}), "K ≤ 131071 (the int32 accumulation cannot overflow)");
  if ((m + 31) / 32 * ((n + 63) / 64) > std::numeric_limits<std::int32_t>::max())
    return no("x.shape", to_string(Shape{m, k}),
              "fewer than 2^31 output tiles of 32 × 64 with N = " + std::to_string(n) + " (one CTA each)");
  s = check_loads_and_scales(w, "w", device, "per output channel, or per tensor");
  if (!s) return s;
  if (path != LinearInt8Path::automatic && path != LinearInt8Path::mma_sync && path != LinearInt8Path::wgmma)
    return no("path", std::to_string(static_cast<int>(path)), "automatic, mma_sync or wgmma");
  if (path == LinearInt8Path::wgmma && !SHRINK_CUDA_HAS_SM90A)
    return no("path", "wgmma",
              "a path this build has: shrink_cuda holds no sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90)");
  s = check_epilogue_and_output(epilogue, output, m, n, device, EpilogueScales::none);
  if (!s) return s;
  const OutputView out = describe_output(output, device);
  if (spans_overlap(out.span, byte_span(w.values)))
    return no("out", "memory overlapping w.values", "a separate output");
  if (spans_overlap(out.span, byte_span(w.scales)))
    return no("out", "memory overlapping w.scales", "a separate output");
  return Support::yes();
}

// The GEMM once every check has passed: the launches, into `status` (already cleared) and `partials` (the K splits'
// sums, linear_int8_workspace_bytes less the status word).
void enqueue_linear_int8(const LinearInt8Args& args, Kernel kernel, int device, int* status, std::int32_t* partials,
                         cudaStream_t stream) {
  const std::int64_t m = args.x.values.size(0), k = args.x.values.size(1), n = args.w.values.size(0);
  const Plan plan = make_plan(kernel, m, n, k);
  // The scales the operands carry: x's per token (or per tensor), w's per output channel (or per tensor).
  const EpilogueOp op = make_epilogue_op(args.epilogue, m, n)
                            .with_scales(args.x.scales.data(), args.x.scales.size(0) == m && m > 1 ? 1 : 0,
                                         args.w.scales.data(), args.w.scales.size(0) == n && n > 1 ? 1 : 0);
  kernels::linear_int8::GemmParams p;
  p.x = args.x.values.data();
  p.ldx = m > 1 ? args.x.values.stride(0) : k;
  p.w = args.w.values.data();
  p.ldw = n > 1 ? args.w.values.stride(0) : k;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.tiles_m = static_cast<int>(plan.tiles_m);
  p.tiles_n = static_cast<int>(plan.tiles_n);
  p.k_tiles_per_split = static_cast<int>(plan.per_split);
  p.epilogue = epilogue_params(op, args.out, m, n, device, status);
  const kernels::linear_int8::EpilogueParams finish = p.epilogue;
  if (plan.splits > 1) {  // each split writes its int32 partial tile; the epilogue kernel sums and finishes them
    p.split_stride = m * n;
    p.epilogue.kind = OutputKind::s32;
    p.epilogue.out = partials;
    p.epilogue.ld_out = n;
    p.epilogue.pairs = n % 2 == 0;
  }
  const int splits = static_cast<int>(plan.splits);
  switch (plan.kernel) {
    case Kernel::mma_small: launch_mma<kernels::linear_int8::MmaSmall>(p, splits, device, stream); break;
    case Kernel::mma_large: launch_mma<kernels::linear_int8::MmaLarge>(p, splits, device, stream); break;
    case Kernel::wgmma:
#if SHRINK_CUDA_HAS_SM90A
      kernels::linear_int8::launch_wgmma(p, splits, device, stream);
#endif
      break;
  }
  if (plan.splits > 1) launch_epilogue(partials, n, m * n, splits, finish, stream);
}

}  // namespace

Support can_implement_linear_int8(const LinearInt8Args& args) {
  const int device = args.x.values.device().index;
  Support s = check_device_rows(args.x.values, "x.values", device);
  if (!s) return s;
  const std::int64_t m = args.x.values.size(0), k = args.x.values.size(1);
  s = check_weight_and_rest(args.w, args.epilogue, args.out, args.path, m, k, device);
  if (!s) return s;
  s = check_loads_and_scales(args.x, "x", device, "per token, or per tensor");
  if (!s) return s;
  const OutputView out = describe_output(args.out, device);
  if (spans_overlap(out.span, byte_span(args.x.values)))
    return no("out", "memory overlapping x.values", "a separate output");
  if (spans_overlap(out.span, byte_span(args.x.scales)))
    return no("out", "memory overlapping x.scales", "a separate output");
  return Support::yes();
}

std::size_t linear_int8_workspace_bytes(const LinearInt8Args& args) {
  require_supported(can_implement_linear_int8(args), "shrink::cuda::linear_int8_workspace_bytes");
  return workspace_for(args.path, args.x.values.size(0), args.w.values.size(0), args.x.values.size(1));
}

class LinearInt8PlanAccess {
 public:
  static LinearInt8Plan make(const LinearInt8Args& args, Kernel kernel, int device) {
    const std::int64_t m = args.x.values.size(0), k = args.x.values.size(1), n = args.w.values.size(0);
    LinearInt8Plan p;
    p.args_ = args;
    p.kernel_ = static_cast<int>(kernel);
    p.wgmma_ = kernel == Kernel::wgmma;
    p.splits_ = static_cast<int>(make_plan(kernel, m, n, k).splits);
    p.workspace_ = workspace_for(args.path, m, n, k);
    p.device_ = device;
    return p;
  }
  static Kernel kernel(const LinearInt8Plan& plan) { return static_cast<Kernel>(plan.kernel_); }
  static int device(const LinearInt8Plan& plan) { return plan.device_; }
};

namespace {

// x and out of one call against a plan: the planned shapes and output type on the planned device, laid out as the
// kernels read them, apart from the weight, the epilogue's vectors and each other (O(1): nothing is read).
Support check_call(const LinearInt8Args& planned, int device, const Int8Operand& x, const LinearInt8Output& output) {
  Support s = check_device_rows(x.values, "x.values", device);
  if (!s) return s;
  if (x.values.shape() != planned.x.values.shape())
    return no("x.values.shape", to_string(x.values.shape()),
              to_string(planned.x.values.shape()) + " (the planned shape)");
  s = check_loads_and_scales(x, "x", device, "per token, or per tensor");
  if (!s) return s;
  if (output.index() != planned.out.index())
    return no("out", "a view of another element type than planned", "the planned output type");
  const OutputView out = describe_output(output, device);
  if (!out.layout) return out.layout;
  const OutputView planned_out = describe_output(planned.out, device);
  if (out.rows != planned_out.rows || out.cols != planned_out.cols)
    return no("out.shape", to_string(Shape{out.rows, out.cols}),
              to_string(Shape{planned_out.rows, planned_out.cols}) + " (the planned shape)");
  const std::pair<const char*, ByteSpan> inputs[] = {{"x.values", byte_span(x.values)},
                                                     {"x.scales", byte_span(x.scales)},
                                                     {"w.values", byte_span(planned.w.values)},
                                                     {"w.scales", byte_span(planned.w.scales)}};
  for (const auto& [name, span] : inputs)
    if (spans_overlap(out.span, span)) return no("out", std::string("memory overlapping ") + name, "a separate output");
  return check_epilogue_apart(planned.epilogue, out.span);
}

// A checked call with its workspace: the status word cleared, the launches, the status read back when asked.
void launch_checked(const LinearInt8Args& call, Kernel kernel, int device, const Workspace& workspace, Stream stream,
                    Synchronize synchronize, const char* fn) {
  int* status = static_cast<int*>(workspace.data);
  const auto s = static_cast<cudaStream_t>(stream);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), s));
  enqueue_linear_int8(call, kernel, device, status,
                      reinterpret_cast<std::int32_t*>(static_cast<char*>(workspace.data) + kStatusBytes), s);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

// The workspace of a call: at least `bytes`, apart from out.
void require_call_workspace(const Workspace& workspace, std::size_t bytes, const char* query,
                            const LinearInt8Output& out, int device, const char* fn) {
  detail::require_workspace(workspace, bytes, query, fn);
  if (spans_overlap(describe_output(out, device).span, workspace_span(workspace)))
    fail(fn, "workspace", "memory overlapping out", "a separate workspace");
}

}  // namespace

void linear_int8(const LinearInt8Args& args, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::linear_int8";
  require_supported(can_implement_linear_int8(args), fn);
  const std::int64_t m = args.x.values.size(0), k = args.x.values.size(1), n = args.w.values.size(0);
  const int device = args.x.values.device().index;
  require_call_workspace(workspace, workspace_for(args.path, m, n, k), "linear_int8_workspace_bytes(args)", args.out,
                         device, fn);
  detail::require_current_device(args.x.values.device(), fn, "x.values");
  launch_checked(args, choose_kernel(args.path, m, device, fn), device, workspace, stream, synchronize, fn);
}

LinearInt8Plan make_plan(const LinearInt8Args& args) {
  const char* fn = "shrink::cuda::make_plan(LinearInt8Args)";
  require_supported(can_implement_linear_int8(args), fn);
  detail::require_current_device(args.x.values.device(), fn, "x.values");
  const int device = args.x.values.device().index;
  return LinearInt8PlanAccess::make(args, choose_kernel(args.path, args.x.values.size(0), device, fn), device);
}

void run(const LinearInt8Plan& plan, const Int8Operand& x, const LinearInt8Output& out, Workspace workspace,
         Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::run(LinearInt8Plan)";
  if (plan.empty()) fail(fn, "plan", "a default-constructed plan", "a plan made by make_plan(args)");
  const int device = LinearInt8PlanAccess::device(plan);
  require_supported(check_call(plan.args(), device, x, out), fn);
  require_call_workspace(workspace, plan.workspace_bytes(), "plan.workspace_bytes()", out, device, fn);
  detail::require_current_device(x.values.device(), fn, "x.values");
  LinearInt8Args call = plan.args();
  call.x = x;
  call.out = out;
  launch_checked(call, LinearInt8PlanAccess::kernel(plan), device, workspace, stream, synchronize, fn);
}

// ---- the epilogue alone -------------------------------------------------------------------------------------------

Support can_implement_int8_epilogue(TensorView<const std::int32_t> acc, const Epilogue& epilogue,
                                    const LinearInt8Output& out) {
  const int device = acc.device().index;
  Support s = check_device_rows(acc, "acc", device);
  if (!s) return s;
  s = check_epilogue_and_output(epilogue, out, acc.size(0), acc.size(1), device, EpilogueScales::required);
  if (!s) return s;
  if (spans_overlap(describe_output(out, device).span, byte_span(acc)))
    return no("out", "memory overlapping acc", "a separate output");
  return s;
}

std::size_t int8_epilogue_workspace_bytes() { return kStatusBytes; }

void apply_int8_epilogue(TensorView<const std::int32_t> acc, const Epilogue& epilogue, const LinearInt8Output& out,
                         Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::apply_int8_epilogue";
  require_supported(can_implement_int8_epilogue(acc, epilogue, out), fn);
  detail::require_workspace(workspace, int8_epilogue_workspace_bytes(), "int8_epilogue_workspace_bytes()", fn);
  if (spans_overlap(describe_output(out, acc.device().index).span, workspace_span(workspace)))
    fail(fn, "workspace", "memory overlapping out", "a separate workspace");
  detail::require_current_device(acc.device(), fn, "acc");
  const std::int64_t m = acc.size(0), n = acc.size(1);
  int* status = static_cast<int*>(workspace.data);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  launch_epilogue(acc.data(), m > 1 ? acc.stride(0) : n, 0, 1,
                  epilogue_params(make_epilogue_op(epilogue, m, n), out, m, n, acc.device().index, status),
                  static_cast<cudaStream_t>(stream));
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

// ---- per-token quantizer ------------------------------------------------------------------------------------------

namespace {

// The quantizer's launch once checked, into `status` (already cleared).
template <class T>
void enqueue_quantize_rows(const TensorView<const T>& x, std::int8_t* q, std::int64_t ldq, float* scales, int* status,
                           cudaStream_t stream) {
  const std::int64_t m = x.size(0), k = x.size(1);
  constexpr int V = kernels::quantize_rows::kVector<T>;
  const std::int64_t ldx = m > 1 ? x.stride(0) : k;
  const bool vec = k % V == 0 && aligned(x.data(), 16) && (ldx * static_cast<std::int64_t>(sizeof(T))) % 16 == 0 &&
                   aligned(q, V) && ldq % V == 0;
  const std::int64_t row_bytes = k * static_cast<std::int64_t>(sizeof(T));
  const bool staged = row_bytes <= kernels::quantize_rows::kStagedBytes;
  const int shared = staged ? static_cast<int>(row_bytes) : 0;
  const dim3 grid(static_cast<unsigned>(m));
  using namespace kernels::quantize_rows;
  if (vec && staged)
    quantize_rows_absmax_kernel<T, true, true>
        <<<grid, kThreads, shared, stream>>>(x.data(), ldx, k, q, ldq, scales, status);
  else if (vec)
    quantize_rows_absmax_kernel<T, true, false>
        <<<grid, kThreads, shared, stream>>>(x.data(), ldx, k, q, ldq, scales, status);
  else if (staged)
    quantize_rows_absmax_kernel<T, false, true>
        <<<grid, kThreads, shared, stream>>>(x.data(), ldx, k, q, ldq, scales, status);
  else
    quantize_rows_absmax_kernel<T, false, false>
        <<<grid, kThreads, shared, stream>>>(x.data(), ldx, k, q, ldq, scales, status);
  SHRINK_CUDA_CHECK_LAUNCH(quantize_rows_absmax_kernel);
}

}  // namespace

std::size_t quantize_rows_absmax_workspace_bytes() { return kStatusBytes; }

template <class T>
void quantize_rows_absmax(TensorView<const T> x, TensorView<std::int8_t> q, TensorView<float> scales,
                          Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::quantize_rows_absmax";
  const int device = x.device().index;
  require_supported(check_device_rows(x, "x", device), fn);
  require_supported(check_device_rows(q, "q", device), fn);
  require_supported(check_device_view(scales, "scales", DeviceViewRules{1, device, 0, false}), fn);
  const std::int64_t m = x.size(0), k = x.size(1);
  if (q.size(0) != m || q.size(1) != k) fail(fn, "q.shape", to_string(q.shape()), to_string(x.shape()) + " (x's)");
  if (scales.size(0) != m || (m > 1 && scales.stride(0) != 1))
    fail(fn, "scales", "a view of shape " + to_string(scales.shape()) + " and strides " + to_string(scales.strides()),
         "a contiguous [" + std::to_string(m) + "] vector (one scale per row of x)");
  if (spans_overlap(byte_span(q), byte_span(x))) fail(fn, "q", "memory overlapping x", "a separate output");
  if (spans_overlap(byte_span(scales), byte_span(x))) fail(fn, "scales", "memory overlapping x", "a separate output");
  if (spans_overlap(byte_span(scales), byte_span(q))) fail(fn, "scales", "memory overlapping q", "a separate output");
  detail::require_workspace(workspace, quantize_rows_absmax_workspace_bytes(), "quantize_rows_absmax_workspace_bytes()",
                            fn);
  for (const auto& span : {byte_span(q), byte_span(scales)})
    if (spans_overlap(span, workspace_span(workspace)))
      fail(fn, "workspace", "memory overlapping an output", "a separate workspace");
  detail::require_current_device(x.device(), fn, "x");

  int* status = static_cast<int*>(workspace.data);
  const auto s = static_cast<cudaStream_t>(stream);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), s));
  enqueue_quantize_rows(x, q.data(), m > 1 ? q.stride(0) : k, scales.data(), status, s);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template void quantize_rows_absmax<float>(TensorView<const float>, TensorView<std::int8_t>, TensorView<float>,
                                          Workspace, Stream, Synchronize);
template void quantize_rows_absmax<half>(TensorView<const half>, TensorView<std::int8_t>, TensorView<float>, Workspace,
                                         Stream, Synchronize);
template void quantize_rows_absmax<bfloat16>(TensorView<const bfloat16>, TensorView<std::int8_t>, TensorView<float>,
                                             Workspace, Stream, Synchronize);

// ---- dynamic W8A8 -------------------------------------------------------------------------------------------------

namespace {

constexpr std::size_t kWorkspaceAlign = 256;

std::size_t align_up(std::size_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// linear_int8_dynamic's workspace: linear_int8's (status word, partial sums), then q [M, K] and sx [M], each
// 256-byte aligned.
struct DynamicLayout {
  std::size_t q_offset = 0, scales_offset = 0, bytes = 0;
};

DynamicLayout dynamic_layout(LinearInt8Path path, std::int64_t m, std::int64_t n, std::int64_t k) {
  DynamicLayout l;
  l.q_offset = align_up(workspace_for(path, m, n, k));
  l.scales_offset = l.q_offset + align_up(static_cast<std::size_t>(m * k));
  l.bytes = l.scales_offset + static_cast<std::size_t>(m) * sizeof(float);
  return l;
}

ByteSpan activation_span(const LinearInt8Activations& x) {
  return std::visit([](const auto& v) { return byte_span(v); }, x);
}

Shape activation_shape(const LinearInt8Activations& x) {
  return std::visit([](const auto& v) { return v.shape(); }, x);
}

}  // namespace

Support can_implement_linear_int8_dynamic(const LinearInt8DynamicArgs& args) {
  const int device = args.w.values.device().index;
  Support s = std::visit([&](const auto& x) { return check_device_rows(x, "x", device); }, args.x);
  if (!s) return s;
  const std::int64_t m = activation_shape(args.x).values[0], k = activation_shape(args.x).values[1];
  s = check_weight_and_rest(args.w, args.epilogue, args.out, args.path, m, k, device);
  if (!s) return s;
  if (spans_overlap(describe_output(args.out, device).span, activation_span(args.x)))
    return no("out", "memory overlapping x", "a separate output");
  return Support::yes();
}

std::size_t linear_int8_dynamic_workspace_bytes(const LinearInt8DynamicArgs& args) {
  require_supported(can_implement_linear_int8_dynamic(args), "shrink::cuda::linear_int8_dynamic_workspace_bytes");
  const std::int64_t m = activation_shape(args.x).values[0], k = activation_shape(args.x).values[1];
  return dynamic_layout(args.path, m, args.w.values.size(0), k).bytes;
}

void linear_int8_dynamic(const LinearInt8DynamicArgs& args, Workspace workspace, Stream stream,
                         Synchronize synchronize) {
  const char* fn = "shrink::cuda::linear_int8_dynamic";
  require_supported(can_implement_linear_int8_dynamic(args), fn);
  const std::int64_t m = activation_shape(args.x).values[0], k = activation_shape(args.x).values[1];
  const std::int64_t n = args.w.values.size(0);
  const DynamicLayout layout = dynamic_layout(args.path, m, n, k);
  detail::require_workspace(workspace, layout.bytes, "linear_int8_dynamic_workspace_bytes(args)", fn);
  if (!aligned(workspace.data, kWorkspaceAlign))
    fail(fn, "workspace", "a pointer not 256-byte aligned", "a workspace aligned to 256 bytes (cudaMalloc gives it)");
  const int device = args.w.values.device().index;
  const ByteSpan work = workspace_span(workspace);
  if (spans_overlap(describe_output(args.out, device).span, work))
    fail(fn, "workspace", "memory overlapping out", "a separate workspace");
  if (spans_overlap(activation_span(args.x), work))
    fail(fn, "workspace", "memory overlapping x", "a separate workspace");
  detail::require_current_device(args.w.values.device(), fn, "w.values");

  const Kernel kernel = choose_kernel(args.path, m, device, fn);
  char* base = static_cast<char*>(workspace.data);
  int* status = reinterpret_cast<int*>(base);
  auto* q = reinterpret_cast<std::int8_t*>(base + layout.q_offset);
  auto* scales = reinterpret_cast<float*>(base + layout.scales_offset);
  const auto s = static_cast<cudaStream_t>(stream);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), s));
  std::visit([&](const auto& x) { enqueue_quantize_rows(x, q, k, scales, status, s); }, args.x);
  LinearInt8Args gemm;
  gemm.x.values = TensorView<const std::int8_t>(q, Shape{m, k}, Device::cuda(device));
  gemm.x.scales = TensorView<const float>(scales, Shape{m}, Device::cuda(device));
  gemm.w = args.w;
  gemm.epilogue = args.epilogue;
  gemm.out = args.out;
  gemm.path = args.path;
  enqueue_linear_int8(gemm, kernel, device, status, reinterpret_cast<std::int32_t*>(base + kStatusBytes), s);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

}  // namespace shrink::cuda
