// Iterative magnitude pruning: a fraction of what remains (torch's PruningContainer), or up to a target sparsity.
//
// torch applies a second l1_unstructured to a parameter that already has a mask through PruningContainer: the
// amount counts the elements still kept (round(amount * kept), or an int count of at most kept), the smallest |w|
// among them are pruned, and the result is combined with the old mask. Elements already pruned stay pruned.
// prune_to_sparsity instead names the total: it prunes the smallest kept |w| until round(target * n) of the n
// elements are pruned; it never unprunes, so a target at or below the current sparsity returns the mask as is.
// Weights should be the original (unmasked) values, as torch's `weight_orig`; the values under pruned elements are
// not read for ranking but must still be finite. Ties as in amount.hpp, over the kept elements in global order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/threshold.hpp"
#include "shrink/prune/unstructured.hpp"

namespace shrink::prune {

namespace detail {

inline void require_target_sparsity(double target, const char* function) {
  if (!(target >= 0.0 && target <= 1.0)) fail(function, "target_sparsity", target, "a fraction in [0, 1]");
}

// Prunes more kept elements of the sources until round(target * total elements) are pruned in all.
template <class T>
std::vector<Mask> masks_to_sparsity(const std::vector<WeightSource<T>>& sources, double target, const char* function) {
  require_target_sparsity(target, function);
  check_sources(sources, function, "weights");
  std::int64_t elements = 0;
  for (const auto& s : sources) elements += s.view.numel();
  const std::int64_t candidates = count_candidates(sources);
  const std::int64_t wanted = Amount::fraction(target).of(elements, function);
  const std::int64_t more = std::max<std::int64_t>(0, wanted - (elements - candidates));
  return threshold_masks(sources, select_threshold(sources, more, candidates, function, "weights"));
}

template <class T>
std::vector<WeightSource<T>> sources_with_masks(const std::vector<TensorView<const T>>& weights,
                                                const std::vector<Mask>& current, const char* function) {
  if (current.size() != weights.size())
    fail(function, "current.size", current.size(), "one mask a tensor (" + std::to_string(weights.size()) + ")");
  std::vector<WeightSource<T>> sources = sources_of(weights);
  for (std::size_t s = 0; s < sources.size(); ++s) sources[s].current = &current[s];
  return sources;
}

}  // namespace detail

// torch's l1_unstructured on a parameter that already has a mask: prunes amount.of(kept) of the kept elements with
// the smallest |w|; the result keeps what both it and `current` keep.
template <class T>
Mask l1_unstructured_mask(const TensorView<T>& weights, Amount amount, const Mask& current) {
  using Element = std::remove_const_t<T>;
  const std::vector<detail::WeightSource<Element>> sources{{TensorView<const Element>(weights), &current}};
  return std::move(detail::magnitude_masks(sources, amount, "shrink::prune::l1_unstructured_mask").front());
}

// torch's global_unstructured over parameters that already have masks: amount.of(kept over all tensors) of the
// kept elements, under one threshold.
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const float>>& weights, Amount amount,
                                                   const std::vector<Mask>& current) {
  return detail::global_magnitude_masks(weights, amount, &current, "shrink::prune::global_unstructured_masks");
}
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const half>>& weights, Amount amount,
                                                   const std::vector<Mask>& current) {
  return detail::global_magnitude_masks(weights, amount, &current, "shrink::prune::global_unstructured_masks");
}
inline std::vector<Mask> global_unstructured_masks(const std::vector<TensorView<const bfloat16>>& weights,
                                                   Amount amount, const std::vector<Mask>& current) {
  return detail::global_magnitude_masks(weights, amount, &current, "shrink::prune::global_unstructured_masks");
}

// Prunes the kept elements of smallest |w| until round(target_sparsity * n) of the n elements are pruned.
template <class T>
Mask prune_to_sparsity(const TensorView<T>& weights, double target_sparsity, const Mask& current) {
  using Element = std::remove_const_t<T>;
  const std::vector<detail::WeightSource<Element>> sources{{TensorView<const Element>(weights), &current}};
  return std::move(detail::masks_to_sparsity(sources, target_sparsity, "shrink::prune::prune_to_sparsity").front());
}

// From a dense start: the l1_unstructured mask of round(target_sparsity * n) elements.
template <class T>
Mask prune_to_sparsity(const TensorView<T>& weights, double target_sparsity) {
  using Element = std::remove_const_t<T>;
  const std::vector<detail::WeightSource<Element>> sources{{TensorView<const Element>(weights), nullptr}};
  return std::move(detail::masks_to_sparsity(sources, target_sparsity, "shrink::prune::prune_to_sparsity").front());
}

// Global form: round(target_sparsity * all elements) pruned over every tensor together, under one threshold.
inline std::vector<Mask> global_prune_to_sparsity(const std::vector<TensorView<const float>>& weights,
                                                  double target_sparsity, const std::vector<Mask>& current) {
  constexpr const char* function = "shrink::prune::global_prune_to_sparsity";
  return detail::masks_to_sparsity(detail::sources_with_masks(weights, current, function), target_sparsity, function);
}
inline std::vector<Mask> global_prune_to_sparsity(const std::vector<TensorView<const half>>& weights,
                                                  double target_sparsity, const std::vector<Mask>& current) {
  constexpr const char* function = "shrink::prune::global_prune_to_sparsity";
  return detail::masks_to_sparsity(detail::sources_with_masks(weights, current, function), target_sparsity, function);
}
inline std::vector<Mask> global_prune_to_sparsity(const std::vector<TensorView<const bfloat16>>& weights,
                                                  double target_sparsity, const std::vector<Mask>& current) {
  constexpr const char* function = "shrink::prune::global_prune_to_sparsity";
  return detail::masks_to_sparsity(detail::sources_with_masks(weights, current, function), target_sparsity, function);
}

}  // namespace shrink::prune
