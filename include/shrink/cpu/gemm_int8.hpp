// The INT8 × INT8 → INT32 product kernels behind linear/int8.hpp, one per SIMD level, and their driver.
//
// acc[m, n] = Σ_k (x[m, k] − zx[m]) · w[n, k], exact in int32 (two's-complement wrap-around in the kernels; the true
// sum must fit, which linear/int8.hpp checks from K before calling).
//
//   AVX-512 VNNI  vpdpbusd multiplies unsigned bytes by signed bytes, 4 products summed into each int32 lane,
//                 without saturation. The activations become unsigned (int8 + 128, or uint8 as is) and
//                 Σ (x − zx)·w = Σ u·w − (offset + zx)·Σ_k w[n, k], offset = 128 (int8) or 0 (uint8), with the
//                 weight row sums computed once when the weight is packed.
//   AVX2          activations as int16 x − zx (|·| ≤ 255), weights sign-extended to int16, vpmaddwd pairs
//                 (|pair| ≤ 2 · 255 · 128 < 2^31: no saturation; vpmaddubsw would saturate, so it is not used).
//   scalar        the same int16 operands in plain loops.
// Tiles: 3 activation rows × 8 weight rows, each (m, n) a dot product along k in one vector register, summed
// across lanes at the end of each k block. The weight block (8 rows × up to 4096 bytes) stays in L1 while every
// activation row passes by (from L2).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"

#if defined(SHRINK_CPU_AVX2_DISPATCH)
#define SHRINK_TARGET_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma")))
#endif

namespace shrink::cpu {

// AVX-512 VNNI (vpdpbusd on zmm) when the SIMD level allows AVX-512 and the CPU has VNNI and BW.
inline bool use_avx512_vnni() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  static const bool has_vnni = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw");
  return use_avx512() && has_vnni;
#else
  return false;
#endif
}

inline constexpr std::int64_t kInt8KAlign = 64;    // weight and activation rows padded with zeros to this
inline constexpr std::int64_t kInt8TileN = 8;      // weight rows per tile (packed rows padded to a multiple)
inline constexpr int kInt8TileM = 3;               // activation rows per tile
inline constexpr std::int64_t kInt8BlockK = 4096;  // k per block: 8 weight rows × 4096 bytes = 32 KB of L1

// The weight as the kernels read it: rows padded to row_stride (a multiple of 64) and to a multiple of 8 rows.
struct Int8WeightRows {
  const std::int8_t* data = nullptr;
  std::int64_t rows = 0;  // N
  std::int64_t row_stride = 0;
  const std::int32_t* row_sums = nullptr;  // Σ_k w[n, k], one per padded row
};

// Activations as stored: rows of bytes (int8 two's complement or uint8) with per-row or per-tensor zero points.
struct Int8ActivationRows {
  const std::uint8_t* data = nullptr;
  std::int64_t rows = 0;  // M
  std::int64_t cols = 0;  // K
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
  bool is_signed = true;
  const std::int32_t* zero_points = nullptr;  // null: all 0
  bool zero_point_per_row = false;

  std::int32_t zero_point(std::int64_t m) const {
    return zero_points == nullptr ? 0 : zero_points[zero_point_per_row ? m : 0];
  }
  std::int32_t value(std::int64_t m, std::int64_t k) const {
    const std::uint8_t b = data[m * row_stride + k * col_stride];
    return is_signed ? static_cast<std::int8_t>(b) : b;
  }
};

namespace detail {

inline std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }

// Blocks of k: as few as possible of at most kInt8BlockK, each a multiple of 64.
inline std::int64_t int8_block_k(std::int64_t k_padded) {
  const std::int64_t blocks = (k_padded + kInt8BlockK - 1) / kInt8BlockK;
  return round_up((k_padded + blocks - 1) / blocks, kInt8KAlign);
}

// ---- scalar ---------------------------------------------------------------------------------------------------
template <int MR>
void int8_tile_scalar(const std::int16_t* x, std::int64_t ldx, const std::int8_t* w, std::int64_t ldw, std::int64_t k0,
                      std::int64_t k1, std::int32_t* acc) {
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < kInt8TileN; ++j) {
      std::int64_t sum = 0;  // a block's partial sum is within the bound checked for the whole reduction
      const std::int16_t* xr = x + i * ldx;
      const std::int8_t* wr = w + j * ldw;
      for (std::int64_t k = k0; k < k1; ++k) sum += static_cast<std::int32_t>(xr[k]) * wr[k];
      acc[i * kInt8TileN + j] = static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[i * kInt8TileN + j]) +
                                                          static_cast<std::uint32_t>(sum));
    }
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// ---- AVX2 -----------------------------------------------------------------------------------------------------
// Four int32 vectors to their four lane sums.
SHRINK_TARGET_AVX2 inline __m128i sum_lanes4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_hadd_epi32(a, b), cd = _mm256_hadd_epi32(c, d);
  const __m256i abcd = _mm256_hadd_epi32(ab, cd);  // [a b c d] partial sums of each 128-bit half
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

template <int MR>
SHRINK_TARGET_AVX2 inline void int8_tile4_avx2(const std::int16_t* x, std::int64_t ldx, const std::int8_t* w,
                                               std::int64_t ldw, std::int64_t k0, std::int64_t k1, std::int32_t* acc) {
  __m256i c[static_cast<std::size_t>(MR)][4];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 4; ++j) c[i][j] = _mm256_setzero_si256();
  for (std::int64_t k = k0; k < k1; k += 16) {
    __m256i xv[static_cast<std::size_t>(MR)];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i * ldx + k));
    for (int j = 0; j < 4; ++j) {
      const __m256i wv = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + j * ldw + k)));
      for (int i = 0; i < MR; ++i) c[i][j] = _mm256_add_epi32(c[i][j], _mm256_madd_epi16(xv[i], wv));
    }
  }
  for (int i = 0; i < MR; ++i) {
    __m128i* out = reinterpret_cast<__m128i*>(acc + i * kInt8TileN);
    _mm_storeu_si128(out, _mm_add_epi32(_mm_loadu_si128(out), sum_lanes4(c[i][0], c[i][1], c[i][2], c[i][3])));
  }
}

template <int MR>
SHRINK_TARGET_AVX2 inline void int8_tile_avx2(const std::int16_t* x, std::int64_t ldx, const std::int8_t* w,
                                              std::int64_t ldw, std::int64_t k0, std::int64_t k1, std::int32_t* acc) {
  int8_tile4_avx2<MR>(x, ldx, w, ldw, k0, k1, acc);
  int8_tile4_avx2<MR>(x, ldx, w + 4 * ldw, ldw, k0, k1, acc + 4);
}

// ---- AVX-512 VNNI ---------------------------------------------------------------------------------------------
// Eight int32 vectors of 16 lanes to their eight lane sums.
SHRINK_TARGET_AVX512_VNNI inline __m256i sum_lanes8(const __m512i* v) {
  __m256i h[8];
  // The zero-masked extracts say the same as cast + extract without GCC 12's -Wuninitialized false alarm.
  for (int j = 0; j < 8; ++j)
    h[j] = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xFF, v[j], 0),
                            _mm512_maskz_extracti64x4_epi64(0xFF, v[j], 1));
  const __m256i a = _mm256_hadd_epi32(h[0], h[1]), b = _mm256_hadd_epi32(h[2], h[3]);
  const __m256i c = _mm256_hadd_epi32(h[4], h[5]), d = _mm256_hadd_epi32(h[6], h[7]);
  const __m256i lo = _mm256_hadd_epi32(a, b), hi = _mm256_hadd_epi32(c, d);  // 0-3 and 4-7, per 128-bit half
  return _mm256_add_epi32(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

template <int MR>
SHRINK_TARGET_AVX512_VNNI inline void int8_tile_vnni(const std::uint8_t* x, std::int64_t ldx, const std::int8_t* w,
                                                     std::int64_t ldw, std::int64_t k0, std::int64_t k1,
                                                     std::int32_t* acc) {
  __m512i c[static_cast<std::size_t>(MR)][8];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < 8; ++j) c[i][j] = _mm512_setzero_si512();
  for (std::int64_t k = k0; k < k1; k += 64) {
    __m512i xv[static_cast<std::size_t>(MR)];
    for (int i = 0; i < MR; ++i) xv[i] = _mm512_loadu_si512(x + i * ldx + k);
    for (int j = 0; j < 8; ++j) {
      const __m512i wv = _mm512_loadu_si512(w + j * ldw + k);
      for (int i = 0; i < MR; ++i) c[i][j] = _mm512_dpbusd_epi32(c[i][j], xv[i], wv);
    }
  }
  for (int i = 0; i < MR; ++i) {
    __m256i* out = reinterpret_cast<__m256i*>(acc + i * kInt8TileN);
    _mm256_storeu_si256(out, _mm256_add_epi32(_mm256_loadu_si256(out), sum_lanes8(c[i])));
  }
}
#endif

// ---- driver ---------------------------------------------------------------------------------------------------
// Runs tile(i_rows, x_row, w_rows, k0, k1, acc) over the activation rows in threes for one weight block of 8 rows.
template <class Tile>
void int8_rows_of_block(std::int64_t m_total, Tile&& tile) {
  std::int64_t m = 0;
  for (; m + kInt8TileM <= m_total; m += kInt8TileM) tile(std::integral_constant<int, kInt8TileM>{}, m);
  if (m_total - m == 2) tile(std::integral_constant<int, 2>{}, m);
  if (m_total - m == 1) tile(std::integral_constant<int, 1>{}, m);
}

}  // namespace detail

// Computes the exact int32 products and hands each finished run of a row to
// store(m, n0, count, const std::int32_t* acc) — count ≤ 8 outputs n0 .. n0 + count − 1 of row m.
// Runs on the current executor (core/executor.hpp), in parts of whole weight blocks; the sums are exact, so every
// executor gives the same bits. store is called concurrently for distinct (m, n0).
template <class Store>
void gemm_int8(const Int8ActivationRows& x, const Int8WeightRows& w, Store&& store) {
  const std::int64_t m_total = x.rows, k_padded = w.row_stride;
  const std::int64_t block_k = detail::int8_block_k(k_padded);
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(m_total), 0);  // subtracted times the row sums (VNNI)

  const bool vnni = use_avx512_vnni();
  AlignedVector<std::uint8_t> x_unsigned;  // VNNI: [M, k_padded] unsigned bytes
  AlignedVector<std::int16_t> x_centred;   // AVX2 / scalar: [M, k_padded] x − zx
  if (vnni) {
    x_unsigned.assign(static_cast<std::size_t>(m_total * k_padded), 0);
    const std::uint8_t flip = x.is_signed ? 0x80 : 0x00;  // int8 + 128 as a byte: the sign bit flipped
    for (std::int64_t m = 0; m < m_total; ++m) {
      std::uint8_t* row = x_unsigned.data() + m * k_padded;
      const std::uint8_t* src = x.data + m * x.row_stride;
      if (x.col_stride == 1) {
        for (std::int64_t k = 0; k < x.cols; ++k) row[k] = static_cast<std::uint8_t>(src[k] ^ flip);
      } else {
        for (std::int64_t k = 0; k < x.cols; ++k) row[k] = static_cast<std::uint8_t>(src[k * x.col_stride] ^ flip);
      }
      offsets[static_cast<std::size_t>(m)] = (x.is_signed ? 128 : 0) + x.zero_point(m);
    }
  } else {
    x_centred.assign(static_cast<std::size_t>(m_total * k_padded), 0);
    for (std::int64_t m = 0; m < m_total; ++m) {
      std::int16_t* row = x_centred.data() + m * k_padded;
      const std::int32_t zp = x.zero_point(m);
      for (std::int64_t k = 0; k < x.cols; ++k) row[k] = static_cast<std::int16_t>(x.value(m, k) - zp);
    }
  }

  // The 8 weight rows from n0 against every activation row, then their finished runs to store.
  auto weight_block = [&](std::int64_t n0, std::vector<std::int32_t>& block_acc) {
    std::int32_t exact[kInt8TileN];
    std::fill(block_acc.begin(), block_acc.end(), 0);
    const std::int8_t* w_block = w.data + n0 * w.row_stride;
    const std::int64_t tiles = (m_total + kInt8TileM - 1) / kInt8TileM * ((k_padded + block_k - 1) / block_k);
    std::int64_t tile_index = 0;
    for (std::int64_t k0 = 0; k0 < k_padded; k0 += block_k) {
      const std::int64_t k1 = std::min(k0 + block_k, k_padded);
      detail::int8_rows_of_block(m_total, [&](auto rows, std::int64_t m) {
        constexpr int MR = decltype(rows)::value;
        // The next block of 8 weight rows, a slice per tile (past the last block the hint reads nothing).
        if (n0 + kInt8TileN < w.rows)
          prefetch_part_l2(w_block + kInt8TileN * w.row_stride, static_cast<std::size_t>(kInt8TileN * w.row_stride),
                           tile_index++, tiles);
        std::int32_t* acc = block_acc.data() + m * kInt8TileN;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
        if (vnni) {
          detail::int8_tile_vnni<MR>(x_unsigned.data() + m * k_padded, k_padded, w_block, w.row_stride, k0, k1, acc);
          return;
        }
        if (use_avx2()) {
          detail::int8_tile_avx2<MR>(x_centred.data() + m * k_padded, k_padded, w_block, w.row_stride, k0, k1, acc);
          return;
        }
#endif
        detail::int8_tile_scalar<MR>(x_centred.data() + m * k_padded, k_padded, w_block, w.row_stride, k0, k1, acc);
      });
    }
    const std::int64_t count = std::min(kInt8TileN, w.rows - n0);
    for (std::int64_t m = 0; m < m_total; ++m) {
      const auto offset = static_cast<std::uint32_t>(offsets[static_cast<std::size_t>(m)]);
      for (std::int64_t j = 0; j < count; ++j)  // modulo 2^32, exact because the true sum fits
        exact[j] = static_cast<std::int32_t>(
            static_cast<std::uint32_t>(block_acc[static_cast<std::size_t>(m * kInt8TileN + j)]) -
            offset * static_cast<std::uint32_t>(w.row_sums[n0 + j]));
      store(m, n0, count, exact);
    }
  };
  const std::int64_t blocks = (w.rows + kInt8TileN - 1) / kInt8TileN;
  const double block_cost = 2.0 * static_cast<double>(m_total) * static_cast<double>(k_padded) * kInt8TileN;
  parallel_for(blocks, chunk_size(blocks, block_cost), [&](std::int64_t begin, std::int64_t end) {
    std::vector<std::int32_t> block_acc(static_cast<std::size_t>(m_total * kInt8TileN));
    for (std::int64_t b = begin; b < end; ++b) weight_block(b * kInt8TileN, block_acc);
  });
}

}  // namespace shrink::cpu
