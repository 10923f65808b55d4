// CSR linear layers: products over the stored values against a double reference at every SIMD level and sparsity,
// malformed CSR arrays or bad shapes rejected with the output untouched; the half and bfloat16 forms likewise.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/core/half.hpp"
#include "shrink/linear/csr.hpp"
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
        const Epilogue e = with_bias
                               ? Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu)
                               : Epilogue{};
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
             Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), Activation::relu));
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
      bad.column_indices[0] = -1;  // negative
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
        [&] { linear_csr(xv, good, ov, Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n + 2}))); },
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

namespace {

// The 16-bit form against the float form on the widened inputs (bit for bit after one rounding) and against a
// double reference of the rounded inputs (within the output's rounding, 2^-8 relative for bfloat16, 2^-11 half).
template <class T>
void check_linear_csr_16(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 1, 1}, {1, 37, 100}, {5, 20, 33}, {9, 13, 70}, {65, 9, 40}, {130, 21, 57}};
  const double unit = std::is_same<T, half>::value ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  for (auto [m, n, k] : shapes) {
    for (double sparsity : {0.0, 0.7, 0.95, 1.0}) {
      for (Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu}) {
        INFO("M " << m << " N " << n << " K " << k << " sparsity " << sparsity << " " << to_string(act));
        std::vector<float> xf = shrink::test::normal_values(static_cast<std::size_t>(m * k), rng);
        std::vector<float> wf = sparse_weight(n, k, sparsity, rng);
        std::vector<T> x(xf.size()), w(wf.size());
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = T(xf[i]), xf[i] = x[i].to_float();
        for (std::size_t i = 0; i < w.size(); ++i) w[i] = T(wf[i]), wf[i] = w[i].to_float();
        const auto bias = shrink::test::normal_values(static_cast<std::size_t>(n), rng);
        const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}), act);
        const auto csr = sparse::to_csr(TensorView<const T>(w.data(), Shape{n, k}));
        const auto csr_f = sparse::to_csr(TensorView<const float>(wf.data(), Shape{n, k}));
        std::vector<T> out(static_cast<std::size_t>(m * n), T::from_bits(0x7FFF));
        at_each_level([&](SimdLevel) {
          linear_csr(TensorView<const T>(x.data(), Shape{m, k}), csr, TensorView<T>(out.data(), Shape{m, n}), e);
          std::vector<float> float_out(out.size());
          linear_csr(TensorView<const float>(xf.data(), Shape{m, k}), csr_f,
                     TensorView<float>(float_out.data(), Shape{m, n}), e);
          int wrong = 0;
          for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i].to_bits() != T(float_out[i]).to_bits();
          CHECK(wrong == 0);
        });
        const auto ref = shrink::test::reference_product(xf, wf, m, n, k);
        int reported = 0;
        for (std::int64_t i = 0; i < m * n; ++i) {
          const double expected = shrink::test::activate_reference(
              ref.value[static_cast<std::size_t>(i)] + bias[static_cast<std::size_t>(i % n)], act);
          const double bound = unit * std::fabs(expected) + 1e-5 * (ref.magnitude[static_cast<std::size_t>(i)] + 1.0);
          const double got = out[static_cast<std::size_t>(i)].to_float();
          if (!(std::fabs(got - expected) <= bound) && reported++ < 5) {
            INFO("element " << i << " got " << got << " expected " << expected);
            CHECK(std::fabs(got - expected) <= bound);
          }
        }
        CHECK(reported == 0);
      }
    }
  }
}

template <class T>
void check_linear_csr_16_errors() {
  std::mt19937 rng(35);
  const std::int64_t m = 12, n = 7, k = 30;
  const auto wf = sparse_weight(n, k, 0.6, rng);
  std::vector<T> w(wf.size()), x(static_cast<std::size_t>(m * k), T(0.5f));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = T(wf[i]);
  const auto good = sparse::to_csr(TensorView<const T>(w.data(), Shape{n, k}));
  REQUIRE(good.nnz() > 4);
  const T poison = T::from_bits(0x7FFF);
  std::vector<T> out(static_cast<std::size_t>(m * n), poison);
  const TensorView<const T> xv(x.data(), Shape{m, k});
  const TensorView<T> ov(out.data(), Shape{m, n});
  auto untouched = [&] {
    for (const T& v : out)
      if (v.to_bits() != poison.to_bits()) return false;
    return true;
  };
  auto bad = good;
  bad.column_indices[3] = static_cast<std::int32_t>(k);
  shrink::test::require_error_mentioning([&] { linear_csr(xv, bad, ov); }, "csr.column_indices[");
  bad = good;
  bad.row_offsets[3] = bad.row_offsets[4] + 1;
  shrink::test::require_error_mentioning([&] { linear_csr(xv, bad, ov); }, "w.row_offsets[");
  shrink::test::require_error_mentioning(
      [&] {
        linear_csr(TensorView<const T>(x.data(), Shape{m, k - 1}), good, ov);
      },
      "x.shape");
  shrink::test::require_error_mentioning(
      [&] {
        linear_csr(xv, good, TensorView<T>(out.data(), Shape{m, n - 1}));
      },
      "out.shape");
  const std::vector<float> bias(static_cast<std::size_t>(n), std::numeric_limits<float>::quiet_NaN());
  shrink::test::require_error_mentioning(
      [&] { linear_csr(xv, good, ov, Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{n}))); },
      "epilogue.bias[0]");
  shrink::test::require_error_mentioning(
      [&] {
        linear_csr(TensorView<const T>(out.data(), Shape{m, 1}),
                   sparse::to_csr(TensorView<const T>(w.data(), Shape{n, 1})), ov);
      },
      "overlapping x");
  CHECK(untouched());
  CHECK_FALSE(can_implement_linear_csr(xv, bad, ov));
  CHECK(can_implement_linear_csr(xv, good, ov));
}

}  // namespace

TEST_CASE("linear_csr with half and bfloat16: one rounding of the float product", "[cpu][linear][csr][half]") {
  check_linear_csr_16<half>(41);
  check_linear_csr_16<bfloat16>(42);
}

TEST_CASE("linear_csr with half and bfloat16 rejects bad input, leaving the output untouched",
          "[cpu][linear][csr][half][errors]") {
  check_linear_csr_16_errors<half>();
  check_linear_csr_16_errors<bfloat16>();
}
