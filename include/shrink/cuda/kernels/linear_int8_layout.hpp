// Index arithmetic of the int8 GEMM kernels (linear_int8_mma.cuh, linear_int8_wgmma.cuh), host and device: tile
// configurations, the swizzled shared-memory tiles and the chunk each cp.async copies, the rows ldmatrix lanes address,
// where an accumulator lands, the wgmma shared-memory descriptor and the stage ring of the cp.async pipeline. Plain
// C++ so that a host test can replay the kernels' data movement with the PTX ISA's rules
// (tests/linear/test_int8_layout_cuda.cpp).
//
// A tile holds `Rows` rows of RowBytes bytes of K (64 for the mma.sync kernel, 128 for wgmma), in 16-byte chunks.
// Chunk c of row r lives at byte r · RowBytes + 16 · (c ^ f(r)):
//   RowBytes 128: f(r) = r % 8, the hardware's 128-byte swizzle that wgmma descriptors name (layout type 1): the
//                 XOR of address bits [4:6] with bits [7:9], so tiles start on 1024-byte boundaries;
//   RowBytes 64:  f(r) = (r / 2) % 4: rows r and r + 1 share a 128-byte line, and the 8 rows one ldmatrix phase
//                 reads (same logical chunk) land in 8 different 16-byte bank groups: no bank conflicts.
#pragma once

#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/cuda/kernels/common/stage_ring.hpp"

namespace shrink::cuda::kernels::linear_int8 {

// ---------------------------------------------------------------------------------------------------------------
// Tile configurations

template <int BM, int BN, int WarpsM, int WarpsN, int Stages, int MinBlocks>
struct MmaConfig {
  static constexpr int kBM = BM;
  static constexpr int kBN = BN;
  static constexpr int kBK = 64;  // bytes (= int8 elements) of K per stage
  static constexpr int kWarpsM = WarpsM;
  static constexpr int kWarpsN = WarpsN;
  static constexpr int kThreads = WarpsM * WarpsN * 32;
  static constexpr int kStages = Stages;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr int kWarpTileM = BM / WarpsM;
  static constexpr int kWarpTileN = BN / WarpsN;
  static constexpr int kFragsM = kWarpTileM / 16;
  static constexpr int kFragsN = kWarpTileN / 8;
  static constexpr int kTileBytesA = BM * kBK;
  static constexpr int kStageBytes = (BM + BN) * kBK;
  static constexpr int kSharedBytes = Stages * kStageBytes;
  static_assert(kWarpTileM % 16 == 0 && kWarpTileN % 16 == 0, "warp tiles of m16 rows and pairs of n8 columns");
  static_assert(Stages >= 2, "a pipeline needs two stages at least");
};

// 128 × 128 tiles, 8 warps of 64 × 32, 4 stages of 16 KiB: the large-M configuration (two CTAs per SM).
using MmaLarge = MmaConfig<128, 128, 2, 4, 4, 2>;
// 32 × 64 tiles, 4 warps of 32 × 16, 4 stages of 6 KiB: M ≤ 64, where many small tiles (and K splits) keep every SM
// streaming the weight.
using MmaSmall = MmaConfig<32, 64, 1, 4, 4, 4>;

// The Hopper kernel: 2 warpgroups, 128 × 128 tiles, 3 stages of 32 KiB of 128-byte swizzled rows.
struct WgmmaConfig {
  static constexpr int kBM = 128;
  static constexpr int kBN = 128;
  static constexpr int kBK = 128;  // bytes of K per stage: one 128-byte swizzle row
  static constexpr int kThreads = 256;
  static constexpr int kStages = 3;
  static constexpr int kTileBytesA = kBM * kBK;
  static constexpr int kStageBytes = (kBM + kBN) * kBK;
  static constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + room to align the base to 1024 bytes
};

// ---------------------------------------------------------------------------------------------------------------
// Shared-memory tiles and the copies that fill them

template <int RowBytes>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t swizzled_offset(int row, int chunk) {
  static_assert(RowBytes == 64 || RowBytes == 128, "tiles have 64- or 128-byte rows");
  if constexpr (RowBytes == 128)
    return static_cast<std::uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
  else
    return static_cast<std::uint32_t>(row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4));
}

// Copy i of a tile: row i / (RowBytes / 16), chunk i % (RowBytes / 16), which holds bytes [byte, byte + 16) of K of
// the row. The kernel copies source row · ld + byte (bytes from the tile's first source row) to swizzled_offset(row,
// chunk) when `inside`, and writes 16 zeros otherwise.
struct TileCopy {
  int row;
  int chunk;
  int byte;
  bool inside;  // row < valid_rows and byte < k: k is a multiple of 16, so a chunk is wholly in or out
};

template <int RowBytes>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE TileCopy tile_copy(int i, int valid_rows, int k0, int k) {
  constexpr int kChunksPerRow = RowBytes / 16;
  const int r = i / kChunksPerRow, c = i % kChunksPerRow;
  const int byte = k0 + 16 * c;
  return TileCopy{r, c, byte, r < valid_rows && byte < k};
}

// Bytes from the first stage's start to stage `stage`.
template <class C>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t stage_offset(int stage) {
  return static_cast<std::uint32_t>(stage * C::kStageBytes);
}

// The k-tiles [begin, end) of split `split` when `tiles` k-tiles are cut into pieces of `per_split` tiles.
struct KRange {
  int begin;
  int end;
};

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE KRange split_k_range(int tiles, int per_split, int split) {
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

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE TileCoord grouped_tile(int linear, int tiles_m, int tiles_n) {
  constexpr int kGroup = 8;
  const int per_group = kGroup * tiles_n;
  const int group = linear / per_group;
  const int first_m = group * kGroup;
  const int group_rows = tiles_m - first_m < kGroup ? tiles_m - first_m : kGroup;
  const int within = linear % per_group;
  return TileCoord{first_m + within % group_rows, within / group_rows};
}

// The cp.async stage ring of both kernels: shrink/cuda/kernels/common/stage_ring.hpp.
using kernels::StageRing;

// ---------------------------------------------------------------------------------------------------------------
// mma.sync m16n8k32: ldmatrix lanes and accumulators (PTX ISA fragments; the test states them independently)

// Each function takes the first row (or column) of its fragment, `first`, so that the kernels add in their order.
// ldmatrix.x4 of an m16 × k32 A fragment: lane L addresses row (L % 8) + 8 · ((L / 8) % 2), chunk L / 16 (of the
// k32 step), so the matrices are rows 0-7 / 8-15 × bytes 0-15 / 16-31 in register order a0 .. a3.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int a_lane_row(int first, int lane) {
  return first + (lane & 7) + ((lane >> 3) & 1) * 8;
}
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int a_lane_chunk(int lane) { return lane >> 4; }
// ldmatrix.x4 of two n8 × k32 B fragments: lane L addresses row (L % 8) + 8 · (L / 16), chunk (L / 8) % 2: registers
// 0, 1 are b0, b1 of the first n8 tile, 2, 3 those of the second.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int b_lane_row(int first, int lane) {
  return first + (lane & 7) + (lane >> 4) * 8;
}
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int b_lane_chunk(int lane) { return (lane >> 3) & 1; }

// Accumulator r of lane in an m16n8 tile: row lane / 4 + 8 · (r / 2), column 2 · (lane % 4) + r % 2.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int accumulator_row(int first, int lane, int r) {
  return first + (lane >> 2) + 8 * (r >> 1);
}
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int accumulator_col(int first, int lane, int r) {
  return first + 2 * (lane & 3) + (r & 1);
}

// ---------------------------------------------------------------------------------------------------------------
// wgmma m64nNk32: descriptors and accumulators

// Shared-memory matrix descriptor (PTX ISA, "matrix descriptor"): bits 0-13 start address >> 4 (of its low 18 bits),
// 16-29 leading byte offset >> 4, 32-45 stride byte offset >> 4, 49-51 base offset 0, 62-63 layout type.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint64_t matrix_descriptor(std::uint32_t start_address,
                                                                       std::uint32_t leading_byte_offset,
                                                                       std::uint32_t stride_byte_offset,
                                                                       std::uint32_t layout_type) {
  return static_cast<std::uint64_t>((start_address & 0x3FFFFu) >> 4) |
         (static_cast<std::uint64_t>((leading_byte_offset >> 4) & 0x3FFFu) << 16) |
         (static_cast<std::uint64_t>((stride_byte_offset >> 4) & 0x3FFFu) << 32) |
         (static_cast<std::uint64_t>(layout_type & 3u) << 62);
}

inline constexpr std::uint32_t kLayoutSwizzle128 = 1;  // layout type of the 128-byte swizzle

// A K-major tile of 128-byte swizzled rows: LBO unused by K-major swizzled layouts (16, as CUTLASS sets it), SBO 1024
// bytes from one group of 8 rows to the next. The tile must start on a 1024-byte boundary (base offset 0).
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint64_t wgmma_descriptor(std::uint32_t shared_address) {
  return matrix_descriptor(shared_address, 16, 1024, kLayoutSwizzle128);
}

// The descriptor of k32 step kk of a 128-byte row: start + 32 · kk bytes, inside the swizzle atom (the hardware
// applies the XOR to the final address, so the base offset stays 0).
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint64_t descriptor_at_k(std::uint64_t descriptor, int kk) {
  return descriptor + static_cast<std::uint64_t>(2 * kk);  // 32 bytes in the start address field's 16-byte units
}

// The first shared-memory address at or above `address` that a swizzle atom may start at.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t align_1024(std::uint32_t address) {
  return (address + 1023u) & ~1023u;
}

// Bytes from a stage's start to warpgroup g's 64 rows of A, and to B.
template <class C>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t wgmma_a_offset(int warpgroup) {
  return static_cast<std::uint32_t>(warpgroup * 64 * C::kBK);
}
template <class C>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t wgmma_b_offset() {
  return static_cast<std::uint32_t>(C::kTileBytesA);
}

// Accumulator d[i] of a lane of warp w of a warpgroup, m64nNk32: row 16 w + lane / 4 + 8 · ((i / 2) % 2), column
// 8 · (i / 4) + 2 · (lane % 4) + i % 2 — the m16n8 layout repeated along N. `first`: the warpgroup's first row or
// column.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int wgmma_accumulator_row(int first, int warp_in_group, int lane, int i) {
  return first + warp_in_group * 16 + (lane >> 2) + 8 * ((i >> 1) & 1);
}
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE int wgmma_accumulator_col(int first, int lane, int i) {
  return first + 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
}

}  // namespace shrink::cuda::kernels::linear_int8
