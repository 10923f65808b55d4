// The element types of the tests (float, half, bfloat16, integers): one value to and from float, their names, test
// inputs converted to T, and bitwise comparison of T vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"

namespace shrink::test {

// v as a T: rounded to nearest even for half and bfloat16, truncated for an integer type.
template <class T>
T from_float(float v) {
  if constexpr (std::is_same<T, float>::value) return v;
  else if constexpr (std::is_integral<T>::value) return static_cast<T>(v);
  else return T(v);
}

// v as a float (exact for every type here but large integers).
template <class T>
float to_float(T v) {
  if constexpr (std::is_same<T, float>::value) return v;
  else if constexpr (std::is_integral<T>::value) return static_cast<float>(v);
  else return v.to_float();
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same<T, float>::value) return "float";
  else if constexpr (std::is_same<T, half>::value) return "half";
  else if constexpr (std::is_same<T, bfloat16>::value) return "bfloat16";
  else if constexpr (std::is_same<T, std::int8_t>::value) return "int8";
  else return "?";
}

// v converted to T: rounded for half and bfloat16; for int8, x * 40 rounded and clamped to [-127, 127].
template <class T>
std::vector<T> convert(const std::vector<float>& v) {
  std::vector<T> out;
  for (float x : v) {
    if constexpr (std::is_same<T, std::int8_t>::value) {
      out.push_back(static_cast<std::int8_t>(std::lround(std::fmax(-127.0f, std::fmin(127.0f, x * 40.0f)))));
    } else {
      out.push_back(T(x));
    }
  }
  return out;
}

// Equal sizes and equal bits (so -0.0 differs from +0.0 and NaNs compare by payload).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace shrink::test
