// What the [gpu] loss tests share (cross_entropy_tests.cpp, topk_teacher_tests.cpp, feature_loss_tests.cpp,
// distillation_loss_tests.cpp): random inputs in each element type, the rows labelled ignore_index, poisoned DeviceLoss
// outputs, and the comparisons against the CPU.
//
// Tolerances. Losses: 1e-5 relative (the bar in float; half and bfloat16 inputs are read exactly, so the same
// bar holds), plus an absolute 1e-6 a row: both backends take exps in float (a few ulps apart, CPU polynomial against
// CUDA's expf) and sum them in different orders, which moves log S by a few 1e-7. Gradients: each entry is a float
// computed from those sums (a few 1e-7 relative, 1e-6 of the gradient's unit c = grad_scale * T / divisor in
// absolute terms where terms cancel), then rounded once to the element type, where the two backends may land on
// the two sides of a rounding boundary: one ulp of the type, 2^-10 relative for half, 2^-7 for bfloat16.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/distill/reduction.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"
#include "support/special_floats.hpp"

namespace shrink::test::losses {

// Normal(0.1, scale) values rounded to T, never exactly 0.
template <class T>
std::vector<T> random_elements(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.1f, scale);
  std::vector<T> v(n);
  for (T& x : v) {
    float f = normal(rng);
    if (to_float(from_float<T>(f)) == 0.0f) f = 0.375f;
    x = from_float<T>(f);
  }
  return v;
}

// The rows a case with ignore_index rows labels ignore_index: 3, 7, 11, ... (cross entropy, and the distillation
// loss's cross-entropy part).
inline bool ignored_row(std::int64_t r) { return r % 4 == 3; }

// An element whose bytes are all kPoison (what a DeviceBuffer holds at birth).
template <class T>
T poison_element() {
  if constexpr (std::is_same_v<T, float>) {
    const std::uint32_t bits = 0x01010101u * kPoison;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  } else {
    return T::from_bits(static_cast<std::uint16_t>(0x0101u * kPoison));
  }
}

// A loss's device outputs, poisoned before each use.
class DeviceOutputs {
 public:
  explicit DeviceOutputs(std::int64_t rows) : rows_(rows), value_(sizeof(double)), per_row_(rows * sizeof(double)) {}

  cuda::DeviceLoss loss(bool with_per_row) {
    value_.poison();
    per_row_.poison();
    return {value_.as<double>(), with_per_row ? per_row_.as<double>() : nullptr};
  }
  distill::Loss download(bool with_per_row) const {
    distill::Loss loss;
    loss.value = value_.download<double>(1)[0];
    if (with_per_row) loss.per_row = per_row_.download<double>(static_cast<std::size_t>(rows_));
    return loss;
  }
  // The per-row buffer when it was not asked for: still poisoned (nothing was written there).
  bool per_row_untouched() const { return per_row_.still_poisoned(per_row_.bytes()); }

 private:
  std::int64_t rows_;
  DeviceBuffer value_, per_row_;
};

// gpu within rel * |cpu| + abs of cpu; NaN matches NaN, an infinity itself.
inline bool close(double gpu, double cpu, double rel, double abs) {
  if (std::isnan(cpu)) return std::isnan(gpu);
  if (std::isinf(cpu)) return gpu == cpu;
  return std::fabs(gpu - cpu) <= rel * std::fabs(cpu) + abs;
}

// The value (1e-5 relative; absolute 1e-6 per row summed, for sum and none) and, when the GPU gave them, the rows.
inline void check_loss(const distill::Loss& gpu, const distill::Loss& cpu, distill::Reduction reduction,
                       std::int64_t rows) {
  const bool summed = reduction == distill::Reduction::sum || reduction == distill::Reduction::none;
  const double value_abs = 1e-6 * (summed ? static_cast<double>(rows) : 1.0);
  INFO("value: gpu " << gpu.value << " cpu " << cpu.value);
  CHECK(close(gpu.value, cpu.value, 1e-5, value_abs));
  if (gpu.per_row.empty()) return;
  REQUIRE(gpu.per_row.size() == static_cast<std::size_t>(rows));
  REQUIRE(cpu.per_row.size() == static_cast<std::size_t>(rows));  // the tests ask the CPU for them with none
  test::MismatchMap per_row(1, rows, 1, 256);  // the rows as one line; tiles of 256 rows
  for (std::int64_t r = 0; r < rows; ++r) {
    const double g = gpu.per_row[static_cast<std::size_t>(r)], c = cpu.per_row[static_cast<std::size_t>(r)];
    if (!close(g, c, 1e-5, 1e-6)) per_row.add(0, r, g, c);
  }
  INFO("per_row");
  CHECK_NO_MISMATCHES(per_row);
}

// Relative tolerance of a gradient entry of type T: 1e-5 in float, plus one ulp of T.
template <class T>
double gradient_rel() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, half>) return 1e-5 + 0x1p-10;
  else return 1e-5 + 0x1p-7;
}

// Absolute floor of a gradient entry: `abs` (a multiple of the gradient's unit) and half's subnormal step.
template <class T>
double gradient_abs(double abs) {
  return std::is_same_v<T, half> ? abs + 0x1p-24 : abs;
}

// Rows x cols gradient entries at row stride `stride`: the GPU's within tolerance of the CPU's; between rows (the
// padding) the GPU's buffer still holds the poison.
template <class T>
void check_gradient(const std::vector<T>& gpu, const std::vector<T>& cpu, std::int64_t rows, std::int64_t cols,
                    std::int64_t stride, double abs, const char* name = "gradient") {
  REQUIRE(gpu.size() == cpu.size());
  const double rel = gradient_rel<T>(), floor = gradient_abs<T>(abs);
  // A row a CTA (or a cluster of them): the map's tiles are rows; columns past `cols` are padding, which must keep
  // the poison (the CPU buffer holds it there too).
  test::MismatchMap wrong(rows, stride, 1, stride);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < stride && r * stride + j < static_cast<std::int64_t>(gpu.size()); ++j) {
      const std::size_t i = static_cast<std::size_t>(r * stride + j);
      const double g = to_float(gpu[i]), c = to_float(cpu[i]);
      if (j >= cols ? std::memcmp(&gpu[i], &cpu[i], sizeof(T)) != 0 : !close(g, c, rel, floor)) wrong.add(r, j, g, c);
    }
  }
  INFO(name << " (" << cols << " columns, then padding to " << stride << "; tolerance " << rel << " relative, "
            << floor << " absolute)");
  CHECK_NO_MISMATCHES(wrong);
}

inline bool same_bits(const distill::Loss& a, const distill::Loss& b) {
  return std::memcmp(&a.value, &b.value, sizeof(double)) == 0 && test::same_bits(a.per_row, b.per_row);
}

inline const char* reduction_name(distill::Reduction r) { return distill::to_string(r); }

}  // namespace shrink::test::losses
