// quant/inverse_hessian.hpp: UᵀU = (P H Pᵀ + λI)⁻¹ with U upper, the order, dead inputs and damping; one factor shared
// by Linears that read the same input gives GPTQ's bytes; each bad input is one Error.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/gptq.hpp"
#include "shrink/quant/inverse_hessian.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

// 2/n XᵀX of n = 3·in random rows, with the listed inputs always zero.
Hessian random_independent_hessian(std::int64_t in, unsigned seed, const std::vector<std::int64_t>& dead = {}) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t tokens = 3 * in;
  std::vector<float> x(static_cast<std::size_t>(tokens * in));
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t j = 0; j < in; ++j)
      x[static_cast<std::size_t>(t * in + j)] = normal(rng) * (1.0f + 0.05f * static_cast<float>(j % 7));
  for (std::int64_t j : dead)
    for (std::int64_t t = 0; t < tokens; ++t) x[static_cast<std::size_t>(t * in + j)] = 0.0f;
  HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{tokens, in}));
  return o.hessian();
}

}  // namespace

TEST_CASE("inverse_hessian_factor: U upper, UᵀU the inverse of the damped, permuted Hessian", "[quant][gptq]") {
  for (std::int64_t in : {5, 97, 250})
    for (bool act : {false, true}) {
      INFO("in = " << in << (act ? ", act_order" : ""));
      const std::vector<std::int64_t> dead = {1, in - 2};
      const Hessian h = random_independent_hessian(in, static_cast<unsigned>(in), dead);
      InverseHessianOptions o;
      o.act_order = act;
      o.damp_percent = 0.05;
      const InverseHessianFactor f = inverse_hessian_factor(h, o);
      CHECK(f.dead == dead);
      const Eigen::Index n = static_cast<Eigen::Index>(in);
      Eigen::MatrixXd hp(n, n);
      double mean = 0.0;
      for (Eigen::Index j = 0; j < n; ++j) mean += h.at(j, j) == 0.0 ? 1.0 : h.at(j, j);
      CHECK(f.damping == Approx(0.05 * mean / static_cast<double>(n)).epsilon(1e-14));
      for (Eigen::Index r = 0; r < n; ++r)
        for (Eigen::Index c = 0; c < n; ++c) {
          const std::int64_t a = f.order[static_cast<std::size_t>(r)], b = f.order[static_cast<std::size_t>(c)];
          hp(r, c) = r == c ? (h.at(a, a) == 0.0 ? 1.0 : h.at(a, a)) + f.damping : h.at(a, b);
        }
      for (Eigen::Index k = 1; k < n && act; ++k) CHECK(hp(k - 1, k - 1) >= hp(k, k));
      CHECK(f.upper.triangularView<Eigen::StrictlyLower>().toDenseMatrix().cwiseAbs().maxCoeff() == 0.0);
      const Eigen::MatrixXd identity = f.upper.transpose() * f.upper * hp;
      CHECK((identity - Eigen::MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff() < 1e-9);
    }
}

TEST_CASE("one factor serves every Linear reading the same input", "[quant][gptq]") {
  const std::int64_t in = 64;
  const Hessian h = random_independent_hessian(in, 3);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  for (bool act : {false, true}) {
    GptqOptions o;
    o.group_size = 16;
    o.act_order = act;
    o.permuted_output = act;
    const InverseHessianFactor f = inverse_hessian_factor(h, inverse_hessian_options(o));
    for (std::int64_t out : {8, 40}) {
      std::vector<float> w(static_cast<std::size_t>(out * in));
      for (float& v : w) v = normal(rng);
      const TensorView<const float> view(w.data(), Shape{out, in});
      GptqResult shared, own;
      const QuantizedTensor a = gptq_quantize(view, f, o, &shared), b = gptq_quantize(view, h, o, &own);
      CHECK(a.data == b.data);
      CHECK(a.qparams.scale == b.qparams.scale);
      CHECK(shared.loss == own.loss);
      CHECK(shared.g_idx == own.g_idx);
    }
    // A factor made with other options is refused.
    GptqOptions other = o;
    other.act_order = !act;
    other.permuted_output = !act;
    std::vector<float> w(static_cast<std::size_t>(4 * in), 0.5f);
    CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(w.data(), Shape{4, in}), f, other),
                      Catch::Contains("factor.options.act_order"));
    other = o;
    other.damp_percent = 0.1;
    CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(w.data(), Shape{4, in}), f, other),
                      Catch::Contains("factor.options.damp_percent"));
    std::vector<float> narrow(static_cast<std::size_t>(4 * 32), 0.5f);
    CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(narrow.data(), Shape{4, 32}), f, o),
                      Catch::Contains("factor.features = 64"));
  }
}

TEST_CASE("inverse_hessian_factor: every bad input is one Error naming it", "[quant][gptq][errors]") {
  const Hessian h = random_independent_hessian(16, 5);
  InverseHessianOptions o;
  Hessian bad = h;
  bad.values[5] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(inverse_hessian_factor(bad, o), Catch::Contains("hessian.values[5] = inf"));
  bad = h;
  bad.values.resize(10);
  CHECK_THROWS_WITH(inverse_hessian_factor(bad, o), Catch::Contains("hessian.values.size() = 10"));
  bad = h;
  bad.samples = 0;
  CHECK_THROWS_WITH(inverse_hessian_factor(bad, o), Catch::Contains("hessian.samples = 0"));
  CHECK_THROWS_WITH(inverse_hessian_factor(Hessian{}, o), Catch::Contains("hessian.features = 0"));
  bad = h;
  for (std::int64_t j = 0; j < 16; ++j) bad.values[static_cast<std::size_t>(j * 16 + j)] = -2.0;
  CHECK_THROWS_WITH(inverse_hessian_factor(bad, o), Catch::Contains("positive-definite"));
  o.damp_percent = -1.0;
  CHECK_THROWS_WITH(inverse_hessian_factor(h, o), Catch::Contains("options.damp_percent = -1"));
}
