// How much to prune, read as torch.nn.utils.prune reads `amount`, and the tie rule every pruner shares.
//
// Amount::fraction(f), f in [0, 1], prunes round(f * n) of n candidates, rounding half to even as
// Python's round() does (torch's _compute_nparams_toprune): 0.5 of 5 prunes 2, 0.5 of 7 prunes 4.
// Amount::count(k) prunes exactly k, which must not exceed n.
//
// Ties: candidates are ordered by score, and among equal scores the one with the higher index counts as
// the smaller, so it is pruned first and the lower index is kept. torch.topk leaves the order of ties
// unspecified; with no ties shrink and torch prune the same elements.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"

namespace shrink::prune {

class Amount {
 public:
  static Amount fraction(double f) {
    if (!(f >= 0.0 && f <= 1.0)) fail("shrink::prune::Amount::fraction", "amount", f, "a fraction in [0, 1]");
    return Amount(f, -1);
  }
  static Amount count(std::int64_t k) {
    if (k < 0) fail("shrink::prune::Amount::count", "amount", k, "a non-negative count");
    return Amount(0.0, k);
  }

  bool is_fraction() const { return count_ < 0; }
  double fraction_value() const { return fraction_; }
  std::int64_t count_value() const { return count_; }

  // How many of n candidates to prune; `function` names the caller in the error for a count above n.
  std::int64_t of(std::int64_t n, const char* function) const {
    if (is_fraction()) return static_cast<std::int64_t>(std::nearbyint(fraction_ * static_cast<double>(n)));
    if (count_ > n)
      fail(function, "amount", count_, "a count of at most the " + std::to_string(n) + " candidates");
    return count_;
  }

 private:
  Amount(double f, std::int64_t k) : fraction_(f), count_(k) {}

  double fraction_ = 0.0;
  std::int64_t count_ = -1;  // -1: a fraction
};

}  // namespace shrink::prune
