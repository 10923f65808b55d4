// CUDA realisation of sparse/csr.hpp's to_csr and to_dense_into: the count, scan, fill and scatter kernels and their
// launchers (nvcc only; host-compiled callers use shrink/cuda/csr.hpp).
//
// Workspace layout: the status word, a gate word (1 when the fill may write), the int64 kept count of every row, then
// one int64 a tile of kScanTile rows (their sum, then their exclusive prefix). The scan is three kernels: tile sums
// (one block a tile), one block scanning the tile sums in steps of blockDim with a carry (it also writes nnz and
// row_offsets[rows] and flags kCapacity), then each tile's rows from its prefix. Integer sums, so any order is exact.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/csr.hpp"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {
namespace csr {

constexpr int kThreads = 256;                  // 8 warps (block_exclusive_scan's shared array holds 32)
constexpr int kRowsPerThread = 4;              // rows a thread adds up in the tile kernels
constexpr std::int64_t kScanTile = kThreads * kRowsPerThread;
constexpr std::int64_t kInt32Max = 2147483647;

// Workspace layout (bytes): status, gate, row counts, tile sums.
constexpr std::size_t kGateOffset = kStatusBytes;
constexpr std::size_t kCountsOffset = kStatusBytes + 16;
inline std::int64_t scan_tiles(std::int64_t rows) { return (rows + kScanTile - 1) / kScanTile; }
inline std::size_t tile_sums_offset(std::int64_t rows) {
  return kCountsOffset + static_cast<std::size_t>(rows) * sizeof(long long);
}
inline std::size_t workspace_bytes(std::int64_t rows) {
  return tile_sums_offset(rows) + static_cast<std::size_t>(scan_tiles(rows)) * sizeof(long long);
}

__device__ __forceinline__ bool is_finite_value(float v) { return isfinite(v); }
__device__ __forceinline__ bool is_finite_value(half v) { return v.is_finite(); }
__device__ __forceinline__ bool is_finite_value(bfloat16 v) { return v.is_finite(); }

// sparse::is_nonzero: -0.0 is zero (floats compare; 16-bit types test their magnitude bits).
__device__ __forceinline__ bool is_nonzero(float v) { return v != 0.0f; }
__device__ __forceinline__ bool is_nonzero(half v) { return (v.to_bits() & 0x7FFFu) != 0; }
__device__ __forceinline__ bool is_nonzero(bfloat16 v) { return (v.to_bits() & 0x7FFFu) != 0; }

// Kept: set in the mask, or (no mask) nonzero.
template <class T>
__device__ __forceinline__ bool keeps(const std::uint64_t* __restrict__ mask, std::int64_t flat, T v) {
  return mask != nullptr ? ((mask[flat >> 6] >> (flat & 63)) & 1u) != 0 : is_nonzero(v);
}

__device__ __forceinline__ std::int64_t global_warp() {
  return (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
}
__device__ __forceinline__ std::int64_t grid_warps() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32; }

// One warp a row: counts[row] = kept elements of the row; NaN/inf flags kNonFinite.
template <class T>
__global__ void count_rows_kernel(const T* __restrict__ dense, std::int64_t rows, std::int64_t cols,
                                  const std::uint64_t* __restrict__ mask, long long* __restrict__ counts,
                                  int* status) {
  const int lane = threadIdx.x % 32;
  bool nonfinite = false;
  for (std::int64_t row = global_warp(); row < rows; row += grid_warps()) {  // the same for the whole warp
    const std::int64_t first = row * cols;
    unsigned kept = 0;  // at most cols <= INT32_MAX in all
    for (std::int64_t c = lane; c < cols; c += 32) {
      const T v = dense[first + c];
      nonfinite |= !is_finite_value(v);
      kept += keeps(mask, first + c, v) ? 1u : 0u;
    }
    for (int offset = 16; offset > 0; offset >>= 1) kept += __shfl_down_sync(0xFFFFFFFFu, kept, offset);
    if (lane == 0) counts[row] = static_cast<long long>(kept);
  }
  if (nonfinite) atomicOr(status, kNonFinite);
}

// Exclusive prefix of v over the block (blockDim.x = kThreads, a multiple of 32); *total = the block's sum. Every
// thread of the block calls it; `warp_sums` holds 32 values and is free again on return.
__device__ __forceinline__ long long block_exclusive_scan(long long v, long long* total, long long* warp_sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  long long inclusive = v;
  for (int d = 1; d < 32; d <<= 1) {
    const long long below = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
    if (lane >= d) inclusive += below;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    long long s = lane < warps ? warp_sums[lane] : 0;
    for (int d = 1; d < 32; d <<= 1) {
      const long long below = __shfl_up_sync(0xFFFFFFFFu, s, d);
      if (lane >= d) s += below;
    }
    if (lane < warps) warp_sums[lane] = s;  // inclusive sums of the warp totals
  }
  __syncthreads();
  const long long before_warp = warp == 0 ? 0 : warp_sums[warp - 1];
  *total = warp_sums[warps - 1];
  __syncthreads();  // warp_sums is free again
  return before_warp + inclusive - v;
}

// The first of this thread's kRowsPerThread rows in scan tile t.
__device__ __forceinline__ std::int64_t thread_first_row(std::int64_t t) {
  return t * kScanTile + static_cast<std::int64_t>(threadIdx.x) * kRowsPerThread;
}

// The counts of the rows [first, first + kRowsPerThread) below `rows`, added up.
__device__ __forceinline__ long long thread_rows_sum(const long long* __restrict__ counts, std::int64_t rows,
                                                     std::int64_t first) {
  long long sum = 0;
  for (int k = 0; k < kRowsPerThread; ++k)
    if (first + k < rows) sum += counts[first + k];
  return sum;
}

// One block a tile: tile_sums[t] = counts of rows [t * kScanTile, ...).
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void tile_sums_kernel(const long long* __restrict__ counts, std::int64_t rows,
                                 long long* __restrict__ tile_sums) {
  __shared__ long long warp_sums[32];
  const std::int64_t tiles = (rows + kScanTile - 1) / kScanTile;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // the same for the whole block
    long long total = 0;
    block_exclusive_scan(thread_rows_sum(counts, rows, thread_first_row(t)), &total, warp_sums);
    if (threadIdx.x == 0) tile_sums[t] = total;
  }
}

// One block: tile_sums becomes its exclusive prefix; *nnz and row_offsets[rows] = the total; kCapacity when the total
// exceeds `capacity` or INT32_MAX.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void scan_tiles_kernel(long long* __restrict__ tile_sums, std::int64_t tiles, std::int64_t rows,
                                  std::int64_t capacity, std::int32_t* __restrict__ row_offsets,
                                  long long* __restrict__ nnz, int* status) {
  __shared__ long long warp_sums[32];
  long long carry = 0;
  for (std::int64_t base = 0; base < tiles; base += blockDim.x) {  // the same for the whole block
    const std::int64_t t = base + threadIdx.x;
    const long long sum = t < tiles ? tile_sums[t] : 0;
    long long step_total = 0;
    const long long before = block_exclusive_scan(sum, &step_total, warp_sums);
    if (t < tiles) tile_sums[t] = carry + before;
    carry += step_total;
  }
  if (threadIdx.x == 0) {
    *nnz = carry;
    row_offsets[rows] = static_cast<std::int32_t>(carry <= kInt32Max ? carry : kInt32Max);
    if (carry > kInt32Max || carry > capacity) atomicOr(status, kCapacity);
  }
}

// One block a tile: row_offsets[row] = its tile's prefix + the counts of the rows before it in the tile.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void tile_offsets_kernel(const long long* __restrict__ counts, std::int64_t rows,
                                    const long long* __restrict__ tile_prefix, std::int32_t* __restrict__ row_offsets) {
  __shared__ long long warp_sums[32];
  const std::int64_t tiles = (rows + kScanTile - 1) / kScanTile;
  for (std::int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // the same for the whole block
    const std::int64_t first = thread_first_row(t);
    long long total = 0;
    long long offset = tile_prefix[t] + block_exclusive_scan(thread_rows_sum(counts, rows, first), &total, warp_sums);
    for (int k = 0; k < kRowsPerThread; ++k)
      if (first + k < rows) {
        // Past INT32_MAX the offsets are meaningless and scan_tiles_kernel has flagged kCapacity.
        row_offsets[first + k] = static_cast<std::int32_t>(offset <= kInt32Max ? offset : kInt32Max);
        offset += counts[first + k];
      }
  }
}

// One thread: *gate = 1 when the fill may write (no kCapacity so far, and row_offsets[rows] in [0, capacity]),
// otherwise 0 and kCapacity.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void gate_kernel(const std::int32_t* __restrict__ row_offsets, std::int64_t rows, std::int64_t capacity,
                            int* gate, int* status) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const std::int64_t total = row_offsets[rows];
  const bool open = (*status & kCapacity) == 0 && total >= 0 && total <= capacity;
  *gate = open ? 1 : 0;
  if (!open) atomicOr(status, kCapacity);
}

// One warp a row: 32 columns a step, a ballot of the kept lanes; lane l writes at the row's next position plus the
// kept lanes below it. A row whose kept elements do not end at row_offsets[row + 1] flags kBadIndex; positions
// outside [0, capacity) are never written (kCapacity).
template <class T>
__global__ void fill_rows_kernel(const T* __restrict__ dense, std::int64_t rows, std::int64_t cols,
                                 const std::uint64_t* __restrict__ mask, const std::int32_t* __restrict__ row_offsets,
                                 std::int64_t capacity, const int* __restrict__ gate,
                                 std::int32_t* __restrict__ column_indices, T* __restrict__ values, int* status) {
  if (*gate == 0) return;
  const int lane = threadIdx.x % 32;
  const unsigned below_lane = (1u << lane) - 1u;
  bool nonfinite = false, mismatch = false, outside = false;
  for (std::int64_t row = global_warp(); row < rows; row += grid_warps()) {  // the same for the whole warp
    const std::int64_t first = row * cols;
    std::int64_t next = row_offsets[row];
    for (std::int64_t c0 = 0; c0 < cols; c0 += 32) {  // the same for the whole warp: the ballot needs every lane
      const std::int64_t c = c0 + lane;
      bool keep = false;
      T v{};
      if (c < cols) {
        v = dense[first + c];
        nonfinite |= !is_finite_value(v);
        keep = keeps(mask, first + c, v);
      }
      const unsigned kept_lanes = __ballot_sync(0xFFFFFFFFu, keep);
      if (keep) {
        const std::int64_t at = next + __popc(kept_lanes & below_lane);
        if (at >= 0 && at < capacity) {
          column_indices[at] = static_cast<std::int32_t>(c);
          values[at] = v;
        } else {
          outside = true;
        }
      }
      next += __popc(kept_lanes);
    }
    mismatch |= next != row_offsets[row + 1];
  }
  if (nonfinite) atomicOr(status, kNonFinite);
  if (mismatch) atomicOr(status, kBadIndex);
  if (outside) atomicOr(status, kCapacity);
}

// row_offsets[0] must be 0 and row_offsets[rows] must be nnz.
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void check_ends_kernel(const std::int32_t* __restrict__ row_offsets, std::int64_t rows, std::int64_t nnz,
                                  int* status) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  if (row_offsets[0] != 0 || row_offsets[rows] != nnz) atomicOr(status, kBadIndex);
}

// One warp a row of a zeroed out: out[row, column_indices[k]] = values[k]; bad offsets or columns (sparse::
// validate_csr's rules) flag kBadIndex and are skipped.
template <class T>
__global__ void scatter_rows_kernel(const std::int32_t* __restrict__ row_offsets,
                                    const std::int32_t* __restrict__ column_indices, const T* __restrict__ values,
                                    std::int64_t nnz, std::int64_t rows, std::int64_t cols, T* __restrict__ out,
                                    int* status) {
  const int lane = threadIdx.x % 32;
  bool bad = false;
  for (std::int64_t row = global_warp(); row < rows; row += grid_warps()) {
    const std::int64_t begin = row_offsets[row], end = row_offsets[row + 1];
    if (begin < 0 || end < begin || end > nnz) {
      bad = true;
      continue;
    }
    for (std::int64_t k = begin + lane; k < end; k += 32) {
      const std::int64_t c = column_indices[k];
      const std::int64_t lowest = k == begin ? 0 : static_cast<std::int64_t>(column_indices[k - 1]) + 1;
      if (c < lowest || c >= cols) {
        bad = true;
        continue;
      }
      out[row * cols + c] = values[k];
    }
  }
  if (bad) atomicOr(status, kBadIndex);
}

// Launchers on `stream`.
template <class T>
void count_and_scan(const T* dense, std::int64_t rows, std::int64_t cols, const std::uint64_t* mask,
                    std::int64_t capacity, std::int32_t* row_offsets, long long* nnz, char* workspace,
                    cudaStream_t stream) {
  int* status = reinterpret_cast<int*>(workspace);
  auto* counts = reinterpret_cast<long long*>(workspace + kCountsOffset);
  auto* tile_sums = reinterpret_cast<long long*>(workspace + tile_sums_offset(rows));
  const std::int64_t tiles = scan_tiles(rows);
  count_rows_kernel<T><<<grid_blocks(rows * 32, kThreads), kThreads, 0, stream>>>(dense, rows, cols, mask, counts,
                                                                                   status);
  SHRINK_CUDA_CHECK_LAUNCH(count_rows_kernel);
  tile_sums_kernel<<<grid_blocks(tiles * kThreads, kThreads), kThreads, 0, stream>>>(counts, rows, tile_sums);
  SHRINK_CUDA_CHECK_LAUNCH(tile_sums_kernel);
  scan_tiles_kernel<<<1, kThreads, 0, stream>>>(tile_sums, tiles, rows, capacity, row_offsets, nnz, status);
  SHRINK_CUDA_CHECK_LAUNCH(scan_tiles_kernel);
  tile_offsets_kernel<<<grid_blocks(tiles * kThreads, kThreads), kThreads, 0, stream>>>(counts, rows, tile_sums,
                                                                                       row_offsets);
  SHRINK_CUDA_CHECK_LAUNCH(tile_offsets_kernel);
}

template <class T>
void fill(const T* dense, std::int64_t rows, std::int64_t cols, const std::uint64_t* mask,
          const std::int32_t* row_offsets, std::int64_t capacity, std::int32_t* column_indices, T* values,
          char* workspace, cudaStream_t stream) {
  int* status = reinterpret_cast<int*>(workspace);
  int* gate = reinterpret_cast<int*>(workspace + kGateOffset);
  gate_kernel<<<1, 32, 0, stream>>>(row_offsets, rows, capacity, gate, status);
  SHRINK_CUDA_CHECK_LAUNCH(gate_kernel);
  fill_rows_kernel<T><<<grid_blocks(rows * 32, kThreads), kThreads, 0, stream>>>(
      dense, rows, cols, mask, row_offsets, capacity, gate, column_indices, values, status);
  SHRINK_CUDA_CHECK_LAUNCH(fill_rows_kernel);
}

template <class T>
void to_dense(const std::int32_t* row_offsets, const std::int32_t* column_indices, const T* values, std::int64_t nnz,
              std::int64_t rows, std::int64_t cols, T* out, int* status, cudaStream_t stream) {
  SHRINK_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(rows * cols) * sizeof(T), stream));
  check_ends_kernel<<<1, 32, 0, stream>>>(row_offsets, rows, nnz, status);
  SHRINK_CUDA_CHECK_LAUNCH(check_ends_kernel);
  scatter_rows_kernel<T><<<grid_blocks(rows * 32, kThreads), kThreads, 0, stream>>>(
      row_offsets, column_indices, values, nnz, rows, cols, out, status);
  SHRINK_CUDA_CHECK_LAUNCH(scatter_rows_kernel);
}

}  // namespace csr
}  // namespace shrink::cuda::kernels
