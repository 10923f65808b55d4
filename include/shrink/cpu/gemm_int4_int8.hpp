// The W4A8 product on the CPU: int4 weights in the dot-product layout (cpu/packed_int4_dot_weight.hpp) times
// activations already quantized to int8 per row and group of inputs (Int8ActivationGroups), exact int32 sums per
// group, then one float step a group:
//   y[m, n] = op(Σ_g (sw[n, g] · sx[m, g]) · (Σ_{k in g} xq[m, k] · u[n, k] − c[n, g] · Σ_{k in g} xq[m, k]))
// which is Σ_k (xq · sx) · ((q − z) · sw) with every integer part exact: |xq| ≤ 128 and u ≤ 15, so a group's sum stays
// far inside int32 for any group the layout holds (K < 2^20). Each group's float step is one fused multiply-add on
// every path (AVX2 and scalar give the same bits).
// AVX2: vpmaddubsw multiplies 32 (u, xq) pairs and adds neighbours, vpmaddwd adds the pairs again: 64 products of 8
// outputs in a few instructions, against a conversion to float a value in the float product (cpu/gemm_int4_panel.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/packed_int4_dot_weight.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// Activations of the W4A8 product: M rows of int8 values padded with zeros to whole blocks of 8 inputs, with each
// (row, group)'s scale and the sum of its int8 values.
struct Int8ActivationGroups {
  std::int64_t rows = 0;
  std::int64_t groups = 0;
  std::int64_t padded_cols = 0;       // ceil(K / 8) · 8
  AlignedVector<std::int8_t> values;  // [rows, padded_cols]
  std::vector<float> scales;          // [rows, groups]: sx
  std::vector<std::int32_t> sums;     // [rows, groups]: Σ xq over the group

  const std::int8_t* row(std::int64_t m) const { return values.data() + m * padded_cols; }
};

namespace detail {

inline std::int32_t load_four_bytes(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The float step of one group for one output: acc += (sw · sx) · (Σ xq · u − c · Σ xq).
inline float add_group(float acc, std::int32_t dot, std::int32_t offset, std::int32_t x_sum, float sw, float sx) {
  return std::fma(static_cast<float>(dot - offset * x_sum), sw * sx, acc);
}

// Rows m0 .. m0 + rows − 1 of y for the 8 outputs of row block nb, into tile[r][0 .. 8).
inline void int4_int8_block_scalar(const Int8ActivationGroups& a, std::int64_t m0, int rows,
                                   const PackedInt4DotWeight& w, std::int64_t nb, float (*tile)[kDotBlockRows]) {
  const std::int64_t kb_count = w.k_blocks(), groups = w.groups(), per_group = w.k_blocks_per_group();
  for (int r = 0; r < rows; ++r) {
    const std::int8_t* xq = a.row(m0 + r);
    for (std::int64_t lane = 0; lane < kDotBlockRows; ++lane) {
      float acc = 0.0f;
      for (std::int64_t g = 0; g < groups; ++g) {
        std::int32_t dot = 0;
        for (std::int64_t kb = g * per_group; kb < std::min(kb_count, (g + 1) * per_group); ++kb) {
          const std::uint8_t* block = w.blocks.data() + (nb * kb_count + kb) * kDotBlockBytes + 4 * lane;
          for (int i = 0; i < 4; ++i) {
            dot += (block[i] & 0x0F) * xq[kb * kDotBlockK + i];
            dot += (block[i] >> 4) * xq[kb * kDotBlockK + 4 + i];
          }
        }
        const std::size_t at = static_cast<std::size_t>((nb * groups + g) * kDotBlockRows + lane);
        const std::size_t xg = static_cast<std::size_t>((m0 + r) * a.groups + g);
        acc = add_group(acc, dot, w.offsets[at], a.sums[xg], w.scales[at], a.scales[xg]);
      }
      tile[r][lane] = acc;
    }
  }
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// The same with AVX2 for MR rows at once (each block's nibbles split once for all of them).
template <std::size_t MR>
SHRINK_TARGET_AVX2_FMA void int4_int8_block_avx2(const Int8ActivationGroups& a, std::int64_t m0,
                                                 const PackedInt4DotWeight& w, std::int64_t nb,
                                                 float (*tile)[kDotBlockRows]) {
  const std::int64_t kb_count = w.k_blocks(), groups = w.groups(), per_group = w.k_blocks_per_group();
  const std::uint8_t* block = w.blocks.data() + nb * kb_count * kDotBlockBytes;
  const float* scales = w.scales.data() + nb * groups * kDotBlockRows;
  const std::int32_t* offsets = w.offsets.data() + nb * groups * kDotBlockRows;
  const __m256i low_bits = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const std::int8_t* xq[MR];
  __m256 out[MR];
  for (std::size_t r = 0; r < MR; ++r) {
    xq[r] = a.row(m0 + static_cast<std::int64_t>(r));
    out[r] = _mm256_setzero_ps();
  }
  for (std::int64_t g = 0; g < groups; ++g) {
    __m256i acc[MR];
    for (std::size_t r = 0; r < MR; ++r) acc[r] = _mm256_setzero_si256();
    const std::int64_t kb_end = std::min(kb_count, (g + 1) * per_group);
    for (std::int64_t kb = g * per_group; kb < kb_end; ++kb, block += kDotBlockBytes) {
      const __m256i packed = _mm256_load_si256(reinterpret_cast<const __m256i*>(block));
      const __m256i low = _mm256_and_si256(packed, low_bits);                         // inputs 0-3 of each output
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_bits);  // inputs 4-7
      for (std::size_t r = 0; r < MR; ++r) {
        const __m256i x_low = _mm256_set1_epi32(load_four_bytes(xq[r] + kb * kDotBlockK));
        const __m256i x_high = _mm256_set1_epi32(load_four_bytes(xq[r] + kb * kDotBlockK + 4));
        // |u · x + u · x| ≤ 3840 a pair, 7680 the two: no int16 saturation.
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, x_low), _mm256_maddubs_epi16(high, x_high));
        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pairs, ones));
      }
    }
    const __m256 sw = _mm256_loadu_ps(scales + g * kDotBlockRows);
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets + g * kDotBlockRows));
    for (std::size_t r = 0; r < MR; ++r) {
      const std::size_t xg = static_cast<std::size_t>((m0 + static_cast<std::int64_t>(r)) * a.groups + g);
      const __m256i shifted = _mm256_sub_epi32(acc[r], _mm256_mullo_epi32(c, _mm256_set1_epi32(a.sums[xg])));
      out[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(shifted), _mm256_mul_ps(sw, _mm256_set1_ps(a.scales[xg])), out[r]);
    }
  }
  for (std::size_t r = 0; r < MR; ++r) _mm256_storeu_ps(tile[r], out[r]);
}
#endif

// Rows m0 .. m0 + rows − 1 (rows ≤ 4) of row block nb into tile.
inline void int4_int8_block(const Int8ActivationGroups& a, std::int64_t m0, int rows, const PackedInt4DotWeight& w,
                            std::int64_t nb, float (*tile)[kDotBlockRows]) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx2()) {
    switch (rows) {
      case 4: return int4_int8_block_avx2<4>(a, m0, w, nb, tile);
      case 3: return int4_int8_block_avx2<3>(a, m0, w, nb, tile);
      case 2: return int4_int8_block_avx2<2>(a, m0, w, nb, tile);
      default: return int4_int8_block_avx2<1>(a, m0, w, nb, tile);
    }
  }
#endif
  int4_int8_block_scalar(a, m0, rows, w, nb, tile);
}

}  // namespace detail

inline constexpr int kDotTileRows = 4;  // rows of activations sharing one pass over a weight block

// y[m, n] = op(the sum above) for the rows of `a` into y (row stride ldy), on the current executor: the row blocks
// of W cut in chunks fixed by the problem's size (the same bits on any executor). Arguments are checked by the caller.
inline void gemm_int4_int8(const Int8ActivationGroups& a, const PackedInt4DotWeight& w, float* y, std::int64_t ldy,
                           const EpilogueOp& op) {
  const std::int64_t row_blocks = w.row_blocks();
  const double cost = static_cast<double>(a.rows) * static_cast<double>(a.padded_cols) * kDotBlockRows;
  parallel_for(row_blocks, chunk_size(row_blocks, cost), [&](std::int64_t nb0, std::int64_t nb1) {
    float tile[kDotTileRows][kDotBlockRows];
    for (std::int64_t m0 = 0; m0 < a.rows; m0 += kDotTileRows) {
      const int rows = static_cast<int>(std::min<std::int64_t>(kDotTileRows, a.rows - m0));
      for (std::int64_t nb = nb0; nb < nb1; ++nb) {
        detail::int4_int8_block(a, m0, rows, w, nb, tile);
        const std::int64_t n0 = nb * kDotBlockRows, count = std::min(kDotBlockRows, w.rows - n0);
        for (int r = 0; r < rows; ++r) finish_run(op, tile[r], op.x_scale(m0 + r), n0, count, y + (m0 + r) * ldy + n0);
      }
    }
  });
}

}  // namespace shrink::cpu
