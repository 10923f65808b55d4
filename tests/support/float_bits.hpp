// Float bit patterns: the float whose bits a golden file stores as an integer (shrink::float_to_bits goes back).
#pragma once

#include <cstdint>

#include "shrink/core/half.hpp"

namespace shrink::test {

// The float whose IEEE 754 bits a golden file stores as an integer.
inline float from_bits(std::int64_t bits) { return bits_to_float(static_cast<std::uint32_t>(bits)); }

}  // namespace shrink::test
