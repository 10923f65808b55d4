// The character class of a code point for the GPT-2 split: letter (\p{L}), number (\p{N}), whitespace (\s) or other.
// The ranges are generated (unicode_class_table.hpp, by gen_unicode_classes.py); ASCII takes a table lookup,
// the rest a binary search over the ranges.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>

#include "unicode_class_table.hpp"

namespace llm::unicode {

namespace detail {

inline std::array<CharClass, 128> ascii_classes() {
  std::array<CharClass, 128> classes{};
  for (const CodePointRange& range : kClassRanges)
    for (std::uint32_t c = range.first; c <= range.last && c < 128; ++c) classes[c] = range.char_class;
  return classes;
}

}  // namespace detail

inline CharClass char_class(std::uint32_t code_point) {
  static const std::array<CharClass, 128> ascii = detail::ascii_classes();
  if (code_point < 128) return ascii[code_point];
  // The last range whose first code point is <= code_point, if it reaches that far.
  std::size_t lo = 0, hi = std::size(kClassRanges);
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (kClassRanges[mid].first <= code_point) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == 0) return CharClass::kOther;
  const CodePointRange& range = kClassRanges[lo - 1];
  return code_point <= range.last ? range.char_class : CharClass::kOther;
}

}  // namespace llm::unicode
