// CUDA realisation of quant/cast.hpp (nvcc only; host-compiled callers use shrink/cuda/cast.hpp).
//
// Every element goes through the CPU's own encoders (core/half.hpp, core/fp8.hpp are SHRINK_HOST_DEVICE and work on
// bits), and the FP8 scaling uses __fdiv_rn / __fmul_rn, so results equal the CPU's bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "shrink/core/fp8.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {
namespace cast {

__device__ __forceinline__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t index_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Element-wise conversions (To, From: float, half, bfloat16).
template <class From, class To>
__device__ __forceinline__ To convert(From v) {
  if constexpr (std::is_same_v<To, half>)
    return half::from_bits(shrink::float_to_half_bits(v));
  else if constexpr (std::is_same_v<To, bfloat16>)
    return bfloat16::from_bits(shrink::float_to_bfloat16_bits(v));
  else return v.to_float();
}

template <class From, class To>
__global__ void convert_kernel(const From* __restrict__ x, To* __restrict__ out, std::int64_t n) {
  for (std::int64_t e = first_index(); e < n; e += index_stride()) out[e] = convert<From, To>(x[e]);
}

// Which scale element e of a contiguous tensor seen as [outer, channels, inner] uses: 0 per tensor (channels 1).
struct ScaleIndex {
  std::int64_t channels = 1;
  std::int64_t inner = 1;
  __device__ __forceinline__ std::int64_t at(std::int64_t e) const { return channels == 1 ? 0 : (e / inner) % channels; }
};

// Flags scales that are not finite and > 0.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void check_scales_kernel(const float* scale, std::int64_t count, int* status) {
  for (std::int64_t c = first_index(); c < count; c += index_stride()) {
    const float s = scale[c];
    if (!(s > 0.0f) || !isfinite(s)) atomicOr(status, kBadScale);
  }
}

template <Fp8Format F>
__global__ void quantize_fp8_kernel(const float* __restrict__ x, const float* __restrict__ scale, ScaleIndex index,
                                    std::int64_t n, bool saturate, bool flag_nonfinite, std::uint8_t* __restrict__ codes,
                                    int* status) {
  bool nonfinite = false;
  for (std::int64_t e = first_index(); e < n; e += index_stride()) {
    const float v = x[e];
    nonfinite |= !isfinite(v);
    codes[e] = shrink::fp8_encode<F>(__fdiv_rn(v, __ldg(scale + index.at(e))), saturate);
  }
  if (nonfinite && flag_nonfinite) atomicOr(status, kNonFinite);
}

template <Fp8Format F>
__global__ void dequantize_fp8_kernel(const std::uint8_t* __restrict__ codes, const float* __restrict__ scale,
                                      ScaleIndex index, std::int64_t n, float* __restrict__ out) {
  for (std::int64_t e = first_index(); e < n; e += index_stride())
    out[e] = __fmul_rn(shrink::fp8_decode<F>(codes[e]), __ldg(scale + index.at(e)));
}

}  // namespace cast
}  // namespace shrink::cuda::kernels
