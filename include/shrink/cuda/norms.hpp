// Host API of the CUDA structured-pruning norms (compiled in cuda/norms.cu; plain C++, no CUDA headers).
//
// The norms of prune/norm.hpp on the device: slice_norms (one norm per slice along `dim`, over every other dim: rows
// or output channels are dim 0, input channels dim 1) and block_norms (block_rows x block_cols tiles of the last two
// dims, row-major over the grid [..., rows / block_rows, cols / block_cols]), optionally under a current mask (the
// device words of a prune::Mask of the weights' shape: pruned elements count as zero, as masked_slice_norms).
// Weights are float, half or bfloat16 (16-bit values widen exactly to float, then to double, so they give the CPU's
// norms of the same values as float); norms are doubles written to device memory.
//
// Numbers (device code: shrink/cuda/kernels/norms.cuh), against the CPU on the same values:
//   - NormOrder::inf: exactly (a max does not depend on the order).
//   - block_norms with blocks of fewer than kExactBlockElements elements: exactly, every order (one thread sums a
//     block in the CPU's row-major order).
//   - slice_norms l1 / l2, and larger blocks: the sum runs in double in a fixed order that is not the CPU's one-after-
//     another order (pieces of a slice reduced in parallel, then the pieces in order). Every term is >= 0 (|w| or
//     w^2, both exact in double), so any order is within gamma(m-1) = (m-1) u / (1 - (m-1) u) of the exact sum (u =
//     2^-53, m terms; Higham, Accuracy and Stability, 4.2), and the two sums within twice that of each other: below
//     1e-12 relative for slices of up to 4500 elements, about sqrt(m) u in practice for longer ones. The sqrt of l2
//     halves the relative difference.
// Deterministic: the same shape gives the same order on every run and device (no floating-point atomics).
//
// Non-finite weights: a NaN or +-inf anywhere, kept by the mask or not, or-s kNonFinite into the status word (the
// CPU throws before computing); the norms are then meaningless.
//
// The pick stays on the host: copy the norms back (8 bytes a slice or block, small next to the weights) and rank them
// as the CPU does (prune::lowest_k and its tie rule; ln_structured_mask / block_mask build the mask).
//
// Two phases, as CUB: *_workspace_bytes(...), then the call, which enqueues on `stream`, allocates nothing and returns
// at once; Synchronize::yes waits and throws shrink::Error naming a failed device-side check. Host checks (shrink::
// Error, nothing launched): a contiguous non-empty view on the current CUDA device, aligned pointers, a valid dim,
// NormOrder and block tiling, a large enough workspace.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::cuda {

// Blocks of fewer elements than this are summed by one thread in the CPU's order (exact); larger ones by a warp.
inline constexpr std::int64_t kExactBlockElements = 256;

// Workspace of slice_norms over a tensor of `shape` along `dim` (status word and per-piece partial sums).
std::size_t slice_norms_workspace_bytes(const Shape& shape, int dim);

// norms[c] = || weights[..., c, ...] ||_n for each of the shape[dim] slices along dim (negative counts from the end),
// as prune::slice_norms; `current` (nullable, 8-byte aligned): the mask's words, elements it prunes count as zero.
// T: float, half, bfloat16.
template <class T>
void slice_norms(TensorView<const T> weights, const std::uint64_t* current, prune::NormOrder n, int dim,
                 double* norms, Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// Workspace of block_norms: the status word.
std::size_t block_norms_workspace_bytes();

// norms[b] for each of the numel / (block_rows * block_cols) blocks tiling the last two dims (rank >= 2), as
// prune::block_norms; `current` as for slice_norms.
template <class T>
void block_norms(TensorView<const T> weights, const std::uint64_t* current, std::int64_t block_rows,
                 std::int64_t block_cols, prune::NormOrder n, double* norms, Workspace workspace, Stream stream,
                 Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
