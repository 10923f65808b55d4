// shrink::half (IEEE binary16) and shrink::bfloat16: 16-bit float storage types, bit-compatible with CUDA's
// __half and __nv_bfloat16, with exact decoding and round-to-nearest-even encoding from float.
//
// Encoding rules (float -> 16 bits), the IEEE conversions done by F16C's vcvtps2ph and AVX512-BF16:
//   finite values round to nearest, ties to even; results below half the smallest subnormal become +-0,
//   results past the largest finite value become +-inf (half: |x| >= 65520; bfloat16: |x| >= 0x1.ffp127);
//   +-inf stays +-inf; a NaN stays a NaN of the same sign, quieted, keeping the top bits of its payload:
//   half: sign | 0x7E00 | (float mantissa >> 13), bfloat16: (float bits >> 16) | 0x0040.
// Decoding (16 bits -> float) is exact; a NaN decodes to a quiet float NaN with the same sign and payload.
// The float <-> bit helpers below are shared with core/fp8.hpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shrink/core/config.hpp"

namespace shrink {

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t float_to_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float bits_to_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

constexpr std::uint32_t kFloatInfBits = 0x7F800000u;
constexpr std::uint32_t kFloatQuietBit = 0x00400000u;

// condition ? a : b as a bit blend: both sides are computed, so compilers vectorise loops that use it
// (a plain ?: over floating-point work becomes a branch, which they do not).
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint32_t select_bits(bool condition, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(condition);
  return (a & mask) | (b & ~mask);
}

// A float's magnitude bits (sign cleared) as int32: they are below 2^31, so signed compares are exact, and
// SIMD units compare signed integers in one instruction (unsigned ones need more).
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::int32_t magnitude_bits(std::uint32_t float_bits) {
  return static_cast<std::int32_t>(float_bits & 0x7FFFFFFFu);
}

// Branch-free so that loops over it vectorise; see the file comment for the rules.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint16_t float_to_half_bits(float value) {
  const std::uint32_t x = float_to_bits(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::int32_t magnitude = magnitude_bits(x);
  const auto unsigned_magnitude = static_cast<std::uint32_t>(magnitude);
  // Normal halves: rebias the exponent (127 -> 15), then round at bit 13; a carry may reach the exponent,
  // and from 65520 on it reaches the infinity code 0x7C00.
  const std::uint32_t rebiased = unsigned_magnitude - (112u << 23);
  const std::uint32_t normal = (rebiased + 0x0FFFu + ((rebiased >> 13) & 1u)) >> 13;
  // Below 2^-14: adding 0.5 leaves a float whose last bit weighs 2^-24, the subnormal step, so the FPU's
  // round-to-nearest-even does the rounding; the difference of the bit patterns counts the steps.
  const std::uint32_t subnormal = float_to_bits(bits_to_float(unsigned_magnitude) + 0.5f) - 0x3F000000u;
  std::uint32_t code = select_bits(magnitude < 0x38800000, subnormal, normal);
  code = select_bits(magnitude >= 0x47800000, 0x7C00u, code);  // 65536 and above, +-inf included
  code = select_bits(magnitude > 0x7F800000, 0x7E00u | ((unsigned_magnitude >> 13) & 0x03FFu), code);
  return static_cast<std::uint16_t>(sign | code);
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float half_bits_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::int32_t magnitude = bits & 0x7FFF;
  const auto unsigned_magnitude = static_cast<std::uint32_t>(magnitude);
  const std::uint32_t normal = (unsigned_magnitude << 13) + (112u << 23);
  // Subnormals are magnitude * 2^-24, exact in float.
  const std::uint32_t subnormal = float_to_bits(static_cast<float>(magnitude) * 0x1p-24f);
  const std::uint32_t special =
      kFloatInfBits | (unsigned_magnitude << 13) | select_bits(magnitude > 0x7C00, kFloatQuietBit, 0u);
  std::uint32_t result = select_bits(magnitude < 0x0400, subnormal, normal);
  result = select_bits(magnitude >= 0x7C00, special, result);
  return bits_to_float(sign | result);
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t x = float_to_bits(value);
  // The result is the top half of: NaN, quieted; otherwise x rounded at bit 16, ties to even (overflow
  // carries into the infinity pattern).
  const std::uint32_t rounded = x + 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(select_bits(magnitude_bits(x) > 0x7F800000, x | kFloatQuietBit, rounded) >> 16);
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float bfloat16_bits_to_float(std::uint16_t bits) {
  const std::uint32_t x = static_cast<std::uint32_t>(bits) << 16;
  return bits_to_float(x | select_bits(magnitude_bits(x) > 0x7F800000, kFloatQuietBit, 0u));
}

// IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. Same bits as CUDA's __half.
struct half {
  // Uninitialised, like a float; trivial so it can live in CUDA shared memory and be memcpy'd.
  half() = default;
  // Rounds to nearest even (see the file comment for overflow and NaN).
  SHRINK_HOST_DEVICE explicit half(float value) : bits_(float_to_half_bits(value)) {}

  SHRINK_HOST_DEVICE static constexpr half from_bits(std::uint16_t bits) { return half(bits, BitsTag{}); }
  SHRINK_HOST_DEVICE constexpr std::uint16_t to_bits() const { return bits_; }
  SHRINK_HOST_DEVICE float to_float() const { return half_bits_to_float(bits_); }
  SHRINK_HOST_DEVICE explicit operator float() const { return to_float(); }

  SHRINK_HOST_DEVICE constexpr bool is_nan() const { return (bits_ & 0x7FFFu) > 0x7C00u; }
  SHRINK_HOST_DEVICE constexpr bool is_inf() const { return (bits_ & 0x7FFFu) == 0x7C00u; }
  SHRINK_HOST_DEVICE constexpr bool is_finite() const { return (bits_ & 0x7FFFu) < 0x7C00u; }

  SHRINK_HOST_DEVICE static constexpr half max_finite() { return from_bits(0x7BFFu); }     // 65504
  SHRINK_HOST_DEVICE static constexpr half lowest() { return from_bits(0xFBFFu); }         // -65504
  SHRINK_HOST_DEVICE static constexpr half min_normal() { return from_bits(0x0400u); }     // 2^-14
  SHRINK_HOST_DEVICE static constexpr half min_subnormal() { return from_bits(0x0001u); }  // 2^-24
  SHRINK_HOST_DEVICE static constexpr half epsilon() { return from_bits(0x1400u); }        // 2^-10
  SHRINK_HOST_DEVICE static constexpr half infinity() { return from_bits(0x7C00u); }
  SHRINK_HOST_DEVICE static constexpr half quiet_nan() { return from_bits(0x7E00u); }

 private:
  struct BitsTag {};
  SHRINK_HOST_DEVICE constexpr half(std::uint16_t bits, BitsTag) : bits_(bits) {}
  std::uint16_t bits_;
};

// bfloat16: the top half of a float (1 sign bit, 8 exponent bits, 7 mantissa bits). Same bits as
// CUDA's __nv_bfloat16.
struct bfloat16 {
  bfloat16() = default;
  // Rounds to nearest even (see the file comment for overflow and NaN).
  SHRINK_HOST_DEVICE explicit bfloat16(float value) : bits_(float_to_bfloat16_bits(value)) {}

  SHRINK_HOST_DEVICE static constexpr bfloat16 from_bits(std::uint16_t bits) { return bfloat16(bits, BitsTag{}); }
  SHRINK_HOST_DEVICE constexpr std::uint16_t to_bits() const { return bits_; }
  SHRINK_HOST_DEVICE float to_float() const { return bfloat16_bits_to_float(bits_); }
  SHRINK_HOST_DEVICE explicit operator float() const { return to_float(); }

  SHRINK_HOST_DEVICE constexpr bool is_nan() const { return (bits_ & 0x7FFFu) > 0x7F80u; }
  SHRINK_HOST_DEVICE constexpr bool is_inf() const { return (bits_ & 0x7FFFu) == 0x7F80u; }
  SHRINK_HOST_DEVICE constexpr bool is_finite() const { return (bits_ & 0x7FFFu) < 0x7F80u; }

  SHRINK_HOST_DEVICE static constexpr bfloat16 max_finite() { return from_bits(0x7F7Fu); }  // 0x1.fep127
  SHRINK_HOST_DEVICE static constexpr bfloat16 lowest() { return from_bits(0xFF7Fu); }
  SHRINK_HOST_DEVICE static constexpr bfloat16 min_normal() { return from_bits(0x0080u); }     // 2^-126
  SHRINK_HOST_DEVICE static constexpr bfloat16 min_subnormal() { return from_bits(0x0001u); }  // 2^-133
  SHRINK_HOST_DEVICE static constexpr bfloat16 epsilon() { return from_bits(0x3C00u); }        // 2^-7
  SHRINK_HOST_DEVICE static constexpr bfloat16 infinity() { return from_bits(0x7F80u); }
  SHRINK_HOST_DEVICE static constexpr bfloat16 quiet_nan() { return from_bits(0x7FC0u); }

 private:
  struct BitsTag {};
  SHRINK_HOST_DEVICE constexpr bfloat16(std::uint16_t bits, BitsTag) : bits_(bits) {}
  std::uint16_t bits_;
};

static_assert(sizeof(half) == 2 && alignof(half) == 2, "half must match __half: 2 bytes, 2-aligned");
static_assert(sizeof(bfloat16) == 2 && alignof(bfloat16) == 2, "bfloat16 must match __nv_bfloat16");
static_assert(std::is_trivially_copyable<half>::value && std::is_standard_layout<half>::value, "half is plain bits");
static_assert(std::is_trivially_copyable<bfloat16>::value && std::is_standard_layout<bfloat16>::value,
              "bfloat16 is plain bits");

// IEEE comparisons, through float (NaN compares unequal to everything, +0 == -0).
#define SHRINK_DEFINE_FLOAT16_COMPARISONS(T)                                                   \
  SHRINK_HOST_DEVICE inline bool operator==(T a, T b) { return a.to_float() == b.to_float(); } \
  SHRINK_HOST_DEVICE inline bool operator!=(T a, T b) { return a.to_float() != b.to_float(); } \
  SHRINK_HOST_DEVICE inline bool operator<(T a, T b) { return a.to_float() < b.to_float(); }   \
  SHRINK_HOST_DEVICE inline bool operator<=(T a, T b) { return a.to_float() <= b.to_float(); } \
  SHRINK_HOST_DEVICE inline bool operator>(T a, T b) { return a.to_float() > b.to_float(); }   \
  SHRINK_HOST_DEVICE inline bool operator>=(T a, T b) { return a.to_float() >= b.to_float(); }
SHRINK_DEFINE_FLOAT16_COMPARISONS(half)
SHRINK_DEFINE_FLOAT16_COMPARISONS(bfloat16)
#undef SHRINK_DEFINE_FLOAT16_COMPARISONS

}  // namespace shrink
