// Tests for shrink/core/dtype.hpp: widths, names and the C++ type -> ScalarType trait.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "shrink/core/dtype.hpp"

using namespace shrink;

TEST_CASE("element widths and names", "[core][dtype]") {
  STATIC_REQUIRE(element_bits(ScalarType::f32) == 32);
  STATIC_REQUIRE(element_bits(ScalarType::f64) == 64);
  STATIC_REQUIRE(element_bits(ScalarType::f16) == 16);
  STATIC_REQUIRE(element_bits(ScalarType::bf16) == 16);
  STATIC_REQUIRE(element_bits(ScalarType::f8_e4m3) == 8);
  STATIC_REQUIRE(element_bits(ScalarType::f8_e5m2) == 8);
  STATIC_REQUIRE(element_bits(ScalarType::i8) == 8);
  STATIC_REQUIRE(element_bits(ScalarType::u8) == 8);
  STATIC_REQUIRE(element_bits(ScalarType::i4) == 4);
  STATIC_REQUIRE(element_bits(ScalarType::u4) == 4);
  STATIC_REQUIRE(element_bits(ScalarType::i16) == 16);
  STATIC_REQUIRE(element_bits(ScalarType::i32) == 32);
  STATIC_REQUIRE(element_bits(ScalarType::i64) == 64);
  STATIC_REQUIRE(element_bits(ScalarType::boolean) == 8);

  CHECK(std::string(to_string(ScalarType::f32)) == "f32");
  CHECK(std::string(to_string(ScalarType::bf16)) == "bf16");
  CHECK(std::string(to_string(ScalarType::f8_e4m3)) == "f8_e4m3");
  CHECK(std::string(to_string(ScalarType::f8_e5m2)) == "f8_e5m2");
  CHECK(std::string(to_string(ScalarType::u4)) == "u4");
  CHECK(std::string(to_string(ScalarType::boolean)) == "bool");
}

TEST_CASE("floating-point classification", "[core][dtype]") {
  STATIC_REQUIRE(is_floating_point(ScalarType::f16));
  STATIC_REQUIRE(is_floating_point(ScalarType::f8_e5m2));
  STATIC_REQUIRE_FALSE(is_floating_point(ScalarType::i8));
  STATIC_REQUIRE_FALSE(is_floating_point(ScalarType::boolean));
}

TEST_CASE("C++ element types map to their ScalarType", "[core][dtype]") {
  STATIC_REQUIRE(scalar_type_v<float> == ScalarType::f32);
  STATIC_REQUIRE(scalar_type_v<double> == ScalarType::f64);
  STATIC_REQUIRE(scalar_type_v<half> == ScalarType::f16);
  STATIC_REQUIRE(scalar_type_v<bfloat16> == ScalarType::bf16);
  STATIC_REQUIRE(scalar_type_v<float8_e4m3> == ScalarType::f8_e4m3);
  STATIC_REQUIRE(scalar_type_v<float8_e5m2> == ScalarType::f8_e5m2);
  STATIC_REQUIRE(scalar_type_v<std::int8_t> == ScalarType::i8);
  STATIC_REQUIRE(scalar_type_v<std::uint8_t> == ScalarType::u8);
  STATIC_REQUIRE(scalar_type_v<std::int16_t> == ScalarType::i16);
  STATIC_REQUIRE(scalar_type_v<std::int32_t> == ScalarType::i32);
  STATIC_REQUIRE(scalar_type_v<std::int64_t> == ScalarType::i64);
  STATIC_REQUIRE(scalar_type_v<bool> == ScalarType::boolean);
  STATIC_REQUIRE(scalar_type_v<const float> == ScalarType::f32);
  // Every C++ element type's width agrees with its size.
  STATIC_REQUIRE(element_bits(scalar_type_v<half>) == static_cast<int>(8 * sizeof(half)));
  STATIC_REQUIRE(element_bits(scalar_type_v<float8_e4m3>) == static_cast<int>(8 * sizeof(float8_e4m3)));
  STATIC_REQUIRE(element_bits(scalar_type_v<std::int64_t>) == static_cast<int>(8 * sizeof(std::int64_t)));
}
