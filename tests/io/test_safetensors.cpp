// Tests for shrink/io/safetensors.hpp: write-then-read round trips of every dtype, metadata, 0-d and empty
// tensors, typed views, and the writer's checks (order, sizes, a failed write or a killed process leaves no file).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"
#include "shrink/io/safetensors.hpp"

using shrink::ScalarType;
using shrink::io::SafetensorsFile;
using shrink::io::SafetensorsWriter;
using shrink::io::TensorDeclaration;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed, bool boolean = false) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(n);
  for (auto& b : bytes) b = static_cast<std::byte>(boolean ? rng() % 2 : rng() % 256);
  return bytes;
}

std::size_t byte_size(const TensorDeclaration& t) {
  std::size_t n = static_cast<std::size_t>(shrink::element_bits(t.dtype) / 8);
  for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const ScalarType kAllDtypes[] = {ScalarType::f64,  ScalarType::i64,     ScalarType::f32,     ScalarType::i32,
                                 ScalarType::f16,  ScalarType::bf16,    ScalarType::i16,     ScalarType::i8,
                                 ScalarType::u8,   ScalarType::boolean, ScalarType::f8_e4m3, ScalarType::f8_e5m2};

}  // namespace

TEST_CASE("dtype names map both ways", "[io][safetensors]") {
  for (ScalarType type : kAllDtypes) {
    const char* name = shrink::io::safetensors_dtype_name(type);
    REQUIRE(name != nullptr);
    CHECK(shrink::io::safetensors_dtype_from_name(name) == type);
  }
  CHECK(shrink::io::safetensors_dtype_name(ScalarType::i4) == nullptr);
  CHECK_FALSE(shrink::io::safetensors_dtype_from_name("U16").has_value());
  CHECK_FALSE(shrink::io::safetensors_dtype_from_name("f32").has_value());
}

TEST_CASE("every dtype round-trips byte for byte, with metadata", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("all.safetensors");
  std::vector<TensorDeclaration> declared;
  for (ScalarType type : kAllDtypes)
    declared.push_back({std::string("t_") + shrink::to_string(type), type, {3, 5}});
  declared.push_back({"scalar", ScalarType::f32, {}});       // 0-d: one element
  declared.push_back({"empty", ScalarType::f32, {4, 0, 2}});  // a zero dimension: no bytes
  declared.push_back({"odd", ScalarType::u8, {7}});           // leaves what follows unaligned
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcødé \"quoted\"\n"}, {"", ""}};

  std::vector<std::vector<std::byte>> contents;
  {
    SafetensorsWriter writer(path, declared, metadata);
    for (std::size_t i = 0; i < declared.size(); ++i) {
      contents.push_back(random_bytes(byte_size(declared[i]), static_cast<unsigned>(i + 1),
                                      declared[i].dtype == ScalarType::boolean));
      writer.write(declared[i].name, contents.back().data(), contents.back().size());
    }
    writer.finish();
  }
  CHECK(dir.entries() == 1);  // no temporary left beside it

  const SafetensorsFile file(path);
  CHECK(file.metadata() == metadata);
  REQUIRE(file.tensors().size() == declared.size());
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const auto& info = file.tensors()[i];  // file order is declaration order
    INFO(declared[i].name);
    CHECK(info.name == declared[i].name);
    CHECK(info.dtype == declared[i].dtype);
    CHECK(info.shape == declared[i].shape);
    CHECK(info.bytes == contents[i].size());
    const auto bytes = file.bytes(declared[i].name);
    REQUIRE(bytes.size == contents[i].size());
    if (bytes.size > 0) CHECK(std::memcmp(bytes.data, contents[i].data(), bytes.size) == 0);
  }
  CHECK(file.info("scalar").numel() == 1);
  CHECK(file.info("empty").numel() == 0);
  CHECK(file.bytes("empty").empty());
  // The data area starts 8-aligned and the wide tensors come first, so their views are aligned.
  CHECK(reinterpret_cast<std::uintptr_t>(file.bytes("t_f64").data) % 8 == 0);
}

TEST_CASE("typed views check the dtype and read the values", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("views.safetensors");
  const std::vector<double> f64 = {1.5, -2.25};
  const std::vector<float> f32 = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<std::int32_t> i32 = {-7, 8};
  const std::vector<shrink::half> f16 = {shrink::half(0.5f), shrink::half(-3.0f)};
  const std::vector<shrink::bfloat16> bf16 = {shrink::bfloat16(2.0f)};
  const std::vector<std::int16_t> i16 = {-300};
  const std::vector<std::int8_t> i8 = {-5, 6};
  const std::vector<std::uint8_t> flags = {1, 0, 1};
  const std::vector<shrink::float8_e4m3> e4m3 = {shrink::float8_e4m3(1.5f)};
  const std::vector<shrink::float8_e5m2> e5m2 = {shrink::float8_e5m2(-4.0f)};
  const std::vector<std::int64_t> i64 = {1LL << 40};
  {
    SafetensorsWriter writer(path);
    writer.add_tensor("f64", ScalarType::f64, {2});
    writer.add_tensor("i64", ScalarType::i64, {1});
    writer.add_tensor("f32", ScalarType::f32, {2, 3});
    writer.add_tensor("i32", ScalarType::i32, {2});
    writer.add_tensor("f16", ScalarType::f16, {2});
    writer.add_tensor("bf16", ScalarType::bf16, {1});
    writer.add_tensor("i16", ScalarType::i16, {1});
    writer.add_tensor("i8", ScalarType::i8, {2});
    writer.add_tensor("flags", ScalarType::boolean, {3});
    writer.add_tensor("e4m3", ScalarType::f8_e4m3, {1});
    writer.add_tensor("e5m2", ScalarType::f8_e5m2, {1});
    writer.add_metadata("k", "v");
    writer.write_header();
    writer.write("f64", shrink::make_view(f64));
    writer.write("i64", shrink::make_view(i64));
    writer.write("f32", shrink::make_view(f32, shrink::Shape{2, 3}));
    writer.write("i32", shrink::make_view(i32));
    writer.write("f16", shrink::make_view(f16));
    writer.write("bf16", shrink::make_view(bf16));
    writer.write("i16", shrink::make_view(i16));
    writer.write("i8", shrink::make_view(i8));
    writer.write("flags", shrink::make_view(flags));  // uint8_t writes BOOL
    writer.write("e4m3", shrink::make_view(e4m3));
    writer.write("e5m2", shrink::make_view(e5m2));
    writer.finish();
  }
  const SafetensorsFile file(path);
  const auto v = file.view<float>("f32");
  CHECK(v.shape() == shrink::Shape{2, 3});
  CHECK(v(1, 2) == 6.0f);
  CHECK(file.view<double>("f64")(1) == -2.25);
  CHECK(file.view<std::int64_t>("i64")(0) == (1LL << 40));
  CHECK(file.view<std::int32_t>("i32")(0) == -7);
  CHECK(file.view<shrink::half>("f16")(1).to_float() == -3.0f);
  CHECK(file.view<shrink::bfloat16>("bf16")(0).to_float() == 2.0f);
  CHECK(file.view<std::int16_t>("i16")(0) == -300);
  CHECK(file.view<std::int8_t>("i8")(0) == -5);
  CHECK(file.view<std::uint8_t>("flags")(2) == 1);
  CHECK(file.view<shrink::float8_e4m3>("e4m3")(0).to_float() == 1.5f);
  CHECK(file.view<std::uint8_t>("e4m3")(0) == shrink::float8_e4m3(1.5f).to_bits());
  CHECK(file.view<shrink::float8_e5m2>("e5m2")(0).to_float() == -4.0f);

  CHECK_THROWS_WITH(file.view<double>("f32"), Catch::Contains("tensor \"f32\" has dtype F32: expected the element type f64"));
  CHECK_THROWS_WITH(file.view<std::uint8_t>("i8"), Catch::Contains("has dtype I8"));
  CHECK_THROWS_WITH(file.bytes("nope"), Catch::Contains("no tensor \"nope\" in the file"));
  CHECK_FALSE(file.contains("nope"));
  CHECK(file.contains("f32"));
}

TEST_CASE("a misaligned tensor cannot be viewed as wider elements", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("misaligned.safetensors");
  const std::vector<std::uint8_t> one = {1};
  const std::vector<float> f = {1.0f};
  SafetensorsWriter writer(path, {{"byte", ScalarType::u8, {1}}, {"f", ScalarType::f32, {1}}});
  writer.write("byte", shrink::make_view(one));
  writer.write("f", shrink::make_view(f));
  writer.finish();
  const SafetensorsFile file(path);
  CHECK_THROWS_WITH(file.view<float>("f"), Catch::Contains("not aligned to 4 bytes"));
  float copy = 0.0f;
  std::memcpy(&copy, file.bytes("f").data, sizeof copy);
  CHECK(copy == 1.0f);
}

TEST_CASE("an empty file set and tensors written in pieces", "[io][safetensors]") {
  shrink::test::TempDir dir;
  {
    SafetensorsWriter writer(dir.file("none.safetensors"), {});
    writer.finish();
  }
  const SafetensorsFile none(dir.file("none.safetensors"));
  CHECK(none.tensors().empty());
  CHECK(none.metadata().empty());

  const auto data = random_bytes(1000, 3);
  {
    SafetensorsWriter writer(dir.file("pieces.safetensors"), {{"w", ScalarType::u8, {10, 100}}});
    for (std::size_t at = 0; at < data.size(); at += 300)
      writer.write("w", data.data() + at, std::min<std::size_t>(300, data.size() - at));
    writer.finish();
  }
  const SafetensorsFile pieces(dir.file("pieces.safetensors"));
  CHECK(std::memcmp(pieces.bytes("w").data, data.data(), data.size()) == 0);
}

TEST_CASE("a large tensor streams through the writer unbuffered", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const auto data = random_bytes(3u << 20, 9);  // larger than the writer's buffer
  {
    SafetensorsWriter writer(dir.file("large.safetensors"), {{"small", ScalarType::u8, {3}}, {"big", ScalarType::u8, {3 << 20}}});
    writer.write("small", data.data(), 3);
    writer.write("big", data.data(), data.size());
    writer.finish();
  }
  const SafetensorsFile file(dir.file("large.safetensors"));
  CHECK(std::memcmp(file.bytes("big").data, data.data(), data.size()) == 0);
  CHECK(std::memcmp(file.bytes("small").data, data.data(), 3) == 0);
}

TEST_CASE("the writer rejects bad declarations", "[io][safetensors]") {
  shrink::test::TempDir dir;
  SafetensorsWriter writer(dir.file("x.safetensors"));
  writer.add_tensor("a", ScalarType::f32, {2});
  CHECK_THROWS_WITH(writer.add_tensor("a", ScalarType::f32, {2}), Catch::Contains("tensor \"a\" declared twice"));
  CHECK_THROWS_WITH(writer.add_tensor("__metadata__", ScalarType::f32, {2}), Catch::Contains("reserved"));
  CHECK_THROWS_WITH(writer.add_tensor("b", ScalarType::i4, {2}), Catch::Contains("dtype i4 has no safetensors name"));
  CHECK_THROWS_WITH(writer.add_tensor("b", ScalarType::f32, {2, -1}), Catch::Contains("shape = [2,-1]"));
  CHECK_THROWS_WITH(writer.add_tensor("b", ScalarType::f32, {1LL << 40, 1LL << 40}),
                    Catch::Contains("byte size overflows int64"));
  CHECK_THROWS_WITH(writer.add_tensor("\xff", ScalarType::f32, {1}), Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(writer.add_metadata("k", "\xc0\x80"), Catch::Contains("not valid UTF-8"));
  CHECK_THROWS_WITH(writer.write("a", nullptr, 0), Catch::Contains("write_header() not called yet"));
  CHECK_THROWS_WITH(writer.finish(), Catch::Contains("write_header() not called yet"));
  CHECK(dir.entries() == 0);
}

TEST_CASE("the writer checks order and sizes, and a failed write leaves no file", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("out.safetensors");
  const std::vector<float> two = {1.0f, 2.0f};
  const std::vector<double> wrong = {1.0, 2.0};
  {
    SafetensorsWriter writer(path, {{"a", ScalarType::f32, {2}}, {"e", ScalarType::f32, {0}}, {"b", ScalarType::f32, {1}}});
    CHECK(dir.entries() == 0);  // the file being written has no name yet (O_TMPFILE)
    CHECK_THROWS_WITH(writer.write("b", two.data(), 4), Catch::Contains("expected tensor \"a\" next"));
    CHECK_THROWS_WITH(writer.write("zz", two.data(), 4), Catch::Contains("never declared"));
    CHECK_THROWS_WITH(writer.write("a", two.data(), 12), Catch::Contains("expected at most 8 more"));
    CHECK_THROWS_WITH(writer.write("a", shrink::make_view(wrong)), Catch::Contains("declared F32: got elements of type f64"));
    CHECK_THROWS_WITH(writer.add_tensor("c", ScalarType::f32, {1}), Catch::Contains("the header is written"));
    writer.write("a", two.data(), 8);
    CHECK_THROWS_WITH(writer.finish(), Catch::Contains("tensor \"e\" has 0 of its 0 bytes"));
    writer.write("e", nullptr, 0);
    CHECK_THROWS_WITH(writer.finish(), Catch::Contains("tensor \"b\" has 0 of its 4 bytes"));
    CHECK_FALSE(std::filesystem::exists(path));
  }  // destroyed without finish()
  CHECK(dir.entries() == 0);
}

TEST_CASE("finish replaces an existing file atomically", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  { std::ofstream(path) << "old"; }
  {
    SafetensorsWriter writer(path, {{"a", ScalarType::u8, {1}}});
    const std::uint8_t byte = 42;
    writer.write("a", &byte, 1);
    CHECK(read_all(path) == std::vector<char>{'o', 'l', 'd'});  // untouched until finish()
    writer.finish();
  }
  CHECK(SafetensorsFile(path).view<std::uint8_t>("a")(0) == 42);
  CHECK(dir.entries() == 1);
}

TEST_CASE("the header is padded to 8 bytes and parses as plain JSON", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("h.safetensors");
  {
    SafetensorsWriter writer(path, {{"w", ScalarType::bf16, {1, 2}}}, {{"format", "pt"}});
    const std::uint16_t values[2] = {0x3F80, 0x4000};
    writer.write("w", values, sizeof values);
    writer.finish();
  }
  const auto bytes = read_all(path);
  std::uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | static_cast<unsigned char>(bytes[k]);
  CHECK(n % 8 == 0);
  REQUIRE(bytes.size() == 8 + n + 4);
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  CHECK(header["w"]["dtype"] == "BF16");
  CHECK(header["w"]["shape"] == nlohmann::json::array({1, 2}));
  CHECK(header["w"]["data_offsets"] == nlohmann::json::array({0, 4}));
  CHECK(header["__metadata__"]["format"] == "pt");
}

TEST_CASE("a Git LFS pointer and a sharded checkpoint's index are named for what they are", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string pointer = dir.file("model.safetensors");
  std::ofstream(pointer, std::ios::binary)
      << "version https://git-lfs.github.com/spec/v1\noid "
         "sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 90868376\n";
  REQUIRE_THROWS_WITH(SafetensorsFile(pointer), Catch::Contains("model.safetensors: a Git LFS pointer (") &&
                                                    Catch::Contains("not the tensor data: expected the file itself"));
  const std::string index = dir.file("model.safetensors.index.json");
  std::ofstream(index, std::ios::binary) << "{\n  \"metadata\": {\"total_size\": 1000},\n  \"weight_map\": {\"w\": "
                                            "\"model-00001-of-00002.safetensors\"}\n}\n";
  REQUIRE_THROWS_WITH(SafetensorsFile(index), Catch::Contains("a JSON document, not a safetensors file") &&
                                                  Catch::Contains("index.json lists its shard files"));
}

TEST_CASE("a process killed while writing leaves no file behind", "[io][safetensors]") {
  shrink::test::TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Half of the data written, then killed as Ctrl-C or the OOM killer would: no destructor, no finish().
    std::vector<float> values(1 << 16, 1.0f);
    SafetensorsWriter writer(path, {{"w", ScalarType::f32, {2, 1 << 16}}});
    writer.write("w", values.data(), values.size() * sizeof(float));
    ::raise(SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(""))) (void)entry, ++files;
  REQUIRE(files == 0);
}
