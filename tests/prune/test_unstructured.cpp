// Tests for shrink/prune/unstructured.hpp: torch's masks, the tie rule, exact counts, random masks, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/prune/unstructured.hpp"
#include "support/golden.hpp"
#include "support/prune_golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

using test::amount_from_golden;
using test::mask_from_golden;

Shape shape_of(const std::vector<std::int64_t>& sizes) { return Shape(sizes); }

// shrink's rule, by sorting: order by |w| (float bits), then by global index descending; prune the first k.
std::vector<std::uint8_t> reference_keep(const std::vector<float>& values, std::int64_t k) {
  std::vector<std::int64_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](std::int64_t i) { return std::fabs(values[static_cast<std::size_t>(i)]); };
  std::sort(order.begin(), order.end(),
            [&](std::int64_t a, std::int64_t b) { return key(a) != key(b) ? key(a) < key(b) : a > b; });
  std::vector<std::uint8_t> keep(values.size(), 1);
  for (std::int64_t j = 0; j < k; ++j) keep[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] = 0;
  return keep;
}

bool has_prefix(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("l1_unstructured_mask matches torch, and the tie rule where |w| ties", "[prune][unstructured][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/prune_unstructured.golden")) {
    if (!has_prefix(c.name, "l1/")) continue;
    INFO(c.name);
    const Shape shape = shape_of(c.ints("shape"));
    const std::vector<float> w = c.floats("weights");
    const Mask torch_mask = mask_from_golden(shape, c.ints("mask"));
    const Mask mask = l1_unstructured_mask(make_view(w, shape), amount_from_golden(c, "amount_kind", "amount"));
    CHECK(mask.count_pruned() == torch_mask.count_pruned());
    if (c.name.find("/distinct/") != std::string::npos)
      CHECK(mask == torch_mask);
    else
      CHECK(mask.to_bytes() == reference_keep(w, torch_mask.count_pruned()));
    ++checked;
  }
  CHECK(checked == 2 * 24);
}

TEST_CASE("global_unstructured_masks matches torch over three tensors", "[prune][unstructured][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/prune_unstructured.golden")) {
    if (!has_prefix(c.name, "global/")) continue;
    INFO(c.name);
    std::vector<std::vector<float>> storage;
    std::vector<Shape> shapes;
    std::vector<TensorView<const float>> views;
    const auto tensors = static_cast<std::size_t>(c.ints("tensors")[0]);
    for (std::size_t i = 0; i < tensors; ++i) {
      storage.push_back(c.floats("weights" + std::to_string(i)));
      shapes.push_back(shape_of(c.ints("shape" + std::to_string(i))));
    }
    for (std::size_t i = 0; i < tensors; ++i) views.push_back(make_view(storage[i], shapes[i]));
    const std::vector<Mask> masks = global_unstructured_masks(views, amount_from_golden(c, "amount_kind", "amount"));
    REQUIRE(masks.size() == tensors);
    std::vector<float> all;
    std::vector<std::uint8_t> torch_keep, keep;
    for (std::size_t i = 0; i < tensors; ++i) {
      const Mask torch_mask = mask_from_golden(shapes[i], c.ints("mask" + std::to_string(i)));
      if (c.name.find("/distinct/") != std::string::npos) CHECK(masks[i] == torch_mask);
      all.insert(all.end(), storage[i].begin(), storage[i].end());
      const auto t = torch_mask.to_bytes(), s = masks[i].to_bytes();
      torch_keep.insert(torch_keep.end(), t.begin(), t.end());
      keep.insert(keep.end(), s.begin(), s.end());
    }
    const auto pruned = std::count(torch_keep.begin(), torch_keep.end(), 0);
    CHECK(std::count(keep.begin(), keep.end(), 0) == pruned);
    CHECK(keep == reference_keep(all, pruned));
    ++checked;
  }
  CHECK(checked == 12);
}

TEST_CASE("l1_unstructured_mask prunes exactly round(amount * n) by the tie rule on random inputs",
          "[prune][unstructured]") {
  std::mt19937 rng(17);
  for (int trial = 0; trial < 60; ++trial) {
    const std::size_t n = 1 + rng() % 3000;
    std::vector<float> w = test::random_values(n, static_cast<unsigned>(trial));
    if (trial % 3 == 0)
      for (float& x : w) x = std::round(x * 4.0f) / 4.0f;  // ties, zeros of both signs
    const double fraction = static_cast<double>(rng() % 1001) / 1000.0;
    const auto k = static_cast<std::int64_t>(std::nearbyint(fraction * static_cast<double>(n)));
    INFO("n = " << n << ", amount = " << fraction);
    const Mask mask = l1_unstructured_mask(make_view(w), Amount::fraction(fraction));
    CHECK(mask.count_pruned() == k);
    CHECK(mask.to_bytes() == reference_keep(w, k));
  }
}

TEST_CASE("l1_unstructured_mask gives the same mask on every SIMD level", "[prune][unstructured]") {
  std::vector<float> w = test::random_values(5000, 23);
  for (std::size_t i = 0; i < w.size(); i += 3) w[i] = std::round(w[i] * 8.0f) / 8.0f;  // ties across words
  const cpu::SimdLevel saved = cpu::simd_level();
  for (double fraction : {0.0, 0.1, 0.5, 0.77, 1.0}) {
    const Mask best = l1_unstructured_mask(make_view(w), Amount::fraction(fraction));
    cpu::simd_level() = cpu::SimdLevel::scalar;
    const Mask scalar = l1_unstructured_mask(make_view(w), Amount::fraction(fraction));
    cpu::simd_level() = saved;
    CHECK(best == scalar);
    CHECK(best.to_bytes() == reference_keep(w, static_cast<std::int64_t>(std::nearbyint(fraction * 5000))));
  }
}

TEST_CASE("l1_unstructured_mask reads strided views and half/bfloat16 weights", "[prune][unstructured]") {
  const std::vector<float> storage = test::random_values(8 * 12, 21);
  const TensorView<const float> strided(storage.data(), Shape{4, 3, 2}, Strides{24, 4, 1});  // 2 of every 4 columns
  std::vector<float> dense;
  for (std::int64_t a = 0; a < 4; ++a)
    for (std::int64_t b = 0; b < 3; ++b)
      for (std::int64_t c = 0; c < 2; ++c) dense.push_back(strided(a, b, c));
  for (std::int64_t k : {0, 5, 13, 24}) {
    const Mask mask = l1_unstructured_mask(strided, Amount::count(k));
    CHECK(mask.shape() == Shape{4, 3, 2});
    CHECK(mask.to_bytes() == reference_keep(dense, k));
  }

  std::vector<half> h;
  std::vector<bfloat16> b;
  std::vector<float> hf, bf;
  for (float x : test::random_values(333, 22)) {
    h.push_back(half(x));
    hf.push_back(h.back().to_float());
    b.push_back(bfloat16(x));
    bf.push_back(b.back().to_float());
  }
  CHECK(l1_unstructured_mask(make_view(h), Amount::fraction(0.4)).to_bytes() == reference_keep(hf, 133));
  CHECK(l1_unstructured_mask(make_view(b), Amount::fraction(0.4)).to_bytes() == reference_keep(bf, 133));
  const std::vector<TensorView<const half>> halves{make_view(h), make_view(h)};
  CHECK(global_unstructured_masks(halves, Amount::count(10))[1].count_pruned() == 5);  // ties: the later copy first
}

TEST_CASE("global_unstructured_masks breaks ties by tensor position, then row-major index", "[prune][unstructured]") {
  const std::vector<float> a{1.0f, 0.5f, 0.5f}, b{0.5f, -0.5f, 2.0f};
  auto masks = global_unstructured_masks({make_view(a), make_view(b)}, Amount::count(3));
  CHECK(masks[0].to_bytes() == std::vector<std::uint8_t>{1, 1, 0});
  CHECK(masks[1].to_bytes() == std::vector<std::uint8_t>{0, 0, 1});
  masks = global_unstructured_masks({make_view(a), make_view(b)}, Amount::fraction(0.5));  // 3 of 6
  CHECK(masks[0].count_pruned() + masks[1].count_pruned() == 3);
}

TEST_CASE("random_unstructured_mask prunes exactly round(amount * n), uniformly and reproducibly",
          "[prune][unstructured][random]") {
  const Mask a = random_unstructured_mask(Shape{10, 10}, Amount::fraction(0.35), 42);
  CHECK(a.count_pruned() == 35);
  CHECK(random_unstructured_mask(Shape{10, 10}, Amount::fraction(0.35), 42) == a);
  CHECK(random_unstructured_mask(Shape{10, 10}, Amount::fraction(0.35), 43) != a);
  CHECK(random_unstructured_mask(Shape{5}, Amount::fraction(0.5), 1).count_pruned() == 2);
  CHECK(random_unstructured_mask(Shape{7}, Amount::count(7), 1).count_pruned() == 7);
  CHECK(random_unstructured_mask(Shape{7}, Amount::count(0), 1).count_pruned() == 0);
  const std::vector<float> w(12, 1.0f);
  CHECK(random_unstructured_mask(make_view(w), Amount::count(4), 5) ==
        random_unstructured_mask(Shape{12}, Amount::count(4), 5));

  // The same bits everywhere: this mask's words are fixed by mt19937_64 and the multiply-shift draw.
  const Mask fixed = random_unstructured_mask(Shape{64}, Amount::count(8), 2024);
  CHECK(fixed.words()[0] == 18158443242913234686ull);

  // Each element pruned with probability k / n: 20000 draws of 3 of 6, each element's count near 10000.
  std::vector<int> pruned(6, 0);
  for (std::uint64_t seed = 0; seed < 20000; ++seed) {
    const Mask m = random_unstructured_mask(Shape{6}, Amount::count(3), seed);
    for (std::int64_t i = 0; i < 6; ++i) pruned[static_cast<std::size_t>(i)] += !m.kept(i);
  }
  for (int count : pruned) CHECK(std::abs(count - 10000) < 400);  // ~5.7 standard deviations
}

TEST_CASE("unstructured pruners refuse bad input and name it", "[prune][unstructured][errors]") {
  std::vector<float> w = test::random_values(40, 31);
  w[23] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(
      l1_unstructured_mask(make_view(w), Amount::fraction(0.5)),
      Catch::Contains("l1_unstructured_mask") && Catch::Contains("weights[23] = -inf") && Catch::Contains("finite"));
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(w), Amount::count(0)), Catch::Contains("weights[23]"));
  const std::vector<float> fine = test::random_values(6, 32);
  CHECK_THROWS_WITH(global_unstructured_masks({make_view(fine), make_view(fine), make_view(w)}, Amount::count(1)),
                    Catch::Contains("global_unstructured_masks") && Catch::Contains("weights[2][23] = -inf"));
  const std::vector<float> none;
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(none), Amount::count(0)),
                    Catch::Contains("weights = an empty tensor"));
  CHECK_THROWS_WITH(global_unstructured_masks({make_view(fine), make_view(none)}, Amount::count(0)),
                    Catch::Contains("weights[1] = an empty tensor"));
  CHECK_THROWS_WITH(global_unstructured_masks(std::vector<TensorView<const float>>{}, Amount::count(0)),
                    Catch::Contains("weights = an empty list"));
  CHECK_THROWS_WITH(l1_unstructured_mask(make_view(fine), Amount::count(7)),
                    Catch::Contains("amount = 7") && Catch::Contains("at most the 6"));
  CHECK_THROWS_WITH(global_unstructured_masks({make_view(fine), make_view(fine)}, Amount::count(13)),
                    Catch::Contains("amount = 13"));
  CHECK_THROWS_WITH(random_unstructured_mask(Shape{0, 3}, Amount::count(0), 1), Catch::Contains("shape = [0, 3]"));
  CHECK_THROWS_WITH(random_unstructured_mask(Shape{3}, Amount::count(4), 1), Catch::Contains("amount = 4"));
  CHECK_THROWS_WITH(
      l1_unstructured_mask(TensorView<const float>(fine.data(), Shape{6}, Device::cuda()), Amount::count(1)),
      Catch::Contains("a CUDA view"));
}
