// PackedInt8Weight: an int8 Linear weight W[N, K] laid out for the W8A8 kernels (cpu/gemm_int8.hpp), with its row
// sums and scales; pack_int8_rows builds it from int8 rows of any strides. linear/int8.hpp packs it from a
// QuantizedTensor (pack_int8_weight) and checks it before every product.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/gemm_int8.hpp"

namespace shrink::cpu {

// The largest K whose int32 sums cannot overflow, for activations with |x − zx| ≤ largest_centred (128 or 255).
inline std::int64_t int8_max_k(std::int32_t largest_centred) {
  return std::numeric_limits<std::int32_t>::max() / (static_cast<std::int64_t>(largest_centred) * 128);
}

// An int8 weight [N, K] ready for linear_int8: rows padded with zeros to row_stride (a multiple of 64) and to a
// multiple of 8 rows, the row sums Σ_k w[n, k] and one scale per output channel (a per-tensor scale repeated).
struct PackedInt8Weight {
  std::int64_t rows = 0;               // N, output features
  std::int64_t cols = 0;               // K, input features
  std::int64_t row_stride = 0;         // K rounded up to 64
  AlignedVector<std::int8_t> data;     // [round_up(N, 8), row_stride]
  std::vector<std::int32_t> row_sums;  // round_up(N, 8) entries (0 for padding rows)
  std::vector<float> scales;           // N entries: sw[n]
  bool per_channel = false;            // whether the source had one scale per row

  // Bytes a deployment stores: one per weight and the float scales (1 or N), as metrics::quantized_size counts.
  std::int64_t storage_bytes() const { return rows * cols + (per_channel ? rows : 1) * 4; }
  // Whether the fields agree with each other as pack_int8_rows makes them.
  bool consistent() const {
    const std::int64_t padded_rows = detail::round_up(rows, kInt8TileN);
    return rows > 0 && cols > 0 && row_stride == detail::round_up(cols, kInt8KAlign) &&
           static_cast<std::int64_t>(data.size()) == padded_rows * row_stride &&
           static_cast<std::int64_t>(row_sums.size()) == padded_rows &&
           static_cast<std::int64_t>(scales.size()) == rows;
  }
  Int8WeightRows kernel_rows() const { return Int8WeightRows{data.data(), rows, row_stride, row_sums.data()}; }
};

// Packs int8 rows w[n, k] = data[n · row_stride + k · col_stride] with their scales (one, or one per row), which the
// caller has checked; |Σ_k w[n, k]| ≤ 128 K stays far inside int32 for any K the products accept.
inline PackedInt8Weight pack_int8_rows(const std::int8_t* data, std::int64_t rows, std::int64_t cols,
                                       std::int64_t row_stride, std::int64_t col_stride,
                                       const std::vector<float>& scales) {
  PackedInt8Weight p;
  p.rows = rows;
  p.cols = cols;
  p.row_stride = detail::round_up(cols, kInt8KAlign);
  const std::int64_t padded_rows = detail::round_up(rows, kInt8TileN);
  p.data.assign(static_cast<std::size_t>(padded_rows * p.row_stride), 0);
  p.row_sums.assign(static_cast<std::size_t>(padded_rows), 0);
  for (std::int64_t n = 0; n < rows; ++n) {
    std::int8_t* dst = p.data.data() + n * p.row_stride;
    const std::int8_t* src = data + n * row_stride;
    std::int32_t sum = 0;
    for (std::int64_t k = 0; k < cols; ++k) {
      dst[k] = src[k * col_stride];
      sum += dst[k];
    }
    p.row_sums[static_cast<std::size_t>(n)] = sum;
  }
  p.per_channel = scales.size() > 1;
  p.scales.assign(static_cast<std::size_t>(rows), scales.empty() ? 1.0f : scales[0]);
  if (p.per_channel) std::copy(scales.begin(), scales.end(), p.scales.begin());
  return p;
}

}  // namespace shrink::cpu
