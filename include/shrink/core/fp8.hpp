// 8-bit floats of the OCP 8-bit floating point specification (v1.0): E4M3 ("FN") and E5M2, with exact
// decoding and round-to-nearest-even encoding from float, saturating or not. Same bits as CUDA's
// __nv_fp8_e4m3 / __nv_fp8_e5m2.
//
//   format  bias  max finite     min normal  min subnormal  infinity      NaN codes
//   E4M3    7     448  (0x7E)    2^-6        2^-9           none          S.1111.111 (0x7F, 0xFF)
//   E5M2    15    57344 (0x7B)   2^-14       2^-16          S.11111.00    S.11111.{01,10,11}
//
// Encoding float -> fp8 rounds to nearest, ties to even (halfway below the smallest subnormal gives +-0).
// A value whose rounded magnitude exceeds the largest finite one, and +-inf, become:
//   saturate = true   +-max finite (448 / 57344): what CUDA's __NV_SATFINITE and PTX cvt.rn.satfinite do,
//                     infinities included;
//   saturate = false  the OCP rules: NaN for E4M3 (no infinity), +-inf for E5M2 (what ml_dtypes does).
// NaN input gives a NaN in both modes, keeping its sign: E4M3 S.1111.111 (0x7F / 0xFF), E5M2 the quiet
// S.11111.10 (0x7E / 0xFE); the payload is dropped. These are ml_dtypes' encodings; CUDA's conversions give
// 0x7F for every NaN in both formats, also a NaN, so values agree and only NaN bit patterns may differ.
// Decoding is exact; NaN codes decode to the quiet float NaN 0x7FC00000 with the code's sign.
#pragma once

#include <cstdint>
#include <type_traits>

#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"

namespace shrink {

enum class Fp8Format : std::uint8_t { e4m3, e5m2 };

inline const char* to_string(Fp8Format format) { return format == Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

template <Fp8Format F>
struct Fp8Spec;

template <>
struct Fp8Spec<Fp8Format::e4m3> {
  static constexpr int mantissa_bits = 3;
  static constexpr int exponent_bias = 7;
  static constexpr std::uint32_t max_finite_code = 0x7E;
  static constexpr std::uint32_t nan_code = 0x7F;
  static constexpr std::uint32_t overflow_code = 0x7F;  // no infinity: NaN
  static constexpr bool has_infinity = false;
  static constexpr float max_finite = 448.0f;
};

template <>
struct Fp8Spec<Fp8Format::e5m2> {
  static constexpr int mantissa_bits = 2;
  static constexpr int exponent_bias = 15;
  static constexpr std::uint32_t max_finite_code = 0x7B;
  static constexpr std::uint32_t nan_code = 0x7E;
  static constexpr std::uint32_t overflow_code = 0x7C;  // infinity
  static constexpr bool has_infinity = true;
  static constexpr float max_finite = 57344.0f;
};

// Branch-free so that loops over it vectorise; see the file comment for the rules.
template <Fp8Format F>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint8_t fp8_encode(float value, bool saturate) {
  using Spec = Fp8Spec<F>;
  constexpr int shift = 23 - Spec::mantissa_bits;
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - Spec::exponent_bias) << 23;
  constexpr std::int32_t min_normal_bits = (128 - Spec::exponent_bias) << 23;
  constexpr auto max_finite_code = static_cast<std::int32_t>(Spec::max_finite_code);
  // A float of exponent e has last bit 2^(e-23); with e = 23 + log2(smallest subnormal) it is the subnormal step.
  constexpr std::uint32_t subnormal_grid_bits =
      static_cast<std::uint32_t>(127 + 24 - Spec::exponent_bias - Spec::mantissa_bits) << 23;

  const std::uint32_t x = float_to_bits(value);
  const std::uint32_t sign = (x >> 24) & 0x80u;
  const std::int32_t magnitude = magnitude_bits(x);
  const auto unsigned_magnitude = static_cast<std::uint32_t>(magnitude);
  // Normal range: rebias the exponent, then round at bit `shift`; a carry may reach the exponent.
  const std::uint32_t rebiased = unsigned_magnitude - rebias;
  const std::uint32_t normal = (rebiased + ((1u << (shift - 1)) - 1u) + ((rebiased >> shift) & 1u)) >> shift;
  // Subnormal range: adding the grid value makes the FPU round to the subnormal step (ties to even); the
  // difference of the bit patterns counts the steps (the count 2^mantissa_bits is the smallest normal).
  const float grid = bits_to_float(subnormal_grid_bits);
  const std::uint32_t subnormal = float_to_bits(bits_to_float(unsigned_magnitude) + grid) - subnormal_grid_bits;
  std::uint32_t code = select_bits(magnitude < min_normal_bits, subnormal, normal);
  // Past the largest finite code (infinity gives a huge `normal`); codes stay below 2^31, so compare signed.
  const std::uint32_t overflow = saturate ? Spec::max_finite_code : Spec::overflow_code;
  code = select_bits(static_cast<std::int32_t>(code) > max_finite_code, overflow, code);
  code = select_bits(magnitude > 0x7F800000, Spec::nan_code, code);
  return static_cast<std::uint8_t>(sign | code);
}

template <Fp8Format F>
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float fp8_decode(std::uint8_t bits) {
  using Spec = Fp8Spec<F>;
  constexpr int m = Spec::mantissa_bits;
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x80u) << 24;
  const std::uint32_t magnitude = bits & 0x7Fu;
  const std::uint32_t normal = (magnitude << (23 - m)) + (static_cast<std::uint32_t>(127 - Spec::exponent_bias) << 23);
  // Subnormals are magnitude * 2^(1 - bias - m), exact in float.
  const float step = bits_to_float(static_cast<std::uint32_t>(128 - Spec::exponent_bias - m) << 23);
  const std::uint32_t subnormal = float_to_bits(static_cast<float>(static_cast<std::int32_t>(magnitude)) * step);
  std::uint32_t result = select_bits(magnitude < (1u << m), subnormal, normal);
  if (Spec::has_infinity) result = select_bits(magnitude == Spec::overflow_code, kFloatInfBits, result);
  constexpr std::uint32_t first_nan = Spec::has_infinity ? Spec::overflow_code + 1 : Spec::nan_code;
  result = select_bits(magnitude >= first_nan, 0x7FC00000u, result);
  return bits_to_float(sign | result);
}

// Largest finite value of a format: 448 (E4M3), 57344 (E5M2).
SHRINK_HOST_DEVICE constexpr float fp8_max_finite(Fp8Format format) {
  return format == Fp8Format::e4m3 ? Fp8Spec<Fp8Format::e4m3>::max_finite : Fp8Spec<Fp8Format::e5m2>::max_finite;
}

// Encodes with the rules of the file comment.
SHRINK_HOST_DEVICE inline std::uint8_t fp8_encode(float value, Fp8Format format, bool saturate) {
  return format == Fp8Format::e4m3 ? fp8_encode<Fp8Format::e4m3>(value, saturate)
                                   : fp8_encode<Fp8Format::e5m2>(value, saturate);
}

// Exact decoding; NaN codes give a quiet NaN of the code's sign.
SHRINK_HOST_DEVICE inline float fp8_decode(std::uint8_t bits, Fp8Format format) {
  return format == Fp8Format::e4m3 ? fp8_decode<Fp8Format::e4m3>(bits) : fp8_decode<Fp8Format::e5m2>(bits);
}

// One 8-bit float of format F; use the aliases float8_e4m3 and float8_e5m2.
template <Fp8Format F>
struct float8 {
  static constexpr Fp8Format format = F;

  // Uninitialised, like a float; trivial so it can live in CUDA shared memory and be memcpy'd.
  float8() = default;
  // Rounds to nearest even. saturate = true (the default, as CUDA's constructors) clamps out-of-range values
  // and infinities to +-max finite; false follows OCP (E4M3 -> NaN, E5M2 -> +-inf).
  SHRINK_HOST_DEVICE explicit float8(float value, bool saturate = true) : bits_(fp8_encode<F>(value, saturate)) {}

  SHRINK_HOST_DEVICE static constexpr float8 from_bits(std::uint8_t bits) { return float8(bits, BitsTag{}); }
  SHRINK_HOST_DEVICE constexpr std::uint8_t to_bits() const { return bits_; }
  SHRINK_HOST_DEVICE float to_float() const { return fp8_decode<F>(bits_); }
  SHRINK_HOST_DEVICE explicit operator float() const { return to_float(); }

  SHRINK_HOST_DEVICE constexpr bool is_nan() const { return magnitude() > Spec::max_finite_code && !is_inf(); }
  SHRINK_HOST_DEVICE constexpr bool is_inf() const { return Spec::has_infinity && magnitude() == Spec::overflow_code; }
  SHRINK_HOST_DEVICE constexpr bool is_finite() const { return magnitude() <= Spec::max_finite_code; }

  SHRINK_HOST_DEVICE static constexpr float8 max_finite() {
    return from_bits(static_cast<std::uint8_t>(Spec::max_finite_code));
  }
  SHRINK_HOST_DEVICE static constexpr float8 lowest() {
    return from_bits(static_cast<std::uint8_t>(0x80u | Spec::max_finite_code));
  }
  SHRINK_HOST_DEVICE static constexpr float8 min_normal() {
    return from_bits(static_cast<std::uint8_t>(1u << Spec::mantissa_bits));
  }
  SHRINK_HOST_DEVICE static constexpr float8 min_subnormal() { return from_bits(0x01u); }
  SHRINK_HOST_DEVICE static constexpr float8 quiet_nan() {
    return from_bits(static_cast<std::uint8_t>(Spec::nan_code));
  }

  // IEEE comparisons, through float.
  SHRINK_HOST_DEVICE friend bool operator==(float8 a, float8 b) { return a.to_float() == b.to_float(); }
  SHRINK_HOST_DEVICE friend bool operator!=(float8 a, float8 b) { return a.to_float() != b.to_float(); }
  SHRINK_HOST_DEVICE friend bool operator<(float8 a, float8 b) { return a.to_float() < b.to_float(); }
  SHRINK_HOST_DEVICE friend bool operator<=(float8 a, float8 b) { return a.to_float() <= b.to_float(); }
  SHRINK_HOST_DEVICE friend bool operator>(float8 a, float8 b) { return a.to_float() > b.to_float(); }
  SHRINK_HOST_DEVICE friend bool operator>=(float8 a, float8 b) { return a.to_float() >= b.to_float(); }

 private:
  using Spec = Fp8Spec<F>;
  struct BitsTag {};
  SHRINK_HOST_DEVICE constexpr float8(std::uint8_t bits, BitsTag) : bits_(bits) {}
  SHRINK_HOST_DEVICE constexpr std::uint32_t magnitude() const { return bits_ & 0x7Fu; }
  std::uint8_t bits_;
};

using float8_e4m3 = float8<Fp8Format::e4m3>;
using float8_e5m2 = float8<Fp8Format::e5m2>;

static_assert(sizeof(float8_e4m3) == 1 && sizeof(float8_e5m2) == 1, "fp8 types are one byte");
static_assert(std::is_trivially_copyable<float8_e4m3>::value && std::is_standard_layout<float8_e4m3>::value,
              "float8_e4m3 is plain bits");
static_assert(std::is_trivially_copyable<float8_e5m2>::value && std::is_standard_layout<float8_e5m2>::value,
              "float8_e5m2 is plain bits");

}  // namespace shrink
