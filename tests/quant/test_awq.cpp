// Tests for shrink/quant/awq.hpp: the PyTorch reference written from the paper (tests/golden/gen_awq.py), the output
// error against round-to-nearest, folding 1/s before the layer, thread-count invariance, and every bad input.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "shrink/quant/awq.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/smoothquant.hpp"
#include "support/executors.hpp"
#include "support/golden.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

struct Group {
  std::vector<float> x;
  Shape x_shape;
  std::vector<std::vector<float>> weights;
  std::vector<Shape> shapes;

  TensorView<const float> x_view() const { return TensorView<const float>(x.data(), x_shape); }
  std::vector<TensorView<const float>> views() const {
    std::vector<TensorView<const float>> v;
    for (std::size_t k = 0; k < weights.size(); ++k) v.emplace_back(weights[k].data(), shapes[k]);
    return v;
  }
};

std::vector<float> scaled_integers(const std::vector<std::int64_t>& values, std::int64_t exponent) {
  std::vector<float> out(values.size());
  for (std::size_t k = 0; k < values.size(); ++k)
    out[k] = static_cast<float>(std::ldexp(static_cast<double>(values[k]), static_cast<int>(exponent)));
  return out;
}

std::map<std::string, Group> golden_groups(const std::vector<test::GoldenCase>& cases) {
  std::map<std::string, Group> groups;
  for (const auto& c : cases) {
    if (c.name.rfind("layer/", 0) != 0) continue;
    Group g;
    g.x = scaled_integers(c.ints("x"), c.ints("x_exp")[0]);
    g.x_shape = Shape{c.ints("x_shape")[0], c.ints("x_shape")[1]};
    for (std::int64_t k = 0; k < c.ints("linears")[0]; ++k) {
      const std::string i = std::to_string(k);
      g.weights.push_back(scaled_integers(c.ints("weight" + i), c.ints("w_exp")[0]));
      g.shapes.push_back(Shape{c.ints("shape" + i)[0], c.ints("shape" + i)[1]});
    }
    groups[c.name.substr(6)] = g;
  }
  return groups;
}

AwqOptions awq_options_of(const test::GoldenCase& c) {
  AwqOptions o;
  o.bits = static_cast<int>(c.ints("bits")[0]);
  o.symmetry = c.ints("symmetric")[0] ? Symmetry::symmetric : Symmetry::affine;
  o.group_size = c.ints("group_size")[0];
  o.grid = static_cast<int>(c.ints("grid")[0]);
  o.duo_scaling = c.ints("duo")[0] != 0;
  return o;
}

// mean over rows and outputs of (X·Wᵀ − X·W'ᵀ)², W' = dequantize(t)·diag(s)⁻¹, in double.
double mean_squared_output_error(const Group& g, std::size_t k, const QuantizedTensor& t, const std::vector<float>& s) {
  const std::vector<float> w_hat = dequantize(t);
  const std::int64_t n = g.x_shape[0], in = g.x_shape[1], out = g.shapes[k][0];
  Eigen::MatrixXd x(n, in), d(out, in);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < in; ++j) x(r, j) = g.x[static_cast<std::size_t>(r * in + j)];
  for (std::int64_t o = 0; o < out; ++o)
    for (std::int64_t j = 0; j < in; ++j)
      d(o, j) = static_cast<double>(g.weights[k][static_cast<std::size_t>(o * in + j)]) -
                static_cast<double>(w_hat[static_cast<std::size_t>(o * in + j)]) / s[static_cast<std::size_t>(j)];
  return (x * d.transpose()).squaredNorm() / static_cast<double>(n * out);
}

// Correlated rows with a few salient channels (×20 and an offset), as LLM activations after a norm.
std::vector<float> random_x(std::int64_t n, std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t k = in / 4;
  std::vector<float> a(static_cast<std::size_t>(k * in)), x(static_cast<std::size_t>(n * in));
  for (float& v : a) v = normal(rng) / std::sqrt(static_cast<float>(k));
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<float> z(static_cast<std::size_t>(k));
    for (float& v : z) v = normal(rng);
    for (std::int64_t j = 0; j < in; ++j) {
      float s = 0.1f * normal(rng);
      for (std::int64_t l = 0; l < k; ++l)
        s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * in + j)];
      if (j % 37 == 5) s = 20.0f * s + 3.0f;
      x[static_cast<std::size_t>(t * in + j)] = s;
    }
  }
  return x;
}

std::vector<float> random_normal_weight(std::int64_t out, std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = normal(rng);
  return w;
}

std::int64_t count_differing(const QuantizedTensor& t, const std::vector<std::int64_t>& expected) {
  std::int64_t differ = 0;
  for (std::int64_t k = 0; k < t.numel(); ++k) differ += t.value(k) != expected[static_cast<std::size_t>(k)];
  return differ;
}

}  // namespace

TEST_CASE("awq_search equals the PyTorch reference from the paper", "[quant][awq][golden]") {
  const auto cases = test::load_golden("golden/awq.golden");
  const auto groups = golden_groups(cases);
  REQUIRE(groups.size() == 3);
  std::int64_t compared = 0, differing = 0, scales_compared = 0, scales_differing = 0, params_differing = 0;
  std::int64_t clips_compared = 0, clips_differing = 0, cases_run = 0;
  for (const auto& c : cases) {
    if (c.name.rfind("awq/", 0) != 0) continue;
    INFO(c.name);
    ++cases_run;
    const Group& g = groups.at(c.text("layer"));
    const AwqOptions o = awq_options_of(c);
    const AwqResult r = awq_search(g.views(), g.x_view(), o);
    CHECK(r.alpha_index == c.ints("alpha_index")[0]);
    CHECK(r.alpha == static_cast<double>(r.alpha_index) / o.grid);
    const std::vector<float> scales = c.floats("scales");
    REQUIRE(r.scales.size() == scales.size());
    for (std::size_t j = 0; j < scales.size(); ++j) {
      ++scales_compared;
      scales_differing += r.scales[j] != scales[j];
    }
    const std::vector<double>& losses = c.doubles("losses");
    REQUIRE(r.losses.size() == losses.size());
    for (std::size_t i = 0; i < losses.size(); ++i) CHECK(r.losses[i] == Approx(losses[i]).epsilon(1e-9));
    CHECK(r.rtn_loss == Approx(c.doubles("rtn_loss")[0]).epsilon(1e-9));
    CHECK(r.loss == r.losses[static_cast<std::size_t>(r.alpha_index)]);
    CHECK(r.weight_magnitude.size() == (o.duo_scaling ? scales.size() : 0));

    const bool clip = c.ints("clip")[0] != 0;
    for (std::size_t k = 0; k < g.weights.size(); ++k) {
      const std::string i = std::to_string(k);
      const TensorView<const float> w = g.views()[k];
      std::vector<float> bounds;
      if (clip) {
        bounds = awq_clip_search(w, g.x_view(), r.scales, o);
        const std::vector<float> expected = c.floats("clip" + i);
        REQUIRE(bounds.size() == expected.size());
        for (std::size_t e = 0; e < bounds.size(); ++e) {
          ++clips_compared;
          clips_differing += bounds[e] != expected[e];
        }
      }
      const QuantizedTensor t = awq_quantize(w, r.scales, o, bounds);
      CHECK(t.scheme.bits == (o.bits == 4 || o.bits == 8 ? 0 : o.bits));
      const std::vector<std::int64_t>& values = c.ints("values" + i);
      REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
      compared += t.numel();
      differing += count_differing(t, values);
      const std::vector<float> scale = c.floats("scale" + i);
      const std::vector<std::int64_t>& zero = c.ints("zero_point" + i);
      REQUIRE(scale.size() == t.qparams.scale.size());
      for (std::size_t e = 0; e < scale.size(); ++e)
        params_differing += t.qparams.scale[e] != scale[e] || t.qparams.zero_point[e] != zero[e];
    }
  }
  CHECK(cases_run == 7);
  WARN("AWQ vs the PyTorch reference: " << differing << " of " << compared << " integers, " << scales_differing
                                        << " of " << scales_compared << " factors s, " << params_differing
                                        << " group parameters, " << clips_differing << " of " << clips_compared
                                        << " clip bounds differ");
  CHECK(differing <= 2);
  CHECK(scales_differing == 0);
  CHECK(clips_differing <= 2);
  CHECK(params_differing <= 2);
}

TEST_CASE("awq_search from a Hessian and s_x equals the search from X; max_rows takes evenly spread rows",
          "[quant][awq]") {
  const std::int64_t n = 300, in = 64;
  const std::vector<float> x = random_x(n, in, 1);
  const std::vector<float> w0 = random_normal_weight(48, in, 2), w1 = random_normal_weight(16, in, 3);
  const std::vector<TensorView<const float>> weights{TensorView<const float>(w0.data(), Shape{48, in}),
                                                     TensorView<const float>(w1.data(), Shape{16, in})};
  AwqOptions o;
  o.group_size = 32;
  const AwqResult from_x = awq_search(weights, TensorView<const float>(x.data(), Shape{n, in}), o);
  HessianObserver h;
  ActivationMeanAbsObserver a;
  for (std::int64_t t0 = 0; t0 < n; t0 += 100) {  // in batches, as a calibration loop streams them
    const TensorView<const float> batch(x.data() + t0 * in, Shape{100, in});
    h.observe(batch);
    a.observe(batch);
  }
  const AwqResult from_h = awq_search(weights, h.hessian(), a.mean_abs(), o);
  CHECK(from_h.scales == from_x.scales);
  CHECK(from_h.alpha_index == from_x.alpha_index);
  for (std::size_t i = 0; i < from_x.losses.size(); ++i)
    CHECK(from_h.losses[i] == Approx(from_x.losses[i]).epsilon(1e-12));

  // A [3, 100, in] batch is the same 300 rows.
  const AwqResult rank3 = awq_search(weights, TensorView<const float>(x.data(), Shape{3, 100, in}), o);
  CHECK(rank3.scales == from_x.scales);
  CHECK(rank3.losses == from_x.losses);

  // max_rows = 7 reads rows ⌊t·300/7⌋; at least n reads them all.
  std::vector<float> picked;
  for (std::int64_t t = 0; t < 7; ++t) {
    const float* row = x.data() + (t * n / 7) * in;
    picked.insert(picked.end(), row, row + in);
  }
  AwqOptions capped = o;
  capped.max_rows = 7;
  const AwqResult few = awq_search(weights, TensorView<const float>(x.data(), Shape{n, in}), capped);
  const AwqResult expected = awq_search(weights, TensorView<const float>(picked.data(), Shape{7, in}), o);
  CHECK(few.scales == expected.scales);
  CHECK(few.losses == expected.losses);
  capped.max_rows = n;
  CHECK(awq_search(weights, TensorView<const float>(x.data(), Shape{n, in}), capped).losses == from_x.losses);
}

TEST_CASE("AWQ's layer output error is below round-to-nearest's at 3 and 4 bits, groups of 64", "[quant][awq]") {
  const auto cases = test::load_golden("golden/awq.golden");
  const auto groups = golden_groups(cases);
  for (const auto& entry : groups) {
    const Group& g = entry.second;
    for (int bits : {3, 4}) {
      INFO("layer " << entry.first << ", " << bits << " bits");
      AwqOptions o;
      o.bits = bits;
      const AwqResult r = awq_search(g.views(), g.x_view(), o);
      // In the paper's form α = 0 is RTN: the chosen loss cannot be above it.
      CHECK(r.losses[0] == r.rtn_loss);
      CHECK(r.loss <= r.rtn_loss);
      // What awq_quantize stores is what the search scored; RTN's error from quantize() of W itself.
      double awq = 0.0, rtn = 0.0, clipped = 0.0;
      const std::vector<float> ones(r.scales.size(), 1.0f);
      for (std::size_t k = 0; k < g.weights.size(); ++k) {
        const TensorView<const float> w = g.views()[k];
        awq += mean_squared_output_error(g, k, awq_quantize(w, r.scales, o), r.scales);
        rtn += mean_squared_output_error(g, k, quantize(w, awq_scheme(o)), ones);
        clipped += mean_squared_output_error(
            g, k, awq_quantize(w, r.scales, o, awq_clip_search(w, g.x_view(), r.scales, o)), r.scales);
      }
      CHECK(awq == Approx(r.loss).epsilon(1e-9));
      CHECK(rtn == Approx(r.rtn_loss).epsilon(1e-9));
      CHECK(clipped <= awq * (1.0 + 1e-12));  // each group's clip bound includes "no clip"
      WARN("layer " << entry.first << ", " << bits << " bits, g64: alpha " << r.alpha
                    << ", output MSE AWQ / RTN = " << awq / rtn << ", with clipping " << clipped / rtn);
      CHECK(awq / rtn < 0.5);
      CHECK(clipped / rtn < 0.5);
    }
  }
}

TEST_CASE("duo scaling and the weight magnitude s_w", "[quant][awq]") {
  // Rows [2, 0, 1, −4] and [0, 0, 0, 0] with groups of 2: |w| / group max = [1, 0, 0.25, 1] and 0.
  const std::vector<float> w{2.0f, 0.0f, 1.0f, -4.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> m = awq_weight_magnitude({TensorView<const float>(w.data(), Shape{2, 4})}, 2);
  CHECK(m == std::vector<float>{0.5f, 0.0f, 0.125f, 0.5f});
  // s = r / sqrt(max r · min r): the paper's form at α = 1 is s_x centred; s_x = 0 is raised to the floor.
  const std::vector<float> sx{4.0f, 1.0f, 0.0f, 16.0f};
  const std::vector<float> s = awq_scales(sx, {}, 1.0, 0.25f);
  CHECK(s == std::vector<float>{2.0f, 0.5f, 0.125f, 8.0f});  // centre sqrt(16 · 0.25) = 2
  for (float v : awq_scales(sx, {}, 0.0)) CHECK(v == 1.0f);
  const std::vector<float> duo = awq_scales(sx, {1.0f, 1.0f, 1.0f, 4.0f}, 0.5, 0.25f);
  CHECK(duo[3] == Approx(std::sqrt(16.0) / std::sqrt(4.0) / std::sqrt(2.0 * 0.5)).epsilon(1e-7));

  const std::int64_t n = 200, in = 64;
  const std::vector<float> x = random_x(n, in, 4);
  const std::vector<float> w0 = random_normal_weight(32, in, 5);
  AwqOptions o;
  o.duo_scaling = true;
  const AwqResult r = awq_search({TensorView<const float>(w0.data(), Shape{32, in})},
                                 TensorView<const float>(x.data(), Shape{n, in}), o);
  CHECK(r.weight_magnitude.size() == static_cast<std::size_t>(in));
  CHECK(r.losses[0] != r.rtn_loss);  // α = 0 is s = 1 / s_w, not RTN: RTN is scored apart
  CHECK(r.loss < r.rtn_loss);
}

TEST_CASE("a channel whose activations are always zero gets a finite factor", "[quant][awq]") {
  const std::int64_t n = 100, in = 64;
  std::vector<float> x = random_x(n, in, 6);
  for (std::int64_t t = 0; t < n; ++t) x[static_cast<std::size_t>(t * in + 9)] = 0.0f;
  const std::vector<float> w = random_normal_weight(24, in, 7);
  for (bool duo : {false, true}) {
    AwqOptions o;
    o.duo_scaling = duo;
    o.group_size = 32;
    const TensorView<const float> wv(w.data(), Shape{24, in});
    const AwqResult r = awq_search({wv}, TensorView<const float>(x.data(), Shape{n, in}), o);
    CHECK(r.activation_mean_abs[9] == 0.0f);
    for (float s : r.scales) CHECK((std::isfinite(s) && s > 0.0f));
    for (double l : r.losses) CHECK(std::isfinite(l));
    const QuantizedTensor t = awq_quantize(
        wv, r.scales, o, awq_clip_search(wv, TensorView<const float>(x.data(), Shape{n, in}), r.scales, o));
    for (float v : dequantize(t)) CHECK(std::isfinite(v));
  }
}

TEST_CASE("folding 1/s before the layer leaves the float model's function unchanged", "[quant][awq][fold]") {
  const std::int64_t n = 64, in = 64, hidden = 48;
  std::mt19937 rng(8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<float> w = random_normal_weight(hidden, in, 9);
  std::vector<float> x(static_cast<std::size_t>(n * in)), gamma(static_cast<std::size_t>(in)),
      beta(static_cast<std::size_t>(in));
  for (float& v : x) v = normal(rng);
  for (std::size_t j = 0; j < gamma.size(); ++j) {
    gamma[j] = (j % 37 == 5 ? 20.0f : 1.0f) * (1.0f + 0.1f * normal(rng));  // salient channels from the norm weight
    beta[j] = 0.1f * normal(rng);
  }
  // norm(x) = (x − μ) / sqrt(σ² + ε) · γ + β (LayerNorm) or x / rms(x) · γ (RMSNorm), then the Linear, in float.
  auto layer = [&](const std::vector<float>& g, const std::vector<float>* b, const std::vector<float>& weight) {
    std::vector<float> y(static_cast<std::size_t>(n * hidden)), h(static_cast<std::size_t>(in));
    for (std::int64_t t = 0; t < n; ++t) {
      const float* row = x.data() + t * in;
      float mean = 0.0f, sq = 0.0f;
      for (std::int64_t j = 0; j < in; ++j) mean += b ? row[j] / static_cast<float>(in) : 0.0f;
      for (std::int64_t j = 0; j < in; ++j) sq += (row[j] - mean) * (row[j] - mean) / static_cast<float>(in);
      const float inv = 1.0f / std::sqrt(sq + 1e-6f);
      for (std::int64_t j = 0; j < in; ++j)
        h[static_cast<std::size_t>(j)] =
            (row[j] - mean) * inv * g[static_cast<std::size_t>(j)] + (b ? (*b)[static_cast<std::size_t>(j)] : 0.0f);
      for (std::int64_t o = 0; o < hidden; ++o) {
        float acc = 0.0f;
        for (std::int64_t j = 0; j < in; ++j)
          acc += weight[static_cast<std::size_t>(o * in + j)] * h[static_cast<std::size_t>(j)];
        y[static_cast<std::size_t>(t * hidden + o)] = acc;
      }
    }
    return y;
  };
  auto max_relative = [](const std::vector<float>& a, const std::vector<float>& b) {
    double diff = 0.0, scale = 0.0;
    for (std::size_t k = 0; k < a.size(); ++k) {
      diff = std::max(diff, std::fabs(static_cast<double>(a[k]) - b[k]));
      scale = std::max(scale, std::fabs(static_cast<double>(a[k])));
    }
    return diff / scale;
  };

  // Scales from a real search on the norm's output: they span a wide range.
  const std::vector<float> before_rms = layer(gamma, nullptr, w);
  std::vector<float> norm_out(static_cast<std::size_t>(n * in));
  for (std::int64_t t = 0; t < n; ++t) {
    float sq = 0.0f;
    for (std::int64_t j = 0; j < in; ++j)
      sq += x[static_cast<std::size_t>(t * in + j)] * x[static_cast<std::size_t>(t * in + j)];
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(in) + 1e-6f);
    for (std::int64_t j = 0; j < in; ++j)
      norm_out[static_cast<std::size_t>(t * in + j)] =
          x[static_cast<std::size_t>(t * in + j)] * inv * gamma[static_cast<std::size_t>(j)];
  }
  AwqOptions o;
  const AwqResult r = awq_search({TensorView<const float>(w.data(), Shape{hidden, in})},
                                 TensorView<const float>(norm_out.data(), Shape{n, in}), o);
  REQUIRE(r.alpha > 0.0);
  const auto [lo, hi] = std::minmax_element(r.scales.begin(), r.scales.end());
  CHECK(*hi / *lo > 2.0f);

  std::vector<float> ws = w;
  apply_smoothing(r.scales, TensorView<float>(ws.data(), Shape{hidden, in}));

  SECTION("RMSNorm + Linear: γ / s") {
    std::vector<float> g = gamma;
    fold_smoothing_into_norm(r.scales, TensorView<float>(g.data(), Shape{in}));
    CHECK(max_relative(before_rms, layer(g, nullptr, ws)) < 1e-5);
  }
  SECTION("LayerNorm + Linear: γ / s, β / s") {
    const std::vector<float> before = layer(gamma, &beta, w);
    std::vector<float> g = gamma, b = beta;
    fold_smoothing_into_norm(r.scales, TensorView<float>(g.data(), Shape{in}), TensorView<float>(b.data(), Shape{in}));
    CHECK(max_relative(before, layer(g, &b, ws)) < 1e-5);
  }
  SECTION("Linear + Linear: W_prev[j, :] / s_j, b_prev / s") {
    // y = W·(W_prev·x + b_prev): x [n, in] → W_prev [in, in] → W [hidden, in].
    const std::vector<float> prev = random_normal_weight(in, in, 10);
    std::vector<float> bias(static_cast<std::size_t>(in));
    for (float& v : bias) v = normal(rng);
    auto two = [&](const std::vector<float>& p, const std::vector<float>& pb, const std::vector<float>& weight) {
      std::vector<float> y(static_cast<std::size_t>(n * hidden)), h(static_cast<std::size_t>(in));
      for (std::int64_t t = 0; t < n; ++t) {
        for (std::int64_t j = 0; j < in; ++j) {
          float acc = pb[static_cast<std::size_t>(j)];
          for (std::int64_t i = 0; i < in; ++i)
            acc += p[static_cast<std::size_t>(j * in + i)] * x[static_cast<std::size_t>(t * in + i)];
          h[static_cast<std::size_t>(j)] = acc;
        }
        for (std::int64_t o2 = 0; o2 < hidden; ++o2) {
          float acc = 0.0f;
          for (std::int64_t j = 0; j < in; ++j)
            acc += weight[static_cast<std::size_t>(o2 * in + j)] * h[static_cast<std::size_t>(j)];
          y[static_cast<std::size_t>(t * hidden + o2)] = acc;
        }
      }
      return y;
    };
    const std::vector<float> before = two(prev, bias, w);
    std::vector<float> p = prev, pb = bias;
    fold_smoothing_into_linear(r.scales, TensorView<float>(p.data(), Shape{in, in}),
                               TensorView<float>(pb.data(), Shape{in}));
    CHECK(max_relative(before, two(p, pb, ws)) < 1e-5);
    // Without a bias, and through a transposed (column-major) view: the same rows divided.
    std::vector<float> pt(static_cast<std::size_t>(in * in));
    for (std::int64_t j = 0; j < in; ++j)
      for (std::int64_t i = 0; i < in; ++i)
        pt[static_cast<std::size_t>(i * in + j)] = prev[static_cast<std::size_t>(j * in + i)];
    fold_smoothing_into_linear(r.scales, TensorView<float>(pt.data(), Shape{in, in}, Strides{1, in}));
    for (std::int64_t j = 0; j < in; ++j)
      for (std::int64_t i = 0; i < in; ++i)
        CHECK(pt[static_cast<std::size_t>(i * in + j)] == p[static_cast<std::size_t>(j * in + i)]);
  }
  SECTION("no fold: x / s at run time") {
    std::vector<float> scaled = norm_out;
    apply_inverse_smoothing(r.scales, TensorView<float>(scaled.data(), Shape{n, in}));
    std::vector<float> a(static_cast<std::size_t>(n * hidden)), b(a.size());
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t o2 = 0; o2 < hidden; ++o2) {
        float p = 0.0f, q = 0.0f;
        for (std::int64_t j = 0; j < in; ++j) {
          p += w[static_cast<std::size_t>(o2 * in + j)] * norm_out[static_cast<std::size_t>(t * in + j)];
          q += ws[static_cast<std::size_t>(o2 * in + j)] * scaled[static_cast<std::size_t>(t * in + j)];
        }
        a[static_cast<std::size_t>(t * hidden + o2)] = p;
        b[static_cast<std::size_t>(t * hidden + o2)] = q;
      }
    CHECK(max_relative(a, b) < 1e-5);
  }
}

TEST_CASE("ActivationMeanAbsObserver: mean |x| per channel over batches of any layout", "[quant][awq]") {
  ActivationMeanAbsObserver a;
  CHECK_THROWS_WITH(a.mean_abs(), Catch::Contains("observe"));
  const std::vector<float> first{1.0f, -5.0f, 0.0f, 3.0f, 1.0f, -2.0f};  // [2, 3]
  a.observe(TensorView<const float>(first.data(), Shape{2, 3}));
  CHECK(a.mean_abs() == std::vector<float>{2.0f, 3.0f, 1.0f});
  const std::vector<float> transposed{0.0f, 4.0f, 6.0f, 0.0f, 0.0f, -6.0f};  // rows [0, 6, 0], [4, 0, −6]
  a.observe(TensorView<const float>(transposed.data(), Shape{2, 3}, Strides{1, 2}));
  CHECK(a.mean_abs() == std::vector<float>{2.0f, 3.0f, 2.0f});
  CHECK(a.sum_abs() == std::vector<double>{8.0, 12.0, 8.0});
  CHECK(a.samples() == 4);
  CHECK(a.features() == 3);
  const std::vector<float> four(8, 1.0f);
  CHECK_THROWS_WITH(a.observe(TensorView<const float>(four.data(), Shape{2, 4})),
                    Catch::Contains("activations.shape = [2, 4]"));
  std::vector<float> bad(6, 1.0f);
  bad[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(a.observe(TensorView<const float>(bad.data(), Shape{2, 3})),
                    Catch::Contains("activations[4] = nan"));
  CHECK(a.samples() == 4);  // failed batches change nothing
  CHECK(a.mean_abs() == std::vector<float>{2.0f, 3.0f, 2.0f});
  a.reset();
  CHECK(a.samples() == 0);
}

TEST_CASE("awq_search, awq_clip_search and awq_quantize give the same bytes on any executor", "[quant][awq][threads]") {
  const std::int64_t n = 256, in = 128;
  const std::vector<float> x = random_x(n, in, 11);
  const std::vector<float> w0 = random_normal_weight(160, in, 12), w1 = random_normal_weight(40, in, 13);
  const std::vector<TensorView<const float>> weights{TensorView<const float>(w0.data(), Shape{160, in}),
                                                     TensorView<const float>(w1.data(), Shape{40, in})};
  for (bool duo : {false, true}) {
    AwqOptions o;
    o.duo_scaling = duo;
    o.bits = 3;
    test::require_same_bytes_on_every_executor([&] {
      const AwqResult r = awq_search(weights, TensorView<const float>(x.data(), Shape{n, in}), o);
      std::vector<double> bytes(r.losses);
      bytes.push_back(r.rtn_loss);
      for (float s : r.scales) bytes.push_back(s);
      const std::vector<float> clip =
          awq_clip_search(weights[0], TensorView<const float>(x.data(), Shape{n, in}), r.scales, o);
      for (float c : clip) bytes.push_back(c);
      const QuantizedTensor t = awq_quantize(weights[0], r.scales, o, clip);
      for (std::uint8_t b : t.data) bytes.push_back(b);
      for (float s : t.qparams.scale) bytes.push_back(s);
      return bytes;
    });
  }
}

TEST_CASE("AWQ: every bad input is one Error naming it", "[quant][awq][errors]") {
  const std::int64_t n = 16, in = 64;
  const std::vector<float> x = random_x(n, in, 14);
  const std::vector<float> w = random_normal_weight(8, in, 15), narrow = random_normal_weight(8, 32, 16);
  const TensorView<const float> wv(w.data(), Shape{8, in}), xv(x.data(), Shape{n, in});
  const AwqOptions o;
  auto search_throws = [&](const std::vector<TensorView<const float>>& ws, const TensorView<const float>& xs,
                           const AwqOptions& opt, const char* needle) {
    CHECK_THROWS_WITH(awq_search(ws, xs, opt), Catch::Contains(needle) && Catch::Contains("awq_search"));
  };
  search_throws({}, xv, o, "weights.size() = 0");
  search_throws({wv, TensorView<const float>(narrow.data(), Shape{8, 32})}, xv, o, "weights[1].shape = [8, 32]");
  search_throws({TensorView<const float>(w.data(), Shape{0, in})}, xv, o, "weights[0].shape = [0, 64]");
  search_throws({wv}, TensorView<const float>(x.data(), Shape{n / 2, 2 * in}), o, "x.shape = [8, 128]");
  search_throws({wv}, TensorView<const float>(x.data(), Shape{0, in}), o, "x.shape = [0, 64]");
  std::vector<float> bad_w = w, bad_x = x;
  bad_w[70] = std::numeric_limits<float>::quiet_NaN();
  search_throws({wv, TensorView<const float>(bad_w.data(), Shape{8, in})}, xv, o, "weights[1][70] = nan");
  bad_x[100] = -std::numeric_limits<float>::infinity();
  search_throws({wv}, TensorView<const float>(bad_x.data(), Shape{n, in}), o, "x[100] = -inf");
  AwqOptions bad = o;
  bad.bits = 1;
  search_throws({wv}, xv, bad, "options.bits = 1");
  bad.bits = 9;
  search_throws({wv}, xv, bad, "options.bits = 9");
  bad = o;
  bad.group_size = 48;
  search_throws({wv}, xv, bad, "options.group_size = 48");
  bad.group_size = -64;
  search_throws({wv}, xv, bad, "options.group_size = -64");
  bad = o;
  bad.grid = 0;
  search_throws({wv}, xv, bad, "options.grid = 0");
  bad = o;
  bad.magnitude_floor = 0.0f;
  search_throws({wv}, xv, bad, "options.magnitude_floor = 0");
  bad.magnitude_floor = std::numeric_limits<float>::quiet_NaN();
  search_throws({wv}, xv, bad, "options.magnitude_floor = nan");
  bad = o;
  bad.max_rows = -1;
  search_throws({wv}, xv, bad, "options.max_rows = -1");
  bad = o;
  bad.clip_steps = 21;
  search_throws({wv}, xv, bad, "options.clip_steps = 21");
  bad = o;
  bad.clip_grid = 0;
  search_throws({wv}, xv, bad, "options.clip_grid = 0");
  bad = o;
  bad.symmetry = static_cast<Symmetry>(7);
  search_throws({wv}, xv, bad, "options.symmetry = 7");

  // The Hessian form.
  HessianObserver ho;
  ho.observe(xv);
  const Hessian h = ho.hessian();
  ActivationMeanAbsObserver ao;
  ao.observe(xv);
  const std::vector<float> sx = ao.mean_abs();
  auto hessian_throws = [&](const Hessian& hh, const std::vector<float>& a, const char* needle) {
    CHECK_THROWS_WITH(awq_search({wv}, hh, a, o), Catch::Contains(needle));
  };
  Hessian wrong = h;
  wrong.samples = 0;
  hessian_throws(wrong, sx, "hessian.samples = 0");
  wrong = h;
  wrong.values[5] = std::numeric_limits<double>::infinity();
  hessian_throws(wrong, sx, "hessian.values[5] = inf");
  wrong.features = 32;
  hessian_throws(wrong, sx, "hessian.features = 32");
  std::vector<float> bad_sx = sx;
  bad_sx.pop_back();
  hessian_throws(h, bad_sx, "activation_mean_abs.size() = 63");
  bad_sx = sx;
  bad_sx[3] = -1.0f;
  hessian_throws(h, bad_sx, "activation_mean_abs[3] = -1");
  bad_sx[3] = std::numeric_limits<float>::quiet_NaN();
  hessian_throws(h, bad_sx, "activation_mean_abs[3] = nan");

  // Clip search and quantization.
  const AwqResult r = awq_search({wv}, xv, o);
  std::vector<float> bad_s = r.scales;
  bad_s.pop_back();
  CHECK_THROWS_WITH(awq_clip_search(wv, xv, bad_s, o), Catch::Contains("scales.size() = 63"));
  CHECK_THROWS_WITH(awq_clip_search(wv, TensorView<const float>(x.data(), Shape{n / 2, 2 * in}), r.scales, o),
                    Catch::Contains("x.shape = [8, 128]"));
  CHECK_THROWS_WITH(awq_clip_search(wv, wrong, r.scales, o), Catch::Contains("hessian.features = 32"));
  bad_s = r.scales;
  bad_s[2] = 0.0f;
  CHECK_THROWS_WITH(awq_quantize(wv, bad_s, o), Catch::Contains("scales[2] = 0"));
  CHECK_THROWS_WITH(awq_quantize(wv, r.scales, o, std::vector<float>(5, 1.0f)), Catch::Contains("clip_max.size() = 5"));
  CHECK_THROWS_WITH(awq_quantize(wv, r.scales, o, std::vector<float>(8, -1.0f)), Catch::Contains("clip_max[0] = -1"));
  CHECK_THROWS_WITH(awq_quantize(TensorView<const float>(bad_w.data(), Shape{8, in}), r.scales, o),
                    Catch::Contains("weight[70] = nan"));
  bad = o;
  bad.group_size = 24;
  CHECK_THROWS_WITH(awq_quantize(wv, r.scales, bad), Catch::Contains("options.group_size = 24"));
  bad_s = r.scales;
  bad_s[0] = std::numeric_limits<float>::max();
  std::vector<float> big = w;
  big[in] = 4.0f;  // W[1, 0]·s_0 overflows
  CHECK_THROWS_WITH(awq_quantize(TensorView<const float>(big.data(), Shape{8, in}), bad_s, o),
                    Catch::Contains("scales[0]") && Catch::Contains("W[1, 0]"));
  CHECK_THROWS_WITH(awq_scales(sx, {}, 1.5), Catch::Contains("alpha = 1.5"));
  CHECK_THROWS_WITH(narrow_int_scheme(9, Symmetry::affine, 64), Catch::Contains("bits = 9"));
}
