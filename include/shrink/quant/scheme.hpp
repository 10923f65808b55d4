// QuantScheme: what integer type, which range, and how parameters are shared (tensor, channel, group).
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"

namespace shrink::quant {

enum class QuantDtype : std::uint8_t { int8, uint8, int4, uint4 };
enum class Symmetry : std::uint8_t { symmetric, affine };
enum class Granularity : std::uint8_t { per_tensor, per_channel, per_group };

inline const char* to_string(QuantDtype d) {
  switch (d) {
    case QuantDtype::int8: return "int8";
    case QuantDtype::uint8: return "uint8";
    case QuantDtype::int4: return "int4";
    case QuantDtype::uint4: return "uint4";
  }
  return "?";
}
inline const char* to_string(Symmetry s) { return s == Symmetry::symmetric ? "symmetric" : "affine"; }
inline const char* to_string(Granularity g) {
  switch (g) {
    case Granularity::per_tensor: return "per_tensor";
    case Granularity::per_channel: return "per_channel";
    case Granularity::per_group: return "per_group";
  }
  return "?";
}

constexpr int bit_width(QuantDtype d) { return d == QuantDtype::int8 || d == QuantDtype::uint8 ? 8 : 4; }
constexpr bool is_signed(QuantDtype d) { return d == QuantDtype::int8 || d == QuantDtype::int4; }
constexpr bool is_packed(QuantDtype d) { return bit_width(d) == 4; }

// The integer interval [qmin, qmax] that quantized values are clamped to.
struct QuantRange {
  std::int32_t qmin = 0;
  std::int32_t qmax = 0;
};

struct QuantScheme {
  QuantDtype dtype = QuantDtype::int8;
  Symmetry symmetry = Symmetry::symmetric;
  Granularity granularity = Granularity::per_tensor;
  // per_channel: the channel axis (0 for Linear [out, in] and conv OIHW, 1 for transposed conv IOHW);
  // per_group: the axis split into groups (the input/reduction axis, e.g. 1 for [out, in]).
  // Negative values count from the last dimension.
  int axis = 0;
  // per_group only: consecutive elements along `axis` that share one scale (e.g. 32, 64, 128).
  std::int64_t group_size = 0;
  // Signed: qmin = -qmax, e.g. [-127, 127] (TensorRT weights). Unsigned: [1, 2^b - 1], symmetric
  // about 2^(b-1).
  bool restricted_range = false;
  // One bit fewer: int8 [-64, 63], uint8 [0, 127] (PyTorch reduce_range, FBGEMM x86 activations).
  bool reduce_range = false;
  // 0: the dtype's own width. Otherwise a narrower integer held in the dtype, 2 <= bits <= bit_width(dtype): the
  // range of a `bits`-wide integer, e.g. int4 with bits = 2 is [-2, 1], uint8 with bits = 6 is [0, 63] (GPTQ's
  // 2-8 bit weights in the storage types that every consumer reads).
  int bits = 0;
  // Affine only. false: integer zero points (QParams::zero_point), real = s·(q − zp). true: fractional zero points
  // (QParams::float_zero_point, HQQ's), real = (float(q) − z)·s in float (core/affine.hpp's FractionalAffineParams);
  // consumers that read only integer zero points refuse such a scheme (validate_qparams).
  bool float_zero_point = false;

  static QuantScheme per_tensor(QuantDtype dtype, Symmetry symmetry) {
    QuantScheme s;
    s.dtype = dtype;
    s.symmetry = symmetry;
    return s;
  }
  static QuantScheme per_channel(QuantDtype dtype, Symmetry symmetry, int axis) {
    QuantScheme s = per_tensor(dtype, symmetry);
    s.granularity = Granularity::per_channel;
    s.axis = axis;
    return s;
  }
  static QuantScheme per_group(QuantDtype dtype, Symmetry symmetry, int axis, std::int64_t group_size) {
    QuantScheme s = per_tensor(dtype, symmetry);
    s.granularity = Granularity::per_group;
    s.axis = axis;
    s.group_size = group_size;
    return s;
  }
};

// The width whose range the scheme clamps to before reduce_range: `bits` when set, else the dtype's.
constexpr int range_bits(const QuantScheme& scheme) { return scheme.bits > 0 ? scheme.bits : bit_width(scheme.dtype); }

// [qmin, qmax] for a scheme. With b = range_bits (b - 1 under reduce_range):
// signed [-2^(b-1), 2^(b-1) - 1], restricted [-(2^(b-1) - 1), 2^(b-1) - 1];
// unsigned [0, 2^b - 1], restricted [1, 2^b - 1].
inline QuantRange quant_range(const QuantScheme& scheme) {
  const int bits = range_bits(scheme) - (scheme.reduce_range ? 1 : 0);
  QuantRange r;
  if (is_signed(scheme.dtype)) {
    r.qmax = (1 << (bits - 1)) - 1;
    r.qmin = scheme.restricted_range ? -r.qmax : -r.qmax - 1;
  } else {
    r.qmax = (1 << bits) - 1;
    r.qmin = scheme.restricted_range ? 1 : 0;
  }
  return r;
}

// The zero point of symmetric schemes: 0 for signed types, the range midpoint (rounded up) for
// unsigned ones: 128 for uint8 full or restricted range (as PyTorch), 64 for uint8 reduce_range
// (PyTorch refuses reduce_range for symmetric quint8).
inline std::int32_t symmetric_zero_point(const QuantScheme& scheme) {
  if (is_signed(scheme.dtype)) return 0;
  const QuantRange r = quant_range(scheme);
  return (r.qmin + r.qmax + 1) / 2;
}

// The storage scheme of a 2..8-bit weight [out, in] (GPTQ, AWQ): int4/uint4 for 2-4 bits, int8/uint8 for 5-8 (signed
// when symmetric, unsigned with zero points when affine), with `bits` set below the dtype's width; per_group along
// axis 1 with `group_size` > 0, per_channel along axis 0 (one scale per output row) with 0.
inline QuantScheme narrow_int_scheme(int bits, Symmetry symmetry, std::int64_t group_size) {
  const char* fn = "shrink::quant::narrow_int_scheme";
  if (bits < 2 || bits > 8) fail(fn, "bits", bits, "2..8");
  if (group_size < 0) fail(fn, "group_size", group_size, "0 (per output row) or a positive group size");
  const bool narrow = bits <= 4;
  const bool sym = symmetry == Symmetry::symmetric;
  const QuantDtype dtype =
      narrow ? (sym ? QuantDtype::int4 : QuantDtype::uint4) : (sym ? QuantDtype::int8 : QuantDtype::uint8);
  QuantScheme s = group_size > 0 ? QuantScheme::per_group(dtype, symmetry, 1, group_size)
                                 : QuantScheme::per_channel(dtype, symmetry, 0);
  s.bits = bits == bit_width(dtype) ? 0 : bits;
  return s;
}

// The tensor seen around the scheme's axis, after checking the axis and the group size.
// Per-tensor schemes see the whole tensor as one channel.
inline AxisSplit scheme_split(const QuantScheme& scheme, const Shape& shape, const char* function) {
  if (scheme.bits != 0 && (scheme.bits < 2 || scheme.bits > bit_width(scheme.dtype)))
    fail(function, "scheme.bits", scheme.bits,
         "0 (the dtype's width) or 2.." + std::to_string(bit_width(scheme.dtype)) + " for " + to_string(scheme.dtype));
  if (scheme.bits == 2 && scheme.reduce_range)
    fail(function, "scheme.reduce_range", "true", "false with scheme.bits = 2 (a 1-bit range holds no zero point)");
  if (scheme.float_zero_point && scheme.symmetry != Symmetry::affine)
    fail(function, "scheme.float_zero_point", "true",
         "false for a symmetric scheme (fractional zero points are affine)");
  if (scheme.granularity == Granularity::per_tensor) return AxisSplit{1, shape.product(), 1};
  const int axis = normalize_axis(scheme.axis, shape.rank, function, "scheme.axis");
  AxisSplit split = split_at_axis(shape, axis);
  if (scheme.granularity == Granularity::per_group) {
    if (scheme.group_size <= 0)
      fail(function, "scheme.group_size", scheme.group_size, "a positive group size");
    if (split.channels % scheme.group_size != 0)
      fail(function, "scheme.group_size", scheme.group_size,
           "a divisor of the size of axis " + std::to_string(axis) + " (" + std::to_string(split.channels) + ")");
  }
  return split;
}

// Shape of the parameter tensor (scales, zero points) of a scheme applied to `shape`:
// [] per tensor, [C] per channel, `shape` with axis size C / group_size per group.
inline Shape qparams_shape(const QuantScheme& scheme, const Shape& shape, const char* function) {
  const AxisSplit split = scheme_split(scheme, shape, function);
  switch (scheme.granularity) {
    case Granularity::per_tensor: return Shape{};
    case Granularity::per_channel: return Shape{split.channels};
    case Granularity::per_group: {
      Shape p = shape;
      p.values[normalize_axis(scheme.axis, shape.rank, function, "scheme.axis")] = split.channels / scheme.group_size;
      return p;
    }
  }
  return Shape{};
}

}  // namespace shrink::quant
