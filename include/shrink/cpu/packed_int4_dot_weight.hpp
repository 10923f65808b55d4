// PackedInt4DotWeight: a per-group int4 weight W[N, K] laid out for integer dot products with int8 activations
// (cpu/gemm_int4_int8.hpp, the W4A8 layer of linear/w4a8.hpp): each stored value is u = q + 8 in [0, 15] and each
// group keeps c = 8 + z (8 when symmetric), so that
//   w[n, k] = (q[n, k] − z[n, g]) · s[n, g] = (u[n, k] − c[n, g]) · s[n, g],      g = k / group_size
// and u, never negative, is the unsigned operand of vpmaddubsw.
//
// Layout: blocks of 8 outputs × 8 inputs, 32 bytes each, outputs outer, inputs inner:
//   blocks[((n / 8) · KB + k / 8) · 32 + 4 · (n % 8) + (k % 4)]   holds u[n, k] in bits 0-3 when k % 8 < 4, in bits 4-7
//                                                                 otherwise (KB = ceil(K / 8) blocks along k)
//   scales[((n / 8) · G + g) · 8 + n % 8]  = s[n, g]
//   offsets[((n / 8) · G + g) · 8 + n % 8] = c[n, g]
// so the low nibbles of a block are the 8 outputs' 4 first inputs side by side, the high nibbles the 4 next. Outputs
// past N and inputs past K hold u = 0 and scale 0 (the activations are padded with zeros as well: they add nothing).
// Made from a PackedInt4Weight (cpu/packed_int4_weight.hpp: symmetric or integer zero points) by
// pack_int4_dot_weight; the group size must be a multiple of 8, or the weight a single group (per output channel).
#pragma once

#include <cstdint>
#include <vector>

#include "shrink/core/int4.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/packed_int4_weight.hpp"

namespace shrink::cpu {

inline constexpr std::int64_t kDotBlockRows = 8;    // outputs of a block: one int32 lane each in an AVX2 register
inline constexpr std::int64_t kDotBlockK = 8;       // inputs of a block
inline constexpr std::int64_t kDotBlockBytes = 32;  // 64 values at half a byte

struct PackedInt4DotWeight {
  std::int64_t rows = 0;               // N, output features
  std::int64_t cols = 0;               // K, input features
  std::int64_t group_size = 0;         // consecutive inputs sharing a scale; divides K
  AlignedVector<std::uint8_t> blocks;  // [ceil(N / 8), ceil(K / 8), 32]
  std::vector<float> scales;           // [ceil(N / 8), K / group_size, 8]
  std::vector<std::int32_t> offsets;   // [ceil(N / 8), K / group_size, 8]: c = 8 + z
  bool affine = false;                 // whether the source had zero points (storage_bytes counts them)

  std::int64_t row_blocks() const { return (rows + kDotBlockRows - 1) / kDotBlockRows; }
  std::int64_t k_blocks() const { return (cols + kDotBlockK - 1) / kDotBlockK; }
  std::int64_t groups() const { return group_size > 0 ? cols / group_size : 0; }
  // Blocks along k in one group (a single group spans them all).
  std::int64_t k_blocks_per_group() const { return groups() == 1 ? k_blocks() : group_size / kDotBlockK; }
  // Bytes a deployment stores, as PackedInt4Weight counts them: the same values, scales and zero points.
  std::int64_t storage_bytes() const { return rows * int4_row_bytes(cols) + rows * groups() * (affine ? 5 : 4); }
  // Whether the fields agree with each other as pack_int4_dot_weight makes them.
  bool consistent() const {
    if (rows <= 0 || cols <= 0 || group_size <= 0 || cols % group_size != 0) return false;
    if (groups() > 1 && group_size % kDotBlockK != 0) return false;
    const std::int64_t per_group = row_blocks() * groups() * kDotBlockRows;
    return static_cast<std::int64_t>(blocks.size()) == row_blocks() * k_blocks() * kDotBlockBytes &&
           static_cast<std::int64_t>(scales.size()) == per_group &&
           static_cast<std::int64_t>(offsets.size()) == per_group;
  }
};

// Whether a PackedInt4Weight can be laid out for the W4A8 product: integer zero points (or none), and groups that
// whole blocks of 8 inputs tile (a multiple of 8, or one group a row).
inline bool int4_dot_layout_fits(const PackedInt4Weight& w) {
  return !w.fractional() && w.group_size > 0 && (w.groups() == 1 || w.group_size % kDotBlockK == 0);
}

// The same weight in the dot-product layout. The caller has checked int4_dot_layout_fits and the weight itself.
inline PackedInt4DotWeight pack_int4_dot_weight(const PackedInt4Weight& w) {
  PackedInt4DotWeight d;
  d.rows = w.rows;
  d.cols = w.cols;
  d.group_size = w.group_size;
  d.affine = w.affine();
  const std::int64_t groups = w.groups(), kb_count = d.k_blocks();
  d.blocks.assign(static_cast<std::size_t>(d.row_blocks() * kb_count * kDotBlockBytes), 0);
  d.scales.assign(static_cast<std::size_t>(d.row_blocks() * groups * kDotBlockRows), 0.0f);
  d.offsets.assign(d.scales.size(), 8);
  for (std::int64_t n = 0; n < w.rows; ++n) {
    const std::int64_t p = n / kPanelWidth, j = n % kPanelWidth, nb = n / kDotBlockRows, lane = n % kDotBlockRows;
    for (std::int64_t g = 0; g < groups; ++g) {
      const std::size_t from = static_cast<std::size_t>((p * groups + g) * kPanelWidth + j);
      const std::size_t to = static_cast<std::size_t>((nb * groups + g) * kDotBlockRows + lane);
      d.scales[to] = w.scales[from];
      if (w.affine()) d.offsets[to] = 8 + w.zero_points[from];
    }
    for (std::int64_t k = 0; k < w.cols; ++k) {
      const std::uint8_t byte = w.panels[static_cast<std::size_t>((p * w.cols + k) * kInt4PanelBytes + j / 2)];
      const std::int32_t q = j % 2 == 0 ? low_nibble_signed(byte) : high_nibble_signed(byte);
      const auto u = static_cast<std::uint8_t>(q + 8);
      const std::int64_t in_block = k % kDotBlockK;
      std::uint8_t& target = d.blocks[static_cast<std::size_t>((nb * kb_count + k / kDotBlockK) * kDotBlockBytes +
                                                               4 * lane + in_block % 4)];
      target = static_cast<std::uint8_t>(in_block < 4 ? (target & 0xF0) | u : (target & 0x0F) | (u << 4));
    }
  }
  return d;
}

}  // namespace shrink::cpu
