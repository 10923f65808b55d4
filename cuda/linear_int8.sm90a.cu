// The sm_90a part of the W8A8 GEMM: the wgmma kernel's launcher (shrink/cuda/kernels/linear_int8_wgmma.cuh). This file
// alone is compiled with -gencode arch=compute_90a,code=sm_90a (cuda/CMakeLists.txt); linear_int8.cu calls it only on a
// device of compute capability 9.0.
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>

#include "linear_int8_launch.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/linear_int8_wgmma.cuh"

namespace shrink::cuda::kernels::linear_int8 {

static_assert(WgmmaConfig::kBM == 128 && WgmmaConfig::kBN == 128 && WgmmaConfig::kBK == 128,
              "linear_int8.cu plans wgmma launches (tiles, K splits, workspace) for 128 x 128 x 128 tiles");

void launch_wgmma(const GemmParams& params, int splits, int device, cudaStream_t stream) {
  const auto kernel = gemm_int8_wgmma_kernel<WgmmaConfig>;
  static std::atomic<std::uint64_t> configured{0};
  allow_shared_memory(kernel, WgmmaConfig::kSharedBytes, device, configured);
  const dim3 grid(static_cast<unsigned>(params.tiles_m) * static_cast<unsigned>(params.tiles_n), 1,
                  static_cast<unsigned>(splits));
  kernel<<<grid, WgmmaConfig::kThreads, WgmmaConfig::kSharedBytes, stream>>>(params);
  SHRINK_CUDA_CHECK_LAUNCH(gemm_int8_wgmma_kernel);
}

}  // namespace shrink::cuda::kernels::linear_int8
