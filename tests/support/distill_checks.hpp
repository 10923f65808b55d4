// Comparison helpers shared by the distillation tests: tolerances against float64 references, rounding bounds of
// half and bfloat16, and the poison check that proves a failed call wrote nothing.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/distill/reduction.hpp"
#include "support/element_types.hpp"
#include "support/golden.hpp"
#include "support/special_floats.hpp"
#include "support/strings.hpp"

namespace shrink::test {

inline const distill::Reduction kDistillReductions[] = {distill::Reduction::none, distill::Reduction::sum,
                                                       distill::Reduction::mean, distill::Reduction::batchmean};

template <class T>
std::vector<double> as_doubles(const std::vector<T>& v) {
  std::vector<double> out;
  for (const T& x : v) out.push_back(static_cast<double>(static_cast<float>(x)));
  return out;
}

// |got - want| <= 1e-5 |want|, or 1e-6 of the largest |want| for entries near zero.
inline void check_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  double largest = 0.0;
  for (double w : want) largest = std::max(largest, std::fabs(w));
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double tolerance = std::max(1e-5 * std::fabs(want[i]), 1e-6 * largest);
    if (!(std::fabs(got[i] - want[i]) <= tolerance))
      FAIL_CHECK(what << "[" << i << "] = " << got[i] << ", torch: " << want[i]);
  }
}

// half: 2^-11 relative (2^-24 absolute for subnormals); bfloat16: 2^-8.
template <class T>
bool within_rounding(float got, float want) {
  const double u = std::is_same<T, half>::value ? 0x1p-11 : 0x1p-8;
  return std::fabs(static_cast<double>(got) - want) <= u * std::fabs(want) + 0x1p-24;
}

// Every element still holds `poison`: nothing was written.
template <class T>
bool all_equal_to(const std::vector<T>& v, float poison) {
  return std::all_of(v.begin(), v.end(), [poison](const T& x) { return static_cast<float>(x) == poison; });
}

// A feature-loss golden case's checks after a call with reduction r: the value, the per-row values (none), both
// gradients against the fields "<what>/<reduction>".
inline void check_feature_golden(const GoldenCase& c, distill::Reduction r, const distill::Loss& loss,
                                 const std::vector<float>& grad_student, const std::vector<float>& grad_teacher) {
  const std::string name = to_string(r);
  check_close({loss.value}, c.doubles("value/" + name), "value");
  if (r == distill::Reduction::none) {
    check_close(loss.per_row, c.doubles("per_row/none"), "per_row");
  } else {
    CHECK(loss.per_row.empty());
  }
  check_close(as_doubles(grad_student), c.doubles("grad_student/" + name), "grad_student");
  check_close(as_doubles(grad_teacher), c.doubles("grad_teacher/" + name), "grad_teacher");
}

// Any element type (float, half, bfloat16, double) as a double.
template <class T>
double to_d(T x) {
  return static_cast<double>(static_cast<float>(x));
}
inline double to_d(double x) { return x; }

// The relative rounding of one element of T.
template <class T>
double unit_roundoff() {
  if (std::is_same<T, half>::value) return 0x1p-11;
  if (std::is_same<T, bfloat16>::value) return 0x1p-8;
  return 0x1p-24;
}

// The largest finite magnitude of v.
template <class T>
double largest(const std::vector<T>& v) {
  double m = 0.0;
  for (const T& x : v)
    if (std::isfinite(to_d(x))) m = std::max(m, std::fabs(to_d(x)));
  return m;
}

// |got - want| <= absolute + relative * |want| everywhere (equal infinities pass); reports the first misses.
template <class A, class B>
void check_near(const std::vector<A>& got, const std::vector<B>& want, double absolute, double relative,
                const std::string& what) {
  REQUIRE(got.size() == want.size());
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_d(got[i]), w = to_d(want[i]);
    const bool ok = (std::isinf(w) && g == w) || std::fabs(g - w) <= absolute + relative * std::fabs(w);
    if (!ok && reported++ < 5)
      FAIL_CHECK(what << "[" << i << "] = " << g << ", expected " << w << " (difference " << g - w << ", allowed "
                      << absolute + relative * std::fabs(w) << ")");
  }
}

// Relative closeness; an infinite or NaN expectation must be met exactly.
inline bool close_rel(double got, double want, double relative) {
  if (std::isinf(want) || std::isnan(want)) return got == want || (std::isnan(got) && std::isnan(want));
  return std::fabs(got - want) <= relative * std::fabs(want);
}

// The call throws shrink::Error whose message contains `needle`, and leaves grad bit for bit as it was.
template <class F, class T>
void check_refused(F&& call, const std::string& needle, const std::vector<T>& grad) {
  INFO("expected an error naming: " << needle);
  const std::vector<T> before = grad;
  CHECK_THROWS_AS(call(), Error);
  CHECK_THROWS_WITH(call(), Catch::Contains(needle));
  CHECK(same_bits(grad, before));
}

// A loss computed at another SIMD level against the reference level's: values within 1e-6 relative, gradients
// within 1e-6 of the largest, plus, for 16-bit outputs, two units of rounding (a last-bit float difference may
// round the other way) and half's smallest subnormal.
template <class T>
void check_same_across_levels(const distill::Loss& loss, const std::vector<T>& grad, const distill::Loss& base,
                              const std::vector<T>& base_grad) {
  CHECK(close_rel(loss.value, base.value, 1e-6));
  for (std::size_t i = 0; i < loss.per_row.size(); ++i) CHECK(close_rel(loss.per_row[i], base.per_row[i], 1e-6));
  const double ulp = std::is_same<T, float>::value ? 0.0 : 2.0 * unit_roundoff<T>();
  const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
  check_near(grad, base_grad, 1e-6 * largest(base_grad) + sub, ulp, "grad");
}

// A gradient written through a row stride into `strided` (element 0 unused, rows of `n` every `stride` floats from
// element 1) equals the contiguous `flat` gradient bit for bit, and every gap still holds `poison`.
inline void check_strided_grad(const std::vector<float>& strided, const std::vector<float>& flat, std::int64_t stride,
                               std::int64_t n, float poison) {
  for (std::size_t i = 0; i < strided.size(); ++i) {
    const std::int64_t at = static_cast<std::int64_t>(i) - 1;
    if (at >= 0 && at % stride < n) {
      const float want = flat[static_cast<std::size_t>(at / stride * n + at % stride)];
      if (std::memcmp(&strided[i], &want, sizeof(float)) != 0) FAIL_CHECK("strided grad differs at " << i);
    } else if (strided[i] != poison) {
      FAIL_CHECK("gap written at " << i);
    }
  }
}

}  // namespace shrink::test
