// Tests for shrink/prune/iterative.hpp: torch's PruningContainer goldens, monotonic sparsity, targets, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "shrink/prune/iterative.hpp"
#include "support/golden.hpp"
#include "support/prune_golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

using test::amount_from_golden;
using test::mask_from_golden;

// shrink's rule among the kept elements: smallest |w| first, the higher index first among equal |w|.
Mask reference_prune(const std::vector<float>& w, const Mask& current, std::int64_t k) {
  std::vector<std::int64_t> order;
  for (std::int64_t i = 0; i < current.size(); ++i)
    if (current.kept(i)) order.push_back(i);
  auto key = [&](std::int64_t i) { return std::fabs(w[static_cast<std::size_t>(i)]); };
  std::sort(order.begin(), order.end(),
            [&](std::int64_t a, std::int64_t b) { return key(a) != key(b) ? key(a) < key(b) : a > b; });
  Mask out = current;
  for (std::int64_t j = 0; j < k; ++j) out.prune(order[static_cast<std::size_t>(j)]);
  return out;
}

bool subset(const Mask& a, const Mask& b) { return mask_and(a, b) == a; }  // a keeps only what b keeps

}  // namespace

TEST_CASE("l1_unstructured_mask with a current mask matches torch's PruningContainer", "[prune][iterative][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/prune_unstructured.golden")) {
    if (c.name.rfind("iterative/", 0) != 0) continue;
    INFO(c.name);
    const Shape shape(c.ints("shape"));
    const std::vector<float> w = c.floats("weights");
    const Mask torch1 = mask_from_golden(shape, c.ints("mask1")), torch2 = mask_from_golden(shape, c.ints("mask2"));
    const Mask mask1 = l1_unstructured_mask(make_view(w, shape), amount_from_golden(c, "first_kind", "first"));
    const Mask mask2 = l1_unstructured_mask(make_view(w, shape), amount_from_golden(c, "second_kind", "second"), mask1);
    CHECK(mask1.count_pruned() == torch1.count_pruned());
    CHECK(mask2.count_pruned() == torch2.count_pruned());
    CHECK(subset(mask2, mask1));
    if (c.name.find("/distinct/") != std::string::npos) {
      CHECK(mask1 == torch1);
      CHECK(mask2 == torch2);
    } else {
      CHECK(mask2 == reference_prune(w, mask1, mask1.count_kept() - torch2.count_kept()));
    }
    ++checked;
  }
  CHECK(checked == 10);
}

TEST_CASE("iterative pruning prunes round(amount * kept) each step, and sparsity only grows", "[prune][iterative]") {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    const std::size_t n = 1 + rng() % 2000;
    std::vector<float> w = test::random_values(n, static_cast<unsigned>(trial + 100));
    if (trial % 2)
      for (float& x : w) x = std::round(x * 2.0f) / 2.0f;
    Mask mask(Shape{static_cast<std::int64_t>(n)});
    double last_sparsity = 0.0;
    for (int step = 0; step < 6; ++step) {
      const double amount = static_cast<double>(rng() % 101) / 100.0;
      const std::int64_t kept = mask.count_kept();
      const auto k = static_cast<std::int64_t>(std::nearbyint(amount * static_cast<double>(kept)));
      INFO("n = " << n << ", step " << step << ", amount " << amount);
      const Mask next = l1_unstructured_mask(make_view(w), Amount::fraction(amount), mask);
      CHECK(next.count_kept() == kept - k);
      CHECK(subset(next, mask));
      CHECK(next == reference_prune(w, mask, k));
      CHECK(next.sparsity() >= last_sparsity);
      last_sparsity = next.sparsity();
      mask = next;
    }
  }
}

TEST_CASE("prune_to_sparsity reaches round(target * n) pruned and never unprunes", "[prune][iterative]") {
  const std::vector<float> w = test::random_values(1001, 7);
  Mask mask(Shape{7, 11, 13});
  const TensorView<const float> view = make_view(w, Shape{7, 11, 13});
  double last = 0.0;
  for (double target : {0.0, 0.1, 0.25, 0.5, 0.5, 0.8, 0.95, 1.0}) {
    INFO("target " << target);
    const Mask next = prune_to_sparsity(view, target, mask);
    CHECK(next.count_pruned() == static_cast<std::int64_t>(std::nearbyint(target * 1001)));
    CHECK(subset(next, mask));
    CHECK(next.sparsity() >= last);
    last = next.sparsity();
    mask = next;
  }
  // A target below the current sparsity keeps the mask as it is.
  const Mask half_pruned = prune_to_sparsity(view, 0.5);
  CHECK(half_pruned.count_pruned() == 500);  // 500.5 rounds to even
  CHECK(prune_to_sparsity(view, 0.2, half_pruned) == half_pruned);
  // From a random (not magnitude) mask it prunes the smallest of what is left.
  const Mask random = random_unstructured_mask(Shape{7, 11, 13}, Amount::fraction(0.3), 9);
  const Mask more = prune_to_sparsity(view, 0.6, random);
  CHECK(more == reference_prune(w, random, 601 - random.count_pruned()));
}

TEST_CASE("global pruning with current masks counts the kept elements of every tensor", "[prune][iterative]") {
  const std::vector<float> a = test::random_values(300, 11), b = test::random_values(77, 12);
  const std::vector<TensorView<const float>> views{make_view(a), make_view(b, Shape{7, 11})};
  const std::vector<Mask> first = global_unstructured_masks(views, Amount::fraction(0.4));
  CHECK(first[0].count_pruned() + first[1].count_pruned() == 151);  // 150.8
  const std::vector<Mask> second = global_unstructured_masks(views, Amount::fraction(0.5), first);
  CHECK(second[0].count_pruned() + second[1].count_pruned() == 151 + 113);  // 0.5 of 226 kept
  CHECK(subset(second[0], first[0]));
  CHECK(subset(second[1], first[1]));
  // The same as pruning the concatenation with its concatenated mask.
  std::vector<float> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::vector<std::uint8_t> keep = first[0].to_bytes(), keep_b = first[1].to_bytes();
  keep.insert(keep.end(), keep_b.begin(), keep_b.end());
  const Mask joined =
      l1_unstructured_mask(make_view(all), Amount::fraction(0.5), Mask::from_bytes(Shape{377}, keep.data()));
  std::vector<std::uint8_t> joined_bytes = joined.to_bytes(), got = second[0].to_bytes(), got_b = second[1].to_bytes();
  got.insert(got.end(), got_b.begin(), got_b.end());
  CHECK(got == joined_bytes);

  const std::vector<Mask> target = global_prune_to_sparsity(views, 0.9, second);
  CHECK(target[0].count_pruned() + target[1].count_pruned() == 339);  // 339.3
  CHECK(subset(target[0], second[0]));
}

TEST_CASE("iterative pruners refuse bad input and name it", "[prune][iterative][errors]") {
  std::vector<float> w = test::random_values(30, 13);
  const Mask current(Shape{30});
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(w), Amount::fraction(0.5), Mask(Shape{5, 6})),
                    Catch::Contains("current.shape = [5, 6]") && Catch::Contains("[30]"));
  Mask some(Shape{30});
  for (std::int64_t i = 0; i < 25; ++i) some.prune(i);
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(w), Amount::count(6), some),
                    Catch::Contains("amount = 6") && Catch::Contains("at most the 5"));
  CHECK(l1_unstructured_mask(make_view(w), Amount::count(5), some).count_kept() == 0);
  CHECK(l1_unstructured_mask(make_view(w), Amount::fraction(0.5), Mask(Shape{30}, false)).count_kept() == 0);
  CHECK_THROWS_WITH(prune_to_sparsity(make_view(w), 1.5, current), Catch::Contains("target_sparsity = 1.5"));
  CHECK_THROWS_WITH(prune_to_sparsity(make_view(w), std::nan(""), current), Catch::Contains("target_sparsity"));
  w[29] = std::nanf("");
  CHECK_THROWS_WITH(prune_to_sparsity(make_view(w), 0.5, current), Catch::Contains("weights[29] = nan"));
  // A NaN under an already pruned element is refused too.
  Mask pruned_last(Shape{30});
  pruned_last.prune(29);
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(w), Amount::count(1), pruned_last), Catch::Contains("weights[29]"));
  const std::vector<float> fine = test::random_values(30, 14);
  CHECK_THROWS_WITH(global_unstructured_masks({make_view(fine)}, Amount::count(1), std::vector<Mask>{}),
                    Catch::Contains("current.size = 0"));
  CHECK_THROWS_WITH(global_prune_to_sparsity({make_view(fine), make_view(fine)}, 0.5, {current, Mask(Shape{3})}),
                    Catch::Contains("current[1].shape = [3]"));
}
