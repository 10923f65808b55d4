// CUDA realisation of prune/norm.hpp's slice and block norms: device kernels and the host plan that splits the work
// (nvcc only; host-compiled callers use shrink/cuda/norms.hpp).
//
// Slice norms see the weights as [outer, channels, inner] around the dim (AxisSplit); slice c is `outer` runs of
// `inner` contiguous elements, one every channels * inner. Two layouts of the work, both a fixed order:
//   - segments (inner >= kColumnInner): a block sums one piece of one slice (a group of whole runs, or a piece of a
//     long run), each thread every blockDim-th element, then a fixed shuffle tree; partials[c * pieces + p].
//   - columns (inner < kColumnInner, e.g. input channels, dim = rank - 1): the tensor as a matrix [outer,
//     channels * inner]; a thread sums one column over a group of rows (coalesced across the threads), then one thread
//     a slice adds its inner columns; partials[group * channels + c].
// A last kernel folds each slice's partials in index order and finishes the norm (sqrt for l2).
// Block norms: one thread a block in the CPU's row-major order (exact) below kExactBlockElements elements, otherwise
// one warp a block (lanes over its row-major elements, then a fixed shuffle tree).
// Sums run in double with _rn intrinsics (no contraction; |w| and w^2 are exact in double). NaN/inf anywhere or-s
// kNonFinite.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/axis.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/convert.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/norms.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::cuda::kernels {
namespace norms {

constexpr int kThreads = 256;                  // a multiple of 32 (the shuffle trees)
constexpr std::int64_t kColumnInner = 256;     // runs shorter than a block of threads take the columns layout
constexpr std::int64_t kPieceElements = 8192;  // elements one block sums in the segments layout (about)
constexpr std::int64_t kColumnBlocks = 4096;   // blocks the columns layout aims for (row groups x column tiles)

using prune::NormOrder;

// How slice_norms splits [outer, channels, inner]; depends on the shape only, so the order of every sum does too.
struct SlicePlan {
  std::int64_t outer = 1, channels = 1, inner = 1;
  bool columns = false;
  std::int64_t groups = 1;  // segments: groups of runs; columns: groups of rows
  // segments: runs [g * group_runs, ...) of piece q, elements [q * piece, ...) of each run
  std::int64_t group_runs = 1, piece = 1, pieces = 1;
  // columns: channels_per_tile whole slices (channels_per_tile * inner <= kThreads columns) a block, row_group rows
  std::int64_t channels_per_tile = 1, tiles = 1, row_group = 1;

  std::int64_t partials_per_slice() const { return columns ? groups : groups * pieces; }
  std::int64_t partials() const { return channels * partials_per_slice(); }
};

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A non-empty split (every extent >= 1).
inline SlicePlan plan_slices(const AxisSplit& split) {
  SlicePlan p;
  p.outer = split.outer;
  p.channels = split.channels;
  p.inner = split.inner;
  p.columns = p.inner < kColumnInner;
  if (p.columns) {
    p.channels_per_tile = kThreads / p.inner;
    p.tiles = ceil_div(p.channels, p.channels_per_tile);
    const std::int64_t wanted = ceil_div(kColumnBlocks, p.tiles);
    p.row_group = ceil_div(p.outer, wanted < p.outer ? wanted : p.outer);
    p.groups = ceil_div(p.outer, p.row_group);
  } else {
    p.pieces = ceil_div(p.inner, kPieceElements);
    p.piece = ceil_div(p.inner, p.pieces);
    p.group_runs = p.inner >= kPieceElements ? 1 : kPieceElements / p.inner;
    p.groups = ceil_div(p.outer, p.group_runs);
  }
  return p;
}

// Block norms' grid: [matrices, grid_rows, grid_cols] blocks of block_rows x block_cols over [..., rows, cols].
struct BlockGrid {
  std::int64_t rows = 1, cols = 1, block_rows = 1, block_cols = 1, grid_rows = 1, grid_cols = 1, blocks = 1;
};

__device__ __forceinline__ bool kept(const std::uint64_t* __restrict__ words, std::int64_t flat) {
  return words == nullptr || ((words[flat >> 6] >> (flat & 63)) & 1u);
}

// The term a weight adds (|w| or w^2, exact in double), how two running values combine, and the finished norm. The
// running value of every order starts at 0: sums of terms >= 0, and the max of magnitudes >= 0.
template <NormOrder N>
__device__ __forceinline__ double term(float w) {
  const double magnitude = fabs(static_cast<double>(w));
  return N == NormOrder::l2 ? __dmul_rn(magnitude, magnitude) : magnitude;
}
template <NormOrder N>
__device__ __forceinline__ double fold(double running, double value) {
  return N == NormOrder::inf ? fmax(running, value) : __dadd_rn(running, value);
}
template <NormOrder N>
__device__ __forceinline__ double finish(double running) {
  return N == NormOrder::l2 ? __dsqrt_rn(running) : running;
}

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Folds a warp's values into lane 0, always the same tree.
template <NormOrder N>
__device__ __forceinline__ double warp_fold(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fold<N>(v, __shfl_down_sync(0xFFFFFFFFu, v, offset));
  return v;
}

// Folds the block's values (blockDim.x a multiple of 32) into thread 0, always the same tree. Every thread of the
// block calls it; `warp_values` holds 32 doubles and may be reused on return.
template <NormOrder N>
__device__ __forceinline__ double block_fold(double v, double* warp_values) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_fold<N>(v);
  if (lane == 0) warp_values[warp] = v;
  __syncthreads();
  double total = 0.0;
  if (warp == 0) {
    total = lane < static_cast<int>(blockDim.x / 32) ? warp_values[lane] : 0.0;
    total = warp_fold<N>(total);
  }
  __syncthreads();  // warp_values is free again
  return total;
}

// Segments layout: item = (slice c, group g, piece q) -> partials[item], item = (c * groups + g) * pieces + q.
template <class T, NormOrder N>
__global__ void segment_partials_kernel(const T* __restrict__ x, const std::uint64_t* __restrict__ current,
                                        SlicePlan plan, double* __restrict__ partials, int* status) {
  __shared__ double warp_values[32];
  const std::int64_t per_slice = plan.groups * plan.pieces;
  const std::int64_t items = plan.channels * per_slice;
  bool nonfinite = false;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // the same for the whole block
    const std::int64_t c = item / per_slice;
    const std::int64_t g = (item - c * per_slice) / plan.pieces;
    const std::int64_t q = item - c * per_slice - g * plan.pieces;
    const std::int64_t first_run = g * plan.group_runs;
    const std::int64_t end_run = first_run + plan.group_runs < plan.outer ? first_run + plan.group_runs : plan.outer;
    const std::int64_t begin = q * plan.piece;
    const std::int64_t end = begin + plan.piece < plan.inner ? begin + plan.piece : plan.inner;
    double running = 0.0;
    for (std::int64_t o = first_run; o < end_run; ++o) {
      const std::int64_t run = (o * plan.channels + c) * plan.inner;
#pragma unroll 4
      for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
        const float w = to_float(x[run + i]);
        nonfinite |= !isfinite(w);
        if (kept(current, run + i)) running = fold<N>(running, term<N>(w));
      }
    }
    const double total = block_fold<N>(running, warp_values);
    if (threadIdx.x == 0) partials[item] = total;
  }
  if (nonfinite) atomicOr(status, kNonFinite);
}

// Columns layout: item = (row group g, tile t) -> partials[g * channels + c] for the tile's slices c.
template <class T, NormOrder N>
__global__ void column_partials_kernel(const T* __restrict__ x, const std::uint64_t* __restrict__ current,
                                       SlicePlan plan, double* __restrict__ partials, int* status) {
  __shared__ double column_values[kThreads];
  const std::int64_t length = plan.channels * plan.inner;  // a row of the matrix
  const std::int64_t tile_columns = plan.channels_per_tile * plan.inner;
  const std::int64_t items = plan.groups * plan.tiles;
  bool nonfinite = false;
  for (std::int64_t item = blockIdx.x; item < items; item += gridDim.x) {  // the same for the whole block
    const std::int64_t g = item / plan.tiles, t = item - g * plan.tiles;
    const std::int64_t first_channel = t * plan.channels_per_tile;
    const std::int64_t column = first_channel * plan.inner + threadIdx.x;
    const std::int64_t first_row = g * plan.row_group;
    const std::int64_t end_row = first_row + plan.row_group < plan.outer ? first_row + plan.row_group : plan.outer;
    double running = 0.0;
    if (threadIdx.x < tile_columns && column < length) {
#pragma unroll 4
      for (std::int64_t o = first_row; o < end_row; ++o) {
        const std::int64_t flat = o * length + column;
        const float w = to_float(x[flat]);
        nonfinite |= !isfinite(w);
        if (kept(current, flat)) running = fold<N>(running, term<N>(w));
      }
    }
    column_values[threadIdx.x] = running;
    __syncthreads();
    const std::int64_t c = first_channel + threadIdx.x;
    if (threadIdx.x < plan.channels_per_tile && c < plan.channels) {
      double slice = 0.0;
      for (std::int64_t i = 0; i < plan.inner; ++i) slice = fold<N>(slice, column_values[threadIdx.x * plan.inner + i]);
      partials[g * plan.channels + c] = slice;
    }
    __syncthreads();  // column_values is rewritten by the next item
  }
  if (nonfinite) atomicOr(status, kNonFinite);
}

// norms[c] = finish(fold of partials[c * slice_stride + p * piece_stride], p = 0, 1, ... in order).
template <NormOrder N>
__global__ void finish_kernel(const double* __restrict__ partials, std::int64_t channels, std::int64_t pieces,
                              std::int64_t slice_stride, std::int64_t piece_stride, double* __restrict__ norms) {
  for (std::int64_t c = global_thread(); c < channels; c += grid_threads()) {
    double running = 0.0;
    for (std::int64_t p = 0; p < pieces; ++p) running = fold<N>(running, partials[c * slice_stride + p * piece_stride]);
    norms[c] = finish<N>(running);
  }
}

// Flat index of the top-left element of block b (row-major over [matrices, grid_rows, grid_cols]).
__device__ __forceinline__ std::int64_t first_flat_of_block(const BlockGrid& grid, std::int64_t b) {
  const std::int64_t per_matrix = grid.grid_rows * grid.grid_cols;
  const std::int64_t matrix = b / per_matrix, within = b - matrix * per_matrix;
  const std::int64_t first_row = matrix * grid.rows + (within / grid.grid_cols) * grid.block_rows;
  return first_row * grid.cols + (within % grid.grid_cols) * grid.block_cols;
}

// One thread a block, rows then columns in order: the CPU's order, so the same double.
template <class T, NormOrder N>
__global__ void block_norms_thread_kernel(const T* __restrict__ x, const std::uint64_t* __restrict__ current,
                                          BlockGrid grid, double* __restrict__ norms, int* status) {
  bool nonfinite = false;
  for (std::int64_t b = global_thread(); b < grid.blocks; b += grid_threads()) {
    const std::int64_t first = first_flat_of_block(grid, b);
    double running = 0.0;
    for (std::int64_t r = 0; r < grid.block_rows; ++r)
#pragma unroll 4
      for (std::int64_t j = 0; j < grid.block_cols; ++j) {
        const std::int64_t flat = first + r * grid.cols + j;
        const float w = to_float(x[flat]);
        nonfinite |= !isfinite(w);
        if (kept(current, flat)) running = fold<N>(running, term<N>(w));
      }
    norms[b] = finish<N>(running);
  }
  if (nonfinite) atomicOr(status, kNonFinite);
}

// One warp a block: lane l takes elements l, l + 32, ... of the block in row-major order, then the shuffle tree.
template <class T, NormOrder N>
__global__ void block_norms_warp_kernel(const T* __restrict__ x, const std::uint64_t* __restrict__ current,
                                        BlockGrid grid, double* __restrict__ norms, int* status) {
  const int lane = threadIdx.x % 32;
  const std::int64_t elements = grid.block_rows * grid.block_cols;
  const std::int64_t warps = grid_threads() / 32;
  const std::int64_t step_rows = 32 / grid.block_cols, step_cols = 32 % grid.block_cols;
  bool nonfinite = false;
  for (std::int64_t b = global_thread() / 32; b < grid.blocks; b += warps) {  // the same for the whole warp
    const std::int64_t first = first_flat_of_block(grid, b);
    std::int64_t r = lane / grid.block_cols, j = lane % grid.block_cols;  // element e = r * block_cols + j
    double running = 0.0;
#pragma unroll 4
    for (std::int64_t e = lane; e < elements; e += 32) {
      const std::int64_t flat = first + r * grid.cols + j;
      const float w = to_float(x[flat]);
      nonfinite |= !isfinite(w);
      if (kept(current, flat)) running = fold<N>(running, term<N>(w));
      r += step_rows;  // e + 32 as (r, j)
      j += step_cols;
      if (j >= grid.block_cols) {
        j -= grid.block_cols;
        ++r;
      }
    }
    running = warp_fold<N>(running);
    if (lane == 0) norms[b] = finish<N>(running);
  }
  if (nonfinite) atomicOr(status, kNonFinite);
}

// Launchers: the plan's kernels on `stream`, with the status word at `status`.
template <class T, NormOrder N>
void slice_norms(const T* x, const std::uint64_t* current, const SlicePlan& plan, double* partials, double* norms,
                 int* status, cudaStream_t stream) {
  if (plan.columns) {
    const std::int64_t items = plan.groups * plan.tiles;
    column_partials_kernel<T, N><<<grid_blocks(items * kThreads, kThreads), kThreads, 0, stream>>>(
        x, current, plan, partials, status);
    SHRINK_CUDA_CHECK_LAUNCH(column_partials_kernel);
    finish_kernel<N><<<grid_blocks(plan.channels, kThreads), kThreads, 0, stream>>>(
        partials, plan.channels, plan.groups, 1, plan.channels, norms);
  } else {
    const std::int64_t items = plan.channels * plan.groups * plan.pieces;
    segment_partials_kernel<T, N><<<grid_blocks(items * kThreads, kThreads), kThreads, 0, stream>>>(
        x, current, plan, partials, status);
    SHRINK_CUDA_CHECK_LAUNCH(segment_partials_kernel);
    const std::int64_t per_slice = plan.groups * plan.pieces;
    finish_kernel<N><<<grid_blocks(plan.channels, kThreads), kThreads, 0, stream>>>(
        partials, plan.channels, per_slice, per_slice, 1, norms);
  }
  SHRINK_CUDA_CHECK_LAUNCH(finish_kernel);
}

template <class T, NormOrder N>
void block_norms(const T* x, const std::uint64_t* current, const BlockGrid& grid, double* norms, int* status,
                 cudaStream_t stream) {
  if (grid.block_rows * grid.block_cols < kExactBlockElements) {
    block_norms_thread_kernel<T, N><<<grid_blocks(grid.blocks, kThreads), kThreads, 0, stream>>>(x, current, grid,
                                                                                                  norms, status);
    SHRINK_CUDA_CHECK_LAUNCH(block_norms_thread_kernel);
  } else {
    block_norms_warp_kernel<T, N><<<grid_blocks(grid.blocks * 32, kThreads), kThreads, 0, stream>>>(x, current, grid,
                                                                                                     norms, status);
    SHRINK_CUDA_CHECK_LAUNCH(block_norms_warp_kernel);
  }
}

}  // namespace norms
}  // namespace shrink::cuda::kernels
