// The tensor-core path of the weight-only GEMM (nvcc only): mma.sync m16n8k16 with fp16 / bf16 inputs and fp32
// accumulators, the activations as A (MT tiles of 16 rows: M <= 16 MT) and the dequantized weights as B.
//
// A block of 4 warps covers 64 output rows n and one K slice (gridDim.y); each warp owns 16 rows (two n8 tiles) and
// walks the slice in blocks of 64 k, with no barrier and no shared memory. In a block, thread t of each quad loads 16
// consecutive k of its row (16 bytes of int8 or 8 bytes of int4: 4 threads read 64 or 32 contiguous bytes of a row,
// 8 rows a warp) for the U blocks ahead (2 for int8, 4 for int4: 64 bytes in flight per thread), turns them into
// 16-bit pairs in registers (linear_weight_only_bits.hpp: exact, a few integer ops and one 16-bit fma per pair) and
// hands them to 4 mma steps in the order linear_weight_only_bits.hpp defines; each thread loads the 16 matching
// activations of its rows g and g + 8 (32 bytes each, from the read-only cache) and arranges them in the same order.
// int8: acc += x · q over the whole slice, s[n] in the output stage. int4: a block of 64 k lies inside one group, so
// its sums go to fresh accumulators and are scaled once: acc += s[n, g] · Σ_block x · (q − zp[n, g]), the zero point
// subtracted with the magic number (−(magic + o) for the thread's weight row, linear_weight_only_bits.hpp). Products
// are exact; sums are the tensor cores' fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/linear_weight_only_common.cuh"
#include "shrink/cuda/kernels/linear_weight_only_bits.hpp"

namespace shrink::cuda::kernels::linear_weight_only {

inline constexpr int kMmaTilesN = 2;  // n8 tiles per warp
inline constexpr int kMmaRowsPerWarp = 8 * kMmaTilesN;
inline constexpr int kMmaRowsPerBlock = kWarps * kMmaRowsPerWarp;

template <WeightKind Kind>
inline constexpr int kMmaBlocksAhead = Kind == WeightKind::int8 ? 2 : 4;

// The 16 activations x[row, k .. k + 15] as 8 pairs, or zeros for a row past M or a run past the slice.
template <class T>
__device__ __forceinline__ void load_activation_run(const Problem<T>& p, int row, std::int64_t k, bool run_ok,
                                                    std::uint32_t (&run)[8]) {
  if (row < p.m && run_ok) {
    const T* at = p.x + static_cast<std::int64_t>(row) * p.k + k;
    const Words4 a = load_cached16(at), b = load_cached16(at + 8);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      run[i] = a.w[i];
      run[4 + i] = b.w[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) run[i] = 0u;
  }
}

template <WeightKind Kind>
__device__ __forceinline__ std::uint32_t activation_pair(const std::uint32_t (&run)[8], int step, int which) {
  return Kind == WeightKind::int8 ? int8_activation_pair(run, step, which) : int4_activation_pair(run, step, which);
}

template <class T, WeightKind Kind, int MT>
__global__ void __launch_bounds__(kThreads) tensor_core_kernel(Problem<T> p) {
  constexpr int kU = kMmaBlocksAhead<Kind>;
  constexpr int kWords = Kind == WeightKind::int8 ? 4 : 2;  // 32-bit words of one thread's 16 weights
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;  // the quad (row of A, column of B) and the thread in it
  const int n_warp = static_cast<int>(blockIdx.x) * kMmaRowsPerBlock + static_cast<int>(threadIdx.x / 32) * kMmaRowsPerWarp;
  const int slice = static_cast<int>(blockIdx.y);
  const std::int64_t k_begin = slice * p.k_slice;
  const std::int64_t length = p.k - k_begin < p.k_slice ? p.k - k_begin : p.k_slice;  // a multiple of 16
  const std::int64_t blocks = (length + kBlockK - 1) / kBlockK;
  const std::int64_t row_bytes = Kind == WeightKind::int8 ? p.k : p.k / 2;
  const std::int64_t groups = Kind == WeightKind::int4 ? p.k / p.group_size : 0;
  Flags flags;

  float acc[MT][kMmaTilesN][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < kMmaTilesN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

  for (std::int64_t b0 = 0; b0 < blocks; b0 += kU) {
    std::uint32_t raw[kU][kMmaTilesN][kWords];
    float col_scale[kU][kMmaTilesN][2];  // int4: the scales of this thread's accumulator columns 2t, 2t + 1
    std::uint32_t minus_offset[kU][kMmaTilesN];  // int4: −(magic + o) of this thread's weight row n, both halves
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::int64_t kb = (b0 + u) * kBlockK;
      const bool block_ok = b0 + u < blocks;
      const bool run_ok = block_ok && kb + 16 * t < length;
#pragma unroll
      for (int j = 0; j < kMmaTilesN; ++j) {
        const int n = n_warp + 8 * j + g;
        const std::int64_t k = k_begin + kb + 16 * t;
        minus_offset[u][j] = Sixteen<T>::minus_offset_pair(8u);
        if (Kind == WeightKind::int8) {
          const Words4 w = run_ok && n < p.n ? load_streaming16(p.w + n * row_bytes + k) : Words4{{0u, 0u, 0u, 0u}};
#pragma unroll
          for (int i = 0; i < kWords; ++i) raw[u][j][i] = w.w[i];
        } else {
          const Words2 w = run_ok && n < p.n ? load_streaming8(p.w + n * row_bytes + k / 2) : Words2{{0u, 0u}};
#pragma unroll
          for (int i = 0; i < kWords; ++i) raw[u][j][i] = w.w[i];
          if (block_ok && n < p.n)  // the group of block kb, which lies inside one group
            minus_offset[u][j] = Sixteen<T>::minus_offset_pair(
                int4_offset(p, n * groups + (k_begin + kb) / p.group_size, flags.bad_zero_point));
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int column = n_warp + 8 * j + 2 * t + c;
            col_scale[u][j][c] = 0.0f;
            if (block_ok && column < p.n) {
              col_scale[u][j][c] = __ldg(p.scales + column * groups + (k_begin + kb) / p.group_size);
              flags.epilogue.bad_scale |= !valid_scale(col_scale[u][j][c]);
            }
          }
        }
      }
    }

#pragma unroll
    for (int u = 0; u < kU; ++u) {
      if (b0 + u >= blocks) break;  // the same for the whole warp
      const std::int64_t kb = (b0 + u) * kBlockK;
      const bool run_ok = kb + 16 * t < length;

      std::uint32_t b_frag[kMmaTilesN][4][2];  // [tile][step][B0, B1]
#pragma unroll
      for (int j = 0; j < kMmaTilesN; ++j) {
        std::uint32_t flipped[kWords];
#pragma unroll
        for (int i = 0; i < kWords; ++i)
          flipped[i] = Kind == WeightKind::int8 ? flip_int8_signs(raw[u][j][i]) : raw[u][j][i] ^ p.int4_flip;
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
          for (int which = 0; which < 2; ++which)
            b_frag[j][s][which] = Kind == WeightKind::int8
                                      ? Sixteen<T>::int8_weights(flipped, s, which)
                                      : Sixteen<T>::int4_weights(flipped, s, which, minus_offset[u][j]);
      }

#pragma unroll
      for (int i = 0; i < MT; ++i) {
        std::uint32_t upper[8], lower[8];  // rows 16 i + g and 16 i + g + 8
        load_activation_run(p, 16 * i + g, k_begin + kb + 16 * t, run_ok, upper);
        load_activation_run(p, 16 * i + g + 8, k_begin + kb + 16 * t, run_ok, lower);
        float block_sum[kMmaTilesN][4];
#pragma unroll
        for (int j = 0; j < kMmaTilesN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) block_sum[j][e] = 0.0f;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const std::uint32_t a[4] = {activation_pair<Kind>(upper, s, 0), activation_pair<Kind>(lower, s, 0),
                                      activation_pair<Kind>(upper, s, 1), activation_pair<Kind>(lower, s, 1)};
#pragma unroll
          for (int j = 0; j < kMmaTilesN; ++j) {
            if constexpr (Kind == WeightKind::int8)
              Sixteen<T>::mma(acc[i][j], a, b_frag[j][s][0], b_frag[j][s][1]);
            else
              Sixteen<T>::mma(block_sum[j], a, b_frag[j][s][0], b_frag[j][s][1]);
          }
        }
        if constexpr (Kind == WeightKind::int4) {
#pragma unroll
          for (int j = 0; j < kMmaTilesN; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = fmaf(col_scale[u][j][e % 2], block_sum[j][e], acc[i][j][e]);
        }
      }
    }
  }

  // acc[i][j][2h + c] is C[16 i + g + 8 h][8 j + 2 t + c] of the warp's rows.
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < kMmaTilesN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = 16 * i + g + 8 * (e / 2), n = n_warp + 8 * j + 2 * t + e % 2;
        if (m < p.m && n < p.n) emit<T>(p, slice, m, n, acc[i][j][e], flags);
      }
  flags.report(p.status);
}

}  // namespace shrink::cuda::kernels::linear_weight_only
