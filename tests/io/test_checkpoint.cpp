// Tests for shrink/io/checkpoint.hpp: a single file, a directory and a sharded checkpoint resolved; hostile index
// files (bad JSON, paths out of the directory, missing shards and tensors, duplicates) named plainly; the index of
// written shards; the reader keeping one shard open.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"
#include "shrink/io/checkpoint.hpp"

using shrink::ScalarType;
using shrink::io::SafetensorsWriter;

namespace {

// A shard holding F32 tensors of `sizes[i]` elements named `names[i]`, each filled with its index + 1.
void write_shard(const std::string& path, const std::vector<std::string>& names,
                 const std::vector<std::int64_t>& sizes) {
  SafetensorsWriter writer(path);
  for (std::size_t i = 0; i < names.size(); ++i) writer.add_tensor(names[i], ScalarType::f32, {sizes[i]});
  writer.add_metadata("format", "pt");
  writer.write_header();
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::vector<float> values(static_cast<std::size_t>(sizes[i]), static_cast<float>(i + 1));
    writer.write(names[i], values.data(), values.size() * sizeof(float));
  }
  writer.finish();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

const char* kShard1 = "model-00001-of-00002.safetensors";
const char* kShard2 = "model-00002-of-00002.safetensors";

// Two shards: a, b in the first, c in the second; the index lists them (in an order unlike the shards').
void write_checkpoint(const shrink::test::TempDir& dir) {
  write_shard(dir.file(kShard1), {"a", "b"}, {4, 2});
  write_shard(dir.file(kShard2), {"c"}, {3});
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata": {"total_size": 1, "note": "kept"}, "weight_map": {"c": ")" + std::string(kShard2) +
                 R"(", "a": ")" + kShard1 + R"(", "b": ")" + kShard1 + R"("}})");
}

void require_index_error(const shrink::test::TempDir& dir, const std::string& index_text, const std::string& expected) {
  const std::string index = dir.file("model.safetensors.index.json");
  write_text(index, index_text);
  REQUIRE_THROWS_WITH(shrink::io::open_checkpoint(dir.file("")), Catch::Contains(expected));
}

}  // namespace

TEST_CASE("a sharded checkpoint resolves from its directory or its index, shards by name", "[io][checkpoint]") {
  shrink::test::TempDir dir;
  write_checkpoint(dir);
  for (const std::string& path : {dir.file(""), dir.file("model.safetensors.index.json")}) {
    const shrink::io::Checkpoint c = shrink::io::open_checkpoint(path);
    REQUIRE(c.sharded());
    REQUIRE(c.shards.size() == 2);
    CHECK(c.shards[0].file == kShard1);
    CHECK(c.shards[1].file == kShard2);
    CHECK(c.shards[0].tensors.size() == 2);
    CHECK(c.index_metadata["note"] == "kept");
    std::vector<std::string> names;
    for (const auto& t : c.tensors()) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"a", "b", "c"});
  }
}

TEST_CASE("a directory holds model.safetensors or an index, not both and not neither", "[io][checkpoint]") {
  shrink::test::TempDir dir;
  REQUIRE_THROWS_WITH(shrink::io::open_checkpoint(dir.file("")),
                      Catch::Contains("a directory without model.safetensors or model.safetensors.index.json"));
  write_shard(dir.file("model.safetensors"), {"w"}, {2});
  const shrink::io::Checkpoint single = shrink::io::open_checkpoint(dir.file(""));
  CHECK_FALSE(single.sharded());
  REQUIRE(single.shards.size() == 1);
  CHECK(single.shards[0].file == "model.safetensors");
  CHECK_FALSE(single.directory.empty());
  const shrink::io::Checkpoint file = shrink::io::open_checkpoint(dir.file("model.safetensors"));
  CHECK(file.directory.empty());
  write_checkpoint(dir);
  REQUIRE_THROWS_WITH(shrink::io::open_checkpoint(dir.file("")), Catch::Contains("holds both model.safetensors and"));
}

TEST_CASE("hostile index files raise errors naming the file, the tensor and what was expected", "[io][checkpoint]") {
  shrink::test::TempDir dir;
  write_checkpoint(dir);
  const std::string s1 = kShard1, s2 = kShard2;
  require_index_error(dir, "{\"weight_map\": {\"a\": ", "model.safetensors.index.json: not valid JSON");
  require_index_error(dir, "[1, 2]", "the index is a JSON array: expected an object");
  require_index_error(dir, "{\"metadata\": {}}", "no \"weight_map\"");
  require_index_error(dir, "{\"weight_map\": []}", "\"weight_map\" is a JSON array");
  require_index_error(dir, "{\"weight_map\": {}}", "\"weight_map\" is empty");
  require_index_error(dir, "{\"weight_map\": {\"a\": 3}}",
                      "weight_map entry of tensor \"a\" is a non-negative integer");
  require_index_error(dir, "{\"metadata\": 3, \"weight_map\": {\"a\": \"" + s1 + "\"}}", "\"metadata\" is a");
  for (const std::string name : {"../x.safetensors", "sub/x.safetensors", "/etc/x.safetensors", "..", "config.json"})
    require_index_error(dir, "{\"weight_map\": {\"a\": \"" + name + "\"}}",
                        "weight_map maps tensor \"a\" to \"" + name + "\"");
  require_index_error(dir, "{\"weight_map\": {\"a\": \"model-00009-of-00009.safetensors\"}}",
                      "shard \"model-00009-of-00009.safetensors\" (of tensor \"a\") is not a file in");
  // A tensor the index places in a shard that lacks it.
  require_index_error(
      dir,
      "{\"weight_map\": {\"a\": \"" + s1 + "\", \"b\": \"" + s1 + "\", \"c\": \"" + s2 + "\", \"d\": \"" + s2 + "\"}}",
      "weight_map maps tensor \"d\" to");
  // A tensor of a shard the index does not list.
  require_index_error(dir, "{\"weight_map\": {\"a\": \"" + s1 + "\", \"c\": \"" + s2 + "\"}}",
                      s1 + ": tensor \"b\" is not in the weight_map of");
  require_index_error(
      dir,
      "{\"weight_map\": {\"a\": \"" + s1 + "\", \"a\": \"" + s2 + "\", \"b\": \"" + s1 + "\", \"c\": \"" + s2 + "\"}}",
      "duplicate key \"a\"");
  // The same tensor in two shards.
  write_shard(dir.file(kShard2), {"c", "a"}, {3, 4});
  require_index_error(dir, "{\"weight_map\": {\"a\": \"" + s1 + "\", \"b\": \"" + s1 + "\", \"c\": \"" + s2 + "\"}}",
                      s2 + ": tensor \"a\" is also in this shard, but");
}

TEST_CASE("the index of written shards sums their bytes and maps each tensor to its shard", "[io][checkpoint]") {
  shrink::test::TempDir dir;
  write_checkpoint(dir);
  const shrink::io::Checkpoint c = shrink::io::open_checkpoint(dir.file(""));
  const nlohmann::json index = shrink::io::checkpoint_index_json(c.index_metadata, c.shards);
  CHECK(index["metadata"]["total_size"] == (4 + 2 + 3) * 4);
  CHECK(index["metadata"]["note"] == "kept");
  CHECK(index["weight_map"]["a"] == kShard1);
  CHECK(index["weight_map"]["c"] == kShard2);
  CHECK(index["weight_map"].size() == 3);
}

TEST_CASE("the reader opens the shard of each tensor, one at a time, and notices a shard that changed",
          "[io][checkpoint]") {
  shrink::test::TempDir dir;
  write_checkpoint(dir);
  const shrink::io::Checkpoint c = shrink::io::open_checkpoint(dir.file(""));
  shrink::io::CheckpointReader reader(c);
  CHECK(reader.file_of("c").path() == dir.file(kShard2));
  CHECK(reader.file_of("a").view<float>("a").data()[0] == 1.0f);
  CHECK(reader.file_of("b").view<float>("b").data()[0] == 2.0f);
  REQUIRE_THROWS_WITH(reader.file_of("z"), Catch::Contains("no tensor \"z\" in the checkpoint"));
  write_shard(dir.file(kShard2), {"c"}, {5});
  REQUIRE_THROWS_WITH(reader.file_of("c"), Catch::Contains("the file changed while it was being read"));
}
