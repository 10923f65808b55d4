// Applying a mask: zero the pruned weights, or the pruned entries of a gradient (so they stay pruned).
//
// For any element type with a zero value: float, double, half, bfloat16, int8, int32. Views may be
// strided; the mask indexes elements in row-major order of the view's shape. The shape check runs
// before anything is written.
#pragma once

#include <cstdint>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/prune/mask.hpp"

namespace shrink::prune {

namespace detail {

template <class T>
void zero_pruned(const TensorView<T>& values, const Mask& mask, const char* function, const char* argument) {
  require_host_view(values, function, argument);
  if (values.shape() != mask.shape())
    fail(function, "mask.shape", to_string(mask.shape()), std::string("the shape of ") + argument + ", " +
                                                              to_string(values.shape()));
  const std::int64_t length = cpu::row_length(values.shape());
  const std::int64_t stride = cpu::row_stride(values.strides());
  const std::uint64_t* words = mask.words().data();
  cpu::for_each_row(values.shape(), values.strides(), [&](std::int64_t row, std::int64_t offset) {
    T* v = values.data() + offset;
    std::int64_t flat = row * length;
    for (std::int64_t i = 0; i < length; ++i, ++flat) {
      const std::uint64_t word = words[flat >> 6];
      if (word == ~std::uint64_t{0} && (flat & 63) == 0 && i + 64 <= length) {  // 64 kept: skip them
        i += 63;
        flat += 63;
        continue;
      }
      if (!((word >> (flat & 63)) & 1u)) v[i * stride] = T{};
    }
  });
}

}  // namespace detail

// weights[i] = 0 wherever the mask prunes element i.
template <class T>
void apply_mask(const TensorView<T>& weights, const Mask& mask) {
  detail::zero_pruned(weights, mask, "shrink::prune::apply_mask", "weights");
}

// gradient[i] = 0 wherever the mask prunes element i: the update of a pruned weight is dropped.
template <class T>
void mask_gradient(const TensorView<T>& gradient, const Mask& mask) {
  detail::zero_pruned(gradient, mask, "shrink::prune::mask_gradient", "gradient");
}

}  // namespace shrink::prune
