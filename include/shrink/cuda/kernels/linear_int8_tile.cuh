// Shared-memory tiles of the int8 GEMM kernels (nvcc only): the swizzled layouts, and the cp.async loader that fills
// a stage from a row-major int8 matrix, zero-filling what lies past M, N or K.
//
// A tile holds `Rows` rows of RowBytes bytes of K (64 for the mma.sync kernel, 128 for wgmma), in 16-byte chunks.
// Chunk c of row r lives at byte r · RowBytes + 16 · (c ^ f(r)):
//   RowBytes 128: f(r) = r % 8, the hardware's 128-byte swizzle that wgmma descriptors name (layout type 1): the
//                 XOR of address bits [4:6] with bits [7:9], so tiles start on 1024-byte boundaries;
//   RowBytes 64:  f(r) = (r / 2) % 4: rows r and r + 1 share a 128-byte line, and the 8 rows one ldmatrix phase
//                 reads (same logical chunk) land in 8 different 16-byte bank groups: no bank conflicts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace shrink::cuda::kernels::linear_int8 {

template <int RowBytes>
__device__ __forceinline__ std::uint32_t swizzled_offset(int row, int chunk) {
  static_assert(RowBytes == 64 || RowBytes == 128, "tiles have 64- or 128-byte rows");
  if constexpr (RowBytes == 128) return static_cast<std::uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
  else return static_cast<std::uint32_t>(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

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
    const int r = i / kChunksPerRow, c = i % kChunksPerRow;
    const int byte = k0 + 16 * c;
    const bool inside = r < valid_rows && byte < k;
    const std::int8_t* src = inside ? rows_begin + r * ld + byte : rows_begin;  // a valid address even when unread
    cp_async_16(tile + swizzled_offset<RowBytes>(r, c), src, inside ? 16 : 0);
  }
}

// The k-tiles [begin, end) of split `split` when `tiles` k-tiles are cut into pieces of `per_split` tiles.
struct KRange {
  int begin;
  int end;
};

__device__ __forceinline__ KRange split_k_range(int tiles, int per_split, int split) {
  const int begin = split * per_split;
  const int end = begin + per_split < tiles ? begin + per_split : tiles;
  return KRange{begin, end};
}

// Tile (m, n) of a linear block index, in groups of kGroup tile rows so that CTAs running together share rows of x
// and columns of w in L2 (the first kGroup tile rows sweep the columns together, then the next kGroup).
struct TileCoord {
  int m;
  int n;
};

__device__ __forceinline__ TileCoord grouped_tile(int linear, int tiles_m, int tiles_n) {
  constexpr int kGroup = 8;
  const int per_group = kGroup * tiles_n;
  const int group = linear / per_group;
  const int first_m = group * kGroup;
  const int group_rows = tiles_m - first_m < kGroup ? tiles_m - first_m : kGroup;
  const int within = linear % per_group;
  return TileCoord{first_m + within % group_rows, within / group_rows};
}

}  // namespace shrink::cuda::kernels::linear_int8
