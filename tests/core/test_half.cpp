// Tests for shrink/core/half.hpp: PyTorch goldens, exhaustive round trips and ties, NaN rules, constants.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "support/float_bits.hpp"
#include "support/golden.hpp"

using namespace shrink;

namespace {

using test::from_bits;

std::string hex(std::uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// Checks one golden case of a 16-bit type T against PyTorch: encoding bits (NaN: a NaN of the input's sign),
// and decoding of PyTorch's code (NaN: any NaN).
template <class T>
void check_float16_case(const test::GoldenCase& c) {
  const auto& inputs = c.ints("input_bits");
  const auto& codes = c.ints("code");
  const auto& backs = c.ints("back_bits");
  REQUIRE(inputs.size() == codes.size());
  REQUIRE(backs.size() == codes.size());
  int mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float x = from_bits(inputs[i]);
    const T encoded(x);
    const T reference = T::from_bits(static_cast<std::uint16_t>(codes[i]));
    const bool encode_ok = std::isnan(x) ? encoded.is_nan() && (encoded.to_bits() >> 15) == (float_to_bits(x) >> 31)
                                         : encoded.to_bits() == reference.to_bits();
    const float back = reference.to_float();
    const float reference_back = from_bits(backs[i]);
    const bool decode_ok =
        std::isnan(reference_back) ? std::isnan(back) : float_to_bits(back) == float_to_bits(reference_back);
    if (!(encode_ok && decode_ok) && ++mismatches <= 5) {
      INFO(c.name << " [" << i << "] input " << hex(float_to_bits(x)) << " expected code " << codes[i] << " got "
                  << encoded.to_bits() << ", back " << hex(float_to_bits(back)) << " expected "
                  << hex(float_to_bits(reference_back)));
      CHECK(encode_ok);
      CHECK(decode_ok);
    }
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("half and bfloat16 are 2-byte plain bit containers", "[core][half]") {
  STATIC_REQUIRE(sizeof(half) == 2);
  STATIC_REQUIRE(alignof(half) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable<half>::value);
  STATIC_REQUIRE(std::is_trivially_default_constructible<half>::value);
  STATIC_REQUIRE(sizeof(bfloat16) == 2);
  STATIC_REQUIRE(alignof(bfloat16) == 2);
  STATIC_REQUIRE(std::is_trivially_copyable<bfloat16>::value);
  STATIC_REQUIRE(half::from_bits(0x3C00).to_bits() == 0x3C00);
  STATIC_REQUIRE(half::infinity().is_inf());
  STATIC_REQUIRE(bfloat16::quiet_nan().is_nan());
}

TEST_CASE("float -> half -> float matches PyTorch bit for bit", "[core][half][golden]") {
  int cases = 0;
  for (const auto& c : test::load_golden("golden/casts_float16.golden")) {
    if (c.name.rfind("half_", 0) != 0) continue;
    ++cases;
    check_float16_case<half>(c);
  }
  CHECK(cases == 3);
}

TEST_CASE("float -> bfloat16 -> float matches PyTorch bit for bit", "[core][half][golden]") {
  int cases = 0;
  for (const auto& c : test::load_golden("golden/casts_float16.golden")) {
    if (c.name.rfind("bfloat16_", 0) != 0) continue;
    ++cases;
    check_float16_case<bfloat16>(c);
  }
  CHECK(cases == 3);
}

TEST_CASE("every 16-bit code round-trips; NaNs come back quieted with sign and payload", "[core][half]") {
  int half_failures = 0, bfloat16_failures = 0;
  for (std::uint32_t code = 0; code <= 0xFFFF; ++code) {
    const auto bits = static_cast<std::uint16_t>(code);
    const half h = half::from_bits(bits);
    const std::uint16_t half_expected = h.is_nan() ? static_cast<std::uint16_t>(bits | 0x0200) : bits;
    if (half(h.to_float()).to_bits() != half_expected || h.is_nan() != std::isnan(h.to_float())) ++half_failures;
    const bfloat16 b = bfloat16::from_bits(bits);
    const std::uint16_t bfloat16_expected = b.is_nan() ? static_cast<std::uint16_t>(bits | 0x0040) : bits;
    if (bfloat16(b.to_float()).to_bits() != bfloat16_expected || b.is_nan() != std::isnan(b.to_float()))
      ++bfloat16_failures;
  }
  CHECK(half_failures == 0);
  CHECK(bfloat16_failures == 0);
}

TEST_CASE("halfway points between neighbouring halves round to the even code", "[core][half]") {
  int failures = 0;
  for (std::uint16_t code = 0; code < 0x7C00; ++code) {
    const float low = half::from_bits(code).to_float();
    const float high = half::from_bits(static_cast<std::uint16_t>(code + 1)).to_float();  // 0x7C00 is inf
    const double mid = (static_cast<double>(low) + static_cast<double>(high)) / 2;
    if (std::isinf(high)) {
      // 65520: halfway to the next (virtual) binade, rounds to the even code 0x7C00 = inf.
      if (half(65520.0f).to_bits() != 0x7C00 || half(std::nextafter(65520.0f, 0.0f)).to_bits() != 0x7BFF) ++failures;
      continue;
    }
    const auto even = static_cast<std::uint16_t>(code % 2 == 0 ? code : code + 1);
    const float m = static_cast<float>(mid);  // exact: 12 significant bits
    if (half(m).to_bits() != even || half(-m).to_bits() != (even | 0x8000)) ++failures;
    if (half(std::nextafter(m, 0.0f)).to_bits() != code) ++failures;
    if (half(std::nextafter(m, 1e30f)).to_bits() != code + 1) ++failures;
  }
  CHECK(failures == 0);
}

TEST_CASE("half edge values", "[core][half]") {
  CHECK(half(65504.0f).to_bits() == 0x7BFF);
  CHECK(half(1e6f).to_bits() == 0x7C00);
  CHECK(half(-1e6f).to_bits() == 0xFC00);
  CHECK(half(std::ldexp(1.0f, -24)).to_bits() == 0x0001);  // smallest subnormal
  CHECK(half(std::ldexp(1.0f, -25)).to_bits() == 0x0000);  // halfway to it: ties to even (zero)
  CHECK(half(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).to_bits() == 0x0001);
  CHECK(half(-0.0f).to_bits() == 0x8000);
  CHECK(half(std::ldexp(1.0f, -14)).to_bits() == 0x0400);
  CHECK(half(std::nextafter(std::ldexp(1.0f, -14), 0.0f)).to_bits() == 0x0400);  // rounds up into the normals
  CHECK(half(1.0f).to_bits() == 0x3C00);
  CHECK(half::max_finite().to_float() == 65504.0f);
  CHECK(half::lowest().to_float() == -65504.0f);
  CHECK(half::min_normal().to_float() == std::ldexp(1.0f, -14));
  CHECK(half::min_subnormal().to_float() == std::ldexp(1.0f, -24));
  CHECK(half::epsilon().to_float() == std::ldexp(1.0f, -10));
  CHECK(std::isinf(half::infinity().to_float()));
  CHECK(bfloat16(3.0e38f).to_bits() == 0x7F62);
  CHECK(bfloat16(std::numeric_limits<float>::max()).to_bits() == 0x7F80);  // past max finite + half ulp
  CHECK(bfloat16::max_finite().to_float() == 0x1.fep127f);
  CHECK(bfloat16::min_subnormal().to_float() == std::ldexp(1.0f, -133));
  CHECK(bfloat16::epsilon().to_float() == std::ldexp(1.0f, -7));
}

TEST_CASE("NaN keeps its sign and the top of its payload, quieted", "[core][half]") {
  const float signaling = from_bits(0x7F800001);       // payload only in the low bits
  const float negative_quiet = from_bits(0xFFC02000);  // sign, quiet bit, payload bit 13
  CHECK(half(signaling).to_bits() == 0x7E00);
  CHECK(half(negative_quiet).to_bits() == 0xFE01);
  CHECK(bfloat16(signaling).to_bits() == 0x7FC0);
  CHECK(bfloat16(negative_quiet).to_bits() == 0xFFC0);
  CHECK(bfloat16(from_bits(0x7F810000)).to_bits() == 0x7FC1);
  CHECK(float_to_bits(half::from_bits(0x7C01).to_float()) == 0x7FC02000u);  // signaling half NaN decodes quiet
  CHECK(float_to_bits(half::from_bits(0xFE00).to_float()) == 0xFFC00000u);
  CHECK(float_to_bits(bfloat16::from_bits(0x7F81).to_float()) == 0x7FC10000u);
  CHECK(std::isinf(half(std::numeric_limits<float>::infinity()).to_float()));
  CHECK(half(-std::numeric_limits<float>::infinity()).to_bits() == 0xFC00);
  CHECK(bfloat16(-std::numeric_limits<float>::infinity()).to_bits() == 0xFF80);
}

TEST_CASE("comparisons follow IEEE", "[core][half]") {
  CHECK(half(1.0f) == half(1.0f));
  CHECK(half(0.0f) == half(-0.0f));
  CHECK(half(1.0f) < half(2.0f));
  CHECK(half(-2.0f) <= half(-2.0f));
  CHECK(bfloat16(3.0f) > bfloat16(-3.0f));
  CHECK(bfloat16(3.0f) >= bfloat16(3.0f));
  CHECK(half::quiet_nan() != half::quiet_nan());
  CHECK_FALSE(half::quiet_nan() == half::quiet_nan());
  CHECK_FALSE(bfloat16::quiet_nan() < bfloat16(1.0f));
  CHECK(static_cast<float>(half(0.1f)) == half(0.1f).to_float());
}
