// INT8 linear layers: exact int32 products at every SIMD level, the dequantizing epilogue, dynamic per-token
// activations, and bad input that leaves the output untouched.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/core/half.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/quant/quantize.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;
using shrink::test::random_int8;

namespace {

std::vector<std::int64_t> reference_s8s8(const std::vector<std::int8_t>& x, const std::vector<std::int8_t>& w,
                                         std::int64_t m_total, std::int64_t n_total, std::int64_t k_total) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(m_total * n_total));
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t n = 0; n < n_total; ++n) {
      std::int64_t s = 0;
      for (std::int64_t k = 0; k < k_total; ++k)
        s += static_cast<std::int64_t>(x[static_cast<std::size_t>(m * k_total + k)]) *
             w[static_cast<std::size_t>(n * k_total + k)];
      r[static_cast<std::size_t>(m * n_total + n)] = s;
    }
  return r;
}

// A QuantizedTensor from raw bytes, with the given scheme and parameters.
quant::QuantizedTensor make_quantized(const ByteBuffer& bytes, Shape shape, quant::QuantScheme scheme,
                                      std::vector<float> scales, std::vector<std::int32_t> zero_points) {
  quant::QuantizedTensor q;
  q.data = bytes;
  q.shape = shape;
  q.scheme = scheme;
  q.qparams.scale = std::move(scales);
  q.qparams.zero_point = std::move(zero_points);
  q.qparams.shape = scheme.granularity == quant::Granularity::per_tensor ? Shape{} : Shape{shape.values[0]};
  return q;
}

ByteBuffer as_bytes(const std::vector<std::int8_t>& v) { return ByteBuffer(v.begin(), v.end()); }

}  // namespace

TEST_CASE("gemm_s8s8s32 is exact on random int8 at every SIMD level, odd shapes included", "[cpu][linear][int8]") {
  std::mt19937 rng(3);
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1},   {1, 7, 1},    {2, 1, 5},    {3, 8, 64},    {4, 9, 65},
      {5, 13, 77}, {17, 9, 300}, {7, 33, 129}, {1, 16, 1000}, {6, 5, 4099}};
  for (auto [m, n, k] : shapes) {
    INFO("M " << m << " N " << n << " K " << k);
    const auto x = random_int8(static_cast<std::size_t>(m * k), rng);
    const auto w = random_int8(static_cast<std::size_t>(n * k), rng);
    const auto expected = reference_s8s8(x, w, m, n, k);
    at_each_level([&](SimdLevel) {
      std::vector<std::int32_t> acc(static_cast<std::size_t>(m * n), 12345);
      gemm_s8s8s32(TensorView<const std::int8_t>(x.data(), Shape{m, k}),
                   TensorView<const std::int8_t>(w.data(), Shape{n, k}),
                   TensorView<std::int32_t>(acc.data(), Shape{m, n}));
      for (std::size_t i = 0; i < acc.size(); ++i) REQUIRE(acc[i] == expected[i]);
    });
  }
}

TEST_CASE("gemm_s8s8s32 at the int32 limit: -128 · -128 over the largest K, and mixed extremes",
          "[cpu][linear][int8]") {
  const std::int64_t k = int8_max_k(128);
  REQUIRE(k == 131071);
  const std::vector<std::int8_t> low(static_cast<std::size_t>(2 * k), -128);
  std::vector<std::int8_t> w(static_cast<std::size_t>(3 * k), -128);
  for (std::int64_t i = 0; i < k; ++i) w[static_cast<std::size_t>(k + i)] = 127;  // row 1: all 127
  for (std::int64_t i = 0; i < k; ++i)
    w[static_cast<std::size_t>(2 * k + i)] = i % 2 ? 127 : -128;  // row 2: alternating
  const auto expected = reference_s8s8(low, w, 2, 3, k);
  REQUIRE(expected[0] == 131071LL * 16384);  // 2^31 − 2^14: the largest sum that can occur
  at_each_level([&](SimdLevel) {
    std::vector<std::int32_t> acc(6, 0);
    gemm_s8s8s32(TensorView<const std::int8_t>(low.data(), Shape{2, k}),
                 TensorView<const std::int8_t>(w.data(), Shape{3, k}),
                 TensorView<std::int32_t>(acc.data(), Shape{2, 3}));
    for (std::size_t i = 0; i < acc.size(); ++i) CHECK(acc[i] == expected[i]);
  });
  std::vector<std::int32_t> acc(6, 7);
  const std::vector<std::int8_t> longer(static_cast<std::size_t>(k + 1), 1);
  CHECK_FALSE(can_implement_gemm_s8s8s32(TensorView<const std::int8_t>(longer.data(), Shape{1, k + 1}),
                                         TensorView<const std::int8_t>(longer.data(), Shape{1, k + 1}),
                                         TensorView<std::int32_t>(acc.data(), Shape{1, 1})));
  shrink::test::require_error_mentioning(
      [&] {
        gemm_s8s8s32(TensorView<const std::int8_t>(longer.data(), Shape{1, k + 1}),
                     TensorView<const std::int8_t>(longer.data(), Shape{1, k + 1}),
                     TensorView<std::int32_t>(acc.data(), Shape{1, 1}));
      },
      "K ≤ 131071");
  CHECK(acc[0] == 7);
}

TEST_CASE("gemm_s8s8s32 reads strided operands", "[cpu][linear][int8]") {
  std::mt19937 rng(5);
  const std::int64_t m = 5, n = 6, k = 70;
  const auto x = random_int8(static_cast<std::size_t>(m * k), rng);
  const auto w = random_int8(static_cast<std::size_t>(n * k), rng);
  const auto expected = reference_s8s8(x, w, m, n, k);
  // The same values column-major: element (r, c) at c * rows + r.
  std::vector<std::int8_t> xt(x.size()), wt(w.size());
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      xt[static_cast<std::size_t>(c * m + r)] = x[static_cast<std::size_t>(r * k + c)];
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      wt[static_cast<std::size_t>(c * n + r)] = w[static_cast<std::size_t>(r * k + c)];
  std::vector<std::int32_t> acc(static_cast<std::size_t>(m * 8), -1);  // row stride 8 > N
  gemm_s8s8s32(TensorView<const std::int8_t>(xt.data(), Shape{m, k}, Strides{1, m}),
               TensorView<const std::int8_t>(wt.data(), Shape{n, k}, Strides{1, n}),
               TensorView<std::int32_t>(acc.data(), Shape{m, n}, Strides{8, 1}));
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      CHECK(acc[static_cast<std::size_t>(r * 8 + c)] == expected[static_cast<std::size_t>(r * n + c)]);
  CHECK(acc[6] == -1);  // outside the view: untouched
}

TEST_CASE("linear_int8 dequantizes exactly: per-tensor, per-token, affine uint8 and int8 activations",
          "[cpu][linear][int8]") {
  std::mt19937 rng(11);
  const std::int64_t m = 7, n = 19, k = 133;
  const auto w_values = random_int8(static_cast<std::size_t>(n * k), rng);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  std::vector<float> w_scales(static_cast<std::size_t>(n));
  for (float& s : w_scales) s = scale(rng);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (float& b : bias) b = scale(rng) * 100 - 2.5f;

  struct Case {
    const char* name;
    quant::QuantDtype dtype;
    quant::Symmetry symmetry;
    bool per_token;
  };
  const Case cases[] = {{"int8 symmetric per tensor", quant::QuantDtype::int8, quant::Symmetry::symmetric, false},
                        {"int8 symmetric per token", quant::QuantDtype::int8, quant::Symmetry::symmetric, true},
                        {"int8 affine per token", quant::QuantDtype::int8, quant::Symmetry::affine, true},
                        {"uint8 affine per tensor", quant::QuantDtype::uint8, quant::Symmetry::affine, false},
                        {"uint8 affine per token", quant::QuantDtype::uint8, quant::Symmetry::affine, true}};
  for (const Case& c : cases) {
    for (bool per_channel_weight : {false, true}) {
      INFO(c.name << (per_channel_weight ? ", per-channel weight" : ", per-tensor weight"));
      const bool is_signed = c.dtype == quant::QuantDtype::int8;
      const auto x_bytes = random_int8(static_cast<std::size_t>(m * k), rng);
      const std::int64_t params = c.per_token ? m : 1;
      std::vector<float> x_scales(static_cast<std::size_t>(params));
      std::vector<std::int32_t> x_zero(static_cast<std::size_t>(params), 0);
      std::uniform_int_distribution<int> zp(is_signed ? -128 : 0, is_signed ? 127 : 255);
      for (std::int64_t i = 0; i < params; ++i) {
        x_scales[static_cast<std::size_t>(i)] = scale(rng);
        if (c.symmetry == quant::Symmetry::affine)
          x_zero[static_cast<std::size_t>(i)] = zp(rng);
        else if (!is_signed)
          x_zero[static_cast<std::size_t>(i)] = 128;
      }
      const auto x_scheme = c.per_token ? quant::QuantScheme::per_channel(c.dtype, c.symmetry, 0)
                                        : quant::QuantScheme::per_tensor(c.dtype, c.symmetry);
      const auto x = make_quantized(as_bytes(x_bytes), Shape{m, k}, x_scheme, x_scales, x_zero);
      const auto w_scheme =
          per_channel_weight ? quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0)
                             : quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
      const std::vector<float> ws = per_channel_weight ? w_scales : std::vector<float>{w_scales[0]};
      const auto w =
          make_quantized(as_bytes(w_values), Shape{n, k}, w_scheme, ws, std::vector<std::int32_t>(ws.size(), 0));
      const PackedInt8Weight packed = pack_int8_weight(w);

      for (Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu}) {
        for (bool with_bias : {false, true}) {
          at_each_level([&](SimdLevel) {
            std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
            Epilogue e;
            if (with_bias) e.bias = TensorView<const float>(bias.data(), Shape{n});
            e.activation = act;
            linear_int8(x, packed, TensorView<float>(out.data(), Shape{m, n}), e);
            for (std::int64_t r = 0; r < m; ++r)
              for (std::int64_t col = 0; col < n; ++col) {
                std::int64_t acc = 0;
                const std::int32_t zx = x_zero[static_cast<std::size_t>(c.per_token ? r : 0)];
                for (std::int64_t j = 0; j < k; ++j)
                  acc += (static_cast<std::int64_t>(x.value(r * k + j)) - zx) *
                         w_values[static_cast<std::size_t>(col * k + j)];
                const double sx = x_scales[static_cast<std::size_t>(c.per_token ? r : 0)];
                const double sw = ws[per_channel_weight ? static_cast<std::size_t>(col) : 0];
                const double b = with_bias ? bias[static_cast<std::size_t>(col)] : 0.0;
                const double pre = sx * sw * static_cast<double>(acc) + b;
                const double expected = shrink::test::activate_reference(pre, act);
                // float: acc converted (exact below 2^24), one product of scales, one multiply-add, the activation.
                const double bound = 1e-6 * (std::fabs(sx * sw * static_cast<double>(acc)) + std::fabs(b)) + 1e-12;
                REQUIRE(std::fabs(out[static_cast<std::size_t>(r * n + col)] - expected) <= bound);
              }
          });
        }
      }
      // The overload with a raw bias pointer and an unpacked weight gives the same bits.
      std::vector<float> a(static_cast<std::size_t>(m * n)), b(static_cast<std::size_t>(m * n));
      linear_int8(x, w, bias.data(), TensorView<float>(a.data(), Shape{m, n}), Activation::relu);
      linear_int8(x, packed, TensorView<float>(b.data(), Shape{m, n}),
                  Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu));
      CHECK(a == b);
    }
  }
}

TEST_CASE("quantize_rows_absmax quantizes each row symmetrically by its largest magnitude", "[cpu][linear][int8]") {
  std::mt19937 rng(2);
  const std::int64_t m = 5, k = 300;
  auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  for (std::int64_t i = 0; i < k; ++i) x[static_cast<std::size_t>(3 * k + i)] = 0.0f;  // an all-zero row
  const auto q = quantize_rows_absmax(TensorView<const float>(x.data(), Shape{m, k}));
  REQUIRE(q.scheme.granularity == quant::Granularity::per_channel);
  REQUIRE(q.scheme.dtype == quant::QuantDtype::int8);
  REQUIRE(q.qparams.scale.size() == static_cast<std::size_t>(m));
  for (std::int64_t r = 0; r < m; ++r) {
    float amax = 0;
    for (std::int64_t i = 0; i < k; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<std::size_t>(r * k + i)]));
    CHECK(q.qparams.scale[static_cast<std::size_t>(r)] == std::fmax(amax / 127.5f, FLT_EPSILON));
    CHECK(q.qparams.zero_point[static_cast<std::size_t>(r)] == 0);
  }
  x[7] = std::nanf("");
  shrink::test::require_error_mentioning(
      [&] {
        quantize_rows_absmax(TensorView<const float>(x.data(), Shape{m, k}));
      },
      "x");
}

TEST_CASE("linear_int8_dynamic: W8A8 close to the float product on realistic data", "[cpu][linear][int8]") {
  std::mt19937 rng(8);
  const std::int64_t m = 9, n = 40, k = 512;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng, 0.02f);
  const auto wq =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  const PackedInt8Weight packed = pack_int8_weight(wq);
  std::vector<float> out(static_cast<std::size_t>(m * n)), out2(out.size());
  linear_int8_dynamic(TensorView<const float>(x.data(), Shape{m, k}), packed,
                      TensorView<float>(out.data(), Shape{m, n}));
  linear_int8(quantize_rows_absmax(TensorView<const float>(x.data(), Shape{m, k})), packed,
              TensorView<float>(out2.data(), Shape{m, n}));
  CHECK(out == out2);
  const auto ref = shrink::test::reference_product(x, w, m, n, k);
  double signal = 0, noise = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    signal += ref.value[i] * ref.value[i];
    noise += (out[i] - ref.value[i]) * (out[i] - ref.value[i]);
  }
  CHECK(10 * std::log10(signal / noise) > 30.0);  // two 8-bit roundings: about 35-40 dB on normal data
}

TEST_CASE("pack_int8_weight pads rows and keeps row sums and scales", "[cpu][linear][int8]") {
  std::mt19937 rng(4);
  const std::int64_t n = 11, k = 70;
  const auto values = random_int8(static_cast<std::size_t>(n * k), rng);
  const auto w =
      make_quantized(as_bytes(values), Shape{n, k},
                     quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric), {0.5f}, {0});
  const PackedInt8Weight p = pack_int8_weight(w);
  CHECK(p.rows == n);
  CHECK(p.cols == k);
  CHECK(p.row_stride == 128);
  CHECK(p.data.size() == 16u * 128u);
  CHECK(p.scales == std::vector<float>(static_cast<std::size_t>(n), 0.5f));
  CHECK_FALSE(p.per_channel);
  CHECK(p.storage_bytes() == n * k + 4);
  for (std::int64_t r = 0; r < 16; ++r) {
    std::int32_t sum = 0;
    for (std::int64_t c = 0; c < 128; ++c) {
      const std::int8_t v = p.data[static_cast<std::size_t>(r * 128 + c)];
      CHECK(v == (r < n && c < k ? values[static_cast<std::size_t>(r * k + c)] : 0));
      sum += v;
    }
    CHECK(p.row_sums[static_cast<std::size_t>(r)] == sum);
  }
}

TEST_CASE("linear_int8 rejects bad input and leaves the output untouched", "[cpu][linear][int8][errors]") {
  std::mt19937 rng(6);
  const std::int64_t m = 3, n = 5, k = 20;
  const auto sym = quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
  const auto x =
      make_quantized(as_bytes(random_int8(static_cast<std::size_t>(m * k), rng)), Shape{m, k}, sym, {0.1f}, {0});
  const auto w =
      make_quantized(as_bytes(random_int8(static_cast<std::size_t>(n * k), rng)), Shape{n, k}, sym, {0.1f}, {0});
  std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
  std::vector<float> bias(static_cast<std::size_t>(n + 1), 0.5f);
  const TensorView<float> out_view(out.data(), Shape{m, n});

  auto expect_rejected = [&](auto&& call, const std::string& fragment) {
    std::fill(out.begin(), out.end(), kPoison);
    shrink::test::require_error_mentioning(call, fragment);
    CHECK(shrink::test::all_poison(out));
  };

  SECTION("K mismatch") {
    const auto w_short = make_quantized(as_bytes(random_int8(static_cast<std::size_t>(n * (k - 1)), rng)),
                                        Shape{n, k - 1}, sym, {0.1f}, {0});
    expect_rejected([&] { linear_int8(x, w_short, out_view); }, "x.shape");
  }
  SECTION("output shape") {
    expect_rejected([&] { linear_int8(x, w, TensorView<float>(out.data(), Shape{n, m})); }, "out.shape");
  }
  SECTION("output with strided columns") {
    expect_rejected([&] { linear_int8(x, w, TensorView<float>(out.data(), Shape{m, 2}, Strides{5, 2})); }, "out");
  }
  SECTION("weight dtype uint8") {
    auto w_u8 = w;
    w_u8.scheme.dtype = quant::QuantDtype::uint8;
    expect_rejected([&] { linear_int8(x, w_u8, out_view); }, "w.scheme.dtype");
  }
  SECTION("activation dtype int4") {
    auto x4 = x;
    x4.scheme.dtype = quant::QuantDtype::int4;
    expect_rejected([&] { linear_int8(x4, w, out_view); }, "x.scheme.dtype");
  }
  SECTION("affine weight with a nonzero zero point") {
    auto wa = w;
    wa.scheme.symmetry = quant::Symmetry::affine;
    wa.qparams.zero_point = {3};
    expect_rejected([&] { linear_int8(x, wa, out_view); }, "w.qparams.zero_point[0]");
  }
  SECTION("per-channel along axis 1") {
    auto w1 = make_quantized(w.data, Shape{n, k},
                             quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 1),
                             std::vector<float>(static_cast<std::size_t>(k), 0.1f),
                             std::vector<std::int32_t>(static_cast<std::size_t>(k), 0));
    expect_rejected([&] { linear_int8(x, w1, out_view); }, "w.scheme.axis");
  }
  SECTION("per-group activations") {
    auto xg = x;
    xg.scheme = quant::QuantScheme::per_group(quant::QuantDtype::int8, quant::Symmetry::symmetric, 1, 4);
    expect_rejected([&] { linear_int8(xg, w, out_view); }, "x.scheme.granularity");
  }
  SECTION("a scale that is not positive") {
    auto xs = x;
    xs.qparams.scale = {0.0f};
    expect_rejected([&] { linear_int8(xs, w, out_view); }, "x.qparams.scale[0]");
  }
  SECTION("data shorter than the shape") {
    auto xd = x;
    xd.data.pop_back();
    expect_rejected([&] { linear_int8(xd, w, out_view); }, "x.data.size()");
  }
  SECTION("empty activations") {
    const auto x0 = make_quantized({}, Shape{0, k}, sym, {0.1f}, {0});
    expect_rejected([&] { linear_int8(x0, w, TensorView<float>(out.data(), Shape{0, n})); }, "x.shape");
  }
  SECTION("bias of the wrong size") {
    Epilogue e;
    e.bias = TensorView<const float>(bias.data(), Shape{n + 1});
    expect_rejected([&] { linear_int8(x, w, out_view, e); }, "epilogue.bias.shape");
  }
  SECTION("bias with NaN") {
    bias[2] = std::nanf("");
    expect_rejected([&] { linear_int8(x, w, bias.data(), out_view); }, "epilogue.bias[2]");
  }
  SECTION("output overlapping the bias") {
    std::vector<float> shared(static_cast<std::size_t>(m * n + n), kPoison);
    Epilogue e;
    e.bias = TensorView<const float>(shared.data() + m * n - 2, Shape{n});
    std::fill(shared.begin() + m * n - 2, shared.end(), 0.0f);
    shrink::test::require_error_mentioning(
        [&] {
          linear_int8(x, w, TensorView<float>(shared.data(), Shape{m, n}), e);
        },
        "overlapping epilogue.bias");
    for (std::int64_t i = 0; i < m * n - 2; ++i) CHECK(shared[static_cast<std::size_t>(i)] == kPoison);
  }
  SECTION("an unknown activation") {
    Epilogue e;
    e.activation = static_cast<Activation>(9);
    expect_rejected([&] { linear_int8(x, w, out_view, e); }, "epilogue.activation");
  }
  SECTION("K too large for affine uint8 activations") {
    const std::int64_t big = int8_max_k(255) + 1;
    const auto xu =
        make_quantized(ByteBuffer(static_cast<std::size_t>(big), 1), Shape{1, big},
                       quant::QuantScheme::per_tensor(quant::QuantDtype::uint8, quant::Symmetry::affine), {0.1f}, {3});
    const auto wb = make_quantized(ByteBuffer(static_cast<std::size_t>(big), 1), Shape{1, big}, sym, {0.1f}, {0});
    std::vector<float> one(1, kPoison);
    const Support s = can_implement_linear_int8(xu, wb, TensorView<float>(one.data(), Shape{1, 1}));
    CHECK_FALSE(s);
    CHECK(s.reason().find("65793") != std::string::npos);
    shrink::test::require_error_mentioning(
        [&] {
          linear_int8(xu, wb, TensorView<float>(one.data(), Shape{1, 1}));
        },
        "65793");
    CHECK(one[0] == kPoison);
  }
  SECTION("an inconsistent packed weight") {
    PackedInt8Weight p = pack_int8_weight(w);
    p.row_sums.pop_back();
    expect_rejected([&] { linear_int8(x, p, out_view); }, "PackedInt8Weight");
  }
  SECTION("dynamic activations with NaN") {
    std::vector<float> xf(static_cast<std::size_t>(m * k), 1.0f);
    xf[5] = std::nanf("");
    const PackedInt8Weight p = pack_int8_weight(w);
    expect_rejected([&] { linear_int8_dynamic(TensorView<const float>(xf.data(), Shape{m, k}), p, out_view); }, "x");
  }
  SECTION("gemm_s8s8s32 with the output over its input") {
    std::vector<std::int32_t> buffer(static_cast<std::size_t>(m * k), 0);
    const auto* bytes = reinterpret_cast<const std::int8_t*>(buffer.data());
    shrink::test::require_error_mentioning(
        [&] {
          gemm_s8s8s32(TensorView<const std::int8_t>(bytes, Shape{m, k}),
                       TensorView<const std::int8_t>(bytes, Shape{m, k}),
                       TensorView<std::int32_t>(buffer.data(), Shape{m, m}));
        },
        "acc = memory overlapping x");
  }
}

namespace {

// One linear_int8 call writing Out into a poisoned output.
template <class Out>
std::vector<Out> linear_as(const quant::QuantizedTensor& x, const PackedInt8Weight& w, const Epilogue& e,
                           std::int64_t m, std::int64_t n) {
  const Out poison = std::is_same<Out, std::int8_t>::value ? Out(99) : Out(kPoison);
  std::vector<Out> out(static_cast<std::size_t>(m * n), poison);
  linear_int8(x, w, TensorView<Out>(out.data(), Shape{m, n}), e);
  return out;
}

}  // namespace

TEST_CASE("linear_int8 writes half, bfloat16 and requantized int8: the float epilogue value, rounded",
          "[cpu][linear][int8]") {
  std::mt19937 rng(21);
  const std::int64_t m = 6, n = 27, k = 200;
  const auto x = make_quantized(as_bytes(random_int8(static_cast<std::size_t>(m * k), rng)), Shape{m, k},
                                quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0),
                                {0.011f, 0.02f, 0.004f, 0.03f, 0.017f, 0.009f}, std::vector<std::int32_t>(6, 0));
  std::uniform_real_distribution<float> scale(0.0005f, 0.003f), offset(-1.5f, 1.5f);
  std::vector<float> w_scales(static_cast<std::size_t>(n)), bias(static_cast<std::size_t>(n));
  for (float& s : w_scales) s = scale(rng);
  for (float& b : bias) b = offset(rng);
  const auto w = make_quantized(as_bytes(random_int8(static_cast<std::size_t>(n * k), rng)), Shape{n, k},
                                quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0),
                                w_scales, std::vector<std::int32_t>(static_cast<std::size_t>(n), 0));
  const PackedInt8Weight packed = pack_int8_weight(w);

  for (Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu}) {
    INFO("activation " << to_string(act));
    Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
    e.out_scale = 0.0125f;  // |v| up to ~3: int8 codes up to ~240 clamp at the ends, the rest spread
    at_each_level([&](SimdLevel) {
      const auto f = linear_as<float>(x, packed, e, m, n);
      const auto h = linear_as<half>(x, packed, e, m, n);
      const auto b = linear_as<bfloat16>(x, packed, e, m, n);
      const auto q = linear_as<std::int8_t>(x, packed, e, m, n);
      int clamped = 0;
      for (std::size_t i = 0; i < f.size(); ++i) {
        REQUIRE(h[i].to_bits() == half(f[i]).to_bits());
        REQUIRE(b[i].to_bits() == bfloat16(f[i]).to_bits());
        const float scaled = f[i] * (1.0f / e.out_scale);
        const float expected = std::fmin(std::fmax(std::nearbyint(scaled), -128.0f), 127.0f);
        REQUIRE(q[i] == static_cast<std::int8_t>(expected));
        clamped += expected == 127.0f || expected == -128.0f;
      }
      CHECK(clamped < static_cast<int>(f.size()) / 2);
    });
  }
}

TEST_CASE("linear_int8 int8 output rounds half to even and clamps, as quant::quantize", "[cpu][linear][int8]") {
  // x = one row [1, 16] of 1s, w rows of j ones: acc = j; scales 1, out_scale 2 → v = j, q = nearbyint(j / 2).
  const std::int64_t n = 8, k = 16;
  const auto sym = quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
  std::vector<std::int8_t> wv(static_cast<std::size_t>(n * k), 0);
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < j; ++i) wv[static_cast<std::size_t>(j * k + i)] = 1;
  const auto x = make_quantized(as_bytes(std::vector<std::int8_t>(k, 1)), Shape{1, k}, sym, {1.0f}, {0});
  const auto w = make_quantized(as_bytes(wv), Shape{n, k}, sym, {1.0f}, {0});
  Epilogue e;
  e.out_scale = 2.0f;
  std::vector<std::int8_t> q(static_cast<std::size_t>(n), 99);
  linear_int8(x, w, TensorView<std::int8_t>(q.data(), Shape{1, n}), e);
  CHECK(q == std::vector<std::int8_t>{0, 0, 1, 2, 2, 2, 3, 4});  // 0.5 → 0, 1.5 → 2, 2.5 → 2, 3.5 → 4
  e.out_scale = 0.01f;                                           // v / 0.01 far past 127
  linear_int8(x, w, TensorView<std::int8_t>(q.data(), Shape{1, n}), e);
  CHECK(q == std::vector<std::int8_t>{0, 100, 127, 127, 127, 127, 127, 127});
  // The quant::quantize of the float outputs gives the same codes.
  std::vector<float> f(static_cast<std::size_t>(n));
  linear_int8(x, w, TensorView<float>(f.data(), Shape{1, n}), e);
  const auto reference =
      quant::quantize(TensorView<const float>(f.data(), Shape{1, n}), sym, quant::QParams{{0.01f}, {0}, Shape{}, {}});
  for (std::int64_t j = 0; j < n; ++j)
    CHECK(q[static_cast<std::size_t>(j)] == static_cast<std::int8_t>(reference.data[static_cast<std::size_t>(j)]));
}

TEST_CASE("linear_int8 int8 output needs a usable out_scale and writes nothing otherwise",
          "[cpu][linear][int8][errors]") {
  std::mt19937 rng(23);
  const std::int64_t m = 2, n = 3, k = 16;
  const auto sym = quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
  const auto x =
      make_quantized(as_bytes(random_int8(static_cast<std::size_t>(m * k), rng)), Shape{m, k}, sym, {0.1f}, {0});
  const auto w =
      make_quantized(as_bytes(random_int8(static_cast<std::size_t>(n * k), rng)), Shape{n, k}, sym, {0.1f}, {0});
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::nanf(""), 1e-39f}) {
    INFO("out_scale " << bad);
    Epilogue e;
    e.out_scale = bad;
    std::vector<std::int8_t> q(static_cast<std::size_t>(m * n), 77);
    CHECK_FALSE(can_implement_linear_int8(x, w, TensorView<std::int8_t>(q.data(), Shape{m, n}), e));
    shrink::test::require_error_mentioning(
        [&] {
          linear_int8(x, w, TensorView<std::int8_t>(q.data(), Shape{m, n}), e);
        },
        "epilogue.out_scale");
    CHECK(q == std::vector<std::int8_t>(q.size(), 77));
    // Float, half and bfloat16 outputs ignore it.
    std::vector<half> h(static_cast<std::size_t>(m * n));
    CHECK(can_implement_linear_int8(x, w, TensorView<half>(h.data(), Shape{m, n}), e));
  }
}

TEST_CASE("pack_int8_weight names the pack function of a 4-bit weight", "[cpu][linear][int8][errors]") {
  std::mt19937 rng(41);
  const auto w = shrink::test::normal_values(8 * 64, rng);
  const quant::QuantizedTensor q4 =
      quant::quantize(TensorView<const float>(w.data(), Shape{8, 64}),
                      quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::affine, 1, 32));
  CHECK_FALSE(can_implement_pack_int8_weight(q4));
  shrink::test::require_error_mentioning([&] { pack_int8_weight(q4); }, "shrink::cpu::pack_weight_int4");
}

TEST_CASE("linear_int8 and pack_int8_weight refuse fractional zero points (HQQ), naming them",
          "[cpu][linear][int8][errors][fractional]") {
  std::mt19937 rng(43);
  const std::int64_t m = 3, n = 5, k = 20;
  const auto xf = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto wf = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  quant::QuantScheme fractional = quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::affine);
  fractional.float_zero_point = true;
  const quant::QuantizedTensor x = quant::quantize(TensorView<const float>(xf.data(), Shape{m, k}), fractional);
  REQUIRE(x.qparams.fractional());
  const quant::QuantizedTensor w =
      quant::quantize(TensorView<const float>(wf.data(), Shape{n, k}),
                      quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
  const TensorView<float> out_view(out.data(), Shape{m, n});
  const Support s = can_implement_linear_int8(x, w, out_view);
  CHECK_FALSE(s);
  CHECK(s.reason() ==
        "x.scheme.float_zero_point = true: expected integer zero points: fractional zero points (HQQ) are not "
        "supported by the int8 linear layers");
  shrink::test::require_error_mentioning([&] { linear_int8(x, w, out_view); }, "x.scheme.float_zero_point = true");
  CHECK(shrink::test::all_poison(out));
  // A weight whose scheme says integer zero points but that holds fractional ones.
  quant::QuantizedTensor w_fractional = w;
  w_fractional.qparams.float_zero_point.assign(w.qparams.scale.size(), 0.5f);
  w_fractional.qparams.zero_point.clear();
  CHECK_FALSE(can_implement_pack_int8_weight(w_fractional));
  shrink::test::require_error_mentioning([&] { pack_int8_weight(w_fractional); },
                                         "w.qparams.float_zero_point.size() = 5: expected integer zero points");
}

namespace {

// A planned linear_int8 writing Out against the one-call form on the same x: the same bytes.
template <class Out>
void check_int8_plan(const LinearInt8Plan<Out>& plan, const quant::QuantizedTensor& x, std::int64_t m, std::int64_t n) {
  const std::vector<Out> one = linear_as<Out>(x, plan.weight(), plan.epilogue(), m, n);
  const Out poison = std::is_same<Out, std::int8_t>::value ? Out(99) : Out(kPoison);
  std::vector<Out> planned(one.size(), poison);
  run(plan, x, TensorView<Out>(planned.data(), Shape{m, n}));
  CHECK(std::memcmp(one.data(), planned.data(), one.size() * sizeof(Out)) == 0);
}

}  // namespace

TEST_CASE("linear_int8 plans: the weight and epilogue checked once, calls with the one-call form's bytes",
          "[cpu][linear][int8][plan]") {
  std::mt19937 rng(23);
  const std::int64_t n = 45, k = 192;
  std::uniform_real_distribution<float> scale(0.0005f, 0.003f), offset(-1.5f, 1.5f);
  std::vector<float> w_scales(static_cast<std::size_t>(n)), bias(static_cast<std::size_t>(n));
  for (float& s : w_scales) s = scale(rng);
  for (float& b : bias) b = offset(rng);
  const PackedInt8Weight packed = pack_int8_weight(
      make_quantized(as_bytes(random_int8(static_cast<std::size_t>(n * k), rng)), Shape{n, k},
                     quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0), w_scales,
                     std::vector<std::int32_t>(static_cast<std::size_t>(n), 0)));
  Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu);
  e.out_scale = 0.0125f;
  const auto plan_f = make_plan(packed, e);
  const auto plan_h = make_plan<half>(packed, e);
  const auto plan_q = make_plan<std::int8_t>(packed, e);
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{7}}) {
    INFO("M " << m);
    for (int call = 0; call < 2; ++call) {  // new activations each call, per token then per tensor
      const std::vector<float> xf = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const TensorView<const float> xv(xf.data(), Shape{m, k});
      const quant::QuantizedTensor x =
          call == 0 ? quantize_rows_absmax(xv)
                    : quant::quantize(
                          xv, quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric));
      at_each_level([&](SimdLevel) {
        check_int8_plan(plan_f, x, m, n);
        check_int8_plan(plan_h, x, m, n);
        check_int8_plan(plan_q, x, m, n);
      });
    }
  }

  SECTION("make_plan reads the bias and out_scale once") {
    std::vector<float> bad = bias;
    bad[3] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(make_plan(packed, Epilogue::with_bias(TensorView<const float>(bad.data(), Shape{n}))),
                      Catch::Matchers::Contains("shrink::cpu::make_plan(PackedInt8Weight): epilogue.bias[3] = inf"));
    CHECK_THROWS_WITH(make_plan<std::int8_t>(packed, Epilogue{}), Catch::Matchers::Contains("epilogue.out_scale"));
  }
  SECTION("run checks x and out and writes nothing when they fail") {
    const std::vector<float> xf = shrink::test::normal_values(static_cast<std::size_t>(2 * (k + 64)), rng);
    const quant::QuantizedTensor wrong_k = quantize_rows_absmax(TensorView<const float>(xf.data(), Shape{2, k + 64}));
    std::vector<float> out(static_cast<std::size_t>(2 * n), kPoison);
    CHECK_THROWS_WITH(run(plan_f, wrong_k, TensorView<float>(out.data(), Shape{2, n})),
                      Catch::Matchers::Contains("shrink::cpu::run(LinearInt8Plan): x.shape = [2, 256]"));
    const quant::QuantizedTensor x = quantize_rows_absmax(TensorView<const float>(xf.data(), Shape{2, k}));
    CHECK_THROWS_WITH(run(plan_f, x, TensorView<float>(out.data(), Shape{2, n - 1})),
                      Catch::Matchers::Contains("out.shape = [2, 44]"));
    std::vector<float> holder(static_cast<std::size_t>(2 * n), 0.25f);  // the bias in the first N floats
    const auto plan_over = make_plan(packed, Epilogue::with_bias(TensorView<const float>(holder.data(), Shape{n})));
    CHECK_THROWS_WITH(run(plan_over, x, TensorView<float>(holder.data(), Shape{2, n})),
                      Catch::Matchers::Contains("out = memory overlapping epilogue.bias"));
    CHECK_THROWS_WITH(run(LinearInt8Plan<float>(), x, TensorView<float>(out.data(), Shape{2, n})),
                      Catch::Matchers::Contains("plan = an empty plan"));
    for (float v : out) CHECK(v == kPoison);
  }
}
