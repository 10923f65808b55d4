// Tests for shrink/prune/nm.hpp: N:M masks against WeightNormSparsifier goldens, a reference, and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/prune/nm.hpp"
#include "support/golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

// Reference: sort each group's indices by |x| descending, index ascending, keep the first min(n, size).
std::vector<std::uint8_t> reference_nm(const std::vector<float>& x, std::int64_t length, NmPattern p) {
  std::vector<std::uint8_t> keep(x.size(), 0);
  for (std::size_t row = 0; row < x.size() / static_cast<std::size_t>(length); ++row)
    for (std::int64_t start = 0; start < length; start += p.m) {
      const std::int64_t size = std::min<std::int64_t>(p.m, length - start);
      std::vector<std::int64_t> idx(static_cast<std::size_t>(size));
      std::iota(idx.begin(), idx.end(), 0);
      const float* g = x.data() + row * static_cast<std::size_t>(length) + start;
      std::stable_sort(idx.begin(), idx.end(),
                       [g](std::int64_t a, std::int64_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
      for (std::int64_t k = 0; k < std::min<std::int64_t>(p.n, size); ++k)
        keep[row * static_cast<std::size_t>(length) +
             static_cast<std::size_t>(start + idx[static_cast<std::size_t>(k)])] = 1;
    }
  return keep;
}

// Restores the SIMD level a test lowered.
struct SimdLevelGuard {
  cpu::SimdLevel saved = cpu::simd_level();
  ~SimdLevelGuard() { cpu::simd_level() = saved; }
};

}  // namespace

TEST_CASE("nm_mask keeps the n largest magnitudes of each group, lower index on ties", "[prune][nm]") {
  const std::vector<float> w = {1.0f,  -3.0f, 2.0f, 0.5f,   // keeps -3, 2
                                1.0f,  1.0f,  1.0f, 1.0f,   // all tied: keeps 0, 1
                                -1.0f, 0.5f,  1.0f, -0.0f,  // |-1| == |1|: keeps 0, 2
                                0.0f,  -0.0f, 0.0f, 7.0f};  // 7, then the lowest of the tied zeros
  const Mask mask = nm_mask(TensorView<const float>(w.data(), Shape{4, 4}), NmPattern{2, 4});
  CHECK(mask.to_bytes() == std::vector<std::uint8_t>{0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1});
  CHECK(is_nm_sparse(mask, NmPattern{2, 4}));
  CHECK(mask.count_kept() == 8);
}

TEST_CASE("nm_mask equals WeightNormSparsifier's masks; tied groups keep n, lower index first", "[prune][nm][golden]") {
  const auto cases = test::load_golden("golden/prune_nm.golden");
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO(c.name);
    const NmPattern p{static_cast<int>(c.ints("n")[0]), static_cast<int>(c.ints("m")[0])};
    const std::vector<float> w = c.floats("weight");
    const Shape shape{c.ints("shape")[0], c.ints("shape")[1]};
    const Mask mask = nm_mask(TensorView<const float>(w.data(), shape), p);
    const std::vector<std::int64_t>& torch_mask = c.ints("mask");
    std::vector<std::uint8_t> expected(torch_mask.begin(), torch_mask.end());
    if (c.name.rfind("ties/", 0) == 0) {
      const Mask torch = Mask::from_bytes(shape, expected.data());
      CHECK(is_nm_sparse(torch, p));
      CHECK(torch.count_kept() == mask.count_kept());  // n of every group, both
      CHECK(mask.to_bytes() == reference_nm(w, shape[1], p));
    } else {
      CHECK(mask.to_bytes() == expected);
    }
  }
}

TEST_CASE("nm_mask matches the reference on every path, layout and pattern", "[prune][nm]") {
  SimdLevelGuard guard;
  const std::vector<cpu::SimdLevel> levels = {cpu::detect_simd_level(), cpu::SimdLevel::sse2};
  for (cpu::SimdLevel level : levels) {
    cpu::simd_level() = level;
    for (NmPattern p : {NmPattern{2, 4}, NmPattern{1, 4}, NmPattern{3, 4}, NmPattern{4, 8}, NmPattern{3, 7},
                        NmPattern{1, 2}, NmPattern{20, 32}}) {
      for (std::int64_t rows : {1, 3, 17}) {
        const std::int64_t cols = p.m * 9;  // 36 for m = 4: rows straddle mask words
        std::vector<float> w =
            test::random_values(static_cast<std::size_t>(rows * cols), 11u + static_cast<unsigned>(p.m * rows));
        for (std::size_t i = 0; i < w.size(); i += 5) w[i] = std::round(w[i] * 2.0f) / 2.0f;  // some ties
        INFO("pattern " << to_string(p) << ", rows " << rows);
        const Mask mask = nm_mask(TensorView<const float>(w.data(), Shape{rows, cols}), p);
        CHECK(mask.to_bytes() == reference_nm(w, cols, p));
        CHECK(mask.count_kept() == rows * cols / p.m * p.n);
        CHECK(is_nm_sparse(mask, p));

        // The same rows read through a transposed copy: a strided view of its transpose.
        std::vector<float> t(w.size());
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t c = 0; c < cols; ++c)
            t[static_cast<std::size_t>(c * rows + r)] = w[static_cast<std::size_t>(r * cols + c)];
        const Mask strided = nm_mask(TensorView<const float>(t.data(), Shape{rows, cols}, Strides{1, rows}), p);
        CHECK(strided == mask);
        // Rank 3 and rank 1: groups still run along the last dimension.
        CHECK(nm_mask(TensorView<const float>(w.data(), Shape{1, rows, cols}), p).words() == mask.words());
        if (rows == 1) CHECK(nm_mask(TensorView<const float>(w.data(), Shape{cols}), p).words() == mask.words());
      }
    }
  }
}

TEST_CASE("nm_mask over a large contiguous tensor: the word path and its tail", "[prune][nm]") {
  SimdLevelGuard guard;
  const std::int64_t rows = 37, cols = 52;  // 1924 elements: 30 whole words and a partial one
  const std::vector<float> w = test::random_values(static_cast<std::size_t>(rows * cols), 5u);
  const Mask fast = nm_mask(TensorView<const float>(w.data(), Shape{rows, cols}), NmPattern{2, 4});
  cpu::simd_level() = cpu::SimdLevel::sse2;
  CHECK(nm_mask(TensorView<const float>(w.data(), Shape{rows, cols}), NmPattern{2, 4}) == fast);
  CHECK(fast.to_bytes() == reference_nm(w, cols, NmPattern{2, 4}));
}

TEST_CASE("NmRemainder::pad: the last partial group keeps its min(n, r) largest", "[prune][nm]") {
  const std::vector<float> w = {4, 3, 2, 1, 0.5f, 9, /* row 2 */ 1, 2, 3, 4, 8, 7};
  const TensorView<const float> view(w.data(), Shape{2, 6});
  CHECK(nm_mask(view, NmPattern{2, 4}, NmRemainder::pad).to_bytes() ==
        std::vector<std::uint8_t>{1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1});
  CHECK(nm_mask(view, NmPattern{1, 4}, NmRemainder::pad).to_bytes() ==
        std::vector<std::uint8_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0});
  CHECK(nm_mask(view, NmPattern{3, 4}, NmRemainder::pad).count_kept() == 2 * (3 + 2));
  CHECK(is_nm_sparse(nm_mask(view, NmPattern{1, 4}, NmRemainder::pad), NmPattern{1, 4}));
}

TEST_CASE("nm_mask of half, bfloat16 and int8 weights ranks their float values", "[prune][nm]") {
  const std::vector<float> w = test::random_values(64, 3u);
  std::vector<half> h;
  std::vector<bfloat16> b;
  std::vector<std::int8_t> q;
  std::vector<float> hf, bf, qf;
  for (float x : w) {
    h.push_back(half(x));
    b.push_back(bfloat16(x));
    q.push_back(static_cast<std::int8_t>(std::lround(x * 40.0f)));
    hf.push_back(h.back().to_float());
    bf.push_back(b.back().to_float());
    qf.push_back(q.back());
  }
  const NmPattern p{2, 4};
  CHECK(nm_mask(TensorView<const half>(h.data(), Shape{4, 16}), p).to_bytes() == reference_nm(hf, 16, p));
  CHECK(nm_mask(TensorView<const bfloat16>(b.data(), Shape{4, 16}), p).to_bytes() == reference_nm(bf, 16, p));
  CHECK(nm_mask(TensorView<const std::int8_t>(q.data(), Shape{4, 16}), p).to_bytes() == reference_nm(qf, 16, p));
}

TEST_CASE("nm_mask rejects bad patterns, shapes and values, naming them", "[prune][nm][errors]") {
  std::vector<float> w = test::random_values(24, 9u);
  const TensorView<const float> view(w.data(), Shape{2, 12});
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{4, 4}), Catch::Contains("pattern = 4:4") && Catch::Contains("n < m"));
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{5, 4}), Catch::Contains("pattern = 5:4"));
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{0, 4}), Catch::Contains("pattern = 0:4"));
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{1, 1}), Catch::Contains("pattern = 1:1"));
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{2, 5}),
                    Catch::Contains("importance.shape = [2, 12]") && Catch::Contains("divisible by m = 5"));
  CHECK_THROWS_WITH(nm_mask(TensorView<const float>(w.data(), Shape{0, 4}), NmPattern{2, 4}),
                    Catch::Contains("importance") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(nm_mask(TensorView<const float>(w.data(), Shape{}), NmPattern{2, 4}), Catch::Contains("rank >= 1"));
  w[13] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{2, 4}), Catch::Contains("importance[13] = nan"));
  w[13] = 1.0f;
  w[22] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{2, 4}), Catch::Contains("importance[22] = -inf"));
  CHECK_THROWS_WITH(nm_mask(view, NmPattern{3, 8}, NmRemainder::pad), Catch::Contains("importance[22]"));
  CHECK_THROWS_WITH(is_nm_sparse(Mask(Shape{2, 4}), NmPattern{4, 2}), Catch::Contains("pattern = 4:2"));
}

TEST_CASE("is_nm_sparse finds a group keeping more than n", "[prune][nm]") {
  Mask mask(Shape{2, 8}, false);
  mask.set(8, true);
  mask.set(9, true);
  CHECK(is_nm_sparse(mask, NmPattern{2, 4}));
  mask.set(11, true);
  CHECK_FALSE(is_nm_sparse(mask, NmPattern{2, 4}));
  CHECK(is_nm_sparse(mask, NmPattern{3, 8}));
  CHECK_FALSE(is_nm_sparse(mask, NmPattern{2, 6}));  // groups of 6 over rows of 8: {8..13} keeps 3
  CHECK(is_nm_sparse(Mask(Shape{3, 5}), NmPattern{5, 6}));
}
