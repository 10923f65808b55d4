// CUDA realisation of the calibration statistics of quant/observers (nvcc only; host-compiled callers use
// shrink/cuda/calibration.hpp).
//
// Min/max: each block reduces a slice of one entry's elements (entry = tensor or channel of a contiguous tensor seen
// as [outer, channels, inner]) to a finite min and max, and folds them with atomicMin / atomicMax into order-
// preserving integer keys in the workspace (float bits, negatives with their magnitude bits flipped, so integer order
// is float order and -0 < +0); a last kernel turns the keys back into floats. Min and max are exact, so the result
// does not depend on the order of the reduction: it equals cpu::finite_range's. Runs of fewer than 32 elements (the
// last axis, conv kernels) take a columns kernel instead, threads across the columns and each folding its column's
// range into its channel's keys, so that a warp reads contiguous memory either way. float4 loads where runs allow.
//
// Histograms: each block counts into a privatised shared-memory histogram of 32-bit counters (atomicAdd), then adds
// its nonzero counters to the caller's int64 counts with 64-bit atomics; float4 loads when x is 16-byte aligned. Bin
// rules are cpu::bin_index's, with _rn intrinsics so that nvcc neither contracts nor approximates (bit for bit the
// CPU's index). Histograms too large for shared memory count straight into the global array.
#pragma once

#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {
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

// Folds one value into a running finite range; a non-finite value only sets `nonfinite`.
__device__ __forceinline__ void visit(float v, float& lo, float& hi, bool& nonfinite) {
  if (isfinite(v)) {
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  } else {
    nonfinite = true;
  }
}

// Finite range of each channel c of x seen as [outer, channels, inner] (per tensor: [1, 1, n]), read V floats at a
// time (V = 4 needs inner % 4 == 0 and x 16-byte aligned: a vector then never straddles two runs). Blocks
// (blockIdx.x, blockIdx.y) take vectors blockIdx.x * blockDim.x + threadIdx.x, + gridDim.x * blockDim.x, ... of
// channels blockIdx.y, +gridDim.y, ...; a thread steps its (run o, vector i) without dividing. OneRun: outer == 1
// (per tensor, or channels along axis 0), each channel one contiguous run.
template <int V, bool OneRun>
__global__ void minmax_kernel(const float* __restrict__ x, std::int64_t outer, std::int64_t channels,
                              std::int64_t inner, bool reject_nonfinite, int* keys_min, int* keys_max, int* status) {
  const std::int64_t run_vectors = inner / V;
  const std::int64_t per_channel = outer * run_vectors;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool nonfinite = false;
  const auto visit_vector = [&](const float* at, float& lo, float& hi) {
    if constexpr (V == 4) {
      const float4 v = *reinterpret_cast<const float4*>(at);
      visit(v.x, lo, hi, nonfinite);
      visit(v.y, lo, hi, nonfinite);
      visit(v.z, lo, hi, nonfinite);
      visit(v.w, lo, hi, nonfinite);
    } else {
      visit(*at, lo, hi, nonfinite);
    }
  };
  for (std::int64_t c = blockIdx.y; c < channels; c += gridDim.y) {
    float lo = __int_as_float(0x7F800000), hi = __int_as_float(static_cast<int>(0xFF800000u));
    if constexpr (OneRun) {
      const float* run = x + c * inner;
#pragma unroll 4
      for (std::int64_t k = first; k < per_channel; k += step) visit_vector(run + k * V, lo, hi);
    } else {
      const std::int64_t step_runs = step / run_vectors, step_vectors = step % run_vectors;
      std::int64_t o = first / run_vectors, i = first % run_vectors;  // vector k = o * run_vectors + i
      for (std::int64_t k = first; k < per_channel; k += step) {
        visit_vector(x + (o * channels + c) * inner + i * V, lo, hi);
        o += step_runs;  // k + step as (o, i)
        i += step_vectors;
        if (i >= run_vectors) {
          i -= run_vectors;
          ++o;
        }
      }
    }
    fold_block(float_key(lo), float_key(hi), keys_min + c, keys_max + c);
  }
  if (nonfinite && reject_nonfinite) atomicOr(status, kNonFinite);
}

// Channels interleaved finely (short runs, e.g. the last axis): x as a matrix [outer, length = channels * inner].
// Thread (blockIdx.x * blockDim.x + threadIdx.x) takes that column over rows [blockIdx.y * rows_per_group, ...), reads
// coalesced across the block, and folds its range into channel column / inner (exact, so the order does not matter).
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void minmax_columns_kernel(const float* __restrict__ x, std::int64_t outer, std::int64_t length,
                                      std::int64_t inner, std::int64_t rows_per_group, bool reject_nonfinite,
                                      int* keys_min, int* keys_max, int* status) {
  const std::int64_t column = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (column >= length) return;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * rows_per_group;
  const std::int64_t end_row = first_row + rows_per_group < outer ? first_row + rows_per_group : outer;
  float lo = __int_as_float(0x7F800000), hi = __int_as_float(static_cast<int>(0xFF800000u));
  bool nonfinite = false;
#pragma unroll 4
  for (std::int64_t o = first_row; o < end_row; ++o) visit(x[o * length + column], lo, hi, nonfinite);
  if (lo <= hi) {  // something finite seen: fold it in
    atomicMin(keys_min + column / inner, float_key(lo));
    atomicMax(keys_max + column / inner, float_key(hi));
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
// dynamic shared memory, flushed once a block (each block counts fewer than 2^32 elements). Vec: x 16-byte aligned,
// float4 loads for the first n / 4 * 4 elements, the rest one at a time.
template <class Rule, bool Shared, bool Vec>
__global__ void histogram_kernel(const float* __restrict__ x, std::int64_t n, Rule rule, bool reject_nonfinite,
                                 unsigned long long* counts, int* status) {
  extern __shared__ unsigned int private_counts[];
  if constexpr (Shared) {
    for (std::int32_t j = threadIdx.x; j < rule.bins; j += blockDim.x) private_counts[j] = 0;
    __syncthreads();
  }
  bool nonfinite = false;
  const auto count_value = [&](float v) {
    nonfinite |= !isfinite(v);
    const std::int32_t bin = rule(v);
    if (bin < rule.bins) {
      if constexpr (Shared) atomicAdd(private_counts + bin, 1u);
      else atomicAdd(counts + bin, 1ull);
    }
  };
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t begin = 0;
  if constexpr (Vec) {
    const std::int64_t n4 = n / 4;
    for (std::int64_t k = first; k < n4; k += step) {
      const float4 v = reinterpret_cast<const float4*>(x)[k];
      count_value(v.x);
      count_value(v.y);
      count_value(v.z);
      count_value(v.w);
    }
    begin = 4 * n4;
  }
  for (std::int64_t e = begin + first; e < n; e += step) count_value(x[e]);
  if (nonfinite && reject_nonfinite) atomicOr(status, kNonFinite);
  if constexpr (Shared) {
    __syncthreads();
    for (std::int32_t j = threadIdx.x; j < rule.bins; j += blockDim.x)
      if (private_counts[j] != 0) atomicAdd(counts + j, static_cast<unsigned long long>(private_counts[j]));
  }
}

}  // namespace calibration
}  // namespace shrink::cuda::kernels
