// N:M linear layers: 2:4 (and other patterns) through the compressed format, against a double reference of the
// decompressed weight at every SIMD level; malformed positions and bad shapes rejected with the output untouched;
// the half / bfloat16 and int8 twins of the GPU 2:4 kernels (exact int32 sums, scaled epilogue, output types).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/core/half.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;
using shrink::test::random_int8;

TEST_CASE("linear_nm matches a double reference of the decompressed weight at every SIMD level", "[cpu][linear][nm]") {
  std::mt19937 rng(41);
  // M: dot products (≤ 12 in scalar code; 2:4 ≤ 48 with AVX-512, ≤ 4 with AVX2) or expanded panels; K: whole steps of
  // the vector kernels (32 columns with AVX-512, 16 with AVX2), and tails.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 4},     {1, 37, 32}, {3, 20, 36},   {4, 19, 100}, {5, 7, 48},
      {12, 33, 100}, {13, 9, 64}, {40, 70, 260}, {2, 5, 1024}, {60, 33, 96}};
  for (auto [m, n, k] : shapes) {
    for (prune::NmPattern pattern : {prune::NmPattern{2, 4}, prune::NmPattern{1, 4}, prune::NmPattern{4, 8}}) {
      if (k % pattern.m != 0) continue;
      INFO("M " << m << " N " << n << " K " << k << " pattern " << prune::to_string(pattern));
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
      w[0] = 0.0f;  // a group keeping fewer than n: padded with a zero
      const auto compressed = sparse::compress_nm(TensorView<const float>(w.data(), Shape{n, k}), pattern);
      const auto dense = sparse::decompress_nm(compressed);
      const auto ref = shrink::test::reference_product(x, dense, m, n, k);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      at_each_level([&](SimdLevel) {
        std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
        linear_nm(TensorView<const float>(x.data(), Shape{m, k}), compressed,
                  TensorView<float>(out.data(), Shape{m, n}),
                  Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu));
        shrink::test::check_against_reference(out, n, ref, m, n, k, {}, bias, Activation::relu);
      });
    }
  }
}

TEST_CASE("linear_nm with a raw bias pointer equals the epilogue form", "[cpu][linear][nm]") {
  std::mt19937 rng(43);
  const std::int64_t m = 2, n = 7, k = 48;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
  const auto compressed = sparse::compress_nm(TensorView<const float>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
  std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
  linear_nm(TensorView<const float>(x.data(), Shape{m, k}), compressed, bias.data(),
            TensorView<float>(a.data(), Shape{m, n}), Activation::silu);
  linear_nm(TensorView<const float>(x.data(), Shape{m, k}), compressed, TensorView<float>(b.data(), Shape{m, n}),
            Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::silu));
  CHECK(a == b);
}

TEST_CASE("linear_nm rejects malformed positions and bad shapes, leaving the output untouched",
          "[cpu][linear][nm][errors]") {
  std::mt19937 rng(42);
  const std::int64_t n = 5, k = 64;
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  const auto good = sparse::compress_nm(TensorView<const float>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
  for (std::int64_t m : {std::int64_t{1}, std::int64_t{20}, std::int64_t{60}}) {
    INFO("M " << m);
    const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
    const TensorView<const float> xv(x.data(), Shape{m, k});
    std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
    const TensorView<float> ov(out.data(), Shape{m, n});
    auto expect_rejected = [&](const sparse::NmCompressed<float>& bad, const std::string& fragment) {
      at_each_level([&](SimdLevel) {
        std::fill(out.begin(), out.end(), kPoison);
        shrink::test::require_error_mentioning([&] { linear_nm(xv, bad, ov); }, fragment);
        CHECK(shrink::test::all_poison(out));
      });
    };
    for (std::size_t at : {std::size_t{0}, std::size_t{37}, good.positions.size() - 1}) {
      auto bad = good;
      bad.positions[at] = 4;  // past the group
      expect_rejected(bad, "w.positions[");
      bad = good;
      bad.positions[at & ~std::size_t{1}] = bad.positions[at | 1];  // not increasing
      expect_rejected(bad, "w.positions[");
    }
    {
      auto bad = good;
      bad.values.pop_back();
      expect_rejected(bad, "w.values.size()");
    }
    {
      auto bad = good;
      bad.cols = 62;
      expect_rejected(bad, "w.shape");
    }
    {
      auto bad = good;
      bad.pattern = prune::NmPattern{4, 4};
      expect_rejected(bad, "w.pattern");
    }
    std::fill(out.begin(), out.end(), kPoison);
    shrink::test::require_error_mentioning(
        [&] {
          linear_nm(TensorView<const float>(x.data(), Shape{m, k - 4}), good, ov);
        },
        "x.shape");
    shrink::test::require_error_mentioning(
        [&] {
          linear_nm(xv, good, TensorView<float>(out.data(), Shape{m - 1 + 1, n - 1}));
        },
        "out.shape");
    CHECK(shrink::test::all_poison(out));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The twins of the GPU 2:4 kernels: half / bfloat16 operands and int8 operands.

namespace {

// A random N:M mask over [rows, cols]: every group keeps a random subset of at most n (fewer, even none, too), so for
// 2:4 all six pairs and the zero-filled groups appear.
prune::Mask random_nm_mask(std::int64_t rows, std::int64_t cols, prune::NmPattern pattern, std::mt19937& rng) {
  prune::Mask mask(Shape{rows, cols}, false);
  std::vector<int> order(static_cast<std::size_t>(pattern.m));
  for (std::int64_t g = 0; g < rows * cols / pattern.m; ++g) {
    for (int j = 0; j < pattern.m; ++j) order[static_cast<std::size_t>(j)] = j;
    std::shuffle(order.begin(), order.end(), rng);
    const int kept = std::uniform_int_distribution<int>(0, pattern.n)(rng);
    for (int j = 0; j < kept; ++j) mask.set(g * pattern.m + order[static_cast<std::size_t>(j)], true);
  }
  return mask;
}

template <class T>
std::vector<T> rounded_normal_values(std::size_t count, std::mt19937& rng) {
  const std::vector<float> f = shrink::test::normal_values(count, rng);
  std::vector<T> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = T(f[i]);
  return v;
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  return f;
}

template <class T>
void check_float16_linear_nm(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 37, 64}, {13, 20, 128}, {60, 33, 96}, {3, 5, 1024}};
  for (auto [m, n, k] : shapes) {
    for (prune::NmPattern pattern : {prune::NmPattern{2, 4}, prune::NmPattern{4, 8}}) {
      INFO("M " << m << " N " << n << " K " << k << " pattern " << prune::to_string(pattern));
      const auto x = rounded_normal_values<T>(static_cast<std::size_t>(m * k), rng);
      const auto w = rounded_normal_values<T>(static_cast<std::size_t>(n * k), rng);
      const auto compressed =
          sparse::compress_nm(TensorView<const T>(w.data(), Shape{n, k}), random_nm_mask(n, k, pattern, rng), pattern);
      const auto ref = shrink::test::reference_product(widened(x), widened(sparse::decompress_nm(compressed)), m, n, k);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      const auto epilogue = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::gelu);
      std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
      linear_nm(TensorView<const T>(x.data(), Shape{m, k}), compressed, TensorView<float>(out.data(), Shape{m, n}),
                epilogue);
      shrink::test::check_against_reference(out, n, ref, m, n, k, {}, bias, Activation::gelu);
      // The 16-bit output is the float result rounded once, to nearest even.
      std::vector<T> out16(static_cast<std::size_t>(m * n), T::quiet_nan());
      linear_nm(TensorView<const T>(x.data(), Shape{m, k}), compressed, TensorView<T>(out16.data(), Shape{m, n}),
                epilogue);
      int mismatches = 0;
      for (std::size_t i = 0; i < out.size(); ++i) mismatches += out16[i].to_bits() != T(out[i]).to_bits();
      CHECK(mismatches == 0);
    }
  }
}

// Exact products of the decompressed int8 weight: acc[m, n] = Σ_k x[m, k] · w[n, k] in int64.
std::vector<std::int64_t> exact_int8_product(const std::vector<std::int8_t>& x, const std::vector<std::int8_t>& w,
                                             std::int64_t m_total, std::int64_t n_total, std::int64_t k_total) {
  std::vector<std::int64_t> acc(static_cast<std::size_t>(m_total * n_total));
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t n = 0; n < n_total; ++n) {
      std::int64_t s = 0;
      for (std::int64_t k = 0; k < k_total; ++k)
        s += std::int64_t{x[static_cast<std::size_t>(m * k_total + k)]} * w[static_cast<std::size_t>(n * k_total + k)];
      acc[static_cast<std::size_t>(m * n_total + n)] = s;
    }
  return acc;
}

// linear_nm_int8 with the scales and the int8 output scale as arguments of their own, set into the epilogue.
template <class Out>
void nm_int8(TensorView<const std::int8_t> x, TensorView<const float> x_scales,
             const sparse::NmCompressed<std::int8_t>& w, TensorView<const float> w_scales, TensorView<Out> out,
             Epilogue e = {}, float out_scale = 1.0f) {
  e.x_scales = x_scales;
  e.w_scales = w_scales;
  e.out_scale = out_scale;
  linear_nm_int8(x, w, out, e);
}

}  // namespace

TEST_CASE("linear_nm with half and bfloat16 operands: float sums against a double reference, outputs rounded once",
          "[cpu][linear][nm]") {
  check_float16_linear_nm<half>(51);
  check_float16_linear_nm<bfloat16>(52);
}

TEST_CASE("linear_nm_int8 sums the kept products exactly in int32", "[cpu][linear][nm]") {
  std::mt19937 rng(53);
  for (auto [m, n, k] :
       std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{{1, 19, 64}, {33, 40, 256}, {70, 3, 1024}}) {
    INFO("M " << m << " N " << n << " K " << k);
    auto x = random_int8(static_cast<std::size_t>(m * k), rng);
    auto w = random_int8(static_cast<std::size_t>(n * k), rng);
    std::fill(w.begin(), w.begin() + k, std::int8_t{-128});  // the largest products: -128 · -128
    std::fill(x.begin(), x.begin() + k, std::int8_t{-128});
    auto mask = random_nm_mask(n, k, prune::NmPattern{2, 4}, rng);
    for (std::int64_t c = 0; c < k; ++c) mask.set(c, c % 4 < 2);  // row 0 keeps 2 of every 4
    const auto compressed =
        sparse::compress_nm(TensorView<const std::int8_t>(w.data(), Shape{n, k}), mask, prune::NmPattern{2, 4});
    const auto exact = exact_int8_product(x, sparse::decompress_nm(compressed), m, n, k);
    const float one = 1.0f;
    std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
    nm_int8(TensorView<const std::int8_t>(x.data(), Shape{m, k}), TensorView<const float>(&one, Shape{1}), compressed,
            TensorView<const float>(&one, Shape{1}), TensorView<float>(out.data(), Shape{m, n}));
    int mismatches = 0;
    for (std::size_t i = 0; i < out.size(); ++i) mismatches += out[i] != static_cast<float>(exact[i]);
    CHECK(mismatches == 0);
    CHECK(out[0] == static_cast<float>(exact[0]));
  }
}

TEST_CASE("linear_nm_int8 epilogue: scales, bias, activations, float / half / bfloat16 / int8 outputs",
          "[cpu][linear][nm]") {
  std::mt19937 rng(54);
  const std::int64_t m = 9, n = 21, k = 128;
  const auto x = random_int8(static_cast<std::size_t>(m * k), rng);
  const auto w = random_int8(static_cast<std::size_t>(n * k), rng);
  const auto compressed =
      sparse::compress_nm(TensorView<const std::int8_t>(w.data(), Shape{n, k}),
                          random_nm_mask(n, k, prune::NmPattern{2, 4}, rng), prune::NmPattern{2, 4});
  const auto exact = exact_int8_product(x, sparse::decompress_nm(compressed), m, n, k);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  std::vector<float> sx(static_cast<std::size_t>(m)), sw(static_cast<std::size_t>(n));
  for (float& s : sx) s = scale(rng);
  for (float& s : sw) s = scale(rng);
  const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng, 0.3f);
  const float out_scale = 0.004f;
  for (const bool per_tensor : {false, true}) {
    for (Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu}) {
      INFO("activation " << to_string(act) << (per_tensor ? " per-tensor scales" : " per-row scales"));
      const TensorView<const float> xs(sx.data(), Shape{per_tensor ? 1 : m});
      const TensorView<const float> ws(sw.data(), Shape{per_tensor ? 1 : n});
      const auto e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
      const TensorView<const std::int8_t> xv(x.data(), Shape{m, k});
      std::vector<float> of(static_cast<std::size_t>(m * n), kPoison);
      std::vector<half> oh(of.size());
      std::vector<bfloat16> ob(of.size());
      std::vector<std::int8_t> oq(of.size());
      nm_int8(xv, xs, compressed, ws, TensorView<float>(of.data(), Shape{m, n}), e);
      nm_int8(xv, xs, compressed, ws, TensorView<half>(oh.data(), Shape{m, n}), e);
      nm_int8(xv, xs, compressed, ws, TensorView<bfloat16>(ob.data(), Shape{m, n}), e);
      nm_int8(xv, xs, compressed, ws, TensorView<std::int8_t>(oq.data(), Shape{m, n}), e, out_scale);
      int bad = 0;
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          const std::size_t at = static_cast<std::size_t>(i * n + j);
          const double s = double{sx[per_tensor ? 0 : static_cast<std::size_t>(i)]} *
                           sw[per_tensor ? 0 : static_cast<std::size_t>(j)];
          const double scaled = static_cast<double>(exact[at]) * s, b = bias[static_cast<std::size_t>(j)];
          const double v = shrink::test::activate_reference(scaled + b, act);
          // A few float roundings of the terms (the sum may cancel), and of the activation.
          const double tolerance = 1e-6 * (std::fabs(scaled) + std::fabs(b) + std::fabs(v)) + 1e-12;
          bad += !(std::fabs(of[at] - v) <= tolerance);
          // 16-bit outputs: the float result rounded once.
          bad += oh[at].to_bits() != half(of[at]).to_bits();
          bad += ob[at].to_bits() != bfloat16(of[at]).to_bits();
          // int8: within one step of the double reference (the float result may round the other way at a tie).
          const double q = std::min(127.0, std::max(-128.0, std::nearbyint(v / out_scale)));
          bad += !(std::fabs(oq[at] - q) <= 1.0);
          // and exactly the float result times the float inverse of the scale, rounded half to even (quantize).
          bad += oq[at] != static_cast<std::int8_t>(
                               std::fmin(std::fmax(std::nearbyint(of[at] * (1.0f / out_scale)), -128.0f), 127.0f));
        }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("linear_nm 16-bit and int8 twins reject bad arguments, leaving the output untouched",
          "[cpu][linear][nm][errors]") {
  std::mt19937 rng(55);
  const std::int64_t m = 4, n = 6, k = 64;
  const auto xh = rounded_normal_values<half>(static_cast<std::size_t>(m * k), rng);
  const auto wh = rounded_normal_values<half>(static_cast<std::size_t>(n * k), rng);
  const auto ch = sparse::compress_nm(TensorView<const half>(wh.data(), Shape{n, k}), prune::NmPattern{2, 4});
  std::vector<half> out_h(static_cast<std::size_t>(m * n), half::quiet_nan());
  std::vector<std::int8_t> out_q(static_cast<std::size_t>(m * n), std::int8_t{77});
  shrink::test::require_error_mentioning(
      [&] {
        linear_nm(TensorView<const half>(xh.data(), Shape{m, k}), ch,
                  TensorView<std::int8_t>(out_q.data(), Shape{m, n}));
      },
      "half or float");
  shrink::test::require_error_mentioning(
      [&] {
        linear_nm(TensorView<const half>(xh.data(), Shape{m, k - 4}), ch, TensorView<half>(out_h.data(), Shape{m, n}));
      },
      "x.shape");
  {
    auto bad = ch;
    bad.positions[3] = 4;
    shrink::test::require_error_mentioning(
        [&] {
          linear_nm(TensorView<const half>(xh.data(), Shape{m, k}), bad, TensorView<half>(out_h.data(), Shape{m, n}));
        },
        "w.positions[3]");
  }
  for (const half& h : out_h) CHECK(h.is_nan());

  const auto x = random_int8(static_cast<std::size_t>(m * k), rng);
  const auto w = random_int8(static_cast<std::size_t>(n * k), rng);
  const auto cq = sparse::compress_nm(TensorView<const std::int8_t>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
  const std::vector<float> sx(static_cast<std::size_t>(m), 0.5f), sw(static_cast<std::size_t>(n), 0.25f);
  const TensorView<const std::int8_t> xv(x.data(), Shape{m, k});
  const TensorView<const float> xs(sx.data(), Shape{m}), ws(sw.data(), Shape{n});
  const TensorView<std::int8_t> ov(out_q.data(), Shape{m, n});
  auto rejects = [&](auto call, const std::string& fragment) {
    shrink::test::require_error_mentioning(call, fragment);
  };
  rejects([&] { nm_int8(xv, TensorView<const float>(sx.data(), Shape{m - 1}), cq, ws, ov); }, "x_scales.shape");
  rejects([&] { nm_int8(xv, xs, cq, TensorView<const float>(sw.data(), Shape{2}), ov); }, "w_scales.shape");
  rejects([&] { nm_int8(xv, xs, cq, ws, ov, {}, 0.0f); }, "out_scale");
  rejects([&] { nm_int8(xv, xs, cq, ws, ov, {}, std::numeric_limits<float>::infinity()); }, "out_scale");
  {
    std::vector<float> bad_scales = sw;
    bad_scales[2] = -1.0f;
    rejects([&] { nm_int8(xv, xs, cq, TensorView<const float>(bad_scales.data(), Shape{n}), ov); }, "w_scales[2]");
    bad_scales[2] = std::numeric_limits<float>::quiet_NaN();
    rejects([&] { nm_int8(xv, xs, cq, TensorView<const float>(bad_scales.data(), Shape{n}), ov); }, "w_scales[2]");
  }
  {
    auto bad = cq;
    bad.positions[5] = bad.positions[4];
    rejects([&] { nm_int8(xv, xs, bad, ws, ov); }, "w.positions[5]");
  }
  {
    sparse::NmCompressed<std::int8_t> wide;  // K / 2 kept a row: past what int32 sums allow
    wide.rows = 1;
    wide.cols = 262144 + 4;
    wide.values.assign(static_cast<std::size_t>(wide.cols / 2), std::int8_t{1});
    wide.positions.resize(wide.values.size());
    for (std::size_t i = 0; i < wide.positions.size(); ++i) wide.positions[i] = static_cast<std::uint8_t>(i % 2);
    std::vector<std::int8_t> xw(static_cast<std::size_t>(wide.cols), std::int8_t{1});
    std::int8_t one_out = 0;
    const float one = 1.0f;
    rejects(
        [&] {
          nm_int8(TensorView<const std::int8_t>(xw.data(), Shape{1, wide.cols}),
                  TensorView<const float>(&one, Shape{1}), wide, TensorView<const float>(&one, Shape{1}),
                  TensorView<std::int8_t>(&one_out, Shape{1, 1}));
        },
        "int32 sums");
  }
  for (std::int8_t q : out_q) CHECK(q == 77);
}
