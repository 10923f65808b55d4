// cpu/cholesky.hpp: the blocked Cholesky factor and lower-triangular inverse against Eigen's, every SIMD level,
// sizes around the panel width; a matrix that is not positive-definite is reported.
#include <catch2/catch.hpp>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <cmath>
#include <limits>
#include <random>

#include "shrink/cpu/cholesky.hpp"
#include "support/simd_levels.hpp"

namespace {

using namespace shrink;

Eigen::MatrixXd random_spd(Eigen::Index n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Eigen::MatrixXd x(2 * n, n);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < n; ++j) x(i, j) = normal(rng);
  Eigen::MatrixXd h = x.transpose() * x / static_cast<double>(n);
  h.diagonal().array() += 0.01;
  return h;
}

}  // namespace

TEST_CASE("cholesky_lower_in_place equals Eigen's LLT around the panel width", "[cpu][cholesky]") {
  test::SimdLevelGuard guard;
  for (cpu::SimdLevel level : test::supported_levels()) {
    cpu::simd_level() = level;
    for (Eigen::Index n : {1, 2, 95, 96, 97, 193, 300}) {
      INFO("level " << static_cast<int>(level) << ", n = " << n);
      const Eigen::MatrixXd h = random_spd(n, static_cast<unsigned>(n));
      Eigen::MatrixXd a = h;
      a.triangularView<Eigen::StrictlyUpper>().setConstant(99.0);  // never read
      REQUIRE(cpu::cholesky_lower_in_place(a));
      const Eigen::MatrixXd l = a.triangularView<Eigen::Lower>();
      const Eigen::MatrixXd want = h.llt().matrixL();
      CHECK((l - want).cwiseAbs().maxCoeff() < 1e-12 * want.cwiseAbs().maxCoeff());
      CHECK((l * l.transpose() - h).cwiseAbs().maxCoeff() < 1e-12 * h.cwiseAbs().maxCoeff());
    }
  }
}

TEST_CASE("cholesky_lower_in_place reports a matrix that is not positive-definite", "[cpu][cholesky]") {
  for (Eigen::Index n : {3, 96, 150}) {
    Eigen::MatrixXd h = random_spd(n, 5);
    h(n - 1, n - 1) = -1.0;  // the last pivot: in the last panel
    CHECK_FALSE(cpu::cholesky_lower_in_place(h));
    h = random_spd(n, 6);
    h(n / 2, n / 2) = std::numeric_limits<double>::quiet_NaN();
    CHECK_FALSE(cpu::cholesky_lower_in_place(h));
  }
}

TEST_CASE("lower_triangular_inverse: L·X = I, the upper triangle zero, the input's upper triangle not read",
          "[cpu][cholesky]") {
  test::SimdLevelGuard guard;
  for (cpu::SimdLevel level : test::supported_levels()) {
    cpu::simd_level() = level;
    for (Eigen::Index n : {1, 63, 95, 96, 97, 200, 290}) {
      INFO("level " << static_cast<int>(level) << ", n = " << n);
      std::mt19937 rng(static_cast<unsigned>(n));
      std::uniform_real_distribution<double> uniform(-1.0, 1.0);
      Eigen::MatrixXd l(n, n);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < n; ++j)
          l(i, j) = j > i ? 99.0 : (i == j ? 2.0 + uniform(rng) : uniform(rng) / 4.0);
      const Eigen::MatrixXd x = cpu::lower_triangular_inverse(l);
      const Eigen::MatrixXd lower = l.triangularView<Eigen::Lower>();
      CHECK((lower * x - Eigen::MatrixXd::Identity(n, n)).cwiseAbs().maxCoeff() < 1e-12);
      CHECK(x.triangularView<Eigen::StrictlyUpper>().toDenseMatrix().cwiseAbs().maxCoeff() == 0.0);
    }
  }
}
