// Tests for shrink/prune/wanda.hpp: numpy-reference goldens, ActivationNormObserver, properties, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/prune/wanda.hpp"
#include "support/golden.hpp"
#include "support/prune_golden.hpp"
#include "support/random.hpp"
#include "support/strings.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

using test::golden_amount;
using test::starts_with;

}  // namespace

TEST_CASE("ActivationNormObserver and wanda_mask equal the numpy reference", "[prune][wanda][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/prune_structured.golden")) {
    if (!starts_with(c.name, "wanda")) continue;
    INFO(c.name);
    const Shape batch_shape(c.ints("batch_shape"));
    const std::vector<float> batches = c.floats("batches");
    ActivationNormObserver observer;
    for (std::size_t at = 0; at < batches.size(); at += static_cast<std::size_t>(batch_shape.product()))
      observer.observe(TensorView<const float>(batches.data() + at, batch_shape));
    const std::vector<float> norms = observer.norms();
    CHECK(norms == c.floats("norms"));  // bit for bit: the same sums in the same order

    const std::vector<float> w = c.floats("weights");
    const Shape shape(c.ints("shape"));
    const std::vector<std::int64_t>& bits = c.ints("mask");
    const std::vector<std::uint8_t> bytes(bits.begin(), bits.end());
    CHECK(wanda_mask(TensorView<const float>(w.data(), shape), norms, golden_amount(c)) ==
          Mask::from_bytes(shape, bytes.data()));
    ++checked;
  }
  CHECK(checked == 5);
}

TEST_CASE("ActivationNormObserver sums squares over every token of every batch", "[prune][wanda]") {
  const std::vector<float> x{3, 0, -1,  //
                             4, 2, 0,   //
                             0, 0, 2,   //
                             0, 1, 2};
  ActivationNormObserver whole;
  whole.observe(TensorView<const float>(x.data(), Shape{2, 2, 3}));  // [batch, sequence, features]
  CHECK(whole.norms() == std::vector<float>{5, std::sqrt(5.0f), 3});
  CHECK(whole.tokens_seen() == 4);
  CHECK(whole.features() == 3);

  ActivationNormObserver split;
  split.observe(TensorView<const float>(x.data(), Shape{3}));
  split.observe(TensorView<const float>(x.data() + 3, Shape{3, 3}));
  CHECK(split.sum_of_squares() == whole.sum_of_squares());
  CHECK(split.batches_seen() == 2);

  // Features as the last dim of a strided view: the columns of x's transpose.
  ActivationNormObserver strided;
  strided.observe(TensorView<const float>(x.data(), Shape{3, 4}, Strides{1, 3}));
  CHECK(strided.norms() == std::vector<float>{std::sqrt(10.0f), std::sqrt(20.0f), std::sqrt(4.0f), std::sqrt(5.0f)});
  strided.reset();
  CHECK(strided.batches_seen() == 0);
  CHECK_THROWS(strided.norms());
}

TEST_CASE("ActivationNormObserver refuses bad batches and keeps its state", "[prune][wanda][bad-input]") {
  std::vector<float> x = test::random_values(12, 4);
  ActivationNormObserver observer;
  CHECK_THROWS_WITH(observer.norms(), Catch::Contains("ActivationNormObserver::norms") && Catch::Contains("observe()"));
  observer.observe(TensorView<const float>(x.data(), Shape{3, 4}));
  const std::vector<double> before = observer.sum_of_squares();
  CHECK_THROWS_WITH(observer.observe(TensorView<const float>(x.data(), Shape{4, 3})),
                    Catch::Contains("activations.shape = [4, 3]") && Catch::Contains("4 features"));
  x[6] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(observer.observe(TensorView<const float>(x.data(), Shape{3, 4})),
                    Catch::Contains("activations[6] = nan"));
  x[6] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(observer.observe(TensorView<const float>(x.data(), Shape{1, 3, 4})),
                    Catch::Contains("activations[6] = inf"));
  CHECK_THROWS_WITH(observer.observe(TensorView<const float>(x.data(), Shape{0, 4})),
                    Catch::Contains("activations.shape = [0, 4]"));
  CHECK_THROWS_WITH(observer.observe(TensorView<const float>(x.data(), Shape{3, 4}, Device::cuda())),
                    Catch::Contains("host memory"));
  CHECK(observer.sum_of_squares() == before);
  CHECK(observer.batches_seen() == 1);
  CHECK(observer.tokens_seen() == 3);
}

TEST_CASE("wanda_scores multiply |W| by the input feature norm", "[prune][wanda]") {
  const std::vector<float> w{1,  -2,   3,  //
                             -4, 0.5f, 0};
  const TensorView<const float> view(w.data(), Shape{2, 3});
  const std::vector<float> norms{2, 0.25f, 1};
  CHECK(wanda_scores(view, norms) == std::vector<float>{2, 0.5f, 3, 8, 0.125f, 0});
  // Per row: row 0 prunes column 1 (0.5), row 1 column 2 (0).
  CHECK(wanda_mask(view, norms, Amount::count(1)).to_bytes() == std::vector<std::uint8_t>{1, 0, 1, 1, 1, 0});
  // Equal scores in a row: the higher column goes first.
  const std::vector<float> flat{1, 1, 1, 1};
  const std::vector<float> ones{1, 1, 1, 1};
  CHECK(wanda_mask(TensorView<const float>(flat.data(), Shape{1, 4}), ones, Amount::fraction(0.5)).to_bytes() ==
        std::vector<std::uint8_t>{1, 1, 0, 0});
  // A strided (transposed) weight view scores its row-major elements.
  const TensorView<const float> transposed(w.data(), Shape{3, 2}, Strides{1, 3});
  CHECK(wanda_scores(transposed, {1, 2}) == std::vector<float>{1, 8, 2, 1, 3, 0});
}

TEST_CASE("wanda_mask prunes exactly round(amount * in) of each row, lowest scores first", "[prune][wanda][property]") {
  const std::int64_t out = 16, in = 40;
  const std::vector<float> w = test::random_values(out * in, 31);
  const TensorView<const float> view(w.data(), Shape{out, in});
  const std::vector<float> x = test::random_values(7 * in, 32, 3.0f);
  ActivationNormObserver observer;
  observer.observe(TensorView<const float>(x.data(), Shape{7, in}));
  const std::vector<float> norms = observer.norms();
  const std::vector<float> scores = wanda_scores(view, norms);
  Mask previous(view.shape());
  for (double f : {0.0, 0.1, 0.25, 0.5, 0.6, 0.9, 1.0}) {
    INFO("amount " << f);
    const Mask mask = wanda_mask(view, norms, Amount::fraction(f));
    const std::int64_t k = static_cast<std::int64_t>(std::nearbyint(f * static_cast<double>(in)));
    for (std::int64_t row = 0; row < out; ++row) {
      std::int64_t pruned = 0;
      float highest_pruned = -1.0f, lowest_kept = std::numeric_limits<float>::infinity();
      for (std::int64_t j = 0; j < in; ++j) {
        const float s = scores[static_cast<std::size_t>(row * in + j)];
        if (mask.kept(row * in + j)) {
          lowest_kept = std::fmin(lowest_kept, s);
        } else {
          ++pruned;
          highest_pruned = std::fmax(highest_pruned, s);
        }
      }
      CHECK(pruned == k);
      CHECK(highest_pruned <= lowest_kept);
    }
    CHECK(mask_and(mask, previous) == mask);  // monotonic sparsity
    previous = mask;
  }
  CHECK(wanda_mask(view, norms, Amount::count(7)).count_pruned() == 7 * out);  // a count applies per row

  // With equal feature norms Wanda is per-row magnitude pruning: the activations change the choice.
  const std::vector<float> equal(static_cast<std::size_t>(in), 1.0f);
  const Mask magnitude = wanda_mask(view, equal, Amount::fraction(0.5));
  for (std::int64_t i = 0; i < out * in; ++i) {
    const float a = std::fabs(w[static_cast<std::size_t>(i)]);
    const std::int64_t row = i / in;
    for (std::int64_t j = row * in; j < (row + 1) * in; ++j)
      if (!magnitude.kept(i) && magnitude.kept(j)) CHECK(a <= std::fabs(w[static_cast<std::size_t>(j)]));
  }
  CHECK(magnitude != wanda_mask(view, norms, Amount::fraction(0.5)));
}

TEST_CASE("wanda_scores and wanda_mask refuse bad input, naming the argument", "[prune][wanda][bad-input]") {
  std::vector<float> w = test::random_values(4 * 6, 9);
  const TensorView<const float> view(w.data(), Shape{4, 6});
  std::vector<float> norms(6, 1.0f);
  CHECK_THROWS_WITH(wanda_mask(view, std::vector<float>(5, 1.0f), Amount::count(1)),
                    Catch::Contains("wanda_mask") && Catch::Contains("input_norms.size = 5") &&
                        Catch::Contains("weights.shape[1] = 6"));
  CHECK_THROWS_WITH(wanda_scores(TensorView<const float>(w.data(), Shape{2, 3, 4}), norms),
                    Catch::Contains("wanda_scores") && Catch::Contains("weights.shape = [2, 3, 4]"));
  CHECK_THROWS_WITH(wanda_mask(TensorView<const float>(w.data(), Shape{0, 6}), norms, Amount::count(0)),
                    Catch::Contains("weights.shape = [0, 6]"));
  CHECK_THROWS_WITH(wanda_mask(view, norms, Amount::count(7)),
                    Catch::Contains("amount = 7") && Catch::Contains("6 candidates"));
  norms[2] = -1.0f;
  CHECK_THROWS_WITH(wanda_mask(view, norms, Amount::count(1)), Catch::Contains("input_norms[2] = -1"));
  norms[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(wanda_scores(view, norms), Catch::Contains("input_norms[2] = nan"));
  norms[2] = 1.0f;
  w[17] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(wanda_mask(view, norms, Amount::count(1)), Catch::Contains("weights[17] = -inf"));
  CHECK_THROWS_WITH(wanda_scores(view, norms), Catch::Contains("weights[17] = -inf"));
}

TEST_CASE("wanda_nm_mask keeps the N highest scores of every M along each row", "[prune][wanda][nm]") {
  const std::int64_t out = 8, in = 32;
  const std::vector<float> w = test::random_values(out * in, 41);
  const TensorView<const float> view(w.data(), Shape{out, in});
  std::vector<float> norms(static_cast<std::size_t>(in));
  for (std::int64_t j = 0; j < in; ++j) norms[static_cast<std::size_t>(j)] = static_cast<float>(j % 5) + 0.5f;
  const std::vector<float> scores = wanda_scores(view, norms);
  for (const NmPattern pattern : {NmPattern{2, 4}, NmPattern{1, 4}, NmPattern{4, 8}}) {
    const Mask mask = wanda_nm_mask(view, norms, pattern);
    CHECK(mask == nm_mask(TensorView<const float>(scores.data(), view.shape()), pattern));
    CHECK(is_nm_sparse(mask, pattern));
    CHECK(mask.count_kept() == out * in / pattern.m * pattern.n);
    // The norms change the choice: plain magnitude N:M differs somewhere.
    CHECK(mask != nm_mask(view, pattern));
  }
  CHECK_THROWS_WITH(wanda_nm_mask(view, norms, NmPattern{4, 4}), Catch::Contains("pattern"));
  CHECK_THROWS_WITH(wanda_nm_mask(view, std::vector<float>(3, 1.0f), NmPattern{2, 4}), Catch::Contains("input_norms"));
  CHECK_THROWS_WITH(wanda_nm_mask(TensorView<const float>(w.data(), Shape{out, 30}), norms, NmPattern{2, 4}),
                    Catch::Contains("input_norms"));
}
