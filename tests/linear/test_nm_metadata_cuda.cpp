// Tests of the int8 2:4 metadata switch (Int8Metadata in shrink/cuda/kernels/linear_nm_layout.hpp): the environment
// variable's values and errors, and that each mapping hands mma.sp every stored metadata half exactly once, where the
// mapping says the hardware reads it. [host] only: which mapping the hardware uses is benchmarks/gpu/layout_probe's.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/kernels/linear_nm_layout.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace nm_metadata_test {

namespace layout = shrink::cuda::kernels::linear_nm;
using layout::Int8Metadata;

constexpr Int8Metadata kMappings[] = {Int8Metadata::row_per_lane, Int8Metadata::word_per_lane};

// Sets or clears SHRINK_NM_INT8_METADATA for one scope, then puts back what was there.
class ScopedVariable {
 public:
  explicit ScopedVariable(const char* value) {
    const char* old = std::getenv(layout::kInt8MetadataVariable);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      setenv(layout::kInt8MetadataVariable, value, 1);
    else
      unsetenv(layout::kInt8MetadataVariable);
  }
  ~ScopedVariable() {
    if (had_)
      setenv(layout::kInt8MetadataVariable, old_.c_str(), 1);
    else
      unsetenv(layout::kInt8MetadataVariable);
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

// The 16-bit half (0: bits [15:0], 1: bits [31:16]) of lane `lane`'s metadata register under `mapping`.
std::uint32_t register_half(const std::uint32_t (&words)[32], int lane, int half, Int8Metadata mapping) {
  return (layout::Operand<std::int8_t>::metadata_register(words, lane, mapping) >> (16 * half)) & 0xFFFFu;
}

}  // namespace nm_metadata_test

TEST_CASE("cuda linear_nm int8 metadata: SHRINK_NM_INT8_METADATA names the mapping, anything else is an error",
          "[host]") {
  using namespace nm_metadata_test;
  using Catch::Matchers::Contains;
  CHECK(layout::parse_int8_metadata(nullptr) == Int8Metadata::row_per_lane);
  CHECK(layout::parse_int8_metadata("") == Int8Metadata::row_per_lane);
  CHECK(layout::parse_int8_metadata("row_per_lane") == Int8Metadata::row_per_lane);
  CHECK(layout::parse_int8_metadata("word_per_lane") == Int8Metadata::word_per_lane);
  for (Int8Metadata m : kMappings) CHECK(layout::parse_int8_metadata(layout::to_string(m)) == m);
  for (const char* bad : {"Row_per_lane", "word_per_lane ", "triton", "1", " "}) {
    INFO("value '" << bad << "'");
    CHECK_THROWS_AS(layout::parse_int8_metadata(bad), shrink::Error);
    CHECK_THROWS_WITH(layout::parse_int8_metadata(bad), Contains("SHRINK_NM_INT8_METADATA") &&
                                                            Contains(std::string("'") + bad + "'") &&
                                                            Contains("row_per_lane") && Contains("word_per_lane"));
  }
  {
    const ScopedVariable unset(nullptr);
    CHECK(layout::int8_metadata_from_environment() == Int8Metadata::row_per_lane);
  }
  {
    const ScopedVariable set("word_per_lane");
    CHECK(layout::int8_metadata_from_environment() == Int8Metadata::word_per_lane);
  }
  {
    const ScopedVariable set("row_per_lane");
    CHECK(layout::int8_metadata_from_environment() == Int8Metadata::row_per_lane);
  }
  {
    const ScopedVariable set("words");
    CHECK_THROWS_WITH(layout::int8_metadata_from_environment(),
                      Contains("SHRINK_NM_INT8_METADATA") && Contains("'words'"));
  }
}

TEST_CASE(
    "cuda linear_nm int8 metadata: each mapping hands every stored half to one lane, where it says mma.sp reads it",
    "[host]") {
  using namespace nm_metadata_test;
  // The stored layout of one k-step (sparse/nm_compressed.hpp): the word and shift of row r, group g of tile 0.
  const shrink::sparse::MmaSpMetadataLayout stored = shrink::sparse::mma_sp_metadata_layout<std::int8_t>(16, 64);
  REQUIRE(stored.words_per_tile() == layout::Operand<std::int8_t>::kMetadataWords);
  for (Int8Metadata mapping : kMappings) {
    INFO("mapping " << layout::to_string(mapping));
    // (row, group) -> (lane, nibble) under the mapping's account of the hardware: a bijection of 16 x 16 groups.
    std::set<std::pair<int, int>> groups;
    for (int lane = 0; lane < 32; ++lane)
      for (int nibble = 0; nibble < 8; ++nibble) {
        const layout::MetadataGroup g = layout::int8_metadata_group(mapping, lane, nibble);
        REQUIRE((g.row >= 0 && g.row < 16 && g.group >= 0 && g.group < 16));
        groups.insert({g.row, g.group});
      }
    CHECK(groups.size() == 256);

    std::set<std::pair<int, int>> slots_used;  // (lane, register half)
    for (int word = 0; word < 32; ++word)
      for (int half = 0; half < 2; ++half) {
        INFO("stored word " << word << " half " << half);
        std::uint32_t words[32] = {};
        words[word] = 0xFFFFu << (16 * half);
        int found = 0;
        for (int lane = 0; lane < 32; ++lane)
          for (int slot = 0; slot < 2; ++slot) {
            const std::uint32_t bits = register_half(words, lane, slot, mapping);
            if (bits == 0) continue;
            ++found;
            CHECK(bits == 0xFFFFu);  // a half moves whole, never split or shifted
            slots_used.insert({lane, slot});
            // The 4 nibbles of that slot describe, by the mapping, the groups this stored half holds.
            for (int j = 0; j < 4; ++j) {
              const layout::MetadataGroup g = layout::int8_metadata_group(mapping, lane, 4 * slot + j);
              CHECK(stored.word_index(g.row, 4 * g.group) == word);
              CHECK(stored.bit_shift(g.row, 4 * g.group) == 16 * half + 4 * j);
            }
          }
        CHECK(found == 1);
      }
    CHECK(slots_used.size() == 64);  // none missing, none twice
  }
}

TEST_CASE("cuda linear_nm metadata registers decode to the kept positions of compress_nm, int8 and 16-bit", "[host]") {
  using namespace nm_metadata_test;
  std::mt19937 rng(4242);
  std::uniform_int_distribution<int> value(-100, 100);
  const std::int64_t rows = 16, cols = 128;  // one row tile, two int8 k-steps (four 16-bit ones)
  std::vector<std::int8_t> dense8(static_cast<std::size_t>(rows * cols));
  std::vector<shrink::half> dense16(dense8.size());
  for (std::size_t i = 0; i < dense8.size(); ++i) {
    dense8[i] = static_cast<std::int8_t>(value(rng));
    dense16[i] = shrink::half(static_cast<float>(value(rng)));
  }
  const shrink::prune::NmPattern pattern{2, 4};
  const auto c8 = shrink::sparse::compress_nm(
      shrink::TensorView<const std::int8_t>(dense8.data(), shrink::Shape{rows, cols}), pattern);
  const auto c16 = shrink::sparse::compress_nm(
      shrink::TensorView<const shrink::half>(dense16.data(), shrink::Shape{rows, cols}), pattern);
  // The nibble the compressed positions give row r, group g (4 columns).
  auto expected_nibble = [&](const std::vector<std::uint8_t>& positions, std::int64_t r, std::int64_t g) {
    const std::size_t at = static_cast<std::size_t>((r * (cols / 4) + g) * 2);
    return shrink::sparse::encode_2of4(positions[at], positions[at + 1]);
  };

  for (Int8Metadata mapping : kMappings) {
    INFO("int8, mapping " << layout::to_string(mapping));
    for (int step = 0; step < 2; ++step) {
      const std::uint32_t* words = c8.metadata.data() + step * layout::Operand<std::int8_t>::kMetadataWords;
      int bad = 0;
      for (int lane = 0; lane < 32; ++lane) {
        const std::uint32_t e = layout::Operand<std::int8_t>::metadata_register(words, lane, mapping);
        for (int nibble = 0; nibble < 8; ++nibble) {
          const layout::MetadataGroup g = layout::int8_metadata_group(mapping, lane, nibble);
          if (((e >> (4 * nibble)) & 0xFu) != expected_nibble(c8.positions, g.row, 16 * step + g.group)) ++bad;
        }
      }
      CHECK(bad == 0);
    }
  }
  // 16-bit, selector 0: lanes t < 2 of each group carry the metadata, laid out as word_per_lane's lanes t < 2.
  for (int step = 0; step < 4; ++step) {
    INFO("16-bit, k-step " << step);
    const std::uint32_t* words = c16.metadata.data() + step * layout::Operand<shrink::half>::kMetadataWords;
    int bad = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (lane % 4 >= 2) continue;
      const std::uint32_t e = layout::Operand<shrink::half>::metadata_register(words, lane);
      for (int nibble = 0; nibble < 8; ++nibble) {
        const layout::MetadataGroup g = layout::int8_metadata_group(Int8Metadata::word_per_lane, lane, nibble);
        if (((e >> (4 * nibble)) & 0xFu) != expected_nibble(c16.positions, g.row, 8 * step + g.group)) ++bad;
      }
    }
    CHECK(bad == 0);
  }
}
