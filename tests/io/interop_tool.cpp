// Helper of tests/io/interop.py: `copy IN OUT` reads a safetensors file with shrink and writes every tensor
// and the metadata again in file order; `make OUT` writes a file of every dtype with bytes from a formula
// the Python side recomputes. Exits 1 with shrink's message on any error.
#include <cstdio>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "shrink/io/safetensors.hpp"

namespace {

void copy(const std::string& in, const std::string& out) {
  const shrink::io::SafetensorsFile file(in);
  shrink::io::SafetensorsWriter writer(out);
  for (const auto& t : file.tensors()) writer.add_tensor(t.name, t.dtype, t.shape);
  for (const auto& [key, value] : file.metadata()) writer.add_metadata(key, value);
  writer.write_header();
  for (const auto& t : file.tensors()) writer.write(t.name, file.bytes(t.name));
  writer.finish();
  std::printf("safetensors_interop: copied %zu tensors and %zu metadata entries from %s\n", file.tensors().size(),
              file.metadata().size(), in.c_str());
}

// Byte k of tensor number j; BOOL bytes are 0 or 1. interop.py computes the same.
unsigned char pattern(std::size_t j, std::size_t k, bool boolean) {
  const auto v = static_cast<unsigned char>((k * 31 + j * 7 + 1) & 0xFF);
  return boolean ? v & 1 : v;
}

void make(const std::string& out) {
  using shrink::ScalarType;
  const ScalarType types[] = {ScalarType::f64,     ScalarType::i64,     ScalarType::f32,  ScalarType::i32,
                              ScalarType::f16,     ScalarType::bf16,    ScalarType::i16,  ScalarType::i8,
                              ScalarType::u8,      ScalarType::boolean, ScalarType::f8_e4m3, ScalarType::f8_e5m2};
  shrink::io::SafetensorsWriter writer(out);
  std::vector<std::string> names;
  for (ScalarType type : types) {
    names.push_back(shrink::io::safetensors_dtype_name(type));
    writer.add_tensor(names.back(), type, {2, 3});
  }
  writer.add_tensor("scalar", ScalarType::f32, {});
  writer.add_tensor("empty", ScalarType::f32, {0, 4});
  writer.add_metadata("writer", "shrink");
  writer.add_metadata("unicode", "\xc3\xbc");  // ü
  writer.write_header();
  for (std::size_t j = 0; j < names.size(); ++j) {
    const std::size_t bytes = 6 * static_cast<std::size_t>(shrink::element_bits(types[j]) / 8);
    std::vector<unsigned char> data(bytes);
    for (std::size_t k = 0; k < bytes; ++k) data[k] = pattern(j, k, types[j] == ScalarType::boolean);
    writer.write(names[j], data.data(), data.size());
  }
  const float scalar = 2.5f;
  writer.write("scalar", &scalar, sizeof scalar);
  writer.write("empty", nullptr, 0);
  writer.finish();
  std::printf("safetensors_interop: wrote %s\n", out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "copy") {
      copy(args[1], args[2]);
    } else if (args.size() == 2 && args[0] == "make") {
      make(args[1]);
    } else {
      std::fprintf(stderr, "usage: safetensors_interop copy IN OUT | make OUT\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "safetensors_interop: %s\n", e.what());
    return 1;
  }
  return 0;
}
