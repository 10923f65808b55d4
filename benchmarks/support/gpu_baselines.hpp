// The baselines every GPU benchmark measures in the same run as its kernels (a device-to-device copy, a read of every
// byte), and device-side fills of test weights (compiled once by nvcc in gpu_baselines.cu; this header is plain C++).
// Timing and device memory are in gpu_timing.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace shrink::bench::gpu {

// The copy baseline: cudaMemcpyAsync of `bytes` from `from` to `to`, both device memory (bandwidth: read + written).
void copy_all(void* to, const void* from, std::size_t bytes, CUstream_st* stream = nullptr);

// The read baseline: every byte of data[0, bytes) read once, 16 bytes a load (data 16-byte aligned), added up as
// 32-bit words into *sink (device memory) so that the loads cannot be dropped.
void read_all(const void* data, std::size_t bytes, unsigned long long* sink, CUstream_st* stream = nullptr);

enum class WeightType { f32, f16, bf16 };

// n weights of `type` on the device: deterministic pseudo-random values, about normal(0, scale) (a sum of four
// uniforms), never zero except for about `zero_fraction` of them, which are +0.0 (for sparse inputs).
void fill_weights(void* data, std::int64_t n, WeightType type, std::uint32_t seed, float scale,
                  double zero_fraction = 0.0);

}  // namespace shrink::bench::gpu
