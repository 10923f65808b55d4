// Requantization of int32 GEMM accumulators to int8/uint8 with a Q31 fixed-point multiplier (gemmlowp/TFLite).
//
// The real multiplier M = scale_input * scale_weight / scale_output > 0 is held as
//   M ~= M0 * 2^(shift - 31),   M0 in [2^30, 2^31) (M0 / 2^31 in [0.5, 1)),   shift in [-31, 30]
// quantize_multiplier: frexp gives M = f * 2^shift with f in [0.5, 1); M0 = round_half_away(f * 2^31), and
// when that reaches 2^31, M0 = 2^30 and shift + 1. So |M - M0 * 2^(shift - 31)| <= 2^(shift - 32).
//
// One accumulator a (with bias b, 0 when there is none) becomes, with ls = max(shift, 0), rs = max(-shift, 0):
//   x = sat32(a + b)                                  the sum in int64, saturated to int32 (a bias pushing a
//                                                     past int32 loses the excess, as no int32 pipeline keeps it)
//   x = sat32(x * 2^ls)                               saturates only if |x * M| >= 2^30: clamped to an end anyway
//   h = SaturatingRoundingDoublingHighMul(x, M0)      = floor((x * M0 + 2^30) / 2^31): the high 32 bits of
//                                                       2 x M0, rounded to nearest with ties toward +inf;
//                                                       INT32_MAX for x = M0 = INT32_MIN (the one overflow)
//   r = RoundingDivideByPOT(h, rs)                    = h / 2^rs rounded to nearest, ties away from zero
//   q = clamp(r + zero_point, qmin, qmax)
// This is gemmlowp's reference arithmetic bit for bit wherever that is defined (it does not saturate a + b or
// the left shift; it overflows there). Its rounding nudge (2^30, or 1 - 2^30 for a negative
// product) is often called "half away from zero", but a negative product exactly at a half rounds toward
// zero: ties go toward +inf, like the ARM SQRDMULH instruction it models.
// Error: h and r round twice, so a product near a half can land one off (1 * 0.25 gives 1: h = round(1/2) = 1,
// then r = round(1/2) = 1). Always |q - clamp(round_half_away(a' * M) + zero_point)| <= 1 for a' = a + b, and the
// two agree exactly unless a' * M lies within 2^-(rs + 1) (0 when rs = 0) + |a'| * 2^(shift - 32) of a
// half-integer (tests/quant/test_requantize.cpp derives this).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

// M ~= multiplier * 2^(shift - 31); see the top of this file.
struct FixedPointMultiplier {
  std::int32_t multiplier = 0;  // M0 in [2^30, 2^31)
  int shift = 0;                // in [kMinMultiplierShift, kMaxMultiplierShift]

  // The real multiplier this pair applies, exactly (as a double).
  double real_value() const { return std::ldexp(static_cast<double>(multiplier), shift - 31); }
};

// rs = -shift is at most 31 (RoundingDivideByPOT of an int32); ls = shift is kept below 31.
inline constexpr int kMinMultiplierShift = -31;
inline constexpr int kMaxMultiplierShift = 30;

// M as a Q31 multiplier and shift; M must be finite and give a shift in [-31, 30], i.e. roughly
// 2^-32 (2.3e-10) <= M < 2^30 (1.07e9).
inline FixedPointMultiplier quantize_multiplier(double real_multiplier) {
  const char* fn = "shrink::quant::quantize_multiplier";
  if (!std::isfinite(real_multiplier) || !(real_multiplier > 0.0))
    fail(fn, "real_multiplier", real_multiplier, "a finite multiplier > 0");
  int exponent = 0;
  const double fraction = std::frexp(real_multiplier, &exponent);  // in [0.5, 1)
  std::int64_t m0 = std::llround(std::ldexp(fraction, 31));
  if (m0 == (std::int64_t{1} << 31)) {
    m0 /= 2;
    ++exponent;
  }
  if (exponent < kMinMultiplierShift || exponent > kMaxMultiplierShift)
    fail(fn, "real_multiplier", real_multiplier,
         "a multiplier in [2^-32, 2^30) (shift " + std::to_string(exponent) + " outside [" +
             std::to_string(kMinMultiplierShift) + ", " + std::to_string(kMaxMultiplierShift) + "])");
  return FixedPointMultiplier{static_cast<std::int32_t>(m0), exponent};
}

// Checks a multiplier built by hand: M0 in [2^30, 2^31), shift in [-31, 30].
inline void validate_multiplier(const FixedPointMultiplier& m, const char* function, const char* argument) {
  if (m.multiplier < (std::int32_t{1} << 30))
    fail(function, (std::string(argument) + ".multiplier").c_str(), m.multiplier,
         "a Q31 multiplier in [2^30, 2^31) (as quantize_multiplier makes)");
  if (m.shift < kMinMultiplierShift || m.shift > kMaxMultiplierShift)
    fail(function, (std::string(argument) + ".shift").c_str(), m.shift,
         "a shift in [" + std::to_string(kMinMultiplierShift) + ", " + std::to_string(kMaxMultiplierShift) + "]");
}

namespace detail {

inline void require_scale(float scale, const char* function, const char* argument) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) fail(function, argument, scale, "a finite scale > 0");
}

}  // namespace detail

// M = input_scale * weight_scale / output_scale (in double, as TFLite), as a fixed-point multiplier.
inline FixedPointMultiplier requantization_multiplier(float input_scale, float weight_scale, float output_scale) {
  const char* fn = "shrink::quant::requantization_multiplier";
  detail::require_scale(input_scale, fn, "input_scale");
  detail::require_scale(weight_scale, fn, "weight_scale");
  detail::require_scale(output_scale, fn, "output_scale");
  return quantize_multiplier(static_cast<double>(input_scale) * static_cast<double>(weight_scale) /
                             static_cast<double>(output_scale));
}

// One multiplier per output channel n: input_scale * weight_scales[n] / output_scale.
inline std::vector<FixedPointMultiplier> requantization_multipliers(float input_scale,
                                                                   const std::vector<float>& weight_scales,
                                                                   float output_scale) {
  const char* fn = "shrink::quant::requantization_multipliers";
  detail::require_scale(input_scale, fn, "input_scale");
  detail::require_scale(output_scale, fn, "output_scale");
  if (weight_scales.empty()) fail(fn, "weight_scales.size()", 0, "at least one scale");
  std::vector<FixedPointMultiplier> out(weight_scales.size());
  for (std::size_t n = 0; n < weight_scales.size(); ++n) {
    const std::string argument = "weight_scales[" + std::to_string(n) + "]";
    detail::require_scale(weight_scales[n], fn, argument.c_str());
    try {
      out[n] = requantization_multiplier(input_scale, weight_scales[n], output_scale);
    } catch (const Error& e) {
      fail(fn, argument.c_str(), weight_scales[n],
           std::string("a scale giving a representable multiplier (") + e.what() + ")");
    }
  }
  return out;
}

SHRINK_HOST_DEVICE inline std::int32_t saturate_to_int32(std::int64_t v) {
  return v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : static_cast<std::int32_t>(v));
}

// floor((a * b + 2^30) / 2^31), saturated: only a = b = INT32_MIN gives 2^31, returned as INT32_MAX.
SHRINK_HOST_DEVICE inline std::int32_t saturating_rounding_doubling_high_mul(std::int32_t a, std::int32_t b) {
  const std::int64_t product = static_cast<std::int64_t>(a) * static_cast<std::int64_t>(b);
  return saturate_to_int32((product + (std::int64_t{1} << 30)) >> 31);  // arithmetic shift: floor division
}

// x / 2^exponent rounded to nearest, ties away from zero; exponent in [0, 31].
SHRINK_HOST_DEVICE inline std::int32_t rounding_divide_by_pot(std::int32_t x, int exponent) {
  const std::int64_t half = exponent == 0 ? 0 : std::int64_t{1} << (exponent - 1);
  const std::int64_t magnitude = x < 0 ? -static_cast<std::int64_t>(x) : static_cast<std::int64_t>(x);
  const std::int64_t rounded = (magnitude + half) >> exponent;
  return static_cast<std::int32_t>(x < 0 ? -rounded : rounded);
}

// x * M in fixed point, before the zero point and the clamp (the middle three lines of the formula above).
SHRINK_HOST_DEVICE inline std::int32_t multiply_by_quantized_multiplier(std::int32_t x, FixedPointMultiplier m) {
  const int left_shift = m.shift > 0 ? m.shift : 0;
  const int right_shift = m.shift > 0 ? 0 : -m.shift;
  const std::int32_t shifted = saturate_to_int32(static_cast<std::int64_t>(x) * (std::int64_t{1} << left_shift));
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m.multiplier), right_shift);
}

// The whole formula for one accumulator; `m` must be valid (see validate_multiplier).
SHRINK_HOST_DEVICE inline std::int32_t requantize_value(std::int32_t accumulator, std::int32_t bias,
                                                        FixedPointMultiplier m, std::int32_t zero_point,
                                                        QuantRange range) {
  const std::int32_t x = saturate_to_int32(static_cast<std::int64_t>(accumulator) + bias);
  const std::int64_t q = static_cast<std::int64_t>(multiply_by_quantized_multiplier(x, m)) + zero_point;
  return static_cast<std::int32_t>(q < range.qmin ? range.qmin : (q > range.qmax ? range.qmax : q));
}

namespace detail {

template <class Out>
void check_requantize_output(const TensorView<const std::int32_t>& accumulators, const TensorView<Out>& output,
                             std::int32_t zero_point, QuantRange range, const char* fn) {
  static_assert(std::is_same<Out, std::int8_t>::value || std::is_same<Out, std::uint8_t>::value,
                "requantize writes int8 or uint8 output");
  constexpr std::int32_t lowest = std::numeric_limits<Out>::min();
  constexpr std::int32_t highest = std::numeric_limits<Out>::max();
  const std::string type_range = "[" + std::to_string(lowest) + ", " + std::to_string(highest) + "]";
  require_host_view(accumulators, fn, "accumulators");
  require_host_view(output, fn, "output");
  if (accumulators.empty())
    fail(fn, "accumulators.shape", to_string(accumulators.shape()), "at least one element");
  if (output.shape() != accumulators.shape())
    fail(fn, "output.shape", to_string(output.shape()), "the accumulators' shape " + to_string(accumulators.shape()));
  if (range.qmin > range.qmax || range.qmin < lowest || range.qmax > highest)
    fail(fn, "range", "[" + std::to_string(range.qmin) + ", " + std::to_string(range.qmax) + "]",
         "qmin <= qmax inside the output type's " + type_range);
  if (zero_point < lowest || zero_point > highest)
    fail(fn, "output_zero_point", zero_point, "a zero point inside the output type's " + type_range);
}

// Channels are the last dimension (N of an [M, N] accumulator matrix).
inline std::int64_t output_channels(const TensorView<const std::int32_t>& accumulators) {
  return cpu::row_length(accumulators.shape());
}

inline void check_bias(const TensorView<const std::int32_t>& bias, std::int64_t channels, const char* fn) {
  require_host_view(bias, fn, "bias");
  if (bias.rank() != 1 || bias.size(0) != channels)
    fail(fn, "bias.shape", to_string(bias.shape()),
         "[" + std::to_string(channels) + "]: one bias per output channel (the accumulators' last dimension)");
}

// multiplier_of(n) gives channel n's multiplier; bias may be null.
template <class Out, class MultiplierOf>
void requantize_rows(const TensorView<const std::int32_t>& accumulators, const TensorView<const std::int32_t>* bias,
                     MultiplierOf&& multiplier_of, std::int32_t zero_point, QuantRange range,
                     const TensorView<Out>& output) {
  const std::int64_t length = cpu::row_length(accumulators.shape());
  const std::int64_t in_stride = cpu::row_stride(accumulators.strides());
  const std::int64_t out_stride = cpu::row_stride(output.strides());
  cpu::for_each_row(accumulators.shape(), accumulators.strides(), output.strides(),
                    [&](std::int64_t, std::int64_t in_offset, std::int64_t out_offset) {
                      const std::int32_t* acc = accumulators.data() + in_offset;
                      Out* out = output.data() + out_offset;
                      for (std::int64_t n = 0; n < length; ++n) {
                        const std::int32_t b = bias ? (*bias)(n) : 0;
                        out[n * out_stride] = static_cast<Out>(
                            requantize_value(acc[n * in_stride], b, multiplier_of(n), zero_point, range));
                      }
                    });
}

template <class Out>
void requantize_per_tensor_impl(const TensorView<const std::int32_t>& accumulators,
                                const TensorView<const std::int32_t>* bias, FixedPointMultiplier multiplier,
                                std::int32_t output_zero_point, QuantRange range, const TensorView<Out>& output) {
  const char* fn = "shrink::quant::requantize_per_tensor";
  check_requantize_output(accumulators, output, output_zero_point, range, fn);
  validate_multiplier(multiplier, fn, "multiplier");
  if (bias) check_bias(*bias, output_channels(accumulators), fn);
  requantize_rows(accumulators, bias, [&](std::int64_t) { return multiplier; }, output_zero_point, range, output);
}

template <class Out>
void requantize_per_channel_impl(const TensorView<const std::int32_t>& accumulators,
                                 const TensorView<const std::int32_t>* bias,
                                 const std::vector<FixedPointMultiplier>& multipliers,
                                 std::int32_t output_zero_point, QuantRange range, const TensorView<Out>& output) {
  const char* fn = "shrink::quant::requantize_per_channel";
  check_requantize_output(accumulators, output, output_zero_point, range, fn);
  if (accumulators.rank() < 1)
    fail(fn, "accumulators.shape", to_string(accumulators.shape()), "rank >= 1 with output channels last");
  const std::int64_t channels = output_channels(accumulators);
  if (static_cast<std::int64_t>(multipliers.size()) != channels)
    fail(fn, "multipliers.size()", multipliers.size(),
         std::to_string(channels) + " multipliers, one per output channel (the accumulators' last dimension)");
  for (std::size_t n = 0; n < multipliers.size(); ++n)
    validate_multiplier(multipliers[n], fn, ("multipliers[" + std::to_string(n) + "]").c_str());
  if (bias) check_bias(*bias, channels, fn);
  requantize_rows(
      accumulators, bias, [&](std::int64_t n) { return multipliers[static_cast<std::size_t>(n)]; },
      output_zero_point, range, output);
}

}  // namespace detail

// One multiplier for every element. accumulators and output: host views of one shape, any strides.
template <class Out>
void requantize_per_tensor(TensorView<const std::int32_t> accumulators, FixedPointMultiplier multiplier,
                           std::int32_t output_zero_point, QuantRange range, TensorView<Out> output) {
  detail::requantize_per_tensor_impl(accumulators, nullptr, multiplier, output_zero_point, range, output);
}

// Same, with bias[n] (shape [N]) added to every accumulator of output channel n (the last dimension).
template <class Out>
void requantize_per_tensor(TensorView<const std::int32_t> accumulators, TensorView<const std::int32_t> bias,
                           FixedPointMultiplier multiplier, std::int32_t output_zero_point, QuantRange range,
                           TensorView<Out> output) {
  detail::requantize_per_tensor_impl(accumulators, &bias, multiplier, output_zero_point, range, output);
}

// multipliers[n] for output channel n (the last dimension, N of [M, N]), as for per-channel weights.
template <class Out>
void requantize_per_channel(TensorView<const std::int32_t> accumulators,
                            const std::vector<FixedPointMultiplier>& multipliers, std::int32_t output_zero_point,
                            QuantRange range, TensorView<Out> output) {
  detail::requantize_per_channel_impl(accumulators, nullptr, multipliers, output_zero_point, range, output);
}

template <class Out>
void requantize_per_channel(TensorView<const std::int32_t> accumulators, TensorView<const std::int32_t> bias,
                            const std::vector<FixedPointMultiplier>& multipliers, std::int32_t output_zero_point,
                            QuantRange range, TensorView<Out> output) {
  detail::requantize_per_channel_impl(accumulators, &bias, multipliers, output_zero_point, range, output);
}

}  // namespace shrink::quant
