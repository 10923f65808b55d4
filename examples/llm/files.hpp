// Whole-file reads and writes of the LLM example's programs: a write goes to a temporary file renamed over the
// target, so a failed run leaves no partial file.
#pragma once

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "shrink/core/error.hpp"

namespace llm {

inline std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) shrink::fail("shrink_llm", "text", path, "a readable file");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::remove(partial.c_str());
      shrink::fail("shrink_llm", "output", path, "a writable file");
    }
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    shrink::fail("shrink_llm", "output", path, "a path the temporary file can be renamed to");
  }
}

}  // namespace llm
