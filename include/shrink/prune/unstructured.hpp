// Unstructured pruning masks as torch.nn.utils.prune makes them: L1 magnitude (one tensor or global) and random.
//
// l1_unstructured_mask prunes amount.of(n) elements of smallest |w| (torch's l1_unstructured: round(amount * n),
// half to even, or an int count); global_unstructured_masks does so under one threshold over all tensors, as
// torch's global_unstructured with L1Unstructured does over the concatenation of the flattened tensors. Ties
// follow amount.hpp (the higher global index is pruned first); torch.topk leaves them unspecified, so with no ties
// in |w| shrink and torch return the same masks. Weights are float, half or bfloat16 views of any rank and strides.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/threshold.hpp"

namespace shrink::prune {

namespace detail {

// Prunes amount.of(candidates) of the sources' candidates by |w|: the shared body of every magnitude pruner.
template <class T>
std::vector<Mask> magnitude_masks(const std::vector<WeightSource<T>>& sources, Amount amount, const char* function) {
  check_sources(sources, function, "weights");
  const std::int64_t candidates = count_candidates(sources);
  const std::int64_t k = amount.of(candidates, function);
  return threshold_masks(sources, select_threshold(sources, k, candidates, function, "weights"));
}

// Global pruning with current masks, one a tensor, or none (an empty list).
template <class T>
std::vector<Mask> global_magnitude_masks(const std::vector<TensorView<const T>>& weights, Amount amount,
                                         const std::vector<Mask>* current, const char* function) {
  std::vector<WeightSource<T>> sources = sources_of(weights);
  if (current != nullptr) {
    if (current->size() != weights.size())
      fail(function, "current.size", current->size(), "one mask a tensor (" + std::to_string(weights.size()) + ")");
    for (std::size_t s = 0; s < sources.size(); ++s) sources[s].current = &(*current)[s];
  }
  return magnitude_masks(sources, amount, function);
}

// Uniform integer in [0, range) from 64 random bits: Lemire's multiply-shift, rejecting the few products that
// would favour some results (range > 0). Unlike std::uniform_int_distribution, the same on every platform.
inline std::uint64_t uniform_below(std::mt19937_64& rng, std::uint64_t range) {
  __extension__ using uint128 = unsigned __int128;
  uint128 product = static_cast<uint128>(rng()) * range;
  auto low = static_cast<std::uint64_t>(product);
  if (low < range) {
    const std::uint64_t reject_below = (0 - range) % range;  // 2^64 mod range
    while (low < reject_below) {
      product = static_cast<uint128>(rng()) * range;
      low = static_cast<std::uint64_t>(product);
    }
  }
  return static_cast<std::uint64_t>(product >> 64);
}

}  // namespace detail

// Prunes amount.of(n) of the n elements with the smallest |w|.
template <class T>
Mask l1_unstructured_mask(const TensorView<T>& weights, Amount amount) {
  using Element = std::remove_const_t<T>;
  const std::vector<detail::WeightSource<Element>> sources{{TensorView<const Element>(weights), nullptr}};
  return std::move(detail::magnitude_masks(sources, amount, "shrink::prune::l1_unstructured_mask").front());
}

// One threshold over every tensor's |w|: amount.of(total elements) pruned overall, one mask a tensor.
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const float>>& weights, Amount amount) {
  return detail::global_magnitude_masks(weights, amount, nullptr, "shrink::prune::global_unstructured_masks");
}
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const half>>& weights, Amount amount) {
  return detail::global_magnitude_masks(weights, amount, nullptr, "shrink::prune::global_unstructured_masks");
}
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const bfloat16>>& weights,
                                                   Amount amount) {
  return detail::global_magnitude_masks(weights, amount, nullptr, "shrink::prune::global_unstructured_masks");
}

// Prunes exactly amount.of(n) distinct elements of a tensor of this shape, each k-subset equally likely, the same
// on every platform for a seed (std::mt19937_64 and Floyd's sampling: for j = n - k .. n - 1, draw r in [0, j] and
// prune r, or j when r is already pruned). torch's random_unstructured draws from its own generator instead.
inline Mask random_unstructured_mask(const Shape& shape, Amount amount, std::uint64_t seed) {
  constexpr const char* function = "shrink::prune::random_unstructured_mask";
  for (int d = 0; d < shape.rank; ++d)
    if (shape[d] < 0) fail(function, "shape", to_string(shape), "non-negative sizes");
  const std::int64_t n = shape.product();
  if (n == 0) fail(function, "shape", to_string(shape), "at least one element");
  const std::int64_t k = amount.of(n, function);
  Mask mask(shape);
  std::mt19937_64 rng(seed);
  for (std::int64_t j = n - k; j < n; ++j) {
    const auto r = static_cast<std::int64_t>(detail::uniform_below(rng, static_cast<std::uint64_t>(j) + 1));
    mask.prune(mask.kept(r) ? r : j);
  }
  return mask;
}

// The same for the shape of a weight view (its values are not read).
template <class T>
Mask random_unstructured_mask(const TensorView<T>& weights, Amount amount, std::uint64_t seed) {
  return random_unstructured_mask(weights.shape(), amount, seed);
}

}  // namespace shrink::prune
