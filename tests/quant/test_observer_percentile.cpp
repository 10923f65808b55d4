// Tests for shrink/quant/observers/percentile.hpp and the |x| histogram of magnitude_histogram.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/observers/percentile.hpp"
#include "support/golden.hpp"
#include "support/calibration_golden.hpp"
#include "support/random.hpp"
#include "support/slices.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::channel_slice;
using shrink::test::golden_batches;
using shrink::test::random_values;

TEST_CASE("PercentileObserver matches the numpy reference", "[quant][observer][percentile][golden]") {
  const auto cases = test::load_golden("golden/calibration_magnitude.golden");
  REQUIRE(cases.size() >= 15);
  for (const auto& c : cases) {
    const auto& percentiles = c.doubles("percentiles");
    const auto expected = c.floats("percentile_amax");
    for (std::size_t p = 0; p < percentiles.size(); ++p) {
      INFO("case " << c.name << ", percentile " << percentiles[p]);
      PercentileOptions options;
      options.percentile = percentiles[p];
      options.bins = c.ints("bins")[0];
      options.max_bins = c.ints("max_bins")[0];
      PercentileObserver observer(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), options);
      for (const auto& b : golden_batches(c)) observer.observe(make_view(b));
      CHECK(observer.amax()[0] == expected[p]);
    }
  }
}

TEST_CASE("percentile amax: the upper edge of the bin where the cumulative count reaches the share",
          "[quant][observer][percentile]") {
  std::vector<float> x(1000);
  for (int i = 0; i < 1000; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);  // 1 .. 1000
  PercentileOptions o;
  o.bins = 1000;  // bins of width 1: value v in bin v (1000 shares the last bin with 999)
  o.percentile = 99.0;
  PercentileObserver p99(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), o);
  p99.observe(make_view(x));
  CHECK(p99.amax()[0] == 991.0f);  // 990 values reach bin 990, whose upper edge is 991
  CHECK(percentile_bin({0, 0, 5, 5}, 50.0) == 2);
  CHECK(percentile_bin({0, 0, 5, 5}, 50.1) == 3);
  CHECK(percentile_bin({0, 0, 0}, 50.0) == 0);
}

TEST_CASE("percentile amax grows with the percentile; 100 gives max|x| and MinMax's range", "[quant][observer][percentile]") {
  const std::vector<float> x = random_values(20000, 1);
  const float max_abs = std::max(-*std::min_element(x.begin(), x.end()), *std::max_element(x.begin(), x.end()));
  float previous = 0.0f;
  for (double p : {50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    PercentileOptions o;
    o.percentile = p;
    PercentileObserver obs(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine), o);
    obs.observe(make_view(x));
    const float amax = obs.amax()[0];
    INFO("percentile " << p);
    CHECK(amax >= previous);
    previous = amax;
    if (p == 100.0) {
      CHECK(amax == max_abs);
      const ClippingRange r = obs.clipping_ranges()[0];
      CHECK(r.min == *std::min_element(x.begin(), x.end()));
      CHECK(r.max == *std::max_element(x.begin(), x.end()));
    }
  }
}

TEST_CASE("the |x| histogram grows by bins of the same width and merges pairs past max_bins",
          "[quant][observer][percentile]") {
  PercentileOptions o;
  o.bins = 100;
  o.max_bins = 250;
  PercentileObserver obs(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), o);
  const std::vector<float> first{-1.0f, 0.5f, 0.25f};
  obs.observe(make_view(first));
  CHECK(obs.histogram().size() == 100);
  CHECK(obs.histogram().bin_width() == 0.01);
  const std::vector<float> second{2.0f, -1.5f};  // reach 200 bins: still within max_bins
  obs.observe(make_view(second));
  CHECK(obs.histogram().size() == 200);
  CHECK(obs.histogram().bin_width() == 0.01);
  CHECK(obs.histogram().counts()[199] == 1);  // 2.0 is the top edge: the last bin
  CHECK(obs.histogram().counts()[150] == 1);
  const std::vector<float> third{5.5f};  // 550 bins needed: merge pairs twice (138 bins of width 0.04)
  obs.observe(make_view(third));
  CHECK(obs.histogram().size() == 138);
  CHECK(obs.histogram().bin_width() == 0.04);
  CHECK(obs.histogram().total() == 6);
  CHECK(obs.histogram().counts()[37] == 1);  // -1.5: old bin 150 merged into 150 / 4
  CHECK(obs.histogram().counts()[137] == 1);
}

TEST_CASE("PercentileObserver per channel equals per tensor on each channel slice", "[quant][observer][percentile]") {
  const std::int64_t outer = 4, channels = 3, inner = 300;
  std::vector<float> x = random_values(static_cast<std::size_t>(outer * channels * inner), 2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>((i / inner) % channels);
  PercentileObserver observer(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 1));
  observer.observe(TensorView<const float>(x.data(), Shape{outer, channels, inner}));
  for (std::int64_t c = 0; c < channels; ++c) {
    const std::vector<float> slice = channel_slice(x, outer, channels, inner, c);
    PercentileObserver single(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric));
    single.observe(make_view(slice));
    CHECK(observer.amax()[static_cast<std::size_t>(c)] == single.amax()[0]);
    CHECK(observer.histogram(c).counts() == single.histogram().counts());
  }
}

TEST_CASE("PercentileObserver refuses a percentile outside (0, 100]", "[quant][observer][percentile][bad-input]") {
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  for (double bad : {0.0, -1.0, 100.5, std::numeric_limits<double>::quiet_NaN()}) {
    PercentileOptions o;
    o.percentile = bad;
    CHECK_THROWS_WITH(PercentileObserver(scheme, o), Catch::Contains("options.percentile"));
  }
  PercentileOptions o;
  o.max_bins = 10;
  CHECK_THROWS_WITH(PercentileObserver(scheme, o), Catch::Contains("options.max_bins = 10"));
  PercentileObserver obs(scheme);
  CHECK_THROWS_WITH(obs.clipping_ranges(), Catch::Contains("observed no batch"));
  std::vector<float> x{1.0f, std::numeric_limits<float>::quiet_NaN()};
  CHECK_THROWS_WITH(obs.observe(make_view(x)), Catch::Contains("batch[1] = nan"));
  CHECK(obs.batches_seen() == 0);
}
