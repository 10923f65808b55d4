// IDX files (the MNIST family's format), gzipped or plain, read as untrusted input: every size is checked first.
//
// Layout: bytes 0-1 are zero, byte 2 the element type (0x08 = unsigned byte, the only one these files use),
// byte 3 the rank r; then r big-endian uint32 dimensions; then the product of the dimensions in bytes, row-major,
// and nothing after. A bad magic, a zero or oversized dimension, a truncated payload or trailing bytes raise
// shrink::Error naming the file and what was expected.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"

namespace fmnist {

struct IdxArray {
  std::vector<std::int64_t> dims;    // e.g. [60000, 28, 28] for images, [60000] for labels
  std::vector<std::uint8_t> values;  // product(dims) bytes, row-major
};

// A Fashion-MNIST file decompresses to at most 47 MB; anything past this is refused (a gzip bomb, say).
inline constexpr std::size_t kMaxIdxBytes = std::size_t{256} << 20;

// The whole decompressed content of a gzip file; zlib passes a file that is not gzipped through unchanged.
inline std::vector<std::uint8_t> read_gzip_file(const std::string& path, std::size_t max_bytes = kMaxIdxBytes) {
  const char* fn = "fmnist::read_gzip_file";
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) shrink::fail(fn, "path", path, "a readable file");
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> chunk(std::size_t{1} << 16);
  for (;;) {
    const int n = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (n < 0) {
      int code = Z_OK;
      shrink::fail(fn, "path", path, std::string("a valid gzip stream (zlib: ") + gzerror(file.get(), &code) + ")");
    }
    if (n == 0) break;
    if (bytes.size() + static_cast<std::size_t>(n) > max_bytes)
      shrink::fail(fn, "path", path, "at most " + std::to_string(max_bytes) + " decompressed bytes");
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  }
  // zlib reports a stream cut short (Z_BUF_ERROR) only here, after the reads have returned what there was.
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK) shrink::fail(fn, "path", path, std::string("a complete gzip stream (zlib: ") + message + ")");
  return bytes;
}

// Parses an IDX image of `expected_rank` dimensions from `bytes`; `source` names the file in errors.
inline IdxArray parse_idx(const std::vector<std::uint8_t>& bytes, int expected_rank, const std::string& source) {
  const std::string fn = "fmnist::parse_idx(" + source + ")";
  if (bytes.size() < 4) shrink::fail(fn.c_str(), "size", bytes.size(), "at least the 4 bytes of the IDX magic number");
  if (bytes[0] != 0 || bytes[1] != 0)
    shrink::fail(fn.c_str(), "magic", "bytes " + std::to_string(bytes[0]) + " " + std::to_string(bytes[1]),
                 "two zero bytes opening an IDX file");
  if (bytes[2] != 0x08) shrink::fail(fn.c_str(), "element type", static_cast<int>(bytes[2]), "8 (unsigned byte)");
  if (bytes[3] != expected_rank)
    shrink::fail(fn.c_str(), "rank", static_cast<int>(bytes[3]), std::to_string(expected_rank));
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(expected_rank);
  if (bytes.size() < header)
    shrink::fail(fn.c_str(), "size", bytes.size(), "at least " + std::to_string(header) + " bytes of header");

  IdxArray array;
  for (int d = 0; d < expected_rank; ++d) {
    const std::uint8_t* p = bytes.data() + 4 + 4 * d;
    const std::uint32_t dim =
        (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
    if (dim == 0) shrink::fail(fn.c_str(), ("dimension " + std::to_string(d)).c_str(), dim, "a positive size");
    array.dims.push_back(dim);
  }
  const std::uint64_t available = bytes.size() - header;
  std::uint64_t elements = 1;
  for (std::size_t d = 0; d < array.dims.size(); ++d) {
    const auto dim = static_cast<std::uint64_t>(array.dims[d]);
    // Checked against the bytes present before multiplying, so the product cannot overflow.
    if (dim > available / elements)
      shrink::fail(fn.c_str(), ("dimension " + std::to_string(d)).c_str(), dim,
                   "a size whose product fits the " + std::to_string(available) + " bytes after the header");
    elements *= dim;
  }
  if (elements != available)
    shrink::fail(
        fn.c_str(), "payload", std::to_string(available) + " bytes",
        std::to_string(elements) + " bytes, the product of the dimensions (file truncated or with trailing data)");
  array.values.assign(bytes.begin() + static_cast<std::ptrdiff_t>(header), bytes.end());
  return array;
}

// read_gzip_file then parse_idx.
inline IdxArray read_idx_file(const std::string& path, int expected_rank) {
  return parse_idx(read_gzip_file(path), expected_rank, path);
}

}  // namespace fmnist
