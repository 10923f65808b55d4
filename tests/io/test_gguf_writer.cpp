// io/gguf_writer.hpp: files that shrink's reader reads back with every metadata type and tensor type written,
// gguf-py's golden file copied entry by entry into the same bytes, and bad input refused with `path` left as it was.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/gguf_test_support.hpp"
#include "io/temp_dir.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_writer.hpp"

using shrink::io::GgufFile;
using shrink::io::GgufType;
using shrink::io::GgufWriter;

namespace {

using shrink::test::ggml_type_id;
using shrink::test::gguf_stored;
using shrink::test::whole_file;

bool writer_test_file_exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

TEST_CASE("GgufWriter: metadata of each type and tensors of each written type read back", "[io][gguf][writer]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("written.gguf");
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = normal(rng);
    return v;
  };
  for (std::uint32_t alignment : {32u, 64u}) {
    INFO("alignment " << alignment);
    GgufWriter w;
    if (alignment != 32) w.set_uint32("general.alignment", alignment);
    w.set_string("general.architecture", "llama")
        .set_uint32("llama.block_count", 30)
        .set_int32("test.int32", -7)
        .set_uint64("test.uint64", 1ull << 40)
        .set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
        .set_bool("test.bool", true)
        .set_strings("tokenizer.ggml.tokens", {"<s>", "", "h\xc3\xa9llo"})
        .set_int32s("tokenizer.ggml.token_type", {1, 3, -2})
        .set_float32s("tokenizer.ggml.scores", {0.5f, -1.25f});
    struct Spec {
      std::string name;
      std::vector<std::int64_t> shape;
      GgufType type;
      bool by_fill;
    };
    const std::vector<Spec> specs = {{"f32.bias", {7}, GgufType::f32, false},
                                     {"f16.weight", {3, 5}, GgufType::f16, true},
                                     {"bf16.weight", {2, 2, 3}, GgufType::bf16, false},
                                     {"q8_0.weight", {3, 64}, GgufType::q8_0, true},
                                     {"q4_0.weight", {2, 1, 2, 32}, GgufType::q4_0, false},
                                     {"q4_1.weight", {5, 32}, GgufType::q4_1, true},
                                     {"q5_0.weight", {1, 96}, GgufType::q5_0, false},
                                     {"q5_1.weight", {4, 64}, GgufType::q5_1, true}};
    std::vector<std::vector<std::uint8_t>> stored;
    for (const Spec& s : specs) {
      std::size_t n = 1;
      for (std::int64_t d : s.shape) n *= static_cast<std::size_t>(d);
      stored.push_back(gguf_stored(ggml_type_id(s.type), values(n)));
      if (s.by_fill) {
        const std::vector<std::uint8_t> bytes = stored.back();
        w.add_tensor(s.name, s.shape, ggml_type_id(s.type), [bytes](std::uint8_t* out, std::size_t size) {
          REQUIRE(size == bytes.size());
          std::copy(bytes.begin(), bytes.end(), out);
        });
      } else {
        w.add_tensor(s.name, s.shape, ggml_type_id(s.type), stored.back());
      }
    }
    w.write(path);
    const GgufFile f = GgufFile::open(path);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == alignment);
    CHECK(f.get_string("general.architecture") == "llama");
    CHECK(f.get_uint("llama.block_count") == 30);
    CHECK(f.get_int("test.int32") == -7);
    CHECK(f.get_uint("test.uint64") == (1ull << 40));
    CHECK(f.get_float("llama.attention.layer_norm_rms_epsilon") == static_cast<double>(1e-5f));
    CHECK(f.get_bool("test.bool"));
    CHECK(f.get_strings("tokenizer.ggml.tokens") == std::vector<std::string>{"<s>", "", "h\xc3\xa9llo"});
    CHECK(f.get_ints("tokenizer.ggml.token_type") == std::vector<std::int64_t>{1, 3, -2});
    CHECK(f.get_floats("tokenizer.ggml.scores") == std::vector<double>{0.5, -1.25});
    REQUIRE(f.tensors().size() == specs.size());
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto& t = f.tensors()[i];
      INFO(t.name);
      CHECK(t.name == specs[i].name);
      CHECK(t.shape == specs[i].shape);
      CHECK(t.type == ggml_type_id(specs[i].type));
      CHECK((t.offset - f.data_offset()) % alignment == 0);
      CHECK(std::vector<std::uint8_t>(f.tensor_data(t), f.tensor_data(t) + t.bytes) == stored[i]);
    }
  }
}

TEST_CASE("GgufWriter: gguf-py's golden file copied entry by entry gives its bytes back", "[io][gguf][writer]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("copy.gguf");
  const GgufFile golden = GgufFile::open(shrink::test::gguf_golden("gguf_small.gguf"));
  GgufWriter w;
  for (const auto& e : golden.metadata()) w.copy_metadata(golden, e);
  for (const auto& t : golden.tensors())
    w.add_tensor(t.name, t.shape, t.type,
                 std::vector<std::uint8_t>(golden.tensor_data(t), golden.tensor_data(t) + t.bytes));
  w.write(path);
  const std::vector<std::uint8_t> original = whole_file(shrink::test::gguf_golden("gguf_small.gguf")),
                                  copy = whole_file(path);
  // gguf-py pads the last tensor to the alignment too; everything before that padding is the same bytes.
  REQUIRE(copy.size() <= original.size());
  CHECK(std::equal(copy.begin(), copy.end(), original.begin()));
  for (std::size_t i = copy.size(); i < original.size(); ++i) CHECK(original[i] == 0);
  // An entry of another file is refused by name.
  const GgufFile other = GgufFile::open(path);
  GgufWriter again;
  shrink::io::GgufMetadataEntry forged = other.metadata().front();
  forged.offset += 1;
  CHECK_THROWS_WITH(again.copy_metadata(golden, forged), Catch::Contains("is not a metadata entry of this file"));
}

TEST_CASE("GgufWriter refuses bad input by name, and a failed write leaves the path as it was",
          "[io][gguf][writer][errors]") {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  CHECK_THROWS_WITH(w.set_uint32("general.architecture", 1), Catch::Contains("\"general.architecture\" set twice"));
  CHECK_THROWS_WITH(w.set_bool("", true), Catch::Contains("an empty key"));
  CHECK_THROWS_WITH(w.set_uint32("general.alignment", 48), Catch::Contains("expected a uint32 power of two"));
  CHECK_THROWS_WITH(w.set_uint64("general.alignment", 64), Catch::Contains("expected a uint32 power of two"));
  const std::vector<std::uint8_t> q4(18 * 2);
  w.add_tensor("a", {2, 32}, ggml_type_id(GgufType::q4_0), q4);
  CHECK_THROWS_WITH(w.set_uint32("general.alignment", 64), Catch::Contains("after tensors were added"));
  CHECK_THROWS_WITH(w.add_tensor("a", {2, 32}, ggml_type_id(GgufType::q4_0), q4),
                    Catch::Contains("tensor \"a\" added twice"));
  CHECK_THROWS_WITH(w.add_tensor("b", {1, 1, 1, 1, 32}, ggml_type_id(GgufType::q4_0), q4),
                    Catch::Contains("5 dimensions: expected at most 4"));
  CHECK_THROWS_WITH(w.add_tensor("b", {-1, 32}, ggml_type_id(GgufType::q4_0), q4),
                    Catch::Contains("a dimension of -1"));
  CHECK_THROWS_WITH(w.add_tensor("b", {2, 32}, 5, q4), Catch::Contains("ggml type 5 is unknown"));
  CHECK_THROWS_WITH(w.add_tensor("b", {3, 48}, ggml_type_id(GgufType::q4_0), q4),
                    Catch::Contains("innermost dimension 48: expected a multiple of 32 for Q4_0"));
  CHECK_THROWS_WITH(w.add_tensor("b", {1, 32}, ggml_type_id(GgufType::q4_0), q4),
                    Catch::Contains("36 bytes: expected 18 for Q4_0"));
  CHECK_THROWS_WITH(w.add_tensor("b", {1, 32}, ggml_type_id(GgufType::q4_0), GgufWriter::Fill{}),
                    Catch::Contains("fill is empty"));
  CHECK(w.tensor_count() == 1);
  // A refused key or tensor is not taken: the same name goes in once it is right.
  w.add_tensor("b", {1, 32}, ggml_type_id(GgufType::q4_0), std::vector<std::uint8_t>(18));
  CHECK(w.tensor_count() == 2);
  GgufWriter v;
  CHECK_THROWS(v.set_uint64("general.alignment", 64));
  v.set_uint32("general.alignment", 64);
  CHECK(v.alignment() == 64);

  shrink::test::TempDir dir;
  const std::string path = dir.file("model.gguf");
  { std::ofstream(path) << "the old file"; }
  w.add_tensor("c", {1, 32}, ggml_type_id(GgufType::q4_0),
               [](std::uint8_t*, std::size_t) { throw std::runtime_error("quantization failed"); });
  CHECK_THROWS_WITH(w.write(path), "quantization failed");
  const std::vector<std::uint8_t> left = whole_file(path);
  CHECK(std::string(left.begin(), left.end()) == "the old file");
  CHECK(dir.entries() == 1);  // no temporary file left behind
  CHECK_THROWS_WITH(w.write(dir.file("missing/model.gguf")),
                    Catch::Contains("GgufWriter::write") && Catch::Contains("cannot create a temporary file"));
  CHECK_FALSE(writer_test_file_exists(dir.file("missing/model.gguf")));
}
