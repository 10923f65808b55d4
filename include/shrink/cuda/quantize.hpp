// Host API of the CUDA quantize / dequantize / fake-quantize (compiled in cuda/quantize.cu; plain C++, no CUDA headers).
//
// Same schemes, formulas and results as the CPU's quant/quantize.hpp and quant/fake_quantize.hpp (bit for bit; the
// device code is shrink/cuda/kernels/quantize.cuh). Two phases, as CUB: ask workspace_bytes(shape, scheme), give that much
// device memory (16-byte aligned) to every call. Calls enqueue on `stream`, allocate nothing and return at once.
//
// Validation: shapes, scheme, pointers and workspace are checked on the host before any CUDA call (shrink::Error).
// Values on the device (the input's finiteness, scales finite and > 0, zero points in [qmin, qmax]) are checked by the
// kernels into a status word in the workspace, read only when the caller asks: pass Synchronize::yes, or call
// check_status(workspace, stream) later; either waits for the stream and throws shrink::Error when a check failed.
// After a failed check the output holds meaningless values (the CPU, which throws first, leaves it untouched).
//
// Inputs and outputs are contiguous row-major device memory on the current device; x's view must say so
// (Device::cuda(current ordinal)).
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cuda {

// Device pointers to the parameters, laid out as quant::qparams_shape(scheme, shape) (as QParams on the host).
struct DeviceQParams {
  const float* scale = nullptr;              // finite and > 0
  const std::int32_t* zero_point = nullptr;  // in [qmin, qmax] of the scheme
};

// Workspace for any of the calls below on a tensor of `shape` under `scheme`: a status word and one float per
// parameter (the inverse scales). Throws shrink::Error for a scheme that does not fit the shape, and for fractional
// zero points (scheme.float_zero_point: the device path reads integer ones only).
std::size_t workspace_bytes(const Shape& shape, const quant::QuantScheme& scheme);

// q = clamp(nearbyint(x * (1.0f / scale)) + zero_point, qmin, qmax) into `out`: quant::quantized_data_bytes(dtype,
// x.shape()) bytes: int8 two's complement, uint8, or packed int4/uint4 (core/int4.hpp).
void quantize(TensorView<const float> x, const quant::QuantScheme& scheme, DeviceQParams qparams, void* out,
              Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// out = (q - zero_point) * scale; `q` holds quantized_data_bytes(dtype, out.shape()) bytes as quantize writes them.
void dequantize(const void* q, const quant::QuantScheme& scheme, DeviceQParams qparams, TensorView<float> out,
                Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// out = (clamp(q) - zero_point) * scale and, when `mask` is not null, mask[i] = 1 where qmin <= q <= qmax (the
// straight-through gradient passes) else 0, one byte per element of x (the CPU fake_quantize's mask). `out` holds
// x.numel() floats and may be x itself.
void fake_quantize(TensorView<const float> x, const quant::QuantScheme& scheme, DeviceQParams qparams, float* out,
                   std::uint8_t* mask, Workspace workspace, Stream stream,
                   Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
