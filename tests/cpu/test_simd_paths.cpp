// Every SIMD level of the CPU loops (scalar, SSE2, AVX2 where the CPU has it) gives identical results.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "shrink/cpu/cast.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/cpu/simd.hpp"

using namespace shrink;
using namespace shrink::cpu;

namespace {

// Runs fn at every level the CPU supports, restoring the default afterwards.
template <class Fn>
void at_each_level(Fn&& fn) {
  const SimdLevel best = detect_simd_level();
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::sse2, SimdLevel::avx2}) {
    if (static_cast<int>(level) > static_cast<int>(best)) continue;
    simd_level() = level;
    fn(level);
  }
  simd_level() = best;
}

std::vector<float> awkward_values(std::size_t n) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = i % 7 == 0 ? static_cast<float>(static_cast<int>(i % 300) - 150) + 0.5f  // ties
                                                       : normal(rng);
  return v;
}

}  // namespace

TEST_CASE("quantize, dequantize and fake-quantize runs agree across SIMD levels", "[cpu][simd]") {
  const std::vector<float> x = awkward_values(1000 + 37);  // odd length reaches every tail
  const AffineParams params[] = {AffineParams(1.0f, 0, -128, 127), AffineParams(0.37f, 3, -128, 127),
                                 AffineParams(0.5f, 128, 0, 255), AffineParams(0.25f, 0, -64, 63)};
  for (const AffineParams& p : params) {
    std::vector<std::int8_t> q_ref;
    std::vector<std::uint8_t> u_ref;
    std::vector<float> d_ref, f_ref;
    std::vector<std::uint8_t> m_ref;
    at_each_level([&](SimdLevel level) {
      INFO("level " << static_cast<int>(level) << " scale " << p.scale);
      std::vector<std::int8_t> q(x.size());
      std::vector<std::uint8_t> u(x.size()), m(x.size());
      std::vector<float> d(x.size()), f(x.size());
      // Each output type gets the parameters of its own range.
      const bool unsigned_range = p.low + static_cast<float>(p.zero_point) >= 0.0f;  // qmin >= 0
      if (unsigned_range) {
        CHECK(quantize_run(x.data(), u.data(), static_cast<std::int64_t>(x.size()), p));
        dequantize_run(u.data(), d.data(), static_cast<std::int64_t>(x.size()), p);
      } else {
        CHECK(quantize_run(x.data(), q.data(), static_cast<std::int64_t>(x.size()), p));
        dequantize_run(q.data(), d.data(), static_cast<std::int64_t>(x.size()), p);
      }
      fake_quantize_run(x.data(), f.data(), m.data(), static_cast<std::int64_t>(x.size()), p);
      if (level == SimdLevel::scalar) {
        q_ref = q, u_ref = u, d_ref = d, f_ref = f, m_ref = m;
        for (std::size_t i = 0; i < x.size(); ++i)
          REQUIRE((unsigned_range ? u[i] : static_cast<std::uint8_t>(q[i])) ==
                  static_cast<std::uint8_t>(quantize_value(x[i], p)));
        return;
      }
      CHECK(q == q_ref);
      CHECK(u == u_ref);
      CHECK(d == d_ref);
      CHECK(f == f_ref);
      CHECK(m == m_ref);
    });
  }
}

TEST_CASE("finite_range and the fused finite check agree across SIMD levels", "[cpu][simd]") {
  std::vector<float> x = awkward_values(777);
  x[100] = std::numeric_limits<float>::quiet_NaN();
  x[500] = std::numeric_limits<float>::infinity();
  x[776] = -std::numeric_limits<float>::infinity();
  at_each_level([&](SimdLevel level) {
    INFO("level " << static_cast<int>(level));
    const FiniteRange r = finite_range(x.data(), static_cast<std::int64_t>(x.size()));
    CHECK(r.nonfinite == 3);
    float lo = INFINITY, hi = -INFINITY;
    for (float v : x)
      if (std::isfinite(v)) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
    CHECK(r.min == lo);
    CHECK(r.max == hi);
    CHECK(first_nonfinite(x.data(), static_cast<std::int64_t>(x.size())) == 100);
    std::vector<std::int8_t> q(x.size());
    CHECK_FALSE(quantize_run(x.data(), q.data(), static_cast<std::int64_t>(x.size()), AffineParams(1.0f, 0, -128, 127)));
    CHECK(quantize_run(x.data(), q.data(), 100, AffineParams(1.0f, 0, -128, 127)));
  });
}

TEST_CASE("half casts agree across SIMD levels, NaN payloads, subnormals and ties included", "[cpu][simd][half]") {
  std::vector<float> x = awkward_values(4096 + 5);
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (std::size_t i = 0; i < x.size(); i += 3) {  // every kind of float bit pattern, NaNs and infinities too
    const std::uint32_t b = any_bits(rng);
    std::memcpy(&x[i], &b, sizeof b);
  }
  std::vector<std::uint16_t> ref_bits;
  std::vector<std::uint32_t> ref_back;
  at_each_level([&](SimdLevel level) {
    INFO("level " << static_cast<int>(level));
    std::vector<half> h(x.size());
    std::vector<float> back(x.size());
    float_to_half(x.data(), h.data(), static_cast<std::int64_t>(x.size()));
    half_to_float(h.data(), back.data(), static_cast<std::int64_t>(x.size()));
    std::vector<std::uint16_t> bits(x.size());
    std::vector<std::uint32_t> back_bits(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      bits[i] = h[i].to_bits();
      std::memcpy(&back_bits[i], &back[i], sizeof(float));
    }
    if (level == SimdLevel::scalar) {
      ref_bits = bits;
      ref_back = back_bits;
      return;
    }
    CHECK(bits == ref_bits);
    CHECK(back_bits == ref_back);
  });
}
