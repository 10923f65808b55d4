// What the weight-only GEMM kernels share (nvcc only): the problem they read, 16-bit traits (conversions, mma.sync),
// loads, and the output stage with its split-K second pass. The two main loops live in
// linear_weight_only_cuda_core.cuh and linear_weight_only_tensor_core.cuh; the host API is
// shrink/linear/weight_only_cuda.hpp.
//
// int4 weights with zero points subtract a per-group offset instead of the fixed 8 when they turn nibbles into 16-bit
// values (linear_weight_only_bits.hpp): the kernels then multiply q − zp, exactly, and the rest is unchanged.
//
// Output stage: the epilogue operation (core/epilogue.hpp's EpilogueOp, checked as cuda/kernels/common/epilogue.cuh
// reads it), v = act(acc · s[n] + bias[n]) in float (int8: s the row's scale; int4: the group scales are inside acc,
// s = 1), then T(v) rounded to nearest even, as the CPU twin. With K cut in slices, each slice stores its float acc in
// partials[slice, m, n] and finish_splits_kernel sums them in slice order before the same stage: no atomics, the same
// bits on every run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/epilogue.cuh"
#include "shrink/cuda/kernels/linear_weight_only_bits.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels::linear_weight_only {

enum class WeightKind : int { int8, int4 };

inline constexpr int kThreads = 128;  // threads of every main-loop block: 4 warps, each independent of the others
inline constexpr int kWarps = kThreads / 32;
inline constexpr std::int64_t kBlockK = 64;  // K granularity of slices (and of the tensor-core loop)

// Device pointers and sizes of one call (checked on the host).
template <class T>
struct Problem {
  const T* x = nullptr;             // [M, K]
  const std::uint8_t* w = nullptr;  // int8: [N, K] bytes; int4: [N, K / 2] packed nibbles
  const float* scales = nullptr;    // int8: [N]; int4: [N, K / group_size]
  // int4 affine: [N, K / group_size], or null for the symmetric zero point. A nibble u (flipped by int4_flip) stands
  // for u − o with o = zero_point + zero_point_bias, in [0, 15] (linear_weight_only_bits.hpp); o = 8 without zero
  // points.
  const std::int32_t* zero_points = nullptr;
  int zero_point_bias = 8;                // 8 for int4 (zp in [-8, 7]), 0 for uint4 (zp in [0, 15])
  std::uint32_t int4_flip = 0x88888888u;  // int4: the sign flip of every nibble; uint4: 0 (nibbles as they are)
  EpilogueOp op;                          // w_scales: int8's scales [N]; int4: none (inside the sum)
  T* out = nullptr;                       // [M, N]
  float* partials = nullptr;              // [slices, M, N] with more than one slice
  int* status = nullptr;                  // the workspace's status word
  int m = 0;
  int n = 0;
  std::int64_t k = 0;
  int group_size = 0;        // int4
  std::int64_t k_slice = 0;  // k per slice, a multiple of kBlockK
  int slices = 1;
};

// ---- 16-bit traits ---------------------------------------------------------------------------------------------------
template <class T>
struct Sixteen;

template <>
struct Sixteen<half> {
  // d = a · 1 + c on each half, exact here (the biased value minus its offset is a small integer).
  __device__ __forceinline__ static std::uint32_t subtract(std::uint32_t biased, std::uint32_t minus_offset) {
    std::uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(biased), "r"(kHalfOnePair), "r"(minus_offset));
    return d;
  }
  __device__ __forceinline__ static std::uint32_t int8_weights(const std::uint32_t* flipped, int step, int which) {
    return subtract(int8_weight_pair_biased_half(flipped, step, which), kHalfMinus1152Pair);
  }
  // minus_offset: half_minus_offset_pair(o) of the group (kHalfMinus1032Pair without zero points).
  __device__ __forceinline__ static std::uint32_t int4_weights(const std::uint32_t* flipped, int step, int which,
                                                               std::uint32_t minus_offset) {
    return subtract(int4_weight_pair_biased(flipped, step, which, kHalfMagicPair), minus_offset);
  }
  __device__ __forceinline__ static std::uint32_t minus_offset_pair(std::uint32_t o) {
    return half_minus_offset_pair(o);
  }
  // d += a · b: A [16, 16] row-major, B [16, 8] column-major, fp16 inputs, fp32 accumulators.
  __device__ __forceinline__ static void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // The two halves of a pair as floats (exact), low half first.
  __device__ __forceinline__ static float2 to_float2(std::uint32_t pair) {
    float low, high;
    asm("{\n.reg .f16 l, h;\nmov.b32 {l, h}, %2;\ncvt.f32.f16 %0, l;\ncvt.f32.f16 %1, h;\n}"
        : "=f"(low), "=f"(high)
        : "r"(pair));
    return make_float2(low, high);
  }
};

template <>
struct Sixteen<bfloat16> {
  __device__ __forceinline__ static std::uint32_t subtract(std::uint32_t biased, std::uint32_t minus_offset) {
    std::uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(biased), "r"(kBfloat16OnePair), "r"(minus_offset));
    return d;
  }
  __device__ __forceinline__ static std::uint32_t int8_weights(const std::uint32_t* flipped, int step, int which) {
    return int8_weight_pair_bfloat16(flipped, step, which);
  }
  __device__ __forceinline__ static std::uint32_t int4_weights(const std::uint32_t* flipped, int step, int which,
                                                               std::uint32_t minus_offset) {
    return subtract(int4_weight_pair_biased(flipped, step, which, kBfloat16MagicPair), minus_offset);
  }
  __device__ __forceinline__ static std::uint32_t minus_offset_pair(std::uint32_t o) {
    return bfloat16_minus_offset_pair(o);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static float2 to_float2(std::uint32_t pair) {
    return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xFFFF0000u));
  }
};

// ---- Loads -----------------------------------------------------------------------------------------------------------
// 16 bytes as four words; weights stream past the caches once (evict-first), activations stay cached (read-only path).
struct Words4 {
  std::uint32_t w[4];
};
struct Words2 {
  std::uint32_t w[2];
};

__device__ __forceinline__ Words4 load_streaming16(const void* p) {
  const uint4 v = __ldcs(static_cast<const uint4*>(p));
  return Words4{{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ Words2 load_streaming8(const void* p) {
  const uint2 v = __ldcs(static_cast<const uint2*>(p));
  return Words2{{v.x, v.y}};
}
__device__ __forceinline__ Words4 load_cached16(const void* p) {
  const uint4 v = __ldg(static_cast<const uint4*>(p));
  return Words4{{v.x, v.y, v.z, v.w}};
}

// The offset o of row n's group g (see Problem): 8 without zero points; a zero point outside the dtype's range is
// flagged and read as the symmetric one, so that o stays a nibble.
template <class T>
__device__ __forceinline__ std::uint32_t int4_offset(const Problem<T>& p, std::int64_t index, bool& bad) {
  if (p.zero_points == nullptr) return 8u;
  const int o = __ldg(p.zero_points + index) + p.zero_point_bias;
  const bool ok = o >= 0 && o <= 15;
  bad |= !ok;
  return ok ? static_cast<std::uint32_t>(o) : 8u;
}

// ---- Output stage ----------------------------------------------------------------------------------------------------
// Flags met on the way, or-ed into the status word once per thread.
struct Flags {
  EpilogueFlags epilogue;  // a scale (int4's group scales too) or a bias
  bool bad_zero_point = false;

  __device__ __forceinline__ void report(int* status) const {
    epilogue.report(status);
    if (bad_zero_point) atomicOr(status, kBadZeroPoint);
  }
};

// out[m, n] from the complete float sum acc.
template <class T>
__device__ __forceinline__ void finish_output(const Problem<T>& p, int m, int n, float acc, Flags& flags) {
  p.out[static_cast<std::int64_t>(m) * p.n + n] = checked_output<T>(p.op, acc, m, n, flags.epilogue);
}

// A slice's sum for (m, n): the output itself with one slice, else its partial.
template <class T>
__device__ __forceinline__ void emit(const Problem<T>& p, int slice, int m, int n, float acc, Flags& flags) {
  if (p.slices == 1)
    finish_output<T>(p, m, n, acc, flags);
  else
    p.partials[(static_cast<std::int64_t>(slice) * p.m + m) * p.n + n] = acc;
}

}  // namespace shrink::cuda::kernels::linear_weight_only
