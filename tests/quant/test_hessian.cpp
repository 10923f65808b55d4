// Tests for shrink/quant/hessian.hpp: H = 2/n Σ xᵀx against PyTorch's float64 XᵀX, batches, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/hessian.hpp"
#include "support/executors.hpp"
#include "support/golden.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

std::vector<float> random_rows(std::int64_t rows, std::int64_t features, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * features));
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST_CASE("HessianObserver equals PyTorch's 2/n XᵀX in float64, in one batch or several", "[quant][hessian][golden]") {
  const auto cases = test::load_golden("golden/gptq.golden");
  const test::GoldenCase* a = nullptr;
  for (const auto& c : cases)
    if (c.name == "layer/a") a = &c;
  REQUIRE(a != nullptr);
  const std::vector<float> x = a->floats("x");
  const std::vector<double>& expected = a->doubles("hessian");
  const std::int64_t tokens = a->ints("tokens")[0], in = a->ints("shape")[1];
  for (std::int64_t split : {tokens, std::int64_t{100}, std::int64_t{1}}) {
    INFO("batches of " << split << " rows");
    HessianObserver observer;
    for (std::int64_t t = 0; t < tokens; t += split) {
      const std::int64_t rows = std::min(split, tokens - t);
      observer.observe(TensorView<const float>(x.data() + t * in, Shape{rows, in}));
    }
    CHECK(observer.samples() == tokens);
    CHECK(observer.features() == in);
    const Hessian h = observer.hessian();
    REQUIRE(h.values.size() == expected.size());
    double worst = 0.0;
    for (std::size_t k = 0; k < expected.size(); ++k)
      worst = std::max(worst, std::abs(h.values[k] - expected[k]) / (std::abs(expected[k]) + 1e-300));
    CHECK(worst < 1e-12);  // the same exact products summed in another order
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t j = 0; j < in; ++j) CHECK(h.at(i, j) == h.at(j, i));
  }
}

TEST_CASE("HessianObserver: [..., in] batches, strided views, reset, the same bytes on any executor",
          "[quant][hessian]") {
  const std::vector<float> x = random_rows(6 * 5, 70, 3);
  HessianObserver flat;
  flat.observe(TensorView<const float>(x.data(), Shape{30, 70}));
  HessianObserver batched;
  batched.observe(TensorView<const float>(x.data(), Shape{6, 5, 70}));
  CHECK(batched.hessian().values == flat.hessian().values);

  // Every other column of a [30, 140] buffer.
  std::vector<float> wide(30 * 140, 99.0f);
  for (std::size_t r = 0; r < 30; ++r)
    for (std::size_t j = 0; j < 70; ++j) wide[r * 140 + 2 * j] = x[r * 70 + j];
  HessianObserver strided;
  strided.observe(TensorView<const float>(wide.data(), Shape{30, 70}, Strides{140, 2}));
  CHECK(strided.hessian().values == flat.hessian().values);

  flat.reset();
  CHECK(flat.samples() == 0);
  CHECK_THROWS_WITH(flat.hessian(), Catch::Contains("observe"));
  flat.observe(TensorView<const float>(x.data(), Shape{3, 10}));  // a new width after reset
  CHECK(flat.features() == 10);

  const std::vector<float> big = random_rows(50, 200, 4);
  test::require_same_bytes_on_every_executor([&] {
    HessianObserver o;
    o.observe(TensorView<const float>(big.data(), Shape{50, 200}));
    return o.hessian().values;
  });
}

TEST_CASE("HessianObserver: bad input is one Error and leaves the state as it was", "[quant][hessian][errors]") {
  const std::vector<float> x = random_rows(8, 4, 5);
  HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{8, 4}));
  const std::vector<double> before = o.hessian().values;

  CHECK_THROWS_WITH(o.observe(TensorView<const float>(x.data(), Shape{4, 8})),
                    Catch::Contains("activations.shape = [4, 8]") && Catch::Contains("4 features"));
  std::vector<float> bad = x;
  bad[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(o.observe(TensorView<const float>(bad.data(), Shape{8, 4})), Catch::Contains("activations"));
  bad[5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_AS(o.observe(TensorView<const float>(bad.data(), Shape{8, 4})), Error);
  CHECK_THROWS_WITH(o.observe(TensorView<const float>(x.data(), Shape{0, 4})), Catch::Contains("at least one element"));
  CHECK(o.samples() == 8);
  CHECK(o.hessian().values == before);
}
