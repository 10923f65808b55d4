// N:M linear layers: 2:4 (and other patterns) through the compressed format, against a double reference of the
// decompressed weight at every SIMD level; malformed positions and bad shapes rejected with the output untouched.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "linear_reference.hpp"
#include "shrink/cpu/linear_nm.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;

TEST_CASE("linear_nm matches a double reference of the decompressed weight at every SIMD level", "[cpu][linear][nm]") {
  std::mt19937 rng(41);
  // M: dot products (≤ 12; ≤ 48 for 2:4 with AVX-512) or expanded panels; K: whole 32-column steps of the AVX-512
  // kernel, and tails.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 4}, {1, 37, 32}, {3, 20, 36}, {12, 33, 100}, {13, 9, 64}, {40, 70, 260}, {2, 5, 1024}, {60, 33, 96}};
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
                  LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu));
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
            LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::silu));
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
