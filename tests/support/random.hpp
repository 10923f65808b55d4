// Random test inputs: reproducible normal values.
#pragma once

#include <cstddef>
#include <cstdint>
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

// n values drawn from normal(mean, sigma) with a fixed seed, none exactly 0; the default mean shifts them so that
// the range is asymmetric (what an affine scheme or a calibrator must see).
inline std::vector<float> random_nonzero_normal(std::int64_t n, std::uint32_t seed, float mean = 0.3f,
                                                float sigma = 2.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(mean, sigma);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) {
    do v = normal(rng);
    while (v == 0.0f);
  }
  return x;
}

}  // namespace shrink::test
