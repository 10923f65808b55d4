// Tests for shrink/quant/hqq.hpp: the PyTorch reference written from the paper (tests/golden/gen_hqq.py), the weight
// and layer-output errors against round-to-nearest, consumers reading the result, thread-count invariance, and every
// bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/hqq.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/executors.hpp"
#include "support/golden.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

struct Layer {
  std::vector<float> weight;
  Shape shape;
};

HqqOptions hqq_options_of(const test::GoldenCase& c) {
  HqqOptions o;
  o.bits = static_cast<int>(c.ints("bits")[0]);
  o.group_size = c.ints("group_size")[0];
  o.lp_norm = c.doubles("lp_norm")[0];
  o.beta = c.doubles("beta")[0];
  o.kappa = c.doubles("kappa")[0];
  o.iterations = static_cast<int>(c.ints("iterations")[0]);
  o.optimize_scale = c.ints("optimize_scale")[0] != 0;
  o.fractional_zero_point = c.ints("fractional_zero_point")[0] != 0;
  return o;
}

// φ = Σ |w − ŵ|^p of each group of `group` columns ([out, in] row-major, groups in qparams order), in double.
std::vector<double> group_phi(const std::vector<float>& w, const std::vector<float>& w_hat, std::int64_t in,
                              std::int64_t group, double p) {
  std::vector<double> phi(w.size() / static_cast<std::size_t>(group), 0.0);
  for (std::size_t k = 0; k < w.size(); ++k) {
    const double d = std::fabs(static_cast<double>(w[k]) - w_hat[k]);
    const std::size_t row = k / static_cast<std::size_t>(in), col = k % static_cast<std::size_t>(in);
    phi[row * static_cast<std::size_t>(in / group) + col / static_cast<std::size_t>(group)] +=
        d == 0.0 ? 0.0 : std::pow(d, p);
  }
  return phi;
}

// Normal weights at an LLM-like scale; Student-t (3 degrees of freedom, heavy tails); or normal with outliers.
std::vector<float> random_weight_of_kind(std::int64_t out, std::int64_t in, unsigned seed, const std::string& kind) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::student_t_distribution<float> student(3.0f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = kind == "student" ? 0.02f * student(rng) : normal(rng);
  if (kind == "outliers") {
    std::uniform_int_distribution<std::size_t> at(0, w.size() - 1);
    for (int k = 0; k < 40; ++k) w[at(rng)] *= 20.0f;
  }
  return w;
}

double frobenius_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double d = static_cast<double>(a[k]) - b[k];
    sum += d * d;
  }
  return std::sqrt(sum);
}

// ‖(W − Ŵ)·Xᵀ‖_F for X [tokens, in].
double frobenius_output_error(const std::vector<float>& w, const std::vector<float>& w_hat, const std::vector<float>& x,
                              std::int64_t out, std::int64_t in) {
  const std::int64_t tokens = static_cast<std::int64_t>(x.size()) / in;
  double sum = 0.0;
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t t = 0; t < tokens; ++t) {
      double y = 0.0;
      for (std::int64_t j = 0; j < in; ++j)
        y += (static_cast<double>(w[static_cast<std::size_t>(r * in + j)]) -
              w_hat[static_cast<std::size_t>(r * in + j)]) *
             x[static_cast<std::size_t>(t * in + j)];
      sum += y * y;
    }
  return std::sqrt(sum);
}

}  // namespace

TEST_CASE("hqq_quantize equals the PyTorch reference from the paper, both forms, except where float order flips a tie",
          "[quant][hqq][golden]") {
  const auto cases = test::load_golden("golden/hqq.golden");
  std::map<std::string, Layer> layers;
  for (const auto& c : cases)
    if (c.name.rfind("layer/", 0) == 0)
      layers[c.name.substr(6)] = Layer{c.floats("weight"), Shape{c.ints("shape")[0], c.ints("shape")[1]}};
  REQUIRE(layers.size() == 3);
  for (const bool fractional : {false, true}) {
    const std::string prefix = fractional ? "hqq_fractional/" : "hqq/";
    std::int64_t compared = 0, differing = 0, groups = 0, groups_differing = 0, cases_run = 0;
    for (const auto& c : cases) {
      if (c.name.rfind(prefix, 0) != 0) continue;
      INFO(c.name);
      ++cases_run;
      const Layer& l = layers.at(c.text("layer"));
      const HqqOptions o = hqq_options_of(c);
      REQUIRE(o.fractional_zero_point == fractional);
      HqqResult info;
      const QuantizedTensor t = hqq_quantize(TensorView<const float>(l.weight.data(), l.shape), o, &info);
      CHECK(t.scheme.dtype == (o.bits <= 4 ? QuantDtype::uint4 : QuantDtype::uint8));
      CHECK(t.scheme.bits == (o.bits == 4 || o.bits == 8 ? 0 : o.bits));
      CHECK(t.scheme.float_zero_point == fractional);
      CHECK(t.qparams.fractional() == fractional);
      // every consumer's check: scales > 0, integer zero points in range or fractional ones finite
      validate_qparams(t.qparams, t.scheme, t.shape, "test", FloatZeroPoints::accepted);

      const std::vector<std::int64_t>& expected = c.ints("values");
      REQUIRE(static_cast<std::int64_t>(expected.size()) == t.numel());
      std::int64_t case_differing = 0;
      for (std::int64_t k = 0; k < t.numel(); ++k) {
        ++compared;
        if (t.value(k) != expected[static_cast<std::size_t>(k)]) ++case_differing;
      }
      differing += case_differing;
      const std::vector<float> scale = c.floats("scale");
      REQUIRE(scale.size() == t.qparams.scale.size());
      const std::vector<float> float_zero = fractional ? c.floats("float_zero_point") : std::vector<float>{};
      const std::vector<std::int64_t> zero = fractional ? std::vector<std::int64_t>{} : c.ints("zero_point");
      for (std::size_t k = 0; k < scale.size(); ++k) {
        ++groups;
        const bool same_zero =
            fractional ? t.qparams.float_zero_point[k] == float_zero[k] : t.qparams.zero_point[k] == zero[k];
        if (t.qparams.scale[k] != scale[k] || !same_zero) ++groups_differing;
      }
      const std::vector<double>& errors = c.doubles("errors");
      CHECK(info.initial_error == Approx(errors[0]).epsilon(1e-12));
      CHECK(info.final_error == Approx(errors[1]).epsilon(case_differing ? 1e-6 : 1e-12));
      CHECK(info.final_error <= info.initial_error);
      CHECK(info.iterations_run == c.ints("iterations_run")[0]);
      CHECK(info.groups_improved == c.ints("groups_improved")[0]);
      CHECK(info.groups == static_cast<std::int64_t>(scale.size()));
    }
    CHECK(cases_run == (fractional ? 8 : 10));
    WARN("HQQ (" << (fractional ? "fractional" : "integer") << " zero points) vs the PyTorch reference: " << differing
                 << " of " << compared << " integers differ, " << groups_differing << " of " << groups
                 << " group parameters");
    CHECK(differing <= 4);
    CHECK(groups_differing <= 1);
  }
}

TEST_CASE(
    "hqq_quantize: weight and layer-output errors below round-to-nearest's, 3 and 4 bits, groups of 64, both "
    "forms; φ never above round-to-nearest's in any group",
    "[quant][hqq]") {
  const std::int64_t out = 96, in = 512, tokens = 64;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(tokens * in));
  for (float& v : x) v = normal(rng);
  unsigned seed = 20;
  for (const std::string kind : {"normal", "student", "outliers"}) {
    const std::vector<float> w = random_weight_of_kind(out, in, ++seed, kind);
    const TensorView<const float> view(w.data(), Shape{out, in});
    for (const bool fractional : {false, true})
      for (int bits : {3, 4}) {
        INFO(kind << ", " << bits << " bits, " << (fractional ? "fractional" : "integer"));
        HqqOptions o;
        o.bits = bits;
        o.fractional_zero_point = fractional;
        HqqResult info;
        const QuantizedTensor h = hqq_quantize(view, o, &info);
        QuantScheme rtn_scheme = h.scheme;
        rtn_scheme.float_zero_point = false;
        const QuantizedTensor r = quantize(view, rtn_scheme);  // per-group asymmetric min/max round-to-nearest
        const std::vector<float> h_hat = dequantize(h), r_hat = dequantize(r);
        const double weight_ratio = frobenius_difference(w, h_hat) / frobenius_difference(w, r_hat);
        const double output_ratio =
            frobenius_output_error(w, h_hat, x, out, in) / frobenius_output_error(w, r_hat, x, out, in);
        WARN(kind << " " << bits << " bits g64 " << (fractional ? "fractional" : "integer")
                  << ": HQQ / RTN weight error " << weight_ratio << ", output error " << output_ratio << ", phi "
                  << info.final_error / info.initial_error << ", " << info.groups_improved << " of " << info.groups
                  << " groups moved, at most " << info.iterations_run << " updates");
        CHECK(weight_ratio < (fractional ? 0.98 : bits == 3 ? 0.96 : 0.995));
        CHECK(output_ratio < (fractional || bits == 4 ? 0.995 : 0.96));
        CHECK(info.final_error < info.initial_error);
        // φ of every group at most round-to-nearest's (the reference's integer formula).
        const std::vector<double> phi_h = group_phi(w, h_hat, in, o.group_size, o.lp_norm);
        const std::vector<double> phi_r = group_phi(w, r_hat, in, o.group_size, o.lp_norm);
        std::int64_t above = 0;
        for (std::size_t g = 0; g < phi_h.size(); ++g) above += phi_h[g] > phi_r[g] ? 1 : 0;
        CHECK(above == 0);
        // Groups left at round-to-nearest's parameters hold round-to-nearest's integers.
        const std::int64_t groups = in / o.group_size;
        std::int64_t left = 0;
        for (std::int64_t g = 0; g < out * groups; ++g) {
          const std::size_t k = static_cast<std::size_t>(g);
          const bool same_zero = fractional
                                     ? h.qparams.float_zero_point[k] == static_cast<float>(r.qparams.zero_point[k])
                                     : h.qparams.zero_point[k] == r.qparams.zero_point[k];
          if (h.qparams.scale[k] != r.qparams.scale[k] || !same_zero) continue;
          ++left;
          for (std::int64_t i = 0; i < o.group_size; ++i) {
            const std::int64_t flat = (g / groups) * in + (g % groups) * o.group_size + i;
            CHECK(h.value(flat) == r.value(flat));
          }
        }
        CHECK(left == out * groups - info.groups_improved);
      }
  }
}

TEST_CASE(
    "hqq_quantize, fractional zero points: dequantize is (float(q) − z)·s in float, quantize with the same "
    "parameters gives the same integers, the zero points HQQ moves and how far",
    "[quant][hqq][fractional]") {
  const std::int64_t out = 64, in = 256;
  for (const std::string kind : {"normal", "student", "outliers"}) {
    INFO(kind);
    const std::vector<float> w = random_weight_of_kind(out, in, 41, kind);
    const TensorView<const float> view(w.data(), Shape{out, in});
    for (int bits : {2, 4, 8}) {
      HqqOptions o;
      o.bits = bits;
      o.group_size = 32;
      const QuantizedTensor t = hqq_quantize(view, o);
      REQUIRE(t.qparams.zero_point.empty());
      REQUIRE(t.qparams.float_zero_point.size() == t.qparams.scale.size());
      const std::vector<float> w_hat = dequantize(t);
      std::int64_t mismatched = 0;
      for (std::int64_t k = 0; k < t.numel(); ++k) {
        const std::size_t g = static_cast<std::size_t>((k / in) * (in / 32) + (k % in) / 32);
        const float centred = static_cast<float>(t.value(k)) - t.qparams.float_zero_point[g];
        const float expected = centred * t.qparams.scale[g];
        mismatched += std::memcmp(&expected, &w_hat[static_cast<std::size_t>(k)], sizeof(float)) != 0 ? 1 : 0;
      }
      CHECK(mismatched == 0);
      // HQQ's integers are quantize's with HQQ's parameters: q = clamp(nearbyint(float(w · (1/s)) + z)).
      const QuantizedTensor again = quantize(view, t.scheme, t.qparams);
      CHECK(again.data == t.data);
      float lowest = t.qparams.float_zero_point[0], highest = lowest;
      for (float z : t.qparams.float_zero_point) {
        lowest = std::min(lowest, z);
        highest = std::max(highest, z);
      }
      WARN(kind << " " << bits << " bits g32: fractional zero points in [" << lowest << ", " << highest
                << "], the integer range [0, " << (1 << bits) - 1 << "]");
    }
  }
  // The min/max parameters of a fractional scheme: round-to-nearest's zero points held as floats.
  const std::vector<float> w = random_weight_of_kind(4, 64, 3, "normal");
  const TensorView<const float> view(w.data(), Shape{4, 64});
  QuantScheme scheme = QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 32);
  const QuantizedTensor integer = quantize(view, scheme);
  scheme.float_zero_point = true;
  const QuantizedTensor fractional = quantize(view, scheme);
  REQUIRE(fractional.qparams.float_zero_point.size() == integer.qparams.zero_point.size());
  for (std::size_t k = 0; k < integer.qparams.zero_point.size(); ++k)
    CHECK(fractional.qparams.float_zero_point[k] == static_cast<float>(integer.qparams.zero_point[k]));
  CHECK(fractional.qparams.scale == integer.qparams.scale);
}

TEST_CASE("fractional zero points: validate_qparams refuses them unless its caller reads them, and checks them",
          "[quant][hqq][fractional][errors]") {
  const std::vector<float> w = random_weight_of_kind(4, 64, 13, "student");
  const TensorView<const float> view(w.data(), Shape{4, 64});
  HqqOptions o;
  o.group_size = 32;
  const QuantizedTensor t = hqq_quantize(view, o);
  const char* fn = "consumer";
  CHECK_THROWS_AS(validate_qparams(t.qparams, t.scheme, t.shape, fn), Error);
  CHECK_THROWS_WITH(validate_qparams(t.qparams, t.scheme, t.shape, fn),
                    "consumer: scheme.float_zero_point = true: expected integer zero points: fractional zero points "
                    "(HQQ) are not supported by consumer");
  CHECK_NOTHROW(validate_qparams(t.qparams, t.scheme, t.shape, fn, FloatZeroPoints::accepted));
  // Float zero points under an integer scheme are refused too, whoever asks.
  QuantScheme integer = t.scheme;
  integer.float_zero_point = false;
  CHECK_THROWS_WITH(validate_qparams(t.qparams, integer, t.shape, fn),
                    Catch::Contains("qparams.float_zero_point.size() = 8: expected integer zero points"));
  CHECK_THROWS_WITH(validate_qparams(t.qparams, integer, t.shape, fn, FloatZeroPoints::accepted),
                    Catch::Contains("qparams.float_zero_point.size() = 8: expected 0: the scheme's zero points are "
                                    "integers"));
  auto refused = [&](QParams q, const QuantScheme& scheme, const char* needle) {
    CHECK_THROWS_AS(validate_qparams(q, scheme, t.shape, fn, FloatZeroPoints::accepted), Error);
    CHECK_THROWS_WITH(validate_qparams(q, scheme, t.shape, fn, FloatZeroPoints::accepted), Catch::Contains(needle));
  };
  QParams bad = t.qparams;
  bad.float_zero_point[3] = std::numeric_limits<float>::quiet_NaN();
  refused(bad, t.scheme, "qparams.float_zero_point[3] = nan: expected a finite zero point");
  bad.float_zero_point[3] = -std::numeric_limits<float>::infinity();
  refused(bad, t.scheme, "qparams.float_zero_point[3] = -inf");
  bad = t.qparams;
  bad.float_zero_point.pop_back();
  refused(bad, t.scheme, "qparams.float_zero_point.size() = 7: expected one fractional zero point per scale (8)");
  bad = t.qparams;
  bad.zero_point.assign(8, 3);
  refused(bad, t.scheme, "qparams.zero_point.size() = 8: expected 0 with fractional zero points");
  bad = t.qparams;
  bad.float_zero_point.clear();
  refused(bad, t.scheme, "qparams.float_zero_point.size() = 0: expected one fractional zero point per scale (8)");
  QuantScheme symmetric = t.scheme;
  symmetric.symmetry = Symmetry::symmetric;
  refused(t.qparams, symmetric, "scheme.float_zero_point = true: expected false for a symmetric scheme");
  // Values beyond [qmin, qmax] are HQQ's to choose: finite is all that is asked.
  bad = t.qparams;
  bad.float_zero_point[0] = -3.5f;
  bad.float_zero_point[1] = 40.25f;
  CHECK_NOTHROW(validate_qparams(bad, t.scheme, t.shape, fn, FloatZeroPoints::accepted));

  // fake_quantize reads integer zero points only; nothing written.
  std::vector<float> fake(w.size(), -7.0f);
  CHECK_THROWS_WITH(fake_quantize(view, t.scheme, t.qparams, TensorView<float>(fake.data(), view.shape())),
                    "shrink::quant::fake_quantize: scheme.float_zero_point = true: expected integer zero points: "
                    "fractional zero points (HQQ) are not supported by shrink::quant::fake_quantize");
  for (float v : fake) CHECK(v == -7.0f);
  // quantize and dequantize with bad fractional parameters: one Error, the caller's output untouched.
  std::vector<std::uint8_t> bytes(4 * 32, 0xAB);
  bad = t.qparams;
  bad.float_zero_point[5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(quantize_into(view, t.scheme, bad, TensorView<std::uint8_t>(bytes.data(), Shape{4, 32})),
                    Catch::Contains("qparams.float_zero_point[5] = inf"));
  for (std::uint8_t b : bytes) CHECK(b == 0xAB);
  QuantizedTensor broken = t;
  broken.qparams = bad;
  std::vector<float> restored(w.size(), -7.0f);
  CHECK_THROWS_WITH(dequantize_into(broken, TensorView<float>(restored.data(), view.shape())),
                    Catch::Contains("shrink::quant::dequantize_into: qparams.float_zero_point[5] = inf"));
  for (float v : restored) CHECK(v == -7.0f);
}

TEST_CASE("hqq_quantize: one iteration, per row, 2-8 bits, strided weights, an all-zero weight", "[quant][hqq]") {
  const std::int64_t out = 12, in = 128;
  const std::vector<float> w = random_weight_of_kind(out, in, 7, "student");
  const TensorView<const float> view(w.data(), Shape{out, in});
  HqqOptions o;
  HqqResult info;
  const QuantizedTensor base = hqq_quantize(view, o, &info);
  CHECK(info.groups == out * 2);
  CHECK(info.iterations_run >= 1);
  CHECK(info.iterations_run <= o.iterations);

  // More iterations never do worse in φ: every step is evaluated and the best kept.
  HqqOptions one = o;
  one.iterations = 1;
  HqqResult one_info;
  hqq_quantize(view, one, &one_info);
  CHECK(one_info.iterations_run == 1);
  CHECK(one_info.initial_error == info.initial_error);
  CHECK(info.final_error <= one_info.final_error);

  // Per output row (group_size 0): per_channel along axis 0.
  HqqOptions row = o;
  row.group_size = 0;
  const QuantizedTensor per_row = hqq_quantize(view, row, &info);
  CHECK(per_row.scheme.granularity == Granularity::per_channel);
  CHECK(per_row.scheme.axis == 0);
  CHECK(per_row.qparams.size() == out);
  CHECK(info.groups == out);

  // A transposed-storage view of the same weight gives the same bytes.
  std::vector<float> wt(static_cast<std::size_t>(out * in));
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t j = 0; j < in; ++j)
      wt[static_cast<std::size_t>(j * out + r)] = w[static_cast<std::size_t>(r * in + j)];
  const QuantizedTensor strided = hqq_quantize(TensorView<const float>(wt.data(), Shape{out, in}, Strides{1, out}), o);
  CHECK(strided.data == base.data);
  CHECK(strided.qparams.scale == base.qparams.scale);
  CHECK(strided.qparams.float_zero_point == base.qparams.float_zero_point);

  // 2..8 bits: the dtype and the integer range.
  for (int bits = 2; bits <= 8; ++bits) {
    HqqOptions b = o;
    b.bits = bits;
    const QuantizedTensor t = hqq_quantize(view, b);
    const QuantRange range = quant_range(t.scheme);
    CHECK(range.qmin == 0);
    CHECK(range.qmax == (1 << bits) - 1);
    CHECK(t.scheme.dtype == hqq_scheme(b).dtype);
    CHECK(t.scheme.bits == hqq_scheme(b).bits);
    CHECK(t.scheme.symmetry == Symmetry::affine);
  }

  // An all-zero group stays exact: round-to-nearest's parameters, zero error.
  std::vector<float> zeros(static_cast<std::size_t>(2 * in), 0.0f);
  const QuantizedTensor z = hqq_quantize(TensorView<const float>(zeros.data(), Shape{2, in}), o, &info);
  CHECK(info.final_error == 0.0);
  CHECK(info.groups_improved == 0);
  for (float v : dequantize(z)) CHECK(v == 0.0f);
}

TEST_CASE("hqq_quantize gives the same bytes on any executor", "[quant][hqq][threads]") {
  const std::int64_t out = 200, in = 128;
  const std::vector<float> w = random_weight_of_kind(out, in, 10, "outliers");
  for (std::int64_t group : {std::int64_t{0}, std::int64_t{32}})
    for (const bool fractional : {false, true}) {
      HqqOptions o;
      o.group_size = group;
      o.fractional_zero_point = fractional;
      o.beta = 1e3;  // the shrinkage acts
      test::require_same_bytes_on_every_executor([&] {
        HqqResult info;
        const QuantizedTensor t = hqq_quantize(TensorView<const float>(w.data(), Shape{out, in}), o, &info);
        std::vector<double> bytes(t.qparams.scale.begin(), t.qparams.scale.end());
        for (std::int32_t z : t.qparams.zero_point) bytes.push_back(z);
        for (float z : t.qparams.float_zero_point) bytes.push_back(z);
        for (std::uint8_t b : t.data) bytes.push_back(b);
        bytes.push_back(info.initial_error);
        bytes.push_back(info.final_error);
        bytes.push_back(info.iterations_run);
        bytes.push_back(static_cast<double>(info.groups_improved));
        return bytes;
      });
    }
}

TEST_CASE("hqq_quantize: every bad input is one Error naming it", "[quant][hqq][errors]") {
  const std::int64_t out = 4, in = 32;
  const std::vector<float> w = random_weight_of_kind(out, in, 12, "normal");
  const TensorView<const float> view(w.data(), Shape{out, in});
  HqqOptions o;
  o.group_size = 16;
  HqqResult info;
  info.initial_error = -1.0;
  auto throws = [&](const HqqOptions& opt, const char* needle) {
    CHECK_THROWS_AS(hqq_quantize(view, opt, &info), Error);
    CHECK_THROWS_WITH(hqq_quantize(view, opt, &info), Catch::Contains(needle));
  };
  HqqOptions bad = o;
  bad.bits = 1;
  throws(bad, "options.bits = 1");
  bad.bits = 9;
  throws(bad, "options.bits = 9");
  bad = o;
  bad.group_size = 24;
  throws(bad, "options.group_size = 24");
  bad.group_size = -1;
  throws(bad, "options.group_size = -1");
  bad = o;
  bad.beta = 0.0;
  throws(bad, "options.beta = 0");
  bad.beta = -1.0;
  throws(bad, "options.beta = -1");
  bad.beta = std::numeric_limits<double>::infinity();
  throws(bad, "options.beta = inf");
  bad = o;
  bad.kappa = 0.0;
  throws(bad, "options.kappa = 0");
  bad.kappa = std::numeric_limits<double>::quiet_NaN();
  throws(bad, "options.kappa = nan");
  bad = o;
  bad.lp_norm = 0.0;
  throws(bad, "options.lp_norm = 0");
  bad.lp_norm = 1.5;
  throws(bad, "options.lp_norm = 1.5");
  bad.lp_norm = std::numeric_limits<double>::quiet_NaN();
  throws(bad, "options.lp_norm = nan");
  bad = o;
  bad.iterations = 0;
  throws(bad, "options.iterations = 0");
  std::vector<float> nonfinite = w;
  nonfinite[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(hqq_quantize(TensorView<const float>(nonfinite.data(), Shape{out, in}), o, &info),
                    Catch::Contains("weight[5] = nan"));
  nonfinite[5] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(hqq_quantize(TensorView<const float>(nonfinite.data(), Shape{out, in}), o, &info),
                    Catch::Contains("weight[5] = -inf"));
  CHECK_THROWS_WITH(hqq_quantize(TensorView<const float>(w.data(), Shape{0, in}), o, &info),
                    Catch::Contains("weight.shape = [0, 32]"));
  CHECK_THROWS_WITH(hqq_quantize(TensorView<const float>(w.data(), Shape{out * in}), o, &info),
                    Catch::Contains("weight.shape = [128]"));
  CHECK_THROWS_WITH(hqq_quantize(TensorView<const float>(w.data(), Shape{2, 2, in}), o, &info),
                    Catch::Contains("weight.shape = [2, 2, 32]"));
  CHECK(info.initial_error == -1.0);  // nothing written
}
