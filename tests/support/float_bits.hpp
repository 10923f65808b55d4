// Float bit patterns: the integer a golden file stores for a float, and the bits of a float to compare exactly.
#pragma once

#include <cstdint>

#include "shrink/core/half.hpp"

namespace shrink::test {

// The float whose IEEE 754 bits a golden file stores as an integer.
inline float from_bits(std::int64_t bits) { return bits_to_float(static_cast<std::uint32_t>(bits)); }

inline std::uint32_t bits_of(float v) { return float_to_bits(v); }

}  // namespace shrink::test
