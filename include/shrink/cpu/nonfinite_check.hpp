// Finding the first NaN or +-inf element of a strided host view, and the error that names it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/reduce.hpp"

namespace shrink::cpu {

// Where the first non-finite element sits: its row-major index and its memory offset.
struct NonfiniteElement {
  std::int64_t index = -1;  // -1 when every element is finite
  std::int64_t offset = 0;
};

inline NonfiniteElement first_nonfinite_element(const TensorView<const float>& v) {
  if (v.is_contiguous()) {  // the SIMD scan
    const std::int64_t at = first_nonfinite(v.data(), v.numel());
    return NonfiniteElement{at, at < 0 ? 0 : at};
  }
  const std::int64_t length = row_length(v.shape());
  const std::int64_t stride = row_stride(v.strides());
  NonfiniteElement found;
  for_each_row(v.shape(), v.strides(), [&](std::int64_t row, std::int64_t offset) {
    if (found.index >= 0) return;
    for (std::int64_t i = 0; i < length; ++i)
      if (!std::isfinite(v.data()[offset + i * stride])) {
        found.index = row * length + i;
        found.offset = offset + i * stride;
        return;
      }
  });
  return found;
}

// Throws "<function>: <argument>[i] = <value>: expected finite values" for the first bad element.
inline void require_finite(const TensorView<const float>& v, const char* function, const char* argument) {
  const NonfiniteElement at = first_nonfinite_element(v);
  if (at.index < 0) return;
  fail(function, (std::string(argument) + "[" + std::to_string(at.index) + "]").c_str(), v.data()[at.offset],
       "finite values (the index is row-major)");
}

// The same check for n contiguous values.
inline void require_finite(const float* x, std::int64_t n, const char* function, const char* argument) {
  require_finite(TensorView<const float>(x, Shape{n}), function, argument);
}

}  // namespace shrink::cpu
