// Tests for shrink/quant/observers/entropy.hpp (TensorRT's KL calibration) and the |x| observers' shared base.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/observers/entropy.hpp"
#include "support/golden.hpp"
#include "support/calibration_golden.hpp"
#include "support/random.hpp"
#include "support/slices.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::channel_slice;
using shrink::test::golden_batches;
using shrink::test::magnitude_schemes;
using shrink::test::random_values;

TEST_CASE("EntropyObserver matches the numpy reference", "[quant][observer][entropy][golden]") {
  const auto cases = test::load_golden("golden/calibration_magnitude.golden");
  REQUIRE(cases.size() >= 15);
  const std::vector<QuantScheme> schemes = magnitude_schemes();
  for (const auto& c : cases) {
    EntropyOptions options;
    options.bins = c.ints("bins")[0];
    options.start_bin = c.ints("start_bin")[0];
    options.max_bins = c.ints("max_bins")[0];
    const auto expected = c.floats("entropy_amax");
    for (std::size_t s = 0; s < schemes.size(); ++s) {
      INFO("case " << c.name << ", scheme " << s);
      EntropyObserver observer(schemes[s], options);
      for (const auto& b : golden_batches(c)) observer.observe(make_view(b));
      CHECK(observer.amax()[0] == expected[s]);
      CHECK(observer.histogram().size() == c.ints("histogram_size")[0]);
      CHECK(observer.histogram().total() == c.ints("histogram_total")[0]);
      const ClippingRange r = observer.clipping_ranges()[0];
      const QParams q = observer.qparams();
      const ScaleZeroPoint p = scale_zero_point_from_range(r.min, r.max, schemes[s]);
      CHECK(q.scale[0] == p.scale);
      CHECK(q.zero_point[0] == p.zero_point);
    }
  }
}

TEST_CASE("entropy quantized bins: 2^(b-1) per sign, 2^b for non-negative data under affine schemes",
          "[quant][observer][entropy]") {
  QuantScheme s = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  CHECK(entropy_quantized_bins(s, false) == 128);
  CHECK(entropy_quantized_bins(s, true) == 128);
  s.symmetry = Symmetry::affine;
  CHECK(entropy_quantized_bins(s, false) == 128);
  CHECK(entropy_quantized_bins(s, true) == 256);
  s.reduce_range = true;
  CHECK(entropy_quantized_bins(s, true) == 128);
  CHECK(entropy_quantized_bins(QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric), false) == 8);
  CHECK(entropy_quantized_bins(QuantScheme::per_tensor(QuantDtype::uint4, Symmetry::affine), true) == 16);
  CHECK(entropy_quantized_bins(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::symmetric), true) == 128);
}

TEST_CASE("entropy threshold: the LAST candidate at the minimum divergence", "[quant][observer][entropy]") {
  // Equal counts below bin 100, nothing above: every candidate in [128, 256] reproduces P exactly (KL 0).
  std::vector<std::int64_t> flat(256, 0);
  for (int j = 0; j < 100; ++j) flat[static_cast<std::size_t>(j)] = 5;
  CHECK(entropy_threshold_bin(flat, 128, 128) == 256);
  // An outlier far out: clipping it (threshold below bin 250) costs less than spreading 128 levels to it.
  std::vector<std::int64_t> outlier(2048, 0);
  std::mt19937 rng(1);
  std::poisson_distribution<int> counts(200);
  for (int j = 0; j < 300; ++j) outlier[static_cast<std::size_t>(j)] = counts(rng);
  outlier[2047] = 1;
  const std::int64_t threshold = entropy_threshold_bin(outlier, 128, 128);
  CHECK(threshold >= 128);
  CHECK(threshold < 2047);
  // A candidate whose last kept bin is empty while outliers remain has infinite divergence: never picked.
  std::vector<std::int64_t> gap(300, 0);
  for (int j = 0; j < 140; ++j) gap[static_cast<std::size_t>(j)] = 10 + j % 3;
  gap[299] = 50;
  const std::int64_t t = entropy_threshold_bin(gap, 128, 128);
  CHECK((t <= 140 || t == 300));
}

TEST_CASE("EntropyObserver on constant, zero and one-sided data", "[quant][observer][entropy]") {
  const QuantScheme sym = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  EntropyObserver constant(sym);
  const std::vector<float> threes(50, 3.0f);
  constant.observe(make_view(threes));
  CHECK(constant.amax()[0] == 3.0f);  // all mass in the last bin: only the full range reproduces it
  EntropyObserver zeros(sym);
  const std::vector<float> nothing(50, 0.0f);
  zeros.observe(make_view(nothing));
  CHECK(zeros.amax()[0] == 0.0f);
  CHECK(zeros.qparams().scale[0] == std::numeric_limits<float>::epsilon());
  zeros.observe(make_view(threes));  // zeros seen before any range join bin 0
  CHECK(zeros.histogram().counts()[0] == 50);
  CHECK(zeros.histogram().total() == 100);
  // Non-negative data gives [0, amax]; non-positive data [-amax, 0].
  std::vector<float> positive = random_values(4000, 2);
  for (float& v : positive) v = std::fabs(v);
  EntropyObserver relu(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
  relu.observe(make_view(positive));
  const ClippingRange r = relu.clipping_ranges()[0];
  CHECK(r.min == 0.0f);
  CHECK(r.max == relu.amax()[0]);
  CHECK(relu.qparams().zero_point[0] == 0);
  std::vector<float> negative = positive;
  for (float& v : negative) v = -v;
  EntropyObserver negative_observer(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine));
  negative_observer.observe(make_view(negative));
  CHECK(negative_observer.clipping_ranges()[0].max == 0.0f);
  CHECK(negative_observer.clipping_ranges()[0].min == -negative_observer.amax()[0]);
}

TEST_CASE("|x| observers: batches that keep the first batch's max|x| equal one batch", "[quant][observer][entropy]") {
  std::vector<float> x = random_values(6000, 3);
  x[0] = 5.5f;  // the first batch holds the largest magnitude, so the bins never move
  for (std::size_t i = 1; i < x.size(); ++i) REQUIRE(std::fabs(x[i]) < 5.5f);
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  EntropyObserver whole(scheme), split(scheme);
  whole.observe(make_view(x));
  for (std::size_t start = 0; start < x.size(); start += 1500) split.observe(TensorView<const float>(x.data() + start, 1500));
  CHECK(split.histogram().counts() == whole.histogram().counts());
  CHECK(split.amax() == whole.amax());
  CHECK(split.qparams().scale == whole.qparams().scale);
}

TEST_CASE("EntropyObserver per channel equals per tensor on each channel slice", "[quant][observer][entropy]") {
  for (std::int64_t inner : {std::int64_t{3}, std::int64_t{400}}) {
    const std::int64_t outer = 2, channels = 3;
    std::vector<float> x = random_values(static_cast<std::size_t>(outer * channels * inner), 4);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= 0.5f + static_cast<float>((i / inner) % channels);
    EntropyObserver observer(QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 1));
    observer.observe(TensorView<const float>(x.data(), Shape{outer, channels, inner}));
    const std::vector<float> amax = observer.amax();
    const QParams q = observer.qparams();
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::vector<float> slice = channel_slice(x, outer, channels, inner, c);
      EntropyObserver single(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine));
      single.observe(make_view(slice));
      INFO("inner " << inner << ", channel " << c);
      CHECK(amax[static_cast<std::size_t>(c)] == single.amax()[0]);
      CHECK(q.scale[static_cast<std::size_t>(c)] == single.qparams().scale[0]);
      CHECK(q.zero_point[static_cast<std::size_t>(c)] == single.qparams().zero_point[0]);
    }
  }
}

TEST_CASE("EntropyObserver refuses bad options and bad input, keeping its state", "[quant][observer][entropy][bad-input]") {
  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0);
  EntropyOptions o;
  o.bins = 1;
  CHECK_THROWS_WITH(EntropyObserver(scheme, o), Catch::Contains("options.bins = 1"));
  o = EntropyOptions{};
  o.start_bin = 0;
  CHECK_THROWS_WITH(EntropyObserver(scheme, o), Catch::Contains("options.start_bin = 0"));
  o.start_bin = 4096;
  CHECK_THROWS_WITH(EntropyObserver(scheme, o), Catch::Contains("options.start_bin = 4096"));
  o = EntropyOptions{};
  o.max_bins = 100;
  CHECK_THROWS_WITH(EntropyObserver(scheme, o), Catch::Contains("options.max_bins = 100"));

  EntropyObserver obs(scheme);
  CHECK_THROWS_WITH(obs.qparams(), Catch::Contains("observed no batch"));
  CHECK_THROWS_WITH(obs.amax(), Catch::Contains("observed no batch"));
  std::vector<float> good = random_values(6, 5), bad = good;
  bad[4] = std::numeric_limits<float>::infinity();
  obs.observe(TensorView<const float>(good.data(), Shape{2, 3}));
  const std::vector<std::int64_t> counts = obs.histogram(1).counts();
  const QParams before = obs.qparams();
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(bad.data(), Shape{2, 3})), Catch::Contains("batch[4] = inf"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{3, 2})), Catch::Contains("batch.shape = [3, 2]"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{2, 0})), Catch::Contains("empty"));
  CHECK(obs.histogram(1).counts() == counts);
  CHECK(obs.qparams().scale == before.scale);
  CHECK(obs.batches_seen() == 1);
  CHECK_THROWS_WITH(obs.histogram(5), Catch::Contains("channel = 5"));
}

TEST_CASE("|x| observers with ignore_nonfinite equal the observer of the finite values", "[quant][observer][entropy]") {
  std::vector<float> finite = random_values(3000, 6);
  std::vector<float> dirty = finite;
  dirty.insert(dirty.begin() + 10, std::numeric_limits<float>::quiet_NaN());
  dirty.push_back(-std::numeric_limits<float>::infinity());
  ObserverOptions skip;
  skip.ignore_nonfinite = true;
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  EntropyObserver clean(scheme), tolerant(scheme, {}, skip);
  clean.observe(make_view(finite));
  tolerant.observe(make_view(dirty));
  CHECK(tolerant.histogram().counts() == clean.histogram().counts());
  CHECK(tolerant.amax() == clean.amax());
  EntropyObserver never(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), {}, skip);
  const std::vector<float> nans(4, std::numeric_limits<float>::quiet_NaN());
  never.observe(make_view(nans));
  CHECK_THROWS_WITH(never.qparams(), Catch::Contains("the tensor has seen no finite value"));
}

TEST_CASE("entropy threshold: the four-threshold AVX2 search gives the scalar search's divergences bit for bit",
          "[quant][observer][entropy][simd]") {
  std::mt19937 rng(23);
  std::normal_distribution<double> normal(0.0, 400.0);
  for (const std::int64_t bins : {2048, 1000, 131}) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(bins), 0);
    for (int k = 0; k < 200'000; ++k) {
      const auto j = static_cast<std::int64_t>(std::fabs(normal(rng)));
      if (j < bins) ++counts[static_cast<std::size_t>(j)];
    }
    counts[static_cast<std::size_t>(bins / 3)] = 0;  // an empty bin: some thresholds have divergence +inf
    for (const std::int64_t levels : {128, 16, 100}) {
      shrink::cpu::EntropyTables tables(counts, levels);
      std::vector<double> all(static_cast<std::size_t>(bins) + 1, 0.0);
      shrink::cpu::entropy_divergences(tables, 1, bins, all.data());
      std::size_t mismatches = 0;
      for (std::int64_t i = 1; i <= bins; ++i) {
        const double one = shrink::cpu::entropy_divergence(tables, i);
        const double batched = all[static_cast<std::size_t>(i)];
        mismatches += !(one == batched || (std::isnan(one) && std::isnan(batched)));
      }
      CHECK(mismatches == 0);
    }
  }
}
