// The answer of every can_implement_* query, on both backends: ok, or the argument at fault with its value and what
// was expected; require_supported turns a no into shrink::Error.
#pragma once

#include <string>
#include <utility>

#include "shrink/core/error.hpp"

namespace shrink {

struct Support {
  bool ok = true;
  std::string argument;
  std::string value;
  std::string expected;

  explicit operator bool() const { return ok; }
  // "argument = value: expected ...", empty when ok.
  std::string reason() const { return ok ? std::string() : argument + " = " + value + ": expected " + expected; }

  static Support yes() { return Support{}; }
  static Support no(std::string argument, std::string value, std::string expected) {
    return Support{false, std::move(argument), std::move(value), std::move(expected)};
  }
};

// Throws shrink::Error naming `function` when the operands cannot run.
inline void require_supported(const Support& support, const char* function) {
  if (!support) fail(function, support.argument.c_str(), support.value, support.expected);
}

}  // namespace shrink
