// The W8A8 epilogue on the device (nvcc only): int32 accumulators to float, half, bfloat16 or requantized int8, the
// formulas of core/epilogue.hpp (v = act(__int2float_rn(acc) · (sx · sw) + bias), then the output type) as the CPU
// computes them:
//   half / bfloat16: cvt.rn (nearest, ties to even; the same bits as core/half.hpp for every non-NaN value)
//   int8: epilogue_int8 with inv_out_scale = 1.0f / out_scale from the host
//
// ReLU is exact; GELU and SiLU call CUDA's erff / expf (within 2 ulps), so they may differ from glibc's by an ulp.
// Used in registers by the GEMM kernels (store_pair) and by int8_epilogue_kernel over int32 sums in memory (the
// K splits of a GEMM, or a user's cuBLASLt result). Scales that are not finite and > 0 set kBadScale, a bias that
// is not finite kNonFinite.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels::linear_int8 {

// What the epilogue writes: one of the four outputs, or the raw int32 sums of a K split (no scaling).
enum class OutputKind : int { f32, f16, bf16, s8, s32 };

struct EpilogueParams {
  const float* x_scales = nullptr;  // [M] when x_per_token, else [1]
  const float* w_scales = nullptr;  // [N] when w_per_channel, else [1]
  const float* bias = nullptr;      // [N], or null
  bool x_per_token = false;
  bool w_per_channel = false;
  int activation = 0;  // Activation
  OutputKind kind = OutputKind::f32;
  void* out = nullptr;
  std::int64_t ld_out = 0;  // elements between rows of out
  bool pairs = false;       // out and ld_out let two neighbours (even column first) go out as one aligned store
  float out_scale = 0.0f;   // int8 outputs: finite, > 0
  float inv_out_scale = 0.0f;
  int* status = nullptr;
  int m = 0;
  int n = 0;
};

__device__ __forceinline__ float checked_scale(const float* scales, int index, int* status) {
  const float s = __ldg(scales + index);
  if (!(s > 0.0f) || !isfinite(s)) atomicOr(status, kBadScale);
  return s;
}

__device__ __forceinline__ float row_scale(const EpilogueParams& p, int row) {
  return checked_scale(p.x_scales, p.x_per_token ? row : 0, p.status);
}

// act(acc · (sx · sw[col]) + bias[col]) for one accumulator of a row whose scale is sx.
__device__ __forceinline__ float finished_value(const EpilogueParams& p, std::int32_t acc, float sx, int col) {
  const float sw = checked_scale(p.w_scales, p.w_per_channel ? col : 0, p.status);
  float b = 0.0f;  // the CPU adds 0.0f when there is no bias: −0 becomes +0 there too
  if (p.bias != nullptr) {
    b = __ldg(p.bias + col);
    if (!isfinite(b)) atomicOr(p.status, kNonFinite);
  }
  return shrink::epilogue_value(__int2float_rn(acc), __fmul_rn(sx, sw), b, static_cast<Activation>(p.activation));
}

__device__ __forceinline__ std::uint16_t to_half_bits(float v) {
  std::uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}

__device__ __forceinline__ std::uint16_t to_bfloat16_bits(float v) {
  std::uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}

__device__ __forceinline__ std::uint8_t to_int8_bits(const EpilogueParams& p, float v) {
  return static_cast<std::uint8_t>(shrink::epilogue_int8(v, p.out_scale, p.inv_out_scale));
}

// Writes one finished value (not s32) at element offset `at` of out.
__device__ __forceinline__ void write_one(const EpilogueParams& p, std::int64_t at, float v) {
  switch (p.kind) {
    case OutputKind::f32: static_cast<float*>(p.out)[at] = v; break;
    case OutputKind::f16: static_cast<std::uint16_t*>(p.out)[at] = to_half_bits(v); break;
    case OutputKind::bf16: static_cast<std::uint16_t*>(p.out)[at] = to_bfloat16_bits(v); break;
    case OutputKind::s8: static_cast<std::uint8_t*>(p.out)[at] = to_int8_bits(p, v); break;
    case OutputKind::s32: break;
  }
}

// Writes two finished neighbours at `at` (even, inside a row) with one aligned store.
__device__ __forceinline__ void write_two(const EpilogueParams& p, std::int64_t at, float v0, float v1) {
  switch (p.kind) {
    case OutputKind::f32: reinterpret_cast<float2*>(static_cast<float*>(p.out) + at)[0] = make_float2(v0, v1); break;
    case OutputKind::f16:
      reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(p.out) + at)[0] =
          to_half_bits(v0) | (static_cast<std::uint32_t>(to_half_bits(v1)) << 16);
      break;
    case OutputKind::bf16:
      reinterpret_cast<std::uint32_t*>(static_cast<std::uint16_t*>(p.out) + at)[0] =
          to_bfloat16_bits(v0) | (static_cast<std::uint32_t>(to_bfloat16_bits(v1)) << 16);
      break;
    case OutputKind::s8:
      reinterpret_cast<std::uint16_t*>(static_cast<std::uint8_t*>(p.out) + at)[0] =
          static_cast<std::uint16_t>(to_int8_bits(p, v0) | (to_int8_bits(p, v1) << 8));
      break;
    case OutputKind::s32: break;
  }
}

// The accumulators of (row, col) and (row, col + 1), col even, from a GEMM tile's registers: finished and written,
// or (s32) stored raw; whatever lies outside [M, N] is skipped.
__device__ __forceinline__ void store_pair(const EpilogueParams& p, int row, int col, std::int32_t a0,
                                           std::int32_t a1) {
  if (row >= p.m || col >= p.n) return;
  const bool both = col + 1 < p.n;
  const std::int64_t at = static_cast<std::int64_t>(row) * p.ld_out + col;
  if (p.kind == OutputKind::s32) {
    std::int32_t* out = static_cast<std::int32_t*>(p.out) + at;
    if (both && p.pairs) {
      reinterpret_cast<int2*>(out)[0] = make_int2(a0, a1);
    } else {
      out[0] = a0;
      if (both) out[1] = a1;
    }
    return;
  }
  const float sx = row_scale(p, row);
  const float v0 = finished_value(p, a0, sx, col);
  if (!both) {
    write_one(p, at, v0);
    return;
  }
  const float v1 = finished_value(p, a1, sx, col + 1);
  if (p.pairs) {
    write_two(p, at, v0, v1);
  } else {
    write_one(p, at, v0);
    write_one(p, at + 1, v1);
  }
}

// out[row, col] = epilogue(Σ_s acc[s · split_stride + row · ld_acc + col]) for s < splits: the sums of a K split
// (exact: every partial sum of the true total fits in int32) or one user's int32 matrix (splits 1). Columns across
// x (blockDim.x threads each), rows across y with a stride loop (grid y is at most 65535).
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void int8_epilogue_kernel(const std::int32_t* __restrict__ acc, std::int64_t ld_acc,
                                     std::int64_t split_stride, int splits, EpilogueParams p) {
  const int col = static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
  if (col >= p.n) return;
  for (int row = static_cast<int>(blockIdx.y); row < p.m; row += static_cast<int>(gridDim.y)) {
    const std::int32_t* a = acc + static_cast<std::int64_t>(row) * ld_acc + col;
    std::int32_t sum = 0;
    for (int s = 0; s < splits; ++s) sum += __ldg(a + s * split_stride);
    write_one(p, static_cast<std::int64_t>(row) * p.ld_out + col, finished_value(p, sum, row_scale(p, row), col));
  }
}

}  // namespace shrink::cuda::kernels::linear_int8
