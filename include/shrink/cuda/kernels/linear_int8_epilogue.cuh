// The W8A8 GEMM's output stage on the device (nvcc only): the accumulators of a tile's registers through the epilogue
// operation (core/epilogue.hpp's EpilogueOp, checked as cuda/kernels/common/epilogue.cuh reads it) into float, half,
// bfloat16 or requantized int8, the same bits as the CPU (GELU and SiLU: CUDA's erff / expf, within an ulp or two of
// glibc's), or, when K is split, raw int32 partial sums that finish_splits_kernel sums and finishes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/epilogue.cuh"

namespace shrink::cuda::kernels::linear_int8 {

// What the epilogue writes: one of the four outputs, or the raw int32 sums of a K split (no scaling).
enum class OutputKind : int { f32, f16, bf16, s8, s32 };

struct EpilogueParams {
  EpilogueOp op;  // x_scales [M] or [1] and w_scales [N] or [1] both set
  OutputKind kind = OutputKind::f32;
  void* out = nullptr;
  std::int64_t ld_out = 0;  // elements between rows of out
  bool pairs = false;       // out and ld_out let two neighbours (even column first) go out as one aligned store
  int* status = nullptr;    // the workspace's status word
  int m = 0;
  int n = 0;
};

// Writes one finished value (not s32) at element offset `at` of out.
__device__ __forceinline__ void write_one(const EpilogueParams& p, std::int64_t at, float v) {
  switch (p.kind) {
    case OutputKind::f32: static_cast<float*>(p.out)[at] = p.op.output<float>(v); break;
    case OutputKind::f16: static_cast<half*>(p.out)[at] = p.op.output<half>(v); break;
    case OutputKind::bf16: static_cast<bfloat16*>(p.out)[at] = p.op.output<bfloat16>(v); break;
    case OutputKind::s8: static_cast<std::int8_t*>(p.out)[at] = p.op.output<std::int8_t>(v); break;
    case OutputKind::s32: break;
  }
}

// Writes two finished neighbours at `at` (even, inside a row) with one aligned store.
__device__ __forceinline__ void write_two(const EpilogueParams& p, std::int64_t at, float v0, float v1) {
  switch (p.kind) {
    case OutputKind::f32: reinterpret_cast<float2*>(static_cast<float*>(p.out) + at)[0] = make_float2(v0, v1); break;
    case OutputKind::f16:
      reinterpret_cast<std::uint32_t*>(static_cast<half*>(p.out) + at)[0] =
          p.op.output<half>(v0).to_bits() | (static_cast<std::uint32_t>(p.op.output<half>(v1).to_bits()) << 16);
      break;
    case OutputKind::bf16:
      reinterpret_cast<std::uint32_t*>(static_cast<bfloat16*>(p.out) + at)[0] =
          p.op.output<bfloat16>(v0).to_bits() | (static_cast<std::uint32_t>(p.op.output<bfloat16>(v1).to_bits()) << 16);
      break;
    case OutputKind::s8:
      reinterpret_cast<std::uint16_t*>(static_cast<std::int8_t*>(p.out) + at)[0] =
          static_cast<std::uint16_t>(static_cast<std::uint8_t>(p.op.output<std::int8_t>(v0)) |
                                     (static_cast<std::uint8_t>(p.op.output<std::int8_t>(v1)) << 8));
      break;
    case OutputKind::s32: break;
  }
}

// The accumulators of (row, col) and (row, col + 1), col even, from a GEMM tile's registers: finished and written,
// or (s32) stored raw; whatever lies outside [M, N] is skipped.
__device__ __forceinline__ void store_pair(const EpilogueParams& p, int row, int col, std::int32_t a0, std::int32_t a1,
                                           EpilogueFlags& flags) {
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
  const float sx = checked_x_scale(p.op, row, flags);
  // int32 -> float rounds to nearest even, as on the CPU.
  const float v0 = checked_value(p.op, static_cast<float>(a0), sx, col, flags);
  if (!both) {
    write_one(p, at, v0);
    return;
  }
  const float v1 = checked_value(p.op, static_cast<float>(a1), sx, col + 1, flags);
  if (p.pairs) {
    write_two(p, at, v0, v1);
  } else {
    write_one(p, at, v0);
    write_one(p, at + 1, v1);
  }
}

}  // namespace shrink::cuda::kernels::linear_int8
