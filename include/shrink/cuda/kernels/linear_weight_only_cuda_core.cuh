// The CUDA-core path of the weight-only GEMM (nvcc only): float FMA, for very few activation rows (M <= 4).
//
// A block of 4 warps covers 16 output rows n and one K slice (gridDim.y) for up to MB activation rows (gridDim.z:
// blocks of MB rows). Each warp owns 4 rows; its lanes walk the slice in 16-byte chunks of each row (16 int8 or 32
// int4 weights, chunk c at lane c % 32: a warp reads 512 contiguous bytes of a row at once), two chunks a row ahead:
// 8 loads of 16 bytes in flight per lane. Weights become floats exactly with the magic-number trick
// (linear_weight_only_bits.hpp); activations are read as 16 bytes from the read-only cache (all warps of the device
// read the same few KiB) and widened exactly. int4 chunks lie inside one group (32 | 64 | group), so each chunk's sum
// is scaled once: acc += s[n, g] · Σ_chunk x · (q − zp[n, g]), the zero point inside the exact conversion (2^23 + u
// minus 2^23 + o). At the end a butterfly of shuffles adds the lanes, in a fixed order.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/linear_weight_only_common.cuh"
#include "shrink/cuda/kernels/linear_weight_only_bits.hpp"

namespace shrink::cuda::kernels::linear_weight_only {

inline constexpr int kCoreRowsPerWarp = 4;
inline constexpr int kCoreRowsPerBlock = kWarps * kCoreRowsPerWarp;
inline constexpr int kCoreChunksAhead = 2;  // chunks of each row loaded before any is used

// The 8 activations x[m, k .. k + 7] as floats (16 bytes).
template <class T>
__device__ __forceinline__ void load_activations8(const T* x, float (&out)[8]) {
  const Words4 v = load_cached16(x);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = Sixteen<T>::to_float2(v.w[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// The 8 weights of piece `piece` (k + 8 piece .. + 7) of a 16-byte chunk, as floats. int4: each nibble u ^ flip less
// the group's offset, magic_offset = 2^23 + o (float_magic_offset).
template <WeightKind Kind>
__device__ __forceinline__ void piece_weights(const Words4& chunk, int piece, std::uint32_t int4_flip,
                                              float magic_offset, float (&out)[8]) {
  if constexpr (Kind == WeightKind::int8) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::uint32_t flipped = flip_int8_signs(chunk.w[2 * piece + h]);
#pragma unroll
      for (int b = 0; b < 4; ++b) out[4 * h + b] = int8_byte_as_float(flipped, b);
    }
  } else {
    const std::uint32_t flipped = chunk.w[piece] ^ int4_flip;
#pragma unroll
    for (int e = 0; e < 8; ++e) out[e] = int4_element_minus_offset(flipped, e, magic_offset);
  }
}

template <class T, WeightKind Kind, int MB>
__global__ void __launch_bounds__(kThreads) cuda_core_kernel(Problem<T> p) {
  constexpr int kR = kCoreRowsPerWarp;
  constexpr int kChunkK = Kind == WeightKind::int8 ? 16 : 32;  // weights in 16 bytes
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int n0 = static_cast<int>(blockIdx.x) * kCoreRowsPerBlock + static_cast<int>(threadIdx.x / 32) * kR;
  const int slice = static_cast<int>(blockIdx.y);
  const int m0 = static_cast<int>(blockIdx.z) * MB;
  const std::int64_t k_begin = slice * p.k_slice;
  const std::int64_t length = p.k - k_begin < p.k_slice ? p.k - k_begin : p.k_slice;  // a multiple of 16 (int4: 64)
  const std::int64_t chunks = length / kChunkK;
  const std::int64_t row_bytes = Kind == WeightKind::int8 ? p.k : p.k / 2;
  const std::int64_t groups = Kind == WeightKind::int4 ? p.k / p.group_size : 0;
  Flags flags;

  float acc[kR][MB];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < MB; ++i) acc[r][i] = 0.0f;

  for (std::int64_t c0 = 0; c0 < chunks; c0 += 32 * kCoreChunksAhead) {
    Words4 raw[kCoreChunksAhead][kR];
    float scale[kCoreChunksAhead][kR];
    float magic_offset[kCoreChunksAhead][kR];  // int4: 2^23 + o of the chunk's group
#pragma unroll
    for (int u = 0; u < kCoreChunksAhead; ++u) {
      const std::int64_t c = c0 + 32 * u + lane;
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        const int n = n0 + r;
        const bool ok = c < chunks && n < p.n;
        const std::int64_t k = k_begin + c * kChunkK;
        raw[u][r] = ok ? load_streaming16(p.w + n * row_bytes + (Kind == WeightKind::int8 ? k : k / 2))
                       : Words4{{0u, 0u, 0u, 0u}};
        scale[u][r] = 0.0f;
        magic_offset[u][r] = kFloatMagicInt4;
        if (Kind == WeightKind::int4 && ok) {
          const std::int64_t param = n * groups + k / p.group_size;
          scale[u][r] = __ldg(p.scales + param);
          flags.epilogue.bad_scale |= !valid_scale(scale[u][r]);
          magic_offset[u][r] = float_magic_offset(int4_offset(p, param, flags.bad_zero_point));
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kCoreChunksAhead; ++u) {
      const std::int64_t c = c0 + 32 * u + lane;
      if (c >= chunks) continue;
      const std::int64_t k = k_begin + c * kChunkK;
      float part[kR][MB];  // int4: this chunk's sums, before its group scale
#pragma unroll
      for (int r = 0; r < kR; ++r)
#pragma unroll
        for (int i = 0; i < MB; ++i) part[r][i] = 0.0f;
#pragma unroll
      for (int piece = 0; piece < kChunkK / 8; ++piece) {
        float xs[MB][8];
#pragma unroll
        for (int i = 0; i < MB; ++i) {
          if (m0 + i < p.m) {
            load_activations8(p.x + static_cast<std::int64_t>(m0 + i) * p.k + k + 8 * piece, xs[i]);
          } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) xs[i][e] = 0.0f;
          }
        }
#pragma unroll
        for (int r = 0; r < kR; ++r) {
          float ws[8];
          piece_weights<Kind>(raw[u][r], piece, p.int4_flip, magic_offset[u][r], ws);
#pragma unroll
          for (int e = 0; e < 8; ++e)
#pragma unroll
            for (int i = 0; i < MB; ++i) {
              if (Kind == WeightKind::int4)
                part[r][i] = fmaf(xs[i][e], ws[e], part[r][i]);
              else
                acc[r][i] = fmaf(xs[i][e], ws[e], acc[r][i]);
            }
        }
      }
      if (Kind == WeightKind::int4) {
#pragma unroll
        for (int r = 0; r < kR; ++r)
#pragma unroll
          for (int i = 0; i < MB; ++i) acc[r][i] = fmaf(scale[u][r], part[r][i], acc[r][i]);
      }
    }
  }

  // Every lane holds a part of each sum: add them, all lanes taking part (nothing above returns early).
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int i = 0; i < MB; ++i)
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) acc[r][i] += __shfl_xor_sync(0xFFFFFFFFu, acc[r][i], offset);

  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int i = 0; i < MB; ++i)
        if (n0 + r < p.n && m0 + i < p.m) emit<T>(p, slice, m0 + i, n0 + r, acc[r][i], flags);
  }
  flags.report(p.status);
}

}  // namespace shrink::cuda::kernels::linear_weight_only
