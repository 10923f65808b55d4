// Checks on the files a command reads and writes: an output must never be its input.
#pragma once

#include <sys/stat.h>

#include <string>

#include "args.hpp"

namespace shrink::cli {

// Refuses an OUT that names the same file as IN (same path, or the same file through a link): the output is
// written beside OUT and renamed over it, which would replace the input.
inline void require_distinct_output(const std::string& in, const std::string& out) {
  if (in == out) throw UsageError("OUT is the input file '" + in + "': expected a different path (the input is never overwritten)");
  struct stat a {};
  struct stat b {};
  if (::stat(in.c_str(), &a) == 0 && ::stat(out.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
    throw UsageError("OUT '" + out + "' is the same file as the input '" + in +
                     "': expected a different path (the input is never overwritten)");
}

}  // namespace shrink::cli
