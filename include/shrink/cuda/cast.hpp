// Host API of the CUDA casts (compiled in cuda/cast.cu; plain C++, no CUDA headers): float to half / bfloat16 and
// back, and scaled FP8 (E4M3, E5M2) quantize / dequantize with per-tensor or per-channel scales.
//
// Same element rules and results as quant/cast.hpp, bit for bit (device code: shrink/cuda/kernels/cast.cuh, which runs
// core/half.hpp's and core/fp8.hpp's own SHRINK_HOST_DEVICE encoders):
//   half / bfloat16: round to nearest even; inf -> inf, NaN -> quiet NaN keeping its payload's top bits, finite
//                    overflow -> inf (IEEE; not an error, so these calls need no workspace). Back to float: exact.
//   FP8:  codes_i = fp8(x_i / scale)  (an IEEE division, as the CPU), saturating to +-max finite by default;
//         out_i   = value(codes_i) * scale.
// The scales are given (device memory): derive them on the host from an amax (quant::cast_detail::derived_scale), or
// on the device with minmax_per_tensor / minmax_per_channel (shrink/cuda/calibration.hpp) and a small kernel.
//
// FP8 calls check on the device, into the workspace's status word (launch.hpp): kNonFinite for NaN/inf in x unless
// options.allow_nonfinite (the CPU throws), kBadScale for a scale that is not finite and > 0 (the CPU throws).
// Synchronize::yes or check_status(workspace, stream) turns a failed check into shrink::Error.
//
// Inputs and outputs are contiguous row-major device memory on the current device; calls enqueue on `stream`,
// allocate nothing and return at once.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

// out[i] = half(x[i]) / bfloat16(x[i]): x.numel() elements.
void cast_to_half(TensorView<const float> x, half* out, Stream stream);
void cast_to_bfloat16(TensorView<const float> x, bfloat16* out, Stream stream);
// out[i] = float(x[i]) (exact): out.numel() elements of x.
void cast_to_float(const half* x, TensorView<float> out, Stream stream);
void cast_to_float(const bfloat16* x, TensorView<float> out, Stream stream);

// Device scales of an FP8 tensor: one (per tensor) or shape[axis] (per channel, axis in [-rank, rank)).
struct Fp8Scales {
  const float* data = nullptr;  // finite and > 0
  bool per_channel = false;
  int axis = 0;  // ignored per tensor
};

struct Fp8CastOptions {
  bool saturate = true;          // as quant::Fp8QuantizeOptions::saturate
  bool allow_nonfinite = false;  // as quant::Fp8QuantizeOptions::allow_nonfinite
};

// The status word only.
std::size_t fp8_workspace_bytes();

// codes[i] = fp8(x[i] / scale of i), x.numel() bytes.
void quantize_fp8(TensorView<const float> x, Fp8Format format, Fp8Scales scales, std::uint8_t* codes,
                  Workspace workspace, Stream stream, Fp8CastOptions options = {},
                  Synchronize synchronize = Synchronize::no);

// out[i] = value(codes[i]) * scale of i, out.numel() codes.
void dequantize_fp8(const std::uint8_t* codes, Fp8Format format, Fp8Scales scales, TensorView<float> out,
                    Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
