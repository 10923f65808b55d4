// The special float values the tests feed in: infinity and a quiet NaN.
#pragma once

#include <limits>

namespace shrink::test {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace shrink::test
