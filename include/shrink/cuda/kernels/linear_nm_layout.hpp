// Index arithmetic of the 2:4 sparse GEMM kernel (shrink/cuda/kernels/linear_nm.cuh), host and device: block tiles, the
// shared-memory stage layout, which rows ldmatrix lanes address, the metadata register a lane hands to mma.sp, where
// an accumulator element lands. Plain C++ so that a host test can replay the kernel's data movement with the PTX ISA's
// fragment rules (tests/linear/test_nm_cuda.cpp) — the part of the kernel a machine without a GPU can check.
//
// Operand roles: Yᵀ = W · Xᵀ. A 16-row tile of W is mma.sp's sparse A (16 x k, row-major), 8 rows of X its dense B
// (k x 8, column-major = X row-major); accumulator (row i, column j) is Y[m0 + j, n0 + i].
// A k-step is one mma: 32 dense columns of 16-bit values (m16n8k32) or 64 of int8 (m16n8k64). In bytes both are the
// same: A is 16 rows x 32 bytes of compressed values, B 8 rows x 64 bytes of X, and the fragments (PTX ISA, "Matrix
// Fragments for sparse mma.m16n8k32 / m16n8k64") are byte for byte those ldmatrix.x4 (non-transposed) delivers:
//   A register r of lane 4g + t: row g + 8 (r & 1), bytes 16 (r / 2) + 4t .. +3
//   B register r of lane 4g + t: X row g, bytes 16 r + 4t .. +3
//   accumulator r of lane 4g + t: W row g + 8 (r / 2), X row 2t + (r & 1)
// Metadata. The stored tile of a k-step (sparse/nm_compressed.hpp) has, in word 4q + c (int8; 2q + c for 16-bit), the
// 16 columns 16c .. 16c + 15 of row q in bits [15:0] and of row q + 8 in bits [31:16]. What mma.sp reads, per lane
// 4q + t (a "half" = the 16 bits of one row and 16 columns):
//   m16n8k32, 16-bit, selector 0: lanes t = 0, 1 hold rows q | q + 8 of columns 16t.. — exactly stored word 2q + t.
//   m16n8k64, int8: two mappings are plausible, and a switch picks one at run time (Int8Metadata, below; the
//     environment variable SHRINK_NM_INT8_METADATA, read on the host at each launch) until the layout probe
//     (benchmarks/gpu/layout_probe.cu) has said which one the hardware uses:
//     row_per_lane (the default): lane 4q + t holds row q + 8 (t & 1), dense columns 32 (t >> 1) .. +15 in bits [15:0]
//       and the next 16 in bits [31:16]: the matching halves (low for t even, high for t odd) of stored words
//       4q + 2 (t >> 1) and 4q + 2 (t >> 1) + 1. This is the mapping Triton's dot_sparse reports measured on hardware
//       (sm_89); the PTX ISA shows the metadata only as figures.
//     word_per_lane: lane 4q + t holds stored word 4q + t as it is: row q in bits [15:0], row q + 8 in bits [31:16],
//       columns 16t .. 16t + 15 in both: the 16-bit layout with all four lanes of a group used, as
//       sparse/nm_compressed.hpp's note "lane L simply loads word L" reads the figures.
//     Either way nibble j of a 16-bit half is the group of dense columns 4j .. 4j + 3 of that half's 16 columns.
// Not yet run here on a GPU.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "shrink/core/config.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"

namespace shrink::cuda::kernels::linear_nm {

// Which lane of mma.sp m16n8k64 (int8) holds which metadata (see the top of this file).
enum class Int8Metadata : int {
  row_per_lane,   // lane 4q + t: row q + 8 (t & 1), columns 32 (t >> 1) .. +31 (Triton's sm_89 report)
  word_per_lane,  // lane 4q + t: stored word 4q + t, rows q | q + 8, columns 16t .. +15
};

inline constexpr const char* kInt8MetadataVariable = "SHRINK_NM_INT8_METADATA";

inline const char* to_string(Int8Metadata mapping) {
  return mapping == Int8Metadata::word_per_lane ? "word_per_lane" : "row_per_lane";
}

// The mapping a value of SHRINK_NM_INT8_METADATA names; nullptr or "" (unset) is the default, row_per_lane.
inline Int8Metadata parse_int8_metadata(const char* text) {
  if (text == nullptr || *text == '\0') return Int8Metadata::row_per_lane;
  for (Int8Metadata m : {Int8Metadata::row_per_lane, Int8Metadata::word_per_lane})
    if (std::strcmp(text, to_string(m)) == 0) return m;
  fail("shrink::cuda::linear_nm", kInt8MetadataVariable, std::string("'") + text + "'",
       "row_per_lane (the default when unset) or word_per_lane");
}

// The mapping this process asks for, read from the environment at each call (cheap against a launch).
inline Int8Metadata int8_metadata_from_environment() { return parse_int8_metadata(std::getenv(kInt8MetadataVariable)); }

// The group a metadata nibble describes: row of the 16-row tile, and group = dense columns 4 group .. +3 of the k-step.
struct MetadataGroup {
  int row, group;
};

// Where nibble `nibble` (bits 4 nibble + 3 .. 4 nibble) of lane `lane`'s register points, as mma.sp reads it under
// `mapping` (int8, m16n8k64); the 16-bit m16n8k32 (selector 0) reads word_per_lane's layout in lanes t < 2.
SHRINK_HOST_DEVICE inline MetadataGroup int8_metadata_group(Int8Metadata mapping, int lane, int nibble) {
  const int q = lane / 4, t = lane % 4;
  if (mapping == Int8Metadata::word_per_lane) return MetadataGroup{q + 8 * (nibble / 4), 4 * t + nibble % 4};
  return MetadataGroup{q + 8 * (t & 1), 8 * (t >> 1) + nibble};
}

// Per value type: dense columns one k-step covers, metadata words of one 16-row tile per k-step.
template <class T>
struct Operand;
template <>
struct Operand<half> {
  static constexpr int kTileK = 32;
  static constexpr int kMetadataWords = 16;
  using Accumulator = float;
  // The metadata register lane `lane` hands to mma.sp, from the stored words of one k-step's tile (selector 0 reads
  // lanes with lane % 4 < 2; the others get a copy). 16-bit has one mapping: the third argument is for int8's sake.
  SHRINK_HOST_DEVICE static std::uint32_t metadata_register(const std::uint32_t* step_words, int lane,
                                                            Int8Metadata = Int8Metadata::row_per_lane) {
    return step_words[(lane / 4) * 2 + (lane % 2)];
  }
};
template <>
struct Operand<bfloat16> : Operand<half> {};
template <>
struct Operand<std::int8_t> {
  static constexpr int kTileK = 64;
  static constexpr int kMetadataWords = 32;
  using Accumulator = std::int32_t;
  // row_per_lane: row q + 8 (t & 1), columns 32 (t >> 1) .. +31, the low (t even) or high (t odd) halves of two
  // adjacent words; word_per_lane: word 4q + t. A uniform branch: every lane of a launch takes the same side.
  SHRINK_HOST_DEVICE static std::uint32_t metadata_register(const std::uint32_t* step_words, int lane,
                                                            Int8Metadata mapping = Int8Metadata::row_per_lane) {
    if (mapping == Int8Metadata::word_per_lane) return step_words[lane];
    const int q = lane / 4, t = lane % 4;
    const std::uint32_t first = step_words[4 * q + 2 * (t >> 1)], second = step_words[4 * q + 2 * (t >> 1) + 1];
    return (t & 1) == 0 ? (first & 0xFFFFu) | (second << 16) : (first >> 16) | (second & 0xFFFF0000u);
  }
};

// A block tile: BlockW rows of W (output features) x BlockX rows of X (tokens), WarpsW x WarpsX warps, Stages
// pipeline stages of kStepsPerStage k-steps each.
template <int BlockW, int BlockX, int WarpsW, int WarpsX, int Stages>
struct Tile {
  static constexpr int kBlockW = BlockW;
  static constexpr int kBlockX = BlockX;
  static constexpr int kWarpsW = WarpsW;
  static constexpr int kWarps = WarpsW * WarpsX;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kWarpW = BlockW / WarpsW;  // rows of W per warp
  static constexpr int kWarpX = BlockX / WarpsX;  // rows of X per warp
  static constexpr int kMmaW = kWarpW / 16;       // mma tiles per warp along W
  static constexpr int kMmaX = kWarpX / 8;        // and along X
  static constexpr int kStages = Stages;
  static_assert(BlockW % (16 * WarpsW) == 0 && BlockX % (8 * WarpsX) == 0, "whole mma tiles per warp");
  static_assert(Stages >= 2, "a pipeline");

  static constexpr int kStepsPerStage = 2;
  static constexpr int kRowBytesW = 32 * kStepsPerStage;  // compressed values of a W row in one stage: 4 chunks
  static constexpr int kRowBytesX = 64 * kStepsPerStage;  // an X row in one stage: 8 chunks
  static constexpr int kRowTiles = BlockW / 16;           // 16-row metadata tiles in the block
  static constexpr int kOffsetX = BlockW * kRowBytesW;    // stage layout: W values, X rows, metadata
  static constexpr int kOffsetMetadata = kOffsetX + BlockX * kRowBytesX;

  template <class T>
  SHRINK_HOST_DEVICE static constexpr int stage_bytes() {
    return kOffsetMetadata + kRowTiles * kStepsPerStage * Operand<T>::kMetadataWords * 4;
  }
  template <class T>
  SHRINK_HOST_DEVICE static constexpr int shared_bytes() {
    return kStages * stage_bytes<T>();
  }
};

using Tile32x16 = Tile<32, 16, 2, 1, 8>;
using Tile64x64 = Tile<64, 64, 2, 2, 4>;
using Tile128x128 = Tile<128, 128, 2, 4, 3>;

// Blocks of a 1-D grid for an M x N problem with tile Config.
template <class Config>
SHRINK_HOST_DEVICE std::int64_t grid_size(std::int64_t m, std::int64_t n) {
  return ((n + Config::kBlockW - 1) / Config::kBlockW) * ((m + Config::kBlockX - 1) / Config::kBlockX);
}

// Block b -> (tile along W, tile along X), in groups of 8 X tiles that walk W together, so the W tiles a wave reads
// are shared by up to 8 X tiles in L2.
struct BlockTiles {
  std::int64_t w, x;
};
SHRINK_HOST_DEVICE inline BlockTiles block_tiles(std::int64_t block, std::int64_t tiles_w, std::int64_t tiles_x) {
  constexpr std::int64_t kGroup = 8;
  const std::int64_t per_group = kGroup * tiles_w;
  const std::int64_t first_x = block / per_group * kGroup;
  const std::int64_t group_size = tiles_x - first_x < kGroup ? tiles_x - first_x : kGroup;
  const std::int64_t in_group = block % per_group;
  return BlockTiles{in_group / group_size, first_x + in_group % group_size};
}

// Byte offset of 16-byte chunk `chunk` of row `row` in a stage's swizzled tiles. W rows hold 4 chunks (two rows per
// 128-byte bank line), X rows 8; the XOR with row bits puts the 8 rows an ldmatrix phase reads into 8 distinct
// 16-byte bank groups, whichever chunk it reads.
SHRINK_HOST_DEVICE inline int w_chunk_offset(int row, int chunk) {
  return row * 64 + ((chunk ^ ((row >> 1) & 3)) << 4);
}
SHRINK_HOST_DEVICE inline int x_chunk_offset(int row, int chunk) { return row * 128 + ((chunk ^ (row & 7)) << 4); }

// One 16-byte copy of a stage: where it lands (bytes from the stage's start), where it comes from (bytes from the
// start of its source array), and whether the source exists (else the kernel writes zeros, or padding metadata).
struct StageCopy {
  int destination;
  std::int64_t source;
  bool valid;
};

// The problem as the copies see it: sizes, the block's first rows, k-steps, row pitches in bytes.
struct CopyShape {
  std::int64_t m, n;         // rows of X, rows of W
  std::int64_t m0, n0;       // the block's first X row and W row
  int k_steps;               // K / tile_k
  std::int64_t row_bytes_w;  // K / 2 · sizeof(T): a row of compressed values
  std::int64_t row_bytes_x;  // K · sizeof(T)
};

// Copy c (0 <= c < BlockW · 4) of W's compressed values for stage s: row c / 4, chunk c % 4 (k-step 2s + chunk / 2).
template <class Config>
SHRINK_HOST_DEVICE StageCopy w_copy(int c, int s, const CopyShape& shape) {
  const int row = c / 4, chunk = c % 4;
  const std::int64_t n = shape.n0 + row;
  return StageCopy{w_chunk_offset(row, chunk), n * shape.row_bytes_w + s * Config::kRowBytesW + chunk * 16,
                   n < shape.n && 2 * s + chunk / 2 < shape.k_steps};
}

// Copy c (0 <= c < BlockX · 8) of X for stage s: row c / 8, chunk c % 8 (k-step 2s + chunk / 4).
template <class Config>
SHRINK_HOST_DEVICE StageCopy x_copy(int c, int s, const CopyShape& shape) {
  const int row = c / 8, chunk = c % 8;
  const std::int64_t m = shape.m0 + row;
  return StageCopy{Config::kOffsetX + x_chunk_offset(row, chunk),
                   m * shape.row_bytes_x + s * Config::kRowBytesX + chunk * 16,
                   m < shape.m && 2 * s + chunk / 4 < shape.k_steps};
}

// Copies of metadata per row tile and stage: the 2 · kMetadataWords words of k-steps 2s and 2s + 1, which the global
// array keeps together (tile (i, ks) is number i · k_steps + ks).
template <class T>
SHRINK_HOST_DEVICE constexpr int metadata_copies_per_tile() {
  return 2 * Operand<T>::kMetadataWords / 4;
}

// Copy c (0 <= c < kRowTiles · metadata_copies_per_tile) of metadata for stage s. Invalid past the padded rows
// (ceil(n / 16) row tiles) or past K: the kernel then writes padding nibbles, a valid pattern over zero values.
template <class Config, class T>
SHRINK_HOST_DEVICE StageCopy metadata_copy(int c, int s, const CopyShape& shape) {
  constexpr int kPerTile = metadata_copies_per_tile<T>();
  const int tile_row = c / kPerTile, part = c % kPerTile;
  const std::int64_t row_tile = shape.n0 / 16 + tile_row;
  const int step = 2 * s + part / (kPerTile / 2);
  const std::int64_t word = (row_tile * shape.k_steps + 2 * s) * Operand<T>::kMetadataWords + part * 4;
  return StageCopy{Config::kOffsetMetadata + (tile_row * 2 * Operand<T>::kMetadataWords + part * 4) * 4, word * 4,
                   row_tile < (shape.n + 15) / 16 && step < shape.k_steps};
}

// ldmatrix.x4 of A (k-step h of a stage): lane L addresses row L % 16 of the 16-row tile, chunk 2h + L / 16, so the
// four 8x8 matrices are {rows 0-7, 8-15} x {bytes 0-15, 16-31} of the step: A registers 0..3.
SHRINK_HOST_DEVICE inline int a_lane_row(int lane) { return lane % 16; }
SHRINK_HOST_DEVICE inline int a_lane_chunk(int step, int lane) { return 2 * step + lane / 16; }
// ldmatrix.x4 of B: lane L addresses X row L % 8, chunk 4h + L / 8: matrix r = bytes 16r .. 16r + 15, B register r.
SHRINK_HOST_DEVICE inline int b_lane_row(int lane) { return lane % 8; }
SHRINK_HOST_DEVICE inline int b_lane_chunk(int step, int lane) { return 4 * step + lane / 8; }

// The stage's metadata: per row tile, the words of its 2 k-steps, in the order the global array stores them; this is
// the word offset of step `step` of the block's row tile `row_tile`.
template <class T>
SHRINK_HOST_DEVICE int metadata_step_offset(int row_tile, int step) {
  return (row_tile * 2 + step) * Operand<T>::kMetadataWords;
}

// Accumulator element r of lane: its W row and X row within the 16 x 8 mma tile.
SHRINK_HOST_DEVICE inline int accumulator_w_row(int lane, int r) { return lane / 4 + 8 * (r / 2); }
SHRINK_HOST_DEVICE inline int accumulator_x_row(int lane, int r) { return 2 * (lane % 4) + r % 2; }

}  // namespace shrink::cuda::kernels::linear_nm
