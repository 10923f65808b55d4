// Reductions shared by the GPU distillation losses (nvcc only): fixed-order block reductions, the online-softmax
// state and its merge, the kept-row count, and the last kernel that reduces the per-row losses into the value.
//
// Determinism: every sum is taken in an order fixed by the launch shape alone (each thread's own elements in index
// order, then a shuffle tree in each warp, then a tree over the warps), never by atomics on floating-point values, so
// a loss gives the same bits on every run. The kept-row count is an integer (atomics are exact there).
//   value = (sum of per-row losses, kept rows in row order per thread then the tree) / divisor
//   divisor = kept rows * elements per row (mean), kept rows (batchmean), 1 (sum, none): distill/reduction.hpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda::kernels {

// Threads of a block that walks one row: a multiple of 32, at most this.
constexpr int kMaxRowThreads = 512;
// Blocks of a row-per-block launch at most; the kernels loop over rows with a stride of gridDim.x.
constexpr std::int64_t kMaxRowBlocks = std::int64_t{1} << 20;

// Pointers into a loss workspace (detail::workspace_bytes): the status word, the kept-row count, the per-row
// losses, and what the loss keeps after them.
struct LossWorkspace {
  int* status;
  unsigned long long* kept;
  double* per_row;
  char* extra;
};

inline LossWorkspace split_workspace(void* data, std::int64_t rows) {
  char* base = static_cast<char*>(data);
  return LossWorkspace{reinterpret_cast<int*>(base),
                       reinterpret_cast<unsigned long long*>(base + detail::kKeptCountOffset),
                       reinterpret_cast<double*>(base + detail::kPerRowOffset), base + detail::extra_offset(rows)};
}

// Threads for a block walking rows of n elements, 16-byte chunks of `vector` elements: about four chunks a thread,
// a multiple of 32 in [32, kMaxRowThreads].
inline int row_threads(std::int64_t n, int vector) {
  const std::int64_t chunks = (n + vector - 1) / vector;
  std::int64_t threads = (chunks + 3) / 4;
  threads = (threads + 31) / 32 * 32;
  return static_cast<int>(threads < 32 ? 32 : (threads > kMaxRowThreads ? kMaxRowThreads : threads));
}

inline unsigned row_blocks(std::int64_t rows) {
  return static_cast<unsigned>(rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
}

__host__ __device__ inline double divisor(distill::Reduction r, unsigned long long kept, std::int64_t per_row) {
  switch (r) {
    case distill::Reduction::mean: return static_cast<double>(kept) * static_cast<double>(per_row);
    case distill::Reduction::batchmean: return static_cast<double>(kept);
    default: return 1.0;
  }
}

// Shuffles any 4-byte-multiple state down the warp, word by word.
template <class S>
__device__ __forceinline__ S shuffle_down(const S& v, int offset) {
  static_assert(sizeof(S) % 4 == 0, "shuffled states are whole 32-bit words");
  constexpr int kWords = sizeof(S) / 4;
  unsigned words[kWords];
  memcpy(words, &v, sizeof(S));
#pragma unroll
  for (int i = 0; i < kWords; ++i) words[i] = __shfl_down_sync(0xFFFFFFFFu, words[i], offset);
  S out;
  memcpy(&out, words, sizeof(S));
  return out;
}

// combine over the block in a fixed tree; every thread gets the result. Every thread of the block must call it
// (blockDim.x a multiple of 32); S must be trivially constructible (it lives in shared memory).
template <class S, class Combine>
__device__ S block_reduce(S v, Combine combine) {
  __shared__ S partial[32];
  __shared__ S result;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const S other = shuffle_down(v, offset);
    if (lane + offset < 32) v = combine(v, other);
  }
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    S w = partial[lane < warps ? lane : 0];
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const S other = shuffle_down(w, offset);  // every lane shuffles; only lanes < warps combine
      if (lane + offset < warps) w = combine(w, other);
    }
    if (lane == 0) result = w;
  }
  __syncthreads();
  const S out = result;
  __syncthreads();  // partial and result are reused by the next call
  return out;
}

// N doubles summed together.
template <int N>
struct Sums {
  double v[N];
};

template <int N>
__device__ __forceinline__ Sums<N> block_sum(Sums<N> s) {
  return block_reduce(s, [](const Sums<N>& a, const Sums<N>& b) {
    Sums<N> c;
#pragma unroll
    for (int i = 0; i < N; ++i) c.v[i] = a.v[i] + b.v[i];
    return c;
  });
}

__device__ __forceinline__ double block_sum(double v) { return block_sum(Sums<1>{{v}}).v[0]; }

constexpr float kInf = __builtin_huge_valf();

// Online softmax of one set of elements at temperature 1 / inv_t: max m and sum of exp((x - m) * inv_t) (in double:
// each term is a float exp), with the flag of a NaN or +inf seen. Empty: m = -inf, sum = 0.
struct Softmax {
  float max;
  int bad;
  double sum;
};

__device__ __forceinline__ Softmax empty_softmax() { return Softmax{-kInf, 0, 0.0}; }

// sum rescaled from max `from` to max `to` >= from (0 when nothing was summed at from = -inf).
__device__ __forceinline__ double rescale(double sum, float from, float to, float inv_t) {
  return from == -kInf ? 0.0 : sum * static_cast<double>(expf((from - to) * inv_t));
}

__device__ __forceinline__ void add(Softmax& s, float x, float inv_t) {
  s.bad |= !(x < kInf);  // NaN or +inf
  if (x > s.max) {
    s.sum = rescale(s.sum, s.max, x, inv_t);
    s.max = x;
  }
  if (x != -kInf) s.sum += static_cast<double>(expf((x - s.max) * inv_t));
}

__device__ __forceinline__ Softmax merge(const Softmax& a, const Softmax& b, float inv_t) {
  const float m = fmaxf(a.max, b.max);
  return Softmax{m, a.bad | b.bad, rescale(a.sum, a.max, m, inv_t) + rescale(b.sum, b.max, m, inv_t)};
}

// Counts the kept rows into *kept: the mask keeps them (every row without a mask) and, with labels, their label is
// not ignore_index. A kept label outside [0, classes) flags kBadIndex (the row stays counted, as the CPU throws).
template <class Label>
__global__ void count_kept_rows_kernel(std::int64_t rows, const std::uint8_t* __restrict__ mask,
                                       const Label* __restrict__ labels, std::int64_t ignore_index,
                                       std::int64_t classes, unsigned long long* kept, int* status) {
  unsigned long long count = 0;
  bool bad = false;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    bool k = mask == nullptr || mask[r] != 0;
    if (k && labels != nullptr) {
      const auto y = static_cast<std::int64_t>(labels[r]);
      if (y == ignore_index) k = false;
      else bad |= y < 0 || y >= classes;
    }
    count += k ? 1u : 0u;
  }
  if (bad) atomicOr(status, kBadIndex);
  for (int offset = 16; offset > 0; offset >>= 1) count += __shfl_down_sync(0xFFFFFFFFu, count, offset);
  if ((threadIdx.x & 31) == 0 && count != 0) atomicAdd(kept, count);
}

// One block: value = (sum of per_row, fixed order) / divisor; per_row_out (when given) = per_row.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void finish_loss_kernel(const double* __restrict__ per_row, std::int64_t rows,
                                   const unsigned long long* kept, distill::Reduction reduction,
                                   std::int64_t elements_per_row, double* value, double* per_row_out) {
  double total = 0.0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    total += per_row[r];
    if (per_row_out != nullptr) per_row_out[r] = per_row[r];
  }
  total = block_sum(total);
  if (threadIdx.x == 0) *value = total / divisor(reduction, *kept, elements_per_row);
}

constexpr int kCountThreads = 256;
constexpr int kFinishThreads = 1024;

// Zeroes the status word and the count, then counts the kept rows (labels: nullptr for losses without them).
template <class Label>
void start(const LossWorkspace& ws, std::int64_t rows, const std::uint8_t* mask, const Label* labels,
           std::int64_t ignore_index, std::int64_t classes, cudaStream_t stream) {
  SHRINK_CUDA_CHECK(cudaMemsetAsync(ws.status, 0, detail::kPerRowOffset, stream));
  const std::int64_t blocks = (rows + kCountThreads - 1) / kCountThreads;
  count_kept_rows_kernel<Label><<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kCountThreads, 0, stream>>>(
      rows, mask, labels, ignore_index, classes, ws.kept, ws.status);
  SHRINK_CUDA_CHECK_LAUNCH(count_kept_rows_kernel);
}

inline void finish(const LossWorkspace& ws, std::int64_t rows, distill::Reduction reduction,
                   std::int64_t elements_per_row, const DeviceLoss& out, cudaStream_t stream) {
  finish_loss_kernel<<<1, kFinishThreads, 0, stream>>>(ws.per_row, rows, ws.kept, reduction, elements_per_row,
                                                       out.value, out.per_row);
  SHRINK_CUDA_CHECK_LAUNCH(finish_loss_kernel);
}

}  // namespace shrink::cuda::kernels
