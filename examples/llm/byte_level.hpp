// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable code point, so that a
// vocabulary of byte strings can be stored (and merged) as ordinary text.
//
// Bytes that are printable on their own keep their value as code point: '!'..'~' (0x21..0x7E), 0xA1..0xAC and
// 0xAE..0xFF. The other 68 (controls, space, DEL, 0x80..0xA0, the soft hyphen 0xAD) take the code points
// 256, 257, ... in increasing byte order; so the space 0x20 reads U+0120 'Ġ' and the newline 0x0A U+010A 'Ċ'.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace llm::byte_level {

// Whether the byte is one of those that stand for themselves.
constexpr bool is_printable_byte(unsigned byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

// The code point that stands for each byte value.
constexpr std::array<std::uint32_t, 256> byte_to_code_point_table() {
  std::array<std::uint32_t, 256> table{};
  std::uint32_t next = 256;  // the non-printable bytes, in order, take 256, 257, ...
  for (unsigned byte = 0; byte < 256; ++byte) table[byte] = is_printable_byte(byte) ? byte : next++;
  return table;
}

inline constexpr std::array<std::uint32_t, 256> kByteToCodePoint = byte_to_code_point_table();

// Every code point of the alphabet is below 256 + 68 = 324.
inline constexpr std::uint32_t kAlphabetEnd = 256 + 68;

constexpr std::uint32_t code_point_of(std::uint8_t byte) { return kByteToCodePoint[byte]; }

// For each code point below kAlphabetEnd, the byte it stands for, or -1 when it stands for none.
constexpr std::array<std::int16_t, kAlphabetEnd> code_point_to_byte_table() {
  std::array<std::int16_t, kAlphabetEnd> table{};
  for (auto& entry : table) entry = -1;
  for (unsigned byte = 0; byte < 256; ++byte) table[kByteToCodePoint[byte]] = static_cast<std::int16_t>(byte);
  return table;
}

inline constexpr std::array<std::int16_t, kAlphabetEnd> kCodePointToByte = code_point_to_byte_table();

// The byte a code point of the alphabet stands for; nothing for a code point outside the alphabet.
constexpr std::optional<std::uint8_t> byte_of(std::uint32_t code_point) {
  if (code_point >= kAlphabetEnd || kCodePointToByte[code_point] < 0) return std::nullopt;
  return static_cast<std::uint8_t>(kCodePointToByte[code_point]);
}

}  // namespace llm::byte_level
