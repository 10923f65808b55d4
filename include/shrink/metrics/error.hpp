// Error of an approximation against a reference tensor: MSE, max-abs, SQNR in dB, cosine similarity.
//
// With x the reference, y the approximation and n elements, all sums in double in one pass:
//   mse      = sum (x - y)^2 / n
//   max_abs  = max |x - y|
//   sqnr_db  = 10 log10(sum x^2 / sum (x - y)^2); +inf when y == x exactly (zero error, even for
//              x == 0 everywhere), -inf when x == 0 everywhere and the error is not zero
//   cosine   = sum x y / (sqrt(sum x^2) sqrt(sum y^2)), clamped to [-1, 1]; 1 when both are all zero,
//              0 when exactly one of them is all zero
// Inputs: host views of one shape, any strides, at least one element, every element finite (a NaN or
// +-inf is an error naming the argument and the first bad row-major index).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nonfinite_check.hpp"

namespace shrink::metrics {

struct ErrorStats {
  double mse = 0.0;      // mean of (x - y)^2
  double max_abs = 0.0;  // max |x - y|
  double sqnr_db = 0.0;  // 10 log10(sum x^2 / sum (x - y)^2), +inf for zero error
  double cosine = 0.0;   // x.y / (|x| |y|) in [-1, 1]; 1 for two zero vectors, 0 for one
  std::int64_t count = 0;  // elements compared
};

namespace detail {

// The sums every metric is built from, after the checks on shapes and values.
struct ErrorSums {
  double sum_xx = 0.0;
  double sum_yy = 0.0;
  double sum_xy = 0.0;
  double sum_ee = 0.0;
  double max_abs = 0.0;
  std::int64_t count = 0;
};

inline ErrorSums error_sums(const TensorView<const float>& reference, const TensorView<const float>& approximation,
                            const char* function) {
  require_host_view(reference, function, "reference");
  require_host_view(approximation, function, "approximation");
  if (reference.shape() != approximation.shape())
    fail(function, "approximation.shape", to_string(approximation.shape()),
         "the reference's shape " + to_string(reference.shape()));
  if (reference.empty())
    fail(function, "reference.shape", to_string(reference.shape()), "at least one element");
  const std::int64_t length = cpu::row_length(reference.shape());
  const std::int64_t stride_x = cpu::row_stride(reference.strides());
  const std::int64_t stride_y = cpu::row_stride(approximation.strides());
  ErrorSums s;
  bool nonfinite = false;
  cpu::for_each_row(reference.shape(), reference.strides(), approximation.strides(),
                    [&](std::int64_t, std::int64_t offset_x, std::int64_t offset_y) {
                      const float* x = reference.data() + offset_x;
                      const float* y = approximation.data() + offset_y;
                      for (std::int64_t i = 0; i < length; ++i) {
                        const double a = x[i * stride_x];
                        const double b = y[i * stride_y];
                        const double e = a - b;
                        // a - b is NaN exactly when a or b is NaN or infinite (inf - inf, inf - finite = inf).
                        nonfinite |= !(std::fabs(e) <= std::numeric_limits<double>::max());
                        s.sum_xx += a * a;
                        s.sum_yy += b * b;
                        s.sum_xy += a * b;
                        s.sum_ee += e * e;
                        s.max_abs = std::max(s.max_abs, std::fabs(e));
                      }
                    });
  if (nonfinite) {
    cpu::require_finite(reference, function, "reference");
    cpu::require_finite(approximation, function, "approximation");
  }
  s.count = reference.numel();
  return s;
}

inline double sqnr_db_from_sums(const ErrorSums& s) {
  if (s.sum_ee == 0.0) return std::numeric_limits<double>::infinity();
  if (s.sum_xx == 0.0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(s.sum_xx / s.sum_ee);
}

inline double cosine_from_sums(const ErrorSums& s) {
  if (s.sum_xx == 0.0 && s.sum_yy == 0.0) return 1.0;
  if (s.sum_xx == 0.0 || s.sum_yy == 0.0) return 0.0;
  const double c = s.sum_xy / (std::sqrt(s.sum_xx) * std::sqrt(s.sum_yy));
  return std::min(1.0, std::max(-1.0, c));
}

}  // namespace detail

// The sums every measure is built from, public so that several tensor pairs can give one overall figure:
// add each pair's error_sums into a total with accumulate, then take stats_from_sums of the total.
using ErrorSums = detail::ErrorSums;

inline ErrorSums error_sums(TensorView<const float> reference, TensorView<const float> approximation) {
  return detail::error_sums(reference, approximation, "shrink::metrics::error_sums");
}

inline void accumulate(ErrorSums& total, const ErrorSums& part) {
  total.sum_xx += part.sum_xx;
  total.sum_yy += part.sum_yy;
  total.sum_xy += part.sum_xy;
  total.sum_ee += part.sum_ee;
  total.max_abs = std::max(total.max_abs, part.max_abs);
  total.count += part.count;
}

// Every measure from the sums (mse 0 when nothing was compared).
inline ErrorStats stats_from_sums(const ErrorSums& s) {
  ErrorStats stats;
  stats.count = s.count;
  stats.mse = s.count == 0 ? 0.0 : s.sum_ee / static_cast<double>(s.count);
  stats.max_abs = s.max_abs;
  stats.sqnr_db = detail::sqnr_db_from_sums(s);
  stats.cosine = detail::cosine_from_sums(s);
  return stats;
}

// Every measure at once, from one pass over both tensors.
inline ErrorStats error_stats(TensorView<const float> reference, TensorView<const float> approximation) {
  return stats_from_sums(detail::error_sums(reference, approximation, "shrink::metrics::error_stats"));
}

inline double mse(TensorView<const float> reference, TensorView<const float> approximation) {
  const detail::ErrorSums s = detail::error_sums(reference, approximation, "shrink::metrics::mse");
  return s.sum_ee / static_cast<double>(s.count);
}

inline double max_abs_error(TensorView<const float> reference, TensorView<const float> approximation) {
  return detail::error_sums(reference, approximation, "shrink::metrics::max_abs_error").max_abs;
}

inline double sqnr_db(TensorView<const float> reference, TensorView<const float> approximation) {
  return detail::sqnr_db_from_sums(detail::error_sums(reference, approximation, "shrink::metrics::sqnr_db"));
}

inline double cosine_similarity(TensorView<const float> reference, TensorView<const float> approximation) {
  return detail::cosine_from_sums(
      detail::error_sums(reference, approximation, "shrink::metrics::cosine_similarity"));
}

}  // namespace shrink::metrics
