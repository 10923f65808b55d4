// Shared-memory tiles of the int8 GEMM kernels (nvcc only): the cp.async loader that fills a stage from a row-major
// int8 matrix, zero-filling what lies past M, N or K, and its PTX wrappers. The layouts, the chunk each copy moves and
// the tile scheduling are plain C++ in shrink/cuda/kernels/linear_int8_layout.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/linear_int8_layout.hpp"

namespace shrink::cuda::kernels::linear_int8 {

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16 bytes global → shared, bypassing L1; src_bytes 0 writes 16 zeros and reads nothing.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Copies rows [0, Rows) × bytes [k0, k0 + RowBytes) of a row-major int8 matrix starting at `rows_begin` (ld bytes
// between rows; `valid_rows` rows and `k` bytes per row exist) into the swizzled tile at shared address `tile`;
// chunks past either end are zero-filled (k is a multiple of 16, so a chunk is wholly in or out). Every thread of
// the block calls it with its index `thread`.
template <int Rows, int RowBytes, int Threads>
__device__ __forceinline__ void load_tile(std::uint32_t tile, const std::int8_t* rows_begin, std::int64_t ld,
                                          int valid_rows, int k0, int k, int thread) {
  constexpr int kChunksPerRow = RowBytes / 16;
  constexpr int kChunks = Rows * kChunksPerRow;
  static_assert(kChunks % Threads == 0, "every thread copies the same number of chunks");
#pragma unroll
  for (int i = thread; i < kChunks; i += Threads) {
    const TileCopy copy = tile_copy<RowBytes>(i, valid_rows, k0, k);
    // A valid address even when unread.
    const std::int8_t* src = copy.inside ? rows_begin + copy.row * ld + copy.byte : rows_begin;
    cp_async_16(tile + swizzled_offset<RowBytes>(copy.row, copy.chunk), src, copy.inside ? 16 : 0);
  }
}

}  // namespace shrink::cuda::kernels::linear_int8
