// Element <-> float in device code (nvcc only), for every kernel: half and bfloat16 widen to float exactly, and float
// narrows to them rounding to nearest, ties to even, which is core/half.hpp's encoder for every non-NaN value.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "shrink/core/half.hpp"

namespace shrink::cuda::kernels {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(half v) { return __half2float(__ushort_as_half(v.to_bits())); }
__device__ __forceinline__ float to_float(bfloat16 v) {
  return __uint_as_float(static_cast<unsigned>(v.to_bits()) << 16);
}

// The 16 bits of a T (half or bfloat16) as a float.
template <class T>
__device__ __forceinline__ float bits_to_float(std::uint16_t bits) {
  static_assert(std::is_same_v<T, half> || std::is_same_v<T, bfloat16>, "bits_to_float<half or bfloat16>");
  if constexpr (std::is_same_v<T, half>)
    return __half2float(__ushort_as_half(bits));
  else
    return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
}

template <class T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, half>)
    return half::from_bits(__half_as_ushort(__float2half_rn(v)));
  else
    return bfloat16::from_bits(__bfloat16_as_ushort(__float2bfloat16_rn(v)));
}

}  // namespace shrink::cuda::kernels
