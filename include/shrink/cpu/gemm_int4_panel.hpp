// The float product over a per-group int4 weight (cpu/packed_int4_weight.hpp): Y[M, N] = X[M, K] · Wᵀ with
// w[n, k] = q[n, k] · s[n, k / group], or (q[n, k] − z[n, k / group]) · s[n, k / group] when affine, through the panel
// driver of cpu/gemm_panel.hpp. With AVX2 and one row of X (decode) the nibbles are converted and multiplied with no
// per-value scale or zero point, both applied once a group (int4_row_grouped_avx2); with two rows each panel row is
// dequantized in registers and multiplied at once; otherwise a panel block (256 k × 32 outputs, kept in L1) is
// dequantized once for all M rows (AVX2 vector code, or the scalar loop; the zero point costs one integer subtraction
// a value there) and the float tiles pass over it. The weight leaves memory once, at half a byte a value, whatever M.
// Every dequantized value is the scalar loop's bit for bit; the result is that of dequantize-then-float-GEMM up to the
// order and grouping of the float operations.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/packed_int4_weight.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

#if defined(SHRINK_CPU_AVX2_DISPATCH)
namespace detail {

// One panel row of an int4 weight as AVX2 floats, the scalar loop's values bit for bit: the row's 16 bytes split into
// their 32 signed nibbles in output order (low nibble first), less the zero points when affine (an exact int8
// difference), widened to int32, converted to float (exact) and multiplied by the scales: one rounding, as
// dequantize_int4_panel. Fractional zero points: (float(q) − z) · s, a subtraction then a multiplication.
// Walks the rows of a panel from k0 on, stepping the group at each boundary (no division a row).
class Int4RowsAvx2 {
 public:
  SHRINK_TARGET_AVX2 Int4RowsAvx2(const PackedInt4Weight& w, std::int64_t p, std::int64_t k0)
      : bytes_(w.panels.data() + (p * w.cols + k0) * kInt4PanelBytes),
        scales_(w.scales.data() + (p * w.groups() + k0 / w.group_size) * kPanelWidth),
        zeros_(w.affine() ? w.zero_points.data() + (p * w.groups() + k0 / w.group_size) * kPanelWidth : nullptr),
        float_zeros_(w.fractional() ? w.float_zero_points.data() + (p * w.groups() + k0 / w.group_size) * kPanelWidth
                                    : nullptr),
        group_size_(w.group_size),
        left_in_group_(w.group_size - k0 % w.group_size),
        offset_(_mm_set1_epi8(static_cast<char>(w.value_offset))) {}

  // The next row's 32 values: b[v] holds outputs 8v .. 8v + 7.
  SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE void next(__m256 (&b)[4]) {
    const __m128i low_bits = _mm_set1_epi8(0x0F), sign = _mm_set1_epi8(0x08);
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes_));
    // Nibble v as a signed value: (v ^ 8) − 8.
    const __m128i low = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(packed, low_bits), sign), sign);
    const __m128i high = _mm_sub_epi8(_mm_xor_si128(_mm_and_si128(_mm_srli_epi16(packed, 4), low_bits), sign), sign);
    __m128i q[2] = {_mm_unpacklo_epi8(low, high), _mm_unpackhi_epi8(low, high)};  // outputs 0-15, 16-31
    if (float_zeros_ != nullptr) {
      q[0] = _mm_add_epi8(q[0], offset_);
      q[1] = _mm_add_epi8(q[1], offset_);
    } else if (zeros_ != nullptr) {
      q[0] = _mm_sub_epi8(q[0], _mm_loadu_si128(reinterpret_cast<const __m128i*>(zeros_)));
      q[1] = _mm_sub_epi8(q[1], _mm_loadu_si128(reinterpret_cast<const __m128i*>(zeros_ + 16)));
    }
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m128i eight = v % 2 == 0 ? q[v / 2] : _mm_srli_si128(q[v / 2], 8);
      __m256 values = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight));
      if (float_zeros_ != nullptr) values = _mm256_sub_ps(values, _mm256_loadu_ps(float_zeros_ + 8 * v));
      b[v] = _mm256_mul_ps(values, _mm256_loadu_ps(scales_ + 8 * v));
    }
    bytes_ += kInt4PanelBytes;
    if (--left_in_group_ == 0) {
      left_in_group_ = group_size_;
      scales_ += kPanelWidth;
      if (zeros_ != nullptr) zeros_ += kPanelWidth;
      if (float_zeros_ != nullptr) float_zeros_ += kPanelWidth;
    }
  }

 private:
  const std::uint8_t* bytes_;
  const float* scales_;
  const std::int8_t* zeros_;
  const float* float_zeros_;
  std::int64_t group_size_;
  std::int64_t left_in_group_;
  __m128i offset_;
};

}  // namespace detail

// dequantize_int4_panel with AVX2 (detail::Int4RowsAvx2), the same floats bit for bit.
SHRINK_TARGET_AVX2 inline void dequantize_int4_panel_avx2(const PackedInt4Weight& w, std::int64_t p, std::int64_t k0,
                                                          std::int64_t kc, float* dst) {
  detail::Int4RowsAvx2 rows(w, p, k0);
  for (std::int64_t k = 0; k < kc; ++k, dst += kPanelWidth) {
    __m256 b[4];
    rows.next(b);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(dst + 8 * v, b[v]);
  }
}

// y[i, 0 .. valid) = Σ_k x[i, k] · w[32p + ·, k] for i < MR ≤ 2 over all of K, each panel row dequantized in registers
// (two rows of 4 accumulators leave room for the row's values and the unpacking).
template <int MR>
SHRINK_TARGET_AVX2_FMA_F16C void int4_tile_avx2(const float* x, std::int64_t ldx, const PackedInt4Weight& w,
                                                std::int64_t p, float* y, std::int64_t ldy, int valid) {
  static_assert(MR >= 1 && MR <= 2, "2 rows of 4 accumulators");
  detail::Int4RowsAvx2 rows(w, p, 0);
  tile_avx2<MR>(x, ldx, rows, w.cols, y, ldy, valid, false);
}

// Panel p of an int4 weight as the one-row kernels read it: its bytes, and per group its 32 scales and zero points.
struct Int4PanelGroups {
  const std::uint8_t* bytes;
  const float* scales;
  const std::int8_t* zeros;  // affine, else null
  const float* float_zeros;  // fractional, else null
  std::int64_t groups;

  Int4PanelGroups(const PackedInt4Weight& w, std::int64_t p)
      : bytes(w.panels.data() + p * w.cols * kInt4PanelBytes),
        scales(w.scales.data() + p * w.groups() * kPanelWidth),
        zeros(w.affine() ? w.zero_points.data() + p * w.groups() * kPanelWidth : nullptr),
        float_zeros(w.fractional() ? w.float_zero_points.data() + p * w.groups() * kPanelWidth : nullptr),
        groups(w.groups()) {}

  // c[v] += s · (sums[v] − (base_shift + z) · x_sum) for outputs 8v .. 8v + 7 of group g.
  SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void add_group(std::int64_t g, __m256 base_shift, __m256 x_sum,
                                                                 const __m256 (&sums)[4], __m256 (&c)[4]) const {
    const float* s = scales + g * kPanelWidth;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      __m256 shift = base_shift;
      if (zeros != nullptr)
        shift = _mm256_add_ps(shift, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(
                                         reinterpret_cast<const __m128i*>(zeros + g * kPanelWidth + 8 * v)))));
      if (float_zeros != nullptr) shift = _mm256_add_ps(shift, _mm256_loadu_ps(float_zeros + g * kPanelWidth + 8 * v));
      c[v] = _mm256_fmadd_ps(_mm256_loadu_ps(s + 8 * v), _mm256_fnmadd_ps(shift, x_sum, sums[v]), c[v]);
    }
  }
};

// One row of X (decode) over all of K, the scale and zero point applied once a group instead of once a value:
//   y[j] = Σ_g s[j, g] · (Σ_{k in g} x[k] · u[j, k] − c[j, g] · Σ_{k in g} x[k])
// with u = stored nibble ^ 8 (0..15: the signed nibble q is u − 8) and c = 8 + z (affine), 8 (symmetric), or
// 8 − value_offset + z (fractional), so that (q − z) · s = (u − c) · s. The same product as dequantize-then-GEMM up to
// the order and grouping of the float operations (a float sum of x · u per group, then one scaling): per row of 32
// values, the nibbles are converted and multiplied, with no per-value zero point or scale.
SHRINK_TARGET_AVX2_FMA_F16C inline void int4_row_grouped_avx2(const float* x, const PackedInt4Weight& w, std::int64_t p,
                                                              float* y, int valid) {
  const Int4PanelGroups panel(w, p);
  const std::uint8_t* bytes = panel.bytes;
  const __m256 base_shift =
      _mm256_set1_ps(8.0f - static_cast<float>(panel.float_zeros != nullptr ? w.value_offset : 0));
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x88)), low_bits = _mm_set1_epi8(0x0F);
  __m256 c[4];
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) c[v] = _mm256_setzero_ps();
  for (std::int64_t g = 0; g < panel.groups; ++g) {
    __m256 acc[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) acc[v] = _mm256_setzero_ps();
    __m256 x_sum = _mm256_setzero_ps();
    const float* xg = x + g * w.group_size;
    for (std::int64_t k = 0; k < w.group_size; ++k, bytes += kInt4PanelBytes) {
      const __m128i packed = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)), flip);
      const __m128i low = _mm_and_si128(packed, low_bits);
      const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_bits);
      const __m128i u[2] = {_mm_unpacklo_epi8(low, high), _mm_unpackhi_epi8(low, high)};  // outputs 0-15, 16-31
      const __m256 a = _mm256_broadcast_ss(xg + k);
      x_sum = _mm256_add_ps(x_sum, a);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m128i eight = v % 2 == 0 ? u[v / 2] : _mm_srli_si128(u[v / 2], 8);
        acc[v] = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight)), acc[v]);
      }
    }
    panel.add_group(g, base_shift, x_sum, acc, c);
  }
  const __m256(&rows)[1][4] = reinterpret_cast<const __m256(&)[1][4]>(c);
  store_tile_avx2<1>(rows, y, 0, valid, false);
}

// int4_row_grouped_avx2's product with the nibbles multiplied where they lie, two rows of the panel (k, k + 1) at a
// time. Their 32 bytes are 8 dwords, dword j holding output 8 (j mod 4) + i of row k + j / 4 in bits 4i .. 4i + 3.
// Nibble i masked in place is the integer v · 16^i, converted exactly, and acc_i += x · (v · 16^i) is 16^i times
// x · v with the same rounding (a power of two), undone once a group: three vector operations for 8 values and no
// shuffle. Nibbles 0-6 are flipped to v = u (0..15); nibble 7, masked at bits 28-31, reads as the signed q = u − 8
// itself, so its c is 8 less. The lanes then hold outputs i, 8 + i, 16 + i, 24 + i of both rows: the rows' sums are
// added and a 4 × 8 transpose puts them in output order. Needs an even group size and no partial sum past float's
// range (int4_rows_in_place_fit).
SHRINK_TARGET_AVX2_FMA_F16C inline void int4_row_in_place_avx2(const float* x, const PackedInt4Weight& w,
                                                               std::int64_t p, float* y, int valid) {
  const Int4PanelGroups panel(w, p);
  const std::uint8_t* bytes = panel.bytes;
  const float offset = static_cast<float>(panel.float_zeros != nullptr ? w.value_offset : 0);
  // c of outputs 8v + i before the zero point: 8 − offset, and − offset for i = 7.
  const __m256 base_shift = _mm256_sub_ps(_mm256_setr_ps(8, 8, 8, 8, 8, 8, 8, 0), _mm256_set1_ps(offset));
  const __m256i flip = _mm256_set1_epi32(0x08888888);
  __m256 c[4];
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) c[v] = _mm256_setzero_ps();
  for (std::int64_t g = 0; g < panel.groups; ++g) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    __m256 x_sum = _mm256_setzero_ps();
    const float* xg = x + g * w.group_size;
    for (std::int64_t k = 0; k < w.group_size; k += 2, bytes += 2 * kInt4PanelBytes) {
      const __m256i packed = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)), flip);
      const __m256 a = _mm256_set_m128(_mm_broadcast_ss(xg + k + 1), _mm_broadcast_ss(xg + k));
      x_sum = _mm256_add_ps(x_sum, a);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i nibble = _mm256_and_si256(packed, _mm256_set1_epi32(static_cast<int>(0xFu << (4 * i))));
        acc[i] = _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(nibble), acc[i]);
      }
    }
    // The two rows added and 16^-i undone: part[i] holds outputs i, 8 + i, 16 + i, 24 + i.
    __m128 part[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      part[i] = _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(acc[i]), _mm256_extractf128_ps(acc[i], 1)),
                           _mm_set1_ps(1.0f / static_cast<float>(1u << (4 * i))));
    const __m128 sum4 = _mm_add_ps(_mm256_castps256_ps128(x_sum), _mm256_extractf128_ps(x_sum, 1));
    const __m256 sum = _mm256_set_m128(sum4, sum4);
    // A 4 × 4 transpose in each half of t_i = (part[i], part[i + 4]): row v is outputs 8v .. 8v + 7.
    const __m256 t0 = _mm256_set_m128(part[4], part[0]), t1 = _mm256_set_m128(part[5], part[1]);
    const __m256 t2 = _mm256_set_m128(part[6], part[2]), t3 = _mm256_set_m128(part[7], part[3]);
    const __m256 u0 = _mm256_unpacklo_ps(t0, t1), u1 = _mm256_unpackhi_ps(t0, t1);
    const __m256 u2 = _mm256_unpacklo_ps(t2, t3), u3 = _mm256_unpackhi_ps(t2, t3);
    const __m256 rows[4] = {_mm256_shuffle_ps(u0, u2, 0x44), _mm256_shuffle_ps(u0, u2, 0xEE),
                            _mm256_shuffle_ps(u1, u3, 0x44), _mm256_shuffle_ps(u1, u3, 0xEE)};
    panel.add_group(g, base_shift, sum, rows, c);
  }
  const __m256(&out)[1][4] = reinterpret_cast<const __m256(&)[1][4]>(c);
  store_tile_avx2<1>(out, y, 0, valid, false);
}
#endif

// Whether int4_row_in_place_avx2 takes a row of X whose largest magnitude is max_abs_x: an even group size, and its
// partial sums, at most max |x| · 15 · 2^28 · group_size, below 2^116 (far from float's 2^128). NaN or inf: no.
inline bool int4_rows_in_place_fit(const PackedInt4Weight& w, float max_abs_x) {
  return w.group_size % 2 == 0 && max_abs_x <= 0x1p84f / static_cast<float>(w.group_size);
}

// A PackedInt4Weight as a weight source of the panel driver (cpu/gemm_panel.hpp): each block dequantized into the
// driver's buffer.
struct Int4PanelSource {
  static constexpr int stream_rows_avx2 = 2;  // one or two rows (decode): each panel row dequantized in registers
  const PackedInt4Weight& weight;
  std::int64_t rows = weight.rows, cols = weight.cols;
  std::int64_t block_k = kPanelBlockK;
  bool in_place = false;  // one row of X streams through int4_row_in_place_avx2 (int4_rows_in_place_fit)

  const float* floats(std::int64_t p, std::int64_t k0, std::int64_t kc, float* buffer) const {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
    if (use_avx2()) {
      dequantize_int4_panel_avx2(weight, p, k0, kc, buffer);
      return buffer;
    }
#endif
    dequantize_int4_panel(weight, p, k0, kc, buffer);
    return buffer;
  }
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  template <int MR>
  void stream_avx2(const float* x, std::int64_t ldx, std::int64_t p, float* y, std::int64_t ldy, int valid) const {
    if constexpr (MR > 1)
      int4_tile_avx2<MR>(x, ldx, weight, p, y, ldy, valid);
    else if (in_place)
      int4_row_in_place_avx2(x, weight, p, y, valid);
    else
      int4_row_grouped_avx2(x, weight, p, y, valid);
  }
#endif
  void prefetch(std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) const {
    prefetch_part_l2(weight.panels.data() + (p * cols + k0) * kInt4PanelBytes,
                     static_cast<std::size_t>(kc * kInt4PanelBytes), step, steps);
  }
};

// y[m, n] = op(Σ_k x[m, k] · w[n, k]) (the epilogue operation in float), w dequantized as above, for the M rows of x
// (row stride ldx, contiguous along k) into y (row stride ldy). Arguments are checked by the caller. Runs on the
// current executor, cut as cpu/gemm_panel.hpp's for_each_panel_part cuts it (the same bits on any executor).
inline void gemm_int4_panels(const float* x, std::int64_t ldx, std::int64_t m_total, const PackedInt4Weight& w,
                             float* y, std::int64_t ldy, const EpilogueOp& op) {
  Int4PanelSource source{w};
  if (m_total == 1) {
    float max_abs_x = 0.0f;
    for (std::int64_t k = 0; k < w.cols; ++k) max_abs_x = std::max(max_abs_x, std::fabs(x[k]));
    source.in_place = int4_rows_in_place_fit(w, max_abs_x);
  }
  gemm_panel_source(x, ldx, m_total, source, y, ldy, op);
}

}  // namespace shrink::cpu
