// io/gguf_quantize.hpp: the block encoders as the inverse of the reader's layouts, llama.cpp's reference quantizers
// against gguf-py's bytes (tests/golden/gen_gguf.py) and hand-computed blocks, the round trip's error bound, bad input.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_test_support.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"

using shrink::io::gguf_dequantize;
using shrink::io::gguf_quantize;
using shrink::io::gguf_type_layout;
using shrink::io::GgufFile;
using shrink::io::GgufType;

namespace {

using shrink::test::ggml_type_id;
using shrink::test::gguf_stored;
using shrink::test::gguf_values;

// The 4- and 5-bit codes of one block as the reader's formulas see them: x / d (+ offset) for d = 1, m = 0 or the
// given minimum.
std::vector<int> block_codes(std::uint32_t type, const std::vector<std::uint8_t>& block, float m = 0.0f) {
  const std::vector<float> x = gguf_values(type, block, 32);
  const int offset = type == ggml_type_id(GgufType::q4_0) ? 8 : type == ggml_type_id(GgufType::q5_0) ? 16 : 0;
  std::vector<int> q;
  for (float v : x) q.push_back(static_cast<int>(v - m) + offset);
  return q;
}

}  // namespace

TEST_CASE("gguf_quantize gives gguf-py's bytes for every quantized tensor of its golden file", "[io][gguf][quantize]") {
  const GgufFile file = GgufFile::open(shrink::test::gguf_golden("gguf_small.gguf"));
  const GgufFile source = GgufFile::open(shrink::test::gguf_golden("gguf_small_source.gguf"));
  const std::vector<std::uint8_t> bytes = shrink::test::whole_file(shrink::test::gguf_golden("gguf_small.gguf"));
  int compared = 0;
  for (const auto& t : source.tensors()) {
    INFO(t.name);
    const auto& stored = file.tensor(t.name);
    const std::vector<float> x = source.dequantize(t.name);  // F32: the values exactly
    const std::vector<std::uint8_t> expected(bytes.begin() + static_cast<std::ptrdiff_t>(stored.offset),
                                             bytes.begin() + static_cast<std::ptrdiff_t>(stored.offset + stored.bytes));
    CHECK(gguf_stored(stored.type, x) == expected);
    ++compared;
  }
  CHECK(compared == 6);  // every quantized tensor of gen_gguf.py: Q8_0, Q4_0, two Q4_1, Q5_0, Q5_1
}

TEST_CASE("gguf_quantize: hand-computed blocks of each format", "[io][gguf][quantize]") {
  SECTION("Q8_0: d = amax / 127, halves rounded away from zero") {
    std::vector<float> x(32, 0.0f);
    x[0] = -127.0f;  // d = 1
    x[1] = 0.5f;
    x[2] = -2.5f;
    x[3] = 126.49f;
    const auto b = gguf_stored(ggml_type_id(GgufType::q8_0), x);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0x3C);  // fp16 1.0
    CHECK(static_cast<std::int8_t>(b[2]) == -127);
    CHECK(static_cast<std::int8_t>(b[3]) == 1);
    CHECK(static_cast<std::int8_t>(b[4]) == -3);
    CHECK(static_cast<std::int8_t>(b[5]) == 126);
  }
  SECTION("Q4_0: d = max / -8 (the signed value of largest magnitude), codes truncated from x / d + 8.5, at most 15") {
    std::vector<float> x(32, 0.0f);
    x[0] = -8.0f;  // max = -8: d = 1
    x[1] = 7.0f;
    x[2] = 7.6f;   // 7.6 + 8.5 = 16.1 -> 15
    x[3] = -0.4f;  // 8.1 -> 8
    x[17] = 0.6f;  // 9.1 -> 9
    x[18] = 8.0f;  // ties of magnitude: the first (-8) wins; 16.5 -> 15
    const auto b = gguf_stored(ggml_type_id(GgufType::q4_0), x);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0x3C);  // d = 1.0
    // Element j in the low nibble of byte 2 + j, element j + 16 in its high nibble.
    const std::vector<int> q = block_codes(ggml_type_id(GgufType::q4_0), b);
    CHECK(q[0] == 0);
    CHECK(q[1] == 15);
    CHECK(q[2] == 15);
    CHECK(q[3] == 8);
    CHECK(q[17] == 9);
    CHECK(q[16] == 8);
    CHECK(q[18] == 15);
    CHECK(b[2] == static_cast<std::uint8_t>(0 | (8 << 4)));
  }
  SECTION("Q4_1 and Q5_1: d = (max - min) / (levels - 1), m = min, codes truncated from (x - m) / d + 0.5") {
    std::vector<float> x(32, 3.0f);
    x[0] = -1.0f;  // min
    x[1] = 14.0f;  // max: d = 1 for Q4_1
    x[2] = 0.49f;  // 1.49 + 0.5 -> 1
    x[20] = 0.5f;  // 1.5 + 0.5 -> 2
    const auto b4 = gguf_stored(ggml_type_id(GgufType::q4_1), x);
    CHECK(b4[0] == 0x00);
    CHECK(b4[1] == 0x3C);  // d = 1
    CHECK(b4[2] == 0x00);
    CHECK(b4[3] == 0xBC);  // m = -1
    const std::vector<int> q4 = block_codes(ggml_type_id(GgufType::q4_1), b4, -1.0f);
    CHECK(q4[0] == 0);
    CHECK(q4[1] == 15);
    CHECK(q4[2] == 1);
    CHECK(q4[20] == 2);
    CHECK(q4[5] == 4);
    x[1] = 30.0f;  // max: d = 1 for Q5_1
    const auto b5 = gguf_stored(ggml_type_id(GgufType::q5_1), x);
    const std::vector<int> q5 = block_codes(ggml_type_id(GgufType::q5_1), b5, -1.0f);
    CHECK(q5[1] == 31);
    CHECK(q5[20] == 2);
    CHECK(b5[4] == 0x02);  // qh: the fifth bit of element 1 only
    CHECK(b5[5] == 0x00);
  }
  SECTION("Q5_0: d = max / -16, codes truncated from x / d + 16.5, at most 31; the fifth bits in qh") {
    std::vector<float> x(32, 0.0f);
    x[0] = 16.0f;   // max = 16: d = -1
    x[1] = -15.0f;  // x / d = 15 -> 31.5 -> 31
    x[16] = -1.0f;  // 1 + 16.5 -> 17: fifth bit set, bit 16 of qh
    const auto b = gguf_stored(ggml_type_id(GgufType::q5_0), x);
    CHECK(b[0] == 0x00);
    CHECK(b[1] == 0xBC);  // d = -1.0
    const std::uint32_t qh = static_cast<std::uint32_t>(b[2]) | (static_cast<std::uint32_t>(b[3]) << 8) |
                             (static_cast<std::uint32_t>(b[4]) << 16) | (static_cast<std::uint32_t>(b[5]) << 24);
    // Every zero is code 16 (fifth bit set); x[0] = 16 is code 0; x[1] is 31.
    CHECK(qh == 0xFFFFFFFEu);
    const std::vector<float> back = gguf_values(ggml_type_id(GgufType::q5_0), b, 32);
    CHECK(back[0] == 16.0f);
    CHECK(back[1] == -15.0f);
    CHECK(back[16] == -1.0f);
  }
  SECTION("an all-zero block: scale 0, and zeros come back") {
    const std::vector<float> x(32, 0.0f);
    for (GgufType t : {GgufType::q8_0, GgufType::q4_0, GgufType::q4_1, GgufType::q5_0, GgufType::q5_1}) {
      const auto b = gguf_stored(ggml_type_id(t), x);
      CHECK(gguf_values(ggml_type_id(t), b, 32) == x);
    }
  }
}

TEST_CASE("gguf_quantize and gguf_dequantize: each value within its block's rounding bound", "[io][gguf][quantize]") {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GgufType t : {GgufType::q8_0, GgufType::q4_0, GgufType::q4_1, GgufType::q5_0, GgufType::q5_1}) {
    INFO(shrink::io::gguf_type_name(ggml_type_id(t)));
    std::vector<float> x(32 * 64);
    // Blocks of magnitudes 2^-6 .. 2^13: scales and minimums normal fp16 numbers.
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 32) % 20 - 6);
    const std::vector<float> back = gguf_values(ggml_type_id(t), gguf_stored(ggml_type_id(t), x), x.size());
    const bool affine = t == GgufType::q4_1 || t == GgufType::q5_1;
    // Steps across the block's range: d = amax / 127, amax / 8, amax / 16 (symmetric), (max - min) / 15 or 31.
    const double levels = t == GgufType::q8_0   ? 254
                          : t == GgufType::q4_0 ? 16
                          : t == GgufType::q5_0 ? 32
                          : t == GgufType::q4_1 ? 15
                                                : 31;
    int far = 0;
    for (std::size_t b = 0; b < x.size() / 32; ++b) {
      float lo = x[32 * b], hi = x[32 * b], amax = 0.0f;
      for (std::size_t j = 0; j < 32; ++j) {
        lo = std::min(lo, x[32 * b + j]);
        hi = std::max(hi, x[32 * b + j]);
        amax = std::max(amax, std::fabs(x[32 * b + j]));
      }
      // Half a step for rounding, a whole one where Q4_0 / Q5_0 clip the far end (+8 of [-8, 7]); the fp16 scale
      // (times a code of at most the levels) and minimum add 2^-11 relative each.
      const double step = affine ? (hi - lo) / levels : 2.0 * amax / levels;
      const double bound = (affine || t == GgufType::q8_0 ? 0.5 : 1.0) * step * (1 + 1e-6) +
                           std::ldexp(1.0, -10) * (amax + std::fabs(lo));
      for (std::size_t j = 0; j < 32; ++j) far += !(std::fabs(back[32 * b + j] - x[32 * b + j]) <= bound);
    }
    CHECK(far == 0);
  }
}

TEST_CASE("gguf_quantize refuses bad input by name before writing anything", "[io][gguf][quantize][errors]") {
  std::vector<float> x(64, 1.0f);
  std::vector<std::uint8_t> out(256, 0xAB);
  const std::vector<std::uint8_t> untouched = out;
  CHECK_THROWS_WITH(gguf_quantize(10, x.data(), 64, out.data()),
                    Catch::Contains("type") && Catch::Contains("Q2_K (10)") && Catch::Contains("Q6_K"));
  CHECK_THROWS_WITH(gguf_quantize(ggml_type_id(GgufType::q6_k), x.data(), 64, out.data()),
                    Catch::Contains("elements") && Catch::Contains("multiple of 256 for Q6_K"));
  CHECK_THROWS_WITH(gguf_quantize(ggml_type_id(GgufType::q4_0), x.data(), 48, out.data()),
                    Catch::Contains("elements") && Catch::Contains("multiple of 32 for Q4_0"));
  CHECK_THROWS_WITH(gguf_quantize(ggml_type_id(GgufType::q8_0), x.data(), -32, out.data()),
                    Catch::Contains("elements"));
  x[40] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(gguf_quantize(ggml_type_id(GgufType::q4_1), x.data(), 64, out.data()),
                    Catch::Contains("non-finite value at element 40"));
  x[40] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(gguf_quantize(ggml_type_id(GgufType::q5_0), x.data(), 64, out.data()),
                    Catch::Contains("element 40"));
  CHECK(out == untouched);
  // Float types keep what they are given, infinities included.
  gguf_quantize(ggml_type_id(GgufType::f16), x.data(), 64, out.data());
  CHECK(gguf_values(ggml_type_id(GgufType::f16), out, 64)[40] == std::numeric_limits<float>::infinity());
}

TEST_CASE("gguf block encoders lay codes out as the reader reads them", "[io][gguf][quantize]") {
  std::mt19937 rng(43);
  const std::uint16_t d = 0x3800, m = 0xC200;  // 0.5, -3
  std::uint8_t q[32];
  std::int8_t q8[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = static_cast<std::uint8_t>(rng() % 32);
    q8[j] = static_cast<std::int8_t>(static_cast<int>(rng() % 256) - 128);
  }
  std::uint8_t q4[32];
  for (int j = 0; j < 32; ++j) q4[j] = static_cast<std::uint8_t>(q[j] & 0x0F);
  std::vector<std::uint8_t> block(34);
  shrink::io::encode_q8_0_block(d, q8, block.data());
  std::vector<float> v = gguf_values(ggml_type_id(GgufType::q8_0), block, 32);
  for (int j = 0; j < 32; ++j) CHECK(v[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(q8[j]));
  shrink::io::encode_q4_0_block(d, q4, block.data());
  v = gguf_values(ggml_type_id(GgufType::q4_0), block, 32);
  for (int j = 0; j < 32; ++j) CHECK(v[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(q4[j] - 8));
  shrink::io::encode_q4_1_block(d, m, q4, block.data());
  v = gguf_values(ggml_type_id(GgufType::q4_1), block, 32);
  for (int j = 0; j < 32; ++j) CHECK(v[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(q4[j]) - 3.0f);
  shrink::io::encode_q5_0_block(d, q, block.data());
  v = gguf_values(ggml_type_id(GgufType::q5_0), block, 32);
  for (int j = 0; j < 32; ++j) CHECK(v[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(q[j] - 16));
  shrink::io::encode_q5_1_block(d, m, q, block.data());
  v = gguf_values(ggml_type_id(GgufType::q5_1), block, 32);
  for (int j = 0; j < 32; ++j) CHECK(v[static_cast<std::size_t>(j)] == 0.5f * static_cast<float>(q[j]) - 3.0f);
}

TEST_CASE("encode_gguf_blocks: a method's blocks read back as quant::dequantize gives them, bit for bit",
          "[io][gguf][quantize]") {
  using shrink::quant::BlockFormat;
  const std::int64_t rows = 5, cols = 512;
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (float& v : w) v = normal(rng);
  for (BlockFormat f : {BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q5_0, BlockFormat::q5_1,
                        BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k}) {
    INFO(shrink::quant::block_format_name(f));
    const std::uint32_t type = shrink::io::gguf_type_of(f);
    REQUIRE(shrink::io::gguf_block_format(type) == f);
    const shrink::quant::BlockQuantized t = shrink::quant::grid_round_to_nearest(f, w.data(), rows, cols);
    const shrink::io::GgufTypeLayout layout = gguf_type_layout(type);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols) / layout.block_elements * layout.block_bytes);
    shrink::io::encode_gguf_blocks(t, bytes.data());
    std::vector<float> read(w.size());
    gguf_dequantize(type, bytes.data(), rows * cols, read.data());
    const std::vector<float> expected = shrink::quant::dequantize(t);
    for (std::size_t k = 0; k < read.size(); ++k) {
      INFO("element " << k);
      REQUIRE(shrink::float_to_bits(read[k]) == shrink::float_to_bits(expected[k]));
    }
    // gguf_quantize writes the same blocks for the K-quants (their reference path is grid_round_to_nearest).
    if (layout.block_elements == 256) {
      std::vector<std::uint8_t> written(bytes.size());
      gguf_quantize(type, w.data(), rows * cols, written.data());
      CHECK(written == bytes);
    }
  }
  CHECK_FALSE(shrink::io::gguf_block_format(ggml_type_id(GgufType::f16)).has_value());

  shrink::quant::BlockQuantized t = shrink::quant::grid_round_to_nearest(BlockFormat::q4_0, w.data(), rows, cols);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * cols / 32) * 18, 0xAB);
  const std::vector<std::uint8_t> untouched = bytes;
  auto refused = [&](const shrink::quant::BlockQuantized& bad, const std::string& what) {
    CHECK_THROWS_WITH(shrink::io::encode_gguf_blocks(bad, bytes.data()), Catch::Contains(what));
    CHECK(bytes == untouched);
  };
  shrink::quant::BlockQuantized bad = t;
  bad.codes[70] = 8;
  refused(bad, "t.codes[70]");
  bad = t;
  bad.scales[3].d = 0.1f;  // not an fp16 value
  refused(bad, "t.scales[3].d");
  bad = t;
  bad.scales[2].m = 0.5f;  // Q4_0 has no minimum
  refused(bad, "t.scales[2].m");
  bad = t;
  bad.codes.pop_back();
  refused(bad, "codes [rows, cols]");

  // K formats: the block codes, the super-block scales and their agreement with each block's d and m.
  const shrink::quant::BlockQuantized k = shrink::quant::grid_round_to_nearest(BlockFormat::q4_k, w.data(), rows, cols);
  bad = k;
  bad.scales[9].min_code = 64;
  refused(bad, "t.scales[9].min_code");
  bad = k;
  bad.scales[4].scale_code = static_cast<std::int16_t>(bad.scales[4].scale_code == 0 ? 1 : 0);
  refused(bad, "t.scales[4].d, m");
  bad = k;
  bad.supers[1].d = 0.1f;
  refused(bad, "t.supers[1].d");
  bad = k;
  bad.supers.pop_back();
  refused(bad, "one super-block scale per row and 256 columns");
  bad = shrink::quant::grid_round_to_nearest(BlockFormat::q6_k, w.data(), rows, cols);
  bad.supers[0].dmin = 1.0f;
  refused(bad, "t.supers[0].dmin");
  bad = shrink::quant::grid_round_to_nearest(BlockFormat::q6_k, w.data(), rows, cols);
  bad.scales[2].scale_code = 128;
  refused(bad, "t.scales[2].scale_code");
}
