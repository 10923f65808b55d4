// Tests for shrink/prune/mask.hpp, apply.hpp, amount.hpp and report.hpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/apply.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/report.hpp"

using namespace shrink;
using namespace shrink::prune;

TEST_CASE("Mask packs one bit an element, row-major, and keeps the tail bits zero", "[prune][mask]") {
  Mask all(Shape{3, 43});  // 129 elements: three words, the last holding one bit
  CHECK(all.words().size() == 3);
  CHECK(all.words()[2] == 1u);
  CHECK(all.count_kept() == 129);
  all.prune(64);
  all.set(128, false);
  CHECK_FALSE(all.kept(64));
  CHECK(all.words()[1] == ~std::uint64_t{1});
  CHECK(all.count_pruned() == 2);
  CHECK(all.sparsity() == Approx(2.0 / 129));
  CHECK(mask_not(mask_not(all)) == all);
  CHECK(mask_not(Mask(Shape{3, 43})).count_kept() == 0);

  std::vector<std::uint8_t> bytes = all.to_bytes();
  CHECK(Mask::from_bytes(all.shape(), bytes.data()) == all);
  CHECK(Mask(Shape{0, 5}).words().empty());
  CHECK(Mask(Shape{0, 5}).sparsity() == 0.0);
}

TEST_CASE("mask_and prunes what either prunes; mask_or keeps what either keeps", "[prune][mask]") {
  const std::uint8_t a_bytes[] = {1, 1, 0, 0, 1};
  const std::uint8_t b_bytes[] = {1, 0, 1, 0, 1};
  const Mask a = Mask::from_bytes(Shape{5}, a_bytes), b = Mask::from_bytes(Shape{5}, b_bytes);
  CHECK(mask_and(a, b).to_bytes() == std::vector<std::uint8_t>{1, 0, 0, 0, 1});
  CHECK(mask_or(a, b).to_bytes() == std::vector<std::uint8_t>{1, 1, 1, 0, 1});
  CHECK_THROWS_WITH(mask_and(a, Mask(Shape{5, 1})), Catch::Contains("b.shape") && Catch::Contains("[5, 1]"));
}

TEST_CASE("apply_mask zeroes pruned weights of strided views of any element type", "[prune][mask]") {
  std::vector<float> storage(4 * 6, 7.0f);
  const TensorView<float> view(storage.data(), Shape{4, 3}, Strides{6, 2});  // every other column
  Mask mask(Shape{4, 3});
  mask.prune(0);
  mask.prune(5);
  apply_mask(view, mask);
  CHECK(storage[0] == 0.0f);
  CHECK(storage[1] == 7.0f);   // outside the view
  CHECK(storage[6 + 4] == 0.0f);  // element (1, 2)
  CHECK(std::count(storage.begin(), storage.end(), 0.0f) == 2);

  std::vector<half> h(130, half(1.5f));
  Mask long_mask(Shape{130});
  long_mask.prune(129);
  mask_gradient(make_view(h), long_mask);
  CHECK(h[129].to_bits() == 0);
  CHECK(h[128].to_float() == 1.5f);

  std::vector<std::int8_t> q(5, 3);
  CHECK_THROWS_WITH(apply_mask(make_view(q), long_mask), Catch::Contains("mask.shape"));
  CHECK(std::count(q.begin(), q.end(), 3) == 5);  // nothing written
}

TEST_CASE("Amount rounds like Python's round and checks its range", "[prune][amount]") {
  CHECK(Amount::fraction(0.5).of(5, "f") == 2);  // 2.5 rounds to even
  CHECK(Amount::fraction(0.5).of(7, "f") == 4);  // 3.5 rounds to even
  CHECK(Amount::fraction(0.3).of(10, "f") == 3);
  CHECK(Amount::fraction(1.0).of(9, "f") == 9);
  CHECK(Amount::count(4).of(4, "f") == 4);
  CHECK_THROWS_WITH(Amount::count(5).of(4, "prune_it"), Catch::Contains("prune_it") && Catch::Contains("at most"));
  CHECK_THROWS_WITH(Amount::fraction(1.5), Catch::Contains("amount = 1.5"));
  CHECK_THROWS_WITH(Amount::fraction(-0.1), Catch::Contains("[0, 1]"));
  CHECK_THROWS(Amount::fraction(std::nan("")));
  CHECK_THROWS(Amount::count(-1));
}

TEST_CASE("sparsity_report weighs the overall sparsity by tensor size", "[prune][report]") {
  Mask small(Shape{10});
  small.prune(0);
  Mask large(Shape{90}, false);
  const SparsityReport r = sparsity_report({{"small", &small}, {"large", &large}});
  REQUIRE(r.tensors.size() == 2);
  CHECK(r.tensors[0].name == "small");
  CHECK(r.tensors[0].sparsity == Approx(0.1));
  CHECK(r.tensors[1].pruned == 90);
  CHECK(r.elements == 100);
  CHECK(r.pruned == 91);
  CHECK(r.sparsity == Approx(0.91));
}
