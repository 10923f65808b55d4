// Host API of the 2:4 semi-structured sparse GEMM on sparse tensor cores (compiled in cuda/linear_nm.cu; plain
// C++, no CUDA headers): dense activations times a weight pruned 2:4 along K,
//
//   Y[M, N] = X[M, K] · W[N, K]ᵀ,   out[m, n] = act(sx[m] · sw[n] · Y[m, n] + bias[n])   in float, in that order
//
// with W in sparse/nm_compressed.hpp's format, unchanged: the values array [N, K / 2] and the mma.sp metadata words
// (positions are not read). Types, the twins on the CPU (linear/nm.hpp) in brackets:
//   half x, half W        Y in float (tensor-core accumulation); out half (round to nearest even) or float; no scales
//   bfloat16 likewise     [cpu::linear_nm]
//   int8 x, int8 W        Y exact in int32; sx per token [M] or per tensor [1], sw per output channel [N] or [1];
//                         out float, half, bfloat16, or int8 requantized: q = clamp(round_half_even(v · (1 /
//                         out_scale)), -128, 127) (NaN gives -128)   [cpu::linear_nm_int8]
// act: none, relu, gelu (erf), silu, as core/activation.hpp.
//
// Device code: shrink/cuda/kernels/linear_nm.cuh (mma.sp with W as the sparse operand, computing Yᵀ = W · Xᵀ; the
// design: benchmarks/notes/gpu_linear_nm.md). sm_80 and later (sm_90 runs the same code; no sparse wgmma yet).
//
// Two phases, as CUB: linear_nm_workspace_bytes(args), then linear_nm(args, workspace, stream), which
// enqueues, allocates nothing and returns at once. can_implement_linear_nm(args) answers without touching the
// device, with the argument at fault and the reason; linear_nm throws shrink::Error with that reason before any
// CUDA call. Device-side checks set the status word: kBadScale (a scale that is not finite and > 0), kNonFinite (a
// bias that is not finite); Synchronize::yes waits and throws naming them (the output is then meaningless).
// int8: the environment variable SHRINK_NM_INT8_METADATA (row_per_lane, the default, or word_per_lane) picks which lane
// hands mma.sp which metadata (shrink/cuda/kernels/linear_nm_layout.hpp); any other value throws shrink::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "shrink/core/dtype.hpp"
#include "shrink/core/epilogue_check.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/view_checks.hpp"
#include "shrink/prune/nm.hpp"

namespace shrink::linear::detail {

inline bool pointer_aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

}  // namespace shrink::linear::detail

namespace shrink::cuda {

// Which kernel runs: automatic picks by shape; the others force one block tile (rows of W x rows of X), for tests and
// benchmarks. Every tile is correct for every shape.
enum class LinearNmPath : std::uint8_t {
  automatic,     // 32x16 for M <= 16; 128x128 when its tiles fill the device; 64x64 otherwise
  mma_sp_32x16,  // decode-sized M: many blocks along N, a deep pipeline, memory bound
  mma_sp_64x64,  // mid-sized M
  mma_sp_128x128,
};

inline const char* to_string(LinearNmPath path) {
  switch (path) {
    case LinearNmPath::automatic: return "automatic";
    case LinearNmPath::mma_sp_32x16: return "mma_sp_32x16";
    case LinearNmPath::mma_sp_64x64: return "mma_sp_64x64";
    case LinearNmPath::mma_sp_128x128: return "mma_sp_128x128";
  }
  return "?";
}

// A 2:4 compressed weight [rows, cols] on the device: the arrays of sparse::NmCompressed<T> (or of cuda::compress_nm's
// DeviceNmCompressed<T>) as they are.
template <class T>
struct DeviceSparse24Weight {
  const T* values = nullptr;                // [rows, cols / 2] row-major
  const std::uint32_t* metadata = nullptr;  // nm_metadata_words<T>(rows, cols, {2, 4}) words, tiles as documented there
  std::int64_t rows = 0;                    // N, output features
  std::int64_t cols = 0;                    // K, input features (dense)
  prune::NmPattern pattern{2, 4};           // must be 2:4: the pattern the arrays were compressed with
  Device device = Device::cuda(0);
};

template <class T, class Out>
struct LinearNmArgs {
  TensorView<const T> x;      // [M, K] row-major on the current device
  DeviceSparse24Weight<T> w;  // [N, K]
  // Device views: x_scales [M] or [1] and w_scales [N] or [1] for int8 operands (empty for 16-bit ones), bias [N] or
  // empty; out_scale for an int8 output: q = clamp(round_half_even(v · (1 / out_scale)), -128, 127).
  Epilogue epilogue;
  TensorView<Out> out;  // [M, N] row-major
  LinearNmPath path = LinearNmPath::automatic;
};

// Dense columns one mma.sp k-step covers, and the multiple of it K must be: 32 for 16-bit values, 64 for int8.
template <class T>
constexpr std::int64_t sparse24_tile_k() {
  return sizeof(T) == 2 ? 32 : 64;
}

// The element pairs with a kernel: half -> half or float, bfloat16 -> bfloat16 or float, int8 -> float, half,
// bfloat16 or int8.
template <class T, class Out>
constexpr bool is_linear_nm_type_pair() {
  if constexpr (std::is_same_v<T, half>)
    return std::is_same_v<Out, half> || std::is_same_v<Out, float>;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return std::is_same_v<Out, bfloat16> || std::is_same_v<Out, float>;
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return std::is_same_v<Out, float> || std::is_same_v<Out, half> || std::is_same_v<Out, bfloat16> ||
           std::is_same_v<Out, std::int8_t>;
  else
    return false;
}

// Largest K for int8: each row keeps K / 2 products of magnitude <= 128 · 128, whose sum must stay in int32.
inline constexpr std::int64_t kLinearNmMaxInt8K = 2 * (std::numeric_limits<std::int32_t>::max() / (128 * 128));

// Whether linear_nm can run these arguments, and when not, which argument is at fault and why. Touches no device.
template <class T, class Out>
Support can_implement_linear_nm(const LinearNmArgs<T, Out>& a) {
  if (!is_linear_nm_type_pair<T, Out>())
    return Support::no("x, out", std::string(element_type_name<T>()) + " -> " + element_type_name<Out>(),
                       "half -> half or float, bfloat16 -> bfloat16 or float, int8 -> float, half, bfloat16 or "
                       "int8");
  if (a.path != LinearNmPath::automatic && a.path != LinearNmPath::mma_sp_32x16 &&
      a.path != LinearNmPath::mma_sp_64x64 && a.path != LinearNmPath::mma_sp_128x128)
    return Support::no("path", std::to_string(static_cast<int>(a.path)),
                       "automatic, mma_sp_32x16, mma_sp_64x64 or mma_sp_128x128");
  // 16-byte rows and pointers: the kernel copies 16 bytes at a time (cp.async).
  if (!a.x.device().is_cuda()) return Support::no("x", "a view of host memory", "a CUDA view");
  const int device = a.x.device().index;
  Support s = check_device_view(a.x, "x", DeviceViewRules{2, device, 16});
  if (!s) return s;
  const std::int64_t m = a.x.size(0), k = a.x.size(1);
  const prune::NmPattern pattern = a.w.pattern;
  if (pattern.n != 2 || pattern.m != 4)
    return Support::no("w.pattern", prune::to_string(pattern), "2:4 (what sparse tensor cores run)");
  if (a.w.rows < 1) return Support::no("w.rows", std::to_string(a.w.rows), "N >= 1");
  if (a.w.cols != k)
    return Support::no("w.cols", std::to_string(a.w.cols), "K = " + std::to_string(k) + ", the columns of x");
  constexpr std::int64_t tile_k = sparse24_tile_k<T>();
  if (k % tile_k != 0)
    return Support::no(
        "x.shape", to_string(a.x.shape()),
        "K a multiple of " + std::to_string(tile_k) + " (one mma.sp k-step of " + element_type_name<T>() + " values)");
  if (std::is_same_v<T, std::int8_t> && k > kLinearNmMaxInt8K)
    return Support::no("x.shape", to_string(a.x.shape()),
                       "K <= " + std::to_string(kLinearNmMaxInt8K) + " (int32 accumulators cannot overflow)");
  if (!a.w.device.is_cuda()) return Support::no("w.device", "the host", "a CUDA device");
  if (a.w.device.index != device)
    return Support::no("w.device", "CUDA " + std::to_string(a.w.device.index),
                       "CUDA " + std::to_string(device) + ", where x lives");
  if (a.w.values == nullptr) return Support::no("w.values", "a null pointer", "a device pointer");
  if (!linear::detail::pointer_aligned(a.w.values, 16))
    return Support::no("w.values", "a misaligned pointer", "alignment to 16 bytes");
  if (a.w.metadata == nullptr) return Support::no("w.metadata", "a null pointer", "a device pointer");
  if (!linear::detail::pointer_aligned(a.w.metadata, 16))
    return Support::no("w.metadata", "a misaligned pointer", "alignment to 16 bytes");
  const std::int64_t n = a.w.rows;
  s = check_device_view(a.out, "out", DeviceViewRules{2, device, alignof(Out)});
  if (!s) return s;
  if (a.out.size(0) != m || a.out.size(1) != n)
    return Support::no("out.shape", to_string(a.out.shape()), to_string(Shape{m, n}) + " ([M, N])");
  EpilogueRules rules = epilogue_rules<Out>(
      m, n, Device::cuda(device), std::is_same_v<T, std::int8_t> ? EpilogueScales::required : EpilogueScales::none);
  rules.no_scales = "scales apply to int8 operands";
  s = check_epilogue(a.epilogue, rules, a.out);
  if (!s) return s;
  // The output must not share bytes with any input.
  const ByteSpan out_bytes = byte_span(a.out.data(), a.out.numel());
  const struct {
    const char* name;
    ByteSpan bytes;
  } inputs[] = {
      {"x", byte_span(a.x.data(), a.x.numel())},
      {"w.values", byte_span(a.w.values, n * k / 2)},
      {"w.metadata", byte_span(a.w.metadata, (n + 15) / 16 * 16 * k / 32)},
  };
  for (const auto& input : inputs)
    if (spans_overlap(out_bytes, input.bytes))
      return Support::no("out", std::string("memory overlapping ") + input.name, "a separate output");
  return Support::yes();
}

// Workspace of linear_nm: the status word (kStatusBytes), whatever the shape.
template <class T, class Out>
std::size_t linear_nm_workspace_bytes(const LinearNmArgs<T, Out>& args);

// Enqueues out = act(sx · sw · X · Wᵀ + bias) on `stream`. Instantiated for the pairs of is_linear_nm_type_pair.
// Errors (shrink::Error, before any CUDA call): whatever can_implement_linear_nm refuses; a workspace that is null,
// misaligned or smaller than linear_nm_workspace_bytes; x not on the current device.
template <class T, class Out>
void linear_nm(const LinearNmArgs<T, Out>& args, Workspace workspace, Stream stream,
               Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
