// Float comparison helpers for tests: distance in units in the last place, and the size of one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "shrink/core/half.hpp"

namespace shrink::test {

// Number of representable floats between a and b (0 when equal; huge when either is NaN).
inline std::int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::int64_t>::max();
  auto ordered = [](float f) {  // map the float bit pattern onto a monotonic integer line
    std::int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i < 0 ? std::int64_t{std::numeric_limits<std::int32_t>::min()} - i : std::int64_t{i};
  };
  const std::int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// The unit in the last place of float, half or bfloat16 at |v| (its spacing there; at 0, its spacing at 0.5).
template <class T>
double ulp_at(double v) {
  const int mantissa = std::is_same<T, half>::value ? 10 : std::is_same<T, bfloat16>::value ? 7 : 23;
  const int min_exponent = std::is_same<T, half>::value ? -14 : -126;
  int e = 0;
  std::frexp(std::fabs(v), &e);  // |v| = f 2^e, f in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, min_exponent) - mantissa);
}

}  // namespace shrink::test
