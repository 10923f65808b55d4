// Tests for shrink/prune/block.hpp and block_norms: numpy-reference goldens, properties, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/prune/block.hpp"
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

// Per block of a [rows, cols] mask: 1 all kept, 0 all pruned, -1 mixed; row-major over the block grid.
std::vector<int> block_states(const Mask& mask, std::int64_t block_rows, std::int64_t block_cols) {
  const std::int64_t rows = mask.shape()[0], cols = mask.shape()[1];
  std::vector<int> states;
  for (std::int64_t br = 0; br < rows; br += block_rows)
    for (std::int64_t bc = 0; bc < cols; bc += block_cols) {
      std::int64_t kept = 0;
      for (std::int64_t r = br; r < br + block_rows; ++r)
        for (std::int64_t c = bc; c < bc + block_cols; ++c) kept += mask.kept(r * cols + c);
      states.push_back(kept == block_rows * block_cols ? 1 : kept == 0 ? 0 : -1);
    }
  return states;
}

}  // namespace

TEST_CASE("block_mask equals the numpy reference", "[prune][block][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/prune_structured.golden")) {
    if (!starts_with(c.name, "block")) continue;
    INFO(c.name);
    const std::vector<float> w = c.floats("weights");
    const Shape shape(c.ints("shape"));
    const std::vector<std::int64_t>& bits = c.ints("mask");
    const std::vector<std::uint8_t> bytes(bits.begin(), bits.end());
    const Mask mask = block_mask(TensorView<const float>(w.data(), shape), golden_amount(c), c.ints("block_rows")[0],
                                 c.ints("block_cols")[0], golden_norm(c.text("n")));
    CHECK(mask == Mask::from_bytes(shape, bytes.data()));
    ++checked;
  }
  CHECK(checked == 7);
}

TEST_CASE("block_norms numbers blocks row-major over the grid", "[prune][block]") {
  const std::vector<float> w{1, 1,  0, 3,  //
                             1, 1,  4, 0,  //
                             0, 0,  2, 2,  //
                             0, -1, 2, 2};
  const TensorView<const float> view(w.data(), Shape{4, 4});
  CHECK(block_norms(view, 2, 2) == std::vector<double>{2, 5, 1, 4});
  CHECK(block_norms(view, 2, 2, NormOrder::l1) == std::vector<double>{4, 7, 1, 8});
  CHECK(block_norms(view, 2, 2, NormOrder::inf) == std::vector<double>{1, 4, 1, 2});
  CHECK(block_norms(view, 4, 1, NormOrder::l1) == std::vector<double>{2, 3, 8, 7});
  // Blocks 0 (norm 2) and 2 (norm 1) have the lowest l2 norms.
  CHECK(block_mask(view, Amount::count(2), 2, 2).to_bytes() ==
        std::vector<std::uint8_t>{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1});
  // inf norms tie at 1 for blocks 0 and 2: the higher index goes first.
  CHECK(block_mask(view, Amount::count(1), 2, 2, NormOrder::inf).to_bytes() ==
        std::vector<std::uint8_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1});
}

TEST_CASE("block_mask prunes exactly round(amount * blocks) whole blocks of the lowest norms",
          "[prune][block][property]") {
  const std::int64_t rows = 24, cols = 32;
  const std::vector<float> w = test::random_values(rows * cols, 41, 0.7f);
  const TensorView<const float> view(w.data(), Shape{rows, cols});
  const std::vector<std::pair<std::int64_t, std::int64_t>> blocks{{1, 4}, {4, 4}, {8, 8}, {2, 8}, {3, 1}, {24, 32}};
  for (const auto& [block_rows, block_cols] : blocks) {
    const std::int64_t count = rows / block_rows * (cols / block_cols);
    for (NormOrder n : {NormOrder::l1, NormOrder::l2, NormOrder::inf}) {
      const std::vector<double> norms = block_norms(view, block_rows, block_cols, n);
      Mask previous(view.shape());
      for (double f : {0.0, 0.2, 0.5, 0.75, 1.0}) {
        INFO(block_rows << "x" << block_cols << " " << norm_name(n) << " amount " << f);
        const Mask mask = block_mask(view, Amount::fraction(f), block_rows, block_cols, n);
        const std::vector<int> states = block_states(mask, block_rows, block_cols);
        std::int64_t pruned = 0;
        for (int s : states) {
          CHECK(s != -1);
          pruned += s == 0;
        }
        CHECK(pruned == static_cast<std::int64_t>(std::nearbyint(f * static_cast<double>(count))));
        CHECK(mask.count_pruned() == pruned * block_rows * block_cols);
        for (std::size_t a = 0; a < states.size(); ++a)
          for (std::size_t b = 0; b < states.size(); ++b)
            if (states[a] == 0 && states[b] == 1) CHECK(norms[a] <= norms[b]);
        CHECK(mask_and(mask, previous) == mask);  // monotonic sparsity
        previous = mask;
      }
    }
  }
}

TEST_CASE("full-height and full-width blocks are ln-structured columns and rows", "[prune][block][property]") {
  const std::vector<float> w = test::random_values(10 * 12, 8);
  const TensorView<const float> view(w.data(), Shape{10, 12});
  for (NormOrder n : {NormOrder::l1, NormOrder::l2, NormOrder::inf}) {
    CHECK(block_mask(view, Amount::fraction(0.4), 10, 1, n) == ln_structured_mask(view, Amount::fraction(0.4), n, 1));
    CHECK(block_mask(view, Amount::count(3), 1, 12, n) == ln_structured_mask(view, Amount::count(3), n, 0));
  }
}

TEST_CASE("block_mask ranks the blocks of stacked matrices together and reads strided views", "[prune][block]") {
  const std::vector<float> w = test::random_values(3 * 8 * 8, 19);
  const TensorView<const float> stacked(w.data(), Shape{3, 8, 8});
  const Mask mask = block_mask(stacked, Amount::fraction(0.5), 4, 4);
  CHECK(mask.count_pruned() == 6 * 16);
  // The stack as one [24, 8] matrix has the same blocks in the same order.
  CHECK(mask.words() ==
        block_mask(TensorView<const float>(w.data(), Shape{24, 8}), Amount::fraction(0.5), 4, 4).words());

  const TensorView<const float> transposed(w.data(), Shape{8, 24}, Strides{1, 8});
  const std::vector<float> copy = contiguous_copy(transposed);
  const TensorView<const float> dense(copy.data(), Shape{8, 24});
  CHECK(block_mask(transposed, Amount::fraction(0.3), 2, 4, NormOrder::l1) ==
        block_mask(dense, Amount::fraction(0.3), 2, 4, NormOrder::l1));
  CHECK(block_norms(transposed, 8, 8) == block_norms(dense, 8, 8));
}

TEST_CASE("block_mask refuses bad input, naming the argument", "[prune][block][bad-input]") {
  std::vector<float> w = test::random_values(8 * 12, 23);
  const TensorView<const float> view(w.data(), Shape{8, 12});
  const char* fn = "shrink::prune::block_mask";
  CHECK_THROWS_WITH(block_mask(view, Amount::count(1), 0, 4), Catch::Contains(fn) && Catch::Contains("block_rows = 0"));
  CHECK_THROWS_WITH(block_mask(view, Amount::count(1), 4, -2), Catch::Contains("block_cols = -2"));
  CHECK_THROWS_WITH(block_mask(view, Amount::count(1), 3, 4),
                    Catch::Contains("block_rows = 3") && Catch::Contains("divisor") && Catch::Contains("[8, 12]"));
  CHECK_THROWS_WITH(block_mask(view, Amount::count(1), 4, 8), Catch::Contains("block_cols = 8"));
  CHECK_THROWS_WITH(block_mask(TensorView<const float>(w.data(), Shape{96}), Amount::count(1), 1, 4),
                    Catch::Contains("weights.shape = [96]"));
  CHECK_THROWS_WITH(block_mask(TensorView<const float>(w.data(), Shape{0, 12}), Amount::count(0), 1, 4),
                    Catch::Contains("weights") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(block_mask(view, Amount::count(7), 4, 4),
                    Catch::Contains("amount = 7") && Catch::Contains("6 candidates"));
  CHECK_THROWS_WITH(block_norms(view, 5, 4), Catch::Contains("block_norms") && Catch::Contains("block_rows = 5"));
  w[13] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(block_mask(view, Amount::count(1), 4, 4), Catch::Contains("weights[13] = inf"));
  CHECK_THROWS_WITH(block_norms(view, 4, 4), Catch::Contains("weights[13] = inf"));
}
