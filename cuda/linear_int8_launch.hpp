// Private to cuda/: the launcher of the sm_90a wgmma kernel, defined in linear_int8.sm90a.cu (compiled for sm_90a
// alone, when the build targets sm_90) and called by linear_int8.cu's dispatch when SHRINK_CUDA_HAS_SM90A is set.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/linear_int8_mma.cuh"  // GemmParams

namespace shrink::cuda::kernels::linear_int8 {

// Lets `kernel` use `bytes` of dynamic shared memory on `device`, once per kernel and device (`done` holds a bit per
// device below 64): a driver call on every launch would add to the latency of every small GEMM.
template <class Kernel>
void allow_shared_memory(Kernel kernel, int bytes, int device, std::atomic<std::uint64_t>& done) {
  const std::uint64_t bit = device >= 0 && device < 64 ? std::uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  SHRINK_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  done.fetch_or(bit, std::memory_order_release);
}

// Launches gemm_int8_wgmma_kernel over params.tiles_m · params.tiles_n CTAs × `splits` K splits on `stream` (the
// current device, `device`).
void launch_wgmma(const GemmParams& params, int splits, int device, cudaStream_t stream);

}  // namespace shrink::cuda::kernels::linear_int8
