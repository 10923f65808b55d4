// The sm_80 int8 GEMM kernel (nvcc only): mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 fed by ldmatrix from a
// multi-stage cp.async pipeline, the epilogue fused in registers (cuda/kernels/linear_int8_epilogue.cuh). Runs on every
// GPU from sm_80 on; the Hopper path is cuda/kernels/linear_int8_wgmma.cuh.
//
// x [M, K] is the row-major A of the mma ("row"), w [N, K] row-major is its column-major B ("col"): both are read
// along K, 16 bytes at a time, into tiles of 64-byte rows (cuda/kernels/linear_int8_layout.hpp). A CTA computes a BM ×
// BN tile of one K range (all of K, or one split); its warps form WarpsM × WarpsN, each owning a (BM / WarpsM) × (BN /
// WarpsN) block of m16n8 accumulators. Per k-tile of 64 bytes a warp does two k32 steps: ldmatrix.x4 brings one m16 ×
// k32 A fragment (matrices: rows 0-7 / 8-15 × bytes 0-15 / 16-31) or two n8 × k32 B fragments, then one mma per pair.
// The configurations (MmaLarge, MmaSmall) and the index arithmetic live in shrink/cuda/kernels/linear_int8_layout.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/linear_int8_epilogue.cuh"
#include "shrink/cuda/kernels/linear_int8_layout.hpp"
#include "shrink/cuda/kernels/linear_int8_tile.cuh"

namespace shrink::cuda::kernels::linear_int8 {

// What a GEMM kernel needs; epilogue.kind s32 with out the workspace's partial sums when K is split (blockIdx.z).
struct GemmParams {
  const std::int8_t* x = nullptr;
  std::int64_t ldx = 0;  // bytes between rows of x
  const std::int8_t* w = nullptr;
  std::int64_t ldw = 0;  // bytes between rows of w
  int m = 0;
  int n = 0;
  int k = 0;
  int tiles_m = 0;
  int tiles_n = 0;
  int k_tiles_per_split = 0;      // k-tiles of the kernel's BK per split
  std::int64_t split_stride = 0;  // int32 elements between the partial sums of consecutive splits
  EpilogueParams epilogue;
};

// The epilogue of split blockIdx.z: its own slice of the partial sums when K is split.
__device__ __forceinline__ EpilogueParams split_epilogue(const GemmParams& p) {
  EpilogueParams e = p.epilogue;
  if (e.kind == OutputKind::s32) e.out = static_cast<std::int32_t*>(e.out) + blockIdx.z * p.split_stride;
  return e;
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// c += a · b for one m16n8k32 int8 step (fragments in the PTX ISA's layouts).
__device__ __forceinline__ void mma_s8(std::int32_t (&c)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) gemm_int8_mma_kernel(GemmParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(128) std::uint8_t shared[];
  const TileCoord tile = grouped_tile(static_cast<int>(blockIdx.x), p.tiles_m, p.tiles_n);
  const int m0 = tile.m * C::kBM, n0 = tile.n * C::kBN;
  const KRange range = split_k_range((p.k + C::kBK - 1) / C::kBK, p.k_tiles_per_split, static_cast<int>(blockIdx.z));
  const int tiles = range.end - range.begin;
  const int thread = static_cast<int>(threadIdx.x), lane = thread % 32, warp = thread / 32;
  const int warp_m = warp / C::kWarpsN, warp_n = warp % C::kWarpsN;
  const std::uint32_t base = shared_address(shared);
  const std::int8_t* x_rows = p.x + static_cast<std::int64_t>(m0) * p.ldx;
  const std::int8_t* w_rows = p.w + static_cast<std::int64_t>(n0) * p.ldw;
  const int x_valid = p.m - m0 < C::kBM ? p.m - m0 : C::kBM;
  const int w_valid = p.n - n0 < C::kBN ? p.n - n0 : C::kBN;

  const auto load_stage = [&](int stage, int k_tile) {
    const std::uint32_t a = base + stage_offset<C>(stage);
    load_tile<C::kBM, C::kBK, C::kThreads>(a, x_rows, p.ldx, x_valid, k_tile * C::kBK, p.k, thread);
    load_tile<C::kBN, C::kBK, C::kThreads>(a + C::kTileBytesA, w_rows, p.ldw, w_valid, k_tile * C::kBK, p.k, thread);
  };

  std::int32_t acc[C::kFragsM][C::kFragsN][4];
#pragma unroll
  for (int i = 0; i < C::kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragsN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;

  // Prologue: tiles 0 .. Stages-2 in flight, one commit group each (empty groups past the end keep the count).
  using Ring = StageRing<C::kStages>;
#pragma unroll
  for (int s = 0; s < Ring::kPrologueTiles; ++s) {
    if (s < tiles) load_stage(Ring::stage_of(s), range.begin + s);
    cp_async_commit();
  }

  const int a_row = a_lane_row(warp_m * C::kWarpTileM, lane), a_chunk = a_lane_chunk(lane);
  const int b_row = b_lane_row(warp_n * C::kWarpTileN, lane), b_chunk = b_lane_chunk(lane);

  for (int t = 0; t < tiles; ++t) {
    cp_async_wait<Ring::kPendingAtWait>();  // this thread's copies of tile t have landed ...
    __syncthreads();                        // ... and everyone's; everyone is also done reading tile t - 1's stage
    const int ahead = Ring::tile_loaded_at(t);
    if (ahead < tiles) load_stage(Ring::stage_of(ahead), range.begin + ahead);  // into tile t - 1's stage
    cp_async_commit();

    const std::uint32_t a_tile = base + stage_offset<C>(Ring::stage_of(t));
    const std::uint32_t b_tile = a_tile + C::kTileBytesA;
#pragma unroll
    for (int kk = 0; kk < C::kBK / 32; ++kk) {
      std::uint32_t a[C::kFragsM][4];
      std::uint32_t b[C::kFragsN][2];
#pragma unroll
      for (int i = 0; i < C::kFragsM; ++i)
        ldmatrix_x4(a[i], a_tile + swizzled_offset<C::kBK>(a_row + 16 * i, 2 * kk + a_chunk));
#pragma unroll
      for (int j = 0; j < C::kFragsN / 2; ++j) {
        std::uint32_t r[4];
        ldmatrix_x4(r, b_tile + swizzled_offset<C::kBK>(b_row + 16 * j, 2 * kk + b_chunk));
        b[2 * j][0] = r[0];
        b[2 * j][1] = r[1];
        b[2 * j + 1][0] = r[2];
        b[2 * j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < C::kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < C::kFragsN; ++j) mma_s8(acc[i][j], a[i], b[j]);
    }
  }
  cp_async_wait<0>();

  // Accumulators c0, c1 and c2, c3 of an m16n8 tile are column pairs (accumulator_row / accumulator_col).
  const EpilogueParams e = split_epilogue(p);
  EpilogueFlags flags;
#pragma unroll
  for (int i = 0; i < C::kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragsN; ++j) {
      const int row = m0 + warp_m * C::kWarpTileM + 16 * i;
      const int col = n0 + warp_n * C::kWarpTileN + 8 * j;
      store_pair(e, accumulator_row(row, lane, 0), accumulator_col(col, lane, 0), acc[i][j][0], acc[i][j][1], flags);
      store_pair(e, accumulator_row(row, lane, 2), accumulator_col(col, lane, 2), acc[i][j][2], acc[i][j][3], flags);
    }
  flags.report(e.status);
#endif
}

}  // namespace shrink::cuda::kernels::linear_int8
