// Block sparsity masks: prune whole block_rows x block_cols tiles of a weight matrix with the smallest norm.
//
// Blocks tile the last two dims [rows, cols] of `weights` exactly (rows % block_rows == 0, cols % block_cols == 0);
// leading dims, if any, stack matrices ([experts, out, in]) whose blocks are ranked together. Of the
// numel / (block_rows * block_cols) blocks, amount.of(blocks) with the smallest n-norm (block_norms in norm.hpp)
// are pruned; equal norms prune the higher block index first, blocks numbered row-major over the grid
// [..., rows / block_rows, cols / block_cols]. Typical blocks: 1x4, 4x4, 8x8. Conv weights [O, I, H, W] are
// pruned as the matrix [O, I * H * W] (a contiguous view reshaped), not per kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::prune {

inline Mask block_mask(const TensorView<const float>& weights, Amount amount, std::int64_t block_rows,
                       std::int64_t block_cols, NormOrder n = NormOrder::l2) {
  const char* fn = "shrink::prune::block_mask";
  require_host_view(weights, fn, "weights");
  require_block_tiling(weights, block_rows, block_cols, fn);
  require_nonempty(weights, fn, "weights");
  require_norm_order(n, fn);
  const std::int64_t blocks = weights.numel() / (block_rows * block_cols);
  const std::int64_t k = amount.of(blocks, fn);
  cpu::require_finite(weights, fn, "weights");

  const std::vector<double> norms = detail::block_norms_unchecked(weights, block_rows, block_cols, n);
  const std::int64_t rows = weights.size(weights.rank() - 2);
  const std::int64_t cols = weights.size(weights.rank() - 1);
  const std::int64_t grid_rows = rows / block_rows;
  const std::int64_t grid_cols = cols / block_cols;
  Mask mask(weights.shape());
  for (std::int64_t b : lowest_k(norms.data(), blocks, k)) {
    const std::int64_t matrix = b / (grid_rows * grid_cols);
    const std::int64_t first_row = matrix * rows + (b / grid_cols % grid_rows) * block_rows;
    const std::int64_t first_col = (b % grid_cols) * block_cols;
    for (std::int64_t r = first_row; r < first_row + block_rows; ++r)
      for (std::int64_t c = first_col; c < first_col + block_cols; ++c) mask.prune(r * cols + c);
  }
  return mask;
}

}  // namespace shrink::prune
