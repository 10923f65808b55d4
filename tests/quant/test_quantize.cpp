// Properties and bad-input behaviour of shrink/quant/quantize.hpp and shrink/quant/fake_quantize.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::random_values;

namespace {

// Index of element (i0, i1, ...) of a row-major shape.
std::int64_t flat_index(const Shape& shape, const std::vector<std::int64_t>& idx) {
  std::int64_t f = 0;
  for (int d = 0; d < shape.rank; ++d) f = f * shape[d] + idx[static_cast<std::size_t>(d)];
  return f;
}

}  // namespace

TEST_CASE("round trip error is at most half a step for in-range values", "[quant][quantize]") {
  const auto x = random_values(64 * 96, 1, 3.0f);
  const Shape shape{64, 96};
  const QuantDtype dtypes[] = {QuantDtype::int8, QuantDtype::uint8, QuantDtype::int4, QuantDtype::uint4};
  for (QuantDtype dtype : dtypes) {
    for (Symmetry symmetry : {Symmetry::symmetric, Symmetry::affine}) {
      const QuantScheme schemes[] = {QuantScheme::per_tensor(dtype, symmetry), QuantScheme::per_channel(dtype, symmetry, 0),
                                     QuantScheme::per_channel(dtype, symmetry, 1), QuantScheme::per_group(dtype, symmetry, 1, 32),
                                     QuantScheme::per_group(dtype, symmetry, 0, 16)};
      for (const QuantScheme& scheme : schemes) {
        INFO(to_string(dtype) << " " << to_string(symmetry) << " " << to_string(scheme.granularity) << " axis " << scheme.axis);
        const QuantizedTensor q = quantize(TensorView<const float>(x.data(), shape), scheme);
        CHECK(static_cast<std::int64_t>(q.data.size()) == quantized_data_bytes(dtype, shape));
        const std::vector<float> back = dequantize(q);
        const AxisSplit split = scheme_split(scheme, shape, "test");
        const QuantRange r = quant_range(scheme);
        for (std::int64_t i = 0; i < 64; ++i)
          for (std::int64_t j = 0; j < 96; ++j) {
            const std::int64_t f = i * 96 + j;
            std::int64_t p = 0;
            if (scheme.granularity == Granularity::per_channel) p = scheme.axis == 0 ? i : j;
            if (scheme.granularity == Granularity::per_group)
              p = scheme.axis == 1 ? i * (96 / 32) + j / 32 : (i / 16) * 96 + j;
            const float s = q.qparams.scale[static_cast<std::size_t>(p)];
            REQUIRE(q.value(f) >= r.qmin);
            REQUIRE(q.value(f) <= r.qmax);
            // Symmetric full ranges have one more step on the negative side, so every value is in range.
            REQUIRE(std::fabs(back[static_cast<std::size_t>(f)] - x[static_cast<std::size_t>(f)]) <= s * 0.5f * 1.0001f);
          }
        (void)split;
      }
    }
  }
}

TEST_CASE("per-channel along any axis equals per-tensor quantization of each channel slice", "[quant][quantize]") {
  const Shape shape{3, 4, 2, 5};
  const auto x = random_values(static_cast<std::size_t>(shape.product()), 2, 3.0f);
  for (int axis = 0; axis < 4; ++axis) {
    QuantScheme scheme = QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, axis);
    const QuantizedTensor q = quantize(TensorView<const float>(x.data(), shape), scheme);
    for (std::int64_t c = 0; c < shape[axis]; ++c) {
      std::vector<float> slice;
      std::vector<std::int64_t> flat;
      for (std::int64_t a = 0; a < shape[0]; ++a)
        for (std::int64_t b = 0; b < shape[1]; ++b)
          for (std::int64_t d = 0; d < shape[2]; ++d)
            for (std::int64_t e = 0; e < shape[3]; ++e) {
              const std::vector<std::int64_t> idx{a, b, d, e};
              if (idx[static_cast<std::size_t>(axis)] != c) continue;
              flat.push_back(flat_index(shape, idx));
              slice.push_back(x[static_cast<std::size_t>(flat.back())]);
            }
      const QuantizedTensor qs =
          quantize(make_view(slice), QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
      CHECK(qs.qparams.scale[0] == q.qparams.scale[static_cast<std::size_t>(c)]);
      CHECK(qs.qparams.zero_point[0] == q.qparams.zero_point[static_cast<std::size_t>(c)]);
      for (std::size_t k = 0; k < flat.size(); ++k) REQUIRE(qs.value(static_cast<std::int64_t>(k)) == q.value(flat[k]));
    }
  }
}

TEST_CASE("strided input quantizes like its contiguous copy", "[quant][quantize]") {
  const auto x = random_values(6 * 10, 3, 3.0f);  // a 6x10 row-major matrix, read transposed as 10x6
  const TensorView<const float> transposed(x.data(), Shape{10, 6}, Strides{1, 10});
  const std::vector<float> copy = contiguous_copy(transposed);
  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 1);
  const QuantizedTensor a = quantize(transposed, scheme);
  const QuantizedTensor b = quantize(TensorView<const float>(copy.data(), Shape{10, 6}), scheme);
  CHECK(a.data == b.data);
  CHECK(a.qparams.scale == b.qparams.scale);
}

TEST_CASE("int4 packing: even element in the low nibble, rows padded to whole bytes", "[quant][quantize][int4]") {
  QParams unit;
  unit.scale = {1.0f};
  unit.zero_point = {0};
  const std::vector<float> x{1, -2, 3, 7, -8, 5};  // shape [2, 3]: odd rows
  const QuantizedTensor q = quantize(TensorView<const float>(x.data(), Shape{2, 3}),
                                     QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric), unit);
  REQUIRE(q.data.size() == 4);
  CHECK(q.data[0] == 0xE1);  // -2 -> 0xE high, 1 low
  CHECK(q.data[1] == 0x03);  // 3, padding nibble zero
  CHECK(q.data[2] == 0x87);  // -8 -> 0x8 high, 7 low
  CHECK(q.data[3] == 0x05);
  std::vector<std::uint8_t> out(4, 0xAA);
  quantize_into(TensorView<const float>(x.data(), Shape{2, 3}), QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric),
                unit, TensorView<std::uint8_t>(out.data(), Shape{2, 2}));
  CHECK(std::equal(out.begin(), out.end(), q.data.begin(), q.data.end()));
  std::vector<float> back(6);
  dequantize_into(TensorView<const std::uint8_t>(out.data(), Shape{2, 2}),
                  QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric), unit, TensorView<float>(back.data(), Shape{2, 3}));
  CHECK(back == x);
}

TEST_CASE("quantize_into matches quantize and dequantize_into matches dequantize", "[quant][quantize]") {
  const auto x = random_values(33 * 17, 4, 3.0f);  // odd sizes reach the scalar tails of the SIMD loops
  const Shape shape{33, 17};
  const TensorView<const float> view(x.data(), shape);
  const QuantScheme s8 = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0);
  const QuantizedTensor q = quantize(view, s8);
  std::vector<std::int8_t> out(x.size());
  quantize_into(view, s8, q.qparams, TensorView<std::int8_t>(out.data(), shape));
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == q.value(static_cast<std::int64_t>(i)));
  std::vector<float> back(x.size());
  dequantize_into(TensorView<const std::int8_t>(out.data(), shape), s8, q.qparams, TensorView<float>(back.data(), shape));
  CHECK(back == dequantize(q));
}

TEST_CASE("fake_quantize equals dequantize(quantize(x)) and works in place", "[quant][fake_quantize]") {
  auto x = random_values(40 * 12, 5, 3.0f);
  const Shape shape{40, 12};
  const QuantScheme scheme = QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 4);
  const QParams qp = minmax_qparams(TensorView<const float>(x.data(), shape), scheme);
  const std::vector<float> expected = dequantize(quantize(TensorView<const float>(x.data(), shape), scheme, qp));
  CHECK(fake_quantize(TensorView<const float>(x.data(), shape), scheme, qp) == expected);
  fake_quantize(TensorView<const float>(x.data(), shape), scheme, qp, TensorView<float>(x.data(), shape));
  CHECK(x == expected);
}

TEST_CASE("fake_quantize mask marks values clipped by the range", "[quant][fake_quantize]") {
  QParams qp;
  qp.scale = {0.5f};
  qp.zero_point = {0};
  const std::vector<float> x{-100.0f, -64.0f, -64.2f, 0.0f, 63.5f, 63.8f, 100.0f};
  std::vector<float> y(x.size());
  std::vector<std::uint8_t> mask(x.size());
  fake_quantize(make_view(x), QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), qp, make_view(y), make_view(mask));
  CHECK(mask == std::vector<std::uint8_t>{0, 1, 1, 1, 1, 0, 0});  // 63.8/0.5 = 127.6 rounds to 128: clipped
  CHECK(y == std::vector<float>{-64.0f, -64.0f, -64.0f, 0.0f, 63.5f, 63.5f, 63.5f});  // -64.2 / 0.5 rounds to -128
}

TEST_CASE("bad input is refused with the argument named and nothing written", "[quant][quantize][bad-input]") {
  auto x = random_values(8 * 4, 6, 3.0f);
  const Shape shape{8, 4};
  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0);
  const QParams qp = minmax_qparams(TensorView<const float>(x.data(), shape), scheme);
  std::vector<std::int8_t> out(x.size(), 0x55);
  const auto untouched = [&] {
    for (std::int8_t v : out)
      if (v != 0x55) return false;
    return true;
  };

  x[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), scheme, qp, TensorView<std::int8_t>(out.data(), shape)),
                    Catch::Contains("x[5] = nan") && Catch::Contains("finite"));
  CHECK(untouched());
  x[5] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(quantize(TensorView<const float>(x.data(), shape), scheme, qp), Catch::Contains("x[5] = inf"));
  x[5] = 1.0f;

  CHECK_THROWS_WITH(quantize(TensorView<const float>(x.data(), Shape{0, 4}), scheme, qp), Catch::Contains("empty"));
  CHECK_THROWS_WITH(quantize(TensorView<const float>(x.data(), shape), QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 2)),
                    Catch::Contains("scheme.axis = 2"));
  CHECK_THROWS_WITH(quantize(TensorView<const float>(x.data(), shape), QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 3)),
                    Catch::Contains("scheme.group_size = 3"));
  QParams bad = qp;
  bad.scale[2] = -1.0f;
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), scheme, bad, TensorView<std::int8_t>(out.data(), shape)),
                    Catch::Contains("qparams.scale[2] = -1"));
  bad = qp;
  bad.zero_point[1] = 128;
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), scheme, bad, TensorView<std::int8_t>(out.data(), shape)),
                    Catch::Contains("qparams.zero_point[1] = 128"));
  bad = qp;
  bad.scale.pop_back();
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), scheme, bad, TensorView<std::int8_t>(out.data(), shape)),
                    Catch::Contains("qparams.zero_point.size()") || Catch::Contains("qparams.scale.size()"));
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), scheme, qp, TensorView<std::int8_t>(out.data(), Shape{4, 8})),
                    Catch::Contains("out") && Catch::Contains("[8, 4]"));
  CHECK_THROWS_WITH(quantize_into(TensorView<const float>(x.data(), shape), QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, 0),
                                  qp, TensorView<std::int8_t>(out.data(), shape)),
                    Catch::Contains("scheme.dtype = uint8"));
  CHECK(untouched());

  std::vector<float> y(x.size(), 9.0f);
  x[31] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(fake_quantize(TensorView<const float>(x.data(), shape), scheme, qp, TensorView<float>(y.data(), shape)),
                    Catch::Contains("x[31]"));
  for (float v : y) REQUIRE(v == 9.0f);
}
