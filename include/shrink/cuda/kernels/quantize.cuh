// CUDA realisation of quant/quantize.hpp and quant/fake_quantize.hpp: device kernels and stream launchers
// (nvcc only; host-compiled callers use shrink/cuda/quantize.hpp). Per element, core/affine.hpp's formulas, the ones
// the CPU computes: inv = 1.0f / scale once per parameter (__fdiv_rn, into the workspace), then quantize_value,
// dequantize_value and fake_quantize_value (mask one byte 0/1 per element), bit for bit the CPU's.
//
// Non-finite input: the CPU throws before writing; a kernel cannot, so it or-s kNonFinite into a status word in the
// caller's workspace (and the parameter check or-s kBadScale / kBadZeroPoint). The host API reads that word only
// when the caller asks for synchronisation; until then the output of a flagged launch is meaningless.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/affine.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {

enum class ParamMode : int { per_tensor, per_channel, per_group };

// Which parameter element e of a contiguous tensor seen as [outer, channels, inner] uses (core/axis.hpp):
// per tensor 0; per channel c; per group (o * channels / group + c / group) * inner + i (qparams_shape's layout).
struct ParamIndexer {
  std::int64_t channels = 1;
  std::int64_t inner = 1;
  std::int64_t group = 1;

  template <ParamMode M>
  __device__ __forceinline__ std::int64_t at(std::int64_t e) const {
    if constexpr (M == ParamMode::per_tensor) {
      return 0;
    } else if constexpr (M == ParamMode::per_channel) {
      return (e / inner) % channels;
    } else {
      const std::int64_t i = e % inner;
      const std::int64_t row = e / inner;
      const std::int64_t c = row % channels;
      const std::int64_t o = row / channels;
      return (o * (channels / group) + c / group) * inner + i;
    }
  }
};

// Device pointers to the parameters (inv_scale lives in the workspace) and the integer range.
struct DeviceAffine {
  const float* scale = nullptr;
  const float* inv_scale = nullptr;
  const std::int32_t* zero_point = nullptr;
  std::int32_t qmin = 0;
  std::int32_t qmax = 0;
  ParamIndexer index;
};

// One element's parameters (core/affine.hpp), the clamp bounds shifted by the zero point.
__device__ __forceinline__ AffineParams load_affine(const DeviceAffine& p, std::int64_t param) {
  return AffineParams(__ldg(p.scale + param), p.inv_scale ? __ldg(p.inv_scale + param) : 0.0f,
                      __ldg(p.zero_point + param), p.qmin, p.qmax);
}

template <ParamMode M>
__device__ __forceinline__ AffineParams element_affine(const DeviceAffine& p, const AffineParams& uniform,
                                                       std::int64_t e) {
  if constexpr (M == ParamMode::per_tensor) return uniform;
  else return load_affine(p, p.index.at<M>(e));
}

__device__ __forceinline__ void note_nonfinite(float x, int* status) {
  if (!isfinite(x)) atomicOr(status, kNonFinite);
}

// Grid-stride helpers.
__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// inv_scale[p] = 1.0f / scale[p]; flags scales that are not finite and > 0 and zero points outside [qmin, qmax].
// A template so that the header may be included by several translation units.
template <class ZeroPoint>
__global__ void prepare_affine_kernel(const float* scale, const ZeroPoint* zero_point, std::int64_t count,
                                      std::int32_t qmin, std::int32_t qmax, float* inv_scale, int* status) {
  for (std::int64_t p = global_thread(); p < count; p += grid_threads()) {
    const float s = scale[p];
    const ZeroPoint zp = zero_point[p];
    if (!(s > 0.0f) || !isfinite(s)) atomicOr(status, kBadScale);
    if (zp < qmin || zp > qmax) atomicOr(status, kBadZeroPoint);
    inv_scale[p] = __fdiv_rn(1.0f, s);
  }
}

// 8-bit quantize of n contiguous floats. Vec: x 16-byte and out 4-byte aligned, four elements per step.
template <class Q, ParamMode M, bool Vec>
__global__ void quantize_bytes_kernel(const float* __restrict__ x, Q* __restrict__ out, std::int64_t n,
                                      DeviceAffine p, int* status) {
  const AffineParams uniform = M == ParamMode::per_tensor ? load_affine(p, 0) : AffineParams{};
  std::int64_t begin = 0;
  if constexpr (Vec) {
    const std::int64_t n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    std::uint32_t* out4 = reinterpret_cast<std::uint32_t*>(out);
    for (std::int64_t k = global_thread(); k < n4; k += grid_threads()) {
      const float4 v = x4[k];
      const float lanes[4] = {v.x, v.y, v.z, v.w};
      std::uint32_t word = 0;
      for (int l = 0; l < 4; ++l) {
        note_nonfinite(lanes[l], status);
        const std::int32_t q = quantize_value(lanes[l], element_affine<M>(p, uniform, 4 * k + l));
        word |= (static_cast<std::uint32_t>(q) & 0xFFu) << (8 * l);  // little-endian: element 4k+l in byte l
      }
      out4[k] = word;
    }
    begin = 4 * n4;
  }
  for (std::int64_t e = begin + global_thread(); e < n; e += grid_threads()) {
    note_nonfinite(x[e], status);
    out[e] = static_cast<Q>(quantize_value(x[e], element_affine<M>(p, uniform, e)));
  }
}

// 4-bit quantize: one packed byte per step (core/int4.hpp layout), rows of `row_length` elements.
template <ParamMode M>
__global__ void quantize_int4_kernel(const float* __restrict__ x, std::uint8_t* __restrict__ out, std::int64_t rows,
                                     std::int64_t row_length, DeviceAffine p, int* status) {
  const AffineParams uniform = M == ParamMode::per_tensor ? load_affine(p, 0) : AffineParams{};
  const std::int64_t row_bytes = int4_row_bytes(row_length);
  const std::int64_t total = rows * row_bytes;
  for (std::int64_t b = global_thread(); b < total; b += grid_threads()) {
    const std::int64_t row = b / row_bytes, j = b % row_bytes;
    const std::int64_t e = row * row_length + 2 * j;
    note_nonfinite(x[e], status);
    const int low = quantize_value(x[e], element_affine<M>(p, uniform, e));
    int high = 0;  // an odd row leaves its last high nibble 0
    if (2 * j + 1 < row_length) {
      note_nonfinite(x[e + 1], status);
      high = quantize_value(x[e + 1], element_affine<M>(p, uniform, e + 1));
    }
    out[b] = pack_nibbles(low, high);
  }
}

// 8-bit dequantize. Vec: q 4-byte and out 16-byte aligned.
template <class Q, ParamMode M, bool Vec>
__global__ void dequantize_bytes_kernel(const Q* __restrict__ q, float* __restrict__ out, std::int64_t n,
                                        DeviceAffine p) {
  const AffineParams uniform = M == ParamMode::per_tensor ? load_affine(p, 0) : AffineParams{};
  std::int64_t begin = 0;
  if constexpr (Vec) {
    const std::int64_t n4 = n / 4;
    const std::uint32_t* q4 = reinterpret_cast<const std::uint32_t*>(q);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (std::int64_t k = global_thread(); k < n4; k += grid_threads()) {
      const std::uint32_t word = q4[k];
      float lanes[4];
      for (int l = 0; l < 4; ++l) {
        const Q value = static_cast<Q>((word >> (8 * l)) & 0xFFu);
        lanes[l] = dequantize_value(value, element_affine<M>(p, uniform, 4 * k + l));
      }
      out4[k] = make_float4(lanes[0], lanes[1], lanes[2], lanes[3]);
    }
    begin = 4 * n4;
  }
  for (std::int64_t e = begin + global_thread(); e < n; e += grid_threads())
    out[e] = dequantize_value(q[e], element_affine<M>(p, uniform, e));
}

// 4-bit dequantize: one packed byte (two elements) per step.
template <bool Signed, ParamMode M>
__global__ void dequantize_int4_kernel(const std::uint8_t* __restrict__ q, float* __restrict__ out, std::int64_t rows,
                                       std::int64_t row_length, DeviceAffine p) {
  const AffineParams uniform = M == ParamMode::per_tensor ? load_affine(p, 0) : AffineParams{};
  const std::int64_t row_bytes = int4_row_bytes(row_length);
  const std::int64_t total = rows * row_bytes;
  for (std::int64_t b = global_thread(); b < total; b += grid_threads()) {
    const std::uint8_t byte = q[b];
    const std::int64_t row = b / row_bytes, j = b % row_bytes;
    const std::int64_t e = row * row_length + 2 * j;
    const int low = Signed ? low_nibble_signed(byte) : low_nibble_unsigned(byte);
    out[e] = dequantize_value(low, element_affine<M>(p, uniform, e));
    if (2 * j + 1 < row_length) {
      const int high = Signed ? high_nibble_signed(byte) : high_nibble_unsigned(byte);
      out[e + 1] = dequantize_value(high, element_affine<M>(p, uniform, e + 1));
    }
  }
}

// Fake quantize (+ optional byte mask). Vec: x and out 16-byte aligned, mask (when given) 4-byte aligned.
template <ParamMode M, bool Vec>
__global__ void fake_quantize_kernel(const float* x, float* out, std::uint8_t* __restrict__ mask, std::int64_t n,
                                     DeviceAffine p, int* status) {
  const AffineParams uniform = M == ParamMode::per_tensor ? load_affine(p, 0) : AffineParams{};
  std::int64_t begin = 0;
  if constexpr (Vec) {
    const std::int64_t n4 = n / 4;
    for (std::int64_t k = global_thread(); k < n4; k += grid_threads()) {
      const float4 v = reinterpret_cast<const float4*>(x)[k];
      const float in[4] = {v.x, v.y, v.z, v.w};
      float y[4];
      std::uint32_t word = 0;
      for (int l = 0; l < 4; ++l) {
        note_nonfinite(in[l], status);
        std::uint8_t m = 0;
        y[l] = fake_quantize_value(in[l], element_affine<M>(p, uniform, 4 * k + l), &m);
        word |= static_cast<std::uint32_t>(m) << (8 * l);
      }
      reinterpret_cast<float4*>(out)[k] = make_float4(y[0], y[1], y[2], y[3]);
      if (mask) reinterpret_cast<std::uint32_t*>(mask)[k] = word;
    }
    begin = 4 * n4;
  }
  for (std::int64_t e = begin + global_thread(); e < n; e += grid_threads()) {
    const float v = x[e];
    note_nonfinite(v, status);
    std::uint8_t m = 0;
    out[e] = fake_quantize_value(v, element_affine<M>(p, uniform, e), &m);
    if (mask) mask[e] = m;
  }
}



// Launchers: arguments already validated; `status` points at the zeroed status word, p.inv_scale is filled.
// Each enqueues on `stream` and neither allocates nor synchronises.
namespace quantize {

constexpr int kThreads = 256;

template <class Q>
void quantize_bytes(const float* x, Q* out, std::int64_t n, ParamMode mode, const DeviceAffine& p, int* status,
                    cudaStream_t stream) {
  const bool vec = aligned_to(x, 16) && aligned_to(out, 4);
  const unsigned blocks = grid_blocks(vec ? (n + 3) / 4 : n, kThreads);
#define SHRINK_LAUNCH(M, V) quantize_bytes_kernel<Q, M, V><<<blocks, kThreads, 0, stream>>>(x, out, n, p, status)
  switch (mode) {
    case ParamMode::per_tensor: if (vec) SHRINK_LAUNCH(ParamMode::per_tensor, true); else SHRINK_LAUNCH(ParamMode::per_tensor, false); break;
    case ParamMode::per_channel: if (vec) SHRINK_LAUNCH(ParamMode::per_channel, true); else SHRINK_LAUNCH(ParamMode::per_channel, false); break;
    case ParamMode::per_group: if (vec) SHRINK_LAUNCH(ParamMode::per_group, true); else SHRINK_LAUNCH(ParamMode::per_group, false); break;
  }
#undef SHRINK_LAUNCH
  SHRINK_CUDA_CHECK_LAUNCH(quantize_bytes_kernel);
}

inline void quantize_int4(const float* x, std::uint8_t* out, std::int64_t rows, std::int64_t row_length,
                          ParamMode mode, const DeviceAffine& p, int* status, cudaStream_t stream) {
  const unsigned blocks = grid_blocks(rows * int4_row_bytes(row_length), kThreads);
  switch (mode) {
    case ParamMode::per_tensor:
      quantize_int4_kernel<ParamMode::per_tensor><<<blocks, kThreads, 0, stream>>>(x, out, rows, row_length, p, status);
      break;
    case ParamMode::per_channel:
      quantize_int4_kernel<ParamMode::per_channel><<<blocks, kThreads, 0, stream>>>(x, out, rows, row_length, p, status);
      break;
    case ParamMode::per_group:
      quantize_int4_kernel<ParamMode::per_group><<<blocks, kThreads, 0, stream>>>(x, out, rows, row_length, p, status);
      break;
  }
  SHRINK_CUDA_CHECK_LAUNCH(quantize_int4_kernel);
}

template <class Q>
void dequantize_bytes(const Q* q, float* out, std::int64_t n, ParamMode mode, const DeviceAffine& p,
                      cudaStream_t stream) {
  const bool vec = aligned_to(q, 4) && aligned_to(out, 16);
  const unsigned blocks = grid_blocks(vec ? (n + 3) / 4 : n, kThreads);
#define SHRINK_LAUNCH(M, V) dequantize_bytes_kernel<Q, M, V><<<blocks, kThreads, 0, stream>>>(q, out, n, p)
  switch (mode) {
    case ParamMode::per_tensor: if (vec) SHRINK_LAUNCH(ParamMode::per_tensor, true); else SHRINK_LAUNCH(ParamMode::per_tensor, false); break;
    case ParamMode::per_channel: if (vec) SHRINK_LAUNCH(ParamMode::per_channel, true); else SHRINK_LAUNCH(ParamMode::per_channel, false); break;
    case ParamMode::per_group: if (vec) SHRINK_LAUNCH(ParamMode::per_group, true); else SHRINK_LAUNCH(ParamMode::per_group, false); break;
  }
#undef SHRINK_LAUNCH
  SHRINK_CUDA_CHECK_LAUNCH(dequantize_bytes_kernel);
}

template <bool Signed>
void dequantize_int4(const std::uint8_t* q, float* out, std::int64_t rows, std::int64_t row_length, ParamMode mode,
                     const DeviceAffine& p, cudaStream_t stream) {
  const unsigned blocks = grid_blocks(rows * int4_row_bytes(row_length), kThreads);
  switch (mode) {
    case ParamMode::per_tensor:
      dequantize_int4_kernel<Signed, ParamMode::per_tensor><<<blocks, kThreads, 0, stream>>>(q, out, rows, row_length, p);
      break;
    case ParamMode::per_channel:
      dequantize_int4_kernel<Signed, ParamMode::per_channel><<<blocks, kThreads, 0, stream>>>(q, out, rows, row_length, p);
      break;
    case ParamMode::per_group:
      dequantize_int4_kernel<Signed, ParamMode::per_group><<<blocks, kThreads, 0, stream>>>(q, out, rows, row_length, p);
      break;
  }
  SHRINK_CUDA_CHECK_LAUNCH(dequantize_int4_kernel);
}

inline void fake_quantize(const float* x, float* out, std::uint8_t* mask, std::int64_t n, ParamMode mode,
                          const DeviceAffine& p, int* status, cudaStream_t stream) {
  const bool vec = aligned_to(x, 16) && aligned_to(out, 16) && aligned_to(mask, 4);
  const unsigned blocks = grid_blocks(vec ? (n + 3) / 4 : n, kThreads);
#define SHRINK_LAUNCH(M, V) fake_quantize_kernel<M, V><<<blocks, kThreads, 0, stream>>>(x, out, mask, n, p, status)
  switch (mode) {
    case ParamMode::per_tensor: if (vec) SHRINK_LAUNCH(ParamMode::per_tensor, true); else SHRINK_LAUNCH(ParamMode::per_tensor, false); break;
    case ParamMode::per_channel: if (vec) SHRINK_LAUNCH(ParamMode::per_channel, true); else SHRINK_LAUNCH(ParamMode::per_channel, false); break;
    case ParamMode::per_group: if (vec) SHRINK_LAUNCH(ParamMode::per_group, true); else SHRINK_LAUNCH(ParamMode::per_group, false); break;
  }
#undef SHRINK_LAUNCH
  SHRINK_CUDA_CHECK_LAUNCH(fake_quantize_kernel);
}

inline void prepare_affine(const float* scale, const std::int32_t* zero_point, std::int64_t count, std::int32_t qmin,
                           std::int32_t qmax, float* inv_scale, int* status, cudaStream_t stream) {
  prepare_affine_kernel<std::int32_t><<<grid_blocks(count, kThreads), kThreads, 0, stream>>>(scale, zero_point, count, qmin, qmax,
                                                                                inv_scale, status);
  SHRINK_CUDA_CHECK_LAUNCH(prepare_affine_kernel);
}

}  // namespace quantize
}  // namespace shrink::cuda::kernels
