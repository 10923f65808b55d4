// CUDA realisation of the weight-only GEMM (W8A16, W4A16; nvcc only; host-compiled callers use
// shrink/linear/weight_only_cuda.hpp): the launch of a planned call, its main loop on CUDA cores or tensor cores and,
// with K in several slices, the second pass adding them.
//
// Grid: x over blocks of output rows (16 for the CUDA-core path, 64 for the tensor-core path), y over K slices,
// z over blocks of MB activation rows (CUDA-core path only; the tensor-core path keeps all M <= 64 rows in MT tiles).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/kernels/linear_weight_only_common.cuh"
#include "shrink/cuda/kernels/linear_weight_only_cuda_core.cuh"
#include "shrink/cuda/kernels/linear_weight_only_tensor_core.cuh"

namespace shrink::cuda::kernels::linear_weight_only {

// Activation rows per CUDA-core block: 1, 2 or 4 (more rows take several blocks along z).
inline int cuda_core_rows_per_block(int m) { return m == 1 ? 1 : m == 2 ? 2 : 4; }

template <class T, WeightKind Kind, int MB>
void launch_cuda_core_rows(const Problem<T>& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kCoreRowsPerBlock - 1) / kCoreRowsPerBlock),
                  static_cast<unsigned>(p.slices), static_cast<unsigned>((p.m + MB - 1) / MB));
  cuda_core_kernel<T, Kind, MB><<<grid, kThreads, 0, stream>>>(p);
  SHRINK_CUDA_CHECK_LAUNCH(cuda_core_kernel);
}

template <class T, WeightKind Kind>
void launch_cuda_core(const Problem<T>& p, cudaStream_t stream) {
  switch (cuda_core_rows_per_block(p.m)) {
    case 1: launch_cuda_core_rows<T, Kind, 1>(p, stream); break;
    case 2: launch_cuda_core_rows<T, Kind, 2>(p, stream); break;
    default: launch_cuda_core_rows<T, Kind, 4>(p, stream); break;
  }
}

template <class T, WeightKind Kind, int MT>
void launch_tensor_core_tiles(const Problem<T>& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((p.n + kMmaRowsPerBlock - 1) / kMmaRowsPerBlock),
                  static_cast<unsigned>(p.slices), 1u);
  tensor_core_kernel<T, Kind, MT><<<grid, kThreads, 0, stream>>>(p);
  SHRINK_CUDA_CHECK_LAUNCH(tensor_core_kernel);
}

template <class T, WeightKind Kind>
void launch_tensor_core(const Problem<T>& p, cudaStream_t stream) {
  switch ((p.m + 15) / 16) {  // m <= 64: checked on the host
    case 1: launch_tensor_core_tiles<T, Kind, 1>(p, stream); break;
    case 2: launch_tensor_core_tiles<T, Kind, 2>(p, stream); break;
    case 3: launch_tensor_core_tiles<T, Kind, 3>(p, stream); break;
    default: launch_tensor_core_tiles<T, Kind, 4>(p, stream); break;
  }
}

// The main loop on the chosen cores, then the slices' sum when there are several.
template <class T, WeightKind Kind>
void launch(const Problem<T>& p, bool tensor_cores, cudaStream_t stream) {
  if (tensor_cores)
    launch_tensor_core<T, Kind>(p, stream);
  else
    launch_cuda_core<T, Kind>(p, stream);
  if (p.slices > 1)
    launch_finish_splits<float, T>(p.partials, p.n, static_cast<std::int64_t>(p.m) * p.n, p.slices, p.m, p.n, p.op,
                                   p.out, p.n, p.status, stream);
}

}  // namespace shrink::cuda::kernels::linear_weight_only
