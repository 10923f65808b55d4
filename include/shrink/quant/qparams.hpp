// QParams (scales and zero points) and their derivation from observed ranges, as PyTorch's observers.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

// Quantization parameters; real value = scale * (q - zero_point).
// Integer zero points (scheme.float_zero_point false): zero_point holds them and float_zero_point is empty.
// Fractional zero points (scheme.float_zero_point true, HQQ): float_zero_point holds them, zero_point is empty, and
// real value = (float(q) − z)·scale in float (core/affine.hpp). A consumer that reads only integer zero points finds
// zero_point empty and refuses the parameters through validate_qparams.
struct QParams {
  std::vector<float> scale;              // one per tensor, channel or group; finite and > 0
  std::vector<std::int32_t> zero_point;  // same count; inside [qmin, qmax] of the scheme (empty when fractional)
  Shape shape;                           // parameter tensor shape (see qparams_shape), row-major
  std::vector<float> float_zero_point;   // fractional only: same count, finite (may leave [qmin, qmax]); else empty

  bool fractional() const { return !float_zero_point.empty(); }

  std::int64_t size() const { return static_cast<std::int64_t>(scale.size()); }
};

struct ScaleZeroPoint {
  float scale = 1.0f;
  std::int32_t zero_point = 0;
};

// Round half to even in the default floating-point environment (std::nearbyint), as PyTorch.
inline float round_half_even(float x) { return std::nearbyint(x); }

// Scale and zero point from an observed [min, max], exactly as PyTorch's _calculate_qparams
// (float32 arithmetic), with min_neg = min(min, 0) and max_pos = max(max, 0):
//   symmetric: s = max(-min_neg, max_pos) / ((qmax - qmin) / 2), zp = symmetric_zero_point
//   affine:    s = (max_pos - min_neg) / (qmax - qmin), zp = clamp(qmin - round(min_neg / s), qmin, qmax)
//   then s = max(s, FLT_EPSILON) so an all-zero tensor gets a usable scale.
inline ScaleZeroPoint scale_zero_point_from_range(float min, float max, const QuantScheme& scheme,
                                                  const char* function = "shrink::quant::scale_zero_point_from_range") {
  if (!std::isfinite(min)) fail(function, "min", min, "a finite minimum");
  if (!std::isfinite(max)) fail(function, "max", max, "a finite maximum");
  if (min > max) fail(function, "min", min, "min <= max (max = " + shrink::to_text(max) + ")");
  const QuantRange r = quant_range(scheme);
  const float min_neg = std::fmin(min, 0.0f);
  const float max_pos = std::fmax(max, 0.0f);
  ScaleZeroPoint p;
  if (scheme.symmetry == Symmetry::symmetric) {
    const float amax = std::fmax(-min_neg, max_pos);
    p.scale = std::fmax(amax / (static_cast<float>(r.qmax - r.qmin) / 2.0f), FLT_EPSILON);
    p.zero_point = symmetric_zero_point(scheme);
  } else {
    p.scale = std::fmax((max_pos - min_neg) / static_cast<float>(r.qmax - r.qmin), FLT_EPSILON);
    const float zp = static_cast<float>(r.qmin) - round_half_even(min_neg / p.scale);
    p.zero_point = static_cast<std::int32_t>(std::fmin(std::fmax(zp, static_cast<float>(r.qmin)), static_cast<float>(r.qmax)));
  }
  if (!std::isfinite(p.scale))
    fail(function, "range", "[" + shrink::to_text(min) + ", " + shrink::to_text(max) + "]",
         "a range whose width fits in a float (the scale overflowed)");
  return p;
}

// Parameters for every channel/group from per-entry ranges laid out as `shape` (see qparams_shape).
inline QParams qparams_from_ranges(const std::vector<float>& mins, const std::vector<float>& maxs,
                                   const QuantScheme& scheme, const Shape& shape,
                                   const char* function = "shrink::quant::qparams_from_ranges") {
  if (mins.size() != maxs.size())
    fail(function, "maxs.size()", maxs.size(), "as many maxima as minima (" + std::to_string(mins.size()) + ")");
  if (static_cast<std::int64_t>(mins.size()) != shape.product())
    fail(function, "mins.size()", mins.size(), "one range per parameter of shape " + to_string(shape));
  QParams q;
  q.shape = shape;
  q.scale.resize(mins.size());
  std::vector<std::int32_t> zero_point(mins.size());
  for (std::size_t i = 0; i < mins.size(); ++i) {
    const ScaleZeroPoint p = scale_zero_point_from_range(mins[i], maxs[i], scheme, function);
    q.scale[i] = p.scale;
    zero_point[i] = p.zero_point;
  }
  if (scheme.float_zero_point)  // the same integer zero points, held as floats
    q.float_zero_point.assign(zero_point.begin(), zero_point.end());
  else
    q.zero_point = std::move(zero_point);
  return q;
}

// Whether a consumer reads fractional zero points (QParams::float_zero_point).
enum class FloatZeroPoints : std::uint8_t { refused, accepted };

// Checks that `q` fits `scheme` applied to a tensor of `tensor_shape`: the count and shape of the
// parameters, every scale finite and > 0, every integer zero point inside [qmin, qmax], every fractional one finite
// (HQQ's may leave [qmin, qmax]: docs/quantization.md). Fractional zero points (scheme.float_zero_point, or
// qparams.float_zero_point not empty) are refused unless the caller says it reads them, with one Error naming
// `function`, so no consumer indexes the empty integer zero points.
inline void validate_qparams(const QParams& q, const QuantScheme& scheme, const Shape& tensor_shape,
                             const char* function, FloatZeroPoints float_zero_points = FloatZeroPoints::refused) {
  if ((scheme.float_zero_point || q.fractional()) && float_zero_points == FloatZeroPoints::refused)
    fail(function, scheme.float_zero_point ? "scheme.float_zero_point" : "qparams.float_zero_point.size()",
         scheme.float_zero_point ? std::string("true") : std::to_string(q.float_zero_point.size()),
         std::string("integer zero points: fractional zero points (HQQ) are not supported by ") + function);
  const Shape expected = qparams_shape(scheme, tensor_shape, function);
  if (scheme.float_zero_point) {
    if (!q.zero_point.empty())
      fail(function, "qparams.zero_point.size()", q.zero_point.size(),
           "0 with fractional zero points (scheme.float_zero_point: they are in qparams.float_zero_point)");
    if (q.float_zero_point.size() != q.scale.size())
      fail(function, "qparams.float_zero_point.size()", q.float_zero_point.size(),
           "one fractional zero point per scale (" + std::to_string(q.scale.size()) + ")");
  } else {
    if (q.fractional())
      fail(function, "qparams.float_zero_point.size()", q.float_zero_point.size(),
           "0: the scheme's zero points are integers (scheme.float_zero_point is false)");
    if (q.zero_point.size() != q.scale.size())
      fail(function, "qparams.zero_point.size()", q.zero_point.size(),
           "one zero point per scale (" + std::to_string(q.scale.size()) + ")");
  }
  if (q.size() != expected.product())
    fail(function, "qparams.scale.size()", q.scale.size(),
         std::to_string(expected.product()) + " parameters for a " + to_string(scheme.granularity) +
             " scheme over shape " + to_string(tensor_shape));
  const QuantRange r = quant_range(scheme);
  for (std::size_t i = 0; i < q.scale.size(); ++i) {
    if (!(q.scale[i] > 0.0f) || !std::isfinite(q.scale[i]))
      fail(function, ("qparams.scale[" + std::to_string(i) + "]").c_str(), q.scale[i], "a finite scale > 0");
    if (scheme.float_zero_point) {
      if (!std::isfinite(q.float_zero_point[i]))
        fail(function, ("qparams.float_zero_point[" + std::to_string(i) + "]").c_str(), q.float_zero_point[i],
             "a finite zero point");
    } else if (q.zero_point[i] < r.qmin || q.zero_point[i] > r.qmax) {
      fail(function, ("qparams.zero_point[" + std::to_string(i) + "]").c_str(), q.zero_point[i],
           "a zero point in [" + std::to_string(r.qmin) + ", " + std::to_string(r.qmax) + "]");
    }
  }
}

}  // namespace shrink::quant
