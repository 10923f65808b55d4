// Tests for shrink/cpu/few_row_products.hpp: row_dots and weighted_rows against double sums at every SIMD level, for
// widths with and without vector tails and row counts across the groups of 3.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/cpu/few_row_products.hpp"
#include "support/simd_levels.hpp"

using namespace shrink::cpu;

namespace {

std::vector<float> normal(std::size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// |got − Σ terms| within the float bound of an n-term sum: n · 2^-24 · Σ |terms| (and a little room).
bool near_sum(float got, double exact, double magnitude, std::int64_t n) {
  return std::fabs(got - exact) <= (static_cast<double>(n) + 2) * std::ldexp(1.0, -24) * magnitude + 1e-30;
}

}  // namespace

TEST_CASE("row_dots and weighted_rows match double sums at every SIMD level", "[cpu][few_row_products]") {
  std::mt19937 rng(61);
  shrink::test::SimdLevelGuard guard;
  for (std::int64_t d : {1, 7, 8, 9, 31, 32, 40, 64, 100}) {
    for (std::int64_t p_total : {1, 5, 600}) {
      for (std::int64_t r_total : {1, 2, 3, 4, 7}) {
        INFO("P " << p_total << " d " << d << " R " << r_total);
        const auto a = normal(static_cast<std::size_t>(p_total * d), rng);
        const auto x = normal(static_cast<std::size_t>(r_total * d), rng);
        const auto w = normal(static_cast<std::size_t>(r_total * p_total), rng);
        for (SimdLevel level : shrink::test::supported_levels()) {
          simd_level() = level;
          INFO("SIMD level " << static_cast<int>(level));
          std::vector<float> dots(static_cast<std::size_t>(r_total * p_total), -1.0f);
          std::vector<float> sums(static_cast<std::size_t>(r_total * d), -1.0f);
          row_dots(a.data(), p_total, d, x.data(), r_total, dots.data());
          weighted_rows(a.data(), p_total, d, w.data(), r_total, sums.data());
          // Double references (linear/linear_reference.hpp): dots = x · aᵀ, sums = w · a (a transposed as a weight).
          std::vector<float> a_t(a.size());
          for (std::int64_t p = 0; p < p_total; ++p)
            for (std::int64_t e = 0; e < d; ++e)
              a_t[static_cast<std::size_t>(e * p_total + p)] = a[static_cast<std::size_t>(p * d + e)];
          const auto dots_ref = shrink::test::reference_product(x, a, r_total, p_total, d);
          const auto sums_ref = shrink::test::reference_product(w, a_t, r_total, d, p_total);
          int far = 0;
          for (std::size_t i = 0; i < dots.size(); ++i)
            far += !near_sum(dots[i], dots_ref.value[i], dots_ref.magnitude[i], d);
          for (std::size_t i = 0; i < sums.size(); ++i)
            far += !near_sum(sums[i], sums_ref.value[i], sums_ref.magnitude[i], p_total);
          CHECK(far == 0);
        }
      }
    }
  }
}
