// Host API of the CUDA W8A8 GEMM and its activation quantizer (compiled in cuda/linear_int8*.cu; plain C++, no CUDA
// headers). The CPU twin of every result is linear/int8.hpp.
//
//   acc[m, n] = Σ_k x[m, k] · w[n, k]                    int8 × int8 → int32 on the tensor cores, exact
//   v[m, n]   = act(acc · (sx[m] · sw[n]) + bias[n])      in float, every operation rounded on its own
//   out       = v (float), v rounded to nearest even (half, bfloat16), or
//               clamp(nearbyint(v · (1.0f / out_scale)), −128, 127) (int8, quant/quantize.hpp's formula)
//
// The operands carry their scales, as on the CPU (a QuantizedTensor, a PackedInt8Weight): x [M, K] int8 activations
// with sx [M] (per token) or [1] (per tensor); w [N, K] int8 weights with sw [N] (per output channel) or [1] (per
// tensor). The epilogue holds the rest: bias [N] or none; act none, ReLU, GELU (erf) or SiLU, as
// core/activation.hpp; out_scale for an int8 output. The result equals cpu::linear_int8 bit for bit for none and ReLU;
// GELU and SiLU use CUDA's erff / expf, a few float ulps from glibc's (see tests/linear/test_int8_cuda.cpp).
// linear_int8_dynamic quantizes float, half or bfloat16 activations per token first (quantize_rows_absmax), as
// cpu::linear_int8_dynamic does.
//
// Paths (LinearInt8Path): mma_sync (sm_80 and later: mma.sync m16n8k32) and wgmma (sm_90a only: wgmma.mma_async;
// tiles and pipelines: benchmarks/notes/gpu_linear_int8.md); automatic takes wgmma on a compute capability 9.0
// device when M > 64, else mma_sync. A path forced on a device that cannot run it throws.
// Small problems split K over several CTAs, each writing int32 partial sums to the workspace, summed (exactly) by
// the epilogue kernel that apply_int8_epilogue also exposes.
//
// Two phases, as CUB: linear_int8_workspace_bytes(args), then linear_int8(args, workspace, stream), which enqueues,
// allocates nothing and returns at once. For repeated calls, make_plan(args) once and run(plan, x, out, workspace,
// stream). Host checks (can_implement_linear_int8, also the first thing linear_int8 does)
// throw shrink::Error before any CUDA call and never touch the device; device-side checks go to the status word:
// kBadScale (a scale not finite and > 0), kNonFinite (a bias or, for the quantizer, an input that is NaN or inf),
// read with Synchronize::yes or check_status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

enum class LinearInt8Path : std::uint8_t { automatic, mma_sync, wgmma };

const char* to_string(LinearInt8Path path);

// The output: one of four device views [M, N] with contiguous rows (any row stride).
using LinearInt8Output =
    std::variant<TensorView<float>, TensorView<half>, TensorView<bfloat16>, TensorView<std::int8_t>>;

// An int8 operand in device memory with its scales: values [R, K] with contiguous rows whose stride (in bytes) and
// start are multiples of 16 (the kernels load 16 bytes at a time), K a multiple of 16 and at most 131071 (the int32
// sum cannot overflow); scales [R] (one per row: per token for x, per output channel for w) or [1] (per tensor),
// contiguous floats on the same device.
struct Int8Operand {
  TensorView<const std::int8_t> values;
  TensorView<const float> scales;
};

struct LinearInt8Args {
  Int8Operand x;  // [M, K] activations, scales [M] or [1]
  Int8Operand w;  // [N, K] weights, scales [N] or [1]
  // Device views: bias [N] or empty; the activation; out_scale for an int8 output. Its scales stay empty (the operands
  // carry them).
  Epilogue epilogue;
  LinearInt8Output out;  // [M, N]
  LinearInt8Path path = LinearInt8Path::automatic;
};

// Whether linear_int8 accepts `args`, and if not which argument is wrong and what was expected. Looks at shapes,
// strides, alignment, devices named by the views and overlaps; never calls CUDA (the current device and, for a
// forced wgmma path, its compute capability are checked by linear_int8 itself).
Support can_implement_linear_int8(const LinearInt8Args& args);

// Workspace for linear_int8(args): the status word and, for shapes whose tiles do not fill the device, the int32
// partial sums of the K splits. Depends on the shapes and the path only (the same on every device). Throws
// shrink::Error when can_implement_linear_int8(args) fails.
std::size_t linear_int8_workspace_bytes(const LinearInt8Args& args);

// out = epilogue(x · wᵀ), enqueued on `stream` (see the top of this file).
void linear_int8(const LinearInt8Args& args, Workspace workspace, Stream stream,
                 Synchronize synchronize = Synchronize::no);

class LinearInt8PlanAccess;  // the compiled layer's (cuda/linear_int8.cu) way in

// linear_int8 prepared for repeated calls, as CUTLASS's initialize / run: make_plan checks every argument, reads the
// current device once (its compute capability, for the path) and fixes the kernel, the tiles, the K split and the
// workspace; run then checks only what a call may change (x with its scales and out: the planned shapes and output
// type on the planned device, apart from the weight, the bias and each other) and launches, querying nothing but the
// current device. A plan holds the views it was made with: w, its scales and the bias must outlive it, unchanged in
// place and shape.
class LinearInt8Plan {
 public:
  const LinearInt8Args& args() const { return args_; }  // as planned
  LinearInt8Path path() const { return wgmma_ ? LinearInt8Path::wgmma : LinearInt8Path::mma_sync; }
  int k_splits() const { return splits_; }
  std::size_t workspace_bytes() const { return workspace_; }
  bool empty() const { return device_ < 0; }  // default-constructed: not made by make_plan

 private:
  friend class LinearInt8PlanAccess;
  LinearInt8Args args_;
  int kernel_ = 0;  // cuda/linear_int8.cu's Kernel
  bool wgmma_ = false;
  int splits_ = 1;
  std::size_t workspace_ = 0;
  int device_ = -1;
};

// Throws shrink::Error when the call cannot run (can_implement_linear_int8's reason), the current device is not x's,
// or the device cannot run the path.
LinearInt8Plan make_plan(const LinearInt8Args& args);

// The planned product on x [M, K] with its scales ([M] or [1]) and out [M, N] of the planned shapes and output type
// (plan.args().x and .out repeat the planned call); workspace of at least plan.workspace_bytes().
void run(const LinearInt8Plan& plan, const Int8Operand& x, const LinearInt8Output& out, Workspace workspace,
         Stream stream, Synchronize synchronize = Synchronize::no);

// The epilogue alone on int32 accumulators acc [M, N] in device memory (contiguous rows, any row stride), e.g. from
// cuBLASLt: out = epilogue(acc), the same values linear_int8 writes. With no operands to carry them, the scales come
// in the epilogue here: x_scales [M] or [1] and w_scales [N] or [1], both required. Workspace: the status word.
Support can_implement_int8_epilogue(TensorView<const std::int32_t> acc, const Epilogue& epilogue,
                                    const LinearInt8Output& out);
std::size_t int8_epilogue_workspace_bytes();
void apply_int8_epilogue(TensorView<const std::int32_t> acc, const Epilogue& epilogue, const LinearInt8Output& out,
                         Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// The activations of linear_int8_dynamic: float, half or bfloat16 [M, K] in device memory, contiguous rows.
using LinearInt8Activations = std::variant<TensorView<const float>, TensorView<const half>, TensorView<const bfloat16>>;

struct LinearInt8DynamicArgs {
  LinearInt8Activations x;  // [M, K], quantized per token on the device
  Int8Operand w;            // [N, K], as for linear_int8
  Epilogue epilogue;        // as for linear_int8
  LinearInt8Output out;     // [M, N]
  LinearInt8Path path = LinearInt8Path::automatic;
};

// The W8A8 layer on float activations, the twin of cpu::linear_int8_dynamic: x quantized per token by
// quantize_rows_absmax into the workspace (q [M, K] int8 and sx [M]), then linear_int8 with x = {q, sx}. The same
// checks as linear_int8 (K a multiple of 16, K ≤ 131071), and x's rows contiguous. Workspace: the status word, q, sx
// and linear_int8's partial sums; a NaN or inf in x sets kNonFinite.
Support can_implement_linear_int8_dynamic(const LinearInt8DynamicArgs& args);
std::size_t linear_int8_dynamic_workspace_bytes(const LinearInt8DynamicArgs& args);
void linear_int8_dynamic(const LinearInt8DynamicArgs& args, Workspace workspace, Stream stream,
                         Synchronize synchronize = Synchronize::no);

// Dynamic per-token quantization, fused (one read of x, one write of q): for each row m of x [M, K] (float, half or
// bfloat16; contiguous rows, any row stride), scales[m] = max(max_k |x[m, k]| / 127.5f, FLT_EPSILON) and
// q[m, k] = clamp(nearbyint(x[m, k] · (1.0f / scales[m])), −128, 127), bit for bit cpu::quantize_rows_absmax of the
// values as floats. q [M, K] int8 (contiguous rows, any row stride), scales [M] contiguous. NaN or inf in x sets
// kNonFinite (the outputs of that row are then meaningless). Workspace: the status word.
std::size_t quantize_rows_absmax_workspace_bytes();
template <class T>
void quantize_rows_absmax(TensorView<const T> x, TensorView<std::int8_t> q, TensorView<float> scales,
                          Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
