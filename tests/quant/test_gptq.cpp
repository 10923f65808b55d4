// Tests for shrink/quant/gptq.hpp: the PyTorch reference written from the paper (tests/golden/gen_gptq.py), the layer
// error against round-to-nearest, consumers reading the result, thread-count invariance, and every bad input.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "shrink/quant/gptq.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/executors.hpp"
#include "support/golden.hpp"
#include "support/hessian_layers.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

GptqOptions gptq_options_of(const test::GoldenCase& c) {
  GptqOptions o;
  o.bits = static_cast<int>(c.ints("bits")[0]);
  o.symmetry = c.ints("symmetric")[0] ? Symmetry::symmetric : Symmetry::affine;
  o.group_size = c.ints("group_size")[0];
  o.act_order = c.ints("act_order")[0] != 0;
  o.static_groups = c.ints("static_groups")[0] != 0;
  o.permuted_output = o.act_order && o.group_size > 0 && !o.static_groups;  // the g_idx form
  return o;
}

// A random SPD Hessian 2/n XᵀX of correlated rows X = Z·A.
Hessian random_correlated_hessian(std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t tokens = 2 * in, k = in / 2;
  std::vector<float> a(static_cast<std::size_t>(k * in)), x(static_cast<std::size_t>(tokens * in));
  for (float& v : a) v = normal(rng);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::vector<float> z(static_cast<std::size_t>(k));
    for (float& v : z) v = normal(rng);
    for (std::int64_t j = 0; j < in; ++j) {
      float s = 0.1f * normal(rng);
      for (std::int64_t l = 0; l < k; ++l)
        s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * in + j)];
      x[static_cast<std::size_t>(t * in + j)] = s;
    }
  }
  HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{tokens, in}));
  return o.hessian();
}

}  // namespace

TEST_CASE("gptq_quantize equals the PyTorch reference from the paper, except where float order flips a tie",
          "[quant][gptq][golden]") {
  const auto cases = test::load_golden("golden/gptq.golden");
  const auto layers = test::golden_hessian_layers(cases);
  REQUIRE(layers.size() == 3);
  std::int64_t compared = 0, flipped = 0, scales_differing = 0, cases_run = 0;
  for (const auto& c : cases) {
    if (c.name.rfind("gptq/", 0) != 0) continue;
    INFO(c.name);
    ++cases_run;
    const test::HessianLayer& l = layers.at(c.text("layer"));
    const GptqOptions o = gptq_options_of(c);
    GptqResult info;
    const QuantizedTensor t = gptq_quantize(TensorView<const float>(l.weight.data(), l.shape), l.hessian, o, &info);
    CHECK(t.scheme.bits == (o.bits == 4 || o.bits == 8 ? 0 : o.bits));
    const std::vector<std::int64_t>& expected = c.ints("values");
    REQUIRE(static_cast<std::int64_t>(expected.size()) == t.numel());
    const std::int64_t in = l.shape[1];
    const std::vector<std::int64_t>& order = c.ints("order");
    std::vector<bool> row_flipped(static_cast<std::size_t>(l.shape[0]), false);
    for (std::int64_t k = 0; k < t.numel(); ++k) {
      ++compared;
      // The g_idx form stores column j of a row as original column order[j]; the reference, in original order.
      const std::int64_t row = k / in, column = o.permuted_output ? order[static_cast<std::size_t>(k % in)] : k % in;
      const std::int64_t want = expected[static_cast<std::size_t>(row * in + column)];
      if (t.value(k) != want) {
        ++flipped;
        row_flipped[static_cast<std::size_t>(row)] = true;
        CHECK(std::abs(t.value(k) - want) == 1);  // a tie decided the other way
      }
    }
    const std::vector<float> scale = c.floats("scale");
    const std::vector<std::int64_t>& zero = c.ints("zero_point");
    REQUIRE(scale.size() == t.qparams.scale.size());
    const std::size_t groups = scale.size() / static_cast<std::size_t>(l.shape[0]);
    for (std::size_t k = 0; k < scale.size(); ++k) {
      const bool same =
          t.qparams.scale[k] == scale[k] && (o.symmetry == Symmetry::symmetric || t.qparams.zero_point[k] == zero[k]);
      if (!same) {
        ++scales_differing;
        CHECK(row_flipped[k / groups]);  // only downstream of a flip
      }
    }
    if (o.symmetry == Symmetry::symmetric)
      for (std::int32_t z : t.qparams.zero_point) CHECK(z == 0);
    CHECK(info.order == order);
    CHECK(info.permuted_output == o.permuted_output);
    const std::vector<std::int64_t>& g_idx = c.ints("g_idx");
    if (o.group_size > 0) {
      REQUIRE(info.g_idx.size() == g_idx.size());
      for (std::size_t j = 0; j < g_idx.size(); ++j) CHECK(info.g_idx[j] == g_idx[j]);
    } else {
      CHECK(info.g_idx.empty());
    }
    CHECK(info.loss == Approx(c.doubles("loss")[0]).epsilon(flipped ? 1e-3 : 1e-9));

    // Every consumer reads it unchanged: dequantize gives back Ŵ; its layer error is well below round-to-nearest's.
    std::vector<float> gptq_hat = dequantize(t);
    if (o.permuted_output) {  // back to original column order
      const std::vector<float> permuted = gptq_hat;
      for (std::int64_t k = 0; k < t.numel(); ++k)
        gptq_hat[static_cast<std::size_t>(k / in * in + order[static_cast<std::size_t>(k % in)])] =
            permuted[static_cast<std::size_t>(k)];
    }
    const QuantizedTensor rtn = quantize(TensorView<const float>(l.weight.data(), l.shape), t.scheme);  // same bits
    const double ratio = test::layer_error(l.weight, gptq_hat, l.shape, l.hessian) /
                         test::layer_error(l.weight, dequantize(rtn), l.shape, l.hessian);
    WARN(c.name << ": layer error GPTQ / RTN = " << ratio);
    CHECK(ratio < 0.7);
  }
  CHECK(cases_run == 11);
  WARN("GPTQ vs the PyTorch reference: " << flipped << " of " << compared << " integers differ (ties), "
                                         << scales_differing << " group parameters differ downstream of them");
  CHECK(flipped <= 4);
}

TEST_CASE("gptq_quantize with a diagonal Hessian is round-to-nearest", "[quant][gptq]") {
  const std::vector<float> w = test::random_layer_weight(10, 64, 7);
  Hessian h;
  h.features = 64;
  h.samples = 100;
  h.values.assign(64 * 64, 0.0);
  for (std::size_t j = 0; j < 64; ++j) h.values[j * 64 + j] = 0.5 + static_cast<double>(j);
  for (int bits : {2, 3, 4, 5, 8})
    for (Symmetry sym : {Symmetry::symmetric, Symmetry::affine})
      for (std::int64_t group : {std::int64_t{0}, std::int64_t{16}, std::int64_t{64}}) {
        INFO("bits " << bits << ", " << to_string(sym) << ", group " << group);
        GptqOptions o;
        o.bits = bits;
        o.symmetry = sym;
        o.group_size = group;
        const QuantizedTensor g = gptq_quantize(TensorView<const float>(w.data(), Shape{10, 64}), h, o);
        const QuantizedTensor r = quantize(TensorView<const float>(w.data(), Shape{10, 64}), g.scheme);
        CHECK(g.data == r.data);
        CHECK(g.qparams.scale == r.qparams.scale);
        CHECK(g.qparams.zero_point == r.qparams.zero_point);
        const QuantRange range = quant_range(g.scheme);
        CHECK(range.qmax - range.qmin == (1 << bits) - 1);
      }
}

TEST_CASE("gptq_quantize: dead inputs, block sizes, act_order per channel, strided weights", "[quant][gptq]") {
  const std::int64_t out = 12, in = 96;
  const std::vector<float> w = test::random_layer_weight(out, in, 8);
  Hessian h = random_correlated_hessian(in, 9);
  for (std::int64_t j : {5, 50})
    for (std::int64_t i = 0; i < in; ++i)
      h.values[static_cast<std::size_t>(j * in + i)] = h.values[static_cast<std::size_t>(i * in + j)] = 0.0;
  GptqOptions o;
  o.group_size = 32;
  GptqResult info;
  const QuantizedTensor base = gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), h, o, &info);
  CHECK(info.dead_inputs == 2);
  CHECK(info.damping > 0.0);
  const std::vector<float> w_hat = dequantize(base);
  for (std::int64_t r = 0; r < out; ++r) {
    CHECK(w_hat[static_cast<std::size_t>(r * in + 5)] == 0.0f);
    CHECK(w_hat[static_cast<std::size_t>(r * in + 50)] == 0.0f);
  }
  // Blocks hold whole groups: 32, 64 and 96 (rounded down from 100) give the unblocked result up to float order.
  for (std::int64_t block : {1, 32, 64, 100}) {
    o.block_size = block;
    const QuantizedTensor t = gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), h, o);
    std::int64_t differ = 0;
    for (std::int64_t k = 0; k < t.numel(); ++k) differ += t.value(k) != base.value(k);
    CHECK(differ <= 2);
  }
  // A strided (transposed storage) view of the same weight gives the same bytes.
  std::vector<float> wt(static_cast<std::size_t>(out * in));
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t j = 0; j < in; ++j)
      wt[static_cast<std::size_t>(j * out + r)] = w[static_cast<std::size_t>(r * in + j)];
  o.block_size = 128;
  const QuantizedTensor strided =
      gptq_quantize(TensorView<const float>(wt.data(), Shape{out, in}, Strides{1, out}), h, o);
  CHECK(strided.data == base.data);
  // act_order per channel needs no g_idx; the order is by decreasing H_jj.
  GptqOptions a;
  a.group_size = 0;
  a.act_order = true;
  gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), h, a, &info);
  for (std::size_t k = 1; k < info.order.size(); ++k) {
    const std::int64_t p = info.order[k - 1], q = info.order[k];
    CHECK((h.at(p, p) == 0.0 ? 1.0 : h.at(p, p)) >= (h.at(q, q) == 0.0 ? 1.0 : h.at(q, q)));
  }
}

TEST_CASE("gptq_quantize gives the same bytes on any executor", "[quant][gptq][threads]") {
  const std::int64_t out = 200, in = 64;
  const std::vector<float> w = test::random_layer_weight(out, in, 10);
  const Hessian h = random_correlated_hessian(in, 11);
  for (bool act : {false, true}) {
    GptqOptions o;
    o.group_size = 32;
    o.act_order = act;
    o.static_groups = act;
    test::require_same_bytes_on_every_executor([&] {
      const QuantizedTensor t = gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), h, o);
      std::vector<float> bytes(t.qparams.scale);
      for (std::uint8_t b : t.data) bytes.push_back(b);
      return bytes;
    });
  }
}

TEST_CASE("gptq_quantize: every bad input is one Error naming it", "[quant][gptq][errors]") {
  const std::int64_t out = 4, in = 32;
  const std::vector<float> w = test::random_layer_weight(out, in, 12);
  const Hessian h = random_correlated_hessian(in, 13);
  const TensorView<const float> view(w.data(), Shape{out, in});
  GptqOptions o;
  o.group_size = 16;
  GptqResult info;
  info.loss = -1.0;
  auto throws = [&](const GptqOptions& opt, const Hessian& hess, const char* needle) {
    CHECK_THROWS_WITH(gptq_quantize(view, hess, opt, &info), Catch::Contains(needle));
  };
  Hessian wrong = random_correlated_hessian(16, 1);
  throws(o, wrong, "hessian.features = 16");
  wrong = h;
  wrong.values.pop_back();
  throws(o, wrong, "hessian.values.size() = 1023");
  wrong = h;
  wrong.values[37] = std::numeric_limits<double>::quiet_NaN();
  throws(o, wrong, "hessian.values[37] = nan");
  wrong = h;
  wrong.samples = 0;
  throws(o, wrong, "hessian.samples = 0");
  wrong = h;
  for (std::int64_t j = 0; j < in; ++j) wrong.values[static_cast<std::size_t>(j * in + j)] = -1.0;  // negative definite
  throws(o, wrong, "positive-definite");
  GptqOptions bad = o;
  bad.bits = 1;
  throws(bad, h, "options.bits = 1");
  bad.bits = 9;
  throws(bad, h, "options.bits = 9");
  bad = o;
  bad.group_size = 24;
  throws(bad, h, "options.group_size = 24");
  bad.group_size = -1;
  throws(bad, h, "options.group_size = -1");
  bad = o;
  bad.act_order = true;
  throws(bad, h, "options.permuted_output = false");
  bad.static_groups = true;
  bad.permuted_output = true;
  throws(bad, h, "options.permuted_output = true");
  bad = o;
  bad.damp_percent = -0.1;
  throws(bad, h, "options.damp_percent");
  bad = o;
  bad.block_size = 0;
  throws(bad, h, "options.block_size = 0");
  std::vector<float> nan_weight = w;
  nan_weight[3] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(nan_weight.data(), Shape{out, in}), h, o, &info),
                    Catch::Contains("weight"));
  CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(w.data(), Shape{0, in}), h, o, &info),
                    Catch::Contains("weight.shape = [0, 32]"));
  CHECK_THROWS_WITH(gptq_quantize(TensorView<const float>(w.data(), Shape{out * in}), h, o, &info),
                    Catch::Contains("weight.shape"));
  CHECK(info.loss == -1.0);  // nothing written
}
