// Tests for shrink/metrics/error.hpp: MSE, max-abs, SQNR and cosine against hand-computed values.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/metrics/error.hpp"

using namespace shrink;
using namespace shrink::metrics;

TEST_CASE("error_stats on a hand-computed pair", "[metrics][error]") {
  const std::vector<float> x{1, 2, 3, 4};
  const std::vector<float> y{1, 2, 3, 5};
  const ErrorStats s = error_stats(make_view(x), make_view(y));
  CHECK(s.count == 4);
  CHECK(s.mse == 0.25);                                    // (0 + 0 + 0 + 1) / 4
  CHECK(s.max_abs == 1.0);
  CHECK(s.sqnr_db == Approx(10.0 * std::log10(30.0)));     // sum x^2 = 30, sum e^2 = 1
  CHECK(s.cosine == Approx(34.0 / std::sqrt(30.0 * 39.0)));  // x.y = 34, |y|^2 = 39
  CHECK(mse(make_view(x), make_view(y)) == s.mse);
  CHECK(max_abs_error(make_view(x), make_view(y)) == s.max_abs);
  CHECK(sqnr_db(make_view(x), make_view(y)) == s.sqnr_db);
  CHECK(cosine_similarity(make_view(x), make_view(y)) == s.cosine);
}

TEST_CASE("error metrics are computed in double", "[metrics][error]") {
  // Differences of 2^-24 relative to 1: float sums of squares would lose them entirely.
  const std::int64_t n = 1 << 16;
  std::vector<float> x(static_cast<std::size_t>(n), 1.0f), y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) y[i] = i % 2 ? std::nextafter(1.0f, 2.0f) : 1.0f;
  const double step = std::nextafter(1.0f, 2.0f) - 1.0;  // 2^-23
  const ErrorStats s = error_stats(make_view(x), make_view(y));
  CHECK(s.mse == Approx(step * step / 2.0).epsilon(1e-12));
  CHECK(s.max_abs == step);
  CHECK(s.sqnr_db == Approx(10.0 * std::log10(2.0 / (step * step))).epsilon(1e-12));
}

TEST_CASE("SQNR and cosine: the documented rules for zero error and zero vectors", "[metrics][error]") {
  const std::vector<float> x{1, -2, 3};
  const std::vector<float> zeros{0, 0, 0};
  const std::vector<float> negated{-1, 2, -3};
  const std::vector<float> scaled{2, -4, 6};

  const ErrorStats same = error_stats(make_view(x), make_view(x));
  CHECK(same.sqnr_db == std::numeric_limits<double>::infinity());
  CHECK(same.mse == 0.0);
  CHECK(same.cosine == 1.0);

  const ErrorStats both_zero = error_stats(make_view(zeros), make_view(zeros));
  CHECK(both_zero.sqnr_db == std::numeric_limits<double>::infinity());  // zero error wins
  CHECK(both_zero.cosine == 1.0);

  const ErrorStats zero_reference = error_stats(make_view(zeros), make_view(x));
  CHECK(zero_reference.sqnr_db == -std::numeric_limits<double>::infinity());
  CHECK(zero_reference.cosine == 0.0);

  const ErrorStats zero_approximation = error_stats(make_view(x), make_view(zeros));
  CHECK(zero_approximation.sqnr_db == 0.0);  // sum x^2 / sum x^2
  CHECK(zero_approximation.cosine == 0.0);

  CHECK(cosine_similarity(make_view(x), make_view(negated)) == -1.0);
  CHECK(cosine_similarity(make_view(x), make_view(scaled)) == Approx(1.0));
  CHECK(cosine_similarity(make_view(x), make_view(scaled)) <= 1.0);  // clamped, never 1 + ulp
  CHECK(sqnr_db(make_view(x), make_view(scaled)) == Approx(0.0).margin(1e-12));  // error = -x
}

TEST_CASE("error metrics read strided views", "[metrics][error]") {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t rows = 7, cols = 5;
  std::vector<float> x(static_cast<std::size_t>(rows * cols)), y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    y[i] = x[i] + 0.01f * normal(rng);
  }
  // The same [rows, cols] tensors stored column-major, and y inside a padded buffer (row stride 8).
  std::vector<float> x_col_major(x.size()), y_padded(static_cast<std::size_t>(rows * 8), 99.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      x_col_major[c * rows + r] = x[r * cols + c];
      y_padded[r * 8 + c] = y[r * cols + c];
    }
  const ErrorStats dense =
      error_stats(TensorView<const float>(x.data(), Shape{rows, cols}), TensorView<const float>(y.data(), Shape{rows, cols}));
  const ErrorStats strided = error_stats(TensorView<const float>(x_col_major.data(), Shape{rows, cols}, Strides{1, rows}),
                                         TensorView<const float>(y_padded.data(), Shape{rows, cols}, Strides{8, 1}));
  CHECK(strided.count == dense.count);
  CHECK(strided.mse == dense.mse);
  CHECK(strided.max_abs == dense.max_abs);
  CHECK(strided.sqnr_db == dense.sqnr_db);
  CHECK(strided.cosine == dense.cosine);
  CHECK(dense.sqnr_db > 30.0);

  // A scalar (rank 0) works too.
  const float a = 2.0f, b = 1.5f;
  CHECK(mse(TensorView<const float>(&a, Shape{}), TensorView<const float>(&b, Shape{})) == 0.25);
}

TEST_CASE("error metrics reject bad input, naming the argument and first bad index", "[metrics][error]") {
  std::vector<float> x{1, 2, 3, 4, 5, 6};
  std::vector<float> y{1, 2, 3, 4, 5, 6};
  const auto view = [](const std::vector<float>& v) { return TensorView<const float>(v.data(), Shape{2, 3}); };

  x[4] = std::numeric_limits<float>::quiet_NaN();
  x[5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(error_stats(view(x), view(y)), Catch::Contains("reference[4] = nan") && Catch::Contains("error_stats"));
  y[1] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(mse(view(x), view(y)), Catch::Contains("reference[4]"));  // the reference is named first
  x[4] = 5;
  x[5] = 6;
  CHECK_THROWS_WITH(sqnr_db(view(x), view(y)), Catch::Contains("approximation[1] = -inf"));
  y[1] = 2;
  // Both infinite at the same place: inf - inf is caught as well.
  x[0] = y[0] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(cosine_similarity(view(x), view(y)), Catch::Contains("reference[0] = inf"));
  x[0] = y[0] = 1;

  // Strided: the index is row-major, not the memory offset. x seen transposed: element (1, 0) is x[1].
  x[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(max_abs_error(TensorView<const float>(x.data(), Shape{3, 2}, Strides{1, 3}),
                                  TensorView<const float>(y.data(), Shape{3, 2})),
                    Catch::Contains("reference[2] = nan"));
  x[1] = 2;

  CHECK_THROWS_WITH(error_stats(view(x), TensorView<const float>(y.data(), Shape{3, 2})),
                    Catch::Contains("approximation.shape = [3, 2]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(error_stats(TensorView<const float>(x.data(), Shape{0}), TensorView<const float>(y.data(), Shape{0})),
                    Catch::Contains("at least one element"));
  CHECK_THROWS_AS(error_stats(TensorView<const float>(x.data(), Shape{6}, Device::cuda(0)), make_view(y)), Error);
  CHECK(error_stats(view(x), view(y)).mse == 0.0);
}

TEST_CASE("sums of two parts accumulate to the figures of the whole", "[metrics][error]") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1000), y(1000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng);
    y[i] = x[i] + 0.01f * normal(rng);
  }
  ErrorSums total;
  accumulate(total, error_sums(TensorView<const float>(x.data(), Shape{400}), TensorView<const float>(y.data(), Shape{400})));
  accumulate(total, error_sums(TensorView<const float>(x.data() + 400, Shape{600}),
                               TensorView<const float>(y.data() + 400, Shape{600})));
  const ErrorStats parts = stats_from_sums(total);
  const ErrorStats whole = error_stats(TensorView<const float>(x.data(), Shape{1000}), TensorView<const float>(y.data(), Shape{1000}));
  CHECK(parts.count == whole.count);
  CHECK(parts.max_abs == whole.max_abs);
  CHECK(parts.mse == Approx(whole.mse).epsilon(1e-12));
  CHECK(parts.sqnr_db == Approx(whole.sqnr_db).epsilon(1e-12));
  CHECK(parts.cosine == Approx(whole.cosine).epsilon(1e-12));
  CHECK(stats_from_sums(ErrorSums{}).mse == 0.0);  // nothing compared
}
