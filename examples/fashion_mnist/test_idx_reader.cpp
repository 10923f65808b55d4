// Tests of the IDX reader on hostile input: bad headers, every truncation, trailing bytes, oversized dimensions and
// gzip streams cut short must raise shrink::Error; a valid file must read back exactly.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "idx_reader.hpp"

namespace {

// A rank-3 IDX image of unsigned bytes: magic 0 0 8 3, dims big-endian, then d0*d1*d2 values 0, 1, 2, ...
std::vector<std::uint8_t> idx_images(std::uint32_t d0, std::uint32_t d1, std::uint32_t d2) {
  std::vector<std::uint8_t> bytes{0, 0, 0x08, 3};
  for (std::uint32_t d : {d0, d1, d2})
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(d >> shift));
  for (std::uint32_t i = 0; i < d0 * d1 * d2; ++i) bytes.push_back(static_cast<std::uint8_t>(i));
  return bytes;
}

std::string temporary_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("shrink_fmnist_" + name)).string();
}

void write_gzip(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

std::vector<std::uint8_t> read_raw(const std::string& path) {
  std::vector<std::uint8_t> bytes(std::filesystem::file_size(path));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fread(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
  return bytes;
}

void write_raw(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  std::fclose(f);
}

}  // namespace

TEST_CASE("a valid IDX image reads back exactly") {
  const fmnist::IdxArray a = fmnist::parse_idx(idx_images(2, 3, 4), 3, "mem");
  CHECK(a.dims == std::vector<std::int64_t>{2, 3, 4});
  REQUIRE(a.values.size() == 24);
  CHECK(a.values[23] == 23);
}

TEST_CASE("every truncation and any trailing byte of an IDX image is an error") {
  const std::vector<std::uint8_t> valid = idx_images(2, 3, 4);
  for (std::size_t n = 0; n < valid.size(); ++n) {
    const std::vector<std::uint8_t> cut(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(n));
    CHECK_THROWS_AS(fmnist::parse_idx(cut, 3, "mem"), shrink::Error);
  }
  std::vector<std::uint8_t> longer = valid;
  longer.push_back(0);
  CHECK_THROWS_WITH(fmnist::parse_idx(longer, 3, "mem"), Catch::Contains("trailing"));
}

TEST_CASE("bad magic, element type, rank and dimensions are errors") {
  std::vector<std::uint8_t> bytes = idx_images(2, 3, 4);
  bytes[0] = 1;
  CHECK_THROWS_WITH(fmnist::parse_idx(bytes, 3, "mem"), Catch::Contains("magic"));
  bytes = idx_images(2, 3, 4);
  bytes[2] = 0x0D;  // float32: not what these files hold
  CHECK_THROWS_WITH(fmnist::parse_idx(bytes, 3, "mem"), Catch::Contains("element type"));
  CHECK_THROWS_WITH(fmnist::parse_idx(idx_images(2, 3, 4), 1, "mem"), Catch::Contains("rank"));
  CHECK_THROWS_WITH(fmnist::parse_idx(idx_images(2, 0, 4), 3, "mem"), Catch::Contains("positive"));
  // Dimensions whose product overflows 64 bits are refused before any multiplication overflows.
  bytes = idx_images(1, 1, 1);
  for (std::size_t i = 4; i < 16; ++i) bytes[i] = 0xFF;
  CHECK_THROWS_AS(fmnist::parse_idx(bytes, 3, "mem"), shrink::Error);
}

TEST_CASE("a gzip file reads back, and a gzip stream cut short is an error") {
  const std::string path = temporary_path("images.gz");
  const std::vector<std::uint8_t> valid = idx_images(4, 5, 6);
  write_gzip(path, valid);
  CHECK(fmnist::read_idx_file(path, 3).values.size() == 120);

  const std::vector<std::uint8_t> compressed = read_raw(path);
  for (std::size_t n : {compressed.size() - 1, compressed.size() - 8, compressed.size() / 2}) {
    write_raw(path, std::vector<std::uint8_t>(compressed.begin(), compressed.begin() + static_cast<std::ptrdiff_t>(n)));
    CHECK_THROWS_AS(fmnist::read_idx_file(path, 3), shrink::Error);
  }
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(fmnist::read_gzip_file(path), Catch::Contains("readable"));
}

TEST_CASE("a decompressed size past the limit is an error") {
  const std::string path = temporary_path("big.gz");
  write_gzip(path, std::vector<std::uint8_t>(1 << 20, 0));
  CHECK_THROWS_WITH(fmnist::read_gzip_file(path, 1000), Catch::Contains("at most 1000"));
  std::filesystem::remove(path);
}
