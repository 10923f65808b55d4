// Axis arithmetic: normalising a possibly negative axis and viewing a shape as [outer, channels, inner].
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"

namespace shrink {

// Maps axis in [-rank, rank) to [0, rank); anything else is an error naming `argument`.
inline int normalize_axis(int axis, int rank, const char* function, const char* argument = "axis") {
  if (rank == 0 || axis < -rank || axis >= rank)
    fail(function, argument, axis,
         rank == 0 ? std::string("a tensor of rank >= 1 to have an axis")
                   : "an axis in [" + std::to_string(-rank) + ", " + std::to_string(rank) + ")");
  return axis < 0 ? axis + rank : axis;
}

// A contiguous tensor seen as [outer, channels, inner] around one axis.
struct AxisSplit {
  std::int64_t outer = 1;
  std::int64_t channels = 1;
  std::int64_t inner = 1;
};

// `axis` must already be normalised.
inline AxisSplit split_at_axis(const Shape& shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < axis; ++d) s.outer *= shape.values[d];
  s.channels = shape.values[axis];
  for (int d = axis + 1; d < shape.rank; ++d) s.inner *= shape.values[d];
  return s;
}

}  // namespace shrink
