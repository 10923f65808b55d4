// shrink::Error and the checks that raise it with a message naming the argument.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace shrink {

// Every failure at a host API edge: bad arguments, hostile files, CUDA errors.
// The message reads "<function>: <argument> = <value>: expected <what>".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A value as text in messages (floats with enough digits to round-trip).
template <class T>
std::string to_text(const T& value) {
  std::ostringstream out;
  out.precision(9);  // enough digits to round-trip a float
  out << value;
  return out.str();
}

inline std::string to_text(bool value) { return value ? "true" : "false"; }

// Throws shrink::Error with a message naming the function, the argument, its value and the expectation.
template <class Value>
[[noreturn]] void fail(const char* function, const char* argument, const Value& value,
                       const std::string& expected) {
  throw Error(std::string(function) + ": " + argument + " = " + to_text(value) + ": expected " + expected);
}

// Same message, when there is no single value to show.
[[noreturn]] inline void fail(const char* function, const std::string& what) {
  throw Error(std::string(function) + ": " + what);
}

template <class Value>
void require(bool condition, const char* function, const char* argument, const Value& value,
             const std::string& expected) {
  if (!condition) fail(function, argument, value, expected);
}

}  // namespace shrink
