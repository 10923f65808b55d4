// Tests for shrink/quant/smoothquant.hpp: channel maxima, smoothing factors, and the X W^T invariance.
#include <catch2/catch.hpp>

#include <Eigen/Dense>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/smoothquant.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// An Eigen matrix seen as a [rows, cols] TensorView through its own strides.
template <class Matrix>
TensorView<float> view_of(Matrix& m) {
  return TensorView<float>(m.data(), Shape{m.rows(), m.cols()}, Strides{m.rowStride(), m.colStride()});
}

// Activations with a few outlier channels, as SmoothQuant targets.
RowMajor random_activations(std::int64_t tokens, std::int64_t channels, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMajor x(tokens, channels);
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t j = 0; j < channels; ++j) x(t, j) = normal(rng) * (j % 7 == 3 ? 60.0f : 1.0f);
  return x;
}

ColMajor random_weight_matrix(std::int64_t out, std::int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 0.05f);
  ColMajor w(out, in);
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t j = 0; j < in; ++j) w(o, j) = normal(rng);
  return w;
}

Eigen::MatrixXd product(const RowMajor& x, const ColMajor& w) {
  return x.cast<double>() * w.cast<double>().transpose();
}

double max_relative_difference(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  return (a - b).cwiseAbs().maxCoeff() / a.cwiseAbs().maxCoeff();
}

}  // namespace

TEST_CASE("ActivationChannelAbsMax accumulates per-channel max |x| over batches", "[quant][smoothquant]") {
  ActivationChannelAbsMax collector;
  CHECK_THROWS_WITH(collector.absmax(), Catch::Contains("observe"));
  const std::vector<float> first{1.0f, -5.0f, 0.0f, 2.0f, 3.0f, -0.5f};  // [2, 3]
  collector.observe(TensorView<const float>(first.data(), Shape{2, 3}));
  CHECK(collector.absmax() == std::vector<float>{2.0f, 5.0f, 0.5f});
  const std::vector<float> second{-7.0f, 1.0f, 0.25f, 0.0f, 0.0f, 4.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};  // [2, 2, 3]
  collector.observe(TensorView<const float>(second.data(), Shape{2, 2, 3}));
  CHECK(collector.absmax() == std::vector<float>{7.0f, 5.0f, 4.0f});
  CHECK(collector.batches_seen() == 2);
  CHECK(collector.channels() == 3);

  // A transposed (column-major) batch: [tokens = 2, channels = 3] stored channel by channel.
  const std::vector<float> transposed{0.0f, 9.0f, 0.0f, 0.0f, 0.0f, -8.0f};
  collector.observe(TensorView<const float>(transposed.data(), Shape{2, 3}, Strides{1, 2}));
  CHECK(collector.absmax() == std::vector<float>{9.0f, 5.0f, 8.0f});

  // Failed batches leave the state as it was.
  const std::vector<float> four(8, 100.0f);
  CHECK_THROWS_WITH(collector.observe(TensorView<const float>(four.data(), Shape{2, 4})),
                    Catch::Contains("batch.shape = [2, 4]") && Catch::Contains("3 channels"));
  std::vector<float> bad(6, 100.0f);
  bad[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(collector.observe(TensorView<const float>(bad.data(), Shape{2, 3})), Catch::Contains("batch[4] = nan"));
  bad[4] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(collector.observe(TensorView<const float>(bad.data(), Shape{2, 3})), Catch::Contains("batch[4] = -inf"));
  CHECK_THROWS_AS(collector.observe(TensorView<const float>(bad.data(), Shape{0, 3})), Error);
  CHECK(collector.absmax() == std::vector<float>{9.0f, 5.0f, 8.0f});
  CHECK(collector.batches_seen() == 3);

  collector.reset();
  CHECK(collector.batches_seen() == 0);
  collector.observe(TensorView<const float>(four.data(), Shape{2, 4}));
  CHECK(collector.channels() == 4);
}

TEST_CASE("weight_channel_absmax takes column maxima of [out, in] in any layout", "[quant][smoothquant]") {
  ColMajor w(2, 3);
  w << 1, -4, 0.5f,  //
      -3, 2, 0;
  CHECK(weight_channel_absmax(view_of(w)) == std::vector<float>{3.0f, 4.0f, 0.5f});
  RowMajor r = w;
  CHECK(weight_channel_absmax(view_of(r)) == std::vector<float>{3.0f, 4.0f, 0.5f});
  // A block of a larger matrix: strides are the parent's.
  ColMajor parent = ColMajor::Zero(5, 6);
  parent.block(1, 2, 2, 3) = w;
  auto block = parent.block(1, 2, 2, 3);
  const TensorView<const float> block_view(block.data(), Shape{2, 3}, Strides{1, parent.outerStride()});
  CHECK(weight_channel_absmax(block_view) == std::vector<float>{3.0f, 4.0f, 0.5f});

  // q, k, v projections sharing one input: the max over all of them.
  RowMajor other(1, 3);
  other << 0, 0, -6;
  CHECK(weight_channel_absmax(std::vector<TensorView<const float>>{view_of(w), view_of(other)}) ==
        std::vector<float>{3.0f, 4.0f, 6.0f});
  RowMajor narrow(1, 2);
  narrow << 1, 1;
  CHECK_THROWS_WITH(weight_channel_absmax(std::vector<TensorView<const float>>{view_of(w), view_of(narrow)}),
                    Catch::Contains("weights[1].shape = [1, 2]"));
  CHECK_THROWS_AS(weight_channel_absmax(std::vector<TensorView<const float>>{}), Error);
  w(1, 2) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(weight_channel_absmax(view_of(w)), Catch::Contains("weight[5] = inf"));  // row-major index of (1, 2)
  std::vector<float> cube(8, 1.0f);
  CHECK_THROWS_WITH(weight_channel_absmax(TensorView<const float>(cube.data(), Shape{2, 2, 2})),
                    Catch::Contains("[out, in]"));
}

TEST_CASE("smoothing_scales follows s = a^alpha / w^(1 - alpha)", "[quant][smoothquant]") {
  const std::vector<float> a{4.0f, 9.0f, 1.0f, 100.0f};
  const std::vector<float> w{1.0f, 4.0f, 1.0f, 0.01f};
  const std::vector<float> half = smoothing_scales(a, w, 0.5f);
  CHECK(half[0] == 2.0f);
  CHECK(half[1] == 1.5f);
  CHECK(half[2] == 1.0f);
  CHECK(half[3] == Approx(100.0f).epsilon(1e-6));
  CHECK(smoothing_scales(a, w, 1.0f) == a);  // all difficulty moved to the weights: s = a
  const std::vector<float> none = smoothing_scales(a, w, 0.0f);  // s = 1 / w
  CHECK(none[1] == 0.25f);
  CHECK(none[3] == Approx(100.0f).epsilon(1e-6));
  const std::vector<float> three_quarters = smoothing_scales({16.0f}, {16.0f}, 0.75f);
  CHECK(three_quarters[0] == Approx(4.0f).epsilon(1e-6));  // 16^0.75 / 16^0.25 = 8 / 2
}

TEST_CASE("smoothing_scales raises zero maxima to the floor before the powers", "[quant][smoothquant]") {
  // Activation channel never active, weight column zero, both zero.
  const std::vector<float> s = smoothing_scales({0.0f, 4.0f, 0.0f}, {4.0f, 0.0f, 0.0f}, 0.5f);
  CHECK(s[0] == Approx(std::sqrt(1e-5) / 2.0).epsilon(1e-6));
  CHECK(s[1] == Approx(2.0 / std::sqrt(1e-5)).epsilon(1e-6));
  CHECK(s[2] == Approx(1.0).epsilon(1e-6));
  for (float v : s) CHECK((std::isfinite(v) && v > 0.0f));
  // A caller-chosen floor.
  const std::vector<float> custom = smoothing_scales({0.0f}, {0.0f}, 1.0f, 0.25f);
  CHECK(custom[0] == 0.25f);
  // Tiny but non-zero maxima below the floor count as the floor too.
  CHECK(smoothing_scales({1e-9f}, {1.0f}, 1.0f)[0] == 1e-5f);
}

TEST_CASE("smoothing_scales rejects bad alpha, maxima and unusable factors", "[quant][smoothquant]") {
  const std::vector<float> a{1.0f, 2.0f};
  const std::vector<float> w{1.0f, 2.0f};
  CHECK_THROWS_WITH(smoothing_scales(a, w, 1.5f), Catch::Contains("alpha = 1.5") && Catch::Contains("[0, 1]"));
  CHECK_THROWS_AS(smoothing_scales(a, w, -0.1f), Error);
  CHECK_THROWS_AS(smoothing_scales(a, w, std::nanf("")), Error);
  CHECK_THROWS_WITH(smoothing_scales(a, w, 0.5f, 0.0f), Catch::Contains("magnitude_floor = 0"));
  CHECK_THROWS_WITH(smoothing_scales(a, {1.0f}, 0.5f), Catch::Contains("weight_absmax.size() = 1"));
  CHECK_THROWS_AS(smoothing_scales(std::vector<float>{}, std::vector<float>{}, 0.5f), Error);
  CHECK_THROWS_WITH(smoothing_scales({1.0f, -2.0f}, w, 0.5f), Catch::Contains("activation_absmax[1] = -2"));
  CHECK_THROWS_WITH(smoothing_scales(a, {std::nanf(""), 1.0f}, 0.5f), Catch::Contains("weight_absmax[0] = nan"));
  // alpha = 0 with a huge weight column: s = 1 / FLT_MAX is subnormal, and 1 / s would overflow.
  CHECK_THROWS_WITH(smoothing_scales({1.0f}, {std::numeric_limits<float>::max()}, 0.0f),
                    Catch::Contains("scales[0]") && Catch::Contains("normal float"));
}

TEST_CASE("smoothing keeps X W^T: activations divided, weight multiplied (Eigen views)", "[quant][smoothquant]") {
  std::mt19937 rng(42);
  const std::int64_t tokens = 16, in = 32, out = 24;
  ActivationChannelAbsMax collector;
  RowMajor x;
  for (int batch = 0; batch < 3; ++batch) {  // calibrate on several batches, test on the last
    x = random_activations(tokens, in, rng);
    collector.observe(view_of(x));
  }
  ColMajor w = random_weight_matrix(out, in, rng);
  const Eigen::MatrixXd reference = product(x, w);

  for (float alpha : {0.0f, 0.5f, 0.85f, 1.0f}) {
    RowMajor xs = x;
    ColMajor ws = w;
    const std::vector<float> scales = smoothing_scales(collector, view_of(ws), alpha);
    apply_smoothing(scales, view_of(ws));        // column-major weight, strides {1, out}
    apply_inverse_smoothing(scales, view_of(xs));  // row-major activations
    INFO("alpha = " << alpha);
    CHECK(max_relative_difference(reference, product(xs, ws)) < 1e-5);
    for (std::int64_t j = 0; j < in; ++j) {
      CHECK(ws.col(j).cwiseAbs().maxCoeff() == Approx(w.col(j).cwiseAbs().maxCoeff() * scales[j]).epsilon(1e-6));
    }
  }

  // alpha = 0.5 balances the two: max |X'_j| = max |W'_j| = sqrt(a_j w_j) on the calibration maxima.
  const std::vector<float> scales = smoothing_scales(collector, view_of(w), 0.5f);
  const std::vector<float> a = collector.absmax();
  const std::vector<float> wmax = weight_channel_absmax(view_of(w));
  for (std::size_t j = 0; j < scales.size(); ++j) {
    CHECK(a[j] / scales[j] == Approx(wmax[j] * scales[j]).epsilon(1e-5));
  }
}

TEST_CASE("folding the factors into a LayerNorm keeps LN(X) W^T", "[quant][smoothquant]") {
  std::mt19937 rng(9);
  const std::int64_t tokens = 8, in = 20, out = 12;
  const RowMajor x = random_activations(tokens, in, rng);
  ColMajor w = random_weight_matrix(out, in, rng);
  std::normal_distribution<float> normal(1.0f, 0.3f);
  std::vector<float> gamma(static_cast<std::size_t>(in)), beta(static_cast<std::size_t>(in));
  for (std::int64_t j = 0; j < in; ++j) {
    gamma[j] = normal(rng);
    beta[j] = normal(rng) - 1.0f;
  }
  const auto layer_norm = [&](const std::vector<float>& g, const std::vector<float>* b) {
    RowMajor y(tokens, in);
    for (std::int64_t t = 0; t < tokens; ++t) {
      const float mean = x.row(t).mean();
      const float variance = (x.row(t).array() - mean).square().mean();
      for (std::int64_t j = 0; j < in; ++j)
        y(t, j) = (x(t, j) - mean) / std::sqrt(variance + 1e-5f) * g[j] + (b ? (*b)[j] : 0.0f);
    }
    return y;
  };

  SECTION("LayerNorm: gamma and beta") {
    const Eigen::MatrixXd reference = product(layer_norm(gamma, &beta), w);
    ActivationChannelAbsMax collector;
    const RowMajor normed = layer_norm(gamma, &beta);
    collector.observe(TensorView<const float>(normed.data(), Shape{tokens, in}));
    const std::vector<float> scales = smoothing_scales(collector, view_of(w), 0.5f);
    fold_smoothing_into_norm(scales, make_view(gamma), make_view(beta));
    apply_smoothing(scales, view_of(w));
    CHECK(max_relative_difference(reference, product(layer_norm(gamma, &beta), w)) < 1e-5);
  }
  SECTION("RMSNorm-style: gamma only") {
    const Eigen::MatrixXd reference = product(layer_norm(gamma, nullptr), w);
    const std::vector<float> scales = smoothing_scales(std::vector<float>(in, 30.0f), weight_channel_absmax(view_of(w)), 0.5f);
    fold_smoothing_into_norm(scales, make_view(gamma));
    apply_smoothing(scales, view_of(w));
    CHECK(max_relative_difference(reference, product(layer_norm(gamma, nullptr), w)) < 1e-5);
  }
}

TEST_CASE("applying smoothing rejects bad input and writes nothing", "[quant][smoothquant]") {
  RowMajor w(2, 3);
  w << 1, 2, 3, 4, 5, 6;
  const RowMajor original = w;
  std::vector<float> gamma{1, 1, 1}, beta{0.5f, 0.5f, 0.5f};
  const std::vector<float> ok{1.0f, 2.0f, 4.0f};

  CHECK_THROWS_WITH(apply_smoothing({1.0f, 2.0f}, view_of(w)), Catch::Contains("scales.size() = 2"));
  CHECK_THROWS_WITH(apply_smoothing({1.0f, 0.0f, 1.0f}, view_of(w)), Catch::Contains("scales[1] = 0"));
  CHECK_THROWS_AS(apply_smoothing({1.0f, 1.0f, std::nanf("")}, view_of(w)), Error);
  w(1, 1) = std::nanf("");
  CHECK_THROWS_WITH(apply_smoothing(ok, view_of(w)), Catch::Contains("weight[4] = nan"));
  w(1, 1) = 5;
  CHECK(w == original);
  CHECK_THROWS_WITH(apply_smoothing(ok, TensorView<float>(w.data(), Shape{6})), Catch::Contains("[out, in]"));
  CHECK_THROWS_AS(apply_smoothing(ok, TensorView<float>(w.data(), Shape{2, 3}, Device::cuda(0))), Error);

  CHECK_THROWS_WITH(apply_inverse_smoothing({1.0f, 2.0f}, view_of(w)), Catch::Contains("scales.size() = 2"));
  CHECK_THROWS_AS(apply_inverse_smoothing(ok, TensorView<float>(w.data(), Shape{0, 3})), Error);
  CHECK(w == original);

  CHECK_THROWS_WITH(fold_smoothing_into_norm(ok, make_view(gamma), TensorView<float>(beta.data(), Shape{2})),
                    Catch::Contains("beta.shape = [2]"));
  CHECK_THROWS_WITH(fold_smoothing_into_norm({1.0f, -1.0f, 1.0f}, make_view(gamma), make_view(beta)),
                    Catch::Contains("scales[1] = -1"));
  beta[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(fold_smoothing_into_norm(ok, make_view(gamma), make_view(beta)), Catch::Contains("beta[2] = inf"));
  beta[2] = 0.5f;
  CHECK(gamma == std::vector<float>{1, 1, 1});
  CHECK(beta == std::vector<float>{0.5f, 0.5f, 0.5f});

  fold_smoothing_into_norm(ok, make_view(gamma), make_view(beta));
  CHECK(gamma == std::vector<float>{1.0f, 0.5f, 0.25f});
  CHECK(beta == std::vector<float>{0.5f, 0.25f, 0.125f});
  apply_smoothing(ok, view_of(w));
  RowMajor expected(2, 3);
  expected << 1, 4, 12, 4, 10, 24;
  CHECK(w == expected);
}

TEST_CASE("fold_smoothing_into_linear divides a preceding Linear's rows; bad input is one Error, nothing written",
          "[quant][smoothquant]") {
  std::vector<float> w{1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};  // [3, 2]
  std::vector<float> b{1.0f, 1.0f, 1.0f};
  const std::vector<float> w0 = w, b0 = b;
  const TensorView<float> wv(w.data(), Shape{3, 2});
  CHECK_THROWS_WITH(fold_smoothing_into_linear({1.0f, 2.0f}, wv, TensorView<float>(b.data(), Shape{3})),
                    Catch::Contains("scales.size() = 2"));
  CHECK_THROWS_WITH(fold_smoothing_into_linear({1.0f, 0.0f, 2.0f}, wv), Catch::Contains("scales[1] = 0"));
  CHECK_THROWS_WITH(fold_smoothing_into_linear({1.0f, 2.0f, 4.0f}, wv, TensorView<float>(b.data(), Shape{2})),
                    Catch::Contains("bias.shape = [2]"));
  b[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(fold_smoothing_into_linear({1.0f, 2.0f, 4.0f}, wv, TensorView<float>(b.data(), Shape{3})),
                    Catch::Contains("bias[2] = inf"));
  b[2] = 1.0f;
  CHECK(w == w0);
  CHECK(b == b0);
  fold_smoothing_into_linear({1.0f, 2.0f, 4.0f}, wv, TensorView<float>(b.data(), Shape{3}));
  CHECK(w == std::vector<float>{1.0f, 2.0f, 1.5f, 2.0f, 1.25f, 1.5f});
  CHECK(b == std::vector<float>{1.0f, 0.5f, 0.25f});
}
