// Affine quantization of one value, PyTorch's formulas (quant/quantize.hpp), one definition for the host and the
// device:
//   q  = clamp(nearbyint(x · inv_scale) + zp, qmin, qmax)     inv_scale = 1.0f / scale in float; half to even
//   x' = (q − zp) · scale
// Clamping x · inv_scale to [qmin − zp, qmax − zp] before rounding gives the same q (the bounds are integers) and keeps
// the conversion to int in range; NaN lands on qmin.
//
// With a fractional zero point z (a float: HQQ's, quant/hqq.hpp), in this float32 order, each operation rounded to
// nearest even:
//   v  = float(float(x · inv_scale) + z)     a product, then a sum: two roundings, never an FMA
//   q  = clamp(nearbyint(v), qmin, qmax)     half to even; v clamped to [qmin, qmax] first gives the same q
//   x' = float(float(float(q) − z) · scale)  float(q) is exact; the difference is rounded, then the product
// The device keeps the two roundings with __fmul_rn / __fadd_rn / __fsub_rn; the host passes the product through a
// volatile, so no compiler contracts x · inv_scale + z into an FMA (GCC does under -ffp-contract=fast, its default in
// GNU mode, wherever FMA instructions are enabled: aarch64, -march=haswell).
#pragma once

#include <cmath>
#include <cstdint>

#include "shrink/core/config.hpp"

namespace shrink {

// One element's parameters, with the clamp bounds shifted by the zero point.
struct AffineParams {
  float scale = 1.0f;
  float inv_scale = 1.0f;
  std::int32_t zero_point = 0;
  float low = 0.0f;   // qmin − zero_point
  float high = 0.0f;  // qmax − zero_point

  AffineParams() = default;
  SHRINK_HOST_DEVICE AffineParams(float scale_, std::int32_t zero_point_, std::int32_t qmin, std::int32_t qmax)
      : AffineParams(scale_, 1.0f / scale_, zero_point_, qmin, qmax) {}
  // With an inverse computed elsewhere (once on the host for a device kernel, say): it must equal 1.0f / scale.
  SHRINK_HOST_DEVICE AffineParams(float scale_, float inv_scale_, std::int32_t zero_point_, std::int32_t qmin,
                                  std::int32_t qmax)
      : scale(scale_),
        inv_scale(inv_scale_),
        zero_point(zero_point_),
        low(static_cast<float>(qmin - zero_point_)),
        high(static_cast<float>(qmax - zero_point_)) {}
};

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::int32_t quantize_value(float x, const AffineParams& p) {
#if defined(__CUDA_ARCH__)
  float v = __fmul_rn(x, p.inv_scale);
  v = v >= p.low ? (v <= p.high ? v : p.high) : p.low;  // NaN lands on low, never converted
  return __float2int_rn(v) + p.zero_point;
#else
  float v = x * p.inv_scale;
  v = v >= p.low ? (v <= p.high ? v : p.high) : p.low;  // NaN lands on low, never converted
  return static_cast<std::int32_t>(std::nearbyint(v)) + p.zero_point;
#endif
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float dequantize_value(std::int32_t q, const AffineParams& p) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(static_cast<float>(q - p.zero_point), p.scale);
#else
  return static_cast<float>(q - p.zero_point) * p.scale;
#endif
}

// y = (clamp(nearbyint(x · inv_scale) + zp) − zp) · scale; *mask (when not null) = 1 where the unclamped
// nearbyint(x · inv_scale) + zp lies in [qmin, qmax] (the straight-through gradient passes), else 0.
SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float fake_quantize_value(float x, const AffineParams& p, std::uint8_t* mask) {
  // One step outside the bounds keeps the rounding exact and still tells inside from outside.
  const float low1 = p.low - 1.0f, high1 = p.high + 1.0f;  // exact: small integers
#if defined(__CUDA_ARCH__)
  float v = __fmul_rn(x, p.inv_scale);
  v = v < low1 ? low1 : (v > high1 ? high1 : v);
  const float r = rintf(v);
#else
  float v = x * p.inv_scale;
  v = v < low1 ? low1 : (v > high1 ? high1 : v);
  const float r = std::nearbyint(v);
#endif
  if (mask != nullptr) *mask = (r >= p.low && r <= p.high) ? 1 : 0;
  const float clamped = r < p.low ? p.low : (r > p.high ? p.high : r);
#if defined(__CUDA_ARCH__)
  return __fmul_rn(clamped, p.scale);
#else
  return clamped * p.scale;
#endif
}

// One element's parameters with a fractional zero point (see the file comment).
struct FractionalAffineParams {
  float scale = 1.0f;
  float inv_scale = 1.0f;
  float zero_point = 0.0f;
  float qmin = 0.0f;
  float qmax = 0.0f;

  FractionalAffineParams() = default;
  SHRINK_HOST_DEVICE FractionalAffineParams(float scale_, float zero_point_, std::int32_t qmin_, std::int32_t qmax_)
      : scale(scale_),
        inv_scale(1.0f / scale_),
        zero_point(zero_point_),
        qmin(static_cast<float>(qmin_)),
        qmax(static_cast<float>(qmax_)) {}
};

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE std::int32_t quantize_value(float x, const FractionalAffineParams& p) {
#if defined(__CUDA_ARCH__)
  float v = __fadd_rn(__fmul_rn(x, p.inv_scale), p.zero_point);
  v = v >= p.qmin ? (v <= p.qmax ? v : p.qmax) : p.qmin;  // NaN lands on qmin, never converted
  return __float2int_rn(v);
#else
  const volatile float scaled = x * p.inv_scale;  // rounded on its own: never fused with the sum
  float v = scaled + p.zero_point;
  v = v >= p.qmin ? (v <= p.qmax ? v : p.qmax) : p.qmin;  // NaN lands on qmin, never converted
  return static_cast<std::int32_t>(std::nearbyint(v));
#endif
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float dequantize_value(std::int32_t q, const FractionalAffineParams& p) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(__fsub_rn(static_cast<float>(q), p.zero_point), p.scale);
#else
  const float centred = static_cast<float>(q) - p.zero_point;
  return centred * p.scale;
#endif
}

}  // namespace shrink
