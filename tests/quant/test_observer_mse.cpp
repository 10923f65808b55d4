// Tests for shrink/quant/observers/mse.hpp (MSE-optimal clipping over the |x| histogram).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/observers/mse.hpp"
#include "support/golden.hpp"
#include "support/calibration_golden.hpp"
#include "support/slices.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::channel_slice;
using shrink::test::golden_batches;
using shrink::test::magnitude_schemes;

TEST_CASE("MseObserver matches the numpy reference", "[quant][observer][mse][golden]") {
  const auto cases = test::load_golden("golden/calibration_magnitude.golden");
  REQUIRE(cases.size() >= 15);
  const std::vector<QuantScheme> schemes = magnitude_schemes();
  for (const auto& c : cases) {
    MseOptions options;
    options.bins = c.ints("bins")[0];
    options.start_bin = c.ints("start_bin")[0];
    options.max_bins = c.ints("max_bins")[0];
    const auto expected = c.floats("mse_amax");
    for (std::size_t s = 0; s < schemes.size(); ++s) {
      INFO("case " << c.name << ", scheme " << s);
      MseObserver observer(schemes[s], options);
      for (const auto& b : golden_batches(c)) observer.observe(make_view(b));
      CHECK(observer.amax()[0] == expected[s]);
    }
  }
}

TEST_CASE("histogram quantization error: zero on the grid, count-weighted squares off it", "[quant][observer][mse]") {
  const QuantRange int8{-128, 127};
  std::vector<double> centres, weights, terms;
  // Width 1: centres 0.5, 1.5, 2.5, 3.5. Scale 0.5 puts every centre on the grid.
  histogram_centres_and_weights({1, 2, 0, 3}, 1.0, centres, weights);
  CHECK(centres == std::vector<double>{0.5, 1.5, 2.5, 3.5});
  CHECK(histogram_quantization_error(centres, weights, ScaleZeroPoint{0.5f, 0}, int8, terms) == 0.0);
  // Scale 2: 0.5 -> 0 (error 0.5), 1.5 -> 2 (0.5), 3.5 -> 4 (0.5); ties round to even.
  CHECK(histogram_quantization_error(centres, weights, ScaleZeroPoint{2.0f, 0}, int8, terms) == 0.25 * (1 + 2 + 3));
  // Clamping: qmax 1 with scale 1 keeps 1.0 at most: 3.5 errs by 2.5.
  histogram_centres_and_weights({0, 0, 0, 1}, 1.0, centres, weights);
  CHECK(histogram_quantization_error(centres, weights, ScaleZeroPoint{1.0f, 0}, QuantRange{-1, 1}, terms) == 6.25);
}

TEST_CASE("MseObserver keeps a uniform range and clips Laplace tails harder with fewer levels", "[quant][observer][mse]") {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> flat(20000);
  for (float& v : flat) v = uniform(rng);
  const QuantScheme int8 = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  MseObserver flat_observer(int8);
  flat_observer.observe(make_view(flat));
  CHECK(flat_observer.amax()[0] > 0.98f);
  std::exponential_distribution<float> exponential(1.0f);
  std::vector<float> laplace(20000);
  for (std::size_t i = 0; i < laplace.size(); ++i) laplace[i] = (i % 2 ? 1.0f : -1.0f) * exponential(rng);
  const float max_abs = std::max(-*std::min_element(laplace.begin(), laplace.end()), *std::max_element(laplace.begin(), laplace.end()));
  MseObserver int8_observer(int8), int4_observer(QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric));
  int8_observer.observe(make_view(laplace));
  int4_observer.observe(make_view(laplace));
  CHECK(int8_observer.amax()[0] <= max_abs);
  CHECK(int4_observer.amax()[0] < 0.6f * max_abs);
  CHECK(int4_observer.amax()[0] < int8_observer.amax()[0]);
}

TEST_CASE("MseObserver honours restricted and reduced ranges", "[quant][observer][mse]") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> x(5000);
  for (float& v : x) v = normal(rng);
  QuantScheme restricted = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  restricted.restricted_range = true;
  MseObserver obs(restricted);
  obs.observe(make_view(x));
  const ClippingRange r = obs.clipping_ranges()[0];
  CHECK(obs.qparams().scale[0] == std::max(-r.min, r.max) / 127.0f);
  QuantScheme reduced = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  reduced.reduce_range = true;
  MseObserver coarse(reduced);
  coarse.observe(make_view(x));
  CHECK(coarse.amax()[0] <= obs.amax()[0]);  // 64 levels a side clip at least as hard as 127
}

TEST_CASE("MseObserver: the first candidate at the minimum", "[quant][observer][mse]") {
  // Values far below FLT_EPSILON: every candidate's scale clamps to FLT_EPSILON and quantizes all to 0,
  // so every error is equal and the first candidate (bin start_bin) wins.
  std::vector<float> tiny(500);
  for (std::size_t i = 0; i < tiny.size(); ++i) tiny[i] = 1e-20f * static_cast<float>(i % 17) - 8e-20f;
  MseOptions o;
  o.start_bin = 200;
  MseObserver obs(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), o);
  obs.observe(make_view(tiny));
  CHECK(obs.amax()[0] == static_cast<float>(200.5 * obs.histogram().bin_width()));
  CHECK(obs.qparams().scale[0] == std::numeric_limits<float>::epsilon());
}

TEST_CASE("MseObserver per channel equals per tensor on each channel slice", "[quant][observer][mse]") {
  const std::int64_t channels = 3, inner = 2;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<std::size_t>(channels * inner * 500));  // [500, 3, 2], axis 1
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (1.0f + static_cast<float>((i / inner) % channels));
  MseObserver observer(QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, 1));
  observer.observe(TensorView<const float>(x.data(), Shape{500, channels, inner}));
  const QParams q = observer.qparams();
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::vector<float> slice = channel_slice(x, 500, channels, inner, c);
    MseObserver single(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
    single.observe(make_view(slice));
    CHECK(observer.amax()[static_cast<std::size_t>(c)] == single.amax()[0]);
    CHECK(q.scale[static_cast<std::size_t>(c)] == single.qparams().scale[0]);
    CHECK(q.zero_point[static_cast<std::size_t>(c)] == single.qparams().zero_point[0]);
  }
}

TEST_CASE("MseObserver refuses bad options and bad input", "[quant][observer][mse][bad-input]") {
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  MseOptions o;
  o.start_bin = 2048;
  CHECK_THROWS_WITH(MseObserver(scheme, o), Catch::Contains("options.start_bin = 2048"));
  o.start_bin = -1;
  CHECK_THROWS_WITH(MseObserver(scheme, o), Catch::Contains("options.start_bin = -1"));
  o = MseOptions{};
  o.bins = 0;
  CHECK_THROWS_WITH(MseObserver(scheme, o), Catch::Contains("options.bins = 0"));
  MseObserver obs(scheme);
  const std::vector<float> good{1.0f, -2.0f, 0.5f};
  obs.observe(make_view(good));
  const std::vector<float> amax = obs.amax();
  const std::vector<float> bad{1.0f, -std::numeric_limits<float>::infinity()};
  CHECK_THROWS_WITH(obs.observe(make_view(bad)), Catch::Contains("batch[1] = -inf"));
  CHECK(obs.amax() == amax);
  CHECK(obs.histogram().total() == 3);
}
