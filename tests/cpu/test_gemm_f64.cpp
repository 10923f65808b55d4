// cpu/gemm_f64.hpp: C −= A·B against a long-double reference, every SIMD level, edge tiles, strided and transposed B,
// the lower-triangle form and the blocks of k, m and n.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "shrink/cpu/gemm_f64.hpp"
#include "support/simd_levels.hpp"

namespace {

using namespace shrink;
using test::SimdLevelGuard;
using test::supported_levels;

std::vector<double> random_doubles(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = uniform(rng);
  return v;
}

// Runs C −= A·B for A [m, k] (leading dimension m + 3), B either [k, n] column-major or the transpose of an [n, k]
// column-major matrix, C [m, n] (leading dimension m + 5), and compares every entry it must write with a long-double
// sum; entries outside C's [m, n] (the padding) and, for the lower form, above the tiles must stay as they were
// where the contract says so.
void check_product(std::ptrdiff_t m, std::ptrdiff_t n, std::ptrdiff_t k, bool transposed_b, cpu::GemmF64Part part) {
  const std::ptrdiff_t lda = m + 3, ldc = m + 5;
  const std::vector<double> a = random_doubles(static_cast<std::size_t>(lda * k), 1);
  const std::ptrdiff_t ldb = transposed_b ? n + 2 : k + 2;
  const std::vector<double> bstore = random_doubles(static_cast<std::size_t>(ldb * (transposed_b ? k : n)), 2);
  const cpu::GemmF64B b = transposed_b ? cpu::GemmF64B{bstore.data(), ldb, 1} : cpu::GemmF64B{bstore.data(), 1, ldb};
  std::vector<double> c = random_doubles(static_cast<std::size_t>(ldc * n), 3);
  const std::vector<double> c0 = c;
  cpu::gemm_f64_subtract(m, n, k, a.data(), lda, b, c.data(), ldc, part);
  std::int64_t wrong = 0;
  double worst = 0.0;
  for (std::ptrdiff_t j = 0; j < n; ++j)
    for (std::ptrdiff_t i = 0; i < ldc; ++i) {
      const std::size_t at = static_cast<std::size_t>(i + j * ldc);
      if (i >= m) {
        wrong += c[at] != c0[at];  // padding rows untouched
        continue;
      }
      if (part == cpu::GemmF64Part::lower && i < j) continue;  // unspecified above the diagonal
      long double want = c0[at];
      for (std::ptrdiff_t p = 0; p < k; ++p)
        want -= static_cast<long double>(a[static_cast<std::size_t>(i + p * lda)]) *
                b.data[p * b.stride_k + j * b.stride_n];
      const double err = std::fabs(static_cast<double>(want) - c[at]);
      worst = std::max(worst, err);
      wrong += err > 1e-13 * static_cast<double>(k + 1);
    }
  INFO("worst error " << worst);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("gemm_f64_subtract equals the sum in long double on every SIMD level and shape", "[cpu][gemm_f64]") {
  SimdLevelGuard guard;
  struct Size {
    std::ptrdiff_t m, n, k;
  };
  const Size sizes[] = {{1, 1, 1},     {7, 5, 3},      {8, 6, 1},    {16, 8, 9},   {17, 9, 33},
                        {97, 61, 257}, {200, 770, 20}, {64, 1, 128}, {1, 64, 300}, {130, 130, 96}};
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (const Size& s : sizes)
      for (bool transposed : {false, true})
        for (cpu::GemmF64Part part : {cpu::GemmF64Part::all, cpu::GemmF64Part::lower}) {
          INFO("level " << static_cast<int>(level) << ", m " << s.m << ", n " << s.n << ", k " << s.k
                        << (transposed ? ", Bᵀ" : ", B") << (part == cpu::GemmF64Part::lower ? ", lower" : ""));
          check_product(s.m, s.n, s.k, transposed, part);
        }
  }
}

TEST_CASE("gemm_f64_subtract with an empty dimension changes nothing", "[cpu][gemm_f64]") {
  std::vector<double> c(12, 1.5);
  const std::vector<double> a(12, 2.0);
  cpu::gemm_f64_subtract(3, 4, 0, a.data(), 3, cpu::GemmF64B{a.data(), 1, 3}, c.data(), 3);
  cpu::gemm_f64_subtract(0, 4, 2, a.data(), 3, cpu::GemmF64B{a.data(), 1, 3}, c.data(), 3);
  for (double v : c) CHECK(v == 1.5);
}
