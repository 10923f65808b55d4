// CUDA realisation of prune/threshold.hpp's select_magnitude_threshold: a three-pass radix select over the float
// bits of |w| (nvcc only; host-compiled callers use shrink/cuda/threshold.hpp).
//
// key = float bits of |w| (sign cleared; half and bfloat16 widened exactly), below 2^31. Pass p histograms the
// key's digit p, bits [30:20], [19:9], [8:0], of the candidates whose higher digits equal the prefix chosen so far;
// a one-block kernel then finds the bucket holding the remaining rank (the CPU's bucket_of_rank), adds the counts
// below it and extends the prefix. State and histograms live in the caller's workspace, zeroed once per call.
// Pass 0 also counts the candidates and flags NaN/inf (kNonFinite) anywhere; a rank above the candidates flags
// kBadRank. The result is bits, below, at, at_pruned, candidates exactly as the CPU computes them. Passes read 16
// bytes a load where the tensor is 16-byte aligned.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "shrink/core/half.hpp"
#include "shrink/cuda/check.cuh"
#include "shrink/cuda/launch.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/threshold.hpp"
#include "shrink/prune/threshold.hpp"

namespace shrink::cuda {
namespace radix {

constexpr int kPasses = 3;
// Digit `Pass` of a key: bits [shift + bits - 1 : shift]; its histogram starts at `offset` in the workspace.
template <int Pass>
struct Digit {
  static constexpr int shift = Pass == 0 ? 20 : Pass == 1 ? 9 : 0;
  static constexpr int bits = Pass == 2 ? 9 : 11;
  static constexpr int buckets = 1 << bits;
  static constexpr int offset = Pass == 0 ? 0 : Pass == 1 ? 2048 : 4096;
};
constexpr int kHistogramTotal = 4608;

// Select state (in the workspace after the status word).
struct SelectState {
  unsigned long long candidates;
  long long below;  // candidates below the current prefix's range
  long long rank;   // 1-based rank still to find within the prefix's range
  std::uint32_t prefix;
  int done;  // 1 when k = 0 or an error made the remaining passes moot
};

// Workspace layout after the status word: the state, then the histograms of the three passes.
constexpr std::size_t kStateOffset = kStatusBytes;
constexpr std::size_t kHistogramBytesOffset = kStatusBytes + 48;
constexpr std::size_t kWorkspaceBytes = kHistogramBytesOffset + kHistogramTotal * sizeof(unsigned long long);
static_assert(sizeof(SelectState) <= 48, "the select state fits its slot");

__device__ __forceinline__ float as_float(float x) { return x; }
__device__ __forceinline__ float as_float(half x) { return x.to_float(); }
__device__ __forceinline__ float as_float(bfloat16 x) { return x.to_float(); }

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Histogram of digit `Pass` over one tensor's candidates in the prefix's range (pass 0: all, plus the checks). Vec: x
// 16-byte aligned, read 16 bytes (4 floats or 8 16-bit values) a load up to the last whole vector, then one at a time;
// the elements of a vector share one mask word (4 and 8 divide 64).
template <class T, int Pass, bool Vec>
__global__ void histogram_kernel(const T* __restrict__ x, std::int64_t n, const std::uint64_t* __restrict__ current,
                                 const SelectState* __restrict__ state, unsigned long long* __restrict__ histogram,
                                 unsigned long long* __restrict__ candidates, int* status) {
  constexpr int kBucketsHere = Digit<Pass>::buckets;
  __shared__ unsigned int local[kBucketsHere];
  __shared__ unsigned int local_candidates;
  __shared__ int local_nonfinite;
  if (Pass > 0 && state->done) return;
  const std::uint32_t prefix = Pass > 0 ? state->prefix : 0u;
  for (int b = threadIdx.x; b < kBucketsHere; b += blockDim.x) local[b] = 0;
  if (threadIdx.x == 0) local_candidates = 0, local_nonfinite = 0;
  __syncthreads();
  unsigned int counted = 0;
  bool nonfinite = false;
  const auto visit = [&](T value, bool candidate) {
    const std::uint32_t key = __float_as_uint(as_float(value)) & 0x7FFFFFFFu;
    if (Pass == 0) nonfinite |= key >= 0x7F800000u;
    if (!candidate) return;
    if (Pass > 0 && (key >> (Digit<Pass>::shift + Digit<Pass>::bits)) != prefix) return;
    ++counted;
    atomicAdd(&local[(key >> Digit<Pass>::shift) & (kBucketsHere - 1)], 1u);
  };
  std::int64_t begin = 0;
  if constexpr (Vec) {
    constexpr int kLanes = 16 / static_cast<int>(sizeof(T));
    const std::int64_t vectors = n / kLanes;
    for (std::int64_t k = global_thread(); k < vectors; k += grid_threads()) {
      const std::int64_t i = k * kLanes;
      const uint4 bits = reinterpret_cast<const uint4*>(x)[k];
      T lanes[kLanes];
      memcpy(lanes, &bits, sizeof bits);
      const std::uint64_t keep = current == nullptr ? ~std::uint64_t{0} : current[i >> 6] >> (i & 63);
#pragma unroll
      for (int l = 0; l < kLanes; ++l) visit(lanes[l], (keep >> l) & 1u);
    }
    begin = vectors * kLanes;
  }
  for (std::int64_t i = begin + global_thread(); i < n; i += grid_threads())
    visit(x[i], current == nullptr || ((current[i >> 6] >> (i & 63)) & 1u));
  if (Pass == 0) {
    if (counted) atomicAdd(&local_candidates, counted);
    if (nonfinite) local_nonfinite = 1;
  }
  __syncthreads();
  for (int b = threadIdx.x; b < kBucketsHere; b += blockDim.x)
    if (local[b]) atomicAdd(&histogram[b], static_cast<unsigned long long>(local[b]));
  if (Pass == 0 && threadIdx.x == 0) {
    if (local_candidates) atomicAdd(candidates, static_cast<unsigned long long>(local_candidates));
    if (local_nonfinite) atomicOr(status, kNonFinite);
  }
}

constexpr int kThreads = 256;

// One block of kThreads: the bucket holding the remaining rank, as bucket_of_rank (the first bucket whose running count
// reaches it), without walking thousands of buckets in one thread. Thread t owns buckets [t * per, (t + 1) * per);
// an inclusive scan of the owners' sums finds the one thread whose range reaches the rank (the rank lies in [1, the
// histogram's total]: k <= candidates in pass 0, then at most the count of the bucket chosen before), which walks its
// buckets. The last pass writes the result.
template <int Pass>
__global__ void choose_bucket_kernel(const unsigned long long* __restrict__ histogram, SelectState* state,
                                     long long k, prune::MagnitudeThreshold* result, int* status) {
  constexpr int kPerThread = Digit<Pass>::buckets / kThreads;
  static_assert(kPerThread * kThreads == Digit<Pass>::buckets, "the threads share the buckets evenly");
  __shared__ long long running[kThreads];
  const int t = threadIdx.x;
  if (Pass == 0 && t == 0) {
    state->below = 0;
    state->rank = k;
    state->prefix = 0;
    state->done = 0;
    prune::MagnitudeThreshold r;
    r.candidates = static_cast<std::int64_t>(state->candidates);
    if (k > r.candidates) atomicOr(status, kBadRank);
    if (k == 0 || k > r.candidates) {
      state->done = 1;
      *result = r;
    }
  }
  __syncthreads();  // thread 0's writes to the state are visible to the block
  if (state->done) return;  // the same for every thread
  long long mine = 0;
  for (int j = 0; j < kPerThread; ++j) mine += static_cast<long long>(histogram[t * kPerThread + j]);
  running[t] = mine;
  __syncthreads();
  for (int offset = 1; offset < kThreads; offset <<= 1) {  // inclusive scan of the owners' sums
    const long long below = t >= offset ? running[t - offset] : 0;
    __syncthreads();
    running[t] += below;
    __syncthreads();
  }
  const long long rank = state->rank;
  long long before = running[t] - mine;
  if (!(before < rank && rank <= running[t])) return;  // exactly one thread goes on
  int bucket = t * kPerThread;
  for (; bucket < (t + 1) * kPerThread - 1; ++bucket) {
    const long long count = static_cast<long long>(histogram[bucket]);
    if (before + count >= rank) break;
    before += count;
  }
  state->below += before;
  state->rank -= before;
  state->prefix = (state->prefix << Digit<Pass>::bits) | static_cast<std::uint32_t>(bucket);
  if (Pass == kPasses - 1) {
    prune::MagnitudeThreshold r;
    r.candidates = static_cast<std::int64_t>(state->candidates);
    r.bits = state->prefix;
    r.below = state->below;
    r.at = static_cast<std::int64_t>(histogram[bucket]);
    r.at_pruned = k - r.below;
    *result = r;
  }
}

template <int Pass, class T>
void histogram(const T* x, std::int64_t n, const std::uint64_t* current, SelectState* state,
               unsigned long long* histograms, int* status, cudaStream_t stream) {
  if (aligned_to(x, 16))
    histogram_kernel<T, Pass, true><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(
        x, n, current, state, histograms + Digit<Pass>::offset, &state->candidates, status);
  else
    histogram_kernel<T, Pass, false><<<grid_blocks(n, kThreads), kThreads, 0, stream>>>(
        x, n, current, state, histograms + Digit<Pass>::offset, &state->candidates, status);
  SHRINK_CUDA_CHECK_LAUNCH(histogram_kernel);
}

template <int Pass>
void choose_bucket(const unsigned long long* histograms, SelectState* state, long long k,
                   prune::MagnitudeThreshold* result, int* status, cudaStream_t stream) {
  choose_bucket_kernel<Pass><<<1, kThreads, 0, stream>>>(histograms + Digit<Pass>::offset, state, k, result, status);
  SHRINK_CUDA_CHECK_LAUNCH(choose_bucket_kernel);
}

}  // namespace radix
}  // namespace shrink::cuda
