// Tests for shrink/cpu/vector_math.hpp: exp/log accuracy against double, special values, vector == scalar bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "shrink/cpu/simd.hpp"
#include "shrink/cpu/vector_math.hpp"
#include "support/special_floats.hpp"

using namespace shrink::cpu;

namespace {

using shrink::test::kInf;
using shrink::test::kNaN;

constexpr double kBound = 2e-7;  // the documented bound is tighter; this is the contract the losses rely on

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

std::string hex(float x) {
  std::ostringstream s;
  s << std::hexfloat << x << " (" << std::defaultfloat << x << ")";
  return s.str();
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// Eight at a time; the last partial group goes through a padded buffer.
template <bool Exp>
SHRINK_TARGET_AVX2_FMA void apply8(const float* x, float* y, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, Exp ? exp8(_mm256_loadu_ps(x + i)) : log8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
    for (std::size_t j = i; j < n; ++j) in[j - i] = x[j];
    _mm256_storeu_ps(out, Exp ? exp8(_mm256_loadu_ps(in)) : log8(_mm256_loadu_ps(in)));
    for (std::size_t j = i; j < n; ++j) y[j] = out[j - i];
  }
}
#endif

// exp8 / log8 over x; false when the CPU has no AVX2 + FMA (the caller skips its vector checks).
bool vector_apply(bool exp, const std::vector<float>& x, std::vector<float>& y) {
  y.assign(x.size(), 0.0f);
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (!use_avx2_fma()) return false;
  if (exp) {
    apply8<true>(x.data(), y.data(), x.size());
  } else {
    apply8<false>(x.data(), y.data(), x.size());
  }
  return true;
#else
  (void)exp;
  return false;
#endif
}

std::vector<float> scalar_apply(bool exp, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = exp ? exp_scalar(x[i]) : log_scalar(x[i]);
  return y;
}

// x through the scalar twin and, when the CPU has AVX2 + FMA, through every lane of the vector function.
std::vector<float> both_paths(bool exp, float x) {
  std::vector<float> results = scalar_apply(exp, {x}), vector;
  if (vector_apply(exp, std::vector<float>(8, x), vector)) results.insert(results.end(), vector.begin(), vector.end());
  return results;
}

// Every path gives expected: the same bits (so +0 is not -0), or any NaN for a NaN.
void check_special(bool exp, float x, float expected) {
  for (const float y : both_paths(exp, x)) {
    INFO((exp ? "exp(" : "log(") << hex(x) << ") = " << hex(y) << ", expected " << hex(expected));
    if (std::isnan(expected)) {
      CHECK(std::isnan(y));
    } else {
      CHECK(to_bits(y) == to_bits(expected));
    }
  }
}

struct MaxError {
  double error = 0.0;
  float at = 0.0f;
  void add(float x, float y, double reference) {
    const double e = std::fabs(static_cast<double>(y) - reference) / std::fabs(reference);
    if (!(e <= error)) {  // NaN results count as the worst error
      error = std::isnan(e) ? INFINITY : e;
      at = x;
    }
  }
};

// Every stride-th float from lo to hi (same sign), both ends included.
void add_sweep(std::vector<float>& out, float lo, float hi, std::uint32_t stride) {
  const bool negative = hi <= 0.0f;
  std::uint32_t a = to_bits(std::fabs(lo)), b = to_bits(std::fabs(hi));
  if (a > b) std::swap(a, b);
  for (std::uint64_t u = a; u <= b; u += stride)
    out.push_back(negative ? -from_bits(static_cast<std::uint32_t>(u)) : from_bits(static_cast<std::uint32_t>(u)));
  out.push_back(negative ? -from_bits(b) : from_bits(b));
}

// Every float within count steps of x.
void add_around(std::vector<float>& out, float x, int count) {
  float lo = x, hi = x;
  for (int i = 0; i < count; ++i) {
    lo = std::nextafter(lo, -kInf);
    hi = std::nextafter(hi, kInf);
  }
  for (float v = lo; v <= hi; v = std::nextafter(v, kInf)) out.push_back(v);
}

// Runs the scalar and (when the CPU has it) the vector function over x, checks both against the double reference.
void check_accuracy(bool exp, const std::vector<float>& x, const char* what) {
  const std::vector<float> scalar = scalar_apply(exp, x);
  std::vector<float> vector;
  const bool have_vector = vector_apply(exp, x, vector);
  MaxError scalar_error, vector_error;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double reference = exp ? std::exp(static_cast<double>(x[i])) : std::log(static_cast<double>(x[i]));
    if (reference == 0.0) {  // log(1): exactly +0
      CHECK(to_bits(scalar[i]) == 0u);
      if (have_vector) CHECK(to_bits(vector[i]) == 0u);
      continue;
    }
    scalar_error.add(x[i], scalar[i], reference);
    if (have_vector) vector_error.add(x[i], vector[i], reference);
  }
  std::ostringstream report;
  report << what << ", " << x.size() << " points: max relative error " << scalar_error.error
         << " (scalar, at x = " << hex(scalar_error.at) << "), ";
  if (have_vector) {
    report << vector_error.error << " (vector)";
  } else {
    report << "vector skipped: no AVX2 + FMA";
  }
  WARN(report.str());
  CAPTURE(hex(scalar_error.at), hex(vector_error.at));
  CHECK(scalar_error.error <= kBound);
  if (have_vector) CHECK(vector_error.error <= kBound);
}

}  // namespace

TEST_CASE("exp is within 2e-7 relative of exp in double over its normal range", "[cpu][vector_math]") {
  using shrink::cpu::detail::vmath::kExpMax;
  using shrink::cpu::detail::vmath::kExpMin;
  std::vector<float> x;
  add_sweep(x, 0.0f, kExpMax, 509);   // ~2.2M floats across [0, kExpMax], every binade
  add_sweep(x, -0.0f, kExpMin, 509);  // and [kExpMin, 0]
  add_sweep(x, -0.5f, -0.25f, 7);     // r's whole range densely: n = 0 and its neighbours
  add_sweep(x, 0.25f, 0.5f, 7);
  add_sweep(x, 80.0f, kExpMax, 3);   // the largest results
  add_sweep(x, -87.0f, kExpMin, 3);  // the smallest normal results
  add_around(x, kExpMin, 0);
  add_around(x, kExpMax, 0);
  // Around k ln2 (r near 0) and (k + 1/2) ln2 (|r| at its largest, n changing).
  for (int k = -126; k <= 127; ++k) add_around(x, static_cast<float>(k * 0.6931471805599453), 64);
  for (int k = -125; k <= 127; ++k) add_around(x, static_cast<float>((k + 0.5) * 0.6931471805599453), 64);
  x.erase(std::remove_if(x.begin(), x.end(), [](float v) { return v < kExpMin || v > kExpMax; }), x.end());
  check_accuracy(true, x, "exp");
}

TEST_CASE("log is within 2e-7 relative of log in double for every positive finite float", "[cpu][vector_math]") {
  std::vector<float> x;
  add_sweep(x, from_bits(1u), std::numeric_limits<float>::max(), 1021);  // ~2.1M floats, subnormals included
  add_sweep(x, 0.99f, 1.01f, 1);                                         // every float near 1 (~250k)
  add_sweep(x, 0.70f, 0.72f, 5);                                         // m's ends: f near sqrt(1/2) - 1
  add_sweep(x, 1.40f, 1.43f, 5);                                         // and sqrt 2 - 1
  // Around every power of two, subnormal ones too.
  for (int k = -149; k <= 127; ++k) add_around(x, std::ldexp(1.0f, k), 64);
  x.erase(std::remove_if(x.begin(), x.end(), [](float v) { return !(v > 0.0f); }), x.end());
  check_accuracy(false, x, "log");
}

TEST_CASE("exp special values: zeros, subnormals, infinities, NaN, the flush and overflow edges",
          "[cpu][vector_math]") {
  using shrink::cpu::detail::vmath::kExpMax;
  using shrink::cpu::detail::vmath::kExpMin;
  const float flt_min = std::numeric_limits<float>::min(), denorm_min = from_bits(1u);
  const float below_min = std::nextafter(kExpMin, -kInf), above_max = std::nextafter(kExpMax, kInf);
  for (const float x : {0.0f, -0.0f, denorm_min, -denorm_min, 1e-40f, -1e-40f}) check_special(true, x, 1.0f);
  check_special(true, -kInf, 0.0f);
  check_special(true, kInf, kInf);
  check_special(true, kNaN, kNaN);
  check_special(true, -kNaN, kNaN);
  // Below kExpMin the true result is subnormal: flushed to +0. Above kExpMax it rounds to +inf.
  for (const float x : {below_min, -87.5f, -100.0f, -1e30f}) check_special(true, x, 0.0f);
  for (const float x : {above_max, 88.75f, 1e30f}) check_special(true, x, kInf);
  CHECK(std::exp(static_cast<double>(below_min)) < static_cast<double>(flt_min));
  CHECK(std::exp(static_cast<double>(kExpMin)) >= static_cast<double>(flt_min));
  CHECK(std::isinf(static_cast<float>(std::exp(static_cast<double>(above_max)))));
  for (const float y : both_paths(true, kExpMin)) {
    CHECK(std::fpclassify(y) == FP_NORMAL);  // the smallest result kept is normal
    CHECK(y == Approx(std::exp(static_cast<double>(kExpMin))).epsilon(kBound));
  }
  for (const float y : both_paths(true, kExpMax))
    CHECK(y == Approx(std::exp(static_cast<double>(kExpMax))).epsilon(kBound));
  for (const float y : both_paths(true, 1.0f)) CHECK(y == Approx(2.718281828459045).epsilon(kBound));
  for (const float y : both_paths(true, -1.0f)) CHECK(y == Approx(0.36787944117144233).epsilon(kBound));
}

TEST_CASE("log special values: zeros, subnormals, negatives, infinities, NaN, one", "[cpu][vector_math]") {
  const float flt_min = std::numeric_limits<float>::min(), denorm_min = from_bits(1u);
  check_special(false, 0.0f, -kInf);
  check_special(false, -0.0f, -kInf);
  for (const float x : {-denorm_min, -flt_min, -1.0f, -3e38f, -kInf}) check_special(false, x, kNaN);
  check_special(false, kInf, kInf);
  check_special(false, kNaN, kNaN);
  check_special(false, -kNaN, kNaN);
  check_special(false, 1.0f, 0.0f);  // +0 exactly
  for (const float x : {denorm_min, from_bits(2u), 1e-40f, std::nextafter(flt_min, 0.0f), flt_min,
                        std::nextafter(flt_min, 1.0f), std::numeric_limits<float>::max()}) {
    const double reference = std::log(static_cast<double>(x));
    for (const float y : both_paths(false, x)) {
      INFO("x = " << hex(x) << ", log = " << y);
      CHECK(std::fabs(y - reference) <= kBound * std::fabs(reference));
    }
  }
}

TEST_CASE("exp8 and log8 return exactly exp_scalar's and log_scalar's bits, lane for lane",
          "[cpu][vector_math][simd]") {
  if (!use_avx2_fma()) {
    WARN("no AVX2 + FMA on this CPU: vector == scalar check skipped");
    return;
  }
  std::mt19937 rng(2024);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  std::uniform_real_distribution<float> exp_range(-90.0f, 90.0f), log_range(0.0f, 4.0f), near_zero(-1.0f, 1.0f);
  std::vector<float> x;
  for (int i = 0; i < 400'000; ++i) x.push_back(from_bits(any_bits(rng)));  // NaNs, infinities, subnormals too
  for (int i = 0; i < 300'000; ++i) x.push_back(exp_range(rng));
  for (int i = 0; i < 300'000; ++i) x.push_back(log_range(rng));
  for (int i = 0; i < 100'000; ++i) x.push_back(near_zero(rng) * 1e-3f);
  for (std::uint32_t b : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FA00000u, 0xFFFFFFFFu, 0x7F800000u, 0xFF800000u}) {
    x.push_back(from_bits(b));  // quiet, signalling and payload-carrying NaNs, infinities
  }
  x.push_back(shrink::cpu::detail::vmath::kExpMin);
  x.push_back(shrink::cpu::detail::vmath::kExpMax);
  x.push_back(1.0f);
  x.push_back(-0.0f);
  for (const bool exp : {true, false}) {
    std::vector<float> vector;
    REQUIRE(vector_apply(exp, x, vector));
    const std::vector<float> scalar = scalar_apply(exp, x);
    std::size_t mismatches = 0;
    float first = 0.0f;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (to_bits(vector[i]) != to_bits(scalar[i]) && mismatches++ == 0) first = x[i];
    }
    INFO((exp ? "exp" : "log") << ", first mismatch at x = " << hex(first));
    CHECK(mismatches == 0);
  }
}
