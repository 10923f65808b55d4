// Sparsity report: pruned elements of each named mask and of all of them together.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/prune/mask.hpp"

namespace shrink::prune {

struct TensorSparsity {
  std::string name;
  std::int64_t elements = 0;
  std::int64_t pruned = 0;
  double sparsity = 0.0;  // pruned / elements, 0 for no elements
};

struct SparsityReport {
  std::vector<TensorSparsity> tensors;  // in the order given
  std::int64_t elements = 0;            // over every tensor
  std::int64_t pruned = 0;
  double sparsity = 0.0;  // pruned / elements: the overall sparsity, weighted by tensor size
};

inline SparsityReport sparsity_report(const std::vector<std::pair<std::string, const Mask*>>& masks) {
  SparsityReport report;
  for (const auto& [name, mask] : masks) {
    if (mask == nullptr) fail("shrink::prune::sparsity_report", "masks", name + ": a null mask", "a mask");
    const std::int64_t pruned = mask->count_pruned();
    report.tensors.push_back({name, mask->size(), pruned, mask->sparsity()});
    report.elements += mask->size();
    report.pruned += pruned;
  }
  report.sparsity = report.elements ? static_cast<double>(report.pruned) / static_cast<double>(report.elements) : 0.0;
  return report;
}

}  // namespace shrink::prune
