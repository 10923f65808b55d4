// Tests for shrink/sparse/nm_compressed.hpp: exact round trips, the documented mma.sp metadata words, and bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/prune/apply.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/element_types.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::sparse;
using shrink::test::convert;
using shrink::test::same_bits;
using prune::Mask;
using prune::NmPattern;

namespace {

// An N:M mask keeping a random 0..n of every group.
Mask random_nm_mask(const Shape& shape, NmPattern p, unsigned seed) {
  std::mt19937 rng(seed);
  Mask mask(shape, false);
  for (std::int64_t start = 0; start < mask.size(); start += p.m) {
    const int keep = static_cast<int>(rng() % static_cast<unsigned>(p.n + 1));
    for (int k = 0; k < keep; ++k)
      mask.set(start + static_cast<std::int64_t>(rng() % static_cast<unsigned>(p.m)), true);
  }
  return mask;
}

// A mask keeping the given pair of positions in each group of 4 of a [rows, cols] tensor: pair_of(row, group).
template <class PairOf>
Mask mask_of_pairs(std::int64_t rows, std::int64_t cols, PairOf pair_of) {
  Mask mask(Shape{rows, cols}, false);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t g = 0; g < cols / 4; ++g) {
      const std::pair<int, int> p = pair_of(r, g);
      mask.set(r * cols + g * 4 + p.first, true);
      mask.set(r * cols + g * 4 + p.second, true);
    }
  return mask;
}

}  // namespace

TEMPLATE_TEST_CASE("decompress(compress(W, mask)) is apply_mask(W, mask), bit for bit", "[sparse][nm]", float, half,
                   bfloat16, std::int8_t) {
  for (NmPattern p : {NmPattern{2, 4}, NmPattern{1, 4}, NmPattern{4, 8}, NmPattern{3, 7}}) {
    for (std::int64_t rows : {1, 16, 21}) {
      const std::int64_t cols = p.m * 12;  // 48 for m = 4: one full and one padded k-tile of 32
      const std::vector<TestType> w = convert<TestType>(test::random_values(static_cast<std::size_t>(rows * cols), 7u));
      const TensorView<const TestType> view(w.data(), Shape{rows, cols});
      for (int kind = 0; kind < 2; ++kind) {
        INFO("pattern " << prune::to_string(p) << ", rows " << rows << (kind ? ", random N:M mask" : ", nm_mask"));
        const Mask mask = kind ? random_nm_mask(view.shape(), p, static_cast<unsigned>(rows)) : prune::nm_mask(view, p);
        const NmCompressed<TestType> c = compress_nm(view, mask, p);
        CHECK(c.values.size() == static_cast<std::size_t>(rows * cols / p.m * p.n));
        CHECK(c.metadata.empty() == !has_mma_sp_metadata<TestType>(p));
        std::vector<TestType> expected = w;
        prune::apply_mask(TensorView<TestType>(expected.data(), Shape{rows, cols}), mask);
        CHECK(same_bits(decompress_nm(c), expected));
        if (kind == 0) CHECK(same_bits(decompress_nm(compress_nm(view, p)), expected));
      }
    }
  }
}

TEST_CASE("groups keeping fewer than n are filled with zeros at their lowest unused positions", "[sparse][nm]") {
  const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Mask mask(Shape{1, 12}, false);
  mask.set(3, true);                     // group 0 keeps position 3 only
  mask.set(5, true), mask.set(6, true);  // group 1 keeps 1 and 2; group 2 keeps nothing
  const NmCompressed<float> c = compress_nm(TensorView<const float>(w.data(), Shape{1, 12}), mask, NmPattern{2, 4});
  CHECK(c.values == std::vector<float>{0, 4, 6, 7, 0, 0});
  CHECK(c.positions == std::vector<std::uint8_t>{0, 3, 1, 2, 0, 1});
}

TEST_CASE("2:4 metadata of 16-bit values: the documented words of an m16n8k32 tile", "[sparse][nm][metadata]") {
  // Row 0 cycles through the six valid pairs; row 8 keeps {2, 3}; row 1 group 0 keeps only position 3; others {0, 2}.
  const std::pair<int, int> cycle[8] = {{0, 1}, {0, 2}, {1, 2}, {0, 3}, {1, 3}, {2, 3}, {0, 1}, {2, 3}};
  const Mask mask = mask_of_pairs(16, 32, [&](std::int64_t r, std::int64_t g) {
    if (r == 0) return cycle[g];
    if (r == 8) return std::pair<int, int>{2, 3};
    return std::pair<int, int>{0, 2};
  });
  Mask with_single = mask;
  with_single.prune(32 + 0);
  with_single.prune(32 + 2);
  with_single.set(32 + 3, true);
  const std::vector<half> w = convert<half>(test::random_values(16 * 32, 3u));
  const NmCompressed<half> c =
      compress_nm(TensorView<const half>(w.data(), Shape{16, 32}), with_single, NmPattern{2, 4});
  REQUIRE(c.metadata.size() == 16);  // one tile of 16 x 32: lane 4q + t holds word 2q + t
  // Word 0: rows 0 (low half) and 8 (high half), columns 0..15; nibble j = group j, lower position in bits 1:0.
  CHECK(c.metadata[0] == 0xEEEEC984u);
  CHECK(c.metadata[1] == 0xEEEEE4EDu);  // columns 16..31
  CHECK(c.metadata[2] == 0x8888888Cu);  // rows 1 and 9, columns 0..15: row 1 group 0 = {0, 3} after the fill
  CHECK(c.metadata[3] == 0x88888888u);
  CHECK(c.metadata[15] == 0x88888888u);  // rows 7 and 15, columns 16..31

  const MmaSpMetadataLayout layout = mma_sp_metadata_layout<half>(16, 32);
  CHECK(layout.word_index(9, 20) == 3);
  CHECK(layout.bit_shift(9, 20) == 20);
  CHECK(decode_2of4(metadata_nibble(c.metadata, layout, 0, 8)).first == 1);
  CHECK(decode_2of4(metadata_nibble(c.metadata, layout, 0, 8)).second == 2);
  CHECK(encode_2of4(1, 3) == 0xDu);
}

TEST_CASE("2:4 metadata of 8-bit values: m16n8k64 tiles, lane L holds word L", "[sparse][nm][metadata]") {
  const Mask mask = mask_of_pairs(16, 64, [](std::int64_t r, std::int64_t g) {
    if (r == 3 && g >= 12) return std::pair<int, int>{1, 3};  // columns 48..63 of row 3
    if (r == 11 && g == 12) return std::pair<int, int>{0, 1};
    return std::pair<int, int>{0, 2};
  });
  const std::vector<std::int8_t> w(16 * 64, 5);
  const NmCompressed<std::int8_t> c =
      compress_nm(TensorView<const std::int8_t>(w.data(), Shape{16, 64}), mask, NmPattern{2, 4});
  REQUIRE(c.metadata.size() == 32);
  CHECK(c.metadata[3 * 4 + 3] == 0x8884DDDDu);  // lane 15: rows 3 and 11, columns 48..63
  CHECK(c.metadata[3 * 4 + 2] == 0x88888888u);
  CHECK(c.metadata[0] == 0x88888888u);
}

TEST_CASE("2:4 metadata pads rows to 16 and columns to the k-tile with 0b0100", "[sparse][nm][metadata]") {
  const std::int64_t rows = 17, cols = 40;  // half: padded to 32 x 64, two row tiles of two k-tiles each
  const std::vector<half> w = convert<half>(test::random_values(static_cast<std::size_t>(rows * cols), 8u));
  const Mask mask = mask_of_pairs(rows, cols, [](std::int64_t, std::int64_t) { return std::pair<int, int>{1, 3}; });
  const NmCompressed<half> c = compress_nm(TensorView<const half>(w.data(), Shape{rows, cols}), mask, NmPattern{2, 4});
  const MmaSpMetadataLayout layout = mma_sp_metadata_layout<half>(rows, cols);
  CHECK(layout.padded_rows() == 32);
  CHECK(layout.padded_cols() == 64);
  REQUIRE(c.metadata.size() == 64);
  CHECK(c.metadata[0] == 0xDDDDDDDDu);           // rows 0 and 8, columns 0..15: all real
  CHECK(c.metadata[16] == 0x44DD44DDu);          // rows 0 and 8, columns 32..47 real, 48..63 padding (k-tile 1)
  CHECK(c.metadata[16 + 1] == 0x44444444u);      // rows 0 and 8, columns 48..63: all padding
  CHECK(c.metadata[2 * 16] == 0x4444DDDDu);      // row 16 (real) and row 24 (padding), columns 0..15
  CHECK(c.metadata[2 * 16 + 2] == 0x44444444u);  // rows 17 and 25: both padding
  std::vector<half> expected = w;
  prune::apply_mask(TensorView<half>(expected.data(), Shape{rows, cols}), mask);
  CHECK(same_bits(decompress_nm(c), expected));
}

TEST_CASE("compress_nm rejects bad patterns, shapes, masks and values, naming them", "[sparse][nm][errors]") {
  std::vector<float> w = test::random_values(32, 2u);
  const TensorView<const float> view(w.data(), Shape{4, 8});
  const Mask mask = prune::nm_mask(view, NmPattern{2, 4});
  CHECK_THROWS_WITH(compress_nm(view, mask, NmPattern{4, 4}), Catch::Contains("pattern = 4:4"));
  CHECK_THROWS_WITH(compress_nm(view, mask, NmPattern{2, 3}),
                    Catch::Contains("dense.shape = [4, 8]") && Catch::Contains("divisible by m = 3"));
  CHECK_THROWS_WITH(compress_nm(view, Mask(Shape{8, 4}), NmPattern{2, 4}), Catch::Contains("mask.shape = [8, 4]"));
  CHECK_THROWS_WITH(compress_nm(view, Mask(Shape{4, 8}), NmPattern{2, 4}),
                    Catch::Contains("mask = 4 kept in the group at row 0, columns 0..3"));
  CHECK_THROWS_WITH(compress_nm(view, mask, NmPattern{1, 4}), Catch::Contains("at most n = 1"));
  CHECK_THROWS_WITH(compress_nm(view, Mask(Shape{4, 8}), NmPattern{3, 8}), Catch::Contains("8 kept"));
  CHECK_THROWS_WITH(compress_nm(TensorView<const float>(w.data(), Shape{0, 8}), NmPattern{2, 4}),
                    Catch::Contains("dense") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(compress_nm(TensorView<const float>(w.data(), Shape{32}), mask, NmPattern{2, 4}),
                    Catch::Contains("dense.shape = [32]"));
  w[9] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(compress_nm(view, NmPattern{2, 4}), Catch::Contains("importance[9] = nan"));
  CHECK_THROWS_WITH(compress_nm(view, mask, NmPattern{2, 4}), Catch::Contains("dense[9] = nan"));
}

TEST_CASE("decompress_nm rejects hostile structures and writes nothing", "[sparse][nm][errors]") {
  const std::vector<half> w = convert<half>(test::random_values(16 * 32, 4u));
  const TensorView<const half> view(w.data(), Shape{16, 32});
  const NmCompressed<half> good = compress_nm(view, NmPattern{2, 4});
  auto check_rejected = [](const NmCompressed<half>& bad, const char* named) {
    INFO(named);
    std::vector<half> out(16 * 32, half(7.0f));
    CHECK_THROWS_WITH(decompress_nm_into(bad, TensorView<half>(out.data(), Shape{16, 32})), Catch::Contains(named));
    for (const half& x : out) REQUIRE(x.to_float() == 7.0f);
    CHECK_THROWS_WITH(decompress_nm(bad), Catch::Contains(named));
  };
  NmCompressed<half> bad = good;
  bad.values.pop_back();
  check_rejected(bad, "compressed.values.size() = 255");
  bad = good;
  bad.positions[5] = bad.positions[4];
  check_rejected(bad, "compressed.positions[5]");
  bad = good;
  bad.positions[6] = 4;
  check_rejected(bad, "compressed.positions[6] = 4");
  bad = good;
  bad.metadata.resize(15);
  check_rejected(bad, "compressed.metadata.size() = 15");
  bad = good;
  bad.metadata[3] ^= 0x10000u;  // rows 1 and 9: now disagrees with positions
  check_rejected(bad, "compressed.metadata[3]");
  bad = good;
  bad.cols = 30;
  check_rejected(bad, "compressed.cols = 30");
  bad = good;
  bad.pattern = NmPattern{2, 2};
  check_rejected(bad, "pattern = 2:2");

  std::vector<float> fw(32, 1.0f);
  NmCompressed<float> f = compress_nm(TensorView<const float>(fw.data(), Shape{4, 8}), NmPattern{2, 4});
  CHECK(f.metadata.empty());
  f.metadata.push_back(0x44444444u);
  CHECK_THROWS_WITH(decompress_nm(f), Catch::Contains("compressed.metadata.size() = 1"));

  std::vector<half> out(16 * 32, half(7.0f));
  CHECK_THROWS_WITH(decompress_nm_into(good, TensorView<half>(out.data(), Shape{32, 16})),
                    Catch::Contains("out.shape"));
  CHECK(out[0].to_float() == 7.0f);
}

TEMPLATE_TEST_CASE("2:4 compression: the AVX2 path equals the scalar path, bit for bit", "[sparse][nm][simd]", float,
                   half, bfloat16) {
  const cpu::SimdLevel saved = cpu::simd_level();
  for (const Shape& shape : {Shape{3, 20}, Shape{17, 64}, Shape{16, 100}, Shape{5, 36}}) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> w(static_cast<std::size_t>(shape.product()));
    for (float& x : w) x = normal(rng);
    w[1] = -0.0f;  // a kept -0.0 stays -0.0
    const std::vector<TestType> v = convert<TestType>(w);
    const TensorView<const TestType> view(v.data(), shape);
    Mask mask = prune::nm_mask(TensorView<const float>(w.data(), shape), NmPattern{2, 4});
    for (std::int64_t i = 0; i < mask.size(); i += 7) mask.prune(i);  // under-full groups too
    cpu::simd_level() = cpu::SimdLevel::sse2;
    const NmCompressed<TestType> scalar = compress_nm(view, mask, NmPattern{2, 4});
    cpu::simd_level() = saved;
    const NmCompressed<TestType> fast = compress_nm(view, mask, NmPattern{2, 4});
    CHECK(same_bits(fast.values, scalar.values));
    CHECK(fast.positions == scalar.positions);
    CHECK(fast.metadata == scalar.metadata);
  }
  cpu::simd_level() = saved;
}
