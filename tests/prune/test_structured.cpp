// Tests for shrink/prune/structured.hpp and the slice norms of norm.hpp: PyTorch goldens, properties, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/prune/norm.hpp"
#include "shrink/prune/structured.hpp"
#include "support/golden.hpp"
#include "support/prune_golden.hpp"
#include "support/random.hpp"
#include "support/strings.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

using test::golden_amount;
using test::golden_norm;
using test::starts_with;

const char* const kGolden = "golden/prune_structured.golden";

Shape golden_shape(const test::GoldenCase& c) { return Shape(c.ints("shape")); }

Mask golden_mask(const test::GoldenCase& c, const std::string& key) {
  const std::vector<std::int64_t>& bits = c.ints(key);
  const std::vector<std::uint8_t> bytes(bits.begin(), bits.end());
  return Mask::from_bytes(golden_shape(c), bytes.data());
}

// Per slice along `axis`: 1 when every element is kept, 0 when every element is pruned, -1 when mixed.
std::vector<int> slice_states(const Mask& mask, int axis) {
  const AxisSplit split = split_at_axis(mask.shape(), axis);
  std::vector<int> states(static_cast<std::size_t>(split.channels));
  for (std::int64_t c = 0; c < split.channels; ++c) {
    std::int64_t kept = 0;
    for (std::int64_t o = 0; o < split.outer; ++o)
      for (std::int64_t i = 0; i < split.inner; ++i) kept += mask.kept((o * split.channels + c) * split.inner + i);
    states[static_cast<std::size_t>(c)] = kept == split.outer * split.inner ? 1 : kept == 0 ? 0 : -1;
  }
  return states;
}

// Every pruned slice's norm is at most every kept slice's norm.
bool pruned_below_kept(const std::vector<int>& states, const std::vector<double>& norms) {
  for (std::size_t a = 0; a < states.size(); ++a)
    for (std::size_t b = 0; b < states.size(); ++b)
      if (states[a] == 0 && states[b] == 1 && norms[a] > norms[b]) return false;
  return true;
}

}  // namespace

TEST_CASE("ln_structured_mask equals torch's ln_structured on inputs without ties", "[prune][structured][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden(kGolden)) {
    if (!starts_with(c.name, "ln_structured/")) continue;
    INFO(c.name);
    const std::vector<float> w = c.floats("weights");
    const TensorView<const float> view(w.data(), golden_shape(c));
    const Mask mask =
        ln_structured_mask(view, golden_amount(c), golden_norm(c.text("n")), static_cast<int>(c.ints("dim")[0]));
    CHECK(mask == golden_mask(c, "mask"));
    ++checked;
  }
  CHECK(checked == 16);
}

TEST_CASE("ln_structured_mask with tied norms prunes torch's count and the higher index first",
          "[prune][structured][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden(kGolden)) {
    if (!starts_with(c.name, "ln_structured_ties/")) continue;
    INFO(c.name);
    const std::vector<float> w = c.floats("weights");
    const TensorView<const float> view(w.data(), golden_shape(c));
    const int dim = static_cast<int>(c.ints("dim")[0]);
    const NormOrder n = golden_norm(c.text("n"));
    const Mask mask = ln_structured_mask(view, golden_amount(c), n, dim);
    const Mask torch_mask = golden_mask(c, "mask");
    CHECK(mask == golden_mask(c, "expected_mask"));
    CHECK(mask.count_pruned() == torch_mask.count_pruned());
    // torch and shrink may break the tie differently, but both prune whole slices of the lowest norms.
    const int axis = normalize_axis(dim, view.rank(), "test");
    const std::vector<double> norms = slice_norms(view, n, dim);
    for (int s : slice_states(torch_mask, axis)) CHECK(s != -1);
    CHECK(pruned_below_kept(slice_states(torch_mask, axis), norms));
    CHECK(pruned_below_kept(slice_states(mask, axis), norms));
    ++checked;
  }
  CHECK(checked == 4);
}

TEST_CASE("iterative ln_structured_mask equals torch's PruningContainer", "[prune][structured][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden(kGolden)) {
    if (!starts_with(c.name, "ln_structured_iterative/")) continue;
    INFO(c.name);
    const std::vector<float> w = c.floats("weights");
    const TensorView<const float> view(w.data(), golden_shape(c));
    const Mask current = golden_mask(c, "current");
    if (c.text("first") == "ln_structured")
      CHECK(ln_structured_mask(view, golden_amount(c, "first_"), golden_norm(c.text("first_n")),
                               static_cast<int>(c.ints("first_dim")[0])) == current);
    const Amount amount = golden_amount(c);
    const NormOrder n = golden_norm(c.text("n"));
    const int dim = static_cast<int>(c.ints("dim")[0]);
    const Mask mask = ln_structured_mask(view, amount, n, dim, current);
    CHECK(mask == golden_mask(c, "mask"));

    // Already-masked weights (what torch hands the second step) give the same mask.
    std::vector<float> masked = w;
    for (std::size_t i = 0; i < masked.size(); ++i)
      if (!current.kept(static_cast<std::int64_t>(i))) masked[i] = 0.0f;
    CHECK(ln_structured_mask(TensorView<const float>(masked.data(), view.shape()), amount, n, dim, current) == mask);
    ++checked;
  }
  CHECK(checked == 7);
}

TEST_CASE("slice_norms gives the l1, l2 and inf norm of each slice", "[prune][structured]") {
  const std::vector<float> w{3, -4, 0,  //
                             1, 2,  -2};
  const TensorView<const float> view(w.data(), Shape{2, 3});
  CHECK(slice_norms(view, NormOrder::l1, 0) == std::vector<double>{7, 5});
  CHECK(slice_norms(view, NormOrder::l2, 0) == std::vector<double>{5, 3});
  CHECK(slice_norms(view, NormOrder::inf, 0) == std::vector<double>{4, 2});
  CHECK(slice_norms(view, NormOrder::l1, -1) == std::vector<double>{4, 6, 2});
  CHECK(slice_norms(view, NormOrder::inf, 1) == std::vector<double>{3, 4, 2});
}

TEST_CASE("equal slice norms prune the higher index first", "[prune][structured]") {
  const std::vector<float> w{1, 1,  //
                             2, 0,  //
                             0, 2,  //
                             5, 5};
  const TensorView<const float> view(w.data(), Shape{4, 2});
  // l1 norms 2, 2, 2, 10: the first prune takes row 2, the next row 1.
  CHECK(ln_structured_mask(view, Amount::count(1), NormOrder::l1, 0).to_bytes() ==
        std::vector<std::uint8_t>{1, 1, 1, 1, 0, 0, 1, 1});
  CHECK(ln_structured_mask(view, Amount::count(2), NormOrder::l1, 0).to_bytes() ==
        std::vector<std::uint8_t>{1, 1, 0, 0, 0, 0, 1, 1});
  CHECK(ln_structured_mask(view, Amount::fraction(0.5), NormOrder::l1, 0) ==
        ln_structured_mask(view, Amount::count(2), NormOrder::l1, 0));
}

TEST_CASE("ln_structured_mask prunes exactly round(amount * size) whole slices of the lowest norms",
          "[prune][structured][property]") {
  const std::vector<Shape> shapes{Shape{13, 7}, Shape{5, 6, 3, 3}, Shape{4, 9, 2}};
  const std::vector<double> fractions{0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0};
  unsigned seed = 11;
  for (const Shape& shape : shapes) {
    const std::vector<float> w = test::random_values(static_cast<std::size_t>(shape.product()), seed++, 1.5f);
    const TensorView<const float> view(w.data(), shape);
    for (int dim = -shape.rank; dim < shape.rank; ++dim) {
      const int axis = normalize_axis(dim, shape.rank, "test");
      for (NormOrder n : {NormOrder::l1, NormOrder::l2, NormOrder::inf}) {
        const std::vector<double> norms = slice_norms(view, n, dim);
        Mask previous(shape);
        for (double f : fractions) {
          INFO("shape " << to_string(shape) << " dim " << dim << " n " << norm_name(n) << " amount " << f);
          const Mask mask = ln_structured_mask(view, Amount::fraction(f), n, dim);
          const std::vector<int> states = slice_states(mask, axis);
          std::int64_t pruned = 0;
          for (int s : states) {
            CHECK(s != -1);
            pruned += s == 0;
          }
          CHECK(pruned == static_cast<std::int64_t>(std::nearbyint(f * static_cast<double>(shape[axis]))));
          CHECK(pruned_below_kept(states, norms));
          CHECK(mask_and(mask, previous) == mask);  // monotonic: a larger amount prunes a superset
          previous = mask;
        }
      }
    }
  }
}

TEST_CASE("iterative ln_structured_mask prunes amount of the slices still alive, on top of current",
          "[prune][structured][property]") {
  const Shape shape{12, 5, 3};
  const std::vector<float> w = test::random_values(static_cast<std::size_t>(shape.product()), 77);
  const TensorView<const float> view(w.data(), shape);
  Mask mask(shape);
  std::int64_t alive = 12;
  for (int step = 0; step < 4; ++step) {
    const Mask next = ln_structured_mask(view, Amount::fraction(0.3), NormOrder::l2, 0, mask);
    CHECK(mask_and(next, mask) == next);  // what was pruned stays pruned
    const std::int64_t newly = static_cast<std::int64_t>(std::nearbyint(0.3 * static_cast<double>(alive)));
    CHECK(next.count_pruned() - mask.count_pruned() == newly * 15);
    alive -= newly;
    mask = next;
  }
  CHECK(alive == 3);  // 12 -> 8 (3.6 rounds to 4) -> 6 (2.4 to 2) -> 4 (1.8 to 2) -> 3 (1.2 to 1)
}

TEST_CASE("ln_structured_mask reads strided views as their row-major elements", "[prune][structured]") {
  const std::vector<float> w = test::random_values(6 * 8, 5);
  // The transpose [8, 6] of a row-major [6, 8] matrix, and its contiguous copy.
  const TensorView<const float> transposed(w.data(), Shape{8, 6}, Strides{1, 8});
  const std::vector<float> copy = contiguous_copy(transposed);
  const TensorView<const float> dense(copy.data(), Shape{8, 6});
  for (int dim : {0, 1}) {
    CHECK(ln_structured_mask(transposed, Amount::fraction(0.5), NormOrder::l2, dim) ==
          ln_structured_mask(dense, Amount::fraction(0.5), NormOrder::l2, dim));
    CHECK(slice_norms(transposed, NormOrder::l1, dim) == slice_norms(dense, NormOrder::l1, dim));
  }
  const Mask current = ln_structured_mask(dense, Amount::count(2), NormOrder::l1, 1);
  CHECK(ln_structured_mask(transposed, Amount::count(3), NormOrder::l1, 0, current) ==
        ln_structured_mask(dense, Amount::count(3), NormOrder::l1, 0, current));
}

TEST_CASE("ln_structured_mask refuses bad input, naming the argument", "[prune][structured][bad-input]") {
  std::vector<float> w = test::random_values(24, 3);
  const TensorView<const float> view(w.data(), Shape{4, 6});
  const char* fn = "shrink::prune::ln_structured_mask";
  CHECK_THROWS_WITH(
      ln_structured_mask(TensorView<const float>(w.data(), Shape{24}), Amount::count(1), NormOrder::l2, 0),
      Catch::Contains(fn) && Catch::Contains("weights.shape = [24]") && Catch::Contains("rank >= 2"));
  CHECK_THROWS_WITH(
      ln_structured_mask(TensorView<const float>(w.data(), Shape{0, 6}), Amount::count(0), NormOrder::l2, 0),
      Catch::Contains("weights") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(1), NormOrder::l2, 2), Catch::Contains("dim = 2"));
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(1), NormOrder::l2, -3), Catch::Contains("dim = -3"));
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(5), NormOrder::l2, 0),
                    Catch::Contains(fn) && Catch::Contains("amount = 5") && Catch::Contains("4 candidates"));
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(1), static_cast<NormOrder>(7), 0), Catch::Contains("n = 7"));
  CHECK_THROWS_WITH(ln_structured_mask(TensorView<const float>(w.data(), Shape{4, 6}, Device::cuda()), Amount::count(1),
                                       NormOrder::l2, 0),
                    Catch::Contains("host memory"));
  w[9] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(1), NormOrder::l2, 0), Catch::Contains("weights[9] = nan"));
  w[9] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(slice_norms(view, NormOrder::l1, 1),
                    Catch::Contains("slice_norms") && Catch::Contains("weights[9] = -inf"));
  CHECK_THROWS_WITH(slice_norms(view, NormOrder::l1, 3), Catch::Contains("dim = 3"));
  w[9] = 1.0f;

  Mask current(Shape{4, 6});
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(1), NormOrder::l2, 0, Mask(Shape{6, 4})),
                    Catch::Contains("current.shape = [6, 4]"));
  for (std::int64_t i = 0; i < 12; ++i) current.prune(i);  // rows 0 and 1 gone: two candidates left
  CHECK_THROWS_WITH(ln_structured_mask(view, Amount::count(3), NormOrder::l2, 0, current),
                    Catch::Contains("amount = 3") && Catch::Contains("2 candidates"));
  const Mask next = ln_structured_mask(view, Amount::count(2), NormOrder::l2, 0, current);
  CHECK(next.count_kept() == 0);
}
