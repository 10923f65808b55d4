// Inputs of the calibration methods' benchmarks (GPTQ, SparseGPT): a random SPD Hessian per input width and a
// random Linear weight, both deterministic.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/quant/hessian.hpp"

namespace shrink::bench {

// A random SPD Hessian 2/n XᵀX of correlated rows X = Z·A + noise, n = 2·in, built once per width.
inline const quant::Hessian& calibration_hessian(std::int64_t in) {
  static std::map<std::int64_t, quant::Hessian> cache;
  auto it = cache.find(in);
  if (it != cache.end()) return it->second;
  std::mt19937 rng(static_cast<unsigned>(in));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t tokens = 2 * in, k = in / 4;
  std::vector<float> a(static_cast<std::size_t>(k * in)), x(static_cast<std::size_t>(tokens * in));
  for (float& v : a) v = normal(rng);
  std::vector<float> z(static_cast<std::size_t>(k));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (float& v : z) v = normal(rng);
    for (std::int64_t j = 0; j < in; ++j) {
      float s = 0.1f * normal(rng);
      for (std::int64_t l = 0; l < k; ++l)
        s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * in + j)];
      x[static_cast<std::size_t>(t * in + j)] = s;
    }
  }
  quant::HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{tokens, in}));
  return cache.emplace(in, o.hessian()).first->second;
}

// A Linear weight [out, in] of N(0, 0.02²) values.
inline std::vector<float> calibration_weight(std::int64_t out, std::int64_t in) {
  std::mt19937 rng(static_cast<unsigned>(out * 7 + in));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = normal(rng);
  return w;
}

}  // namespace shrink::bench
