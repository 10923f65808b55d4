// Float-activation linear layers over packed weights: float (linear_f32, and Eigen's linear_f32_eigen), half,
// bfloat16 and int8 weight-only, against double references at every SIMD level; bad input leaves out untouched.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "linear_reference.hpp"
#include "shrink/cpu/linear_f32.hpp"
#include "shrink/cpu/linear_weight_only.hpp"
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
      const LinearEpilogue e = LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
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
                           LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu));
        shrink::test::check_against_reference(out, n, ref, m, n, k, scales, bias, Activation::gelu);
      });
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), q, bias.data(),
                         TensorView<float>(a.data(), Shape{m, n}));
      linear_weight_only(TensorView<const float>(x.data(), Shape{m, k}), packed,
                         TensorView<float>(b.data(), Shape{m, n}),
                         LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n})));
      CHECK(a == b);
    }
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
    LinearEpilogue e;
    e.bias = TensorView<const float>(nullptr, Shape{n});
    expect_rejected([&] { linear_f32(xv, packed, ov, e); }, "epilogue.bias");
  }
  SECTION("bias of the wrong size") {
    const std::vector<float> bias(static_cast<std::size_t>(n - 1), 0.0f);
    expect_rejected(
        [&] {
          linear_f32(xv, packed, ov, LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n - 1})));
        },
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
}
