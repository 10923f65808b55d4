// ScalarType: the element types shrink stores, their widths and names, and the C++ type -> ScalarType trait.
#pragma once

#include <cstdint>
#include <type_traits>

#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"

namespace shrink {

enum class ScalarType : std::uint8_t {
  f32,
  f64,
  f16,      // shrink::half
  bf16,     // shrink::bfloat16
  f8_e4m3,  // shrink::float8_e4m3
  f8_e5m2,  // shrink::float8_e5m2
  i8,
  u8,
  i4,  // packed two per byte, see core/int4.hpp; no C++ element type
  u4,
  i16,
  i32,
  i64,
  boolean,  // one byte, 0 or 1
};

// Bits of one element: 4 for the packed types, 8 for boolean.
constexpr int element_bits(ScalarType type) {
  switch (type) {
    case ScalarType::f64:
    case ScalarType::i64: return 64;
    case ScalarType::f32:
    case ScalarType::i32: return 32;
    case ScalarType::f16:
    case ScalarType::bf16:
    case ScalarType::i16: return 16;
    case ScalarType::f8_e4m3:
    case ScalarType::f8_e5m2:
    case ScalarType::i8:
    case ScalarType::u8:
    case ScalarType::boolean: return 8;
    case ScalarType::i4:
    case ScalarType::u4: return 4;
  }
  return 0;
}

constexpr bool is_floating_point(ScalarType type) {
  return type == ScalarType::f32 || type == ScalarType::f64 || type == ScalarType::f16 || type == ScalarType::bf16 ||
         type == ScalarType::f8_e4m3 || type == ScalarType::f8_e5m2;
}

// Short lower-case names: "f32", "bf16", "f8_e4m3", "i4", "bool", ...
constexpr const char* to_string(ScalarType type) {
  switch (type) {
    case ScalarType::f32: return "f32";
    case ScalarType::f64: return "f64";
    case ScalarType::f16: return "f16";
    case ScalarType::bf16: return "bf16";
    case ScalarType::f8_e4m3: return "f8_e4m3";
    case ScalarType::f8_e5m2: return "f8_e5m2";
    case ScalarType::i8: return "i8";
    case ScalarType::u8: return "u8";
    case ScalarType::i4: return "i4";
    case ScalarType::u4: return "u4";
    case ScalarType::i16: return "i16";
    case ScalarType::i32: return "i32";
    case ScalarType::i64: return "i64";
    case ScalarType::boolean: return "bool";
  }
  return "?";
}

// scalar_type_of<T>::value names the ScalarType of a C++ element type; other types do not compile.
template <class T>
struct scalar_type_of;

// clang-format off
template <> struct scalar_type_of<float> : std::integral_constant<ScalarType, ScalarType::f32> {};
template <> struct scalar_type_of<double> : std::integral_constant<ScalarType, ScalarType::f64> {};
template <> struct scalar_type_of<half> : std::integral_constant<ScalarType, ScalarType::f16> {};
template <> struct scalar_type_of<bfloat16> : std::integral_constant<ScalarType, ScalarType::bf16> {};
template <> struct scalar_type_of<float8_e4m3> : std::integral_constant<ScalarType, ScalarType::f8_e4m3> {};
template <> struct scalar_type_of<float8_e5m2> : std::integral_constant<ScalarType, ScalarType::f8_e5m2> {};
template <> struct scalar_type_of<std::int8_t> : std::integral_constant<ScalarType, ScalarType::i8> {};
template <> struct scalar_type_of<std::uint8_t> : std::integral_constant<ScalarType, ScalarType::u8> {};
template <> struct scalar_type_of<std::int16_t> : std::integral_constant<ScalarType, ScalarType::i16> {};
template <> struct scalar_type_of<std::int32_t> : std::integral_constant<ScalarType, ScalarType::i32> {};
template <> struct scalar_type_of<std::int64_t> : std::integral_constant<ScalarType, ScalarType::i64> {};
template <> struct scalar_type_of<bool> : std::integral_constant<ScalarType, ScalarType::boolean> {};
// clang-format on

// A const element type maps like its plain type.
template <class T>
struct scalar_type_of<const T> : scalar_type_of<T> {};

template <class T>
inline constexpr ScalarType scalar_type_v = scalar_type_of<T>::value;

// The element type's name in messages: float, half, bfloat16, int8 (the matrix products of both backends).
template <class T>
const char* element_type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, half>)
    return "half";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return "int8";
  else
    return "another type";
}

}  // namespace shrink
