// Device code of the 2:4 sparse GEMM (nvcc only; host API in shrink/linear/nm_cuda.hpp): one kernel template,
// Yᵀ = W · Xᵀ on mma.sp::ordered_metadata over a cp.async pipeline, with the host API's epilogue fused. The index
// arithmetic (tiles, stage layout, fragment lanes, operand roles) lives in shrink/cuda/kernels/linear_nm_layout.hpp.
//
// Per block: BlockW rows of W x BlockX rows of X, a loop over stages of 2 k-steps. Each stage copies, 16 bytes at a
// time with cp.async, the block's compressed W values [BlockW][64 bytes], X [BlockX][128 bytes] (both XOR-swizzled)
// and the metadata words of its 16-row tiles as stored; rows of W or X past the matrix are zero-filled (source size
// 0), metadata past the padded rows gets the padding nibble 0x4, and a k-step past K is not issued. Each warp then
// runs, per k-step, ldmatrix.x4 for its A tiles and B tiles, one or two 32-bit shared loads of metadata per A tile, and
// kMmaW x kMmaX mma.sp. The epilogue writes each accumulator to out[m, n] (transposed back), scaled, biased,
// activated and converted.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/epilogue.cuh"
#include "shrink/cuda/kernels/linear_nm_layout.hpp"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/kernels/common/stage_ring.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels::linear_nm {

// ---------------------------------------------------------------------------------------------------------------
// PTX wrappers

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global -> shared without waiting; when !valid nothing is read and the 16 bytes become zeros.
__device__ __forceinline__ void copy_16_async(std::uint32_t destination, const void* source, bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source), "r"(source_bytes)
               : "memory");
}

__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most `Pending` committed groups of this thread are still in flight.
template <int Pending>
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ void load_matrices_x4(std::uint32_t (&r)[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d += A(sparse, 16 x 32) · B(32 x 8), float accumulation; metadata selector 0.
__device__ __forceinline__ void mma_sp(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[4],
                                       std::uint32_t e, half) {
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
}

__device__ __forceinline__ void mma_sp(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[4],
                                       std::uint32_t e, bfloat16) {
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
}

// d += A(sparse, 16 x 64) · B(64 x 8), exact int32 accumulation (wraps on overflow: the host bounds K).
__device__ __forceinline__ void mma_sp(int (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[4],
                                       std::uint32_t e, std::int8_t) {
  asm volatile(
      "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0x0;\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
}

// ---------------------------------------------------------------------------------------------------------------
// Epilogue

template <class T, class Out>
struct Params {
  const T* x;                     // [m, k]
  const T* values;                // [n, k / 2]
  const std::uint32_t* metadata;  // [ceil(n / 16)][k / tile_k][words of a tile]
  EpilogueOp op;                  // int8: x_scales [m] or [1] and w_scales [n] or [1]; 16-bit: no scales
  Out* out;                       // [m, n]
  std::int64_t m, n, k;
  int* status;
  Int8Metadata int8_metadata;  // int8: which lane holds which metadata (linear_nm_layout.hpp); 16-bit ignores it
};

// out[m, n] = act(acc · (sx[m] · sw[n]) + bias[n]) in Out: the epilogue operation, checked as it reads.
template <class T, class Out, class Accumulator>
__device__ __forceinline__ void finish(const Params<T, Out>& p, std::int64_t m, std::int64_t n, Accumulator acc,
                                       EpilogueFlags& flags) {
  // int32 -> float rounds to nearest even, as on the CPU.
  p.out[m * p.n + n] = checked_output<Out>(p.op, static_cast<float>(acc), m, n, flags);
}

// ---------------------------------------------------------------------------------------------------------------
// The kernel

template <class T, class Out, class Config>
__global__ void __launch_bounds__(Config::kThreads) gemm_sparse24_kernel(const Params<T, Out> p) {
  using Accumulator = typename Operand<T>::Accumulator;
  constexpr int kThreads = Config::kThreads;
  constexpr int kStages = Config::kStages;
  constexpr int kStageBytes = Config::template stage_bytes<T>();
  constexpr int kMetadataCopies = Config::kRowTiles * metadata_copies_per_tile<T>();

  extern __shared__ __align__(16) unsigned char shared[];

  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warp_w = warp % Config::kWarpsW, warp_x = warp / Config::kWarpsW;
  const BlockTiles tiles = block_tiles(blockIdx.x, (p.n + Config::kBlockW - 1) / Config::kBlockW,
                                       (p.m + Config::kBlockX - 1) / Config::kBlockX);
  CopyShape shape;
  shape.m = p.m;
  shape.n = p.n;
  shape.m0 = tiles.x * Config::kBlockX;
  shape.n0 = tiles.w * Config::kBlockW;
  shape.k_steps = static_cast<int>(p.k / Operand<T>::kTileK);  // K is a multiple of tile_k (checked on the host)
  shape.row_bytes_w = p.k / 2 * static_cast<std::int64_t>(sizeof(T));
  shape.row_bytes_x = p.k * static_cast<std::int64_t>(sizeof(T));
  const int stage_count = (shape.k_steps + Config::kStepsPerStage - 1) / Config::kStepsPerStage;
  const auto* values = reinterpret_cast<const unsigned char*>(p.values);
  const auto* x = reinterpret_cast<const unsigned char*>(p.x);
  const auto* metadata = reinterpret_cast<const unsigned char*>(p.metadata);

  // Copies stage `s` (k-steps 2s, 2s + 1) into buffer `buffer`. An invalid copy reads nothing (source size 0, the
  // array's start as a harmless address) and zero-fills; invalid metadata becomes padding nibbles instead.
  auto load_stage = [&](int buffer, int s) {
    unsigned char* base = shared + buffer * kStageBytes;
    const std::uint32_t base_address = shared_address(base);
    for (int c = static_cast<int>(threadIdx.x); c < Config::kBlockW * 4; c += kThreads) {
      const StageCopy copy = w_copy<Config>(c, s, shape);
      copy_16_async(base_address + copy.destination, values + (copy.valid ? copy.source : 0), copy.valid);
    }
    for (int c = static_cast<int>(threadIdx.x); c < Config::kBlockX * 8; c += kThreads) {
      const StageCopy copy = x_copy<Config>(c, s, shape);
      copy_16_async(base_address + copy.destination, x + (copy.valid ? copy.source : 0), copy.valid);
    }
    for (int c = static_cast<int>(threadIdx.x); c < kMetadataCopies; c += kThreads) {
      const StageCopy copy = metadata_copy<Config, T>(c, s, shape);
      if (copy.valid)
        copy_16_async(base_address + copy.destination, metadata + copy.source, true);
      else
        *reinterpret_cast<uint4*>(base + copy.destination) =
            make_uint4(0x44444444u, 0x44444444u, 0x44444444u, 0x44444444u);
    }
  };

  Accumulator acc[Config::kMmaW][Config::kMmaX][4];
#pragma unroll
  for (int i = 0; i < Config::kMmaW; ++i) {
#pragma unroll
    for (int j = 0; j < Config::kMmaX; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = Accumulator(0);
    }
  }

  // The stage ring (shrink/cuda/kernels/common/stage_ring.hpp). Prologue: stages 0 .. kStages - 2 in flight; one
  // commit group per stage, empty ones too, so that the count of groups still pending at stage s is always
  // kStages - 2.
  using Ring = StageRing<kStages>;
#pragma unroll
  for (int s = 0; s < Ring::kPrologueTiles; ++s) {
    if (s < stage_count) load_stage(Ring::stage_of(s), s);
    commit_copies();
  }

  for (int s = 0; s < stage_count; ++s) {
    wait_copies<Ring::kPendingAtWait>();  // this thread's copies of stage s have landed
    // Everyone's copies (and padding stores) of stage s are visible, and every warp is done with the buffer the next
    // load overwrites: it held stage s - 1.
    __syncthreads();
    const int ahead = Ring::tile_loaded_at(s);
    if (ahead < stage_count) load_stage(Ring::stage_of(ahead), ahead);
    commit_copies();

    const unsigned char* base = shared + Ring::stage_of(s) * kStageBytes;
    const std::uint32_t base_address = shared_address(base);
    const auto* stage_metadata = reinterpret_cast<const std::uint32_t*>(base + Config::kOffsetMetadata);
#pragma unroll
    for (int h = 0; h < Config::kStepsPerStage; ++h) {
      if (2 * s + h >= shape.k_steps) break;  // the same for the whole block
      std::uint32_t a[Config::kMmaW][4], e[Config::kMmaW], b[Config::kMmaX][4];
#pragma unroll
      for (int i = 0; i < Config::kMmaW; ++i) {
        const int first_row = warp_w * Config::kWarpW + i * 16;
        load_matrices_x4(a[i], base_address + w_chunk_offset(first_row + a_lane_row(lane), a_lane_chunk(h, lane)));
        e[i] = Operand<T>::metadata_register(stage_metadata + metadata_step_offset<T>(first_row / 16, h), lane,
                                             p.int8_metadata);
      }
#pragma unroll
      for (int j = 0; j < Config::kMmaX; ++j) {
        const int first_row = warp_x * Config::kWarpX + j * 8;
        load_matrices_x4(b[j], base_address + Config::kOffsetX +
                                   x_chunk_offset(first_row + b_lane_row(lane), b_lane_chunk(h, lane)));
      }
#pragma unroll
      for (int i = 0; i < Config::kMmaW; ++i)
#pragma unroll
        for (int j = 0; j < Config::kMmaX; ++j) mma_sp(acc[i][j], a[i], b[j], e[i], T{});
    }
  }
  wait_copies<0>();  // only empty groups can remain; leave none behind

  EpilogueFlags flags;
#pragma unroll
  for (int i = 0; i < Config::kMmaW; ++i)
#pragma unroll
    for (int j = 0; j < Config::kMmaX; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const std::int64_t n = shape.n0 + warp_w * Config::kWarpW + i * 16 + accumulator_w_row(lane, r);
        const std::int64_t m = shape.m0 + warp_x * Config::kWarpX + j * 8 + accumulator_x_row(lane, r);
        if (n < p.n && m < p.m) finish(p, m, n, acc[i][j][r], flags);
      }
  flags.report(p.status);
}

// Launches gemm_sparse24_kernel with tile Config on `stream`. Above 48 KiB of shared memory the kernel must opt in,
// per device, so the attribute is set at every launch (a host call, negligible against such a kernel).
template <class T, class Out, class Config>
void launch(const Params<T, Out>& p, cudaStream_t stream) {
  constexpr int kShared = Config::template shared_bytes<T>();
  if constexpr (kShared > 48 * 1024)
    SHRINK_CUDA_CHECK(cudaFuncSetAttribute(gemm_sparse24_kernel<T, Out, Config>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const auto blocks = static_cast<unsigned>(grid_size<Config>(p.m, p.n));
  gemm_sparse24_kernel<T, Out, Config><<<blocks, Config::kThreads, kShared, stream>>>(p);
  SHRINK_CUDA_CHECK_LAUNCH(gemm_sparse24_kernel);
}

}  // namespace shrink::cuda::kernels::linear_nm
