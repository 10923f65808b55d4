// Float comparison helpers for tests: distance in units in the last place.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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

}  // namespace shrink::test
