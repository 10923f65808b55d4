// Tests for the arithmetic helpers of shrink/quant/observers/pytorch_histogram.hpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "shrink/quant/observers/pytorch_histogram.hpp"

using shrink::quant::pytorch::exact_fmod;

namespace {
std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
}  // namespace

TEST_CASE("exact_fmod returns std::fmod's bits", "[quant][observer][histogram]") {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::int64_t mismatches = 0;
  for (int i = 0; i < 2'000'000; ++i) {
    const float a = std::ldexp(mantissa(rng), exponent(rng));
    float b = std::ldexp(mantissa(rng), exponent(rng) / 4);  // quotients from tiny to ~2^50
    if (b == 0.0f) continue;
    if (i % 5 == 0) b = a / static_cast<float>(1 + i % 97);  // near-exact multiples
    mismatches += bits(exact_fmod(a, b)) != bits(std::fmod(a, b));
  }
  CHECK(mismatches == 0);
  CHECK(bits(exact_fmod(-6.0f, 3.0f)) == bits(std::fmod(-6.0f, 3.0f)));  // -0
  CHECK(bits(exact_fmod(-0.0f, 3.0f)) == bits(-0.0f));
  CHECK(exact_fmod(1e-45f, 3.0f) == 1e-45f);
  CHECK(exact_fmod(7.5f, -2.0f) == 1.5f);
}
