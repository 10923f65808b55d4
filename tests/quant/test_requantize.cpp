// Tests for shrink/quant/requantize.hpp: fixed-point multipliers and int32 -> int8/uint8 requantization.
//
// Reference: q* = clamp(round_half_away(a * M) + zp, qmin, qmax) for a = accumulator + bias, computed exactly:
// M is a double f * 2^e (f a 53-bit integer), so a * M = (a * f) * 2^(e - 53) with a * f an exact 128-bit integer.
//
// Tie analysis (when the fixed-point result must equal q* exactly). Let m = M0 * 2^(shift - 31) be the
// multiplier the integer code really applies, rs = max(-shift, 0), and v = a * m.
//  1. quantize_multiplier rounds M * 2^(31 - shift) to the integer M0, so |M - m| <= 2^(shift - 32) and
//     |a * M - v| <= |a| * 2^(shift - 32).
//  2. The high-mul returns h with |h - v * 2^rs| <= 1/2 (round to nearest; ties up), so |h / 2^rs - v| <= 2^-(rs+1).
//  3. The final divide rounds h / 2^rs to the nearest integer. Rounding is monotone, so round(h / 2^rs) and
//     round(a * M) agree whenever the interval between the two arguments holds no half-integer, which is
//     guaranteed if a * M lies farther than  eps = 2^-(rs+1) + |a| * 2^(shift - 32)  from every half-integer.
//     With rs = 0 there is no second rounding (h = round(v) is the result), and step 2's term drops out:
//     eps = |a| * 2^(shift - 32). Exact ties (distance 0) are never held to exactness, so the tie rule of the
//     high-mul (toward +inf) and of the divide (away from zero) cannot matter.
//  4. Otherwise each is within 1/2 + eps of a * M with eps well below 1/2 here, so they differ by less than 2,
//     i.e. by at most 1 as integers; the clamp is 1-Lipschitz and keeps that bound.
//  5. Saturation: when a * 2^ls or a itself leaves int32, |a * M| >= 2^30 and both sides clamp to the same end,
//     and whenever round(a * M) + zp is outside [qmin, qmax] by 1 or more, both clamp to the same end too.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/requantize.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

constexpr std::int32_t kInt32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// round_half_away(a * M) as an exact 128-bit integer, and the distance of a * M from the nearest half-integer.
struct ExactProduct {
  __int128 rounded = 0;
  long double distance_to_half = 0;
};

ExactProduct exact_round(std::int64_t a, double multiplier) {
  int exponent = 0;
  const double fraction = std::frexp(multiplier, &exponent);
  const auto mantissa = static_cast<std::int64_t>(std::ldexp(fraction, 53));  // exact: 53 significant bits
  const int k = 53 - exponent;  // a * M = a * mantissa / 2^k
  REQUIRE(k > 0);
  REQUIRE(k < 120);
  const bool negative = a < 0;
  const __int128 p = static_cast<__int128>(negative ? -a : a) * mantissa;
  const __int128 one = static_cast<__int128>(1) << k;
  const __int128 integer = p >> k;
  const __int128 remainder = p - (integer << k);
  const __int128 half = one >> 1;
  ExactProduct r;
  r.rounded = remainder >= half ? integer + 1 : integer;
  if (negative) r.rounded = -r.rounded;
  const __int128 gap = remainder >= half ? remainder - half : half - remainder;
  r.distance_to_half = std::ldexp(static_cast<long double>(gap), -k);
  return r;
}

std::int32_t clamp_to(__int128 v, QuantRange range) {
  return static_cast<std::int32_t>(v < range.qmin ? range.qmin : (v > range.qmax ? range.qmax : v));
}

// gemmlowp's formulation of the two primitives (nudge + truncating division, mask + threshold), kept here as an
// independent statement of the same arithmetic.
std::int32_t high_mul_by_nudge(std::int32_t a, std::int32_t b) {
  if (a == kInt32Min && b == kInt32Min) return kInt32Max;
  const std::int64_t ab = static_cast<std::int64_t>(a) * b;
  const std::int64_t nudge = ab >= 0 ? (std::int64_t{1} << 30) : 1 - (std::int64_t{1} << 30);
  return static_cast<std::int32_t>((ab + nudge) / (std::int64_t{1} << 31));
}

std::int32_t divide_by_pot_by_mask(std::int32_t x, int exponent) {
  const std::int64_t mask = (std::int64_t{1} << exponent) - 1;
  const std::int64_t remainder = static_cast<std::int64_t>(x) & mask;
  const std::int64_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return static_cast<std::int32_t>((static_cast<std::int64_t>(x) >> exponent) + (remainder > threshold ? 1 : 0));
}

}  // namespace

TEST_CASE("quantize_multiplier: Q31 multiplier and shift", "[quant][requantize]") {
  FixedPointMultiplier m = quantize_multiplier(0.5);
  CHECK(m.multiplier == (1 << 30));
  CHECK(m.shift == 0);
  m = quantize_multiplier(0.75);
  CHECK(m.multiplier == 1610612736);  // 0.75 * 2^31
  CHECK(m.shift == 0);
  m = quantize_multiplier(1.0);
  CHECK(m.multiplier == (1 << 30));
  CHECK(m.shift == 1);
  m = quantize_multiplier(0.1);
  CHECK(m.multiplier == 1717986918);  // round(0.8 * 2^31) = round(1717986918.4)
  CHECK(m.shift == -3);
  // A fraction that rounds up to 2^31 moves to the next binade.
  m = quantize_multiplier(1.0 - std::ldexp(1.0, -34));
  CHECK(m.multiplier == (1 << 30));
  CHECK(m.shift == 1);
  CHECK(m.real_value() == 1.0);
}

TEST_CASE("quantize_multiplier over 1e-9 .. 1e3 keeps M0 in [2^30, 2^31) and the error below 2^(shift-32)",
          "[quant][requantize]") {
  for (int step = 0; step <= 1200; ++step) {
    const double M = std::pow(10.0, -9.0 + 12.0 * step / 1200.0);
    const FixedPointMultiplier m = quantize_multiplier(M);
    INFO("M = " << M);
    CHECK(m.multiplier >= (1 << 30));
    CHECK(m.shift >= kMinMultiplierShift);
    CHECK(m.shift <= kMaxMultiplierShift);
    CHECK(std::fabs(m.real_value() - M) <= std::ldexp(1.0, m.shift - 32));
    CHECK_NOTHROW(validate_multiplier(m, "test", "m"));
  }
  // The ends of the representable range.
  CHECK(quantize_multiplier(std::ldexp(1.0, -32)).shift == -31);
  CHECK(quantize_multiplier(std::ldexp(1.0, 30) * (1.0 - 1e-6)).shift == 30);
  CHECK(quantize_multiplier(std::ldexp(1.0 - std::ldexp(1.0, -34), -32)).shift == -31);  // rounds up into range
}

TEST_CASE("quantize_multiplier rejects M <= 0, NaN, inf and unrepresentable sizes", "[quant][requantize]") {
  CHECK_THROWS_WITH(quantize_multiplier(0.0), Catch::Contains("real_multiplier = 0") && Catch::Contains("> 0"));
  CHECK_THROWS_AS(quantize_multiplier(-0.25), Error);
  CHECK_THROWS_AS(quantize_multiplier(std::nan("")), Error);
  CHECK_THROWS_AS(quantize_multiplier(std::numeric_limits<double>::infinity()), Error);
  CHECK_THROWS_WITH(quantize_multiplier(1e-11), Catch::Contains("2^-32"));
  CHECK_THROWS_AS(quantize_multiplier(std::ldexp(1.0, 30)), Error);
  CHECK_THROWS_AS(validate_multiplier(FixedPointMultiplier{(1 << 30) - 1, 0}, "f", "m"), Error);
  CHECK_THROWS_WITH(validate_multiplier(FixedPointMultiplier{1 << 30, 31}, "f", "m"), Catch::Contains("m.shift = 31"));
  CHECK_THROWS_AS(validate_multiplier(FixedPointMultiplier{1 << 30, -32}, "f", "m"), Error);
}

TEST_CASE("requantization multipliers from float scales", "[quant][requantize]") {
  const FixedPointMultiplier m = requantization_multiplier(0.02f, 0.005f, 0.1f);
  const FixedPointMultiplier expected = quantize_multiplier(double(0.02f) * double(0.005f) / double(0.1f));
  CHECK(m.multiplier == expected.multiplier);
  CHECK(m.shift == expected.shift);
  const std::vector<FixedPointMultiplier> per_channel = requantization_multipliers(0.5f, {0.25f, 0.001f}, 2.0f);
  REQUIRE(per_channel.size() == 2);
  CHECK(per_channel[0].real_value() == 0.0625);
  CHECK(per_channel[1].multiplier == quantize_multiplier(0.5 * double(0.001f) / 2.0).multiplier);
  CHECK_THROWS_WITH(requantization_multiplier(0.0f, 1.0f, 1.0f), Catch::Contains("input_scale = 0"));
  CHECK_THROWS_WITH(requantization_multiplier(1.0f, std::nanf(""), 1.0f), Catch::Contains("weight_scale"));
  CHECK_THROWS_WITH(requantization_multiplier(1.0f, 1.0f, -1.0f), Catch::Contains("output_scale = -1"));
  CHECK_THROWS_WITH(requantization_multipliers(1.0f, {1.0f, -2.0f}, 1.0f), Catch::Contains("weight_scales[1] = -2"));
  CHECK_THROWS_WITH(requantization_multipliers(1e-30f, {1.0f, 1e-30f}, 1.0f), Catch::Contains("weight_scales[0]"));
  CHECK_THROWS_AS(requantization_multipliers(1.0f, {}, 1.0f), Error);
}

TEST_CASE("saturating rounding doubling high mul: ties, INT32_MIN corner, agreement with the nudge form",
          "[quant][requantize]") {
  CHECK(saturating_rounding_doubling_high_mul(kInt32Min, kInt32Min) == kInt32Max);  // the one overflow
  CHECK(saturating_rounding_doubling_high_mul(kInt32Min, kInt32Max) == -kInt32Max);
  CHECK(saturating_rounding_doubling_high_mul(kInt32Max, kInt32Max) == kInt32Max - 1);
  // 2ab / 2^32 = ab / 2^31 exactly at halves: ties go toward +inf (gemmlowp, SQRDMULH).
  CHECK(saturating_rounding_doubling_high_mul(1, 1 << 30) == 1);    // 0.5
  CHECK(saturating_rounding_doubling_high_mul(-1, 1 << 30) == 0);   // -0.5
  CHECK(saturating_rounding_doubling_high_mul(3, 1 << 30) == 2);    // 1.5
  CHECK(saturating_rounding_doubling_high_mul(-3, 1 << 30) == -1);  // -1.5
  CHECK(saturating_rounding_doubling_high_mul(-3, (1 << 30) + 1) == -2);  // just past -1.5
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> any(kInt32Min, kInt32Max);
  std::int64_t mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::int32_t a = i % 3 == 0 ? any(rng) >> (i % 31) : any(rng);
    const std::int32_t b = i % 5 == 0 ? (1 << 30) : any(rng);
    if (saturating_rounding_doubling_high_mul(a, b) != high_mul_by_nudge(a, b) && mismatches++ == 0)
      FAIL_CHECK("first mismatch: a = " << a << ", b = " << b);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("rounding divide by power of two rounds half away from zero", "[quant][requantize]") {
  CHECK(rounding_divide_by_pot(5, 1) == 3);    // 2.5
  CHECK(rounding_divide_by_pot(-5, 1) == -3);  // -2.5
  CHECK(rounding_divide_by_pot(-1, 1) == -1);  // -0.5
  CHECK(rounding_divide_by_pot(-6, 2) == -2);  // -1.5
  CHECK(rounding_divide_by_pot(-5, 2) == -1);  // -1.25
  CHECK(rounding_divide_by_pot(kInt32Min, 0) == kInt32Min);
  CHECK(rounding_divide_by_pot(kInt32Min, 31) == -1);
  CHECK(rounding_divide_by_pot(kInt32Max, 31) == 1);
  CHECK(rounding_divide_by_pot(1 << 29, 31) == 0);   // 0.25
  CHECK(rounding_divide_by_pot(1 << 30, 31) == 1);   // 0.5
  CHECK(rounding_divide_by_pot(-(1 << 30), 31) == -1);
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::int32_t> any(kInt32Min, kInt32Max);
  const std::int32_t ends[] = {kInt32Min, kInt32Max, -1, 0};
  std::int64_t mismatches = 0;
  for (int exponent = 0; exponent <= 31; ++exponent)
    for (int i = 0; i < 5000; ++i) {
      const std::int32_t x = i < 4 ? ends[i] : any(rng);
      if (rounding_divide_by_pot(x, exponent) != divide_by_pot_by_mask(x, exponent) && mismatches++ == 0)
        FAIL_CHECK("first mismatch: x = " << x << ", exponent = " << exponent);
    }
  CHECK(mismatches == 0);
}

TEST_CASE("requantize_value equals round_half_away(a * M) within 1, exactly away from halves",
          "[quant][requantize]") {
  std::mt19937_64 rng(2024);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const QuantRange int8_range{-128, 127};
  const QuantRange uint8_range{0, 255};
  std::int64_t cases = 0;
  std::int64_t exact_cases = 0;
  std::int64_t off_by_one = 0;
  std::int64_t failures = 0;
  for (int i = 0; i < 400000; ++i) {
    const double M = std::pow(10.0, -9.0 + 12.0 * unit(rng));  // 1e-9 .. 1e3
    const FixedPointMultiplier m = quantize_multiplier(M);
    const bool unsigned_out = i % 2 == 1;
    const QuantRange range = unsigned_out ? uint8_range : int8_range;
    const std::int32_t zero_point = range.qmin + static_cast<std::int32_t>(unit(rng) * (range.qmax - range.qmin));
    // Aim a * M mostly at the output range (so little is clamped); some draws span all of int32.
    double target = (unit(rng) - 0.5) * 700.0;
    if (i % 7 == 0) target = (unit(rng) - 0.5) * 2.0 * std::ldexp(M, 31);
    const double wanted = std::fmax(std::fmin(std::nearbyint(target / M), 2147483000.0), -2147483000.0);
    const auto a = static_cast<std::int64_t>(wanted);
    const std::int32_t bias = i % 3 == 0 ? static_cast<std::int32_t>(unit(rng) * 600.0) - 300 : 0;
    const std::int32_t accumulator = static_cast<std::int32_t>(a - bias);

    const std::int32_t got = requantize_value(accumulator, bias, m, zero_point, range);
    const ExactProduct exact = exact_round(a, M);
    const std::int32_t expected = clamp_to(exact.rounded + zero_point, range);
    const int right_shift = m.shift > 0 ? 0 : -m.shift;
    const long double eps = (right_shift > 0 ? std::ldexp(1.0L, -(right_shift + 1)) : 0.0L) +
                            static_cast<long double>(a < 0 ? -a : a) * std::ldexp(1.0L, m.shift - 32);
    const bool clamped_by_margin =
        exact.rounded + zero_point >= range.qmax + 1 || exact.rounded + zero_point <= range.qmin - 1;
    const bool away_from_half = exact.distance_to_half > eps * (1.0L + 1e-9L);
    ++cases;
    const bool exact_required = away_from_half || clamped_by_margin;
    exact_cases += exact_required ? 1 : 0;
    off_by_one += got != expected ? 1 : 0;
    if ((std::abs(got - expected) > 1 || (exact_required && got != expected)) && failures++ == 0)
      FAIL_CHECK("first failure: acc = " << accumulator << ", bias = " << bias << ", M = " << M << " (M0 = "
                                         << m.multiplier << ", shift = " << m.shift << "), zp = " << zero_point
                                         << ": got " << got << ", exact " << expected);
  }
  CHECK(failures == 0);
  CHECK(exact_cases > cases * 95 / 100);  // the exactness claim covers almost every draw
  CHECK(off_by_one > 0);                  // and the near-half draws do exercise the off-by-one allowance
}

TEST_CASE("multiply_by_quantized_multiplier matches gemmlowp's formulation bit for bit", "[quant][requantize]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<std::int32_t> any(kInt32Min, kInt32Max);
  std::int64_t mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    const FixedPointMultiplier m = quantize_multiplier(std::pow(10.0, -9.0 + 12.0 * unit(rng)));
    const int left_shift = m.shift > 0 ? m.shift : 0;
    // gemmlowp shifts without saturating, so stay where x * 2^left_shift fits in int32.
    const std::int32_t x = any(rng) >> (left_shift + static_cast<int>(unit(rng) * (31 - left_shift)));
    const std::int32_t reference = divide_by_pot_by_mask(
        high_mul_by_nudge(static_cast<std::int32_t>(x * (std::int64_t{1} << left_shift)), m.multiplier),
        m.shift > 0 ? 0 : -m.shift);
    if (multiply_by_quantized_multiplier(x, m) != reference && mismatches++ == 0)
      FAIL_CHECK("first mismatch: x = " << x << ", M0 = " << m.multiplier << ", shift = " << m.shift);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("requantization rounds twice: the documented off-by-one cases", "[quant][requantize]") {
  // M = 2^-k is M0 = 2^30 with rs = k - 1: h = round(x / 2) (ties up), then round(h / 2^(k-1)) (ties away).
  CHECK(multiply_by_quantized_multiplier(1, quantize_multiplier(0.25)) == 1);    // h = 1, 1/2 -> 1; exact 0.25
  CHECK(multiply_by_quantized_multiplier(3, quantize_multiplier(0.125)) == 1);   // h = 2, 2/4 -> 1; exact 0.375
  CHECK(multiply_by_quantized_multiplier(5, quantize_multiplier(0.25)) == 2);    // h = 3, 3/2 -> 2; exact 1.25
  CHECK(multiply_by_quantized_multiplier(-1, quantize_multiplier(0.5)) == 0);    // h = round(-0.5) = 0 (tie up)
  CHECK(multiply_by_quantized_multiplier(1, quantize_multiplier(0.5)) == 1);     // h = round(0.5) = 1
  // Away from halves both roundings agree with the exact product.
  CHECK(multiply_by_quantized_multiplier(12344, quantize_multiplier(0.25)) == 3086);
  CHECK(multiply_by_quantized_multiplier(-12345, quantize_multiplier(0.125)) == -1543);  // exact -1543.125
}

TEST_CASE("requantize saturates at the range ends and at INT32_MIN", "[quant][requantize]") {
  const FixedPointMultiplier m = quantize_multiplier(0.01);
  CHECK(requantize_value(1000000, 0, m, 0, {-128, 127}) == 127);
  CHECK(requantize_value(-1000000, 0, m, 0, {-128, 127}) == -128);
  CHECK(requantize_value(-1000000, 0, m, 0, {-127, 127}) == -127);  // restricted range
  CHECK(requantize_value(12700, 0, m, 0, {-128, 127}) == 127);
  CHECK(requantize_value(12750, 0, m, 0, {-128, 127}) == 127);
  CHECK(requantize_value(-12850, 0, m, 0, {-128, 127}) == -128);
  CHECK(requantize_value(-200, 0, m, 10, {10, 255}) == 10);  // fused ReLU: qmin = zero point
  CHECK(requantize_value(kInt32Min, 0, m, 0, {-128, 127}) == -128);
  CHECK(requantize_value(kInt32Max, 0, m, 255, {0, 255}) == 255);
  // acc + bias leaves int32: the sum saturates, the output clamps.
  CHECK(requantize_value(kInt32Max, kInt32Max, m, 0, {-128, 127}) == 127);
  CHECK(requantize_value(kInt32Min, -5, m, 0, {-128, 127}) == -128);
  // Multipliers > 1 shift left first; a saturating shift still lands on the right end.
  const FixedPointMultiplier big = quantize_multiplier(1000.0);
  CHECK(big.shift == 10);
  CHECK(requantize_value(kInt32Min, 0, big, 0, {-128, 127}) == -128);
  CHECK(requantize_value(3000000, 0, big, 0, {-128, 127}) == 127);
  CHECK(requantize_value(-1, 0, big, 0, {-2000, 2000}) == -1000);
  CHECK(multiply_by_quantized_multiplier(kInt32Min, quantize_multiplier(0.5)) == -(1 << 30));
  // Tiny multipliers: the largest accumulators give a few units.
  const FixedPointMultiplier tiny = quantize_multiplier(1e-9);
  CHECK(requantize_value(kInt32Max, 0, tiny, 0, {-128, 127}) == 2);
  CHECK(requantize_value(kInt32Min, 0, tiny, 0, {-128, 127}) == -2);
  CHECK(requantize_value(kInt32Min, 0, quantize_multiplier(std::ldexp(1.0, -32)), 0, {-128, 127}) == -1);  // -0.5
}

TEST_CASE("requantize per tensor and per channel over strided [M, N] views, with bias", "[quant][requantize]") {
  constexpr std::int64_t rows = 5, cols = 4;
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::int32_t> dist(-40000, 40000);
  std::vector<std::int32_t> acc(static_cast<std::size_t>(rows * cols));
  for (auto& v : acc) v = dist(rng);
  const std::vector<std::int32_t> bias{100, -2000, 0, 7};
  const std::vector<FixedPointMultiplier> multipliers =
      requantization_multipliers(0.05f, {0.001f, 0.002f, 0.0005f, 0.004f}, 0.1f);
  // Accumulators stored column-major (as Eigen's default), read as [rows, cols].
  std::vector<std::int32_t> acc_col_major(acc.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) acc_col_major[c * rows + r] = acc[r * cols + c];
  const TensorView<const std::int32_t> acc_view(acc.data(), Shape{rows, cols});
  const TensorView<const std::int32_t> acc_strided(acc_col_major.data(), Shape{rows, cols}, Strides{1, rows});
  const TensorView<const std::int32_t> bias_view(bias.data(), Shape{cols});

  SECTION("per channel, int8") {
    std::vector<std::int8_t> out(acc.size()), out_strided(acc.size());
    requantize_per_channel(acc_view, bias_view, multipliers, -3, QuantRange{-128, 127},
                           TensorView<std::int8_t>(out.data(), Shape{rows, cols}));
    // Output written column-major too.
    requantize_per_channel(acc_strided, bias_view, multipliers, -3, QuantRange{-128, 127},
                           TensorView<std::int8_t>(out_strided.data(), Shape{rows, cols}, Strides{1, rows}));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::int32_t expected = requantize_value(acc[r * cols + c], bias[c], multipliers[c], -3, {-128, 127});
        CHECK(out[r * cols + c] == expected);
        CHECK(out_strided[c * rows + r] == expected);
      }
  }
  SECTION("per tensor, uint8, with and without bias") {
    const FixedPointMultiplier m = requantization_multiplier(0.05f, 0.001f, 0.1f);
    std::vector<std::uint8_t> out(acc.size()), no_bias(acc.size());
    requantize_per_tensor(acc_strided, bias_view, m, 128, QuantRange{0, 255},
                          TensorView<std::uint8_t>(out.data(), Shape{rows, cols}));
    requantize_per_tensor(acc_view, m, 128, QuantRange{0, 255}, TensorView<std::uint8_t>(no_bias.data(), Shape{rows, cols}));
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        CHECK(out[r * cols + c] == requantize_value(acc[r * cols + c], bias[c], m, 128, {0, 255}));
        CHECK(no_bias[r * cols + c] == requantize_value(acc[r * cols + c], 0, m, 128, {0, 255}));
      }
  }
  SECTION("rank 3 accumulators: channels are the last dimension") {
    std::vector<std::int8_t> out(acc.size()), flat(acc.size());
    const TensorView<const std::int32_t> acc3(acc.data(), Shape{1, rows, cols});
    requantize_per_channel(acc3, multipliers, 0, QuantRange{-128, 127}, TensorView<std::int8_t>(out.data(), Shape{1, rows, cols}));
    requantize_per_channel(acc_view, multipliers, 0, QuantRange{-128, 127}, TensorView<std::int8_t>(flat.data(), Shape{rows, cols}));
    CHECK(out == flat);
  }
}

TEST_CASE("requantize rejects bad input and leaves the output untouched", "[quant][requantize]") {
  std::vector<std::int32_t> acc{1000, -2000, 3000, -4000, 5000, -6000};
  const TensorView<const std::int32_t> acc_view(acc.data(), Shape{2, 3});
  const std::vector<std::int32_t> bias{1, 2, 3};
  const TensorView<const std::int32_t> bias_view(bias.data(), Shape{3});
  const FixedPointMultiplier m = quantize_multiplier(0.01);
  const std::vector<FixedPointMultiplier> ms(3, m);
  std::vector<std::int8_t> out(6, std::int8_t{0x5A});
  const TensorView<std::int8_t> out_view(out.data(), Shape{2, 3});
  const QuantRange int8_range{-128, 127};
  const auto untouched = [&] {
    for (std::int8_t v : out)
      if (v != 0x5A) return false;
    return true;
  };

  CHECK_THROWS_WITH(requantize_per_channel(acc_view, std::vector<FixedPointMultiplier>(2, m), 0, int8_range, out_view),
                    Catch::Contains("multipliers.size() = 2") && Catch::Contains("3 multipliers"));
  CHECK_THROWS_WITH(requantize_per_channel(acc_view, TensorView<const std::int32_t>(bias.data(), Shape{2}), ms, 0,
                                           int8_range, out_view),
                    Catch::Contains("bias.shape = [2]"));
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, TensorView<const std::int32_t>(bias.data(), Shape{1, 3}), m, 0,
                                          int8_range, out_view),
                    Catch::Contains("bias.shape"));
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, m, 0, int8_range, TensorView<std::int8_t>(out.data(), Shape{3, 2})),
                    Catch::Contains("output.shape = [3, 2]"));
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, FixedPointMultiplier{0, 0}, 0, int8_range, out_view),
                    Catch::Contains("multiplier.multiplier = 0"));
  std::vector<FixedPointMultiplier> bad = ms;
  bad[2].shift = 40;
  CHECK_THROWS_WITH(requantize_per_channel(acc_view, bad, 0, int8_range, out_view), Catch::Contains("multipliers[2].shift = 40"));
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, m, 0, QuantRange{-128, 200}, out_view), Catch::Contains("range = [-128, 200]"));
  CHECK_THROWS_AS(requantize_per_tensor(acc_view, m, 0, QuantRange{5, 4}, out_view), Error);
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, m, 130, int8_range, out_view), Catch::Contains("output_zero_point = 130"));
  CHECK_THROWS_WITH(requantize_per_tensor(TensorView<const std::int32_t>(acc.data(), Shape{0, 3}), m, 0, int8_range,
                                          TensorView<std::int8_t>(out.data(), Shape{0, 3})),
                    Catch::Contains("at least one element"));
  CHECK_THROWS_AS(requantize_per_tensor(TensorView<const std::int32_t>(acc.data(), Shape{2, 3}, Device::cuda(0)), m, 0,
                                        int8_range, out_view),
                  Error);
  CHECK_THROWS_AS(requantize_per_tensor(acc_view, quantize_multiplier(-1.0), 0, int8_range, out_view), Error);
  std::vector<std::uint8_t> out_u8(6, 0x5A);
  CHECK_THROWS_WITH(requantize_per_tensor(acc_view, m, -1, QuantRange{0, 255}, TensorView<std::uint8_t>(out_u8.data(), Shape{2, 3})),
                    Catch::Contains("output_zero_point = -1"));
  CHECK(untouched());
  for (std::uint8_t v : out_u8) CHECK(v == 0x5A);
}
