// Tests for shrink/io/gguf.hpp: goldens written and dequantized by gguf-py (tests/golden/gen_gguf.py), every value
// type, every dequantized type against hand-computed blocks, every refusal of a hostile file, and the real SmolLM2
// GGUF when scripts/fetch-llm-data.sh's directory is given (SHRINK_LLM_DATA_DIR).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_writer.hpp"
#include "shrink/io/gguf.hpp"

using shrink::io::GgufFile;
using shrink::io::GgufTensorInfo;
using shrink::test::Bytes;
using shrink::test::ByteWriter;
using shrink::test::GgufBuilder;
using shrink::test::GgufTensorSpec;
using shrink::test::GgufValueType;

namespace {

const std::string kGolden = std::string(SHRINK_TEST_DATA_DIR) + "/golden/";

GgufFile parse(const Bytes& bytes, const std::string& label = "test.gguf") {
  return GgufFile::parse(bytes.data(), bytes.size(), label);
}

std::uint32_t float_bits(float v) {
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

// The message of the shrink::Error that parsing `bytes` raises ("" when it parses).
std::string parse_error(const Bytes& bytes) {
  try {
    parse(bytes);
  } catch (const shrink::Error& e) {
    return e.what();
  }
  return "";
}

Bytes f32_bytes(const std::vector<float>& values) {
  ByteWriter w;
  for (float v : values) w.f32(v);
  return w.out;
}

// A valid file: a few key/values of several kinds and two tensors.
GgufBuilder small_file() {
  GgufBuilder b;
  b.add_string("general.architecture", "llama");
  b.add_u32("llama.block_count", 2);
  b.add_strings("tokenizer.ggml.tokens", {"a", "bc", ""});
  b.add("flag", GgufValueType::boolean, {1});
  b.add_tensor({"w", {2, 3}, 0, f32_bytes({1, 2, 3, 4, 5, 6}), {}});
  b.add_tensor({"b", {4}, 1, Bytes{0x00, 0x3C, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x80}, {}});
  return b;
}

}  // namespace

TEST_CASE("gguf: type names and layouts", "[io][gguf]") {
  using shrink::io::gguf_type_name;
  CHECK(std::string(gguf_type_name(0)) == "F32");
  CHECK(std::string(gguf_type_name(3)) == "Q4_1");
  CHECK(std::string(gguf_type_name(8)) == "Q8_0");
  CHECK(std::string(gguf_type_name(14)) == "Q6_K");
  CHECK(std::string(gguf_type_name(30)) == "BF16");
  CHECK(std::string(gguf_type_name(4)) == "unknown");  // Q4_2, removed from ggml
  CHECK(std::string(gguf_type_name(1000)) == "unknown");
  CHECK(shrink::io::gguf_type_layout(2).block_bytes == 18);
  CHECK(shrink::io::gguf_type_layout(3).block_bytes == 20);
  CHECK(shrink::io::gguf_type_layout(8).block_bytes == 34);
  CHECK(shrink::io::gguf_type_layout(14).block_bytes == 210);
  CHECK(shrink::io::gguf_type_supported(30));
  CHECK(shrink::io::gguf_type_supported(6));
  CHECK(shrink::io::gguf_type_supported(7));
  CHECK(shrink::io::gguf_type_supported(14));
  CHECK_FALSE(shrink::io::gguf_type_supported(10));  // Q2_K
}

TEST_CASE("gguf: the K-quants (Q4_K, Q5_K, Q6_K) dequantize bit for bit as gguf-py does", "[io][gguf]") {
  // Seeded random super-blocks with finite scales, and an all-zero row (tests/golden/gen_gguf.py).
  const GgufFile file = GgufFile::open(kGolden + "gguf_kquants.gguf");
  const GgufFile expected = GgufFile::open(kGolden + "gguf_kquants_expected.gguf");
  REQUIRE(file.tensors().size() == 3);
  for (const GgufTensorInfo& t : file.tensors()) {
    INFO(t.name << " " << shrink::io::gguf_type_name(t.type));
    const std::vector<float> got = file.dequantize(t);
    const std::vector<float> want = expected.dequantize(expected.tensor(t.name));
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      INFO("element " << k << ": " << got[k] << " vs " << want[k]);
      REQUIRE(float_bits(got[k]) == float_bits(want[k]));
    }
  }
  // One Q4_K super-block by hand: d = 1, dmin = 0.5; sub-block 5's scale 0b10'0011 = 35 and min 0b01'0100 = 20
  // (low nibbles in byte 9, top bits in bytes 1 and 5); every nibble 3.
  Bytes q4k(144, 0);
  q4k[0] = 0x00, q4k[1] = 0x3C;  // d = 1
  q4k[2] = 0x00, q4k[3] = 0x38;  // dmin = 0.5
  q4k[4 + 9] = 0x43;             // sub-block 5: scale low 4 bits 3, min low 4 bits 4
  q4k[4 + 1] = 0x80;             // scale's top bits 10
  q4k[4 + 5] = 0x40;             // min's top bits 01
  for (int j = 0; j < 128; ++j) q4k[16 + j] = 0x33;
  std::vector<float> out(256);
  shrink::io::gguf_dequantize(12, q4k.data(), 256, out.data());
  CHECK(out[5 * 32] == 35.0f * 3.0f - 0.5f * 20.0f);  // sub-block 5: elements 160..191, the high nibbles of 64..95
  CHECK(out[5 * 32 + 31] == 95.0f);
  CHECK(out[1 * 32] == 0.0f);  // sub-block 1: scale and min 0 (bytes 1 and 5 hold only top bits)
}

TEST_CASE("gguf: gguf-py's file reads with its metadata and dequantizes bit for bit as gguf-py does", "[io][gguf]") {
  const GgufFile file = GgufFile::open(kGolden + "gguf_small.gguf");
  const GgufFile expected = GgufFile::open(kGolden + "gguf_small_expected.gguf");
  CHECK(file.version() == 3);
  CHECK(file.get_string("general.architecture") == "shrinktest");
  CHECK(file.get_uint("test.uint8") == 200);
  CHECK(file.get_int("test.int8") == -100);
  CHECK(file.get_uint("test.uint16") == 60000);
  CHECK(file.get_int("test.int16") == -30000);
  CHECK(file.get_uint("test.uint32") == 4000000000u);
  CHECK(file.get_int("test.int32") == -2000000000);
  CHECK(file.get_uint("test.uint64") == 18000000000000000000ull);
  CHECK(file.get_int("test.int64") == -9000000000000000000ll);
  CHECK(file.get_float("test.float32") == static_cast<double>(0.1f));
  CHECK(file.get_float("test.float64") == -2.5e-300);
  CHECK(file.get_bool("test.bool_true"));
  CHECK_FALSE(file.get_bool("test.bool_false"));
  CHECK(file.get_string("test.string") == "h\xc3\xa9llo, GGUF");
  CHECK(file.get_strings("test.strings") == std::vector<std::string>{"a", "", "\xc3\xbcn\xc3\xaf", "<|im_end|>"});
  CHECK(file.get_ints("test.ints") == std::vector<std::int64_t>{3, -1, 0, 2000000000});
  CHECK(file.get_floats("test.floats") == std::vector<double>{0.5, -1.25, 3.0});
  CHECK(file.find_metadata("test.bools")->type_name() == "array[bool]");
  CHECK(file.find_metadata("test.nested")->type_name() == "array[array]");
  CHECK(file.value_text(*file.find_metadata("test.nested")) == "[array x 2]");
  CHECK(file.value_text(*file.find_metadata("test.strings")) == "[string x 4]");

  const std::vector<std::pair<std::string, std::string>> tensors = {
      {"f32.weight", "F32"},   {"f32_4d", "F32"},       {"f16.weight", "F16"},   {"bf16.bias", "BF16"},
      {"q8_0.weight", "Q8_0"}, {"q4_0.weight", "Q4_0"}, {"q4_1.weight", "Q4_1"}, {"q4_1_3d", "Q4_1"},
      {"q5_0.weight", "Q5_0"}, {"q5_1.weight", "Q5_1"}};
  REQUIRE(file.tensors().size() == tensors.size());
  CHECK(file.tensor("q4_1_3d").shape == std::vector<std::int64_t>{3, 2, 64});
  CHECK(file.tensor("f32_4d").shape == std::vector<std::int64_t>{2, 1, 3, 2});
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];
    INFO(t.name);
    CHECK(t.name == tensors[i].first);
    CHECK(shrink::io::gguf_type_name(t.type) == tensors[i].second);
    CHECK(t.offset % 32 == 0);
    const GgufTensorInfo& e = expected.tensor(t.name);
    REQUIRE(e.type == 0);
    CHECK(t.shape == e.shape);
    const std::vector<float> got = file.dequantize(t);
    const std::vector<float> want = expected.dequantize(e);
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
      INFO("element " << k << ": " << got[k] << " vs " << want[k]);
      REQUIRE(float_bits(got[k]) == float_bits(want[k]));
    }
  }
}

TEST_CASE("gguf: every value type round-trips, and the getters convert or refuse", "[io][gguf]") {
  GgufBuilder b;
  b.add("u8", GgufValueType::uint8, ByteWriter().u8(255).out);
  b.add("i8", GgufValueType::int8, ByteWriter().u8(0x80).out);
  b.add("u16", GgufValueType::uint16, ByteWriter().u16(65535).out);
  b.add("i16", GgufValueType::int16, ByteWriter().u16(0x8000).out);
  b.add("u32", GgufValueType::uint32, ByteWriter().u32(0xFFFFFFFFu).out);
  b.add("i32", GgufValueType::int32, ByteWriter().u32(0x80000000u).out);
  b.add("u64", GgufValueType::uint64, ByteWriter().u64(~0ull).out);
  b.add("i64", GgufValueType::int64, ByteWriter().u64(1ull << 63).out);
  b.add("f32", GgufValueType::float32, ByteWriter().f32(-1.5f).out);
  b.add("f64", GgufValueType::float64, ByteWriter().f64(1e300).out);
  b.add("yes", GgufValueType::boolean, {1});
  b.add("no", GgufValueType::boolean, {0});
  b.add_string("s", "text");
  b.add_string("empty", "");
  b.add_strings("tokens", {"x", "", "yz"});
  b.add("u8s", GgufValueType::array, ByteWriter().u32(0).u64(3).u8(1).u8(2).u8(255).out);
  b.add("i64s", GgufValueType::array, ByteWriter().u32(11).u64(2).u64(~0ull).u64(5).out);
  b.add("u64s", GgufValueType::array, ByteWriter().u32(10).u64(1).u64(~0ull).out);
  b.add("f64s", GgufValueType::array, ByteWriter().u32(12).u64(2).f64(0.25).f64(-8).out);
  b.add("none", GgufValueType::array, ByteWriter().u32(8).u64(0).out);
  b.add("nested", GgufValueType::array, ByteWriter().u32(9).u64(2).u32(4).u64(1).u32(7).u32(8).u64(1).str("deep").out);
  b.version = 2;
  const GgufFile f = parse(b.bytes());
  CHECK(f.version() == 2);
  CHECK(f.tensors().empty());
  CHECK(f.metadata().size() == 21);
  CHECK(f.metadata()[0].key == "u8");  // file order
  CHECK(f.metadata()[20].key == "nested");
  CHECK(f.get_uint("u8") == 255);
  CHECK(f.get_int("i8") == -128);
  CHECK(f.get_uint("u16") == 65535);
  CHECK(f.get_int("i16") == -32768);
  CHECK(f.get_uint("u32") == 0xFFFFFFFFu);
  CHECK(f.get_int("i32") == std::numeric_limits<std::int32_t>::min());
  CHECK(f.get_uint("u64") == ~0ull);
  CHECK(f.get_int("i64") == std::numeric_limits<std::int64_t>::min());
  CHECK(f.get_float("f32") == -1.5);
  CHECK(f.get_float("f64") == 1e300);
  CHECK(f.get_float("u16") == 65535.0);  // integers are numbers too
  CHECK(f.get_float("i8") == -128.0);
  CHECK(f.get_bool("yes"));
  CHECK_FALSE(f.get_bool("no"));
  CHECK(f.get_string("s") == "text");
  CHECK(f.get_string("empty").empty());
  CHECK(f.get_strings("tokens") == std::vector<std::string>{"x", "", "yz"});
  CHECK(f.get_strings("none").empty());
  CHECK(f.get_ints("u8s") == std::vector<std::int64_t>{1, 2, 255});
  CHECK(f.get_ints("i64s") == std::vector<std::int64_t>{-1, 5});
  CHECK(f.get_floats("f64s") == std::vector<double>{0.25, -8});
  CHECK(f.get_floats("u8s") == std::vector<double>{1, 2, 255});
  CHECK(f.find_metadata("nested")->count == 2);

  CHECK(f.value_text(*f.find_metadata("i64")) == "-9223372036854775808");
  CHECK(f.value_text(*f.find_metadata("u64")) == "18446744073709551615");
  CHECK(f.value_text(*f.find_metadata("f32")) == "-1.5");
  CHECK(f.value_text(*f.find_metadata("yes")) == "true");
  CHECK(f.value_text(*f.find_metadata("s")) == "\"text\"");
  CHECK(f.value_text(*f.find_metadata("tokens")) == "[string x 3]");
  CHECK(f.value_text(*f.find_metadata("s"), 2) == "\"te\"... (4 bytes)");

  // Missing keys and wrong types name the file, the key, what was expected and what was found.
  CHECK_THROWS_WITH(f.get_uint("absent"),
                    "shrink::io::GgufFile::get_uint: test.gguf: key \"absent\" is absent: "
                    "expected an integer");
  CHECK_THROWS_WITH(f.get_uint("s"),
                    "shrink::io::GgufFile::get_uint: test.gguf: key \"s\" is string: expected an "
                    "integer");
  CHECK_THROWS_WITH(f.get_uint("i8"), Catch::Contains("key \"i8\" is int8 -128: expected a non-negative integer"));
  CHECK_THROWS_WITH(f.get_int("u64"), Catch::Contains("key \"u64\" is uint64 18446744073709551615: expected a value "
                                                      "in the int64 range"));
  CHECK_THROWS_WITH(f.get_float("s"), Catch::Contains("key \"s\" is string: expected a number"));
  CHECK_THROWS_WITH(f.get_bool("u8"), Catch::Contains("key \"u8\" is uint8: expected bool"));
  CHECK_THROWS_WITH(f.get_string("tokens"), Catch::Contains("key \"tokens\" is array[string]: expected string"));
  CHECK_THROWS_WITH(f.get_strings("u8s"), Catch::Contains("key \"u8s\" is array[uint8]: expected array[string]"));
  CHECK_THROWS_WITH(f.get_strings("s"), Catch::Contains("key \"s\" is string: expected array[string]"));
  CHECK_THROWS_WITH(f.get_ints("tokens"), Catch::Contains("is array[string]: expected an array of integers"));
  CHECK_THROWS_WITH(f.get_ints("u64s"), Catch::Contains("key \"u64s\" is array[uint64] 18446744073709551615"));
  CHECK_THROWS_WITH(f.get_floats("nested"), Catch::Contains("is array[array]: expected an array of numbers"));
}

TEST_CASE("gguf: each type dequantizes as its hand-computed blocks", "[io][gguf]") {
  // Two blocks per quantized tensor, the second with another scale, so the block stride is checked too.
  ByteWriter q8, q4_0, q4_1;
  for (int block = 0; block < 2; ++block) {
    q8.u16(block == 0 ? 0x3800 : 0xC000);  // d = 0.5, then -2
    for (int j = 0; j < 32; ++j) q8.u8(static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16)));
    q4_0.u16(block == 0 ? 0x4000 : 0x3400);  // d = 2, then 0.25
    for (int j = 0; j < 16; ++j) q4_0.u8(static_cast<std::uint8_t>(j | ((15 - j) << 4)));
    q4_1.u16(block == 0 ? 0x3400 : 0x3C00).u16(block == 0 ? 0xBE00 : 0x4200);  // (d, m) = (0.25, -1.5), (1, 3)
    for (int j = 0; j < 16; ++j) q4_1.u8(static_cast<std::uint8_t>(j | (((j + 1) % 16) << 4)));
  }
  GgufBuilder b;
  b.add_tensor({"q8", {64, 1}, 8, q8.out, {}});
  b.add_tensor({"q4_0", {32, 2}, 2, q4_0.out, {}});
  b.add_tensor({"q4_1", {64}, 3, q4_1.out, {}});
  b.add_tensor({"f16", {4}, 1, ByteWriter().u16(0x3C00).u16(0xC000).u16(0x0001).u16(0x7C00).out, {}});
  b.add_tensor({"bf16", {3}, 30, ByteWriter().u16(0x3F80).u16(0xC040).u16(0x0001).out, {}});
  b.add_tensor({"f32", {2}, 0, f32_bytes({-0.0f, 1e-45f}), {}});
  const GgufFile f = parse(b.bytes());

  CHECK(f.tensor("q8").shape == std::vector<std::int64_t>{1, 64});
  CHECK(f.tensor("q4_0").shape == std::vector<std::int64_t>{2, 32});
  CHECK(f.tensor("q8").bytes == 68);
  CHECK(f.tensor("q4_0").bytes == 36);
  CHECK(f.tensor("q4_1").bytes == 40);
  const auto q8v = f.dequantize("q8");
  const auto q40v = f.dequantize("q4_0");
  const auto q41v = f.dequantize("q4_1");
  for (int block = 0; block < 2; ++block) {
    for (int j = 0; j < 32; ++j) {
      INFO("block " << block << ", element " << j);
      CHECK(q8v[32 * block + j] == (block == 0 ? 0.5f : -2.0f) * static_cast<float>(j - 16));  // x = d*q
      const float d0 = block == 0 ? 2.0f : 0.25f;
      const int q0 = j < 16 ? j : 15 - (j - 16);  // low nibble of byte j, then high nibble of byte j - 16
      CHECK(q40v[32 * block + j] == d0 * static_cast<float>(q0 - 8));  // x = d*(q-8)
      const float d1 = block == 0 ? 0.25f : 1.0f, m1 = block == 0 ? -1.5f : 3.0f;
      const int q1 = j < 16 ? j : (j - 16 + 1) % 16;
      CHECK(q41v[32 * block + j] == d1 * static_cast<float>(q1) + m1);  // x = d*q + m
    }
  }
  CHECK(f.dequantize("f16") == std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), INFINITY});
  CHECK(f.dequantize("bf16") == std::vector<float>{1.0f, -3.0f, std::ldexp(1.0f, -133)});
  const auto f32v = f.dequantize("f32");
  CHECK(float_bits(f32v[0]) == 0x80000000u);
  CHECK(f32v[1] == 1e-45f);

  // dequantize_into: the count must match; nothing is written when it does not.
  std::vector<float> out(64, 7.0f);
  f.dequantize_into(f.tensor("q8"), out.data(), out.size());
  CHECK(out == q8v);
  std::vector<float> poisoned(63, 7.0f);
  CHECK_THROWS_WITH(f.dequantize_into(f.tensor("q8"), poisoned.data(), poisoned.size()),
                    Catch::Contains("test.gguf: tensor \"q8\": count = 63: expected 64 (its elements)"));
  CHECK(poisoned == std::vector<float>(63, 7.0f));
  CHECK_THROWS_WITH(f.tensor("nope"), Catch::Contains("test.gguf: no tensor \"nope\" among its 6 tensors"));
  GgufTensorInfo forged = f.tensor("q8");
  forged.bytes = 1 << 20;
  CHECK_THROWS_WITH(f.dequantize(forged), Catch::Contains("tensor \"q8\" is not a tensor of this file"));
  GgufTensorInfo copy = f.tensor("q4_1");
  CHECK(f.dequantize(copy) == q41v);  // a caller's copy of a real entry is fine
  CHECK(f.tensor_data(f.tensor("q8"))[0] == 0x00);
  CHECK(f.tensor_data(f.tensor("q8"))[1] == 0x38);
}

TEST_CASE("gguf: big tensors dequantize the same on the thread pool", "[io][gguf]") {
  std::mt19937 rng(3);
  ByteWriter q;
  const int rows = 600, blocks_per_row = 8;  // 153600 elements: several chunks
  for (int b = 0; b < rows * blocks_per_row; ++b) {
    q.u16(static_cast<std::uint16_t>(0x2000 + rng() % 0x3000)).u16(static_cast<std::uint16_t>(rng() % 0x4000));
    for (int j = 0; j < 16; ++j) q.u8(static_cast<std::uint8_t>(rng()));
  }
  GgufBuilder b;
  b.add_tensor({"w", {32 * blocks_per_row, rows}, 3, q.out, {}});
  const GgufFile f = parse(b.bytes());
  std::vector<float> serial(f.tensor("w").elements());
  shrink::io::gguf_dequantize(3, f.tensor_data(f.tensor("w")), f.tensor("w").elements(), serial.data());
  shrink::ThreadPoolExecutor pool(4);
  shrink::ScopedExecutor scoped(pool);
  CHECK(f.dequantize("w") == serial);
}

TEST_CASE("gguf: general.alignment places the data section and the tensors", "[io][gguf]") {
  GgufBuilder b;
  b.alignment = 64;
  b.add_u32("general.alignment", 64);
  b.add_tensor({"a", {3}, 0, f32_bytes({1, 2, 3}), {}});
  b.add_tensor({"b", {1}, 0, f32_bytes({4}), {}});
  b.add_tensor({"empty", {0, 5}, 0, {}, 0});  // no elements, no bytes: overlaps nothing
  // Found by fuzz_gguf: a zero innermost dimension under dimensions whose product overflows.
  b.add_tensor({"zero_inner", {0, 1ull << 40, 1ull << 40}, 8, {}, 0});
  const GgufFile f = parse(b.bytes());
  CHECK(f.alignment() == 64);
  CHECK(f.data_offset() % 64 == 0);
  CHECK(f.tensor("b").offset == f.data_offset() + 64);
  CHECK(f.dequantize("b") == std::vector<float>{4});
  CHECK(f.tensor("empty").elements() == 0);
  CHECK(f.tensor("empty").shape == std::vector<std::int64_t>{5, 0});
  CHECK(f.dequantize("empty").empty());
  CHECK(f.tensor("zero_inner").elements() == 0);
  CHECK(f.tensor("zero_inner").bytes == 0);
  CHECK(f.dequantize("zero_inner").empty());
}

TEST_CASE("gguf: tensors of known but unsupported types open, and refuse to dequantize", "[io][gguf]") {
  GgufBuilder b;
  b.add_tensor({"blk.0.ffn_down.weight", {256, 1}, 10, Bytes(84, 0), {}});  // Q2_K
  b.add_tensor({"ids", {2}, 26, Bytes(8, 0), {}});                          // I32
  const GgufFile f = parse(b.bytes());
  CHECK(f.tensor("blk.0.ffn_down.weight").bytes == 84);
  CHECK_THROWS_WITH(f.dequantize("blk.0.ffn_down.weight"),
                    "shrink::io::GgufFile::dequantize: test.gguf: tensor \"blk.0.ffn_down.weight\" has type Q2_K (10): "
                    "expected one of F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K");
  std::vector<float> out(2, 7.0f);
  CHECK_THROWS_WITH(f.dequantize_into(f.tensor("ids"), out.data(), 2), Catch::Contains("has type I32 (26)"));
  CHECK(out == std::vector<float>(2, 7.0f));
}

TEST_CASE("gguf: every prefix of a valid file is refused with shrink::Error", "[io][gguf]") {
  const Bytes whole = small_file().bytes();
  const GgufFile f = parse(whole);
  REQUIRE(f.tensors().size() == 2);
  CHECK(f.dequantize("b") == std::vector<float>{1.0f, -2.0f, 0.0f, -0.0f});
  for (std::size_t n = 0; n < whole.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(parse(Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n))), shrink::Error);
  }
}

TEST_CASE("gguf: hostile headers, values and tensor tables are refused with a message naming the defect",
          "[io][gguf]") {
  auto with = [](auto change) {
    GgufBuilder b = small_file();
    change(b);
    return b.bytes();
  };
  auto header = [](std::uint32_t version, std::uint64_t tensors, std::uint64_t kvs) {
    return ByteWriter().raw({'G', 'G', 'U', 'F'}).u32(version).u64(tensors).u64(kvs).out;
  };
  auto one_tensor = [](std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t offset = 0) {
    return [=](GgufBuilder& b) {
      b = GgufBuilder();
      b.add_tensor({"t", ne, type, {}, offset});
    };
  };
  const std::vector<std::pair<Bytes, std::string>> cases = {
      {{}, "test.gguf: empty file"},
      {{'G', 'G'}, "truncated file of 2 bytes: the magic"},
      {ByteWriter().raw({'G', 'G', 'U', 'X'}).u32(3).out, "starts with \"GGUX\": expected the magic \"GGUF\""},
      {ByteWriter().raw({'F', 'U', 'G', 'G'}).u32(3).out, "a big-endian GGUF file (magic bytes \"FUGG\")"},
      {header(0x03000000u, 0, 0), "a big-endian GGUF file of version 3"},
      {header(1, 0, 0), "GGUF version 1 (32-bit counts and lengths): expected version 2 or 3"},
      {header(4, 0, 0), "GGUF version 4: expected version 2 or 3"},
      {header(3, 0, 1ull << 63), "kv_count = 9223372036854775808: more than the 0 bytes left can hold"},
      {header(3, ~0ull, 0), "tensor_count = 18446744073709551615: more than the 0 bytes left"},
      {ByteWriter().raw(header(3, 0, 1)).u64(1ull << 40).raw(Bytes(16, 'k')).out,
       "key/value 0 key: string length 1099511627776 at byte 24 runs past the end of the file (16 bytes left)"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType(13), {0}); }),
       "key \"k\": value type 13: expected a GGUF value type (0 to 12)"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType::array, ByteWriter().u32(99).u64(0).out); }),
       "key \"k\": array element type 99"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType::array, ByteWriter().u32(4).u64(1ull << 62).out); }),
       "key \"k\": array of 4611686018427387904 uint32 values: more than the"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType::array, ByteWriter().u32(8).u64(~0ull).out); }),
       "key \"k\": array of 18446744073709551615 string values"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType::boolean, {2}); }),
       "key \"k\": bool byte 2: expected 0 or 1"},
      {with([](GgufBuilder& b) { b.add("k", GgufValueType::array, ByteWriter().u32(7).u64(3).u8(1).u8(0).u8(9).out); }),
       "key \"k\"[2]: bool byte 9"},
      {with([](GgufBuilder& b) {
         ByteWriter w;
         for (int d = 0; d < 12; ++d) w.u32(9).u64(1);
         b.add("k", GgufValueType::array, w.u32(0).u64(0).out);
       }),
       "key \"k\": arrays nested more than 8 deep"},
      {with([](GgufBuilder& b) { b.add_u32("llama.block_count", 3); }),
       "key \"llama.block_count\" appears twice: expected unique keys"},
      {with([](GgufBuilder& b) {
         b.add_tensor({"w", {1}, 0, f32_bytes({1}), {}});
       }),
       "tensor \"w\" appears twice: expected unique tensor names"},
      {with(one_tensor({1, 1, 1, 1, 1}, 0)), "tensor \"t\": n_dims = 5: expected at most 4 (ggml's limit)"},
      {with(one_tensor({1ull << 63}, 0)), "tensor \"t\": ne[0] = 9223372036854775808: expected at most 2^63 - 1"},
      {with(one_tensor({1ull << 32, 1ull << 32}, 0)),
       "tensor \"t\": ne = [4294967296, 4294967296]: element count overflows int64"},
      {with(one_tensor({(1ull << 63) - 32}, 8)),
       "tensor \"t\": ne = [9223372036854775776] of type Q8_0: byte size overflows int64"},
      {with(one_tensor({1ull << 62}, 0)), "tensor \"t\": ne = [4611686018427387904] of type F32: byte size overflows"},
      {with(one_tensor({4}, 99)), "tensor \"t\": type 99 is not a ggml type: expected one of F32, F16"},
      {with(one_tensor({48, 2}, 2)), "tensor \"t\": ne = [48, 2] of type Q4_0: expected ne[0] a multiple of 32"},
      {with(one_tensor({1}, 0, 4)), "tensor \"t\": offset = 4: expected a multiple of the alignment 32"},
      {with(one_tensor({1}, 0, 1ull << 40)),
       "tensor \"t\": offset = 1099511627776 and 4 bytes: expected them inside the data section of 0 bytes"},
      {with([](GgufBuilder& b) {
         b = GgufBuilder();
         b.add_tensor({"a", {16}, 0, f32_bytes(std::vector<float>(16, 1.0f)), {}});
         b.add_tensor({"b", {4}, 0, f32_bytes({1, 2, 3, 4}), 32});
       }),
       "tensor \"b\" at data offset 32 overlaps tensor \"a\" at [0, 64)"},
      {with([](GgufBuilder& b) { b.add_u32("general.alignment", 48); }),
       "key \"general.alignment\" = 48: expected a power of two"},
      {with([](GgufBuilder& b) { b.add_u32("general.alignment", 0); }),
       "key \"general.alignment\" = 0: expected a power of two"},
      {with([](GgufBuilder& b) { b.add_string("general.alignment", "32"); }),
       "key \"general.alignment\" is string: expected an unsigned integer"},
      {with([](GgufBuilder& b) { b.add("general.alignment", GgufValueType::int32, ByteWriter().u32(~0u).out); }),
       "key \"general.alignment\" = -1: expected a power of two"},
      {with(
           [](GgufBuilder& b) { b.add("general.alignment", GgufValueType::uint64, ByteWriter().u64(1ull << 63).out); }),
       "past the end of the file"},
      {with([](GgufBuilder& b) {
         b.add_tensor({"\n\xff", {2}, 0, {}, 1ull << 20});
       }),
       "tensor \"\\x0a\\xff\": offset = 1048576 and 8 bytes: expected them inside the data section"},
  };
  for (const auto& [bytes, fragment] : cases) {
    INFO(fragment);
    const std::string message = parse_error(bytes);
    INFO(message);
    CHECK(message.find("shrink::io::GgufFile: test.gguf: ") == 0);
    CHECK(message.find(fragment) != std::string::npos);
  }
}

TEST_CASE("gguf: a missing file and a directory are errors", "[io][gguf]") {
  CHECK_THROWS_WITH(GgufFile::open(kGolden + "no-such-file.gguf"), Catch::Contains("no-such-file.gguf: cannot open"));
  CHECK_THROWS_WITH(GgufFile::open(kGolden), Catch::Contains("not a regular file"));
}

TEST_CASE("gguf: random byte changes to a valid file give a valid file or shrink::Error", "[io][gguf]") {
  // A fixed-seed smoke test, not a fuzzer (tests/io/fuzz/fuzz_gguf.cpp is): any other exception or a crash fails it.
  std::ifstream in(kGolden + "gguf_small.gguf", std::ios::binary);
  const Bytes valid{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  REQUIRE(valid.size() > 1000);
  std::mt19937 rng(11);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes file = valid;
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) {
      // Mostly the header and tables, where the structure is.
      const std::size_t at = rng() % (rng() % 4 == 0 ? file.size() : 1200);
      file[at] =
          rng() % 2 ? static_cast<std::uint8_t>(rng()) : static_cast<std::uint8_t>(file[at] ^ (1u << (rng() % 8)));
    }
    try {
      const GgufFile f = parse(file);
      ++accepted;
      for (const GgufTensorInfo& t : f.tensors()) {
        CHECK(t.offset + t.bytes <= f.size());
        if (shrink::io::gguf_type_supported(t.type) && t.elements() < (1 << 20)) f.dequantize(t);
      }
      for (const auto& e : f.metadata()) f.value_text(e);
    } catch (const shrink::Error&) {
    }
  }
  CHECK(accepted > 0);
}

// Run by CTest as io/gguf_real_model (hidden from the other runs): SmolLM2-135M-Instruct.Q4_1.gguf from
// scripts/fetch-llm-data.sh's directory, named by SHRINK_LLM_DATA_DIR. Without it the program exits 77 (skipped).
TEST_CASE("gguf: the real SmolLM2-135M-Instruct Q4_1 file", "[.][gguf-real]") {
  const char* dir = std::getenv("SHRINK_LLM_DATA_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::printf(
        "SHRINK_LLM_DATA_DIR is not set (configure with -DSHRINK_LLM_DATA_DIR=$(scripts/fetch-llm-data.sh)): "
        "skipped\n");
    std::exit(77);
  }
  const GgufFile f = GgufFile::open(std::string(dir) + "/SmolLM2-135M-Instruct.Q4_1.gguf");
  CHECK(f.version() == 3);
  CHECK(f.tensors().size() == 272);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_uint("llama.block_count") == 30);
  CHECK(f.get_uint("llama.embedding_length") == 576);
  CHECK(f.get_uint("llama.feed_forward_length") == 1536);
  CHECK(f.get_uint("llama.attention.head_count") == 9);
  CHECK(f.get_uint("llama.attention.head_count_kv") == 3);
  CHECK(f.get_float("llama.rope.freq_base") == 100000.0);
  CHECK(f.get_string("tokenizer.ggml.model") == "gpt2");
  const auto tokens = f.get_strings("tokenizer.ggml.tokens");
  CHECK(tokens.size() == 49152);
  CHECK(f.get_strings("tokenizer.ggml.merges").size() == 48900);
  CHECK(f.get_ints("tokenizer.ggml.token_type").size() == 49152);
  CHECK(f.value_text(*f.find_metadata("tokenizer.ggml.tokens")) == "[string x 49152]");

  const GgufTensorInfo& embedding = f.tensor("token_embd.weight");
  CHECK(embedding.shape == std::vector<std::int64_t>{49152, 576});
  CHECK(std::string(shrink::io::gguf_type_name(embedding.type)) == "Q8_0");
  const GgufTensorInfo& k = f.tensor("blk.0.attn_k.weight");
  CHECK(k.shape == std::vector<std::int64_t>{192, 576});
  CHECK(std::string(shrink::io::gguf_type_name(k.type)) == "Q4_1");
  CHECK(f.tensor("output_norm.weight").shape == std::vector<std::int64_t>{576});

  // Values from gguf-py 0.19.0: gguf.quants.dequantize(tensor.data, tensor.tensor_type), flattened.
  const std::vector<float> kv = f.dequantize(k);
  CHECK(kv[0] == -0x1.3ep-3f);
  CHECK(kv[1] == 0x1.5c6p-2f);
  CHECK(kv[100] == -0x1.1fcp-1f);
  CHECK(kv[110591] == 0x1.746p-2f);
  const std::vector<float> ev = f.dequantize(embedding);
  CHECK(ev[0] == -0x1.b468p-4f);
  CHECK(ev[1] == 0x1.0e28p-5f);
  CHECK(ev[1000000] == 0x1.071p-5f);
  CHECK(ev[28311551] == -0x1.55ap-5f);
  const std::vector<float> down = f.dequantize("blk.29.ffn_down.weight");
  CHECK(f.tensor("blk.29.ffn_down.weight").shape == std::vector<std::int64_t>{576, 1536});
  CHECK(down[0] == -0x1.17ep-2f);
  CHECK(down[12345] == -0x1.708p-5f);
  CHECK(down[884735] == 0x1.dp-5f);
  const std::vector<float> norm = f.dequantize("output_norm.weight");
  CHECK(norm[0] == 1.7578125f);
  CHECK(norm[575] == 1.984375f);
  // Every tensor of the model dequantizes (Q8_0, Q4_1 and F32) and is finite.
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name == "token_embd.weight") continue;  // done above
    const std::vector<float> v = f.dequantize(t);
    bool finite = true;
    for (float x : v) finite = finite && std::isfinite(x);
    INFO(t.name);
    CHECK(finite);
  }
}
