// The fused dynamic per-token quantizer of the W8A8 layer on the device (nvcc only), bit for bit
// cpu::quantize_rows_absmax (linear/int8.hpp) of the values as floats:
//
//   s[m] = max(max_k |x[m, k]| / 127.5f, FLT_EPSILON)               (__fdiv_rn)
//   q[m, k] = clamp(nearbyint(x[m, k] · (1.0f / s[m])), −128, 127)    (__fdiv_rn, __fmul_rn, __float2int_rn)
//
// One block per row: a first pass reads the row once from global memory (16 bytes per load when aligned), keeping it
// in shared memory when it fits in kStagedBytes, and reduces |x| to the row's maximum; a second pass quantizes from
// shared memory (or, for longer rows, re-reads the row, which is then in L2) and writes q. NaN or inf in a row sets
// kNonFinite (|NaN| never wins the maximum; that row's outputs are meaningless).
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shrink/core/affine.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/convert.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels::quantize_rows {

inline constexpr int kThreads = 256;
// A row up to this size stays in shared memory between the passes (with the block's 32 static bytes, under the
// 48 KiB a launch gets without opting in; 11008 floats fit).
inline constexpr int kStagedBytes = 44 * 1024;

// Elements per 16-byte vector.
template <class T>
inline constexpr int kVector = 16 / static_cast<int>(sizeof(T));

// The maximum of v over the block (every thread gets it). Safe to call once per launch: `partial` is not reused.
__device__ __forceinline__ float block_max(float v, float* partial) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, offset));
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  float all = 0.0f;  // |x| ≥ 0, so 0 is the identity
  for (int i = 0; i < kThreads / 32; ++i) all = fmaxf(all, partial[i]);
  return all;
}

// Vec: x rows, q rows and cols allow whole 16-byte loads of x and kVector<T>-byte stores of q. Staged: the row lives
// in dynamic shared memory (cols · sizeof(T) bytes) between the passes.
template <class T, bool Vec, bool Staged>
__global__ void __launch_bounds__(kThreads) quantize_rows_absmax_kernel(const T* __restrict__ x, std::int64_t ldx,
                                                                        std::int64_t cols, std::int8_t* __restrict__ q,
                                                                        std::int64_t ldq, float* __restrict__ scales,
                                                                        int* status) {
  extern __shared__ __align__(16) std::uint8_t staged_bytes[];
  __shared__ float partial[kThreads / 32];
  T* staged = reinterpret_cast<T*>(staged_bytes);
  const std::int64_t row = blockIdx.x;
  const T* in = x + row * ldx;
  std::int8_t* out = q + row * ldq;
  constexpr int V = Vec ? kVector<T> : 1;
  using Chunk = std::conditional_t<Vec, uint4, T>;  // one load of V elements

  float largest = 0.0f;
  bool finite = true;
  for (std::int64_t i = static_cast<std::int64_t>(threadIdx.x) * V; i < cols; i += static_cast<std::int64_t>(kThreads) * V) {
    const Chunk chunk = *reinterpret_cast<const Chunk*>(in + i);
    if constexpr (Staged) *reinterpret_cast<Chunk*>(staged + i) = chunk;
    T values[V];
    std::memcpy(values, &chunk, sizeof chunk);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float v = to_float(values[j]);
      finite = finite && isfinite(v);
      largest = fmaxf(largest, fabsf(v));
    }
  }
  if (!finite) atomicOr(status, kNonFinite);
  const float amax = block_max(largest, partial);
  const float scale = fmaxf(__fdiv_rn(amax, 127.5f), FLT_EPSILON);
  const AffineParams params(scale, __fdiv_rn(1.0f, scale), 0, -128, 127);  // symmetric int8 (core/affine.hpp)
  if (threadIdx.x == 0) scales[row] = scale;

  // Each thread reads back only the elements it staged itself: no barrier needed for the shared row.
  for (std::int64_t i = static_cast<std::int64_t>(threadIdx.x) * V; i < cols; i += static_cast<std::int64_t>(kThreads) * V) {
    const Chunk chunk = Staged ? *reinterpret_cast<const Chunk*>(staged + i) : *reinterpret_cast<const Chunk*>(in + i);
    T values[V];
    std::memcpy(values, &chunk, sizeof chunk);
    if constexpr (Vec) {
      std::uint32_t words[(V + 3) / 4] = {};  // little-endian: element i + j in byte j
#pragma unroll
      for (int j = 0; j < V; ++j)
        words[j / 4] |=
            static_cast<std::uint32_t>(static_cast<std::uint8_t>(quantize_value(to_float(values[j]), params)))
            << (8 * (j % 4));
      if constexpr (V == 4) *reinterpret_cast<std::uint32_t*>(out + i) = words[0];
      else *reinterpret_cast<uint2*>(out + i) = make_uint2(words[0], words[1]);
    } else {
      out[i] = static_cast<std::int8_t>(quantize_value(to_float(values[0]), params));
    }
  }
}

}  // namespace shrink::cuda::kernels::quantize_rows
