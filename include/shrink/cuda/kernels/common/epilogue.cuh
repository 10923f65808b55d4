// The epilogue operation on the device (nvcc only): core/epilogue.hpp's EpilogueOp with the checks a kernel makes of
// the values the host could not read (a scale not finite and > 0: kBadScale; a bias not finite: kNonFinite), gathered
// per thread in EpilogueFlags and or-ed into the status word once, and finish_splits_kernel, the second pass of a
// product whose K was split (and the epilogue alone over accumulators in memory).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/epilogue.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {

// What a thread met on its way, reported once.
struct EpilogueFlags {
  bool bad_scale = false;
  bool bad_bias = false;

  __device__ __forceinline__ void report(int* status) const {
    if (bad_scale) atomicOr(status, kBadScale);
    if (bad_bias) atomicOr(status, kNonFinite);
  }
};

__device__ __forceinline__ bool valid_scale(float s) { return s > 0.0f && isfinite(s); }

// sx of row m (1 without x scales), flagged when it is not finite and > 0.
__device__ __forceinline__ float checked_x_scale(const EpilogueOp& op, std::int64_t m, EpilogueFlags& flags) {
  const float sx = op.x_scale(m);
  if (op.x_scales != nullptr) flags.bad_scale |= !valid_scale(sx);
  return sx;
}

// op.value(acc, sx, n), with sw[n] and bias[n] checked as they are read.
__device__ __forceinline__ float checked_value(const EpilogueOp& op, float acc, float sx, std::int64_t n,
                                               EpilogueFlags& flags) {
  const float sw = op.w_scale(n), b = op.bias_at(n);
  if (op.w_scales != nullptr) flags.bad_scale |= !valid_scale(sw);
  if (op.bias != nullptr) flags.bad_bias |= !isfinite(b);
  return op.value(acc, sx, sw, b);
}

// op.output<Out>(op.value(acc, sx[m], n)): one output of row m, its scale, weight scale and bias checked as they are
// read.
template <class Out>
__device__ __forceinline__ Out checked_output(const EpilogueOp& op, float acc, std::int64_t m, std::int64_t n,
                                              EpilogueFlags& flags) {
  return op.output<Out>(checked_value(op, acc, checked_x_scale(op, m, flags), n, flags));
}

// out[m, n] = op.output<Out>(op.value(Σ_s acc[s · split_stride + m · ld_acc + n], sx[m], n)) for s < splits, the sum
// in split order from Acc(0): exact for int32 sums (every partial sum of the true total fits), the same bits on every
// run for float ones. Columns across x (blockDim.x threads each), rows across y with a stride loop (grid y ≤ 65535).
template <class Acc, class Out>
__global__ void finish_splits_kernel(const Acc* __restrict__ acc, std::int64_t ld_acc, std::int64_t split_stride,
                                     int splits, int m, int n, EpilogueOp op, Out* __restrict__ out,
                                     std::int64_t ld_out, int* status) {
  const int col = static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
  if (col >= n) return;
  EpilogueFlags flags;
  for (int row = static_cast<int>(blockIdx.y); row < m; row += static_cast<int>(gridDim.y)) {
    const Acc* a = acc + static_cast<std::int64_t>(row) * ld_acc + col;
    Acc sum = Acc(0);
    for (int s = 0; s < splits; ++s) sum += a[s * split_stride];
    out[static_cast<std::int64_t>(row) * ld_out + col] =
        checked_output<Out>(op, static_cast<float>(sum), row, col, flags);
  }
  flags.report(status);
}

// Launches finish_splits_kernel on `stream` (m, n ≥ 1).
template <class Acc, class Out>
void launch_finish_splits(const Acc* acc, std::int64_t ld_acc, std::int64_t split_stride, int splits, int m, int n,
                          const EpilogueOp& op, Out* out, std::int64_t ld_out, int* status, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const dim3 grid(static_cast<unsigned>((n + kThreads - 1) / kThreads), static_cast<unsigned>(m < 65535 ? m : 65535));
  finish_splits_kernel<Acc, Out>
      <<<grid, kThreads, 0, stream>>>(acc, ld_acc, split_stride, splits, m, n, op, out, ld_out, status);
  SHRINK_CUDA_CHECK_LAUNCH(finish_splits_kernel);
}

}  // namespace shrink::cuda::kernels
