// Helpers of the linear-layer tests: double-precision references, error bounds, poisoned outputs, SIMD levels.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cpu/simd.hpp"
#include "support/activation_reference.hpp"
#include "support/simd_levels.hpp"

namespace shrink::test {

// A float product's reference: ref[m, n] = Σ_k x[m, k] · w[n, k] in double, with Σ |x · w| for its error bound.
struct ProductReference {
  std::vector<double> value;
  std::vector<double> magnitude;
};

inline ProductReference reference_product(const std::vector<float>& x, const std::vector<float>& w,
                                          std::int64_t m_total, std::int64_t n_total, std::int64_t k_total) {
  ProductReference r{std::vector<double>(static_cast<std::size_t>(m_total * n_total)),
                     std::vector<double>(static_cast<std::size_t>(m_total * n_total))};
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t n = 0; n < n_total; ++n) {
      double s = 0, a = 0;
      for (std::int64_t k = 0; k < k_total; ++k) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(m * k_total + k)]) *
                         w[static_cast<std::size_t>(n * k_total + k)];
        s += p;
        a += std::fabs(p);
      }
      r.value[static_cast<std::size_t>(m * n_total + n)] = s;
      r.magnitude[static_cast<std::size_t>(m * n_total + n)] = a;
    }
  return r;
}

// Checks out[m, n] against act(scale[n] · ref + bias[n]) within the float summation bound K · 2^-23 · Σ|x · w|
// (twice the classic γ_K, for the order the kernels choose) plus a few ulps of the result.
inline void check_against_reference(const std::vector<float>& out, std::int64_t ld_out, const ProductReference& ref,
                                    std::int64_t m_total, std::int64_t n_total, std::int64_t k_total,
                                    const std::vector<float>& scales, const std::vector<float>& bias, Activation act) {
  const double unit = std::ldexp(1.0, -23);
  int reported = 0;
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t n = 0; n < n_total; ++n) {
      const std::size_t at = static_cast<std::size_t>(m * n_total + n);
      const double s = scales.empty() ? 1.0 : scales[static_cast<std::size_t>(n)];
      const double b = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(n)];
      const double pre = ref.value[at] * s + b;
      const double expected = activate_reference(pre, act);
      const double bound = (static_cast<double>(k_total) + 4) * unit * ref.magnitude[at] * s +
                           4 * unit * (std::fabs(pre) + std::fabs(b)) + 1e-30;
      const double got = out[static_cast<std::size_t>(m * ld_out + n)];
      if (!(std::fabs(got - expected) <= bound) && reported++ < 5) {
        INFO("m " << m << " n " << n << " got " << got << " expected " << expected << " bound " << bound);
        CHECK(std::fabs(got - expected) <= bound);
      }
    }
  CHECK(reported == 0);
}

// A value no kernel writes: outputs are filled with it before a call that must fail, and checked after.
inline constexpr float kPoison = -1234.5f;

inline bool all_poison(const std::vector<float>& v) {
  for (float f : v)
    if (std::memcmp(&f, &kPoison, sizeof f) != 0) return false;
  return true;
}

// Runs fn at every SIMD level the CPU supports (scalar first), restoring the level afterwards.
template <class Fn>
void at_each_level(Fn&& fn) {
  SimdLevelGuard guard;
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    INFO("SIMD level " << static_cast<int>(level));
    fn(level);
  }
}

// Expects fn to throw shrink::Error whose message contains `fragment`.
template <class Fn>
void require_error_mentioning(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    FAIL("no shrink::Error; expected one mentioning '" << fragment << "'");
  } catch (const Error& e) {
    INFO("message: " << e.what());
    CHECK(std::string(e.what()).find(fragment) != std::string::npos);
  }
}

inline std::vector<float> normal_values(std::size_t n, std::mt19937& rng, float sigma = 1.0f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  return v;
}

// n values drawn uniformly from [low, high] (the whole int8 range unless told).
inline std::vector<std::int8_t> random_int8(std::size_t n, std::mt19937& rng, int low = -128, int high = 127) {
  std::uniform_int_distribution<int> d(low, high);
  std::vector<std::int8_t> v(n);
  for (auto& b : v) b = static_cast<std::int8_t>(d(rng));
  return v;
}

}  // namespace shrink::test
