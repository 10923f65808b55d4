// Hostile safetensors and GGUF files (tests/io/corpus/, written by make_corpus.py): each must raise shrink::Error
// whose message names the file and the defect.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "shrink/io/gguf.hpp"
#include "shrink/io/safetensors.hpp"

namespace {

const std::string kCorpus = std::string(SHRINK_TEST_DATA_DIR) + "/io/corpus";

// File stem -> a fragment its error message must hold.
const std::map<std::string, std::string>& expected_messages() {
  static const std::map<std::string, std::string> messages = {
      {"empty_file", "empty file: expected an 8-byte header length"},
      {"truncated_header_length", "truncated file of 5 bytes: expected at least the 8-byte"},
      {"header_length_past_file", "header length = 1000: runs past the end of the file (10 bytes)"},
      {"header_length_over_cap", "header length = 200000000: expected at most 100000000 bytes"},
      {"not_json", "header is not valid JSON"},
      {"json_array", "header is a JSON array: expected a JSON object"},
      {"bad_utf8", "header byte 3 is not valid UTF-8"},
      {"duplicate_name", "duplicate key \"w\": expected unique names"},
      {"unknown_dtype", "tensor \"w\": dtype = \"F7\": expected one of F32"},
      {"negative_shape", "tensor \"w\": shape = [-1]: dimension 0 is a negative integer"},
      {"non_integer_shape", "tensor \"w\": shape = [2.5]: dimension 0 is a non-integer number"},
      {"shape_overflow", "tensor \"w\": shape = [4294967296,4294967296]: element count overflows int64"},
      {"offsets_out_of_range", "tensor \"w\": data_offsets = [0,8]: expected offsets inside the data area of 4"},
      {"begin_after_end", "tensor \"w\": data_offsets = [4,0]: expected begin <= end"},
      {"overlapping_tensors", "tensor \"b\": data_offsets = [4, 8] overlap tensor \"a\" at [0, 8]"},
      {"gap_between_tensors", "tensor \"b\": data_offsets = [8, 12] leave a gap of 4 bytes after tensor \"a\""},
      {"bytes_not_matching_shape", "tensor \"w\": data_offsets = [0,8] hold 8 bytes: expected 12"},
      {"metadata_value_not_string", "__metadata__ value of \"k\" is a non-negative integer: expected a string"},
      {"trailing_bytes", "has 4 bytes after the last tensor \"w\""},
      {"truncated_data", "tensor \"w\": data_offsets = [0,16]: expected offsets inside the data area of 8"},
      {"entry_not_object", "tensor \"w\": entry is a non-negative integer: expected an object"},
      {"deep_nesting", "JSON nested 4 levels deep"},
  };
  return messages;
}

// GGUF file stem -> a fragment its error message must hold.
const std::map<std::string, std::string>& expected_gguf_messages() {
  static const std::map<std::string, std::string> messages = {
      {"empty_file", "empty file: expected a GGUF file"},
      {"bad_magic", "starts with \"GGML\": expected the magic \"GGUF\""},
      {"big_endian", "a big-endian GGUF file of version 3"},
      {"version_1", "GGUF version 1 (32-bit counts and lengths): expected version 2 or 3"},
      {"kv_count_huge", "kv_count = 9223372036854775808: more than the 0 bytes left can hold"},
      {"tensor_count_huge", "tensor_count = 9223372036854775808: more than the 8 bytes left can hold"},
      {"key_length_past_file", "key/value 0 key: string length 1099511627776 at byte 24 runs past the end"},
      {"unknown_value_type", "key \"k\": value type 13: expected a GGUF value type (0 to 12)"},
      {"array_count_huge", "key \"k\": array of 2305843009213693952 string values: more than the 0 bytes left"},
      {"bool_not_0_or_1", "key \"k\": bool byte 5: expected 0 or 1"},
      {"arrays_nested_too_deep", "key \"k\": arrays nested more than 8 deep"},
      {"duplicate_key", "key \"k\" appears twice: expected unique keys"},
      {"duplicate_tensor", "tensor \"w\" appears twice: expected unique tensor names"},
      {"too_many_dims", "tensor \"w\": n_dims = 5: expected at most 4"},
      {"dims_overflow", "tensor \"w\": ne = [4294967296, 4294967296]: element count overflows int64"},
      {"unknown_tensor_type", "tensor \"w\": type 99 is not a ggml type"},
      {"row_not_whole_blocks", "tensor \"w\": ne = [16] of type Q8_0: expected ne[0] a multiple of 32"},
      {"offset_unaligned", "tensor \"w\": offset = 8: expected a multiple of the alignment 32"},
      {"offset_past_file", "tensor \"w\": offset = 1099511627776 and 4 bytes: expected them inside the data section"},
      {"truncated_tensor_data", "tensor \"w\": offset = 0 and 16 bytes: expected them inside the data section of 8"},
      {"overlapping_tensors", "tensor \"b\" at data offset 32 overlaps tensor \"a\" at [0, 64)"},
      {"alignment_not_power_of_two", "key \"general.alignment\" = 24: expected a power of two"},
  };
  return messages;
}

}  // namespace

TEST_CASE("every hostile GGUF file is rejected with a message naming the file and the defect", "[io][gguf]") {
  for (const auto& [stem, fragment] : expected_gguf_messages()) {
    const std::string path = kCorpus + "/" + stem + ".gguf";
    INFO(path);
    REQUIRE(std::filesystem::is_regular_file(path));
    std::string message;
    try {
      shrink::io::GgufFile::open(path);
      FAIL("opened without an error");
    } catch (const shrink::Error& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("shrink::io::GgufFile: " + path + ": ") == 0);
    CHECK(message.find(fragment) != std::string::npos);
  }
}

TEST_CASE("every hostile file is rejected with a message naming the file and the defect", "[io][safetensors]") {
  for (const auto& [stem, fragment] : expected_messages()) {
    const std::string path = kCorpus + "/" + stem + ".safetensors";
    INFO(path);
    REQUIRE(std::filesystem::is_regular_file(path));
    std::string message;
    try {
      shrink::io::SafetensorsFile file(path);
      FAIL("opened without an error");
    } catch (const shrink::Error& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message.find("shrink::io::SafetensorsFile: " + path + ": ") == 0);
    CHECK(message.find(fragment) != std::string::npos);
  }
}

TEST_CASE("the corpus holds exactly the files the test expects", "[io][safetensors][gguf]") {
  std::size_t files = 0, gguf_files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kCorpus)) {
    INFO(entry.path().string());
    if (entry.path().extension() == ".gguf") {
      ++gguf_files;
      CHECK(expected_gguf_messages().count(entry.path().stem().string()) == 1);
      continue;
    }
    CHECK(entry.path().extension() == ".safetensors");
    ++files;
    CHECK(expected_messages().count(entry.path().stem().string()) == 1);
  }
  CHECK(files == expected_messages().size());
  CHECK(gguf_files == expected_gguf_messages().size());
}

TEST_CASE("parse_safetensors rejects every prefix of a valid file", "[io][safetensors]") {
  // A valid file with metadata and two tensors, cut at every length: never a crash, always an Error.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})";
  std::string file(8, '\0');
  for (int k = 0; k < 8; ++k) file[k] = static_cast<char>((header.size() >> (8 * k)) & 0xFF);
  file += header + std::string(11, '\x01');
  const auto* bytes = reinterpret_cast<const std::byte*>(file.data());
  const auto whole = shrink::io::parse_safetensors(shrink::io::ByteView{bytes, file.size()}, "whole");
  REQUIRE(whole.tensors.size() == 2);
  for (std::size_t n = 0; n < file.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK_THROWS_AS(shrink::io::parse_safetensors(shrink::io::ByteView{bytes, n}, "prefix"), shrink::Error);
  }
}

TEST_CASE("a missing file and a directory are errors", "[io][safetensors]") {
  CHECK_THROWS_WITH(shrink::io::SafetensorsFile(kCorpus + "/no-such-file.safetensors"),
                    Catch::Contains("no-such-file.safetensors: cannot open: No such file"));
  CHECK_THROWS_WITH(shrink::io::SafetensorsFile(kCorpus), Catch::Contains("not a regular file"));
}

TEST_CASE("random byte changes to a valid file give a valid header or shrink::Error", "[io][safetensors]") {
  // Not a fuzzer, a fixed-seed smoke test: any other exception, a crash or a sanitizer report fails it.
  const std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]},"c":{"dtype":"BF16","shape":[],"data_offsets":[11,13]}})";
  std::string valid(8, '\0');
  for (int k = 0; k < 8; ++k) valid[k] = static_cast<char>((header.size() >> (8 * k)) & 0xFF);
  valid += header + std::string(13, '\x02');
  std::mt19937 rng(7);
  const char replacements[] = {'0', '9', '-', '[', ']', '{', '}', '"', ',', ':', '.', 'e', '\xff', '\0', ' '};
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string file = valid;
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) {
      const std::size_t at = rng() % file.size();
      file[at] = rng() % 2 ? replacements[rng() % sizeof replacements] : static_cast<char>(rng() % 256);
    }
    try {
      const auto parsed = shrink::io::parse_safetensors(
          shrink::io::ByteView{reinterpret_cast<const std::byte*>(file.data()), file.size()}, "mutated");
      ++accepted;
      for (const auto& t : parsed.tensors) CHECK(t.offset + t.bytes <= parsed.data_bytes);
    } catch (const shrink::Error&) {
    }
  }
  CHECK(accepted > 0);  // some changes (in the data area, say) leave a valid file
}
