// What the commands print: dtype and shape text, zero counts, byte sizes, and JSON numbers (a non-finite SQNR
// becomes null in JSON, "inf" in text).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shrink/core/dtype.hpp"
#include "shrink/io/safetensors.hpp"

namespace shrink::cli {

using Json = nlohmann::ordered_json;

inline bool is_floating(ScalarType t) {
  return t == ScalarType::f32 || t == ScalarType::f16 || t == ScalarType::bf16 || t == ScalarType::f64;
}

inline std::string dtype_text(ScalarType t) {
  const char* name = io::safetensors_dtype_name(t);
  return name ? name : to_string(t);
}

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Elements that are exactly zero (+0 or -0); NaN is not zero.
inline std::int64_t count_zeros(const std::vector<float>& values) {
  std::int64_t n = 0;
  for (float v : values) n += v == 0.0f ? 1 : 0;
  return n;
}

inline double fraction(std::int64_t part, std::int64_t whole) {
  return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
}

// A JSON number, or null where the value is not finite (JSON has no infinity).
inline Json json_number(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

inline std::string number_text(double v, const char* format = "%.2f") {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, v);
  return buffer;
}

// 1536 -> "1.5 KiB".
inline std::string bytes_text(std::int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buffer;
}

// Prints JSON on stdout, indented, followed by a newline.
inline void print_json(const Json& j) { std::printf("%s\n", j.dump(2, ' ', false, Json::error_handler_t::replace).c_str()); }

}  // namespace shrink::cli
