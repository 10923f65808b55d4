// Test helper: the elements of one channel of a contiguous [outer, channels, inner] tensor, in order.
#pragma once

#include <cstdint>
#include <vector>

namespace shrink::test {

inline std::vector<float> channel_slice(const std::vector<float>& x, std::int64_t outer, std::int64_t channels,
                                        std::int64_t inner, std::int64_t channel) {
  std::vector<float> slice;
  slice.reserve(static_cast<std::size_t>(outer * inner));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) slice.push_back(x[static_cast<std::size_t>((o * channels + channel) * inner + i)]);
  return slice;
}

}  // namespace shrink::test
