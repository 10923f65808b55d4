// Tests for shrink/core/fp8.hpp: ml_dtypes goldens (all codes decoded, many floats encoded), saturation,
// round trips of every finite code, NaN and overflow encodings, constants.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "shrink/core/fp8.hpp"
#include "support/float_bits.hpp"
#include "support/golden.hpp"

using namespace shrink;

namespace {

using test::from_bits;

Fp8Format format_named(const std::string& name) { return name == "e4m3" ? Fp8Format::e4m3 : Fp8Format::e5m2; }
std::uint8_t max_code(Fp8Format f) { return f == Fp8Format::e4m3 ? 0x7E : 0x7B; }
bool is_nan_code(std::uint8_t code, Fp8Format f) {
  return f == Fp8Format::e4m3 ? (code & 0x7F) == 0x7F : (code & 0x7F) > 0x7C;
}

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

TEST_CASE("fp8 types are one plain byte", "[core][fp8]") {
  STATIC_REQUIRE(sizeof(float8_e4m3) == 1);
  STATIC_REQUIRE(sizeof(float8_e5m2) == 1);
  STATIC_REQUIRE(std::is_trivially_copyable<float8_e4m3>::value);
  STATIC_REQUIRE(std::is_trivially_default_constructible<float8_e5m2>::value);
  STATIC_REQUIRE(float8_e4m3::max_finite().to_bits() == 0x7E);
  STATIC_REQUIRE(float8_e5m2::max_finite().to_bits() == 0x7B);
  STATIC_REQUIRE(float8_e4m3::quiet_nan().is_nan());
  STATIC_REQUIRE(!float8_e4m3::max_finite().is_nan());
  STATIC_REQUIRE(fp8_max_finite(Fp8Format::e4m3) == 448.0f);
  STATIC_REQUIRE(fp8_max_finite(Fp8Format::e5m2) == 57344.0f);
}

TEST_CASE("decoding all 256 codes matches ml_dtypes", "[core][fp8][golden]") {
  int cases = 0;
  for (const auto& c : test::load_golden("golden/casts_fp8.golden")) {
    if (c.name.find("_decode") == std::string::npos) continue;
    ++cases;
    const Fp8Format format = format_named(c.name.substr(0, 4));
    const auto& codes = c.ints("code");
    const auto& values = c.ints("value_bits");
    REQUIRE(codes.size() == 256);
    for (std::size_t i = 0; i < codes.size(); ++i) {
      const auto code = static_cast<std::uint8_t>(codes[i]);
      const float expected = from_bits(values[i]);
      const float got = fp8_decode(code, format);
      INFO(c.name << " code " << int(code));
      if (std::isnan(expected)) {
        CHECK(std::isnan(got));
        CHECK(std::signbit(got) == ((code & 0x80) != 0));
      } else {
        CHECK(float_to_bits(got) == float_to_bits(expected));
      }
    }
  }
  CHECK(cases == 2);
}

TEST_CASE("non-saturating encoding matches ml_dtypes bit for bit", "[core][fp8][golden]") {
  int cases = 0;
  for (const auto& c : test::load_golden("golden/casts_fp8.golden")) {
    if (c.name.find("_encode") == std::string::npos) continue;
    ++cases;
    const Fp8Format format = format_named(c.name.substr(0, 4));
    const auto& inputs = c.ints("input_bits");
    const auto& codes = c.ints("code");
    REQUIRE(inputs.size() == codes.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const float x = from_bits(inputs[i]);
      const std::uint8_t got = fp8_encode(x, format, /*saturate=*/false);
      if (got != codes[i] && ++mismatches <= 5) {
        INFO(c.name << " [" << i << "] x = " << x << " (bits " << inputs[i] << ")");
        CHECK(int(got) == codes[i]);
      }
    }
    CHECK(mismatches == 0);
  }
  CHECK(cases == 2);
}

TEST_CASE("saturating encoding clamps overflow and infinity to max finite, keeps NaN", "[core][fp8]") {
  for (const auto& c : test::load_golden("golden/casts_fp8.golden")) {
    if (c.name.find("_encode") == std::string::npos) continue;
    const Fp8Format format = format_named(c.name.substr(0, 4));
    const auto& inputs = c.ints("input_bits");
    int failures = 0;
    for (std::int64_t bits : inputs) {
      const float x = from_bits(bits);
      const std::uint8_t open = fp8_encode(x, format, false);
      const std::uint8_t saturated = fp8_encode(x, format, true);
      const auto sign = static_cast<std::uint8_t>(std::signbit(x) ? 0x80 : 0);
      std::uint8_t expected = open;
      const bool overflowed = !std::isnan(x) && ((open & 0x7F) > max_code(format));
      if (overflowed) expected = static_cast<std::uint8_t>(sign | max_code(format));
      if (saturated != expected) ++failures;
      if (std::isnan(x) && !is_nan_code(saturated, format)) ++failures;
      if (std::isfinite(x) && std::fabs(x) <= fp8_max_finite(format) && saturated != open) ++failures;
    }
    INFO(c.name);
    CHECK(failures == 0);
  }
  CHECK(fp8_encode(kInf, Fp8Format::e4m3, true) == 0x7E);
  CHECK(fp8_encode(-kInf, Fp8Format::e4m3, true) == 0xFE);
  CHECK(fp8_encode(kInf, Fp8Format::e5m2, true) == 0x7B);
  CHECK(fp8_encode(-kInf, Fp8Format::e5m2, true) == 0xFB);
  CHECK(fp8_encode(1e9f, Fp8Format::e4m3, true) == 0x7E);
  CHECK(fp8_encode(-1e9f, Fp8Format::e5m2, true) == 0xFB);
}

TEST_CASE("overflow without saturation follows OCP: NaN for E4M3, inf for E5M2", "[core][fp8]") {
  CHECK(fp8_encode(448.0f, Fp8Format::e4m3, false) == 0x7E);
  CHECK(fp8_encode(464.0f, Fp8Format::e4m3, false) == 0x7E);  // halfway to 480: ties to the even 448
  CHECK(fp8_encode(std::nextafter(464.0f, 1e9f), Fp8Format::e4m3, false) == 0x7F);
  CHECK(fp8_encode(-480.0f, Fp8Format::e4m3, false) == 0xFF);
  CHECK(fp8_encode(kInf, Fp8Format::e4m3, false) == 0x7F);
  CHECK(fp8_encode(-kInf, Fp8Format::e4m3, false) == 0xFF);
  CHECK(fp8_encode(57344.0f, Fp8Format::e5m2, false) == 0x7B);
  CHECK(fp8_encode(std::nextafter(61440.0f, 0.0f), Fp8Format::e5m2, false) == 0x7B);
  CHECK(fp8_encode(61440.0f, Fp8Format::e5m2, false) == 0x7C);  // halfway to 65536: ties to the even inf
  CHECK(fp8_encode(-kInf, Fp8Format::e5m2, false) == 0xFC);
  CHECK(std::isinf(float8_e5m2::from_bits(0x7C).to_float()));
  CHECK(float8_e5m2::from_bits(0xFC).is_inf());
  CHECK_FALSE(float8_e4m3::from_bits(0x7F).is_inf());
}

TEST_CASE("NaN encodings: E4M3 S.1111.111, E5M2 S.11111.10", "[core][fp8]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool saturate : {false, true}) {
    CHECK(fp8_encode(nan, Fp8Format::e4m3, saturate) == 0x7F);
    CHECK(fp8_encode(-nan, Fp8Format::e4m3, saturate) == 0xFF);
    CHECK(fp8_encode(nan, Fp8Format::e5m2, saturate) == 0x7E);
    CHECK(fp8_encode(-nan, Fp8Format::e5m2, saturate) == 0xFE);
    CHECK(fp8_encode(from_bits(0x7F800001), Fp8Format::e5m2, saturate) == 0x7E);  // signaling in, quiet out
  }
  for (int code : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) CHECK(float8_e5m2::from_bits(std::uint8_t(code)).is_nan());
  CHECK(float_to_bits(fp8_decode(0x7F, Fp8Format::e4m3)) == 0x7FC00000u);
  CHECK(float_to_bits(fp8_decode(0xFF, Fp8Format::e4m3)) == 0xFFC00000u);
  CHECK(float_to_bits(fp8_decode(0xFD, Fp8Format::e5m2)) == 0xFFC00000u);
}

TEST_CASE("every finite code round-trips through float, in both formats and modes", "[core][fp8]") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    int failures = 0;
    float previous = -kInf;
    for (int code = 0; code < 256; ++code) {
      const auto bits = static_cast<std::uint8_t>(code);
      const float value = fp8_decode(bits, format);
      const bool finite = (bits & 0x7F) <= max_code(format);
      if (finite != std::isfinite(value)) ++failures;
      if (!finite) continue;
      if (fp8_encode(value, format, false) != bits || fp8_encode(value, format, true) != bits) ++failures;
      if (code < 0x80) {  // positive codes increase with their value
        if (!(value > previous) && code != 0) ++failures;
        previous = value;
      }
    }
    INFO(to_string(format));
    CHECK(failures == 0);
  }
}

TEST_CASE("subnormals and the smallest values", "[core][fp8]") {
  const float e4m3_step = std::ldexp(1.0f, -9);
  CHECK(fp8_encode(e4m3_step, Fp8Format::e4m3, true) == 0x01);
  CHECK(fp8_encode(e4m3_step / 2, Fp8Format::e4m3, true) == 0x00);  // halfway: ties to even (zero)
  CHECK(fp8_encode(std::nextafter(e4m3_step / 2, 1.0f), Fp8Format::e4m3, true) == 0x01);
  CHECK(fp8_encode(-e4m3_step / 4, Fp8Format::e4m3, true) == 0x80);        // negative zero
  CHECK(fp8_encode(1.5f * e4m3_step, Fp8Format::e4m3, true) == 0x02);      // tie between 1 and 2 steps: even
  CHECK(fp8_encode(std::ldexp(1.0f, -6), Fp8Format::e4m3, true) == 0x08);  // smallest normal
  CHECK(fp8_encode(std::nextafter(std::ldexp(1.0f, -6), 0.0f), Fp8Format::e4m3, true) == 0x08);
  CHECK(fp8_encode(std::numeric_limits<float>::denorm_min(), Fp8Format::e5m2, true) == 0x00);
  CHECK(fp8_encode(std::ldexp(1.0f, -16), Fp8Format::e5m2, true) == 0x01);
  CHECK(fp8_encode(std::ldexp(3.0f, -17), Fp8Format::e5m2, true) == 0x02);
  CHECK(float8_e4m3::min_subnormal().to_float() == e4m3_step);
  CHECK(float8_e4m3::min_normal().to_float() == std::ldexp(1.0f, -6));
  CHECK(float8_e5m2::min_subnormal().to_float() == std::ldexp(1.0f, -16));
  CHECK(float8_e5m2::min_normal().to_float() == std::ldexp(1.0f, -14));
  CHECK(float8_e4m3::lowest().to_float() == -448.0f);
  CHECK(float8_e5m2::lowest().to_float() == -57344.0f);
}

TEST_CASE("float8 struct: saturating constructor by default, comparisons", "[core][fp8]") {
  CHECK(float8_e4m3(1000.0f).to_bits() == 0x7E);
  CHECK(float8_e4m3(1000.0f, false).is_nan());
  CHECK(float8_e5m2(1e6f, false).is_inf());
  CHECK(float8_e4m3(1.0f).to_bits() == 0x38);
  CHECK(float8_e5m2(1.0f).to_bits() == 0x3C);
  CHECK(static_cast<float>(float8_e4m3(0.3f)) == float8_e4m3(0.3f).to_float());
  CHECK(float8_e4m3(1.0f) < float8_e4m3(2.0f));
  CHECK(float8_e4m3(0.0f) == float8_e4m3(-0.0f));
  CHECK(float8_e4m3::quiet_nan() != float8_e4m3::quiet_nan());
  CHECK(float8_e5m2(-3.0f) <= float8_e5m2(-3.0f));
}
