// Tests for shrink/quant/observers/histogram.hpp (PyTorch's HistogramObserver) and the binning in cpu/histogram.hpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "shrink/cpu/histogram.hpp"
#include "shrink/quant/observers/histogram.hpp"
#include "support/golden.hpp"
#include "support/calibration_golden.hpp"
#include "support/random.hpp"
#include "support/float_compare.hpp"
#include "support/slices.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::channel_slice;
using shrink::test::golden_batches;
using shrink::test::random_values;
using shrink::test::ulp_distance;

namespace {

// The schemes of calibration_histogram.golden, in its order: affine then symmetric, int8 then uint8,
// reduce_range false then true.
std::vector<QuantScheme> golden_schemes() {
  std::vector<QuantScheme> schemes;
  for (Symmetry symmetry : {Symmetry::affine, Symmetry::symmetric})
    for (QuantDtype dtype : {QuantDtype::int8, QuantDtype::uint8})
      for (bool reduce : {false, true}) {
        QuantScheme s = QuantScheme::per_tensor(dtype, symmetry);
        s.reduce_range = reduce;
        schemes.push_back(s);
      }
  return schemes;
}

}  // namespace

TEST_CASE("HistogramObserver matches PyTorch 1.13's HistogramObserver", "[quant][observer][histogram][golden]") {
  const auto cases = test::load_golden("golden/calibration_histogram.golden");
  REQUIRE(cases.size() >= 15);
  const std::vector<QuantScheme> schemes = golden_schemes();
  for (const auto& c : cases) {
    const auto batches = golden_batches(c);
    const auto scales = c.floats("scale");
    const auto zero_points = c.ints("zero_point");
    for (std::size_t s = 0; s < schemes.size(); ++s) {
      INFO("case " << c.name << ", scheme " << s << " (" << to_string(schemes[s].symmetry) << " "
                   << to_string(schemes[s].dtype) << (schemes[s].reduce_range ? " reduce_range" : "") << ")");
      HistogramObserver observer(schemes[s]);
      for (const auto& b : batches) observer.observe(make_view(b));
      const QParams q = observer.qparams();
      REQUIRE(q.size() == 1);
      CHECK(ulp_distance(q.scale[0], scales[s]) <= 1);
      // PyTorch keeps 128 for symmetric quint8 under reduce_range; shrink keeps the zero point inside [0, 127].
      const bool symmetric_uint8_reduced = schemes[s].dtype == QuantDtype::uint8 &&
                                           schemes[s].symmetry == Symmetry::symmetric && schemes[s].reduce_range;
      CHECK(q.zero_point[0] == (symmetric_uint8_reduced ? symmetric_zero_point(schemes[s]) : zero_points[s]));
      if (s + 1 < schemes.size()) continue;
      // The state and the search result do not depend on the scheme: compare them once, exactly.
      const pytorch::HistogramState& state = observer.state();
      CHECK(state.min_val == c.floats("min_val")[0]);
      CHECK(state.max_val == c.floats("max_val")[0]);
      double sum = 0.0, moment = 0.0;
      for (std::size_t j = 0; j < state.histogram.size(); ++j) {
        sum += state.histogram[j];
        moment += static_cast<double>(state.histogram[j]) * static_cast<double>(j + 1);
      }
      CHECK(sum == c.doubles("histogram_sum")[0]);
      CHECK(moment == c.doubles("histogram_moment")[0]);
      const std::vector<ClippingRange> clip = observer.clipping_ranges();
      CHECK(clip[0].min == c.floats("clip")[0]);
      CHECK(clip[0].max == c.floats("clip")[1]);
    }
  }
}

TEST_CASE("torch.histc binning: truncated quotient, last edge in the last bin, outsiders skipped",
          "[quant][observer][histogram]") {
  const cpu::HistcBinning b{-1.0f, 3.0f, 8};  // bins of width 0.5
  CHECK(cpu::bin_index(b, -1.0f) == 0);
  CHECK(cpu::bin_index(b, -0.5f) == 1);
  CHECK(cpu::bin_index(b, 2.9f) == 7);
  CHECK(cpu::bin_index(b, 3.0f) == 7);  // the right edge belongs to the last bin
  CHECK(cpu::bin_index(b, 3.0001f) == 8);
  CHECK(cpu::bin_index(b, -1.0001f) == 8);
  CHECK(cpu::bin_index(b, std::numeric_limits<float>::quiet_NaN()) == 8);
  CHECK(cpu::bin_index(b, std::numeric_limits<float>::infinity()) == 8);
  const cpu::HistcBinning flat{2.0f, 2.0f, 4};  // torch divides 0 by 0 here; shrink uses bin 0
  CHECK(cpu::bin_index(flat, 2.0f) == 0);
}

TEST_CASE("binning gives the same indices at every SIMD level", "[quant][observer][histogram]") {
  std::vector<float> x = random_values(4099, 3, 2.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[17] = -std::numeric_limits<float>::infinity();
  x[40] = 2.0f;   // exactly the histc top edge below
  x[41] = -2.0f;  // exactly the bottom edge
  const cpu::HistcBinning histc{-2.0f, 2.0f, 2048};
  const cpu::MagnitudeBinning magnitude{2048.0 / 6.5, 2048};  // float32 product
  const cpu::MagnitudeBinning magnitude_double{1e40, 2048};     // double product (inv_width > 2^120)
  REQUIRE(magnitude.in_float());
  REQUIRE(!magnitude_double.in_float());
  std::vector<float> tiny = x;
  for (float& v : tiny) v *= 1e-37f;
  const cpu::SimdLevel saved = cpu::simd_level();
  std::vector<std::int32_t> reference(x.size()), got(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) reference[i] = cpu::bin_index(histc, x[i]);
  std::vector<std::int32_t> reference_magnitude(x.size()), reference_double(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) reference_magnitude[i] = cpu::bin_index(magnitude, x[i]);
  for (std::size_t i = 0; i < x.size(); ++i) reference_double[i] = cpu::bin_index(magnitude_double, tiny[i]);
  for (cpu::SimdLevel level : {cpu::SimdLevel::scalar, cpu::SimdLevel::sse2, cpu::SimdLevel::avx2}) {
    if (static_cast<int>(level) > static_cast<int>(cpu::detect_simd_level())) continue;
    cpu::simd_level() = level;
    cpu::bin_indices(histc, x.data(), static_cast<std::int64_t>(x.size()), got.data());
    CHECK(got == reference);
    cpu::bin_indices(magnitude, x.data(), static_cast<std::int64_t>(x.size()), got.data());
    CHECK(got == reference_magnitude);
    cpu::bin_indices(magnitude_double, tiny.data(), static_cast<std::int64_t>(x.size()), got.data());
    CHECK(got == reference_double);
  }
  cpu::simd_level() = saved;
  CHECK(reference[40] == 2047);
  CHECK(reference[41] == 0);
  CHECK(reference[5] == 2048);
  CHECK(reference_magnitude[17] == 2048);
}

TEST_CASE("BinCounter counts every run it is given, in any block split", "[quant][observer][histogram]") {
  const std::vector<float> x = random_values(10000, 4);
  const cpu::HistcBinning b{-3.0f, 3.0f, 64};
  std::vector<std::int64_t> direct(64, 0), counted(64, 0);
  for (float v : x) {
    const std::int32_t i = cpu::bin_index(b, v);
    if (i < 64) ++direct[static_cast<std::size_t>(i)];
  }
  cpu::BinCounter counter(128);  // larger than needed: the spare slot of a 64-bin binning is dropped
  counter.add(b, x.data(), 3333);
  counter.add(b, x.data() + 3333, 10000 - 3333);
  counter.flush_into(counted.data(), 64);
  CHECK(counted == direct);
}

TEST_CASE("HistogramObserver: split batches that keep the first batch's range equal one batch",
          "[quant][observer][histogram]") {
  std::vector<float> x = random_values(3000, 5, 0.8f);
  x[0] = -3.7f;  // the first batch holds the extremes (|x| < 3.6 elsewhere), so later batches leave the range alone
  x[1] = 4.2f;
  for (std::size_t i = 2; i < x.size(); ++i) REQUIRE(std::fabs(x[i]) < 3.6f);
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine);
  HistogramObserver whole(scheme), split(scheme);
  whole.observe(make_view(x));
  for (std::size_t start = 0; start < x.size(); start += 1000)
    split.observe(TensorView<const float>(x.data() + start, 1000));
  CHECK(split.state().histogram == whole.state().histogram);
  CHECK(split.qparams().scale == whole.qparams().scale);
  CHECK(split.qparams().zero_point == whole.qparams().zero_point);
}

TEST_CASE("HistogramObserver per channel equals per tensor on each channel slice", "[quant][observer][histogram]") {
  // [outer = 3, channels = 4, inner]: a short inner (counted element by element) and a long one (BinCounter).
  for (std::int64_t inner : {std::int64_t{5}, std::int64_t{300}}) {
    const std::int64_t outer = 3, channels = 4;
    std::vector<float> x = random_values(static_cast<std::size_t>(outer * channels * inner), 6);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= 1.0f + static_cast<float>((i / inner) % channels);
    const Shape shape{outer, channels, inner};
    QuantScheme per_channel = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 1);
    HistogramObserver observer(per_channel);
    observer.observe(TensorView<const float>(x.data(), shape));
    const std::vector<float> second = random_values(x.size(), 7, 3.0f);
    observer.observe(TensorView<const float>(second.data(), shape));
    const QParams q = observer.qparams();
    REQUIRE(q.shape == Shape{channels});
    for (std::int64_t c = 0; c < channels; ++c) {
      const std::vector<float> slice = channel_slice(x, outer, channels, inner, c);
      const std::vector<float> slice2 = channel_slice(second, outer, channels, inner, c);
      HistogramObserver single(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric));
      single.observe(make_view(slice));
      single.observe(make_view(slice2));
      INFO("inner " << inner << ", channel " << c);
      CHECK(q.scale[static_cast<std::size_t>(c)] == single.qparams().scale[0]);
      CHECK(observer.state(c).histogram == single.state().histogram);
    }
  }
}

TEST_CASE("HistogramObserver supports int4 schemes (16 destination levels)", "[quant][observer][histogram]") {
  const std::vector<float> x = random_values(2000, 8);
  HistogramObserver int4(QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric));
  HistogramObserver int8(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric));
  int4.observe(make_view(x));
  int8.observe(make_view(x));
  CHECK(int4.destination_bins() == 16);
  CHECK(int8.destination_bins() == 256);
  const ClippingRange r4 = int4.clipping_ranges()[0], r8 = int8.clipping_ranges()[0];
  CHECK(r4.max - r4.min <= r8.max - r8.min);  // fewer levels clip harder
  CHECK(int4.qparams().scale[0] > int8.qparams().scale[0]);
}

TEST_CASE("HistogramObserver on extreme inputs torch 1.13 cannot take still gives finite qparams",
          "[quant][observer][histogram]") {
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  std::vector<float> huge = random_values(1000, 9);
  for (float& v : huge) v *= 1e30f;  // torch: int(min) overflows int64
  HistogramObserver a(scheme);
  a.observe(make_view(huge));
  CHECK(std::isfinite(a.qparams().scale[0]));
  const std::vector<float> constant_huge(100, 1e20f);  // torch: max - min == 0 after +-1 is lost
  HistogramObserver b(scheme);
  b.observe(make_view(constant_huge));
  CHECK(b.clipping_ranges()[0].max == 1e20f);
  std::vector<float> tiny = random_values(1000, 10);
  for (float& v : tiny) v *= 1e-35f;
  HistogramObserver c(scheme);  // tiny first, then normal: a growth by ~1e35, past torch's grid
  c.observe(make_view(tiny));
  std::vector<float> normal = random_values(1000, 11);
  normal[0] = -40.0f;  // integer extremes: torch's truncated histc edges then cover every element
  normal[1] = 40.0f;
  c.observe(make_view(normal));
  const QParams q = c.qparams();
  CHECK(std::isfinite(q.scale[0]));
  CHECK(q.scale[0] > 1e-3f);
  double mass = 0.0;
  for (float h : c.state().histogram) mass += h;
  CHECK(mass == 2000.0);
}

TEST_CASE("HistogramObserver refuses bad input and keeps its state", "[quant][observer][histogram][bad-input]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const QuantScheme per_channel = QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, 0);
  HistogramObserver obs(per_channel);
  CHECK_THROWS_WITH(obs.qparams(), Catch::Contains("observed no batch"));
  CHECK_THROWS_WITH(obs.clipping_ranges(), Catch::Contains("observed no batch"));
  std::vector<float> good = random_values(8, 12), bad = good;
  bad[5] = nan;
  obs.observe(TensorView<const float>(good.data(), Shape{2, 4}));
  const QParams before = obs.qparams();
  const std::vector<float> histogram_before = obs.state(1).histogram;
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(bad.data(), Shape{2, 4})), Catch::Contains("batch[5] = nan"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{4, 2})), Catch::Contains("batch.shape = [4, 2]"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{0, 4})), Catch::Contains("empty"));
  CHECK(obs.batches_seen() == 1);
  CHECK(obs.qparams().scale == before.scale);
  CHECK(obs.qparams().zero_point == before.zero_point);
  CHECK(obs.state(1).histogram == histogram_before);
  CHECK_THROWS_WITH(obs.state(2), Catch::Contains("channel = 2"));

  HistogramOptions no_bins;
  no_bins.bins = 0;
  CHECK_THROWS_WITH(HistogramObserver(per_channel, no_bins), Catch::Contains("histogram_options.bins = 0"));
  HistogramOptions no_upsample;
  no_upsample.upsample_rate = 0;
  CHECK_THROWS_WITH(HistogramObserver(per_channel, no_upsample), Catch::Contains("histogram_options.upsample_rate = 0"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{8})), Catch::Contains("batch.shape = [8]"));
}

TEST_CASE("HistogramObserver with ignore_nonfinite equals the observer of the finite values",
          "[quant][observer][histogram]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> finite = random_values(500, 13);
  std::vector<float> dirty = finite;
  dirty.insert(dirty.begin() + 100, std::numeric_limits<float>::quiet_NaN());
  dirty.insert(dirty.begin() + 7, -inf);
  dirty.push_back(inf);
  ObserverOptions skip;
  skip.ignore_nonfinite = true;
  const QuantScheme scheme = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine);
  HistogramObserver clean(scheme), tolerant(scheme, {}, skip);
  clean.observe(make_view(finite));
  tolerant.observe(make_view(dirty));
  CHECK(tolerant.state().histogram == clean.state().histogram);
  CHECK(tolerant.qparams().scale == clean.qparams().scale);
  // A channel that never sees a finite value has no parameters.
  HistogramObserver all_nan(QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0), {}, skip);
  std::vector<float> x{1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), inf};
  all_nan.observe(TensorView<const float>(x.data(), Shape{2, 2}));
  CHECK_THROWS_WITH(all_nan.qparams(), Catch::Contains("channel 1 has seen no finite value"));
}

TEST_CASE("HistogramObserver reset forgets everything", "[quant][observer][histogram]") {
  HistogramObserver obs(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine));
  const std::vector<float> x = random_values(100, 14);
  obs.observe(make_view(x));
  obs.reset();
  CHECK(obs.batches_seen() == 0);
  CHECK_THROWS_WITH(obs.qparams(), Catch::Contains("observed no batch"));
  obs.observe(make_view(x));
  HistogramObserver fresh(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine));
  fresh.observe(make_view(x));
  CHECK(obs.qparams().scale == fresh.qparams().scale);
}
