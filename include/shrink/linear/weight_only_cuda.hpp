// Host API of the weight-only GEMM on the GPU, W8A16 and W4A16, for small batches (compiled in
// cuda/linear_weight_only.cu; plain C++, no CUDA headers):
//
//   out[m, n] = act(s[n] · Σ_k x[m, k] · q[n, k] + bias[n])                     int8, one scale per output row
//   out[m, n] = act(Σ_g s[n, g] · Σ_{k in group g} x[m, k] · (q[n, k] − zp[n, g]) + bias[n])
//                                                          int4 / uint4, one scale (and zero point) per group of K
//
// x [M, K] half or bfloat16 (M from 1 to 64: decode and small batches), out [M, N] of the same type, rounded to
// nearest even; W [N, K] symmetric int8, or int4 / uint4 symmetric or affine (GPTQ / AWQ style zero points), with float
// scales and int32 zero points exactly as the quantization module stores them (quant::QuantizedTensor: int8 bytes
// [N, K] and scales [N] for per_channel axis 0; int4 / uint4 packed two a byte, the even k in the low nibble,
// [N, K / 2], scales and zero points [N, K / group_size] for per_group axis 1). Products are exact (16-bit x times
// q − zp, an integer in [-15, 15]) and sums float; the integers are turned into 16-bit floats in registers, never
// stored. act and its formulas are Activation's (core/epilogue.hpp); the CPU twin is
// cpu::linear_weight_only (linear/weight_only.hpp), which the tests compare against.
//
// Paths: cuda_core (CUDA-core FMA in float, for the smallest M) and tensor_core (mma.sync m16n8k16, f16 or bf16 inputs
// with fp32 accumulation); both run on sm_80 and sm_90 (and later). automatic picks by M (see linear_weight_only_path;
// the design: benchmarks/notes/gpu_linear_weight_only.md). K is cut in slices across thread blocks when N alone cannot
// fill the device; the slices' float partials go to the workspace and a second kernel adds them in a fixed order:
// results are deterministic, bit for bit, for a given device and plan.
//
// Two phases, as CUB: linear_weight_only_workspace_bytes(args) (the status word and the partials; it reads the current
// device's multiprocessor count), then linear_weight_only(args, workspace, stream), which enqueues, allocates nothing
// and returns at once. For repeated calls, make_plan(args) once and run(plan, x, out, workspace, stream). Every
// argument is checked on the host before any CUDA call (shrink::Error naming it);
// can_implement_linear_weight_only(args) asks the same questions without throwing. Device-side checks go to the status
// word and are read with Synchronize::yes (or check_status): kBadScale (a scale not finite and > 0), kBadZeroPoint (a
// zero point outside the dtype's range), kNonFinite (a bias not finite). NaN and inf in x propagate as IEEE arithmetic
// does, as on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cuda {

inline constexpr std::int64_t kWeightOnlyMaxRows = 64;  // M above this: the dense or W8A8 path

enum class WeightOnlyPath : std::uint8_t { automatic, cuda_core, tensor_core };

inline const char* to_string(WeightOnlyPath p) {
  switch (p) {
    case WeightOnlyPath::automatic: return "automatic";
    case WeightOnlyPath::cuda_core: return "cuda_core";
    case WeightOnlyPath::tensor_core: return "tensor_core";
  }
  return "?";
}

// A quantized weight W[N, K] in device memory.
struct WeightOnlyWeight {
  quant::QuantDtype dtype = quant::QuantDtype::int8;  // int8 (symmetric), int4 or uint4
  TensorView<const std::uint8_t> data;  // int8: [N, K] two's-complement bytes; int4 / uint4: [N, K / 2] packed nibbles
  TensorView<const float> scales;       // int8: [N]; int4 / uint4: [N, K / group_size]; finite and > 0
  std::int64_t group_size = 0;          // int4 / uint4: 64 or 128 (the scheme's group_size); int8: 0
  // int4 / uint4 affine: [N, K / group_size], in [-8, 7] (int4) or [0, 15] (uint4): w = (q − zp) · s. An empty view
  // means the symmetric zero point: 0 for int4, 8 for uint4. int8: empty.
  TensorView<const std::int32_t> zero_points;

  // Output rows N and inputs K, from the data's shape.
  std::int64_t rows() const { return data.rank() == 2 ? data.size(0) : 0; }
  std::int64_t cols() const {
    if (data.rank() != 2) return 0;
    return dtype == quant::QuantDtype::int4 || dtype == quant::QuantDtype::uint4 ? 2 * data.size(1) : data.size(1);
  }

  static WeightOnlyWeight int8(TensorView<const std::int8_t> values, TensorView<const float> scales) {
    WeightOnlyWeight w;
    w.data = TensorView<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(values.data()), values.shape(),
                                            values.strides(), values.device());
    w.scales = scales;
    return w;
  }
  // Signed nibbles; zero points optional (affine int4).
  static WeightOnlyWeight int4(TensorView<const std::uint8_t> packed, TensorView<const float> scales,
                               std::int64_t group_size, TensorView<const std::int32_t> zero_points = {}) {
    WeightOnlyWeight w;
    w.dtype = quant::QuantDtype::int4;
    w.data = packed;
    w.scales = scales;
    w.group_size = group_size;
    w.zero_points = zero_points;
    return w;
  }
  // Unsigned nibbles with their zero points (GPTQ / AWQ checkpoints).
  static WeightOnlyWeight uint4(TensorView<const std::uint8_t> packed, TensorView<const float> scales,
                                TensorView<const std::int32_t> zero_points, std::int64_t group_size) {
    WeightOnlyWeight w = int4(packed, scales, group_size, zero_points);
    w.dtype = quant::QuantDtype::uint4;
    return w;
  }
};

// Everything one call needs. T: half or bfloat16, the type of x and out.
template <class T>
struct LinearWeightOnlyArgs {
  TensorView<const T> x;  // [M, K] contiguous CUDA view, 16-byte aligned
  WeightOnlyWeight w;     // [N, K], 16-byte aligned data
  // bias: [N] contiguous CUDA view, or empty for none; the scales stay empty (w carries its own).
  Epilogue epilogue;
  TensorView<T> out;  // [M, N] contiguous CUDA view, apart from every input
  WeightOnlyPath path = WeightOnlyPath::automatic;
  // K slices (thread blocks along K, their partials added by a second kernel); 0 lets the call choose from the shape
  // and the device. A request is an upper bound: slices hold whole blocks of 64 k.
  int split_k = 0;
};

// Whether the call can run, and why not (the argument, its value, what was expected). No CUDA call is made: the
// current device and its compute capability (8.0 or later) are checked by linear_weight_only.
template <class T>
Support can_implement_linear_weight_only(const LinearWeightOnlyArgs<T>& args);

// The path automatic resolves to for these arguments: cuda_core for M <= 4 with int8 weights and M <= 2 with int4
// ones, tensor_core above; a forced path is returned as it is.
template <class T>
WeightOnlyPath linear_weight_only_path(const LinearWeightOnlyArgs<T>& args);

// Workspace bytes of the call: the status word and, when K is sliced, slices · M · N floats. Reads the current
// device's multiprocessor count unless args.split_k is given. Throws shrink::Error when the call cannot run.
template <class T>
std::size_t linear_weight_only_workspace_bytes(const LinearWeightOnlyArgs<T>& args);

// Enqueues out = act(x · dequantize(W)ᵀ + bias) on `stream`: make_plan(args), then run on args.x and args.out.
template <class T>
void linear_weight_only(const LinearWeightOnlyArgs<T>& args, Workspace workspace, Stream stream,
                        Synchronize synchronize = Synchronize::no);

class LinearWeightOnlyPlanAccess;  // the compiled layer's (cuda/linear_weight_only.cu) way in

// linear_weight_only prepared for repeated calls, as CUTLASS's initialize / run: make_plan checks every argument,
// resolves the path and reads the current device once (its compute capability and, unless split_k is given, its
// multiprocessor count), fixing the K slices and the workspace; run then checks only what a call may change (x and
// out: the planned shapes on the planned device, apart from the weight, the bias and each other) and launches,
// querying nothing but the current device. A plan holds the views it was made with: the weight, its scales and zero
// points and the bias must outlive it, unchanged in place and shape.
template <class T>
class LinearWeightOnlyPlan {
 public:
  const LinearWeightOnlyArgs<T>& args() const { return args_; }  // as planned
  WeightOnlyPath path() const { return tensor_cores_ ? WeightOnlyPath::tensor_core : WeightOnlyPath::cuda_core; }
  int k_slices() const { return slices_; }
  std::size_t workspace_bytes() const { return workspace_; }
  bool empty() const { return device_ < 0; }  // default-constructed: not made by make_plan

 private:
  friend class LinearWeightOnlyPlanAccess;
  LinearWeightOnlyArgs<T> args_;
  bool tensor_cores_ = false;
  int slices_ = 1;
  std::int64_t k_slice_ = 0;
  std::size_t workspace_ = 0;
  int device_ = -1;
};

// Throws shrink::Error when the call cannot run (can_implement_linear_weight_only's reason) or the current device
// is not x's or older than compute capability 8.0.
template <class T>
LinearWeightOnlyPlan<T> make_plan(const LinearWeightOnlyArgs<T>& args);

// The planned product on activations x [M, K] and output out [M, N] of the planned shapes (plan.args().x and .out
// repeat the planned call); workspace of at least plan.workspace_bytes().
template <class T>
void run(const LinearWeightOnlyPlan<T>& plan, TensorView<const T> x, TensorView<T> out, Workspace workspace,
         Stream stream, Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
