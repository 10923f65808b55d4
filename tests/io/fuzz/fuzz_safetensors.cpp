// libFuzzer harness for the safetensors reader: any input must either parse into tensors that lie inside it or
// raise shrink::Error; a crash, a sanitizer report or any other exception is a bug. Built and run by
// scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>

#include "shrink/core/error.hpp"
#include "shrink/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const shrink::io::ByteView file{reinterpret_cast<const std::byte*>(data), size};
  try {
    const shrink::io::SafetensorsHeader header = shrink::io::parse_safetensors(file, "fuzz input");
    // What the reader promises: every tensor's bytes lie inside the data area, which lies inside the input.
    if (header.data_start > size || header.data_bytes > size - header.data_start) __builtin_trap();
    std::uint64_t sum = 0;
    for (const shrink::io::TensorInfo& t : header.tensors) {
      if (t.offset > header.data_bytes || t.bytes > header.data_bytes - t.offset) __builtin_trap();
      const std::uint8_t* first = data + header.data_start + t.offset;
      for (std::uint64_t i = 0; i < t.bytes; i += 97) sum += first[i];  // touch the range: ASan checks the reads
    }
    volatile std::uint64_t sink = sum;
    (void)sink;
  } catch (const shrink::Error&) {
  }
  return 0;
}
