// Norms of slices and blocks of a weight tensor (summed in double), and the pick of the k lowest scores.
//
// NormOrder::l1 is sum |w|, l2 is sqrt(sum w^2), inf is max |w|: torch.norm's p = 1, 2 and inf. The sums run in
// double, one element after another in row-major order, so they do not depend on the view's strides.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/prune/mask.hpp"

namespace shrink::prune {

enum class NormOrder { l1, l2, inf };

inline const char* norm_name(NormOrder n) {
  switch (n) {
    case NormOrder::l1: return "l1";
    case NormOrder::l2: return "l2";
    case NormOrder::inf: return "inf";
  }
  return "unknown";
}

// Folds one weight into a running norm; finish_norm turns the running value into the norm.
inline void accumulate_norm(double& running, float w, NormOrder n) {
  const double magnitude = std::fabs(static_cast<double>(w));
  switch (n) {
    case NormOrder::l1: running += magnitude; break;
    case NormOrder::l2: running += magnitude * magnitude; break;  // exact: a float squared fits a double
    case NormOrder::inf: running = std::max(running, magnitude); break;
  }
}

inline double finish_norm(double running, NormOrder n) { return n == NormOrder::l2 ? std::sqrt(running) : running; }

inline void require_norm_order(NormOrder n, const char* function) {
  if (n != NormOrder::l1 && n != NormOrder::l2 && n != NormOrder::inf)
    fail(function, "n", static_cast<int>(n), "NormOrder::l1, l2 or inf");
}

// Norm of every slice along `axis` (normalised) over all other dims; elements `keep` prunes count as zero.
// The view must be a checked, finite host view.
inline std::vector<double> masked_slice_norms(const TensorView<const float>& weights, NormOrder n, int axis,
                                              const Mask* keep) {
  const AxisSplit split = split_at_axis(weights.shape(), axis);
  const bool axis_is_last = axis == weights.rank() - 1;
  const std::int64_t length = cpu::row_length(weights.shape());
  const std::int64_t stride = cpu::row_stride(weights.strides());
  std::vector<double> running(static_cast<std::size_t>(split.channels), 0.0);
  cpu::for_each_row(weights.shape(), weights.strides(), [&](std::int64_t row, std::int64_t offset) {
    const float* w = weights.data() + offset;
    const std::int64_t first = row * length;
    // Unless the axis is the last dim, a whole row lies in one slice.
    const std::int64_t row_channel = axis_is_last ? 0 : (first / split.inner) % split.channels;
    for (std::int64_t i = 0; i < length; ++i) {
      if (keep != nullptr && !keep->kept(first + i)) continue;
      accumulate_norm(running[static_cast<std::size_t>(axis_is_last ? i : row_channel)], w[i * stride], n);
    }
  });
  for (double& r : running) r = finish_norm(r, n);
  return running;
}

// Indices of the k lowest of n scores: ascending by score, and among equal scores the higher index first
// (amount.hpp's tie rule), so the lower index is kept. Returned in no particular order.
template <class Score>
std::vector<std::int64_t> lowest_k(const Score* scores, std::int64_t n, std::int64_t k) {
  if (k <= 0) return {};
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (k < n) {
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), [scores](std::int64_t a, std::int64_t b) {
      return scores[a] < scores[b] || (scores[a] == scores[b] && a > b);
    });
    order.resize(static_cast<std::size_t>(k));
  }
  return order;
}

// Norm of each slice of `weights` along `dim` (negative counts from the end), taken over every other dim:
// result[c] = || weights[..., c, ...] ||_n, as torch.nn.utils.prune's _compute_norm (in double, not float).
inline std::vector<double> slice_norms(const TensorView<const float>& weights, NormOrder n, int dim) {
  const char* fn = "shrink::prune::slice_norms";
  require_host_view(weights, fn, "weights");
  require_nonempty(weights, fn, "weights");
  const int axis = normalize_axis(dim, weights.rank(), fn, "dim");
  require_norm_order(n, fn);
  cpu::require_finite(weights, fn, "weights");
  return masked_slice_norms(weights, n, axis, nullptr);
}

// Checks the block tiling of the last two dims of the weights' shape; `function` names the caller in the errors.
inline void require_block_tiling(const Shape& shape, std::int64_t block_rows, std::int64_t block_cols,
                                 const char* function) {
  if (shape.rank < 2)
    fail(function, "weights.shape", to_string(shape), "a matrix [rows, cols], or a stack of them [..., rows, cols]");
  const std::int64_t rows = shape[shape.rank - 2];
  const std::int64_t cols = shape[shape.rank - 1];
  if (block_rows < 1) fail(function, "block_rows", block_rows, "a positive block height");
  if (block_cols < 1) fail(function, "block_cols", block_cols, "a positive block width");
  if (rows % block_rows != 0)
    fail(function, "block_rows", block_rows,
         "a divisor of the matrix rows (weights.shape " + to_string(shape) + "): blocks tile the matrix");
  if (cols % block_cols != 0)
    fail(function, "block_cols", block_cols,
         "a divisor of the matrix cols (weights.shape " + to_string(shape) + "): blocks tile the matrix");
}

inline void require_block_tiling(const TensorView<const float>& weights, std::int64_t block_rows,
                                 std::int64_t block_cols, const char* function) {
  require_block_tiling(weights.shape(), block_rows, block_cols, function);
}

namespace detail {

// Block norms of a checked, finite view, indexed row-major over [..., rows / block_rows, cols / block_cols].
inline std::vector<double> block_norms_unchecked(const TensorView<const float>& weights, std::int64_t block_rows,
                                                 std::int64_t block_cols, NormOrder n) {
  const std::int64_t rows = weights.size(weights.rank() - 2);
  const std::int64_t cols = weights.size(weights.rank() - 1);
  const std::int64_t grid_cols = cols / block_cols;
  const std::int64_t stride = cpu::row_stride(weights.strides());
  std::vector<double> running(static_cast<std::size_t>(weights.numel() / (block_rows * block_cols)), 0.0);
  cpu::for_each_row(weights.shape(), weights.strides(), [&](std::int64_t row, std::int64_t offset) {
    const float* w = weights.data() + offset;
    // Matrices stacked in the leading dims: row `row` is row (row % rows) of matrix (row / rows).
    const std::int64_t block_row = (row / rows) * (rows / block_rows) + (row % rows) / block_rows;
    double* blocks = running.data() + block_row * grid_cols;
    for (std::int64_t j = 0; j < cols; ++j) accumulate_norm(blocks[j / block_cols], w[j * stride], n);
  });
  for (double& r : running) r = finish_norm(r, n);
  return running;
}

}  // namespace detail

// Norm of each block_rows x block_cols block tiling the last two dims of `weights` (rank >= 2; leading dims
// stack matrices): result[b] for block b row-major over the grid [..., rows / block_rows, cols / block_cols].
inline std::vector<double> block_norms(const TensorView<const float>& weights, std::int64_t block_rows,
                                       std::int64_t block_cols, NormOrder n = NormOrder::l2) {
  const char* fn = "shrink::prune::block_norms";
  require_host_view(weights, fn, "weights");
  require_block_tiling(weights, block_rows, block_cols, fn);
  require_nonempty(weights, fn, "weights");
  require_norm_order(n, fn);
  cpu::require_finite(weights, fn, "weights");
  return detail::block_norms_unchecked(weights, block_rows, block_cols, n);
}

}  // namespace shrink::prune
