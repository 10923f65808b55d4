// String helpers of the tests.
#pragma once

#include <string>

namespace shrink::test {

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace shrink::test
