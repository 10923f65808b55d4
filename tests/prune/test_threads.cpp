// The magnitude threshold and its masks on the executor: the same threshold and mask words on every executor and
// thread count, for float and bfloat16 weights, with and without ties at the threshold and current masks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "shrink/prune/threshold.hpp"
#include "shrink/prune/unstructured.hpp"
#include "support/executors.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;
using shrink::test::require_same_bytes_on_every_executor;

namespace {

constexpr std::int64_t kRows = 2048, kCols = 4096;  // 8M elements: four counting pieces

std::vector<std::uint64_t> threshold_and_masks(const std::vector<TensorView<const float>>& weights, Amount amount) {
  const std::vector<Mask> masks = global_unstructured_masks(weights, amount);
  std::vector<std::uint64_t> out;
  for (const Mask& m : masks) out.insert(out.end(), m.words().begin(), m.words().end());
  return out;
}

}  // namespace

TEST_CASE("the magnitude threshold and its masks are the same on every executor", "[prune][threads]") {
  auto w = shrink::test::random_values(static_cast<std::size_t>(kRows * kCols), 31);
  const TensorView<const float> view(w.data(), Shape{kRows, kCols});
  SECTION("float, no ties") {
    require_same_bytes_on_every_executor([&] {
      const MagnitudeThreshold t = select_magnitude_threshold(view, kRows * kCols / 2);
      return std::vector<std::int64_t>{t.bits, t.below, t.at, t.at_pruned};
    });
    require_same_bytes_on_every_executor([&] { return threshold_and_masks({view}, Amount::fraction(0.5)); });
  }
  SECTION("float, many ties at the threshold (the ordered pass)") {
    for (std::size_t i = 0; i < w.size(); i += 3) w[i] = 0.25f;
    require_same_bytes_on_every_executor([&] { return threshold_and_masks({view}, Amount::fraction(0.2)); }, 1);
  }
  SECTION("bfloat16 weights and a list of tensors") {
    std::vector<bfloat16> wb(w.begin(), w.end());
    const TensorView<const bfloat16> half_view(wb.data(), Shape{kRows, kCols});
    require_same_bytes_on_every_executor([&] {
      const MagnitudeThreshold t = select_magnitude_threshold(half_view, kRows * kCols / 3);
      return std::vector<std::int64_t>{t.bits, t.below, t.at, t.at_pruned};
    });
    const TensorView<const float> top(w.data(), Shape{kRows / 2, kCols});
    const TensorView<const float> bottom(w.data() + kRows / 2 * kCols, Shape{kRows / 2, kCols});
    require_same_bytes_on_every_executor([&] { return threshold_and_masks({top, bottom}, Amount::fraction(0.7)); });
  }
}
