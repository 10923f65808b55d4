// UTF-8 in and out: strict decoding of one code point (the text the tokenizer accepts) and encoding of one.
//
// Strict means what Unicode's Table 3-7 allows: no overlong forms, no surrogates (U+D800..U+DFFF), nothing past
// U+10FFFF, no stray continuation bytes, no sequence cut short. Hugging Face tokenizers takes a Rust &str, valid by
// construction, and Python's bytes.decode("utf-8") refuses the same sequences; so invalid bytes are an error here,
// never replaced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "shrink/core/error.hpp"

namespace llm::utf8 {

struct Decoded {
  std::uint32_t code_point;
  std::size_t length;  // bytes it took, 1..4; 0 when the bytes at the offset are not valid UTF-8
};

// The code point starting at text[offset] (offset < text.size()).
inline Decoded decode_one(std::string_view text, std::size_t offset) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[offset + i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  std::size_t length = 0;
  std::uint32_t code_point = 0;
  std::uint8_t low = 0x80, high = 0xBF;  // the range of the second byte (Table 3-7 narrows it after E0 ED F0 F4)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code_point = lead & 0x1Fu;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code_point = lead & 0x0Fu;
    if (lead == 0xE0) low = 0xA0;   // below: overlong
    if (lead == 0xED) high = 0x9F;  // above: surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code_point = lead & 0x07u;
    if (lead == 0xF0) low = 0x90;   // below: overlong
    if (lead == 0xF4) high = 0x8F;  // above: past U+10FFFF
  } else {
    return {0, 0};  // a continuation byte, C0, C1 or F5..FF cannot start a sequence
  }
  if (offset + length > text.size()) return {0, 0};
  for (std::size_t i = 1; i < length; ++i) {
    const std::uint8_t b = byte(i);
    if (b < (i == 1 ? low : 0x80) || b > (i == 1 ? high : 0xBF)) return {0, 0};
    code_point = (code_point << 6) | (b & 0x3Fu);  // six payload bits per continuation byte
  }
  return {code_point, length};
}

// Throws shrink::Error naming the offset and value of the first byte that does not start valid UTF-8.
inline void require_valid(std::string_view text, const char* function, const char* argument) {
  for (std::size_t offset = 0; offset < text.size();) {
    const Decoded d = decode_one(text, offset);
    if (d.length == 0) {
      static const char* hex = "0123456789ABCDEF";
      const auto b = static_cast<std::uint8_t>(text[offset]);
      shrink::fail(function, std::string(argument) + " byte " + std::to_string(offset) + " = 0x" + hex[b >> 4] +
                                 hex[b & 15] + ": expected valid UTF-8 (a sequence per Unicode Table 3-7)");
    }
    offset += d.length;
  }
}

// Appends the UTF-8 form of code_point (at most U+10FFFF, not a surrogate) to out.
inline void append(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

}  // namespace llm::utf8
