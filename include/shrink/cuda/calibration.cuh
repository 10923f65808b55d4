// CUDA realisation of the calibration statistics of quant/observers (nvcc only; host-compiled callers use
// shrink/cuda/calibration.hpp).
//
// Min/max: each block reduces a slice of one entry's elements (entry = tensor or channel of a contiguous tensor seen
// as [outer, channels, inner]) to a finite min and max, and folds them with atomicMin / atomicMax into order-
// preserving integer keys in the workspace (float bits, negatives with their magnitude bits flipped, so integer order
// is float order and -0 < +0); a last kernel turns the keys back into floats. Min and max are exact, so the result
// does not depend on the order of the reduction: it equals cpu::finite_range's.
//
// Histograms: each block counts into a privatised shared-memory histogram of 32-bit counters (atomicAdd), then adds
// its nonzero counters to the caller's int64 counts with 64-bit atomics. Bin rules are cpu::bin_index's, with _rn
// intrinsics so that nvcc neither contracts nor approximates (bit for bit the CPU's index). Histograms too large for
// shared memory count straight into the global array.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "shrink/cuda/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {
namespace calibration {

// Order-preserving integer key of a float (NaN never reaches it).
__device__ __forceinline__ int float_key(float f) {
  const int b = __float_as_int(f);
  return b >= 0 ? b : b ^ 0x7FFFFFFF;
}
__device__ __forceinline__ float key_float(int k) { return __int_as_float(k >= 0 ? k : k ^ 0x7FFFFFFF); }

// keys_min/keys_max of each entry from +inf / -inf, or (accumulate) from the caller's running values (NaN counts as
// nothing seen, as fmin/fmax ignore it).
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void init_keys_kernel(const float* min, const float* max, std::int64_t entries, bool accumulate,
                                 int* keys_min, int* keys_max) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float lo = __int_as_float(0x7F800000), hi = __int_as_float(static_cast<int>(0xFF800000u));
    if (accumulate) {
      if (!isnan(min[e])) lo = min[e];
      if (!isnan(max[e])) hi = max[e];
    }
    keys_min[e] = float_key(lo);
    keys_max[e] = float_key(hi);
  }
}

// Block reduction of (kmin, kmax) over blockDim.x threads (a multiple of 32, at most 1024); thread 0 folds it in.
__device__ __forceinline__ void fold_block(int kmin, int kmax, int* key_min, int* key_max) {
  __shared__ int smin[32], smax[32];
  for (int offset = 16; offset > 0; offset >>= 1) {
    kmin = min(kmin, __shfl_down_sync(0xFFFFFFFFu, kmin, offset));
    kmax = max(kmax, __shfl_down_sync(0xFFFFFFFFu, kmax, offset));
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) {
    smin[warp] = kmin;
    smax[warp] = kmax;
  }
  __syncthreads();
  if (warp == 0) {
    const int warps = blockDim.x / 32;
    kmin = lane < warps ? smin[lane] : 0x7FFFFFFF;
    kmax = lane < warps ? smax[lane] : static_cast<int>(0x80000000u);
    for (int offset = 16; offset > 0; offset >>= 1) {
      kmin = min(kmin, __shfl_down_sync(0xFFFFFFFFu, kmin, offset));
      kmax = max(kmax, __shfl_down_sync(0xFFFFFFFFu, kmax, offset));
    }
    if (lane == 0) {
      atomicMin(key_min, kmin);
      atomicMax(key_max, kmax);
    }
  }
  __syncthreads();  // smin/smax are reused by the next entry
}

// Finite range of each channel c of x seen as [outer, channels, inner] (per tensor: [1, 1, n]). Blocks
// (blockIdx.x, blockIdx.y) take elements blockIdx.x, +gridDim.x, ... (in blockDim.x units) of channels blockIdx.y,
// +gridDim.y, ...
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void minmax_kernel(const float* __restrict__ x, std::int64_t outer, std::int64_t channels,
                              std::int64_t inner, bool reject_nonfinite, int* keys_min, int* keys_max, int* status) {
  const std::int64_t per_channel = outer * inner;
  bool nonfinite = false;
  for (std::int64_t c = blockIdx.y; c < channels; c += gridDim.y) {
    float lo = __int_as_float(0x7F800000), hi = __int_as_float(static_cast<int>(0xFF800000u));
    for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < per_channel;
         k += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
      const std::int64_t o = k / inner, i = k - o * inner;
      const float v = x[(o * channels + c) * inner + i];
      if (isfinite(v)) {
        lo = fminf(lo, v);
        hi = fmaxf(hi, v);
      } else {
        nonfinite = true;
      }
    }
    fold_block(float_key(lo), float_key(hi), keys_min + c, keys_max + c);
  }
  if (nonfinite && reject_nonfinite) atomicOr(status, kNonFinite);
}

template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void finish_keys_kernel(const int* keys_min, const int* keys_max, std::int64_t entries, float* min,
                                   float* max) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    min[e] = key_float(keys_min[e]);
    max[e] = key_float(keys_max[e]);
  }
}

// MovingAverageMinMaxObserver::update, entry by entry.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void moving_average_kernel(const float* batch_min, const float* batch_max, std::int64_t entries, float c,
                                      float* running_min, float* running_max) {
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < entries;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float bmin = batch_min[e], bmax = batch_max[e];
    if (bmin > bmax) continue;  // no finite value in this entry of the batch
    float mn = running_min[e], mx = running_max[e];
    if (mn > mx) {  // first finite data for this entry
      mn = bmin;
      mx = bmax;
    } else {
      mn = __fadd_rn(mn, __fmul_rn(c, __fsub_rn(bmin, mn)));
      mx = __fadd_rn(mx, __fmul_rn(c, __fsub_rn(bmax, mx)));
    }
    running_min[e] = mn;
    running_max[e] = mx;
  }
}

// cpu::bin_index(HistcBinning, x).
struct HistcRule {
  float lo, hi, range, scale, last;
  std::int32_t bins;
  __device__ __forceinline__ std::int32_t operator()(float x) const {
    if (!(x >= lo && x <= hi)) return bins;
    float q = __fdiv_rn(__fmul_rn(__fsub_rn(x, lo), scale), range);
    q = q > 0.0f ? q : 0.0f;  // 0/0 when hi == lo
    q = q < last ? q : last;
    return static_cast<std::int32_t>(q);
  }
};

// cpu::bin_index(MagnitudeBinning, x).
struct MagnitudeRule {
  double inv_width, last_double;
  float inv_width_float, last;
  bool in_float;
  std::int32_t bins;
  __device__ __forceinline__ std::int32_t operator()(float x) const {
    const float a = fabsf(x);
    if (!(a <= FLT_MAX)) return bins;
    if (in_float) {
      const float p = __fmul_rn(a, inv_width_float);
      return static_cast<std::int32_t>(p < last ? p : last);
    }
    const double p = __dmul_rn(static_cast<double>(a), inv_width);
    return static_cast<std::int32_t>(p < last_double ? p : last_double);
  }
};

// Counts x[0..n) under `rule` into counts[0..bins). Shared: a 32-bit privatised histogram of `bins` counters in
// dynamic shared memory, flushed once a block (each block counts fewer than 2^32 elements).
template <class Rule, bool Shared>
__global__ void histogram_kernel(const float* __restrict__ x, std::int64_t n, Rule rule, bool reject_nonfinite,
                                 unsigned long long* counts, int* status) {
  extern __shared__ unsigned int private_counts[];
  if constexpr (Shared) {
    for (std::int32_t j = threadIdx.x; j < rule.bins; j += blockDim.x) private_counts[j] = 0;
    __syncthreads();
  }
  bool nonfinite = false;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[e];
    nonfinite |= !isfinite(v);
    const std::int32_t bin = rule(v);
    if (bin < rule.bins) {
      if constexpr (Shared) atomicAdd(private_counts + bin, 1u);
      else atomicAdd(counts + bin, 1ull);
    }
  }
  if (nonfinite && reject_nonfinite) atomicOr(status, kNonFinite);
  if constexpr (Shared) {
    __syncthreads();
    for (std::int32_t j = threadIdx.x; j < rule.bins; j += blockDim.x)
      if (private_counts[j] != 0) atomicAdd(counts + j, static_cast<unsigned long long>(private_counts[j]));
  }
}

}  // namespace calibration
}  // namespace shrink::cuda
