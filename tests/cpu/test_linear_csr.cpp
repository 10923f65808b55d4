// CSR linear layers: products over the stored values against a double reference at every SIMD level and sparsity,
// and malformed CSR arrays or bad shapes rejected with the output untouched.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "linear_reference.hpp"
#include "shrink/cpu/linear_csr.hpp"
#include "shrink/sparse/csr.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;

namespace {

std::vector<float> sparse_weight(std::int64_t n, std::int64_t k, double sparsity, std::mt19937& rng) {
  auto w = shrink::test::normal_values(static_cast<std::size_t>(n * k), rng);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (float& v : w)
    if (u(rng) < sparsity) v = 0.0f;
  return w;
}

}  // namespace

TEST_CASE("linear_csr matches a double reference at every SIMD level and sparsity", "[cpu][linear][csr]") {
  std::mt19937 rng(31);
  // M: the dot-product path (≤ 8), one chunk of Xᵀ (≤ 64 with AVX2, ≤ 128 with AVX-512), several chunks.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1}, {1, 37, 100}, {8, 20, 33}, {9, 13, 70}, {16, 64, 128}, {65, 9, 40}, {130, 21, 57}, {200, 5, 300}};
  for (auto [m, n, k] : shapes) {
    for (double sparsity : {0.0, 0.5, 0.9, 1.0}) {
      INFO("M " << m << " N " << n << " K " << k << " sparsity " << sparsity);
      const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
      const auto w = sparse_weight(n, k, sparsity, rng);
      const auto csr = sparse::to_csr(TensorView<const float>(w.data(), Shape{n, k}));
      const auto ref = shrink::test::reference_product(x, w, m, n, k);
      const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
      for (bool with_bias : {false, true}) {
        const LinearEpilogue e =
            with_bias ? LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu)
                      : LinearEpilogue{};
        at_each_level([&](SimdLevel) {
          std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
          linear_csr(TensorView<const float>(x.data(), Shape{m, k}), csr, TensorView<float>(out.data(), Shape{m, n}),
                     e);
          shrink::test::check_against_reference(out, n, ref, m, n, k, {}, with_bias ? bias : std::vector<float>{},
                                                with_bias ? Activation::relu : Activation::none);
        });
      }
    }
  }
}

TEST_CASE("linear_csr with a raw bias pointer equals the epilogue form", "[cpu][linear][csr]") {
  std::mt19937 rng(34);
  const std::int64_t m = 3, n = 9, k = 40;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  const auto w = sparse_weight(n, k, 0.5, rng);
  const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
  const auto csr = sparse::to_csr(TensorView<const float>(w.data(), Shape{n, k}));
  std::vector<float> a(static_cast<std::size_t>(m * n)), b(a.size());
  linear_csr(TensorView<const float>(x.data(), Shape{m, k}), csr, bias.data(), TensorView<float>(a.data(), Shape{m, n}),
             Activation::relu);
  linear_csr(TensorView<const float>(x.data(), Shape{m, k}), csr, TensorView<float>(b.data(), Shape{m, n}),
             LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu));
  CHECK(a == b);
}

TEST_CASE("linear_csr reads strided activations", "[cpu][linear][csr]") {
  std::mt19937 rng(32);
  const std::int64_t m = 20, n = 11, k = 45;
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
  std::vector<float> xt(x.size());  // column-major copy
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c)
      xt[static_cast<std::size_t>(c * m + r)] = x[static_cast<std::size_t>(r * k + c)];
  const auto w = sparse_weight(n, k, 0.7, rng);
  const auto csr = sparse::to_csr(TensorView<const float>(w.data(), Shape{n, k}));
  const auto ref = shrink::test::reference_product(x, w, m, n, k);
  for (std::int64_t rows : {std::int64_t{3}, m}) {
    at_each_level([&](SimdLevel) {
      std::vector<float> out(static_cast<std::size_t>(rows * n), kPoison);
      linear_csr(TensorView<const float>(xt.data(), Shape{rows, k}, Strides{1, m}), csr,
                 TensorView<float>(out.data(), Shape{rows, n}));
      shrink::test::check_against_reference(out, n, ref, rows, n, k, {}, {}, Activation::none);
    });
  }
}

TEST_CASE("linear_csr rejects malformed CSR arrays and bad shapes, leaving the output untouched",
          "[cpu][linear][csr][errors]") {
  std::mt19937 rng(33);
  const std::int64_t n = 7, k = 30;
  const auto w = sparse_weight(n, k, 0.6, rng);
  const auto good = sparse::to_csr(TensorView<const float>(w.data(), Shape{n, k}));
  REQUIRE(good.nnz() > 4);
  for (std::int64_t m : {std::int64_t{2}, std::int64_t{40}}) {  // the dot-product and the chunked paths
    const auto x = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
    const TensorView<const float> xv(x.data(), Shape{m, k});
    std::vector<float> out(static_cast<std::size_t>(m * n), kPoison);
    const TensorView<float> ov(out.data(), Shape{m, n});
    auto expect_rejected = [&](const sparse::Csr<float>& bad, const std::string& fragment) {
      at_each_level([&](SimdLevel) {
        std::fill(out.begin(), out.end(), kPoison);
        shrink::test::require_error_mentioning([&] { linear_csr(xv, bad, ov); }, fragment);
        CHECK(shrink::test::all_poison(out));
      });
    };
    INFO("M " << m);
    {
      auto bad = good;
      bad.column_indices[3] = static_cast<std::int32_t>(k);  // out of range
      expect_rejected(bad, "csr.column_indices[");
    }
    {
      auto bad = good;
      const std::int32_t first = bad.row_offsets[1];
      REQUIRE(bad.row_offsets[2] - first >= 2);
      std::swap(bad.column_indices[static_cast<std::size_t>(first)],
                bad.column_indices[static_cast<std::size_t>(first + 1)]);  // unsorted
      expect_rejected(bad, "strictly increasing");
    }
    {
      auto bad = good;
      bad.column_indices.back() = -1;
      expect_rejected(bad, "csr.column_indices[");
    }
    {
      auto bad = good;
      bad.row_offsets[3] = bad.row_offsets[4] + 1;  // decreasing
      expect_rejected(bad, "w.row_offsets[");
    }
    {
      auto bad = good;
      bad.values.pop_back();
      expect_rejected(bad, "w.column_indices.size()");
    }
    {
      auto bad = good;
      bad.row_offsets.pop_back();
      expect_rejected(bad, "w.row_offsets.size()");
    }
    std::fill(out.begin(), out.end(), kPoison);
    shrink::test::require_error_mentioning(
        [&] {
          linear_csr(TensorView<const float>(x.data(), Shape{m, k - 1}), good, ov);
        },
        "x.shape");
    shrink::test::require_error_mentioning(
        [&] {
          linear_csr(xv, good, TensorView<float>(out.data(), Shape{m, n - 1}));
        },
        "out.shape");
    const std::vector<float> bias(static_cast<std::size_t>(n + 2), 0.0f);
    shrink::test::require_error_mentioning(
        [&] {
          linear_csr(xv, good, ov, LinearEpilogue::with_bias(TensorView<const float>(bias.data(), Shape{n + 2})));
        },
        "epilogue.bias.shape");
    CHECK(shrink::test::all_poison(out));
  }
  std::vector<float> out(4, kPoison);
  const sparse::Csr<float> empty;
  shrink::test::require_error_mentioning(
      [&] {
        linear_csr(TensorView<const float>(out.data(), Shape{1, 1}), empty,
                   TensorView<float>(out.data() + 1, Shape{1, 0}));
      },
      "w.shape");
}
