// Helpers the GGUF tests share (test_gguf_quantize, test_gguf_writer, test_gguf_requantize: one unity translation
// unit, so file-local helpers of the same name would clash): golden paths, ggml type ids, a type's stored bytes.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "shrink/io/gguf_dequantize.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_types.hpp"

namespace shrink::test {

// tests/golden/NAME.
inline std::string gguf_golden(const std::string& name) {
  return std::string(SHRINK_TEST_DATA_DIR) + "/golden/" + name;
}

constexpr std::uint32_t ggml_type_id(io::GgufType t) { return static_cast<std::uint32_t>(t); }

// x as io::gguf_quantize stores it in ggml type `type`.
inline std::vector<std::uint8_t> gguf_stored(std::uint32_t type, const std::vector<float>& x) {
  const auto layout = io::gguf_type_layout(type);
  std::vector<std::uint8_t> out(x.size() / layout.block_elements * layout.block_bytes, 0xAB);
  io::gguf_quantize(type, x.data(), static_cast<std::int64_t>(x.size()), out.data());
  return out;
}

// `elements` values of ggml type `type` stored in `bytes`, as io::gguf_dequantize reads them.
inline std::vector<float> gguf_values(std::uint32_t type, const std::vector<std::uint8_t>& bytes,
                                      std::size_t elements) {
  std::vector<float> out(elements);
  io::gguf_dequantize(type, bytes.data(), static_cast<std::int64_t>(elements), out.data());
  return out;
}

// The whole of a file.
inline std::vector<std::uint8_t> whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace shrink::test
