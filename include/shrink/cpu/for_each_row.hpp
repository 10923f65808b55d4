// Walks strided tensors row by row (rows of the last dimension), for loops over views of any layout.
#pragma once

#include <cstdint>

#include "shrink/core/view.hpp"

namespace shrink::cpu {

// Elements in one row: the last dimension's size, 1 for a scalar (rank 0).
inline std::int64_t row_length(const Shape& shape) { return shape.rank == 0 ? 1 : shape.values[shape.rank - 1]; }

// Step between neighbours in a row: the last stride, 1 for a scalar.
inline std::int64_t row_stride(const Strides& strides) { return strides.rank == 0 ? 1 : strides.values[strides.rank - 1]; }

// Calls fn(row, offset_a, offset_b) for every row of `shape` in row-major order, with the element offset
// of the row's first element under two stride sets (two views of one shape read in lockstep).
// Row r covers the flat row-major indices [r * row_length, (r + 1) * row_length).
template <class Fn>
void for_each_row(const Shape& shape, const Strides& strides_a, const Strides& strides_b, Fn&& fn) {
  const std::int64_t length = row_length(shape);
  if (length == 0 || shape.product() == 0) return;
  const std::int64_t rows = shape.product() / length;
  const int outer_rank = shape.rank == 0 ? 0 : shape.rank - 1;
  std::int64_t index[kMaxRank] = {};
  std::int64_t offset_a = 0;
  std::int64_t offset_b = 0;
  for (std::int64_t row = 0; row < rows; ++row) {
    fn(row, offset_a, offset_b);
    for (int d = outer_rank - 1; d >= 0; --d) {  // odometer step over the leading dimensions
      offset_a += strides_a.values[d];
      offset_b += strides_b.values[d];
      if (++index[d] < shape.values[d]) break;
      offset_a -= index[d] * strides_a.values[d];
      offset_b -= index[d] * strides_b.values[d];
      index[d] = 0;
    }
  }
}

// One view: fn(row, offset).
template <class Fn>
void for_each_row(const Shape& shape, const Strides& strides, Fn&& fn) {
  for_each_row(shape, strides, strides, [&](std::int64_t row, std::int64_t offset, std::int64_t) { fn(row, offset); });
}

}  // namespace shrink::cpu
