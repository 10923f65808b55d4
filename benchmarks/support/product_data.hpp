// The operands of the CPU product benchmarks (bench_matmul.cpp, bench_threads.cpp), the same in both: a Linear
// layer's weight [N, K] drawn from normal(0, 0.02) and activations [M, K] from normal(0, 1), with fixed seeds.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace shrink::bench {

inline std::vector<float> normal_values(std::int64_t count, unsigned seed, float stddev) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  for (float& x : v) x = normal(rng);
  return v;
}

inline std::vector<float> product_weights(std::int64_t n, std::int64_t k) { return normal_values(n * k, 1, 0.02f); }

inline std::vector<float> product_activations(std::int64_t m, std::int64_t k) { return normal_values(m * k, 2, 1.0f); }

}  // namespace shrink::bench
