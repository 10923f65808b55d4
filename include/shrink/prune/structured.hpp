// Ln-structured pruning masks: whole slices along one dim with the smallest Ln norm, as torch's ln_structured.
//
// One-shot (torch.nn.utils.prune.ln_structured on an unpruned tensor): of the size(dim) slices along `dim`
// (rows or output channels: dim 0; input channels: dim 1; negative dims count from the end), the
// k = amount.of(size(dim)) with the smallest norm over all other dims are pruned, torch keeping the top
// size(dim) - k. Equal norms: the higher index is pruned first (amount.hpp).
//
// Iterative (ln_structured again on a pruned tensor, torch's PruningContainer._combine_masks): the slices that
// `current` has not pruned entirely are the candidates; k = amount.of(candidates), norms are taken over the
// masked weights (weights * current, so original or already-masked weights give the same mask), and the result
// is `current` with the k candidates of smallest norm pruned as well.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::prune {

namespace detail {

// Host, rank >= 2 (torch needs a dim for "channels"), non-empty, valid n; returns the normalised dim.
inline int check_structured_weights(const TensorView<const float>& weights, NormOrder n, int dim,
                                    const char* function) {
  require_host_view(weights, function, "weights");
  if (weights.rank() < 2)
    fail(function, "weights.shape", to_string(weights.shape()), "a tensor of rank >= 2, so that slices have elements");
  require_nonempty(weights, function, "weights");
  require_norm_order(n, function);
  return normalize_axis(dim, weights.rank(), function, "dim");
}

// Prunes every element of slice `slice` along the split's channel axis.
inline void prune_slice(Mask& mask, const AxisSplit& split, std::int64_t slice) {
  for (std::int64_t o = 0; o < split.outer; ++o) {
    const std::int64_t first = (o * split.channels + slice) * split.inner;
    for (std::int64_t i = 0; i < split.inner; ++i) mask.prune(first + i);
  }
}

}  // namespace detail

// Keeps all but the amount.of(size(dim)) slices along `dim` with the smallest n-norm.
inline Mask ln_structured_mask(const TensorView<const float>& weights, Amount amount, NormOrder n, int dim) {
  const char* fn = "shrink::prune::ln_structured_mask";
  const int axis = detail::check_structured_weights(weights, n, dim, fn);
  const std::int64_t slices = weights.size(axis);
  const std::int64_t k = amount.of(slices, fn);
  cpu::require_finite(weights, fn, "weights");

  const std::vector<double> norms = masked_slice_norms(weights, n, axis, nullptr);
  const AxisSplit split = split_at_axis(weights.shape(), axis);
  Mask mask(weights.shape());
  for (std::int64_t slice : lowest_k(norms.data(), slices, k)) detail::prune_slice(mask, split, slice);
  return mask;
}

// Iterative form: `current` (the mask so far, shape of weights) with amount.of(candidates) more of the slices
// it has not pruned entirely pruned, ranked by the n-norm of weights * current.
inline Mask ln_structured_mask(const TensorView<const float>& weights, Amount amount, NormOrder n, int dim,
                               const Mask& current) {
  const char* fn = "shrink::prune::ln_structured_mask";
  const int axis = detail::check_structured_weights(weights, n, dim, fn);
  if (current.shape() != weights.shape())
    fail(fn, "current.shape", to_string(current.shape()), "the shape of weights, " + to_string(weights.shape()));
  const AxisSplit split = split_at_axis(weights.shape(), axis);

  // torch: keep_channel = mask.sum(other dims) != 0.
  std::vector<bool> candidate(static_cast<std::size_t>(split.channels), false);
  for (std::int64_t o = 0; o < split.outer; ++o)
    for (std::int64_t c = 0; c < split.channels; ++c) {
      const std::int64_t first = (o * split.channels + c) * split.inner;
      for (std::int64_t i = 0; i < split.inner && !candidate[static_cast<std::size_t>(c)]; ++i)
        if (current.kept(first + i)) candidate[static_cast<std::size_t>(c)] = true;
    }
  std::vector<std::int64_t> candidates;
  for (std::int64_t c = 0; c < split.channels; ++c)
    if (candidate[static_cast<std::size_t>(c)]) candidates.push_back(c);
  const std::int64_t k = amount.of(static_cast<std::int64_t>(candidates.size()), fn);
  cpu::require_finite(weights, fn, "weights");

  const std::vector<double> norms = masked_slice_norms(weights, n, axis, &current);
  std::vector<double> candidate_norms;
  candidate_norms.reserve(candidates.size());
  for (std::int64_t c : candidates) candidate_norms.push_back(norms[static_cast<std::size_t>(c)]);
  Mask mask = current;
  // Candidates are in ascending slice order, so the tie rule on their positions is the rule on slice indices.
  for (std::int64_t at : lowest_k(candidate_norms.data(), static_cast<std::int64_t>(candidates.size()), k))
    detail::prune_slice(mask, split, candidates[static_cast<std::size_t>(at)]);
  return mask;
}

}  // namespace shrink::prune
