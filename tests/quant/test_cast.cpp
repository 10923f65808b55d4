// Tests for shrink/quant/cast.hpp: half / bfloat16 view casts, scaled FP8 quantization per tensor and per channel
// (ml_dtypes goldens, properties), and bad input that must throw naming the argument and leave outputs untouched.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "shrink/quant/cast.hpp"
#include "support/golden.hpp"

using namespace shrink;
using namespace shrink::quant;
using Catch::Contains;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::uint32_t bits_of(float v) { return shrink::float_to_bits(v); }

// Random values over several orders of magnitude, never zero.
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    do x = normal(rng) * std::exp(log_scale(rng));
    while (x == 0.0f);
  }
  return v;
}

bool same_float(float a, float b) { return std::isnan(a) ? std::isnan(b) : bits_of(a) == bits_of(b); }

// Channel of row-major element `flat` for scales along `axis` (-1: per tensor, one channel).
std::size_t channel_of(std::size_t flat, const Shape& shape, int axis) {
  if (axis < 0) return 0;
  std::int64_t inner = 1;
  for (int d = axis + 1; d < shape.rank; ++d) inner *= shape[d];
  return static_cast<std::size_t>((static_cast<std::int64_t>(flat) / inner) % shape[axis]);
}

// Scaled quantization written independently of the library loops.
struct Reference {
  std::vector<float> scale;
  ByteBuffer codes;
};

Reference reference_quantize(const std::vector<float>& x, const Shape& shape, int axis, Fp8Format format) {
  Reference r;
  r.scale.assign(axis < 0 ? 1 : static_cast<std::size_t>(shape[axis]), 0.0f);
  for (std::size_t i = 0; i < x.size(); ++i) {
    float& amax = r.scale[channel_of(i, shape, axis)];
    amax = std::max(amax, std::fabs(x[i]));
  }
  for (float& s : r.scale) s = s == 0.0f ? 1.0f : s / fp8_max_finite(format);
  for (std::size_t i = 0; i < x.size(); ++i)
    r.codes.push_back(fp8_encode(x[i] / r.scale[channel_of(i, shape, axis)], format, true));
  return r;
}

void check_against_reference(const std::vector<float>& x, const Shape& shape, Fp8ScaleGranularity granularity, int axis,
                             Fp8Format format) {
  const Fp8Tensor q = quantize_fp8(TensorView<const float>(x.data(), shape), format, granularity, axis);
  const int normalized = granularity == Fp8ScaleGranularity::per_tensor ? -1 : (axis < 0 ? axis + shape.rank : axis);
  const Reference r = reference_quantize(x, shape, normalized, format);
  CHECK(q.axis == normalized);
  CHECK(q.format == format);
  CHECK(q.shape == shape);
  CHECK(q.scale == r.scale);
  CHECK(q.data == r.codes);
  std::vector<float> back(x.size());
  dequantize_fp8(q, make_view(back, shape));
  // Rounding error: half a step, 2^-(m+1) relative for normals, 2^-(bias+m) * scale absolute below them.
  const float relative = format == Fp8Format::e4m3 ? 0.0625f : 0.125f;
  const float absolute = format == Fp8Format::e4m3 ? std::ldexp(1.0f, -10) : std::ldexp(1.0f, -17);
  int failures = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float s = r.scale[channel_of(i, shape, normalized)];
    if (!same_float(back[i], fp8_decode(q.data[i], format) * s)) ++failures;
    if (!(std::fabs(back[i] - x[i]) <= relative * std::fabs(x[i]) + absolute * s)) ++failures;
  }
  CHECK(failures == 0);
}

}  // namespace

// ---- half / bfloat16 -----------------------------------------------------------------------------------------

TEST_CASE("half and bfloat16 casts of a contiguous tensor match the element conversions", "[quant][cast]") {
  std::vector<float> x = random_floats(3 * 50, 1);
  x[3] = kInf;
  x[7] = -kInf;
  x[11] = kNaN;
  x[13] = 1e6f;  // past the half range: inf, as IEEE
  x[17] = 1e-9f;
  const TensorView<const float> xv(x.data(), Shape{3, 50});

  std::vector<half> h(x.size());
  std::vector<bfloat16> b(x.size());
  cast_to_half(xv, TensorView<half>(h.data(), Shape{3, 50}));
  cast_to_bfloat16(xv, TensorView<bfloat16>(b.data(), Shape{3, 50}));
  std::vector<float> from_half(x.size()), from_bfloat16(x.size());
  cast_to_float(TensorView<const half>(h.data(), Shape{3, 50}), make_view(from_half, Shape{3, 50}));
  cast_to_float(TensorView<const bfloat16>(b.data(), Shape{3, 50}), make_view(from_bfloat16, Shape{3, 50}));
  int failures = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (h[i].to_bits() != half(x[i]).to_bits() || b[i].to_bits() != bfloat16(x[i]).to_bits()) ++failures;
    if (!same_float(from_half[i], half(x[i]).to_float()) || !same_float(from_bfloat16[i], bfloat16(x[i]).to_float()))
      ++failures;
  }
  CHECK(failures == 0);
  CHECK(std::isinf(from_half[3]));
  CHECK(from_half[7] == -kInf);
  CHECK(std::isnan(from_half[11]));
  CHECK(std::isnan(from_bfloat16[11]));
  CHECK(from_half[13] == kInf);
  CHECK(from_bfloat16[13] == bfloat16(1e6f).to_float());
}

TEST_CASE("half casts walk strided input and output views", "[quant][cast]") {
  const std::vector<float> x = random_floats(4 * 6, 2);
  // The transpose of a row-major 4 x 6 matrix: shape [6, 4], strides {1, 6}.
  const TensorView<const float> transposed(x.data(), Shape{6, 4}, Strides{1, 6});
  std::vector<half> dense(24);
  cast_to_half(transposed, TensorView<half>(dense.data(), Shape{6, 4}));
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) CHECK(dense[i * 4 + j].to_bits() == half(x[j * 6 + i]).to_bits());

  // Every other element of a wider buffer; the gaps keep their poison.
  const half poison = half::from_bits(0x7E5A);
  std::vector<half> spread(48, poison);
  cast_to_half(TensorView<const float>(x.data(), Shape{4, 6}),
               TensorView<half>(spread.data(), Shape{4, 6}, Strides{12, 2}));
  for (int k = 0; k < 48; ++k) {
    if (k % 2 == 1)
      CHECK(spread[k].to_bits() == poison.to_bits());
    else
      CHECK(spread[k].to_bits() == half(x[k / 2]).to_bits());
  }

  // And back to float through a strided half view.
  std::vector<float> back(24);
  cast_to_float(TensorView<const half>(spread.data(), Shape{4, 6}, Strides{12, 2}), make_view(back, Shape{4, 6}));
  for (int k = 0; k < 24; ++k) CHECK(back[k] == half(x[k]).to_float());
}

TEST_CASE("half and bfloat16 casts reject bad views and write nothing", "[quant][cast]") {
  std::vector<float> x = random_floats(6, 3);
  const half poison = half::from_bits(0x1234);
  std::vector<half> out(6, poison);
  CHECK_THROWS_WITH(
      cast_to_half(TensorView<const float>(x.data(), Shape{2, 3}), TensorView<half>(out.data(), Shape{3, 2})),
      Contains("cast_to_half") && Contains("out = [3, 2]") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(cast_to_half(TensorView<const float>(x.data(), Shape{2, 3}, Device::cuda(0)),
                                 TensorView<half>(out.data(), Shape{2, 3})),
                    Contains("x = a CUDA view"));
  CHECK_THROWS_WITH(
      cast_to_half(TensorView<const float>(x.data(), Shape{0, 3}), TensorView<half>(out.data(), Shape{0, 3})),
      Contains("x = an empty tensor"));
  for (const half& h : out) CHECK(h.to_bits() == poison.to_bits());

  std::vector<float> floats(6, 7.0f);
  std::vector<bfloat16> b(6, bfloat16(1.0f));
  CHECK_THROWS_WITH(cast_to_float(TensorView<const bfloat16>(b.data(), Shape{6}), make_view(floats, Shape{2, 3})),
                    Contains("cast_to_float") && Contains("out"));
  CHECK_THROWS_WITH(
      cast_to_bfloat16(TensorView<const float>(nullptr, Shape{6}), TensorView<bfloat16>(b.data(), Shape{6})),
      Contains("x = a null pointer"));
  for (float f : floats) CHECK(f == 7.0f);
  for (const bfloat16& v : b) CHECK(v.to_bits() == bfloat16(1.0f).to_bits());
}

// ---- FP8 -----------------------------------------------------------------------------------------------------

TEST_CASE("per-tensor FP8: scale = amax / max finite, codes = fp8(x / scale), dequantize = value * scale",
          "[quant][cast][fp8]") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    INFO(to_string(format));
    check_against_reference(random_floats(1000, 4), Shape{1000}, Fp8ScaleGranularity::per_tensor, 0, format);
    check_against_reference(random_floats(1, 5), Shape{1}, Fp8ScaleGranularity::per_tensor, 0, format);
  }
}

TEST_CASE("per-channel FP8 along any axis: conv OIHW (0), transposed conv IOHW (1), last, negative",
          "[quant][cast][fp8]") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    INFO(to_string(format));
    check_against_reference(random_floats(8 * 3 * 3 * 3, 6), Shape{8, 3, 3, 3}, Fp8ScaleGranularity::per_channel, 0,
                            format);
    check_against_reference(random_floats(3 * 8 * 3 * 3, 7), Shape{3, 8, 3, 3}, Fp8ScaleGranularity::per_channel, 1,
                            format);
    check_against_reference(random_floats(5 * 7, 8), Shape{5, 7}, Fp8ScaleGranularity::per_channel, -1, format);
    check_against_reference(random_floats(4 * 6 * 5, 9), Shape{4, 6, 5}, Fp8ScaleGranularity::per_channel, -2, format);
  }
}

TEST_CASE("an all-zero channel gets scale 1 and zero codes", "[quant][cast][fp8]") {
  std::vector<float> x = random_floats(3 * 4, 10);
  for (int i = 0; i < 4; ++i) x[4 + i] = 0.0f;  // channel 1 of [3, 4] along axis 0
  const Fp8Tensor q = quantize_fp8(make_view(x, Shape{3, 4}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 0);
  CHECK(q.scale[1] == 1.0f);
  for (int i = 0; i < 4; ++i) CHECK(q.data[4 + i] == 0);
  std::vector<float> zeros(8, 0.0f);
  const Fp8Tensor z = quantize_fp8(make_view(zeros), Fp8Format::e5m2);
  CHECK(z.scale == std::vector<float>{1.0f});
}

TEST_CASE("scaled FP8 matches the ml_dtypes golden", "[quant][cast][fp8][golden]") {
  int cases = 0;
  for (const auto& c : test::load_golden("golden/casts_fp8.golden")) {
    if (c.name.rfind("scaled_", 0) != 0) continue;
    ++cases;
    INFO(c.name);
    const Fp8Format format = c.text("format") == "e4m3" ? Fp8Format::e4m3 : Fp8Format::e5m2;
    const int axis = static_cast<int>(c.ints("axis")[0]);
    const Shape shape(c.ints("shape"));
    const std::vector<float> x = c.floats("x");
    const Fp8Tensor q =
        quantize_fp8(make_view(x, shape), format,
                     axis < 0 ? Fp8ScaleGranularity::per_tensor : Fp8ScaleGranularity::per_channel, axis);
    CHECK(q.scale == c.floats("scale"));
    const auto& codes = c.ints("code");
    REQUIRE(codes.size() == q.data.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < codes.size(); ++i) mismatches += q.data[i] != codes[i];
    CHECK(mismatches == 0);
    std::vector<float> back(x.size());
    dequantize_fp8(q, make_view(back, shape));
    CHECK(back == c.floats("dequantized"));
  }
  CHECK(cases == 8);
}

TEST_CASE("saturation choice on out-of-range x / scale", "[quant][cast][fp8]") {
  const std::vector<float> x{1000.0f, -1000.0f, 1.0f, 1e7f};
  Fp8QuantizeOptions options;
  options.scales = {1.0f};
  const auto view = make_view(x);
  CHECK(quantize_fp8(view, Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor, 0, options).data ==
        ByteBuffer{0x7E, 0xFE, 0x38, 0x7E});
  CHECK(quantize_fp8(view, Fp8Format::e5m2, Fp8ScaleGranularity::per_tensor, 0, options).data ==
        ByteBuffer{0x64, 0xE4, 0x3C, 0x7B});
  options.saturate = false;
  CHECK(quantize_fp8(view, Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor, 0, options).data ==
        ByteBuffer{0x7F, 0xFF, 0x38, 0x7F});
  CHECK(quantize_fp8(view, Fp8Format::e5m2, Fp8ScaleGranularity::per_tensor, 0, options).data ==
        ByteBuffer{0x64, 0xE4, 0x3C, 0x7C});
}

TEST_CASE("explicit scales and margin", "[quant][cast][fp8]") {
  const std::vector<float> x = random_floats(2 * 5, 11);
  Fp8QuantizeOptions options;
  options.scales = {0.5f, 0.25f};
  options.margin = 3.0f;  // ignored with explicit scales
  const Fp8Tensor q =
      quantize_fp8(make_view(x, Shape{2, 5}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 0, options);
  CHECK(q.scale == options.scales);
  for (int i = 0; i < 10; ++i) CHECK(q.data[i] == fp8_encode(x[i] / options.scales[i / 5], Fp8Format::e4m3, true));

  Fp8QuantizeOptions margin;
  margin.margin = 2.0f;
  const Fp8Tensor m = quantize_fp8(make_view(x), Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor, 0, margin);
  float amax = 0.0f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  CHECK(m.scale[0] == amax / 448.0f * 4.0f);
  for (std::uint8_t code : m.data) CHECK(std::fabs(fp8_decode(code, Fp8Format::e4m3)) <= 112.0f);  // 448 / 2^2
}

TEST_CASE("FP8-representable values survive quantize and dequantize exactly", "[quant][cast][fp8]") {
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    std::vector<float> x;
    ByteBuffer expected;
    for (int code = 0; code < 256; ++code) {
      const float value = fp8_decode(static_cast<std::uint8_t>(code), format);
      if (!std::isfinite(value)) continue;
      x.push_back(value * 0.125f);
      expected.push_back(static_cast<std::uint8_t>(code));
    }
    Fp8QuantizeOptions options;
    options.scales = {0.125f};
    const Fp8Tensor q = quantize_fp8(make_view(x), format, Fp8ScaleGranularity::per_tensor, 0, options);
    CHECK(q.data == expected);
    std::vector<float> back(x.size());
    dequantize_fp8(q, make_view(back));
    CHECK(back == x);
  }
}

TEST_CASE("quantize_fp8 copies a strided view first", "[quant][cast][fp8]") {
  const std::vector<float> x = random_floats(4 * 6, 12);
  const TensorView<const float> transposed(x.data(), Shape{6, 4}, Strides{1, 6});
  const std::vector<float> dense = contiguous_copy(transposed);
  const Fp8Tensor a = quantize_fp8(transposed, Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 1);
  const Fp8Tensor b = quantize_fp8(make_view(dense, Shape{6, 4}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 1);
  CHECK(a.data == b.data);
  CHECK(a.scale == b.scale);
}

TEST_CASE("quantize_fp8_into writes caller buffers; allow_nonfinite encodes NaN and inf", "[quant][cast][fp8]") {
  std::vector<float> x = random_floats(2 * 8, 13);
  x[2] = kNaN;
  x[9] = -kInf;
  std::vector<std::uint8_t> codes(16);
  std::vector<float> scales(2);
  Fp8QuantizeOptions options;
  options.allow_nonfinite = true;
  quantize_fp8_into(make_view(x, Shape{2, 8}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 0, options,
                    make_view(codes, Shape{2, 8}), make_view(scales));
  CHECK(codes[2] == 0x7F);
  CHECK(codes[9] == 0xFE);  // -inf saturates
  for (int c = 0; c < 2; ++c) {
    float amax = 0.0f;
    for (int i = 0; i < 8; ++i)
      if (std::isfinite(x[c * 8 + i])) amax = std::max(amax, std::fabs(x[c * 8 + i]));
    CHECK(scales[c] == amax / 448.0f);
  }
}

TEST_CASE("FP8 quantization rejects bad input, naming it, and writes nothing", "[quant][cast][fp8]") {
  std::vector<float> x = random_floats(2 * 4, 14);
  std::vector<std::uint8_t> codes(8, 0xAB);
  std::vector<float> scales(2, -3.0f);
  const auto untouched = [&] {
    for (std::uint8_t c : codes) CHECK(c == 0xAB);
    for (float s : scales) CHECK(s == -3.0f);
  };
  const auto run = [&](const std::vector<float>& input, const Fp8QuantizeOptions& options, int axis = 0) {
    quantize_fp8_into(make_view(input, Shape{2, 4}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, axis, options,
                      make_view(codes, Shape{2, 4}), make_view(scales));
  };

  std::vector<float> bad = x;
  bad[5] = kNaN;
  bad[7] = kInf;
  CHECK_THROWS_WITH(run(bad, {}), Contains("quantize_fp8_into") && Contains("x[5] = nan") && Contains("finite"));
  bad[5] = 1.0f;
  CHECK_THROWS_WITH(run(bad, {}), Contains("x[7] = inf"));
  untouched();

  Fp8QuantizeOptions options;
  options.scales = {1.0f};
  CHECK_THROWS_WITH(run(x, options), Contains("options.scales = 1 value:") && Contains("2 scales"));
  options.scales = {1.0f, 0.0f};
  CHECK_THROWS_WITH(run(x, options), Contains("options.scales[1] = 0") && Contains("> 0"));
  options.scales = {kNaN, 1.0f};
  CHECK_THROWS_WITH(run(x, options), Contains("options.scales[0] = nan"));
  options.scales = {1.0f, -2.0f};
  CHECK_THROWS_WITH(run(x, options), Contains("options.scales[1] = -2"));
  options.scales.clear();
  options.margin = kInf;
  CHECK_THROWS_WITH(run(x, options), Contains("options.margin = inf"));
  CHECK_THROWS_WITH(run(x, {}, 2), Contains("axis = 2") && Contains("[-2, 2)"));
  untouched();

  CHECK_THROWS_WITH(quantize_fp8_into(make_view(x, Shape{2, 4}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 1,
                                      {}, make_view(codes, Shape{2, 4}), make_view(scales)),
                    Contains("scales = a view of 2 elements") && Contains("4 scales"));
  CHECK_THROWS_WITH(quantize_fp8_into(make_view(x, Shape{2, 4}), Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor, 0,
                                      {}, make_view(codes, Shape{4, 2}), TensorView<float>(scales.data(), 1)),
                    Contains("codes = [4, 2]"));
  CHECK_THROWS_WITH(quantize_fp8_into(TensorView<const float>(x.data(), Shape{4, 2}, Strides{1, 4}), Fp8Format::e4m3,
                                      Fp8ScaleGranularity::per_tensor, 0, {}, make_view(codes, Shape{4, 2}),
                                      TensorView<float>(scales.data(), 1)),
                    Contains("x = a strided view") && Contains("contiguous"));
  CHECK_THROWS_WITH(
      quantize_fp8_into(TensorView<const float>(x.data(), Shape{0}), Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor,
                        0, {}, TensorView<std::uint8_t>(codes.data(), Shape{0}), TensorView<float>(scales.data(), 1)),
      Contains("x = an empty tensor"));
  CHECK_THROWS_WITH(
      quantize_fp8_into(TensorView<const float>(x.data(), Shape{8}, Device::cuda(0)), Fp8Format::e4m3,
                        Fp8ScaleGranularity::per_tensor, 0, {}, TensorView<std::uint8_t>(codes.data(), Shape{8}),
                        TensorView<float>(scales.data(), 1)),
      Contains("x = a CUDA view"));
  untouched();

  CHECK_THROWS_WITH(quantize_fp8(make_view(bad), Fp8Format::e5m2), Contains("quantize_fp8:") && Contains("x[7] = inf"));
}

TEST_CASE("FP8 dequantization rejects bad input, naming it, and writes nothing", "[quant][cast][fp8]") {
  const std::vector<float> x = random_floats(2 * 3, 15);
  const Fp8Tensor good = quantize_fp8(make_view(x, Shape{2, 3}), Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 1);
  std::vector<float> out(6, 9.0f);
  CHECK_THROWS_WITH(dequantize_fp8(good, make_view(out, Shape{3, 2})),
                    Contains("dequantize_fp8") && Contains("out = [3, 2]") && Contains("[2, 3]"));
  Fp8Tensor q = good;
  q.scale[0] = 0.0f;
  CHECK_THROWS_WITH(dequantize_fp8(q, make_view(out, Shape{2, 3})), Contains("q.scale[0] = 0"));
  q = good;
  q.scale.pop_back();
  CHECK_THROWS_WITH(dequantize_fp8(q, make_view(out, Shape{2, 3})),
                    Contains("q.scale = 2 values:") && Contains("3 scales"));
  q = good;
  q.data.pop_back();
  CHECK_THROWS_WITH(dequantize_fp8(q, make_view(out, Shape{2, 3})), Contains("q.data = 5 bytes"));
  q = good;
  q.axis = 2;
  CHECK_THROWS_WITH(dequantize_fp8(q, make_view(out, Shape{2, 3})), Contains("q.axis = 2"));
  const std::vector<float> one_scale{kInf};
  CHECK_THROWS_WITH(dequantize_fp8_into(good.codes(), make_view(one_scale), Fp8Format::e4m3,
                                        Fp8ScaleGranularity::per_tensor, 0, make_view(out, Shape{2, 3})),
                    Contains("dequantize_fp8_into") && Contains("scales[0] = inf"));
  for (float v : out) CHECK(v == 9.0f);
}
