// Reading and writing one row of float, half or bfloat16 elements from a thread block (nvcc only): element
// conversions, 16-byte vector loads and stores, and the split of a row into an unaligned head, 16-byte chunks and a
// tail that the loss kernels walk with for_each_chunk.
//
// Conversions: half -> float and bfloat16 -> float are exact; float -> half / bfloat16 round to nearest even with
// IEEE overflow to inf (the hardware cvt.rn instructions), as core/half.hpp's encoders do for every non-NaN value.
// Loads either keep the line in cache (a first read whose row is read again) or stream it (the last read); stores
// stream (evict first), so that gradients leave the L2 to the logits a second pass reads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/convert.cuh"

namespace shrink::cuda::kernels {

// Elements of one 16-byte chunk.
template <class T>
inline constexpr int kVector = 16 / static_cast<int>(sizeof(T));

// The width of a visited chunk: 1 (head and tail) or kVector<T>.
template <int W>
struct Width {
  static constexpr int value = W;
};

enum class Cache { keep, stream };

template <class T>
__device__ __forceinline__ std::uint16_t float_to_bits(float x) {
  if constexpr (std::is_same_v<T, half>) return __half_as_ushort(__float2half_rn(x));
  else return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

// One element as float.
template <class T, Cache C = Cache::keep>
__device__ __forceinline__ float load1(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return C == Cache::keep ? __ldg(p) : __ldcs(p);
  } else {
    const auto* bits = reinterpret_cast<const unsigned short*>(p);
    return bits_to_float<T>(C == Cache::keep ? __ldg(bits) : __ldcs(bits));
  }
}

template <class T>
__device__ __forceinline__ void store1(T* p, float x) {
  if constexpr (std::is_same_v<T, float>) __stcs(p, x);
  else __stcs(reinterpret_cast<unsigned short*>(p), static_cast<unsigned short>(float_to_bits<T>(x)));
}

__device__ __forceinline__ std::uint32_t low_bits(std::uint32_t word) { return word & 0xFFFFu; }

// W consecutive elements from p into x: one element, or one 16-byte load (p 16-byte aligned).
template <class T, int W, Cache C = Cache::keep>
__device__ __forceinline__ void load(const T* p, float (&x)[W]) {
  if constexpr (W == 1) {
    x[0] = load1<T, C>(p);
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(W == 4, "a 16-byte chunk holds 4 floats");
    const auto* v = reinterpret_cast<const float4*>(p);
    const float4 f = C == Cache::keep ? __ldg(v) : __ldcs(v);
    x[0] = f.x, x[1] = f.y, x[2] = f.z, x[3] = f.w;
  } else {
    static_assert(W == 8, "a 16-byte chunk holds 8 halves or bfloat16s");
    const auto* v = reinterpret_cast<const uint4*>(p);
    const uint4 u = C == Cache::keep ? __ldg(v) : __ldcs(v);
    const std::uint32_t words[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // little endian: the lower half of a word is the earlier element
      x[2 * i] = bits_to_float<T>(static_cast<std::uint16_t>(low_bits(words[i])));
      x[2 * i + 1] = bits_to_float<T>(static_cast<std::uint16_t>(words[i] >> 16));
    }
  }
}

// W consecutive elements x to p (rounded to T), one element or one 16-byte store.
template <class T, int W>
__device__ __forceinline__ void store(T* p, const float (&x)[W]) {
  if constexpr (W == 1) {
    store1<T>(p, x[0]);
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(W == 4, "a 16-byte chunk holds 4 floats");
    __stcs(reinterpret_cast<float4*>(p), make_float4(x[0], x[1], x[2], x[3]));
  } else {
    static_assert(W == 8, "a 16-byte chunk holds 8 halves or bfloat16s");
    std::uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      words[i] = static_cast<std::uint32_t>(float_to_bits<T>(x[2 * i])) |
                 (static_cast<std::uint32_t>(float_to_bits<T>(x[2 * i + 1])) << 16);
    __stcs(reinterpret_cast<uint4*>(p), make_uint4(words[0], words[1], words[2], words[3]));
  }
}

// A row of n elements as [0, head) one by one, `chunks` 16-byte chunks, then the tail one by one. Every pointer the
// walk touches must sit at the same offset from a 16-byte boundary; when they do not, head = n (all one by one).
struct RowSplit {
  std::int64_t n;
  std::int64_t head;
  std::int64_t chunks;
};

__device__ __forceinline__ unsigned phase16(const void* p) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p) & 15u);
}

// The split of row `a` of n elements; b, c, d: other rows walked with it (nullptr: none).
template <class T>
__device__ __forceinline__ RowSplit split_row(std::int64_t n, const T* a, const void* b = nullptr,
                                              const void* c = nullptr, const void* d = nullptr) {
  const unsigned phase = phase16(a);
  const bool together = (b == nullptr || phase16(b) == phase) && (c == nullptr || phase16(c) == phase) &&
                        (d == nullptr || phase16(d) == phase);
  if (!together) return RowSplit{n, n, 0};
  std::int64_t head = static_cast<std::int64_t>((16u - phase) & 15u) / static_cast<std::int64_t>(sizeof(T));
  if (head > n) head = n;
  return RowSplit{n, head, (n - head) / kVector<T>};
}

// Calls f(j, Width<W>{}) for chunks of W elements starting at j, covering [0, n) once over the block's threads:
// thread i takes head elements i, i + blockDim.x, ..., then chunks i, i + blockDim.x, ..., then tail elements.
template <class T, class F>
__device__ __forceinline__ void for_each_chunk(const RowSplit& s, F&& f) {
  constexpr int V = kVector<T>;
  for (std::int64_t j = threadIdx.x; j < s.head; j += blockDim.x) f(j, Width<1>{});
  for (std::int64_t c = threadIdx.x; c < s.chunks; c += blockDim.x) f(s.head + c * V, Width<V>{});
  for (std::int64_t j = s.head + s.chunks * V + threadIdx.x; j < s.n; j += blockDim.x) f(j, Width<1>{});
}

// Writes 0 over a row of n elements (an absent row's gradient).
template <class T>
__device__ __forceinline__ void zero_row(T* g, std::int64_t n) {
  for_each_chunk<T>(split_row(n, g), [&](std::int64_t j, auto width) {
    constexpr int W = decltype(width)::value;
    float zeros[W];
#pragma unroll
    for (int i = 0; i < W; ++i) zeros[i] = 0.0f;
    store<T, W>(g + j, zeros);
  });
}

}  // namespace shrink::cuda::kernels
