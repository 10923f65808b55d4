// Test helpers shared by the calibration methods' tests (GPTQ, SparseGPT): the golden layers of gen_gptq.py's
// generator (weight, shape, Hessian), a random weight, and the layer error sqrt(tr(ΔW H ΔWᵀ)).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/quant/hessian.hpp"
#include "support/golden.hpp"

namespace shrink::test {

struct HessianLayer {
  std::vector<float> weight;  // [out, in] row-major
  Shape shape;
  quant::Hessian hessian;
};

// The cases named "layer/<name>" of a golden file: weight, shape, tokens and hessian fields.
inline std::map<std::string, HessianLayer> golden_hessian_layers(const std::vector<GoldenCase>& cases) {
  std::map<std::string, HessianLayer> layers;
  for (const auto& c : cases) {
    if (c.name.rfind("layer/", 0) != 0) continue;
    HessianLayer l;
    l.weight = c.floats("weight");
    l.shape = Shape{c.ints("shape")[0], c.ints("shape")[1]};
    l.hessian.features = l.shape[1];
    l.hessian.samples = c.ints("tokens")[0];
    l.hessian.values = c.doubles("hessian");
    layers[c.name.substr(6)] = l;
  }
  return layers;
}

// sqrt(tr(ΔW H ΔWᵀ)) = ‖(W − Ŵ) Xᵀ‖_F · sqrt(2 / n): the layer error up to a constant shared by every method.
inline double layer_error(const std::vector<float>& w, const std::vector<float>& w_hat, const Shape& shape,
                          const quant::Hessian& h) {
  const std::int64_t out = shape[0], in = shape[1];
  double sum = 0.0;
  std::vector<double> d(static_cast<std::size_t>(in));
  for (std::int64_t r = 0; r < out; ++r) {
    for (std::int64_t j = 0; j < in; ++j)
      d[static_cast<std::size_t>(j)] =
          static_cast<double>(w[static_cast<std::size_t>(r * in + j)]) - w_hat[static_cast<std::size_t>(r * in + j)];
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t j = 0; j < in; ++j)
        sum += d[static_cast<std::size_t>(i)] * h.at(i, j) * d[static_cast<std::size_t>(j)];
  }
  return std::sqrt(sum);
}

// A weight [out, in] of N(0, 0.1²) values.
inline std::vector<float> random_layer_weight(std::int64_t out, std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = normal(rng);
  return w;
}

}  // namespace shrink::test
