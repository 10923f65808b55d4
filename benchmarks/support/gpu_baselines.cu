// Kernels behind benchmarks/support/gpu_baselines.hpp: the copy and read-every-byte baselines and the device-side
// weight fills.
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "support/gpu_baselines.hpp"

namespace shrink::bench::gpu {
namespace {

constexpr int kThreads = 256;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Sums the 32-bit words of `vectors` 16-byte vectors (grid-stride, four loads in flight a thread), then the `tail`
// bytes after them (one thread), one atomicAdd a warp.
__global__ void read_all_kernel(const uint4* __restrict__ data, std::int64_t vectors,
                                const unsigned char* __restrict__ tail, int tail_bytes, unsigned long long* sink) {
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  unsigned int sum = 0;
#pragma unroll 4
  for (std::int64_t k = first; k < vectors; k += step) {
    const uint4 v = data[k];
    sum += v.x + v.y + v.z + v.w;
  }
  if (first == 0)
    for (int b = 0; b < tail_bytes; ++b) sum += tail[b];
  for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicAdd(sink, static_cast<unsigned long long>(sum));
}

// A 32-bit hash of (index, seed), mixing as in a counter-based generator (splitmix-style finaliser).
__device__ __forceinline__ std::uint32_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(x ^ (x >> 31));
}

template <class T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same<T, float>::value) return v;
  else return T(v);
}

template <class T>
__global__ void fill_kernel(T* __restrict__ out, std::int64_t n, std::uint32_t seed, float scale,
                            std::uint32_t zero_below) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::uint64_t key = (static_cast<std::uint64_t>(seed) << 40) ^ static_cast<std::uint64_t>(i);
    const std::uint32_t a = mix(key), b = mix(key ^ 0xA5A5A5A5A5ull);
    // Four 16-bit uniforms in [0, 1): their sum minus 2 has variance 1/3; times sqrt(3) about normal(0, 1).
    const float sum = static_cast<float>((a & 0xFFFFu) + (a >> 16) + (b & 0xFFFFu) + (b >> 16)) * (1.0f / 65536.0f);
    float v = (sum - 2.0f) * 1.7320508f * scale;
    if (v == 0.0f) v = 1e-3f * scale;
    if (mix(key ^ 0x5A5A5A5A5A5Aull) < zero_below) v = 0.0f;
    T t = from_float<T>(v);
    if (zero_below == 0 && static_cast<float>(t) == 0.0f) t = from_float<T>(1e-3f);  // underflow in 16 bits
    out[i] = t;
  }
}

unsigned blocks_to_fill_device() {
  int device = 0, multiprocessors = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device), "multiprocessors");
  return static_cast<unsigned>(multiprocessors) * (2048 / kThreads);  // every thread slot of every SM
}

}  // namespace

void copy_all(void* to, const void* from, std::size_t bytes, CUstream_st* stream) {
  check(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream), "copy");
}

void read_all(const void* data, std::size_t bytes, unsigned long long* sink, CUstream_st* stream) {
  const auto vectors = static_cast<std::int64_t>(bytes / 16);
  const auto* tail = static_cast<const unsigned char*>(data) + vectors * 16;
  read_all_kernel<<<blocks_to_fill_device(), kThreads, 0, stream>>>(static_cast<const uint4*>(data), vectors, tail,
                                                                    static_cast<int>(bytes % 16), sink);
  check(cudaGetLastError(), "read_all_kernel");
}

void fill_weights(void* data, std::int64_t n, WeightType type, std::uint32_t seed, float scale,
                  double zero_fraction) {
  const auto zero_below = static_cast<std::uint32_t>(zero_fraction * 4294967295.0);
  const unsigned blocks = blocks_to_fill_device();
  switch (type) {
    case WeightType::f32:
      fill_kernel<<<blocks, kThreads>>>(static_cast<float*>(data), n, seed, scale, zero_below);
      break;
    case WeightType::f16:
      fill_kernel<<<blocks, kThreads>>>(static_cast<half*>(data), n, seed, scale, zero_below);
      break;
    case WeightType::bf16:
      fill_kernel<<<blocks, kThreads>>>(static_cast<bfloat16*>(data), n, seed, scale, zero_below);
      break;
  }
  check(cudaGetLastError(), "fill_kernel");
  check(cudaDeviceSynchronize(), "fill_weights");
}

}  // namespace shrink::bench::gpu
