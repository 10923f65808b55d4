// Tests for shrink/cuda/quantize.hpp: [gpu] cases match the CPU's quantize / dequantize / fake_quantize byte for byte
// on random non-zero inputs, outputs poisoned before each launch; [host] cases check the argument validation, which
// throws before any CUDA call and so needs no device.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/quantize.hpp"
#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/scheme.hpp"
#include "support/element_types.hpp"
#include "support/random.hpp"
#include "support/mismatch_map.hpp"

namespace {

using shrink::Device;
using shrink::Shape;
using shrink::TensorView;
using shrink::quant::Granularity;
using shrink::quant::QuantDtype;
using shrink::quant::QuantScheme;
using shrink::quant::Symmetry;
using Catch::Matchers::Contains;

using shrink::test::DeviceBuffer;
using shrink::test::fake_device_bytes;
using shrink::test::fake_device_floats;
using shrink::test::kFakeWorkspace;
using shrink::test::random_nonzero_normal;
using shrink::test::same_bits;

std::string describe_scheme(const QuantScheme& s, const Shape& shape, std::int64_t offset) {
  return std::string(shrink::quant::to_string(s.dtype)) + " " + shrink::quant::to_string(s.symmetry) + " " +
         shrink::quant::to_string(s.granularity) + " axis " + std::to_string(s.axis) + " group " +
         std::to_string(s.group_size) + " shape " + shrink::to_string(shape) + " offset " + std::to_string(offset);
}

// One configuration through all three operations on the GPU, against the CPU. `offset` floats of misalignment
// select the scalar (non-float4) kernels.
void check_against_cpu(const QuantScheme& scheme, const Shape& shape, std::int64_t offset, std::uint32_t seed) {
  INFO(describe_scheme(scheme, shape, offset));
  const std::int64_t n = shape.product();
  const std::vector<float> x = random_nonzero_normal(n, seed);
  const TensorView<const float> x_host(x.data(), shape);

  // Parameters from 3/4 of the data's range, so that some values clip (mask zeros, clamped codes).
  std::vector<float> narrowed(x);
  for (float& v : narrowed) v *= 0.75f;
  const shrink::quant::QParams qparams =
      shrink::quant::minmax_qparams(TensorView<const float>(narrowed.data(), shape), scheme);

  const shrink::quant::QuantizedTensor q_cpu = shrink::quant::quantize(x_host, scheme, qparams);
  const std::vector<float> dq_cpu = shrink::quant::dequantize(q_cpu);
  std::vector<float> fq_cpu(static_cast<std::size_t>(n));
  std::vector<std::uint8_t> mask_cpu(static_cast<std::size_t>(n));
  shrink::quant::fake_quantize(x_host, scheme, qparams, TensorView<float>(fq_cpu.data(), shape),
                               TensorView<std::uint8_t>(mask_cpu.data(), shape));
  std::int64_t clipped = 0;
  for (const std::uint8_t m : mask_cpu) clipped += m == 0;
  CHECK(clipped > 0);  // the test exercises the clamp

  DeviceBuffer x_dev((static_cast<std::size_t>(n + offset)) * sizeof(float));
  float* x_ptr = x_dev.as<float>() + offset;
  CUDA_REQUIRE(cudaMemcpy(x_ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  DeviceBuffer scale_dev(qparams.scale.size() * sizeof(float));
  scale_dev.upload(qparams.scale.data(), scale_dev.bytes());
  DeviceBuffer zp_dev(qparams.zero_point.size() * sizeof(std::int32_t));
  zp_dev.upload(qparams.zero_point.data(), zp_dev.bytes());
  const shrink::cuda::DeviceQParams qp{scale_dev.as<float>(), zp_dev.as<std::int32_t>()};
  DeviceBuffer ws(shrink::cuda::workspace_bytes(shape, scheme));
  const shrink::cuda::Workspace workspace{ws.as<void>(), ws.bytes()};
  const TensorView<const float> x_view(x_ptr, shape, Device::cuda(0));
  const auto sync = shrink::cuda::Synchronize::yes;

  // quantize
  const std::size_t q_bytes = q_cpu.data.size();
  DeviceBuffer q_dev(q_bytes + static_cast<std::size_t>(offset));
  std::uint8_t* q_ptr = q_dev.as<std::uint8_t>() + offset;
  shrink::cuda::quantize(x_view, scheme, qp, q_ptr, workspace, nullptr, sync);
  std::vector<std::uint8_t> q_gpu(q_bytes);
  CUDA_REQUIRE(cudaMemcpy(q_gpu.data(), q_ptr, q_bytes, cudaMemcpyDeviceToHost));
  CHECK_SAME_BITS(q_gpu, std::vector<std::uint8_t>(q_cpu.data.begin(), q_cpu.data.end()));

  // dequantize (from the CPU's codes, so that it is tested on its own)
  q_dev.poison();
  CUDA_REQUIRE(cudaMemcpy(q_ptr, q_cpu.data.data(), q_bytes, cudaMemcpyHostToDevice));
  DeviceBuffer out_dev(static_cast<std::size_t>(n + offset) * sizeof(float));
  float* out_ptr = out_dev.as<float>() + offset;
  shrink::cuda::dequantize(q_ptr, scheme, qp, TensorView<float>(out_ptr, shape, Device::cuda(0)), workspace, nullptr,
                           sync);
  std::vector<float> dq_gpu(static_cast<std::size_t>(n));
  CUDA_REQUIRE(cudaMemcpy(dq_gpu.data(), out_ptr, dq_gpu.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_SAME_BITS(dq_gpu, dq_cpu);

  // fake quantize, with and without the mask
  out_dev.poison();
  DeviceBuffer mask_dev(static_cast<std::size_t>(n + offset));
  std::uint8_t* mask_ptr = mask_dev.as<std::uint8_t>() + offset;
  shrink::cuda::fake_quantize(x_view, scheme, qp, out_ptr, mask_ptr, workspace, nullptr, sync);
  std::vector<float> fq_gpu(static_cast<std::size_t>(n));
  std::vector<std::uint8_t> mask_gpu(static_cast<std::size_t>(n));
  CUDA_REQUIRE(cudaMemcpy(fq_gpu.data(), out_ptr, fq_gpu.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_REQUIRE(cudaMemcpy(mask_gpu.data(), mask_ptr, mask_gpu.size(), cudaMemcpyDeviceToHost));
  CHECK_SAME_BITS(fq_gpu, fq_cpu);
  CHECK_SAME_BITS(mask_gpu, mask_cpu);

  out_dev.poison();
  shrink::cuda::fake_quantize(x_view, scheme, qp, out_ptr, nullptr, workspace, nullptr, sync);
  CUDA_REQUIRE(cudaMemcpy(fq_gpu.data(), out_ptr, fq_gpu.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK_SAME_BITS(fq_gpu, fq_cpu);
}

struct QuantLayout {
  Granularity granularity;
  int axis;
  std::int64_t group_size;
  Shape shape;
};

// Odd sizes everywhere the scheme allows them: odd rows for the 4-bit packing, tails after the float4 steps.
std::vector<QuantLayout> layouts() {
  return {
      {Granularity::per_tensor, 0, 0, Shape{1001}},
      {Granularity::per_tensor, 0, 0, Shape{5, 7, 9}},
      {Granularity::per_channel, 0, 0, Shape{5, 7, 9}},
      {Granularity::per_channel, 1, 0, Shape{5, 7, 9}},
      {Granularity::per_channel, -1, 0, Shape{5, 7, 9}},
      {Granularity::per_channel, 0, 0, Shape{13, 33}},
      {Granularity::per_group, -1, 4, Shape{5, 3, 12}},
      {Granularity::per_group, 1, 3, Shape{5, 9, 7}},
      {Granularity::per_group, 1, 32, Shape{7, 96}},
  };
}

QuantScheme make_scheme(QuantDtype dtype, Symmetry symmetry, const QuantLayout& layout) {
  QuantScheme s = QuantScheme::per_tensor(dtype, symmetry);
  s.granularity = layout.granularity;
  s.axis = layout.axis;
  s.group_size = layout.group_size;
  return s;
}

}  // namespace

TEST_CASE("cuda quantize, dequantize and fake_quantize match the CPU for every dtype, symmetry and granularity",
          "[gpu]") {
  std::uint32_t seed = 1;
  for (const QuantDtype dtype : {QuantDtype::int8, QuantDtype::uint8, QuantDtype::int4, QuantDtype::uint4})
    for (const Symmetry symmetry : {Symmetry::symmetric, Symmetry::affine})
      for (const QuantLayout& layout : layouts())
        for (const std::int64_t offset : {0, 1}) check_against_cpu(make_scheme(dtype, symmetry, layout), layout.shape, offset, seed++);
}

TEST_CASE("cuda quantize matches the CPU with restricted and reduced ranges", "[gpu]") {
  std::uint32_t seed = 1000;
  for (const QuantDtype dtype : {QuantDtype::int8, QuantDtype::uint8, QuantDtype::int4, QuantDtype::uint4})
    for (const Symmetry symmetry : {Symmetry::symmetric, Symmetry::affine}) {
      QuantScheme restricted = QuantScheme::per_channel(dtype, symmetry, 0);
      restricted.restricted_range = true;
      check_against_cpu(restricted, Shape{9, 31}, 0, seed++);
      QuantScheme reduced = QuantScheme::per_tensor(dtype, symmetry);
      reduced.reduce_range = true;
      check_against_cpu(reduced, Shape{3, 41}, 0, seed++);
    }
}

TEST_CASE("cuda quantize reports NaN, inf and bad parameters when asked to synchronise", "[gpu]") {
  const Shape shape{4, 33};
  std::vector<float> x = random_nonzero_normal(shape.product(), 7);
  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0);
  const shrink::quant::QParams qparams = shrink::quant::minmax_qparams(TensorView<const float>(x.data(), shape), scheme);
  x[37] = std::numeric_limits<float>::quiet_NaN();

  DeviceBuffer x_dev(x.size() * sizeof(float));
  x_dev.upload(x.data(), x_dev.bytes());
  DeviceBuffer scale_dev(qparams.scale.size() * sizeof(float));
  scale_dev.upload(qparams.scale.data(), scale_dev.bytes());
  DeviceBuffer zp_dev(qparams.zero_point.size() * sizeof(std::int32_t));
  zp_dev.upload(qparams.zero_point.data(), zp_dev.bytes());
  DeviceBuffer ws(shrink::cuda::workspace_bytes(shape, scheme));
  DeviceBuffer out(x.size() * sizeof(float));
  const shrink::cuda::Workspace workspace{ws.as<void>(), ws.bytes()};
  const shrink::cuda::DeviceQParams qp{scale_dev.as<float>(), zp_dev.as<std::int32_t>()};
  const TensorView<const float> x_view(x_dev.as<float>(), shape, Device::cuda(0));

  CHECK_THROWS_WITH(shrink::cuda::quantize(x_view, scheme, qp, out.as<void>(), workspace, nullptr,
                                           shrink::cuda::Synchronize::yes),
                    Contains("shrink::cuda::quantize") && Contains("NaN or inf"));
  // Without synchronisation the call returns; check_status reports it later.
  REQUIRE_NOTHROW(shrink::cuda::fake_quantize(x_view, scheme, qp, out.as<float>(), nullptr, workspace, nullptr));
  CHECK_THROWS_WITH(shrink::cuda::check_status(workspace, nullptr), Contains("NaN or inf"));

  x[37] = std::numeric_limits<float>::infinity();
  x_dev.upload(x.data(), x_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::fake_quantize(x_view, scheme, qp, out.as<float>(), nullptr, workspace, nullptr,
                                                shrink::cuda::Synchronize::yes),
                    Contains("NaN or inf"));

  std::vector<float> bad_scale(qparams.scale);
  bad_scale[2] = 0.0f;
  scale_dev.upload(bad_scale.data(), scale_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::dequantize(x_dev.as<void>(), scheme, qp,
                                             TensorView<float>(out.as<float>(), shape, Device::cuda(0)), workspace,
                                             nullptr, shrink::cuda::Synchronize::yes),
                    Contains("scale"));
  scale_dev.upload(qparams.scale.data(), scale_dev.bytes());
  std::vector<std::int32_t> bad_zp(qparams.zero_point);
  bad_zp[1] = 300;
  zp_dev.upload(bad_zp.data(), zp_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::dequantize(x_dev.as<void>(), scheme, qp,
                                             TensorView<float>(out.as<float>(), shape, Device::cuda(0)), workspace,
                                             nullptr, shrink::cuda::Synchronize::yes),
                    Contains("zero point"));
}

// Host cases: pointers are never dereferenced because validation fails before any CUDA call.
namespace {

struct QuantizeHostArgs {
  Shape shape{6, 8};
  QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0);
  shrink::cuda::DeviceQParams qparams{fake_device_floats(), reinterpret_cast<const std::int32_t*>(std::uintptr_t{0x30000})};
  shrink::cuda::Workspace workspace = kFakeWorkspace;
  TensorView<const float> x() const { return TensorView<const float>(fake_device_floats(), shape, Device::cuda(0)); }
};

}  // namespace

TEST_CASE("cuda workspace_bytes: a status word and one inverse scale per parameter", "[host]") {
  CHECK(shrink::cuda::workspace_bytes(Shape{6, 8}, QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine)) ==
        16 + 4);
  CHECK(shrink::cuda::workspace_bytes(Shape{6, 8}, QuantScheme::per_channel(QuantDtype::int4, Symmetry::affine, 1)) ==
        16 + 8 * 4);
  CHECK(shrink::cuda::workspace_bytes(Shape{6, 8},
                                      QuantScheme::per_group(QuantDtype::uint4, Symmetry::symmetric, 1, 4)) ==
        16 + 12 * 4);
  CHECK_THROWS_WITH(shrink::cuda::workspace_bytes(Shape{6, 8},
                                                  QuantScheme::per_group(QuantDtype::int8, Symmetry::affine, 1, 3)),
                    Contains("shrink::cuda::workspace_bytes: scheme.group_size = 3"));
}

TEST_CASE("cuda quantize rejects bad arguments on the host before any CUDA call", "[host]") {
  using shrink::cuda::quantize;
  const QuantizeHostArgs a;
  void* out = fake_device_bytes();

  SECTION("x in host memory") {
    const TensorView<const float> host(fake_device_floats(), a.shape);
    CHECK_THROWS_WITH(quantize(host, a.scheme, a.qparams, out, a.workspace, nullptr),
                      Contains("shrink::cuda::quantize: x = a view of host memory"));
  }
  SECTION("empty x") {
    const TensorView<const float> empty(fake_device_floats(), Shape{0, 8}, Device::cuda(0));
    CHECK_THROWS_WITH(quantize(empty, a.scheme, a.qparams, out, a.workspace, nullptr), Contains("x = an empty tensor"));
  }
  SECTION("strided x") {
    const TensorView<const float> strided(fake_device_floats(), a.shape, shrink::Strides{1, 6}, Device::cuda(0));
    CHECK_THROWS_WITH(quantize(strided, a.scheme, a.qparams, out, a.workspace, nullptr), Contains("x = a strided view"));
  }
  SECTION("misaligned x") {
    const TensorView<const float> misaligned(reinterpret_cast<const float*>(std::uintptr_t{0x10002}), a.shape,
                                             Device::cuda(0));
    CHECK_THROWS_WITH(quantize(misaligned, a.scheme, a.qparams, out, a.workspace, nullptr),
                      Contains("x = a misaligned pointer"));
  }
  SECTION("axis out of range") {
    const QuantScheme bad = QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 2);
    CHECK_THROWS_WITH(quantize(a.x(), bad, a.qparams, out, a.workspace, nullptr), Contains("scheme.axis = 2"));
  }
  SECTION("group size that does not divide the axis") {
    const QuantScheme bad = QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 3);
    CHECK_THROWS_WITH(quantize(a.x(), bad, a.qparams, out, a.workspace, nullptr), Contains("scheme.group_size = 3"));
  }
  SECTION("non-positive group size") {
    const QuantScheme bad = QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 0);
    CHECK_THROWS_WITH(quantize(a.x(), bad, a.qparams, out, a.workspace, nullptr), Contains("scheme.group_size = 0"));
  }
  SECTION("null parameters") {
    shrink::cuda::DeviceQParams missing = a.qparams;
    missing.zero_point = nullptr;
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, missing, out, a.workspace, nullptr),
                      Contains("qparams.zero_point = a null pointer"));
    missing = a.qparams;
    missing.scale = nullptr;
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, missing, out, a.workspace, nullptr),
                      Contains("qparams.scale = a null pointer"));
  }
  SECTION("null output") {
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, a.qparams, nullptr, a.workspace, nullptr),
                      Contains("out = a null pointer"));
  }
  SECTION("workspace too small, missing or misaligned") {
    shrink::cuda::Workspace small = a.workspace;
    small.bytes = shrink::cuda::workspace_bytes(a.shape, a.scheme) - 1;
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, a.qparams, out, small, nullptr),
                      Contains("workspace.bytes = " + std::to_string(small.bytes)));
    shrink::cuda::Workspace missing = a.workspace;
    missing.data = nullptr;
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, a.qparams, out, missing, nullptr),
                      Contains("workspace.data = a null pointer"));
    shrink::cuda::Workspace misaligned = a.workspace;
    misaligned.data = reinterpret_cast<void*>(std::uintptr_t{0x40004});
    CHECK_THROWS_WITH(quantize(a.x(), a.scheme, a.qparams, out, misaligned, nullptr),
                      Contains("workspace.data = a misaligned pointer"));
  }
}

TEST_CASE("cuda dequantize and fake_quantize reject bad arguments on the host before any CUDA call", "[host]") {
  const QuantizeHostArgs a;
  const TensorView<float> out_dev(fake_device_floats(), a.shape, Device::cuda(0));
  const TensorView<float> out_host(fake_device_floats(), a.shape);

  CHECK_THROWS_WITH(shrink::cuda::dequantize(fake_device_bytes(), a.scheme, a.qparams, out_host, a.workspace, nullptr),
                    Contains("shrink::cuda::dequantize: out = a view of host memory"));
  CHECK_THROWS_WITH(shrink::cuda::dequantize(nullptr, a.scheme, a.qparams, out_dev, a.workspace, nullptr),
                    Contains("q = a null pointer"));
  CHECK_THROWS_WITH(shrink::cuda::dequantize(fake_device_bytes(),
                                             QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, -3),
                                             a.qparams, out_dev, a.workspace, nullptr),
                    Contains("scheme.axis = -3"));

  CHECK_THROWS_WITH(shrink::cuda::fake_quantize(TensorView<const float>(fake_device_floats(), a.shape), a.scheme,
                                                a.qparams, fake_device_floats(), nullptr, a.workspace, nullptr),
                    Contains("shrink::cuda::fake_quantize: x = a view of host memory"));
  CHECK_THROWS_WITH(shrink::cuda::fake_quantize(a.x(), a.scheme, a.qparams, nullptr, nullptr, a.workspace, nullptr),
                    Contains("out = a null pointer"));
  CHECK_THROWS_WITH(shrink::cuda::fake_quantize(a.x(), a.scheme, a.qparams, fake_device_floats(), nullptr,
                                                shrink::cuda::Workspace{}, nullptr),
                    Contains("workspace.data = a null pointer"));
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: one
// per-channel int8 and one per-group int4 scheme through quantize, dequantize and fake_quantize, aligned or not.
TEST_CASE("cuda quantize sanitizer subset: per-channel int8 and per-group int4", "[gpu][sanitize]") {
  for (const std::int64_t offset : {0, 1}) {
    check_against_cpu(QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0), Shape{13, 33}, offset, 70);
    check_against_cpu(QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 32), Shape{7, 96}, offset, 71);
  }
}
