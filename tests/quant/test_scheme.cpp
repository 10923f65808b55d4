// Tests for shrink/quant/scheme.hpp and shrink/quant/qparams.hpp.
#include <catch2/catch.hpp>

#include <cfloat>
#include <limits>

#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {
QuantRange range_of(QuantDtype dtype, bool restricted, bool reduce) {
  QuantScheme s = QuantScheme::per_tensor(dtype, Symmetry::symmetric);
  s.restricted_range = restricted;
  s.reduce_range = reduce;
  return quant_range(s);
}
}  // namespace

TEST_CASE("quantization ranges for every dtype and range option", "[quant][scheme]") {
  struct Expect { QuantDtype dtype; bool restricted, reduce; int qmin, qmax; };
  const Expect table[] = {
      {QuantDtype::int8, false, false, -128, 127}, {QuantDtype::int8, true, false, -127, 127},
      {QuantDtype::int8, false, true, -64, 63},    {QuantDtype::int8, true, true, -63, 63},
      {QuantDtype::uint8, false, false, 0, 255},   {QuantDtype::uint8, true, false, 1, 255},
      {QuantDtype::uint8, false, true, 0, 127},    {QuantDtype::int4, false, false, -8, 7},
      {QuantDtype::int4, true, false, -7, 7},      {QuantDtype::uint4, false, false, 0, 15},
      {QuantDtype::uint4, true, false, 1, 15},     {QuantDtype::int4, false, true, -4, 3},
  };
  for (const Expect& e : table) {
    INFO(to_string(e.dtype) << " restricted " << e.restricted << " reduce " << e.reduce);
    const QuantRange r = range_of(e.dtype, e.restricted, e.reduce);
    CHECK(r.qmin == e.qmin);
    CHECK(r.qmax == e.qmax);
  }
}

TEST_CASE("narrower ranges held in a dtype (scheme.bits)", "[quant][scheme]") {
  struct Expect {
    QuantDtype dtype;
    int bits;
    int qmin, qmax, symmetric_zp;
  };
  const Expect table[] = {
      {QuantDtype::int4, 2, -2, 1, 0},   {QuantDtype::uint4, 2, 0, 3, 2},     {QuantDtype::int4, 3, -4, 3, 0},
      {QuantDtype::uint4, 3, 0, 7, 4},   {QuantDtype::int8, 5, -16, 15, 0},   {QuantDtype::uint8, 6, 0, 63, 32},
      {QuantDtype::int8, 7, -64, 63, 0}, {QuantDtype::uint8, 8, 0, 255, 128},
  };
  for (const Expect& e : table) {
    INFO(to_string(e.dtype) << " bits " << e.bits);
    QuantScheme s = QuantScheme::per_channel(e.dtype, Symmetry::symmetric, 0);
    s.bits = e.bits;
    CHECK(quant_range(s).qmin == e.qmin);
    CHECK(quant_range(s).qmax == e.qmax);
    CHECK(symmetric_zero_point(s) == e.symmetric_zp);
    CHECK(scheme_split(s, Shape{2, 3}, "test").channels == 2);
  }
  QuantScheme wide = QuantScheme::per_tensor(QuantDtype::int4, Symmetry::affine);
  wide.bits = 5;
  CHECK_THROWS_WITH(scheme_split(wide, Shape{4}, "f"), Catch::Contains("scheme.bits = 5") && Catch::Contains("2..4"));
  wide.bits = 1;
  CHECK_THROWS_WITH(qparams_shape(wide, Shape{4}, "f"), Catch::Contains("scheme.bits = 1"));
  wide.bits = 2;
  wide.reduce_range = true;
  CHECK_THROWS_WITH(scheme_split(wide, Shape{4}, "f"), Catch::Contains("scheme.reduce_range"));
}

TEST_CASE("symmetric zero points", "[quant][scheme]") {
  CHECK(symmetric_zero_point(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric)) == 0);
  CHECK(symmetric_zero_point(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::symmetric)) == 128);
  CHECK(symmetric_zero_point(QuantScheme::per_tensor(QuantDtype::uint4, Symmetry::symmetric)) == 8);
  QuantScheme restricted = QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::symmetric);
  restricted.restricted_range = true;
  CHECK(symmetric_zero_point(restricted) == 128);
}

TEST_CASE("parameter shapes per granularity", "[quant][scheme]") {
  const Shape conv{8, 4, 3, 3};
  CHECK(qparams_shape(QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), conv, "f").product() == 1);
  CHECK(qparams_shape(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0), conv, "f") == Shape{8});
  CHECK(qparams_shape(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 1), conv, "f") == Shape{4});  // IOHW
  CHECK(qparams_shape(QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 32), Shape{16, 128}, "f") ==
        Shape{16, 4});
  CHECK(qparams_shape(QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 0, 64), Shape{128, 16}, "f") ==
        Shape{2, 16});
  CHECK_THROWS_WITH(qparams_shape(QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 48), Shape{16, 128}, "f"),
                    Catch::Contains("scheme.group_size = 48") && Catch::Contains("divisor"));
  CHECK_THROWS_WITH(qparams_shape(QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 0), Shape{16, 128}, "f"),
                    Catch::Contains("positive"));
  CHECK_THROWS_WITH(qparams_shape(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 4), conv, "f"),
                    Catch::Contains("scheme.axis = 4"));
  CHECK(qparams_shape(QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, -1), conv, "f") == Shape{3});
}

TEST_CASE("scale and zero point from a range follow PyTorch's formulas", "[quant][qparams]") {
  const QuantScheme sym = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  const QuantScheme aff = QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine);
  ScaleZeroPoint p = scale_zero_point_from_range(-2.0f, 1.0f, sym);
  CHECK(p.scale == 2.0f / 127.5f);
  CHECK(p.zero_point == 0);
  p = scale_zero_point_from_range(-1.0f, 3.0f, aff);
  CHECK(p.scale == 4.0f / 255.0f);
  CHECK(p.zero_point == 64);  // 0 - round(-1 / (4/255)) = round(63.75)
  p = scale_zero_point_from_range(0.0f, 0.0f, sym);  // all-zero tensor
  CHECK(p.scale == FLT_EPSILON);
  p = scale_zero_point_from_range(2.0f, 5.0f, aff);  // range always includes zero
  CHECK(p.zero_point == 0);
  p = scale_zero_point_from_range(-5.0f, -2.0f, aff);
  CHECK(p.zero_point == 255);
}

TEST_CASE("bad ranges and parameters are refused with the argument named", "[quant][qparams][bad-input]") {
  const QuantScheme aff = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(scale_zero_point_from_range(nan, 1.0f, aff), Catch::Contains("min = nan"));
  CHECK_THROWS_WITH(scale_zero_point_from_range(0.0f, INFINITY, aff), Catch::Contains("max = inf"));
  CHECK_THROWS_WITH(scale_zero_point_from_range(2.0f, 1.0f, aff), Catch::Contains("min <= max"));
  CHECK_THROWS_WITH(scale_zero_point_from_range(-3e38f, 3e38f, aff), Catch::Contains("overflowed"));

  QParams q;
  q.scale = {0.5f, 0.0f};
  q.zero_point = {0, 0};
  q.shape = Shape{2};
  const QuantScheme channel = QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0);
  CHECK_THROWS_WITH(validate_qparams(q, channel, Shape{2, 3}, "f"), Catch::Contains("qparams.scale[1] = 0"));
  q.scale[1] = nan;
  CHECK_THROWS_WITH(validate_qparams(q, channel, Shape{2, 3}, "f"), Catch::Contains("finite scale > 0"));
  q.scale[1] = 1.0f;
  q.zero_point[0] = 300;
  CHECK_THROWS_WITH(validate_qparams(q, channel, Shape{2, 3}, "f"), Catch::Contains("qparams.zero_point[0] = 300"));
  q.zero_point[0] = 0;
  CHECK_NOTHROW(validate_qparams(q, channel, Shape{2, 3}, "f"));
  CHECK_THROWS_WITH(validate_qparams(q, channel, Shape{3, 3}, "f"), Catch::Contains("3 parameters"));
}
