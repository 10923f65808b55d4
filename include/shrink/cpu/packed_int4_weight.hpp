// PackedInt4Weight: a Linear weight W[N, K] quantized to 4-bit integers with one float scale (and, when affine, one
// zero point) per group of `group_size` consecutive inputs (k) of each output row, stored in column panels for the
// float product kernels (cpu/gemm_panel.hpp), and dequantized block by block inside the product with core/affine.hpp's
// formula:
//   symmetric: w[n, k] = q[n, k] · s[n, k / group_size]
//   affine:    w[n, k] = (q[n, k] − z[n, k / group_size]) · s[n, k / group_size]     (GPTQ / AWQ style)
//   fractional: w[n, k] = (float(q[n, k]) − z[n, k / group_size]) · s[n, k / group_size]  (HQQ: z a float)
//
// Layout: panel p holds rows n = 32p .. 32p + 31, k-major, two rows a byte:
//   panels[(p · K + k) · 16 + j]     = q[32p + 2j, k] in bits 0-3, q[32p + 2j + 1, k] in bits 4-7 (two's complement)
//   scales[(p · G + g) · 32 + j]      = s[32p + j, g]                                   (G = K / group_size groups)
//   zero_points[(p · G + g) · 32 + j] = z[32p + j, g]                                   (affine only; else empty)
//   float_zero_points[(p · G + g) · 32 + j] = z[32p + j, g]                    (fractional only; else empty)
// Rows past N hold zeros (value, scale and zero point). The weight is read once in its compact form: half a byte a
// value plus 4 / group_size bytes of scale (and 1 / group_size of zero point).
//
// Unsigned weights (uint4, q in [0, 15], zp in [0, 15]) are stored as their signed equivalent q − 8 and zp − 8: the
// difference q − zp, hence every dequantized value, is unchanged. A weight whose zero points are all 0 in these terms
// (symmetric int4, symmetric uint4 with zp 8) keeps no zero points and takes the symmetric loop.
// Fractional zero points are kept as given: z − 8 is not exact in float, so the nibble's q − 8 gets its 8 back
// (value_offset) before the float subtraction, and every value is core/affine.hpp's (float(q) − z) · s bit for bit.
//
// linear/weight_only.hpp packs it from a QuantizedTensor (pack_weight_int4: per group along the input axis, per output
// channel, or per tensor).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/packed_weight.hpp"

namespace shrink::cpu {

struct PackedInt4Weight {
  std::int64_t rows = 0;        // N, output features
  std::int64_t cols = 0;        // K, input features
  std::int64_t group_size = 0;  // consecutive inputs sharing a scale; divides K
  AlignedVector<std::uint8_t> panels;  // [ceil(N / 32), K, 16], see the file comment
  std::vector<float> scales;           // [ceil(N / 32), K / group_size, 32]
  std::vector<std::int8_t> zero_points;  // affine: [ceil(N / 32), K / group_size, 32], in [-8, 7]; empty: symmetric
  std::vector<float> float_zero_points;  // fractional: [ceil(N / 32), K / group_size, 32], finite; else empty
  std::int32_t value_offset = 0;         // fractional: q = stored nibble + value_offset (8 for uint4, 0 for int4)

  std::int64_t panel_count() const { return (rows + kPanelWidth - 1) / kPanelWidth; }
  std::int64_t groups() const { return group_size > 0 ? cols / group_size : 0; }
  bool affine() const { return !zero_points.empty(); }
  bool fractional() const { return !float_zero_points.empty(); }
  // Bytes a deployment stores: packed values (rows padded to whole bytes), the float scales and, when affine, one
  // byte a zero point, when fractional four (as metrics::quantized_size counts them).
  std::int64_t storage_bytes() const {
    return rows * int4_row_bytes(cols) + rows * groups() * (fractional() ? 8 : affine() ? 5 : 4);
  }
};

inline constexpr std::int64_t kInt4PanelBytes = kPanelWidth / 2;  // bytes of one panel row (32 values)

// Writes the floats of panel p, rows k0 .. k0 + kc − 1 (row stride 32): dst[(k − k0) · 32 + j] = q · s, or
// (q − z) · s when affine (core/affine.hpp's dequantize_value: the integer difference, exact in float, times s), or
// (float(q) − z) · s when fractional (its FractionalAffineParams formula).
inline void dequantize_int4_panel(const PackedInt4Weight& w, std::int64_t p, std::int64_t k0, std::int64_t kc,
                                  float* dst) {
  const std::uint8_t* bytes = w.panels.data() + (p * w.cols + k0) * kInt4PanelBytes;
  const float* group_scales = w.scales.data() + p * w.groups() * kPanelWidth;
  if (w.fractional()) {
    const float* group_zeros = w.float_zero_points.data() + p * w.groups() * kPanelWidth;
    auto value = [](std::int32_t q, float z, float s) {
      FractionalAffineParams params;  // only scale and zero_point enter the dequantization
      params.scale = s;
      params.zero_point = z;
      return dequantize_value(q, params);
    };
    for (std::int64_t k = k0; k < k0 + kc; ++k, bytes += kInt4PanelBytes, dst += kPanelWidth) {
      const float* s = group_scales + (k / w.group_size) * kPanelWidth;
      const float* z = group_zeros + (k / w.group_size) * kPanelWidth;
      for (int j = 0; j < kInt4PanelBytes; ++j) {
        dst[2 * j] = value(low_nibble_signed(bytes[j]) + w.value_offset, z[2 * j], s[2 * j]);
        dst[2 * j + 1] = value(high_nibble_signed(bytes[j]) + w.value_offset, z[2 * j + 1], s[2 * j + 1]);
      }
    }
    return;
  }
  if (!w.affine()) {
    for (std::int64_t k = k0; k < k0 + kc; ++k, bytes += kInt4PanelBytes, dst += kPanelWidth) {
      const float* s = group_scales + (k / w.group_size) * kPanelWidth;
      for (int j = 0; j < kInt4PanelBytes; ++j) {
        dst[2 * j] = static_cast<float>(low_nibble_signed(bytes[j])) * s[2 * j];
        dst[2 * j + 1] = static_cast<float>(high_nibble_signed(bytes[j])) * s[2 * j + 1];
      }
    }
    return;
  }
  const std::int8_t* group_zeros = w.zero_points.data() + p * w.groups() * kPanelWidth;
  for (std::int64_t k = k0; k < k0 + kc; ++k, bytes += kInt4PanelBytes, dst += kPanelWidth) {
    const float* s = group_scales + (k / w.group_size) * kPanelWidth;
    const std::int8_t* z = group_zeros + (k / w.group_size) * kPanelWidth;
    for (int j = 0; j < kInt4PanelBytes; ++j) {
      dst[2 * j] = static_cast<float>(low_nibble_signed(bytes[j]) - z[2 * j]) * s[2 * j];
      dst[2 * j + 1] = static_cast<float>(high_nibble_signed(bytes[j]) - z[2 * j + 1]) * s[2 * j + 1];
    }
  }
}

}  // namespace shrink::cpu
