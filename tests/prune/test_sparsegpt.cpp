// Tests for shrink/prune/sparsegpt.hpp: the PyTorch reference written from the paper (tests/golden/gen_sparsegpt.py),
// the layer error against magnitude pruning and Wanda, the 2:4 result through compress_nm and linear_nm, block-size
// and thread-count invariance, and every bad input.
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

#include "shrink/linear/nm.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/prune/sparsegpt.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/prune/wanda.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/executors.hpp"
#include "support/golden.hpp"
#include "support/hessian_layers.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

SparseGptOptions options_of(const test::GoldenCase& c) {
  SparseGptOptions o;
  o.sparsity = c.doubles("sparsity")[0];
  const std::vector<std::int64_t>& nm = c.ints("nm");
  if (nm[1] > 0) o.pattern = NmPattern{static_cast<int>(nm[0]), static_cast<int>(nm[1])};
  o.mask_block_size = c.ints("mask_block_size")[0];
  o.block_size = c.ints("block_size")[0];
  o.quantize = c.ints("quantize")[0] != 0;
  if (o.quantize) {
    o.bits = static_cast<int>(c.ints("bits")[0]);
    o.symmetry = c.ints("symmetric")[0] ? quant::Symmetry::symmetric : quant::Symmetry::affine;
    o.group_size = c.ints("group_size")[0];
  }
  return o;
}

// The weight with the mask's pruned entries zeroed.
std::vector<float> masked(const std::vector<float>& w, const Mask& mask) {
  std::vector<float> out(w);
  for (std::int64_t i = 0; i < mask.size(); ++i)
    if (!mask.kept(i)) out[static_cast<std::size_t>(i)] = 0.0f;
  return out;
}

// Wanda's ‖X_j‖₂ from the Hessian: H_jj = (2 / n) Σ_t x_tj², so ‖X_j‖ = sqrt(H_jj · n / 2).
std::vector<float> input_norms(const quant::Hessian& h) {
  std::vector<float> norms(static_cast<std::size_t>(h.features));
  for (std::int64_t j = 0; j < h.features; ++j)
    norms[static_cast<std::size_t>(j)] =
        static_cast<float>(std::sqrt(h.at(j, j) * static_cast<double>(h.samples) / 2.0));
  return norms;
}

// A random SPD Hessian 2/n XᵀX of correlated rows X = Z·A + noise (A of rank in / 4, columns of varied scale).
quant::Hessian random_hessian(std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.2f, 2.0f);
  const std::int64_t tokens = 2 * in, k = in / 4;
  std::vector<float> a(static_cast<std::size_t>(k * in)), x(static_cast<std::size_t>(tokens * in));
  std::vector<float> column_scale(static_cast<std::size_t>(in));
  for (float& v : column_scale) v = uniform(rng);
  for (std::int64_t l = 0; l < k; ++l)
    for (std::int64_t j = 0; j < in; ++j)
      a[static_cast<std::size_t>(l * in + j)] = normal(rng) * column_scale[static_cast<std::size_t>(j)];
  std::vector<float> z(static_cast<std::size_t>(k));
  for (std::int64_t t = 0; t < tokens; ++t) {
    for (float& v : z) v = normal(rng);
    for (std::int64_t j = 0; j < in; ++j) {
      float s = 0.05f * normal(rng);
      for (std::int64_t l = 0; l < k; ++l)
        s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * in + j)];
      x[static_cast<std::size_t>(t * in + j)] = s;
    }
  }
  quant::HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{tokens, in}));
  return o.hessian();
}

// Half a float ulp of v: how far v may lie from the double it was rounded from.
double half_ulp(float v) {
  const float a = std::fabs(v);
  return a == 0.0f ? 0.0 : 0.5 * static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity()) - a);
}

}  // namespace

TEST_CASE("sparsegpt_prune equals the PyTorch reference from the paper, except where float order flips a tie",
          "[prune][sparsegpt][golden]") {
  const auto cases = test::load_golden("golden/sparsegpt.golden");
  const auto layers = test::golden_hessian_layers(cases);
  REQUIRE(layers.size() == 2);
  std::int64_t mask_entries = 0, mask_flipped = 0, weights = 0, weights_exact = 0, integers = 0, integers_flipped = 0;
  double worst_excess = 0.0;  // beyond half a float ulp, relative to the reference
  int cases_run = 0;
  for (const auto& c : cases) {
    if (c.name.rfind("sparsegpt/", 0) != 0) continue;
    INFO(c.name);
    ++cases_run;
    const test::HessianLayer& l = layers.at(c.text("layer"));
    const SparseGptOptions o = options_of(c);
    const SparseGptResult r = sparsegpt_prune(TensorView<const float>(l.weight.data(), l.shape), l.hessian, o);
    const std::int64_t out = l.shape[0], in = l.shape[1];
    const std::vector<std::int64_t>& mask = c.ints("mask");
    REQUIRE(static_cast<std::int64_t>(mask.size()) == out * in);
    REQUIRE(r.mask.shape() == l.shape);
    REQUIRE(static_cast<std::int64_t>(r.weight.size()) == out * in);

    // Rows where a mask entry differs diverge after it: their weights are not compared.
    std::vector<bool> row_flipped(static_cast<std::size_t>(out), false);
    for (std::int64_t k = 0; k < out * in; ++k) {
      ++mask_entries;
      if (r.mask.kept(k) != (mask[static_cast<std::size_t>(k)] != 0)) {
        ++mask_flipped;
        row_flipped[static_cast<std::size_t>(k / in)] = true;
      }
    }
    const std::vector<double>& kept = c.doubles("kept_weights");
    std::size_t next = 0;
    for (std::int64_t k = 0; k < out * in; ++k) {
      if (mask[static_cast<std::size_t>(k)] == 0) {
        if (!r.mask.kept(k)) CHECK(r.weight[static_cast<std::size_t>(k)] == 0.0f);
        continue;
      }
      const double want = kept[next++];
      if (row_flipped[static_cast<std::size_t>(k / in)]) continue;
      const float got = r.weight[static_cast<std::size_t>(k)];
      ++weights;
      weights_exact += static_cast<double>(got) == want || got == static_cast<float>(want);
      // got is the reference rounded to float, up to 1e-9 relative of float order.
      const double excess = std::fabs(static_cast<double>(got) - want) - half_ulp(got);
      if (want != 0.0) worst_excess = std::max(worst_excess, excess / std::fabs(want));
      CHECK(excess <= 1e-9 * std::fabs(want));
    }
    REQUIRE(next == kept.size());

    if (o.pattern) CHECK(is_nm_sparse(r.mask, *o.pattern));
    if (o.quantize) {
      REQUIRE(r.quantized.has_value());
      const quant::QuantizedTensor& t = *r.quantized;
      const std::vector<std::int64_t>& values = c.ints("values");
      REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
      for (std::int64_t k = 0; k < t.numel(); ++k) {
        ++integers;
        if (t.value(k) != values[static_cast<std::size_t>(k)]) {
          ++integers_flipped;
          CHECK(row_flipped[static_cast<std::size_t>(k / in)]);
        }
      }
      const std::vector<float> scale = c.floats("scale");
      const std::vector<std::int64_t>& zero = c.ints("zero_point");
      REQUIRE(scale.size() == t.qparams.scale.size());
      const std::size_t groups = scale.size() / static_cast<std::size_t>(out);
      for (std::size_t k = 0; k < scale.size(); ++k)
        if (!row_flipped[k / groups]) {
          CHECK(t.qparams.scale[k] == scale[k]);
          CHECK(t.qparams.zero_point[k] == zero[k]);
        }
      CHECK(quant::dequantize(t) == r.weight);  // Ŵ is what every consumer reads back
    } else {
      CHECK_FALSE(r.quantized.has_value());
    }
    const bool any_flip = std::find(row_flipped.begin(), row_flipped.end(), true) != row_flipped.end();
    CHECK(r.loss == Approx(c.doubles("loss")[0]).epsilon(any_flip ? 1e-3 : 1e-9));
  }
  CHECK(cases_run == 8);
  WARN("SparseGPT vs the PyTorch reference: " << mask_flipped << " of " << mask_entries << " mask entries differ, "
                                              << integers_flipped << " of " << integers << " integers; "
                                              << weights_exact << " of " << weights
                                              << " kept weights are the reference rounded to float exactly, the "
                                                 "worst excess beyond half an ulp "
                                              << worst_excess << " relative");
  CHECK(mask_flipped <= 4);
}

TEST_CASE("sparsegpt_prune's layer error is well below magnitude pruning and Wanda on correlated inputs",
          "[prune][sparsegpt]") {
  struct Named {
    std::string name;
    test::HessianLayer layer;
  };
  std::vector<Named> named;
  {
    const auto layers = test::golden_hessian_layers(test::load_golden("golden/sparsegpt.golden"));
    named.push_back({"golden a [20, 96]", layers.at("a")});
    named.push_back({"golden dead [16, 64]", layers.at("dead")});
    test::HessianLayer big;
    big.shape = Shape{64, 256};
    big.weight = test::random_layer_weight(64, 256, 31);
    big.hessian = random_hessian(256, 32);
    named.push_back({"random [64, 256]", big});
  }
  for (const Named& n : named) {
    INFO(n.name);
    const test::HessianLayer& l = n.layer;
    const TensorView<const float> view(l.weight.data(), l.shape);
    const std::vector<float> norms = input_norms(l.hessian);
    auto error = [&](const std::vector<float>& w_hat) {
      return test::layer_error(l.weight, w_hat, l.shape, l.hessian);
    };

    SparseGptOptions half;
    half.sparsity = 0.5;
    const SparseGptResult s = sparsegpt_prune(view, l.hessian, half);
    CHECK(s.mask.sparsity() == 0.5);
    const double sparsegpt = error(s.weight);
    const double magnitude = error(masked(l.weight, l1_unstructured_mask(view, Amount::fraction(0.5))));
    const double wanda = error(masked(l.weight, wanda_mask(view, norms, Amount::fraction(0.5))));

    SparseGptOptions two_four;
    two_four.pattern = NmPattern{2, 4};
    const SparseGptResult s24 = sparsegpt_prune(view, l.hessian, two_four);
    const double sparsegpt24 = error(s24.weight);
    const double magnitude24 = error(masked(l.weight, nm_mask(view, NmPattern{2, 4})));
    const double wanda24 = error(masked(l.weight, wanda_nm_mask(view, norms, NmPattern{2, 4})));

    WARN(n.name << ": layer error at 50%: SparseGPT / magnitude = " << sparsegpt / magnitude << ", SparseGPT / Wanda = "
                << sparsegpt / wanda << "; at 2:4: SparseGPT / magnitude = " << sparsegpt24 / magnitude24
                << ", SparseGPT / Wanda = " << sparsegpt24 / wanda24);
    CHECK(sparsegpt / magnitude < 0.6);
    CHECK(sparsegpt / wanda < 0.8);
    CHECK(sparsegpt24 / magnitude24 < 0.5);
    CHECK(sparsegpt24 / wanda24 < 0.6);
  }
}

TEST_CASE("sparsegpt_prune with a diagonal Hessian is Wanda, and leaves the kept weights alone", "[prune][sparsegpt]") {
  const std::int64_t out = 12, in = 64;
  const std::vector<float> w = test::random_layer_weight(out, in, 21);
  quant::Hessian h;
  h.features = in;
  h.samples = 2;  // ‖X_j‖ = sqrt(H_jj)
  h.values.assign(static_cast<std::size_t>(in * in), 0.0);
  for (std::int64_t j = 0; j < in; ++j)
    h.values[static_cast<std::size_t>(j * in + j)] = static_cast<double>((j % 13 + 1) * (j % 13 + 1));
  const TensorView<const float> view(w.data(), Shape{out, in});
  const std::vector<float> norms = input_norms(h);
  SparseGptOptions o;
  o.damp_percent = 0.0;
  o.mask_block_size = in;  // one block: each row prunes its own half, as Wanda does
  const SparseGptResult s = sparsegpt_prune(view, h, o);
  CHECK(s.mask == wanda_mask(view, norms, Amount::fraction(0.5)));
  CHECK(s.weight == masked(w, s.mask));  // nothing to spread the error to
  o.pattern = NmPattern{2, 4};
  const SparseGptResult s24 = sparsegpt_prune(view, h, o);
  CHECK(s24.mask == wanda_nm_mask(view, norms, NmPattern{2, 4}));
  CHECK(s24.weight == masked(w, s24.mask));
  o.pattern.reset();
  // Many equal saliencies (H = I, weights of three magnitudes): the higher column is pruned first, as Wanda does.
  std::vector<float> tied(w.size());
  for (std::size_t k = 0; k < tied.size(); ++k) tied[k] = (k % 3 ? 0.25f : -0.5f) * static_cast<float>(1 + k % 7 % 2);
  quant::Hessian identity = h;
  for (std::int64_t j = 0; j < in; ++j) identity.values[static_cast<std::size_t>(j * in + j)] = 1.0;
  const TensorView<const float> tied_view(tied.data(), Shape{out, in});
  for (const double p : {0.3, 0.5, 0.8}) {
    o.sparsity = p;
    CHECK(sparsegpt_prune(tied_view, identity, o).mask ==
          wanda_mask(tied_view, input_norms(identity), Amount::fraction(p)));
  }
  for (const NmPattern pattern :
       {NmPattern{2, 4}, NmPattern{1, 4}, NmPattern{5, 8}, NmPattern{3, 16}, NmPattern{4, 32}}) {
    o.pattern = pattern;
    CHECK(sparsegpt_prune(tied_view, identity, o).mask == wanda_nm_mask(tied_view, input_norms(identity), pattern));
  }
  // No sparsity: the weight comes back as it was.
  o.pattern.reset();
  o.sparsity = 0.0;
  const SparseGptResult none = sparsegpt_prune(view, random_hessian(in, 22), o);
  CHECK(none.mask.count_pruned() == 0);
  CHECK(none.weight == w);
  CHECK(none.loss == 0.0);
}

TEST_CASE("sparsegpt_prune's 2:4 result goes through compress_nm and linear_nm unchanged", "[prune][sparsegpt]") {
  const std::int64_t out = 48, in = 128, tokens = 9;
  const std::vector<float> w = test::random_layer_weight(out, in, 41);
  const quant::Hessian h = random_hessian(in, 42);
  SparseGptOptions o;
  o.pattern = NmPattern{2, 4};
  const SparseGptResult s = sparsegpt_prune(TensorView<const float>(w.data(), Shape{out, in}), h, o);
  // Exactly 2 of every 4 along the input.
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t g = 0; g < in; g += 4) {
      int kept = 0;
      for (std::int64_t j = 0; j < 4; ++j) kept += s.mask.kept(r * in + g + j);
      CHECK(kept == 2);
    }
  const TensorView<const float> w_hat(s.weight.data(), Shape{out, in});
  const auto compressed = sparse::compress_nm(w_hat, s.mask, NmPattern{2, 4});
  CHECK(sparse::decompress_nm(compressed) == s.weight);
  // Y = X·Ŵᵀ through the 2:4 product against the dense product of the pruned weight, in double.
  const std::vector<float> x = test::random_layer_weight(tokens, in, 43);
  std::vector<float> y(static_cast<std::size_t>(tokens * out), -1.0f);
  cpu::linear_nm(TensorView<const float>(x.data(), Shape{tokens, in}), compressed,
                 TensorView<float>(y.data(), Shape{tokens, out}));
  double worst = 0.0;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (std::int64_t r = 0; r < out; ++r) {
      double dense = 0.0, scale = 0.0;
      for (std::int64_t j = 0; j < in; ++j) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(t * in + j)]) *
                         s.weight[static_cast<std::size_t>(r * in + j)];
        dense += p;
        scale += std::fabs(p);
      }
      const double diff = std::fabs(y[static_cast<std::size_t>(t * out + r)] - dense);
      worst = std::max(worst, diff / scale);
      CHECK(diff <= 1e-5 * scale);
    }
  WARN("2:4 product of SparseGPT's weight against the dense double product: worst error " << worst << " of Σ|x·w|");
}

TEST_CASE("sparsegpt_prune: block sizes, dead inputs, a shared factor, strided weights", "[prune][sparsegpt]") {
  const std::int64_t out = 12, in = 96;
  const std::vector<float> w = test::random_layer_weight(out, in, 51);
  quant::Hessian h = random_hessian(in, 52);
  for (std::int64_t j : {5, 50})
    for (std::int64_t i = 0; i < in; ++i)
      h.values[static_cast<std::size_t>(j * in + i)] = h.values[static_cast<std::size_t>(i * in + j)] = 0.0;
  const TensorView<const float> view(w.data(), Shape{out, in});
  for (const bool nm : {false, true})
    for (const bool quantize : {false, true}) {
      INFO("nm " << nm << ", quantize " << quantize);
      SparseGptOptions o;
      o.mask_block_size = 32;
      if (nm) o.pattern = NmPattern{2, 4};
      o.quantize = quantize;
      o.group_size = 16;
      const SparseGptResult base = sparsegpt_prune(view, h, o);
      CHECK(base.dead_inputs == 2);
      CHECK(base.damping > 0.0);
      for (std::int64_t r = 0; r < out; ++r) {  // zero weights, the lowest saliency: pruned
        CHECK_FALSE(base.mask.kept(r * in + 5));
        CHECK_FALSE(base.mask.kept(r * in + 50));
      }
      // Mask blocks, N:M runs and groups are read whole: any block size gives the unblocked result up to float order.
      for (std::int64_t block : {1, 5, 16, 48, 1000}) {
        INFO("block " << block);
        o.block_size = block;
        const SparseGptResult t = sparsegpt_prune(view, h, o);
        CHECK(t.mask == base.mask);
        for (std::size_t k = 0; k < t.weight.size(); ++k)
          CHECK(t.weight[k] == Approx(base.weight[k]).epsilon(1e-6).margin(1e-12));
        if (quantize) CHECK(t.quantized->data == base.quantized->data);
      }
      // One factor serves every Linear of this input, and GPTQ with the same damping.
      o.block_size = 128;
      const quant::InverseHessianFactor factor = quant::inverse_hessian_factor(h, inverse_hessian_options(o));
      const SparseGptResult shared = sparsegpt_prune(view, factor, o);
      CHECK(shared.weight == base.weight);
      CHECK(shared.mask == base.mask);
      // A strided (transposed storage) view of the same weight gives the same bytes.
      std::vector<float> wt(static_cast<std::size_t>(out * in));
      for (std::int64_t r = 0; r < out; ++r)
        for (std::int64_t j = 0; j < in; ++j)
          wt[static_cast<std::size_t>(j * out + r)] = w[static_cast<std::size_t>(r * in + j)];
      const SparseGptResult strided =
          sparsegpt_prune(TensorView<const float>(wt.data(), Shape{out, in}, Strides{1, out}), h, o);
      CHECK(strided.weight == base.weight);
      CHECK(strided.mask == base.mask);
    }
}

TEST_CASE("sparsegpt_prune gives the same bytes on any executor", "[prune][sparsegpt][threads]") {
  const std::int64_t out = 200, in = 64;
  const std::vector<float> w = test::random_layer_weight(out, in, 61);
  const quant::Hessian h = random_hessian(in, 62);
  for (const bool nm : {false, true}) {
    SparseGptOptions o;
    if (nm) o.pattern = NmPattern{2, 4};
    o.quantize = nm;
    o.group_size = 32;
    test::require_same_bytes_on_every_executor([&] {
      const SparseGptResult s = sparsegpt_prune(TensorView<const float>(w.data(), Shape{out, in}), h, o);
      std::vector<float> bytes(s.weight);
      for (std::uint8_t b : s.mask.to_bytes()) bytes.push_back(b);
      if (s.quantized)
        for (std::uint8_t b : s.quantized->data) bytes.push_back(b);
      bytes.push_back(static_cast<float>(s.loss));
      return bytes;
    });
  }
}

TEST_CASE("sparsegpt_prune: every bad input is one Error naming it", "[prune][sparsegpt][errors]") {
  const std::int64_t out = 4, in = 32;
  const std::vector<float> w = test::random_layer_weight(out, in, 71);
  const quant::Hessian h = random_hessian(in, 72);
  const TensorView<const float> view(w.data(), Shape{out, in});
  SparseGptOptions o;
  SparseGptResult result;
  result.loss = -1.0;
  auto throws = [&](const SparseGptOptions& opt, const quant::Hessian& hess, const char* needle) {
    CHECK_THROWS_WITH(result = sparsegpt_prune(view, hess, opt), Catch::Contains(needle));
  };
  quant::Hessian wrong = random_hessian(16, 1);
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
  for (std::int64_t j = 0; j < in; ++j) wrong.values[static_cast<std::size_t>(j * in + j)] = -1.0;  // not definite
  throws(o, wrong, "positive-definite");
  SparseGptOptions bad = o;
  bad.sparsity = 1.0;
  throws(bad, h, "options.sparsity = 1");
  bad.sparsity = -0.1;
  throws(bad, h, "options.sparsity = -0.1");
  bad.sparsity = std::numeric_limits<double>::quiet_NaN();
  throws(bad, h, "options.sparsity = nan");
  bad = o;
  bad.pattern = NmPattern{4, 4};
  throws(bad, h, "options.pattern = 4:4");
  bad.pattern = NmPattern{0, 4};
  throws(bad, h, "options.pattern = 0:4");
  bad.pattern = NmPattern{2, 3};
  throws(bad, h, "options.pattern = 2:3: expected m dividing the weight's input width 32");
  bad = o;
  bad.mask_block_size = 0;
  throws(bad, h, "options.mask_block_size = 0");
  bad = o;
  bad.block_size = 0;
  throws(bad, h, "options.block_size = 0");
  bad = o;
  bad.damp_percent = -0.1;
  throws(bad, h, "options.damp_percent");
  bad = o;
  bad.quantize = true;
  bad.bits = 9;
  throws(bad, h, "options.bits = 9");
  bad.bits = 4;
  bad.group_size = 24;
  throws(bad, h, "options.group_size = 24");
  bad.group_size = -1;
  throws(bad, h, "options.group_size = -1");
  std::vector<float> nan_weight = w;
  nan_weight[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(result = sparsegpt_prune(TensorView<const float>(nan_weight.data(), Shape{out, in}), h, o),
                    Catch::Contains("weight"));
  CHECK_THROWS_WITH(result = sparsegpt_prune(TensorView<const float>(w.data(), Shape{0, in}), h, o),
                    Catch::Contains("weight.shape = [0, 32]"));
  CHECK_THROWS_WITH(result = sparsegpt_prune(TensorView<const float>(w.data(), Shape{out * in}), h, o),
                    Catch::Contains("weight.shape"));
  // A factor made with other options, or for another width.
  quant::InverseHessianOptions other;
  other.damp_percent = 0.1;
  CHECK_THROWS_WITH(result = sparsegpt_prune(view, quant::inverse_hessian_factor(h, other), o),
                    Catch::Contains("factor.options.damp_percent = 0.1"));
  other.damp_percent = o.damp_percent;
  other.act_order = true;
  CHECK_THROWS_WITH(result = sparsegpt_prune(view, quant::inverse_hessian_factor(h, other), o),
                    Catch::Contains("factor.options.act_order = true"));
  CHECK_THROWS_WITH(result = sparsegpt_prune(
                        view, quant::inverse_hessian_factor(random_hessian(16, 2), inverse_hessian_options(o)), o),
                    Catch::Contains("factor.features = 16"));
  CHECK(result.loss == -1.0);  // nothing written
  CHECK(result.weight.empty());
}

TEST_CASE("sparsegpt's selection: the k-th lowest of random values, many equal", "[prune][sparsegpt]") {
  std::mt19937 rng(81);
  for (int trial = 0; trial < 300; ++trial) {
    const std::int64_t n = 1 + trial % 150;
    std::uniform_int_distribution<int> value(0, trial % 3 == 0 ? 3 : 1000);
    std::vector<double> a(static_cast<std::size_t>(n));
    for (double& v : a) v = value(rng) * 0.125;
    for (const std::int64_t k : {std::int64_t{0}, n / 3, n / 2, n - 1}) {
      std::vector<double> sorted = a, scratch = a;
      std::sort(sorted.begin(), sorted.end());
      CHECK(detail::kth_lowest(scratch.data(), n, k) == sorted[static_cast<std::size_t>(k)]);
    }
  }
}
