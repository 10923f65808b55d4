// Host-callable quantize / dequantize / fake-quantize (shrink/cuda/quantize.hpp): validation, then the launchers of
// shrink/cuda/kernels/quantize.cuh, explicitly instantiated here for every integer type.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/quantize.cuh"
#include "shrink/cuda/quantize.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cuda {

using namespace detail;

namespace kernels::quantize {
template void quantize_bytes<std::int8_t>(const float*, std::int8_t*, std::int64_t, kernels::ParamMode,
                                          const kernels::DeviceAffine&, int*, cudaStream_t);
template void quantize_bytes<std::uint8_t>(const float*, std::uint8_t*, std::int64_t, kernels::ParamMode,
                                           const kernels::DeviceAffine&, int*, cudaStream_t);
template void dequantize_bytes<std::int8_t>(const std::int8_t*, float*, std::int64_t, kernels::ParamMode,
                                            const kernels::DeviceAffine&, cudaStream_t);
template void dequantize_bytes<std::uint8_t>(const std::uint8_t*, float*, std::int64_t, kernels::ParamMode,
                                             const kernels::DeviceAffine&, cudaStream_t);
template void dequantize_int4<true>(const std::uint8_t*, float*, std::int64_t, std::int64_t, kernels::ParamMode,
                                    const kernels::DeviceAffine&, cudaStream_t);
template void dequantize_int4<false>(const std::uint8_t*, float*, std::int64_t, std::int64_t, kernels::ParamMode,
                                     const kernels::DeviceAffine&, cudaStream_t);
}  // namespace kernels::quantize

namespace {

// Everything a launch needs, derived on the host from the shape and the scheme.
struct Plan {
  AxisSplit split;
  kernels::ParamMode mode = kernels::ParamMode::per_tensor;
  std::int64_t group = 1;
  std::int64_t params = 1;
  std::int64_t numel = 0;
  std::int64_t row_length = 1;  // last dimension, for the 4-bit packing
  std::size_t workspace = 0;
};

Plan make_plan(const Shape& shape, const quant::QuantScheme& scheme, const char* fn) {
  switch (scheme.dtype) {
    case quant::QuantDtype::int8:
    case quant::QuantDtype::uint8:
    case quant::QuantDtype::int4:
    case quant::QuantDtype::uint4: break;
    default: fail(fn, "scheme.dtype", static_cast<int>(scheme.dtype), "int8, uint8, int4 or uint4");
  }
  if (scheme.float_zero_point)  // DeviceQParams holds int32 zero points
    fail(fn, "scheme.float_zero_point", "true",
         std::string("integer zero points: fractional zero points (HQQ) are not supported by ") + fn);
  Plan plan;
  plan.split = quant::scheme_split(scheme, shape, fn);  // the CPU's checks of axis and group size
  plan.params = quant::qparams_shape(scheme, shape, fn).product();
  switch (scheme.granularity) {
    case quant::Granularity::per_tensor: plan.mode = kernels::ParamMode::per_tensor; break;
    case quant::Granularity::per_channel: plan.mode = kernels::ParamMode::per_channel; break;
    case quant::Granularity::per_group:
      plan.mode = kernels::ParamMode::per_group;
      plan.group = scheme.group_size;
      break;
    default: fail(fn, "scheme.granularity", static_cast<int>(scheme.granularity), "per_tensor, per_channel or per_group");
  }
  plan.numel = shape.product();
  plan.row_length = shape.rank > 0 ? shape.values[shape.rank - 1] : 1;
  plan.workspace = kStatusBytes + static_cast<std::size_t>(plan.params) * sizeof(float);
  return plan;
}



void require_workspace(const Workspace& workspace, const Plan& plan, const char* fn) {
  detail::require_workspace(workspace, plan.workspace, "workspace_bytes(shape, scheme)", fn);
}

void require_qparams(const DeviceQParams& qparams, const char* fn) {
  require_pointer(qparams.scale, alignof(float), fn, "qparams.scale");
  require_pointer(qparams.zero_point, alignof(std::int32_t), fn, "qparams.zero_point");
}


// Zeroes the status word and fills the inverse scales (checking the parameters on the way).
kernels::DeviceAffine prepare(const quant::QuantScheme& scheme, const DeviceQParams& qparams, const Plan& plan,
                              const Workspace& workspace, Stream stream) {
  int* status = static_cast<int*>(workspace.data);
  float* inv_scale = reinterpret_cast<float*>(static_cast<char*>(workspace.data) + kStatusBytes);
  const quant::QuantRange range = quant::quant_range(scheme);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  kernels::quantize::prepare_affine(qparams.scale, qparams.zero_point, plan.params, range.qmin, range.qmax, inv_scale,
                                    status, stream);
  kernels::DeviceAffine p;
  p.scale = qparams.scale;
  p.inv_scale = inv_scale;
  p.zero_point = qparams.zero_point;
  p.qmin = range.qmin;
  p.qmax = range.qmax;
  p.index.channels = plan.split.channels;
  p.index.inner = plan.split.inner;
  p.index.group = plan.group;
  return p;
}

int* status_word(const Workspace& workspace) { return static_cast<int*>(workspace.data); }

}  // namespace

std::size_t workspace_bytes(const Shape& shape, const quant::QuantScheme& scheme) {
  return make_plan(shape, scheme, "shrink::cuda::workspace_bytes").workspace;
}

void quantize(TensorView<const float> x, const quant::QuantScheme& scheme, DeviceQParams qparams, void* out,
              Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::quantize";
  require_device_view(x, fn, "x");
  const Plan plan = make_plan(x.shape(), scheme, fn);
  require_qparams(qparams, fn);
  require_pointer(out, 1, fn, "out");
  require_workspace(workspace, plan, fn);
  require_current_device(x.device(), fn, "x");

  const kernels::DeviceAffine p = prepare(scheme, qparams, plan, workspace, stream);
  int* status = status_word(workspace);
  switch (scheme.dtype) {
    case quant::QuantDtype::int8:
      kernels::quantize::quantize_bytes(x.data(), static_cast<std::int8_t*>(out), plan.numel, plan.mode, p, status,
                                        stream);
      break;
    case quant::QuantDtype::uint8:
      kernels::quantize::quantize_bytes(x.data(), static_cast<std::uint8_t*>(out), plan.numel, plan.mode, p, status,
                                        stream);
      break;
    case quant::QuantDtype::int4:
    case quant::QuantDtype::uint4:  // clamped values already lie in the nibble's range, signed or not
      kernels::quantize::quantize_int4(x.data(), static_cast<std::uint8_t*>(out), plan.numel / plan.row_length,
                                       plan.row_length, plan.mode, p, status, stream);
      break;
  }
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

void dequantize(const void* q, const quant::QuantScheme& scheme, DeviceQParams qparams, TensorView<float> out,
                Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::dequantize";
  require_device_view(out, fn, "out");
  const Plan plan = make_plan(out.shape(), scheme, fn);
  require_pointer(q, 1, fn, "q");
  require_qparams(qparams, fn);
  require_workspace(workspace, plan, fn);
  require_current_device(out.device(), fn, "out");

  const kernels::DeviceAffine p = prepare(scheme, qparams, plan, workspace, stream);
  const std::int64_t rows = plan.numel / plan.row_length;
  switch (scheme.dtype) {
    case quant::QuantDtype::int8:
      kernels::quantize::dequantize_bytes(static_cast<const std::int8_t*>(q), out.data(), plan.numel, plan.mode, p,
                                          stream);
      break;
    case quant::QuantDtype::uint8:
      kernels::quantize::dequantize_bytes(static_cast<const std::uint8_t*>(q), out.data(), plan.numel, plan.mode, p,
                                          stream);
      break;
    case quant::QuantDtype::int4:
      kernels::quantize::dequantize_int4<true>(static_cast<const std::uint8_t*>(q), out.data(), rows, plan.row_length,
                                               plan.mode, p, stream);
      break;
    case quant::QuantDtype::uint4:
      kernels::quantize::dequantize_int4<false>(static_cast<const std::uint8_t*>(q), out.data(), rows, plan.row_length,
                                                plan.mode, p, stream);
      break;
  }
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

void fake_quantize(TensorView<const float> x, const quant::QuantScheme& scheme, DeviceQParams qparams, float* out,
                   std::uint8_t* mask, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::fake_quantize";
  require_device_view(x, fn, "x");
  const Plan plan = make_plan(x.shape(), scheme, fn);
  require_qparams(qparams, fn);
  require_pointer(out, alignof(float), fn, "out");
  require_workspace(workspace, plan, fn);
  require_current_device(x.device(), fn, "x");

  const kernels::DeviceAffine p = prepare(scheme, qparams, plan, workspace, stream);
  kernels::quantize::fake_quantize(x.data(), out, mask, plan.numel, plan.mode, p, status_word(workspace), stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

}  // namespace shrink::cuda
