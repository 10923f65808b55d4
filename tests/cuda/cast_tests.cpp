// Tests for shrink/cuda/cast.hpp: [gpu] cases match quant/cast.hpp's casts and FP8 codes bit for bit on random
// non-zero inputs (plus the special values: subnormals, overflow, inf, NaN with payloads), outputs poisoned before
// each launch; [host] cases check the argument validation, which throws before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/cast.hpp"
#include "shrink/quant/cast.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"

namespace {

using Catch::Matchers::Contains;
using shrink::bfloat16;
using shrink::bits_to_float;
using shrink::Device;
using shrink::Fp8Format;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::cuda::Synchronize;

using shrink::test::DeviceBuffer;
using shrink::test::fake_device_bytes;
using shrink::test::fake_device_floats;
using shrink::test::kFakeWorkspace;
using shrink::test::same_bits;

// Normal values over many binades (never zero); with `specials`, the edge cases of the 16-bit formats among them.
std::vector<float> random_wide_input(std::int64_t n, std::uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.3f, 2.0f);
  std::uniform_int_distribution<int> binade(-30, 20);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) {
    do v = std::ldexp(normal(rng), binade(rng));
    while (v == 0.0f);
  }
  if (specials) {
    const float edge[] = {65504.0f,
                          65520.0f,
                          65519.99f,
                          70000.0f,
                          -1e30f,
                          6e-8f,
                          3e-8f,
                          2.98e-8f,
                          1e-45f,
                          5.96e-8f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          bits_to_float(0x7FC00001u),
                          bits_to_float(0xFF812345u),
                          bits_to_float(0x7F800001u),
                          bits_to_float(0x3F808000u),
                          bits_to_float(0x3F818000u),
                          bits_to_float(0x7F7FFFFFu)};
    for (std::size_t k = 0; k < sizeof(edge) / sizeof(edge[0]) && k * 7 < x.size(); ++k) x[k * 7] = edge[k];
  }
  return x;
}

}  // namespace

TEST_CASE("cuda casts reject bad arguments on the host before any CUDA call", "[host]") {
  const Shape shape{6, 8};
  const TensorView<const float> x(fake_device_floats(), shape, Device::cuda(0));
  auto* h = reinterpret_cast<half*>(std::uintptr_t{0x30000});
  CHECK_THROWS_WITH(shrink::cuda::cast_to_half(TensorView<const float>(fake_device_floats(), shape), h, nullptr),
                    Contains("shrink::cuda::cast_to_half: x = a view of host memory"));
  CHECK_THROWS_WITH(shrink::cuda::cast_to_bfloat16(x, nullptr, nullptr),
                    Contains("shrink::cuda::cast_to_bfloat16: out = a null pointer"));
  CHECK_THROWS_WITH(shrink::cuda::cast_to_half(x, reinterpret_cast<half*>(std::uintptr_t{0x30001}), nullptr),
                    Contains("out = a misaligned pointer"));
  CHECK_THROWS_WITH(shrink::cuda::cast_to_float(static_cast<const half*>(nullptr),
                                                TensorView<float>(fake_device_floats(), shape, Device::cuda(0)), nullptr),
                    Contains("shrink::cuda::cast_to_float: x = a null pointer"));
  CHECK_THROWS_WITH(shrink::cuda::cast_to_float(h, TensorView<float>(fake_device_floats(), Shape{0, 8}, Device::cuda(0)),
                                                nullptr),
                    Contains("out = an empty tensor"));
}

TEST_CASE("cuda FP8 quantize / dequantize reject bad arguments on the host before any CUDA call", "[host]") {
  const Shape shape{6, 8};
  const TensorView<const float> x(fake_device_floats(), shape, Device::cuda(0));
  const shrink::cuda::Fp8Scales per_tensor{fake_device_floats(), false, 0};
  using shrink::cuda::quantize_fp8;
  CHECK(shrink::cuda::fp8_workspace_bytes() == 16);
  CHECK_THROWS_WITH(quantize_fp8(TensorView<const float>(fake_device_floats(), shape, shrink::Strides{1, 6},
                                                         Device::cuda(0)),
                                 Fp8Format::e4m3, per_tensor, fake_device_bytes(), kFakeWorkspace, nullptr),
                    Contains("shrink::cuda::quantize_fp8: x = a strided view"));
  CHECK_THROWS_WITH(quantize_fp8(x, static_cast<Fp8Format>(7), per_tensor, fake_device_bytes(), kFakeWorkspace, nullptr),
                    Contains("format = 7"));
  CHECK_THROWS_WITH(quantize_fp8(x, Fp8Format::e5m2, shrink::cuda::Fp8Scales{nullptr, false, 0}, fake_device_bytes(),
                                 kFakeWorkspace, nullptr),
                    Contains("scales.data = a null pointer"));
  CHECK_THROWS_WITH(quantize_fp8(x, Fp8Format::e5m2, shrink::cuda::Fp8Scales{fake_device_floats(), true, 2},
                                 fake_device_bytes(), kFakeWorkspace, nullptr),
                    Contains("scales.axis = 2"));
  CHECK_THROWS_WITH(quantize_fp8(x, Fp8Format::e4m3, per_tensor, nullptr, kFakeWorkspace, nullptr),
                    Contains("codes = a null pointer"));
  CHECK_THROWS_WITH(quantize_fp8(x, Fp8Format::e4m3, per_tensor, fake_device_bytes(),
                                 shrink::cuda::Workspace{kFakeWorkspace.data, 8}, nullptr),
                    Contains("workspace.bytes = 8"));
  CHECK_THROWS_WITH(shrink::cuda::dequantize_fp8(fake_device_bytes(), Fp8Format::e4m3, per_tensor,
                                                 TensorView<float>(fake_device_floats(), shape), kFakeWorkspace, nullptr),
                    Contains("shrink::cuda::dequantize_fp8: out = a view of host memory"));
  CHECK_THROWS_WITH(shrink::cuda::dequantize_fp8(nullptr, Fp8Format::e4m3, per_tensor,
                                                 TensorView<float>(fake_device_floats(), shape, Device::cuda(0)),
                                                 kFakeWorkspace, nullptr),
                    Contains("codes = a null pointer"));
}

TEST_CASE("cuda half / bfloat16 casts equal the CPU's bit for bit, both ways", "[gpu][sanitize]") {
  const std::int64_t n = GENERATE(std::int64_t{1001}, std::int64_t{1} << 20);
  const Shape shape{n};
  const std::vector<float> x = random_wide_input(n, 42, true);
  DeviceBuffer x_dev(x.size() * sizeof(float));
  x_dev.upload(x.data(), x_dev.bytes());
  const TensorView<const float> x_view(x_dev.as<float>(), shape, Device::cuda(0));
  DeviceBuffer h_dev(x.size() * 2), f_dev(x.size() * sizeof(float));

  std::vector<half> h_cpu(x.size());
  shrink::quant::cast_to_half(TensorView<const float>(x.data(), shape), TensorView<half>(h_cpu.data(), shape));
  shrink::cuda::cast_to_half(x_view, h_dev.as<half>(), nullptr);
  CHECK_SAME_BITS(h_dev.download<half>(x.size()), h_cpu);

  std::vector<float> back_cpu(x.size());
  shrink::quant::cast_to_float(TensorView<const half>(h_cpu.data(), shape), TensorView<float>(back_cpu.data(), shape));
  h_dev.upload(h_cpu.data(), h_dev.bytes());
  shrink::cuda::cast_to_float(h_dev.as<const half>(), TensorView<float>(f_dev.as<float>(), shape, Device::cuda(0)),
                              nullptr);
  CHECK_SAME_BITS(f_dev.download<float>(x.size()), back_cpu);

  std::vector<bfloat16> b_cpu(x.size());
  shrink::quant::cast_to_bfloat16(TensorView<const float>(x.data(), shape), TensorView<bfloat16>(b_cpu.data(), shape));
  h_dev.poison();
  shrink::cuda::cast_to_bfloat16(x_view, h_dev.as<bfloat16>(), nullptr);
  CHECK_SAME_BITS(h_dev.download<bfloat16>(x.size()), b_cpu);

  shrink::quant::cast_to_float(TensorView<const bfloat16>(b_cpu.data(), shape),
                               TensorView<float>(back_cpu.data(), shape));
  h_dev.upload(b_cpu.data(), h_dev.bytes());
  f_dev.poison();
  shrink::cuda::cast_to_float(h_dev.as<const bfloat16>(), TensorView<float>(f_dev.as<float>(), shape, Device::cuda(0)),
                              nullptr);
  CHECK_SAME_BITS(f_dev.download<float>(x.size()), back_cpu);
}

TEST_CASE("cuda FP8 quantize / dequantize equal quantize_fp8's codes and values", "[gpu]") {
  const Fp8Format format = GENERATE(Fp8Format::e4m3, Fp8Format::e5m2);
  const bool saturate = GENERATE(true, false);
  const int axis = GENERATE(-100, 0, 1, -1);  // -100: per tensor
  const Shape shape{24, 5, 67};
  const std::int64_t n = shape.product();
  INFO(shrink::to_string(format) << " saturate " << saturate << " axis " << axis);

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.2f, 3.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) {
    do v = normal(rng);
    while (v == 0.0f);
  }
  const bool per_channel = axis != -100;
  const auto granularity =
      per_channel ? shrink::quant::Fp8ScaleGranularity::per_channel : shrink::quant::Fp8ScaleGranularity::per_tensor;
  const std::int64_t count = per_channel ? shape.values[axis < 0 ? axis + 3 : axis] : 1;
  shrink::quant::Fp8QuantizeOptions options;
  options.saturate = saturate;
  // Scales that leave the largest values past the format's range (saturation or overflow is exercised) and tiny
  // ones in its subnormals.
  for (std::int64_t c = 0; c < count; ++c)
    options.scales.push_back(6.0f / shrink::fp8_max_finite(format) * (0.5f + 0.1f * static_cast<float>(c % 7)));
  const shrink::quant::Fp8Tensor q = shrink::quant::quantize_fp8(TensorView<const float>(x.data(), shape), format,
                                                                 granularity, per_channel ? axis : 0, options);
  std::vector<float> dq(x.size());
  shrink::quant::dequantize_fp8(q, TensorView<float>(dq.data(), shape));

  DeviceBuffer x_dev(x.size() * sizeof(float)), scale_dev(options.scales.size() * sizeof(float));
  x_dev.upload(x.data(), x_dev.bytes());
  scale_dev.upload(options.scales.data(), scale_dev.bytes());
  DeviceBuffer codes_dev(x.size()), out_dev(x.size() * sizeof(float)), ws(shrink::cuda::fp8_workspace_bytes());
  const shrink::cuda::Fp8Scales scales{scale_dev.as<float>(), per_channel, per_channel ? axis : 0};
  shrink::cuda::quantize_fp8(TensorView<const float>(x_dev.as<float>(), shape, Device::cuda(0)), format, scales,
                             codes_dev.as<std::uint8_t>(), ws.workspace(), nullptr,
                             shrink::cuda::Fp8CastOptions{saturate, false}, Synchronize::yes);
  const std::vector<std::uint8_t> codes = codes_dev.download<std::uint8_t>(x.size());
  CHECK(std::memcmp(codes.data(), q.data.data(), x.size()) == 0);

  codes_dev.upload(q.data.data(), x.size());
  shrink::cuda::dequantize_fp8(codes_dev.as<std::uint8_t>(), format, scales,
                               TensorView<float>(out_dev.as<float>(), shape, Device::cuda(0)), ws.workspace(), nullptr,
                               Synchronize::yes);
  CHECK_SAME_BITS(out_dev.download<float>(x.size()), dq);
}

TEST_CASE("cuda FP8: non-finite input and bad scales are flagged, or encoded as the CPU does", "[gpu]") {
  const Shape shape{3, 100};
  std::vector<float> x = random_wide_input(shape.product(), 3, false);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[77] = -std::numeric_limits<float>::infinity();
  const float scale = 0.01f;
  DeviceBuffer x_dev(x.size() * sizeof(float)), scale_dev(sizeof(float)), codes_dev(x.size());
  DeviceBuffer ws(shrink::cuda::fp8_workspace_bytes());
  x_dev.upload(x.data(), x_dev.bytes());
  scale_dev.upload(&scale, sizeof scale);
  const TensorView<const float> x_view(x_dev.as<float>(), shape, Device::cuda(0));
  const shrink::cuda::Fp8Scales scales{scale_dev.as<float>(), false, 0};

  CHECK_THROWS_WITH(shrink::cuda::quantize_fp8(x_view, Fp8Format::e4m3, scales, codes_dev.as<std::uint8_t>(),
                                               ws.workspace(), nullptr, {}, Synchronize::yes),
                    Contains("shrink::cuda::quantize_fp8") && Contains("holds NaN or inf"));

  shrink::quant::Fp8QuantizeOptions options;
  options.scales = {scale};
  options.allow_nonfinite = true;
  const shrink::quant::Fp8Tensor q =
      shrink::quant::quantize_fp8(TensorView<const float>(x.data(), shape), Fp8Format::e4m3,
                                  shrink::quant::Fp8ScaleGranularity::per_tensor, 0, options);
  codes_dev.poison();
  shrink::cuda::quantize_fp8(x_view, Fp8Format::e4m3, scales, codes_dev.as<std::uint8_t>(), ws.workspace(), nullptr,
                             shrink::cuda::Fp8CastOptions{true, true}, Synchronize::yes);
  const std::vector<std::uint8_t> codes = codes_dev.download<std::uint8_t>(x.size());
  CHECK(std::memcmp(codes.data(), q.data.data(), x.size()) == 0);

  const float zero = 0.0f;
  scale_dev.upload(&zero, sizeof zero);
  CHECK_THROWS_WITH(shrink::cuda::dequantize_fp8(codes_dev.as<std::uint8_t>(), Fp8Format::e4m3, scales,
                                                 TensorView<float>(x_dev.as<float>(), shape, Device::cuda(0)),
                                                 ws.workspace(), nullptr, Synchronize::yes),
                    Contains("a scale is not finite and > 0"));
}
