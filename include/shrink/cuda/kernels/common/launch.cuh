// Launch helpers shared by the kernels of shrink::cuda (nvcc only): grid sizes for grid-stride loops, alignment.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {

// Blocks for a grid-stride loop over `work` items: enough to fill the current device (8 per SM), never more
// than the work needs.
inline unsigned grid_blocks(std::int64_t work, int threads) {
  int device = 0, multiprocessors = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const std::int64_t wanted = (work + threads - 1) / threads;
  const std::int64_t cap = static_cast<std::int64_t>(multiprocessors) * 8;
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
}

inline bool aligned_to(const void* pointer, std::uintptr_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

}  // namespace shrink::cuda::kernels
