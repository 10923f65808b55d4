// libFuzzer harness for the GGUF reader: any input must either parse into tensors that lie inside it, whose supported
// types all dequantize, or raise shrink::Error; a crash, a sanitizer report or any other exception is a bug. Built and
// run by scripts/fuzz.sh (clang, -fsanitize=fuzzer,address,undefined).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const shrink::io::GgufFile file = shrink::io::GgufFile::parse(data, size, "fuzz input");
    for (const shrink::io::GgufMetadataEntry& e : file.metadata()) {
      if (e.offset > size || e.bytes > size - e.offset) __builtin_trap();
      (void)file.value_text(e);
    }
    for (const shrink::io::GgufTensorInfo& t : file.tensors()) {
      // What the reader promises: every tensor's bytes lie inside the input.
      if (t.offset > size || t.bytes > size - t.offset) __builtin_trap();
      if (shrink::io::gguf_type_supported(t.type)) {
        const std::vector<float> values = file.dequantize(t);
        if (values.size() != static_cast<std::size_t>(t.elements())) __builtin_trap();
      }
    }
  } catch (const shrink::Error&) {
  }
  return 0;
}
