// Progress lines on stderr ("shrink quantize: [3/12] fc1.weight"), printed only when stderr is a terminal so
// that logs and pipes stay clean.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "interrupt.hpp"

namespace shrink::cli {

class Progress {
 public:
  explicit Progress(std::string command) : command_(std::move(command)), enabled_(::isatty(2) == 1) {}

  // Announces item `index` (0-based) of `count`. Each step is also where Ctrl-C stops a command (interrupt.hpp).
  void step(const std::string& what, std::size_t index, std::size_t count) const {
    throw_if_interrupted();
    if (!enabled_) return;
    std::fprintf(stderr, "%s: [%zu/%zu] %s\n", command_.c_str(), index + 1, count, what.c_str());
    std::fflush(stderr);
  }

 private:
  std::string command_;
  bool enabled_;
};

}  // namespace shrink::cli
