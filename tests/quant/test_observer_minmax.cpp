// Tests for shrink/quant/observer.hpp and shrink/quant/observers/minmax.hpp beyond the PyTorch goldens.
#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include "shrink/quant/observers/minmax.hpp"

using namespace shrink;
using namespace shrink::quant;

TEST_CASE("MinMaxObserver over batches equals one pass over their concatenation", "[quant][observer]") {
  std::vector<float> all{-3, 1, 2, 5, 0.5f, -1, 8, -7, 2, 2, 3, 1};
  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 1);
  MinMaxObserver split(scheme);
  split.observe(TensorView<const float>(all.data(), Shape{2, 3}));
  split.observe(TensorView<const float>(all.data() + 6, Shape{2, 3}));
  MinMaxObserver whole(scheme);
  whole.observe(TensorView<const float>(all.data(), Shape{4, 3}));
  CHECK(split.min_values() == whole.min_values());
  CHECK(split.max_values() == whole.max_values());
  CHECK(split.min_values() == std::vector<float>{-3, -7, -1});
  CHECK(split.qparams().scale == whole.qparams().scale);
  CHECK(split.batches_seen() == 2);
}

TEST_CASE("per-group min/max covers each group of the grouped axis", "[quant][observer]") {
  std::vector<float> w{1, -2, 3, 4, -5, 6, 7, 8};  // [2, 4], groups of 2 along axis 1
  MinMaxObserver obs(QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 2));
  obs.observe(TensorView<const float>(w.data(), Shape{2, 4}));
  CHECK(obs.min_values() == std::vector<float>{-2, 3, -5, 7});
  CHECK(obs.max_values() == std::vector<float>{1, 4, 6, 8});
  CHECK(obs.qparams().shape == Shape{2, 2});
}

TEST_CASE("observers refuse bad input and keep their state", "[quant][observer][bad-input]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  MinMaxObserver obs(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
  CHECK_THROWS_WITH(obs.qparams(), Catch::Contains("observed no batch"));
  std::vector<float> good{1, 2, 3, 4}, bad{1, 2, nan, 40};
  obs.observe(TensorView<const float>(good.data(), Shape{2, 2}));
  const QParams before = obs.qparams();
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(bad.data(), Shape{2, 2})), Catch::Contains("batch[2] = nan"));
  CHECK(obs.qparams().scale == before.scale);
  CHECK(obs.batches_seen() == 1);
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{4, 1})), Catch::Contains("batch.shape = [4, 1]"));
  CHECK_THROWS_WITH(obs.observe(TensorView<const float>(good.data(), Shape{0, 2})), Catch::Contains("empty"));
  CHECK_THROWS_AS(MovingAverageMinMaxObserver(QuantScheme{}, 0.0f), Error);
  CHECK_THROWS_AS(MovingAverageMinMaxObserver(QuantScheme{}, 1.5f), Error);
}

TEST_CASE("ignore_nonfinite skips NaN and inf in calibration", "[quant][observer]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x{1, -inf, 2, std::numeric_limits<float>::quiet_NaN(), -3, inf};
  ObserverOptions opts;
  opts.ignore_nonfinite = true;
  MinMaxObserver obs(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine), opts);
  obs.observe(make_view(x));
  CHECK(obs.min_values()[0] == -3.0f);
  CHECK(obs.max_values()[0] == 2.0f);

  MinMaxObserver channels(QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 1), opts);
  std::vector<float> only_nan{std::numeric_limits<float>::quiet_NaN(), 1.0f};
  channels.observe(TensorView<const float>(only_nan.data(), Shape{1, 2}));
  CHECK_THROWS_WITH(channels.qparams(), Catch::Contains("entry 0 has seen no finite value"));
}
