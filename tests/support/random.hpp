// Random test inputs: reproducible normal values.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace shrink::test {

// n values drawn from normal(0, scale) with a fixed seed.
inline std::vector<float> random_values(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

}  // namespace shrink::test
