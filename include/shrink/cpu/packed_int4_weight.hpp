// PackedInt4Weight: a Linear weight W[N, K] quantized to signed 4-bit integers with one float scale per group of
// `group_size` consecutive inputs (k) of each output row, stored in column panels for the float product kernels
// (cpu/gemm_panel.hpp), and dequantized block by block inside the product: w[n, k] = q[n, k] · s[n, k / group_size].
//
// Layout: panel p holds rows n = 32p .. 32p + 31, k-major, two rows a byte:
//   panels[(p · K + k) · 16 + j] = q[32p + 2j, k] in bits 0-3, q[32p + 2j + 1, k] in bits 4-7 (two's complement)
//   scales[(p · G + g) · 32 + j] = s[32p + j, g]                                   (G = K / group_size groups)
// Rows past N hold zeros (value and scale). The weight is read once in its compact form: half a byte a value plus
// 4 / group_size bytes of scale.
//
// Only symmetric int4 (zero points 0) is packed: it is what the quantization module produces for per-group weight
// schemes, and a zero point would need either a second term per group (z · s · Σ x) or a wider dequantization on
// every path (CPU and GPU); asymmetric (uint4 / affine) weights are refused with a reason.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cpu {

struct PackedInt4Weight {
  std::int64_t rows = 0;        // N, output features
  std::int64_t cols = 0;        // K, input features
  std::int64_t group_size = 0;  // consecutive inputs sharing a scale; divides K
  AlignedVector<std::uint8_t> panels;  // [ceil(N / 32), K, 16], see the file comment
  std::vector<float> scales;           // [ceil(N / 32), K / group_size, 32]

  std::int64_t panel_count() const { return (rows + kPanelWidth - 1) / kPanelWidth; }
  std::int64_t groups() const { return group_size > 0 ? cols / group_size : 0; }
  // Bytes a deployment stores: packed values (rows padded to whole bytes) and the float scales.
  std::int64_t storage_bytes() const { return rows * int4_row_bytes(cols) + rows * groups() * 4; }
};

namespace detail {

inline constexpr std::int64_t kInt4PanelBytes = kPanelWidth / 2;  // bytes of one panel row (32 values)

// Writes the floats of panel p, rows k0 .. k0 + kc − 1 (row stride 32): dst[(k − k0) · 32 + j] = q · s.
inline void dequantize_int4_panel(const PackedInt4Weight& w, std::int64_t p, std::int64_t k0, std::int64_t kc,
                                  float* dst) {
  const std::uint8_t* bytes = w.panels.data() + (p * w.cols + k0) * kInt4PanelBytes;
  const float* group_scales = w.scales.data() + p * w.groups() * kPanelWidth;
  for (std::int64_t k = k0; k < k0 + kc; ++k, bytes += kInt4PanelBytes, dst += kPanelWidth) {
    const float* s = group_scales + (k / w.group_size) * kPanelWidth;
    for (int j = 0; j < kInt4PanelBytes; ++j) {
      dst[2 * j] = static_cast<float>(low_nibble_signed(bytes[j])) * s[2 * j];
      dst[2 * j + 1] = static_cast<float>(high_nibble_signed(bytes[j])) * s[2 * j + 1];
    }
  }
}

}  // namespace detail

// Packs a symmetric int4 weight [N, K] quantized per group along the input axis (scheme per_group, axis 1 or -1,
// zero points 0), as quant::quantize writes it (packed nibbles, scales [N, K / group_size]).
inline PackedInt4Weight pack_weight_int4(const quant::QuantizedTensor& w) {
  const char* fn = "shrink::cpu::pack_weight_int4";
  if (w.scheme.dtype != quant::QuantDtype::int4)
    fail(fn, "w.scheme.dtype", quant::to_string(w.scheme.dtype), "int4 (signed, symmetric, per group)");
  if (w.shape.rank != 2) fail(fn, "w.shape", to_string(w.shape), "a 2-D weight [N, K]");
  if (w.shape.product() == 0) fail(fn, "w.shape", to_string(w.shape), "at least one element");
  if (w.scheme.granularity != quant::Granularity::per_group)
    fail(fn, "w.scheme.granularity", quant::to_string(w.scheme.granularity), "per_group (along the input axis)");
  if (w.scheme.axis != 1 && w.scheme.axis != -1)
    fail(fn, "w.scheme.axis", w.scheme.axis, "axis 1 (groups of consecutive inputs k of a row)");
  quant::validate_qparams(w.qparams, w.scheme, w.shape, fn);  // the group size divides K, scales finite and > 0
  const std::int64_t n_total = w.shape.values[0], k_total = w.shape.values[1];
  if (static_cast<std::int64_t>(w.data.size()) != n_total * int4_row_bytes(k_total))
    fail(fn, "w.data.size()", w.data.size(),
         std::to_string(n_total * int4_row_bytes(k_total)) + " bytes (rows of ceil(K / 2) packed bytes)");
  for (std::size_t i = 0; i < w.qparams.zero_point.size(); ++i)
    if (w.qparams.zero_point[i] != 0)
      fail(fn, ("w.qparams.zero_point[" + std::to_string(i) + "]").c_str(), w.qparams.zero_point[i],
           "0: a symmetric int4 weight");

  PackedInt4Weight p;
  p.rows = n_total;
  p.cols = k_total;
  p.group_size = w.scheme.group_size;
  p.panels.assign(static_cast<std::size_t>(p.panel_count() * k_total * detail::kInt4PanelBytes), std::uint8_t{0});
  p.scales.assign(static_cast<std::size_t>(p.panel_count() * p.groups() * kPanelWidth), 0.0f);
  const std::int64_t row_bytes = int4_row_bytes(k_total);
  for (std::int64_t n = 0; n < n_total; ++n) {
    const std::int64_t panel = n / kPanelWidth, lane = n % kPanelWidth;
    const std::uint8_t* row = w.data.data() + n * row_bytes;
    std::uint8_t* dst = p.panels.data() + panel * k_total * detail::kInt4PanelBytes + lane / 2;
    const int shift = lane % 2 == 0 ? 0 : 4;
    for (std::int64_t k = 0; k < k_total; ++k)
      dst[k * detail::kInt4PanelBytes] |= static_cast<std::uint8_t>((load_int4(row, k, true) & 0xF) << shift);
    for (std::int64_t g = 0; g < p.groups(); ++g)
      p.scales[static_cast<std::size_t>((panel * p.groups() + g) * kPanelWidth + lane)] =
          w.qparams.scale[static_cast<std::size_t>(n * p.groups() + g)];
  }
  return p;
}

}  // namespace shrink::cpu
