// The Hopper int8 GEMM kernel (nvcc only, compiled for sm_90a alone: cuda/linear_int8.sm90a.cu): wgmma.mma_async
// m64n128k32 s32 += s8 · s8 with both operands read by the tensor cores straight from shared memory, fed by the same
// cp.async multi-stage pipeline as the sm_80 kernel, the epilogue fused in registers.
//
// CTA: 2 warpgroups (256 threads), a 128 × 128 output tile; warpgroup g owns rows 64g .. 64g + 63 and all 128
// columns (64 int32 accumulators a thread). Stage: x tile 128 rows × 128 bytes of K, w tile 128 rows × 128 bytes,
// both K-major with the 128-byte swizzle (cuda/kernels/linear_int8_layout.hpp), 1024-byte aligned; 3 stages (96 KiB),
// two CTAs per SM. Per k-tile each warpgroup issues 4 wgmma (k32 each), advancing both descriptors' start address by 32
// bytes inside the swizzle atom (the hardware applies the XOR to the final address, so the tile base stays aligned).
//
// Shared memory descriptor (PTX ISA, "matrix descriptor"): bits 0-13 start address >> 4; 16-29 leading byte offset
// >> 4 (unused by K-major swizzled layouts; 1 as CUTLASS sets it); 32-45 stride byte offset >> 4 = 1024 >> 4 (from
// one group of 8 rows to the next); 49-51 base offset 0 (tiles 1024-aligned); 62-63 layout type 1 = 128-byte swizzle.
//
// Ordering, per k-tile t: cp.async.wait_group (this thread's copies of tile t landed), fence.proxy.async.shared::cta
// (those generic-proxy writes ordered before async-proxy reads), __syncthreads (everyone's), then the copies of tile
// t + 2 into the stage tile t − 1 used (both warpgroups finished reading it: each waited for its wgmma before the
// barrier), then wgmma.fence, 4 × wgmma, commit_group, wait_group 0. Accumulator layout of m64nNk32 (per warp w of a
// warpgroup, rows 16w .. 16w + 15): d[4j + {0, 1}] at (row g, columns 8j + 2q + {0, 1}), d[4j + {2, 3}] at row g + 8,
// g = lane / 4, q = lane % 4: the m16n8 layout of the sm_80 kernel repeated along N, so the epilogue is shared.
// WgmmaConfig, the descriptor and the index arithmetic live in shrink/cuda/kernels/linear_int8_layout.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/linear_int8_epilogue.cuh"
#include "shrink/cuda/kernels/linear_int8_layout.hpp"
#include "shrink/cuda/kernels/linear_int8_mma.cuh"
#include "shrink/cuda/kernels/linear_int8_tile.cuh"

namespace shrink::cuda::kernels::linear_int8 {

__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads or writes of the accumulators across the wgmma fences and waits.
__device__ __forceinline__ void fence_accumulators(std::int32_t (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// d += a · b, m64n128k32, a and b K-major in shared memory (descriptors); scale-d = 1: accumulate.
__device__ __forceinline__ void wgmma_m64n128k32_s8(std::int32_t (&d)[64], std::uint64_t a, std::uint64_t b) {
  asm volatile(
      "{\n"
      ".reg .pred accumulate;\n"
      "setp.ne.b32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, accumulate;\n"
      "}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]),
        "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]),
        "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]),
        "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]),
        "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]),
        "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]),
        "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]),
        "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
      : "l"(a), "l"(b), "r"(1)
      : "memory");
}

template <class C = WgmmaConfig>
__global__ void __launch_bounds__(C::kThreads, 2) gemm_int8_wgmma_kernel(GemmParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) std::uint8_t shared[];
  const std::uint32_t base = align_1024(shared_address(shared));  // swizzle atoms need 1024-byte alignment
  const TileCoord tile = grouped_tile(static_cast<int>(blockIdx.x), p.tiles_m, p.tiles_n);
  const int m0 = tile.m * C::kBM, n0 = tile.n * C::kBN;
  const KRange range = split_k_range((p.k + C::kBK - 1) / C::kBK, p.k_tiles_per_split, static_cast<int>(blockIdx.z));
  const int tiles = range.end - range.begin;
  const int thread = static_cast<int>(threadIdx.x), lane = thread % 32;
  const int warpgroup = thread / 128, warp_in_group = (thread / 32) % 4;
  const std::int8_t* x_rows = p.x + static_cast<std::int64_t>(m0) * p.ldx;
  const std::int8_t* w_rows = p.w + static_cast<std::int64_t>(n0) * p.ldw;
  const int x_valid = p.m - m0 < C::kBM ? p.m - m0 : C::kBM;
  const int w_valid = p.n - n0 < C::kBN ? p.n - n0 : C::kBN;

  const auto load_stage = [&](int stage, int k_tile) {
    const std::uint32_t a = base + stage_offset<C>(stage);
    load_tile<C::kBM, C::kBK, C::kThreads>(a, x_rows, p.ldx, x_valid, k_tile * C::kBK, p.k, thread);
    load_tile<C::kBN, C::kBK, C::kThreads>(a + C::kTileBytesA, w_rows, p.ldw, w_valid, k_tile * C::kBK, p.k, thread);
  };

  std::int32_t acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0;

  using Ring = StageRing<C::kStages>;
#pragma unroll
  for (int s = 0; s < Ring::kPrologueTiles; ++s) {
    if (s < tiles) load_stage(Ring::stage_of(s), range.begin + s);
    cp_async_commit();
  }

  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<Ring::kPendingAtWait>();
    fence_proxy_async_shared();
    __syncthreads();
    const int ahead = Ring::tile_loaded_at(t);
    if (ahead < tiles) load_stage(Ring::stage_of(ahead), range.begin + ahead);
    cp_async_commit();

    const std::uint32_t stage = base + stage_offset<C>(Ring::stage_of(t));
    const std::uint64_t a = wgmma_descriptor(stage + wgmma_a_offset<C>(warpgroup));
    const std::uint64_t b = wgmma_descriptor(stage + wgmma_b_offset<C>());
    fence_accumulators(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < C::kBK / 32; ++kk) wgmma_m64n128k32_s8(acc, descriptor_at_k(a, kk), descriptor_at_k(b, kk));
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(acc);
  }
  cp_async_wait<0>();

  // d[4j], d[4j + 1] and d[4j + 2], d[4j + 3] are column pairs (wgmma_accumulator_row / wgmma_accumulator_col).
  const EpilogueParams e = split_epilogue(p);
  const int row = m0 + warpgroup * 64;
  EpilogueFlags flags;
#pragma unroll
  for (int j = 0; j < C::kBN / 8; ++j) {
    store_pair(e, wgmma_accumulator_row(row, warp_in_group, lane, 4 * j), wgmma_accumulator_col(n0, lane, 4 * j),
               acc[4 * j], acc[4 * j + 1], flags);
    store_pair(e, wgmma_accumulator_row(row, warp_in_group, lane, 4 * j + 2),
               wgmma_accumulator_col(n0, lane, 4 * j + 2), acc[4 * j + 2], acc[4 * j + 3], flags);
  }
  flags.report(e.status);
#endif
}

}  // namespace shrink::cuda::kernels::linear_int8
