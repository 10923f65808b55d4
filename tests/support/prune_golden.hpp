// The pruning goldens' fields as shrink's types: norms, amounts (in either of the goldens' two forms) and masks.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/norm.hpp"
#include "support/golden.hpp"

namespace shrink::test {

// The norm a golden names: "l1", "l2" or "inf".
inline prune::NormOrder golden_norm(const std::string& name) {
  if (name == "l1") return prune::NormOrder::l1;
  if (name == "l2") return prune::NormOrder::l2;
  REQUIRE(name == "inf");
  return prune::NormOrder::inf;
}

// The amount of a case that holds it as <prefix>amount_count or <prefix>amount_fraction.
inline prune::Amount golden_amount(const GoldenCase& c, const std::string& prefix = "") {
  if (c.has(prefix + "amount_count")) return prune::Amount::count(c.ints(prefix + "amount_count")[0]);
  return prune::Amount::fraction(c.doubles(prefix + "amount_fraction")[0]);
}

// The amount of a case that holds its kind ("count" or "fraction") as the text `kind` and its number, real or
// integer, as `value`.
inline prune::Amount amount_from_golden(const GoldenCase& c, const std::string& kind, const std::string& value) {
  const double v = c.reals.count(value) ? c.doubles(value)[0] : static_cast<double>(c.ints(value)[0]);
  return c.text(kind) == "count" ? prune::Amount::count(static_cast<std::int64_t>(v)) : prune::Amount::fraction(v);
}

// A mask of `shape` from a golden's keep flags (1 kept, 0 pruned).
inline prune::Mask mask_from_golden(const Shape& shape, const std::vector<std::int64_t>& keep) {
  std::vector<std::uint8_t> bytes(keep.begin(), keep.end());
  return prune::Mask::from_bytes(shape, bytes.data());
}

}  // namespace shrink::test
