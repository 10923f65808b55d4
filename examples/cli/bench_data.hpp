// The data `shrink bench` multiplies: LLM-like weights and activations, reproducible from a seed.
//
// Weights [N, K]: normal(0, 0.02), one value in a thousand ten times larger (the outliers trained layers have).
// Activations [M, K]: Laplace(0, 1) (a heavy tail), with every 512th input channel twenty times larger (the few hot
// channels of transformer activations, which per-token INT8 pays for).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace shrink::cli {

inline std::vector<float> llm_like_weights(std::int64_t n, std::int64_t k, unsigned seed) {
  std::vector<float> w(static_cast<std::size_t>(n * k));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_int_distribution<int> per_mille(0, 999);
  for (float& v : w) v = normal(rng) * (per_mille(rng) == 0 ? 10.0f : 1.0f);
  return w;
}

inline std::vector<float> llm_like_activations(std::int64_t m, std::int64_t k, unsigned seed) {
  std::vector<float> x(static_cast<std::size_t>(m * k));
  std::mt19937 rng(seed);
  std::exponential_distribution<float> exponential(1.0f);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const float laplace = exponential(rng) - exponential(rng);  // the difference of two Exp(1) is Laplace(0, 1)
      x[static_cast<std::size_t>(r * k + c)] = laplace * (c % 512 == 7 ? 20.0f : 1.0f);
    }
  return x;
}

}  // namespace shrink::cli
