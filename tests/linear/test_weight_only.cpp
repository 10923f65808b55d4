// Linear layers over packed weights: float (linear_f32, and Eigen's linear_f32_eigen), half, bfloat16, int8 and
// per-group int4 weight-only, with float and half / bfloat16 activations, against double references at every SIMD
// level (int4 also against dequantize-then-float-GEMM); bad input leaves out untouched.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hqq.hpp"
#include "shrink/quant/quantize.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;

namespace {

// Shapes reaching every tile remainder: M around the 6- and 12-row tiles, N around the 16/32-wide panels, K across
// the 256-wide blocks.
const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> kShapes = {
    {1, 1, 1},    {1, 33, 77},   {2, 31, 300},  {5, 16, 64},  {6, 40, 1},
    {7, 17, 257}, {12, 64, 128}, {13, 33, 600}, {30, 70, 513}};

template <class T>
std::vector<float> as_floats(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  return f;
}

// int4 shapes: K a multiple of every group size tried (32, 64, 128 where they divide K).
const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> kInt4Shapes = {
    {1, 1, 64},   {1, 33, 128},  {2, 31, 320},  {5, 16, 64},   {6, 40, 256},
    {7, 17, 384}, {12, 64, 128}, {13, 33, 640}, {30, 70, 512}, {3, 45, 1024}};

quant::QuantizedTensor quantize_int4(const std::vector<float>& w, std::int64_t n, std::int64_t k, std::int64_t group) {
  return quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                         quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::symmetric, 1, group));
}

// Spacing of the 16-bit type A at |v| (its unit in the last place); outputs are rounded to it.
template <class A>
double ulp_of(double v) {
  constexpr int mantissa = std::is_same<A, half>::value ? 10 : 7;
  constexpr int min_exponent = std::is_same<A, half>::value ? -14 : -126;
  const int e = v == 0.0 ? min_exponent : std::max(min_exponent, std::ilogb(v));
  return std::ldexp(1.0, e - mantissa);
}

// out (16-bit) against act(scale[n] · ref + bias[n]) within the float bound of check_against_reference plus one unit
// of the output type (its rounding).
template <class A>
void check_rounded_against_reference(const std::vector<A>& out, const shrink::test::ProductReference& ref,
                                     std::int64_t m_total, std::int64_t n_total, std::int64_t k_total,
                                     const std::vector<float>& scales, const std::vector<float>& bias, Activation act) {
  const double unit = std::ldexp(1.0, -23);
  int reported = 0;
  for (std::int64_t i = 0; i < m_total * n_total; ++i) {
    const std::size_t at = static_cast<std::size_t>(i);
    const std::int64_t n = i % n_total;
    const double s = scales.empty() ? 1.0 : scales[static_cast<std::size_t>(n)];
    const double b = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(n)];
    const double pre = ref.value[at] * s + b;
    const double expected = shrink::test::activate_reference(pre, act);
    const double bound = (static_cast<double>(k_total) + 4) * unit * ref.magnitude[at] * s +
                         4 * unit * (std::fabs(pre) + std::fabs(b)) + ulp_of<A>(std::fabs(expected));
    const double got = static_cast<float>(out[at]);
    if (!(std::fabs(got - expected) <= bound) && reported++ < 5) {
      INFO("m " << i / n_total << " n " << n << " got " << got << " expected " << expected << " bound " << bound);
      CHECK(std::fabs(got - expected) <= bound);
    }
  }
  CHECK(reported == 0);
}

// Rounds float values to A (the activations a 16-bit caller holds).
template <class A>
std::vector<A> rounded(const std::vector<float>& v) {
  std::vector<A> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = A(v[i]);
  return r;
}

// The 16-bit path equals the float path on the same (widened) activations, each output rounded to nearest even.
template <class A, class W>
void check_16bit_matches_float(const std::vector<float>& x, const W& w, std::int64_t m, std::int64_t n, std::int64_t k,
                               const Epilogue& e) {
  const std::vector<A> x16 = rounded<A>(x);
  const std::vector<float> xw = as_floats(x16);
  std::vector<float> out_float(static_cast<std::size_t>(m * n), kPoison);
  linear_weight_only(TensorView<const float>(xw.data(), Shape{m, k}), w,
                     TensorView<float>(out_float.data(), Shape{m, n}), e);
  std::vector<A> out(static_cast<std::size_t>(m * n), A(kPoison));
  linear_weight_only(TensorView<const A>(x16.data(), Shape{m, k}), w, TensorView<A>(out.data(), Shape{m, n}), e);
  int mismatches = 0;
  for (std::size_t i = 0; i < out.size(); ++i) mismatches += out[i].to_bits() != A(out_float[i]).to_bits();
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("linear_f32, half and bfloat16 weights match a double reference at every SIMD level",
          "[cpu][linear][float]") {
  std::mt19937 rng(21);
  for (auto [m, n, k] : kShapes) {
    INFO("M " << m << " N " << n << " K " << k);
    const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
    const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.5f);
    const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
    std::vector<half> wh(w.size());
    std::vector<bfloat16> wb(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      wh[i] = half(w[i]);
      wb[i] = bfloat16(w[i]);
    }
    const TensorView<const float> xv(x.data(), Shape{m, k});
    const PackedWeight<float> pf = pack_weight(TensorView<const float>(w.data(), Shape{n, k}));
    const PackedWeight<half> ph = pack_weight(TensorView<const half>(wh.data(), Shape{n, k}));
    const PackedWeight<bfloat16> pb = pack_weight_as<bfloat16>(TensorView<const float>(w.data(), Shape{n, k}));
    const auto ref_f = shrink::test::reference_product(x, w, m, n, k);
    const auto ref_h = shrink::test::reference_product(x, as_floats(wh), m, n, k);
    const auto ref_b = shrink::test::reference_product(x, as_floats(wb), m, n, k);
    for (Activation act : {Activation::none, Activation::relu, Activation::silu}) {
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
      at_each_level([&](SimdLevel) {
        std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
        const TensorView<float> ov(out.data(), Shape{m, n});
        linear_f32(xv, pf, ov, e);
        shrink::test::check_against_reference(out, n, ref_f, m, n, k, {}, bias, act);
        linear_weight_only(xv, ph, ov, e);
        shrink::test::check_against_reference(out, n, ref_h, m, n, k, {}, bias, act);
        linear_weight_only(xv, pb, ov, e);
        shrink::test::check_against_reference(out, n, ref_b, m, n, k, {}, bias, act);
      });
      std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
      linear_f32_eigen(xv, TensorView<const float>(w.data(), Shape{n, k}), TensorView<float>(out.data(), Shape{m, n}),
                       e);
      shrink::test::check_against_reference(out, n, ref_f, m, n, k, {}, bias, act);
    }
  }
}

TEST_CASE("linear_weight_only with int8 weights, per channel and per tensor, scales in the epilogue",
          "[cpu][linear][float]") {
  std::mt19937 rng(22);
  for (auto [m, n, k] : kShapes) {
    for (bool per_channel : {true, false}) {
      INFO("M " << m << " N " << n << " K " << k << (per_channel ? " per channel" : " per tensor"));
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.02f);
      const auto scheme = per_channel
                              ? quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0)
                              : quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
      const auto q = quant::quantize(TensorView<const float>(w.data(), Shape{n, k}), scheme);
      std::vector<float> integers(w.size());
      for (std::size_t i = 0; i < w.size(); ++i)
        integers[i] = static_cast<float>(q.value(static_cast<std::int64_t>(i)));
      std::vector<float> scales(static_cast<std::size_t>(n));
      for (std::int64_t r = 0; r < n; ++r)
        scales[static_cast<std::size_t>(r)] = q.qparams.scale[per_channel ? static_cast<std::size_t>(r) : 0];
      const auto ref = shrink::test::reference_product(x, integers, m, n, k);
      const PackedWeight<std::int8_t> packed = pack_weight(q);
      CHECK(packed.storage_bytes() == n * k + (per_channel ? n : 1) * 4);
      const std::vector<float> bias(static_cast<std::size_t>(n), 0.25f);
      at_each_level([&](SimdLevel) {
        std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
        linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), packed,
                           TensorView<float>(out.data(), Shape{m, n}),
                           Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu));
        shrink::test::check_against_reference(out, n, ref, m, n, k, scales, bias, Activation::gelu);
      });
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), q, bias.data(),
                         TensorView<float>(a.data(), Shape{m, n}));
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), packed,
                         TensorView<float>(b.data(), Shape{m, n}),
                         Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n})));
      CHECK(a == b);
    }
  }
}

TEST_CASE("linear_weight_only with per-group int4 weights matches a double reference and dequantize-then-GEMM",
          "[cpu][linear][float][int4]") {
  std::mt19937 rng(25);
  for (auto [m, n, k] : kInt4Shapes) {
    for (std::int64_t group : {32, 64, 128}) {
      if (k % group != 0) continue;
      INFO("M " << m << " N " << n << " K " << k << " group " << group);
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      const quant::QuantizedTensor q = quantize_int4(w, n, k, group);
      const std::vector<float> dequantized = quant::dequantize(q);  // (q - 0) * s in float: what the kernel multiplies
      const PackedInt4Weight packed = pack_weight_int4(q);
      CHECK(packed.storage_bytes() == n * (k / 2) + n * (k / group) * 4);
      const auto ref = shrink::test::reference_product(x, dequantized, m, n, k);
      const PackedWeight<float> dense = pack_weight(TensorView<const float>(dequantized.data(), Shape{n, k}));
      const TensorView<const float> xv(x.data(), Shape{m, k});
      for (Activation act : {Activation::none, Activation::gelu, Activation::silu}) {
        const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
        at_each_level([&](SimdLevel) {
          std::vector<float> out(static_cast<std::size_t>(m * n), kPoison), dense_out(out.size(), kPoison);
          linear_weight_only(xv, packed, TensorView<float>(out.data(), Shape{m, n}), e);
          shrink::test::check_against_reference(out, n, ref, m, n, k, {}, bias, act);
          // Dequantize-then-float-GEMM: the same products, summed in another order.
          linear_f32(xv, dense, TensorView<float>(dense_out.data(), Shape{m, n}), e);
          const auto& magnitude = ref.magnitude;
          int far = 0;
          for (std::size_t i = 0; i < out.size(); ++i)
            far += !(std::fabs(out[i] - dense_out[i]) <=
                     2 * (static_cast<double>(k) + 4) * std::ldexp(1.0, -23) * magnitude[i] +
                         std::ldexp(1.0, -21) *
                             (std::fabs(dense_out[i]) + std::fabs(bias[i % static_cast<std::size_t>(n)])));
          CHECK(far == 0);
        });
      }
      // The QuantizedTensor overload packs the same weight.
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}));
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), q, TensorView<float>(a.data(), Shape{m, n}),
                         e);
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), packed,
                         TensorView<float>(b.data(), Shape{m, n}), e);
      CHECK(a == b);
    }
  }
}

TEST_CASE("pack_weight_int4 lays rows out as panels of nibbles with their group scales", "[cpu][linear][int4]") {
  std::mt19937 rng(26);
  const std::int64_t n = 37, k = 96, group = 32;
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  const quant::QuantizedTensor q = quantize_int4(w, n, k, group);
  const PackedInt4Weight p = pack_weight_int4(q);
  REQUIRE(p.panel_count() == 2);
  std::vector<float> block(static_cast<std::size_t>(k * kPanelWidth));
  for (std::int64_t panel = 0; panel < p.panel_count(); ++panel) {
    shrink::cpu::dequantize_int4_panel(p, panel, 0, k, block.data());
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t j = 0; j < kPanelWidth; ++j) {
        const std::int64_t row = panel * kPanelWidth + j;
        const float expected = row < n ? static_cast<float>(q.value(row * k + kk)) *
                                             q.qparams.scale[static_cast<std::size_t>(row * (k / group) + kk / group)]
                                       : 0.0f;
        if (block[static_cast<std::size_t>(kk * kPanelWidth + j)] != expected) {
          INFO("row " << row << " k " << kk);
          REQUIRE(block[static_cast<std::size_t>(kk * kPanelWidth + j)] == expected);
        }
      }
  }
}

// Affine 4-bit weights (a zero point per group or channel, GPTQ / AWQ style). The weights are shifted off zero so that
// the zero points are far from the symmetric ones.
struct AffineInt4Case {
  std::int64_t m, n, k;
  quant::Granularity granularity;
  std::int64_t group;  // per_group only
};

quant::QuantScheme affine_int4_scheme(const AffineInt4Case& c, quant::QuantDtype dtype) {
  using quant::QuantScheme;
  using quant::Symmetry;
  switch (c.granularity) {
    case quant::Granularity::per_group: return QuantScheme::per_group(dtype, Symmetry::affine, 1, c.group);
    case quant::Granularity::per_channel: return QuantScheme::per_channel(dtype, Symmetry::affine, 0);
    default: return QuantScheme::per_tensor(dtype, Symmetry::affine);
  }
}

std::vector<float> shifted_weights(std::int64_t n, std::int64_t k, std::mt19937& rng) {
  std::vector<float> w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      w[static_cast<std::size_t>(r * k + c)] += 0.04f + 0.01f * static_cast<float>(r % 5);
  return w;
}

TEST_CASE(
    "pack_weight_int4 keeps the zero points of affine int4 and uint4 weights: panels dequantize as "
    "quant::dequantize",
    "[cpu][linear][int4][affine]") {
  std::mt19937 rng(27);
  const std::int64_t n = 37, k = 99;
  const auto w = shifted_weights(n, k, rng);
  for (quant::QuantDtype dtype : {quant::QuantDtype::int4, quant::QuantDtype::uint4})
    for (const AffineInt4Case c : {AffineInt4Case{1, n, k, quant::Granularity::per_channel, 0},
                                   AffineInt4Case{1, n, 96, quant::Granularity::per_group, 32},
                                   AffineInt4Case{1, n, 96, quant::Granularity::per_tensor, 0}}) {
      INFO("dtype " << quant::to_string(dtype) << " granularity " << quant::to_string(c.granularity));
      const quant::QuantizedTensor q =
          quant::quantize(TensorView<const float>(w.data(), Shape{n, c.k}), affine_int4_scheme(c, dtype));
      const std::vector<float> dequantized = quant::dequantize(q);
      const PackedInt4Weight p = pack_weight_int4(q);
      REQUIRE(p.affine());
      CHECK(p.group_size == (c.granularity == quant::Granularity::per_group ? c.group : c.k));
      CHECK(p.storage_bytes() == n * ((c.k + 1) / 2) + n * p.groups() * 5);
      std::vector<float> block(static_cast<std::size_t>(c.k * kPanelWidth));
      int mismatches = 0;
      for (std::int64_t panel = 0; panel < p.panel_count(); ++panel) {
        shrink::cpu::dequantize_int4_panel(p, panel, 0, c.k, block.data());
        for (std::int64_t kk = 0; kk < c.k; ++kk)
          for (std::int64_t j = 0; j < kPanelWidth; ++j) {
            const std::int64_t row = panel * kPanelWidth + j;
            const float expected = row < n ? dequantized[static_cast<std::size_t>(row * c.k + kk)] : 0.0f;
            mismatches += block[static_cast<std::size_t>(kk * kPanelWidth + j)] != expected;
          }
      }
      CHECK(mismatches == 0);
    }
  // Zero points that are the symmetric ones (0 for int4, 8 for uint4) take the symmetric loop.
  const quant::QuantizedTensor sym_u4 =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, 96}),
                      quant::QuantScheme::per_group(quant::QuantDtype::uint4, quant::Symmetry::symmetric, 1, 32));
  const PackedInt4Weight p = pack_weight_int4(sym_u4);
  CHECK_FALSE(p.affine());
  CHECK(p.storage_bytes() == n * 48 + n * 3 * 4);
  std::vector<float> block(static_cast<std::size_t>(96 * kPanelWidth));
  shrink::cpu::dequantize_int4_panel(p, 0, 0, 96, block.data());
  const std::vector<float> dequantized = quant::dequantize(sym_u4);
  for (std::int64_t kk = 0; kk < 96; kk += 7)
    CHECK(block[static_cast<std::size_t>(kk * kPanelWidth + 3)] == dequantized[static_cast<std::size_t>(3 * 96 + kk)]);
}

TEST_CASE("the AVX2 int4 dequantization gives the scalar loop's floats bit for bit (symmetric, affine, fractional)",
          "[cpu][linear][int4][simd]") {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (!use_avx2()) return;
  std::mt19937 rng(35);
  const std::int64_t n = 45, k = 320;
  const auto w = shifted_weights(n, k, rng);
  const TensorView<const float> wv(w.data(), Shape{n, k});
  std::uniform_real_distribution<float> offset(-1.5f, 1.5f);
  std::vector<PackedInt4Weight> weights;
  for (quant::QuantDtype dtype : {quant::QuantDtype::int4, quant::QuantDtype::uint4})
    for (std::int64_t group : {std::int64_t{32}, std::int64_t{64}}) {
      weights.push_back(pack_weight_int4(
          quant::quantize(wv, quant::QuantScheme::per_group(dtype, quant::Symmetry::symmetric, 1, group))));
      const quant::QuantScheme affine = quant::QuantScheme::per_group(dtype, quant::Symmetry::affine, 1, group);
      weights.push_back(pack_weight_int4(quant::quantize(wv, affine)));
      quant::QuantScheme fractional = affine;
      fractional.float_zero_point = true;
      quant::QParams params = quant::minmax_qparams(wv, fractional);
      for (float& z : params.float_zero_point) z += offset(rng);
      weights.push_back(pack_weight_int4(quant::quantize(wv, fractional, params)));
    }
  for (const PackedInt4Weight& p : weights) {
    INFO("group " << p.group_size << (p.affine() ? " affine" : p.fractional() ? " fractional" : " symmetric"));
    // Blocks that start and end inside groups, as the product's blocks of 256 do for groups of 96.
    for (auto [k0, kc] : {std::pair<std::int64_t, std::int64_t>{0, k}, {17, 100}, {256, 64}}) {
      for (std::int64_t panel = 0; panel < p.panel_count(); ++panel) {
        std::vector<float> scalar(static_cast<std::size_t>(kc * kPanelWidth)), vector(scalar.size(), kPoison);
        dequantize_int4_panel(p, panel, k0, kc, scalar.data());
        dequantize_int4_panel_avx2(p, panel, k0, kc, vector.data());
        CHECK(std::memcmp(scalar.data(), vector.data(), scalar.size() * sizeof(float)) == 0);
      }
    }
  }
#endif
}

TEST_CASE(
    "pack_weight_int4 keeps fractional zero points (HQQ): panels dequantize as quant::dequantize bit for bit, "
    "the layer matches a double reference and dequantize-then-GEMM",
    "[cpu][linear][int4][fractional]") {
  std::mt19937 rng(33);
  using quant::Granularity;
  const std::vector<AffineInt4Case> cases = {
      {1, 1, 64, Granularity::per_channel, 0},   {3, 37, 96, Granularity::per_group, 32},
      {7, 17, 384, Granularity::per_group, 96},  {12, 64, 128, Granularity::per_group, 32},
      {13, 45, 640, Granularity::per_group, 64}, {30, 70, 513, Granularity::per_channel, 0},
      {6, 19, 257, Granularity::per_tensor, 0}};
  std::uniform_real_distribution<float> offset(-1.5f, 1.5f);
  for (const AffineInt4Case& c : cases)
    for (quant::QuantDtype dtype : {quant::QuantDtype::int4, quant::QuantDtype::uint4}) {
      const std::int64_t m = c.m, n = c.n, k = c.k;
      INFO("M " << m << " N " << n << " K " << k << " " << quant::to_string(c.granularity) << " group " << c.group
                << " " << quant::to_string(dtype));
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const auto w = shifted_weights(n, k, rng);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      quant::QuantScheme scheme = affine_int4_scheme(c, dtype);
      scheme.float_zero_point = true;
      const TensorView<const float> wv(w.data(), Shape{n, k});
      // Min/max parameters, each zero point moved by a fraction (some beyond [qmin, qmax]), as HQQ moves them.
      quant::QParams params = quant::minmax_qparams(wv, scheme);
      for (float& z : params.float_zero_point) z += offset(rng);
      const quant::QuantizedTensor q = quant::quantize(wv, scheme, params);
      const std::vector<float> dequantized = quant::dequantize(q);  // (float(q) − z) · s
      const PackedInt4Weight packed = pack_weight_int4(q);
      REQUIRE(packed.fractional());
      CHECK_FALSE(packed.affine());
      CHECK(packed.value_offset == (dtype == quant::QuantDtype::uint4 ? 8 : 0));
      CHECK(packed.storage_bytes() == n * ((k + 1) / 2) + n * packed.groups() * 8);
      std::vector<float> block(static_cast<std::size_t>(k * kPanelWidth));
      int mismatches = 0;
      for (std::int64_t panel = 0; panel < packed.panel_count(); ++panel) {
        shrink::cpu::dequantize_int4_panel(packed, panel, 0, k, block.data());
        for (std::int64_t kk = 0; kk < k; ++kk)
          for (std::int64_t j = 0; j < kPanelWidth && panel * kPanelWidth + j < n; ++j) {
            const float expected = dequantized[static_cast<std::size_t>((panel * kPanelWidth + j) * k + kk)];
            const float got = block[static_cast<std::size_t>(kk * kPanelWidth + j)];
            mismatches += std::memcmp(&got, &expected, sizeof(float)) != 0;
          }
      }
      CHECK(mismatches == 0);
      const auto ref = shrink::test::reference_product(x, dequantized, m, n, k);
      const PackedWeight<float> dense = pack_weight(TensorView<const float>(dequantized.data(), Shape{n, k}));
      const TensorView<const float> xv(x.data(), Shape{m, k});
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu);
      at_each_level([&](SimdLevel) {
        std::vector<float> out(static_cast<std::size_t>(m * n), kPoison), dense_out(out.size(), kPoison);
        linear_weight_only(xv, packed, TensorView<float>(out.data(), Shape{m, n}), e);
        shrink::test::check_against_reference(out, n, ref, m, n, k, {}, bias, Activation::gelu);
        linear_f32(xv, dense, TensorView<float>(dense_out.data(), Shape{m, n}), e);
        int far = 0;
        for (std::size_t i = 0; i < out.size(); ++i)
          far += !(std::fabs(out[i] - dense_out[i]) <=
                   2 * (static_cast<double>(k) + 4) * std::ldexp(1.0, -23) * ref.magnitude[i] +
                       std::ldexp(1.0, -21) *
                           (std::fabs(dense_out[i]) + std::fabs(bias[i % static_cast<std::size_t>(n)])));
        CHECK(far == 0);
      });
      // The QuantizedTensor overload packs the same weight; half and bfloat16 activations round the float result.
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
      linear_weight_only(xv, q, TensorView<float>(a.data(), Shape{m, n}), e);
      linear_weight_only(xv, packed, TensorView<float>(b.data(), Shape{m, n}), e);
      CHECK(a == b);
      check_16bit_matches_float<half>(x, packed, m, n, k, e);
    }
  // HQQ's own output (the default form), through the layer: one-hot rows of x give the weight back exactly.
  const std::int64_t n = 40, k = 128;
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
  quant::HqqOptions o;
  const quant::QuantizedTensor h = quant::hqq_quantize(TensorView<const float>(w.data(), Shape{n, k}), o);
  REQUIRE(h.qparams.fractional());
  const std::vector<float> dequantized = quant::dequantize(h);
  std::vector<float> eye(static_cast<std::size_t>(k * k), 0.0f);
  for (std::int64_t i = 0; i < k; ++i) eye[static_cast<std::size_t>(i * k + i)] = 1.0f;
  at_each_level([&](SimdLevel) {
    std::vector<float> out(static_cast<std::size_t>(k * n), kPoison);
    linear_weight_only(TensorView<const float>(eye.data(), Shape{k, k}), h, TensorView<float>(out.data(), Shape{k, n}));
    int mismatches = 0;
    for (std::int64_t i = 0; i < k; ++i)
      for (std::int64_t r = 0; r < n; ++r)
        mismatches += out[static_cast<std::size_t>(i * n + r)] != dequantized[static_cast<std::size_t>(r * k + i)];
    CHECK(mismatches == 0);
  });
}

TEST_CASE(
    "one row of int4 (decode): the in-place kernel where its sums fit, the grouped one otherwise (odd groups, huge "
    "|x|), both against a double reference",
    "[cpu][linear][int4][decode]") {
  std::mt19937 rng(35);
  const std::int64_t n = 45, k = 192;
  // Where the in-place kernel's partial sums (at most max|x| · 15 · 2^28 · group) stay below 2^116.
  const PackedInt4Weight g64 = [] {
    PackedInt4Weight w;
    w.group_size = 64;
    return w;
  }();
  CHECK(int4_rows_in_place_fit(g64, std::ldexp(1.0f, 78)));
  CHECK_FALSE(int4_rows_in_place_fit(g64, std::nextafter(std::ldexp(1.0f, 78), INFINITY)));
  CHECK_FALSE(int4_rows_in_place_fit(g64, INFINITY));
  CHECK_FALSE(int4_rows_in_place_fit(g64, std::nanf("")));
  PackedInt4Weight g3 = g64;
  g3.group_size = 3;
  CHECK_FALSE(int4_rows_in_place_fit(g3, 1.0f));
  enum class Form { symmetric, affine, fractional };
  for (Form form : {Form::symmetric, Form::affine, Form::fractional})
    for (std::int64_t group : {2, 3, 32, 64, 96})
      for (float x_scale : {1.0f, std::ldexp(1.0f, 70), std::ldexp(1.0f, 82)}) {
        INFO("form " << static_cast<int>(form) << " group " << group << " |x| scale " << x_scale);
        const auto w = shifted_weights(n, k, rng);
        auto x = shrink::test::normal_values(static_cast<std::size_t>(k), rng);
        for (float& v : x) v *= x_scale;
        quant::QuantScheme scheme =
            affine_int4_scheme({1, n, k, quant::Granularity::per_group, group},
                               form == Form::symmetric ? quant::QuantDtype::int4 : quant::QuantDtype::uint4);
        if (form == Form::symmetric) scheme.symmetry = quant::Symmetry::symmetric;
        scheme.float_zero_point = form == Form::fractional;
        const TensorView<const float> wv(w.data(), Shape{n, k});
        quant::QParams params = quant::minmax_qparams(wv, scheme);
        for (float& z : params.float_zero_point) z += 0.375f;
        const quant::QuantizedTensor q = quant::quantize(wv, scheme, params);
        const PackedInt4Weight packed = pack_weight_int4(q);
        CHECK(packed.affine() == (form == Form::affine));
        CHECK(packed.fractional() == (form == Form::fractional));
        float max_abs_x = 0.0f;
        for (float v : x) max_abs_x = std::max(max_abs_x, std::fabs(v));
        CHECK(int4_rows_in_place_fit(packed, max_abs_x) == (group % 2 == 0 && x_scale < std::ldexp(1.0f, 80)));
        const auto ref = shrink::test::reference_product(x, quant::dequantize(q), 1, n, k);
        const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
        const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}));
        at_each_level([&](SimdLevel) {
          std::vector<float> out(static_cast<std::size_t>(n), kPoison);
          linear_weight_only(TensorView<const float>(x.data(), Shape{1, k}), packed,
                             TensorView<float>(out.data(), Shape{1, n}), e);
          shrink::test::check_against_reference(out, n, ref, 1, n, k, {}, bias, Activation::none);
        });
      }
}

TEST_CASE("linear_weight_only with affine int4 and uint4 weights matches a double reference and dequantize-then-GEMM",
          "[cpu][linear][float][int4][affine]") {
  std::mt19937 rng(28);
  using quant::Granularity;
  // Odd N and K, groups that do not divide the 256-wide k blocks (48, 96), K not a multiple of 32 or 64 per channel.
  const std::vector<AffineInt4Case> cases = {
      {1, 1, 1, Granularity::per_channel, 0},     {1, 33, 77, Granularity::per_channel, 0},
      {2, 31, 300, Granularity::per_group, 60},   {5, 3, 144, Granularity::per_group, 48},
      {7, 17, 384, Granularity::per_group, 96},   {12, 64, 128, Granularity::per_group, 32},
      {13, 45, 640, Granularity::per_group, 128}, {30, 70, 513, Granularity::per_channel, 0},
      {6, 19, 257, Granularity::per_tensor, 0},   {3, 45, 1024, Granularity::per_group, 64}};
  for (const AffineInt4Case& c : cases)
    for (quant::QuantDtype dtype : {quant::QuantDtype::int4, quant::QuantDtype::uint4}) {
      const std::int64_t m = c.m, n = c.n, k = c.k;
      INFO("M " << m << " N " << n << " K " << k << " " << quant::to_string(c.granularity) << " group " << c.group
                << " " << quant::to_string(dtype));
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const auto w = shifted_weights(n, k, rng);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      const quant::QuantizedTensor q =
          quant::quantize(TensorView<const float>(w.data(), Shape{n, k}), affine_int4_scheme(c, dtype));
      const std::vector<float> dequantized = quant::dequantize(q);  // (q − zp) · s in float: what the kernel multiplies
      const PackedInt4Weight packed = pack_weight_int4(q);
      if (k > 1) CHECK(packed.affine());
      const auto ref = shrink::test::reference_product(x, dequantized, m, n, k);
      const PackedWeight<float> dense = pack_weight(TensorView<const float>(dequantized.data(), Shape{n, k}));
      const TensorView<const float> xv(x.data(), Shape{m, k});
      for (Activation act : {Activation::none, Activation::relu, Activation::gelu}) {
        const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
        at_each_level([&](SimdLevel) {
          std::vector<float> out(static_cast<std::size_t>(m * n), kPoison), dense_out(out.size(), kPoison);
          linear_weight_only(xv, packed, TensorView<float>(out.data(), Shape{m, n}), e);
          shrink::test::check_against_reference(out, n, ref, m, n, k, {}, bias, act);
          linear_f32(xv, dense, TensorView<float>(dense_out.data(), Shape{m, n}), e);
          int far = 0;
          for (std::size_t i = 0; i < out.size(); ++i)
            far += !(std::fabs(out[i] - dense_out[i]) <=
                     2 * (static_cast<double>(k) + 4) * std::ldexp(1.0, -23) * ref.magnitude[i] +
                         std::ldexp(1.0, -21) *
                             (std::fabs(dense_out[i]) + std::fabs(bias[i % static_cast<std::size_t>(n)])));
          CHECK(far == 0);
          // A second call gives the same bits: nothing depends on call history.
          std::vector<float> again(out.size(), kPoison);
          linear_weight_only(xv, packed, TensorView<float>(again.data(), Shape{m, n}), e);
          CHECK(std::memcmp(again.data(), out.data(), out.size() * sizeof(float)) == 0);
        });
      }
      // The QuantizedTensor overload packs the same weight; half and bfloat16 activations round the float result.
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::silu);
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
      linear_weight_only(xv, q, TensorView<float>(a.data(), Shape{m, n}), e);
      linear_weight_only(xv, packed, TensorView<float>(b.data(), Shape{m, n}), e);
      CHECK(a == b);
      check_16bit_matches_float<half>(x, packed, m, n, k, e);
      check_16bit_matches_float<bfloat16>(x, packed, m, n, k, e);
    }
}

TEST_CASE("linear_weight_only with an affine int4 weight reads strided activations and writes strided outputs",
          "[cpu][linear][float][int4][affine]") {
  std::mt19937 rng(29);
  const std::int64_t m = 14, n = 37, k = 192, group = 64;
  const Eigen::MatrixXf x = Eigen::MatrixXf::Random(m, k);  // column-major: strides {1, m}
  std::vector<float> x_rows(static_cast<std::size_t>(m * k));
  const std::int64_t ldx = k + 5;
  std::vector<float> x_padded(static_cast<std::size_t>(m * ldx), kPoison);  // row stride k + 5
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      x_rows[static_cast<std::size_t>(r * k + c)] = x(r, c);
      x_padded[static_cast<std::size_t>(r * ldx + c)] = x(r, c);
    }
  const auto w = shifted_weights(n, k, rng);
  const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
  const quant::QuantizedTensor q =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_group(quant::QuantDtype::uint4, quant::Symmetry::affine, 1, group));
  const auto ref = shrink::test::reference_product(x_rows, quant::dequantize(q), m, n, k);
  const PackedInt4Weight packed = pack_weight_int4(q);
  const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu);
  at_each_level([&](SimdLevel) {
    const std::int64_t ld = n + 3;
    for (const TensorView<const float>& xv :
         {as_view(x), TensorView<const float>(x_padded.data(), Shape{m, k}, Strides{ldx, 1})}) {
      std::vector<float> out(static_cast<std::size_t>(m * ld), kPoison);
      linear_weight_only(xv, packed, TensorView<float>(out.data(), Shape{m, n}, Strides{ld, 1}), e);
      shrink::test::check_against_reference(out, ld, ref, m, n, k, {}, bias, Activation::relu);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = n; c < ld; ++c) CHECK(out[static_cast<std::size_t>(r * ld + c)] == kPoison);
    }
  });
}

TEST_CASE("linear_weight_only with half and bfloat16 activations and outputs", "[cpu][linear][float][16bit]") {
  std::mt19937 rng(27);
  for (auto [m, n, k] : kInt4Shapes) {
    INFO("M " << m << " N " << n << " K " << k);
    const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
    const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
    const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
    const quant::QuantizedTensor q8 =
        quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                        quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
    const quant::QuantizedTensor q4 = quantize_int4(w, n, k, 64);
    const PackedWeight<std::int8_t> p8 = pack_weight(q8);
    const PackedInt4Weight p4 = pack_weight_int4(q4);
    const PackedWeight<half> ph = pack_weight_as<half>(TensorView<const float>(w.data(), Shape{n, k}));
    std::vector<float> integers(w.size()), scales8(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < w.size(); ++i) integers[i] = static_cast<float>(q8.value(static_cast<std::int64_t>(i)));
    for (std::int64_t r = 0; r < n; ++r)
      scales8[static_cast<std::size_t>(r)] = q8.qparams.scale[static_cast<std::size_t>(r)];
    std::vector<half> wh(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) wh[i] = half(w[i]);

    auto run = [&](auto tag) {
      using A = decltype(tag);
      INFO((std::is_same<A, half>::value ? "half" : "bfloat16") << " activations");
      const std::vector<A> x16 = rounded<A>(x);
      const std::vector<float> xw = as_floats(x16);
      const auto ref8 = shrink::test::reference_product(xw, integers, m, n, k);
      const auto ref4 = shrink::test::reference_product(xw, quant::dequantize(q4), m, n, k);
      const auto refh = shrink::test::reference_product(xw, as_floats(wh), m, n, k);
      const TensorView<const A> xv(x16.data(), Shape{m, k});
      for (Activation act : {Activation::none, Activation::relu, Activation::gelu}) {
        const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
        at_each_level([&](SimdLevel) {
          std::vector<A> out(static_cast<std::size_t>(m * n), A(kPoison));
          const TensorView<A> ov(out.data(), Shape{m, n});
          linear_weight_only(xv, p8, ov, e);
          check_rounded_against_reference(out, ref8, m, n, k, scales8, bias, act);
          linear_weight_only(xv, p4, ov, e);
          check_rounded_against_reference(out, ref4, m, n, k, {}, bias, act);
          linear_weight_only(xv, ph, ov, e);
          check_rounded_against_reference(out, refh, m, n, k, {}, bias, act);
          check_16bit_matches_float<A>(x, p8, m, n, k, e);
          check_16bit_matches_float<A>(x, p4, m, n, k, e);
        });
      }
      std::vector<A> a(static_cast<std::size_t>(m * n)), b(a.size());
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}));
      linear_weight_only(xv, q4, TensorView<A>(a.data(), Shape{m, n}), e);
      linear_weight_only(xv, p4, TensorView<A>(b.data(), Shape{m, n}), e);
      int differ = 0;
      for (std::size_t i = 0; i < a.size(); ++i) differ += a[i].to_bits() != b[i].to_bits();
      CHECK(differ == 0);
    };
    run(half{});
    run(bfloat16{});
  }
}

namespace {

// A planned weight-only layer against the one-call form: the same bytes for activations A, at every SIMD level.
template <class A, class W>
void check_plan_matches_one_call(const W& w, const Epilogue& e, std::int64_t m, std::mt19937& rng) {
  const auto plan = make_plan(w, e);
  for (int call = 0; call < 2; ++call) {  // new activations on each call
    const std::vector<A> x = rounded<A>(shrink::test::normal_values(static_cast<std::size_t>(m * w.cols), rng));
    const TensorView<const A> xv(x.data(), Shape{m, w.cols});
    at_each_level([&](SimdLevel) {
      std::vector<A> one(static_cast<std::size_t>(m * w.rows), A(kPoison)), planned(one.size(), A(kPoison));
      linear_weight_only(xv, w, TensorView<A>(one.data(), Shape{m, w.rows}), e);
      run(plan, xv, TensorView<A>(planned.data(), Shape{m, w.rows}));
      CHECK(std::memcmp(one.data(), planned.data(), one.size() * sizeof(A)) == 0);
    });
  }
}

}  // namespace

TEST_CASE("weight-only plans: one check of the weight and epilogue, then calls with the one-call form's bytes",
          "[cpu][linear][plan]") {
  std::mt19937 rng(91);
  const std::int64_t n = 70, k = 256;
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
  const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
  const PackedWeight<std::int8_t> p8 = pack_weight(
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0)));
  const PackedInt4Weight p4 = pack_weight_int4(quantize_int4(w, n, k, 64));
  const PackedWeight<half> ph = pack_weight_as<half>(TensorView<const float>(w.data(), Shape{n, k}));
  const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu);
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{13}}) {
    INFO("M " << m);
    check_plan_matches_one_call<float>(p8, e, m, rng);
    check_plan_matches_one_call<float>(p4, e, m, rng);
    check_plan_matches_one_call<float>(ph, Epilogue{}, m, rng);
    check_plan_matches_one_call<half>(p4, e, m, rng);
    check_plan_matches_one_call<bfloat16>(p8, e, m, rng);
  }

  SECTION("make_plan checks the weight and reads the bias once") {
    std::vector<float> bad = bias;
    bad[5] = std::nanf("");
    CHECK_THROWS_WITH(make_plan(p4, Epilogue::with_bias(TensorView<const float>(bad.data(), Shape{n}))),
                      Catch::Matchers::Contains("shrink::cpu::make_plan(weight-only): epilogue.bias[5] = nan"));
    CHECK_THROWS_WITH(make_plan(p8, Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n - 1}))),
                      Catch::Matchers::Contains("epilogue.bias.shape = [69]"));
    PackedInt4Weight broken = p4;
    broken.scales.pop_back();
    CHECK_THROWS_WITH(make_plan(broken), Catch::Matchers::Contains("an inconsistent PackedInt4Weight"));
  }
  SECTION("run checks x and out against the plan and writes nothing when they fail") {
    const auto plan = make_plan(p4, e);
    std::vector<float> x(static_cast<std::size_t>(3 * k), 0.5f), out(static_cast<std::size_t>(3 * n), kPoison);
    const TensorView<float> ov(out.data(), Shape{3, n});
    CHECK_THROWS_WITH(run(plan, TensorView<const float>(x.data(), Shape{3, k - 64}), ov),
                      Catch::Matchers::Contains("shrink::cpu::run(LinearWeightOnlyPlan): x.shape = [3, 192]"));
    CHECK_THROWS_WITH(
        run(plan, TensorView<const float>(x.data(), Shape{3, k}), TensorView<float>(out.data(), Shape{3, n - 1})),
        Catch::Matchers::Contains("out.shape = [3, 69]"));
    CHECK_THROWS_WITH(run(plan, TensorView<const float>(x.data(), Shape{1, k}),
                          TensorView<float>(const_cast<float*>(bias.data()), Shape{1, n})),
                      Catch::Matchers::Contains("out = memory overlapping epilogue.bias"));
    CHECK_THROWS_WITH(run(LinearWeightOnlyPlan<PackedInt4Weight>(), TensorView<const float>(x.data(), Shape{3, k}), ov),
                      Catch::Matchers::Contains("plan = an empty plan"));
    for (float v : out) CHECK(v == kPoison);
  }
}

TEST_CASE("linear layers read strided activations and write outputs with a row stride", "[cpu][linear][float]") {
  std::mt19937 rng(23);
  const std::int64_t m = 14, n = 37, k = 90;
  const Eigen::MatrixXf x = Eigen::MatrixXf::Random(m, k);  // column-major: strides {1, m}
  std::vector<float> x_rows(static_cast<std::size_t>(m * k));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) x_rows[static_cast<std::size_t>(r * k + c)] = x(r, c);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  const auto ref = shrink::test::reference_product(x_rows, w, m, n, k);
  const PackedWeight<float> packed = pack_weight(TensorView<const float>(w.data(), Shape{n, k}));
  at_each_level([&](SimdLevel) {
    const std::int64_t ld = n + 3;
    std::vector<float> out(static_cast<std::size_t>(m * ld), kPoison);
    linear_f32(as_view(x), packed, TensorView<float>(out.data(), Shape{m, n}, Strides{ld, 1}));
    shrink::test::check_against_reference(out, ld, ref, m, n, k, {}, {}, Activation::none);
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = n; c < ld; ++c) CHECK(out[static_cast<std::size_t>(r * ld + c)] == kPoison);
  });
}

TEST_CASE("weight-only linear layers reject bad input and leave the output untouched", "[cpu][linear][float][errors]") {
  std::mt19937 rng(24);
  const std::int64_t m = 4, n = 6, k = 10;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  const TensorView<const float> xv(x.data(), Shape{m, k});
  const PackedWeight<float> packed = pack_weight(TensorView<const float>(w.data(), Shape{n, k}));
  std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
  const TensorView<float> ov(out.data(), Shape{m, n});
  auto expect_rejected = [&](auto&& call, const std::string& fragment) {
    std::fill(out.begin(), out.end(), kPoison);
    shrink::test::require_error_mentioning(call, fragment);
    CHECK(shrink::test::all_poison(out));
  };

  SECTION("K mismatch") {
    expect_rejected([&] { linear_f32(TensorView<const float>(x.data(), Shape{m, k - 1}), packed, ov); }, "x.shape");
  }
  SECTION("output shape") {
    expect_rejected([&] { linear_f32(xv, packed, TensorView<float>(out.data(), Shape{m, n - 1})); }, "out.shape");
  }
  SECTION("empty activations") {
    expect_rejected(
        [&] {
          linear_f32(TensorView<const float>(x.data(), Shape{0, k}), packed,
                     TensorView<float>(out.data(), Shape{0, n}));
        },
        "x.shape");
  }
  SECTION("a null bias of nonzero size") {
    Epilogue e;
    e.bias = TensorView<const float>(nullptr, Shape{n});
    expect_rejected([&] { linear_f32(xv, packed, ov, e); }, "epilogue.bias");
  }
  SECTION("bias of the wrong size") {
    const std::vector<float> bias(static_cast<std::size_t>(n - 1), 0.0f);
    expect_rejected(
        [&] { linear_f32(xv, packed, ov, Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n - 1}))); },
        "epilogue.bias.shape");
  }
  SECTION("output overlapping the activations") {
    std::vector<float> shared(static_cast<std::size_t>(m * k), 1.0f);
    const std::vector<float> before = shared;
    shrink::test::require_error_mentioning(
        [&] {
          linear_f32(TensorView<const float>(shared.data(), Shape{m, k}), packed,
                     TensorView<float>(shared.data() + 2, Shape{m, n}));
        },
        "memory overlapping x");
    CHECK(shared == before);
  }
  SECTION("an inconsistent packed weight") {
    PackedWeight<float> broken = packed;
    broken.panels.pop_back();
    expect_rejected([&] { linear_f32(xv, broken, ov); }, "PackedWeight");
  }
  SECTION("a CUDA view") {
    expect_rejected(
        [&] {
          linear_f32(TensorView<const float>(x.data(), Shape{m, k}, Device::cuda()), packed, ov);
        },
        "x");
  }
  SECTION("int8 weights: uint8, affine with a zero point, per channel on axis 1") {
    const auto q = quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                                   quant::QuantScheme::per_tensor(quant::QuantDtype::uint8, quant::Symmetry::affine));
    expect_rejected([&] { linear_weight_only(xv, q, ov); }, "w.scheme.dtype");
    auto qa = quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                              quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::affine));
    qa.qparams.zero_point = {5};
    expect_rejected([&] { linear_weight_only(xv, qa, ov); }, "w.qparams.zero_point[0]");
    const auto q1 =
        quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                        quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 1));
    expect_rejected([&] { linear_weight_only(xv, q1, ov); }, "w.scheme.axis");
  }
  SECTION("a 1-D weight") {
    expect_rejected([&] { pack_weight(TensorView<const float>(w.data(), Shape{n * k})); }, "w.shape");
  }
  SECTION(
      "4-bit weights: the wrong pack function, per channel along axis 1, groups along axis 0, an inconsistent "
      "pack") {
    const auto w4 = shrink::test::normal_values(static_cast<std::size_t>(n * 64), rng);
    const TensorView<const float> x4v(w4.data(), Shape{m, 64});  // any [M, 64] activations
    const TensorView<const float> w4v(w4.data(), Shape{n, 64});
    using quant::QuantDtype;
    using quant::QuantScheme;
    using quant::Symmetry;
    // Each pack function names the one that takes the weight it refuses.
    const auto q4 = quant::quantize(w4v, QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 32));
    expect_rejected([&] { pack_weight(q4); }, "shrink::cpu::pack_weight_int4");
    const auto q8 = quant::quantize(w4v, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
    expect_rejected([&] { pack_weight_int4(q8); }, "shrink::cpu::pack_weight)");
    const auto q8a = quant::quantize(w4v, QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0));
    expect_rejected([&] { linear_weight_only(x4v, q8a, ov); }, "shrink::cpu::pack_weight_int4");
    expect_rejected(
        [&] {
          linear_weight_only(x4v, quant::quantize(w4v, QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine)),
                             ov);
        },
        "int4 / uint4 (symmetric or affine");
    auto qa = quant::quantize(w4v, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 32));
    qa.qparams.zero_point[3] = 8;  // outside [-8, 7]
    expect_rejected([&] { linear_weight_only(x4v, qa, ov); }, "qparams.zero_point[3]");
    expect_rejected(
        [&] {
          linear_weight_only(x4v, quant::quantize(w4v, QuantScheme::per_channel(QuantDtype::int4, Symmetry::affine, 1)),
                             ov);
        },
        "w.scheme.axis");
    const std::vector<float> tall(static_cast<std::size_t>(64 * 64), 0.5f);
    expect_rejected(
        [&] {
          pack_weight_int4(quant::quantize(TensorView<const float>(tall.data(), Shape{64, 64}),
                                           QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 0, 32)));
        },
        "w.scheme.axis");
    PackedInt4Weight broken =
        pack_weight_int4(quant::quantize(w4v, QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 32)));
    broken.scales.pop_back();
    expect_rejected([&] { linear_weight_only(x4v, broken, ov); }, "PackedInt4Weight");
    PackedInt4Weight broken_zeros =
        pack_weight_int4(quant::quantize(w4v, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 32)));
    REQUIRE(broken_zeros.affine());
    broken_zeros.zero_points.pop_back();
    expect_rejected([&] { linear_weight_only(x4v, broken_zeros, ov); }, "PackedInt4Weight");
    expect_rejected(
        [&] {
          linear_weight_only(xv,
                             pack_weight_int4(quant::quantize(
                                 w4v, QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 32))),
                             ov);
        },
        "x.shape");
  }
  SECTION("half activations: K mismatch, output shape, output overlapping the activations") {
    std::vector<half> xh(static_cast<std::size_t>(m * k), half(1.0f));
    std::vector<half> oh(static_cast<std::size_t>(m * n), half(kPoison));
    const PackedWeight<half> ph = pack_weight_as<half>(TensorView<const float>(w.data(), Shape{n, k}));
    auto untouched = [&] {
      for (half v : oh)
        if (v.to_bits() != half(kPoison).to_bits()) return false;
      return true;
    };
    shrink::test::require_error_mentioning(
        [&] {
          linear_weight_only(TensorView<const half>(xh.data(), Shape{m, k - 1}), ph,
                             TensorView<half>(oh.data(), Shape{m, n}));
        },
        "x.shape");
    shrink::test::require_error_mentioning(
        [&] {
          linear_weight_only(TensorView<const half>(xh.data(), Shape{m, k}), ph,
                             TensorView<half>(oh.data(), Shape{m, n + 1}));
        },
        "out.shape");
    CHECK(untouched());
    shrink::test::require_error_mentioning(
        [&] {
          linear_weight_only(TensorView<const half>(xh.data(), Shape{m, k}), ph,
                             TensorView<half>(xh.data() + 1, Shape{m, n}));
        },
        "memory overlapping x");
  }
}

TEST_CASE("linear_weight_only reads GPTQ's int4/uint4 weights (2-4 bits, per group and per channel) unchanged",
          "[cpu][linear][int4][gptq]") {
  std::mt19937 rng(31);
  const std::int64_t m = 5, n = 24, k = 128;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.05f);
  // H = 2/t Σ aᵀa of correlated calibration rows.
  const auto calibration = shrink::test::normal_values(static_cast<std::size_t>(256 * k), rng);
  quant::HessianObserver observer;
  observer.observe(TensorView<const float>(calibration.data(), Shape{256, k}));
  const quant::Hessian h = observer.hessian();
  for (int bits : {2, 3, 4})
    for (quant::Symmetry sym : {quant::Symmetry::symmetric, quant::Symmetry::affine})
      for (std::int64_t group : {std::int64_t{0}, std::int64_t{32}, std::int64_t{64}}) {
        INFO("bits " << bits << " " << quant::to_string(sym) << " group " << group);
        quant::GptqOptions o;
        o.bits = bits;
        o.symmetry = sym;
        o.group_size = group;
        const quant::QuantizedTensor q = quant::gptq_quantize(TensorView<const float>(w.data(), Shape{n, k}), h, o);
        const std::vector<float> dequantized = quant::dequantize(q);
        const auto ref = shrink::test::reference_product(x, dequantized, m, n, k);
        std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
        linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), q,
                           TensorView<float>(out.data(), Shape{m, n}), Epilogue{});
        shrink::test::check_against_reference(out, n, ref, m, n, k, {}, {}, Activation::none);
      }
}
