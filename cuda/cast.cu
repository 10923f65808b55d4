// Host-callable casts (shrink/cuda/cast.hpp): validation, then the kernels of shrink/cuda/kernels/cast.cuh.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/cast.cuh"
#include "shrink/cuda/cast.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"

namespace shrink::cuda {

using namespace detail;
namespace {

constexpr int kThreads = 256;




void require_workspace(const Workspace& workspace, const char* fn) {
  detail::require_workspace(workspace, fp8_workspace_bytes(), "fp8_workspace_bytes()", fn);
}

void require_format(Fp8Format format, const char* fn) {
  if (format != Fp8Format::e4m3 && format != Fp8Format::e5m2)
    fail(fn, "format", static_cast<int>(format), "Fp8Format::e4m3 or Fp8Format::e5m2");
}

// Where the scales apply, after the CPU's checks of the axis; scale_count is 1 or shape[axis].
struct ScalePlan {
  kernels::cast::ScaleIndex index;
  std::int64_t scale_count = 1;
};

ScalePlan plan_scales(const Shape& shape, const Fp8Scales& scales, const char* fn) {
  require_pointer(scales.data, alignof(float), fn, "scales.data");
  ScalePlan plan;
  if (!scales.per_channel) return plan;
  const AxisSplit split = split_at_axis(shape, normalize_axis(scales.axis, shape.rank, fn, "scales.axis"));
  plan.index.channels = split.channels;
  plan.index.inner = split.inner;
  plan.scale_count = split.channels;
  // One channel: every element uses scale 0, which ScaleIndex's per-tensor form already gives.
  return plan;
}

template <class From, class To>
void convert(const From* x, To* out, std::int64_t n, Stream stream) {
  kernels::cast::convert_kernel<From, To><<<kernels::grid_blocks(n, kThreads), kThreads, 0, stream>>>(x, out, n);
  SHRINK_CUDA_CHECK_LAUNCH(convert_kernel);
}

void start_checks(const Workspace& workspace, const float* scales, std::int64_t count, Stream stream) {
  int* status = static_cast<int*>(workspace.data);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  kernels::cast::check_scales_kernel<<<kernels::grid_blocks(count, kThreads), kThreads, 0, stream>>>(scales, count,
                                                                                                     status);
  SHRINK_CUDA_CHECK_LAUNCH(check_scales_kernel);
}

}  // namespace

void cast_to_half(TensorView<const float> x, half* out, Stream stream) {
  const char* fn = "shrink::cuda::cast_to_half";
  require_device_view(x, fn, "x");
  require_pointer(out, alignof(half), fn, "out");
  require_current_device(x.device(), fn, "x");
  convert(x.data(), out, x.numel(), stream);
}

void cast_to_bfloat16(TensorView<const float> x, bfloat16* out, Stream stream) {
  const char* fn = "shrink::cuda::cast_to_bfloat16";
  require_device_view(x, fn, "x");
  require_pointer(out, alignof(bfloat16), fn, "out");
  require_current_device(x.device(), fn, "x");
  convert(x.data(), out, x.numel(), stream);
}

void cast_to_float(const half* x, TensorView<float> out, Stream stream) {
  const char* fn = "shrink::cuda::cast_to_float";
  require_device_view(out, fn, "out");
  require_pointer(x, alignof(half), fn, "x");
  require_current_device(out.device(), fn, "out");
  convert(x, out.data(), out.numel(), stream);
}

void cast_to_float(const bfloat16* x, TensorView<float> out, Stream stream) {
  const char* fn = "shrink::cuda::cast_to_float";
  require_device_view(out, fn, "out");
  require_pointer(x, alignof(bfloat16), fn, "x");
  require_current_device(out.device(), fn, "out");
  convert(x, out.data(), out.numel(), stream);
}

std::size_t fp8_workspace_bytes() { return kStatusBytes; }

void quantize_fp8(TensorView<const float> x, Fp8Format format, Fp8Scales scales, std::uint8_t* codes,
                  Workspace workspace, Stream stream, Fp8CastOptions options, Synchronize synchronize) {
  const char* fn = "shrink::cuda::quantize_fp8";
  require_device_view(x, fn, "x");
  require_format(format, fn);
  const ScalePlan plan = plan_scales(x.shape(), scales, fn);
  require_pointer(codes, 1, fn, "codes");
  require_workspace(workspace, fn);
  require_current_device(x.device(), fn, "x");

  start_checks(workspace, scales.data, plan.scale_count, stream);
  int* status = static_cast<int*>(workspace.data);
  const std::int64_t n = x.numel();
  const unsigned blocks = kernels::grid_blocks(n, kThreads);
  if (format == Fp8Format::e4m3)
    kernels::cast::quantize_fp8_kernel<Fp8Format::e4m3><<<blocks, kThreads, 0, stream>>>(
        x.data(), scales.data, plan.index, n, options.saturate, !options.allow_nonfinite, codes, status);
  else
    kernels::cast::quantize_fp8_kernel<Fp8Format::e5m2><<<blocks, kThreads, 0, stream>>>(
        x.data(), scales.data, plan.index, n, options.saturate, !options.allow_nonfinite, codes, status);
  SHRINK_CUDA_CHECK_LAUNCH(quantize_fp8_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

void dequantize_fp8(const std::uint8_t* codes, Fp8Format format, Fp8Scales scales, TensorView<float> out,
                    Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::dequantize_fp8";
  require_device_view(out, fn, "out");
  require_format(format, fn);
  const ScalePlan plan = plan_scales(out.shape(), scales, fn);
  require_pointer(codes, 1, fn, "codes");
  require_workspace(workspace, fn);
  require_current_device(out.device(), fn, "out");

  start_checks(workspace, scales.data, plan.scale_count, stream);
  const std::int64_t n = out.numel();
  const unsigned blocks = kernels::grid_blocks(n, kThreads);
  if (format == Fp8Format::e4m3)
    kernels::cast::dequantize_fp8_kernel<Fp8Format::e4m3>
        <<<blocks, kThreads, 0, stream>>>(codes, scales.data, plan.index, n, out.data());
  else
    kernels::cast::dequantize_fp8_kernel<Fp8Format::e5m2>
        <<<blocks, kThreads, 0, stream>>>(codes, scales.data, plan.index, n, out.data());
  SHRINK_CUDA_CHECK_LAUNCH(dequantize_fp8_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

}  // namespace shrink::cuda
