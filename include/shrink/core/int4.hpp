// Packed 4-bit integers: two per byte, the even element of each row in the low nibble.
//
// Layout: a tensor of shape [..., L] stores each row of its last dimension in ceil(L / 2) bytes;
// element 2j of a row is bits 0-3 of byte j, element 2j+1 is bits 4-7 (PyTorch quint4x2 order).
// A row of odd length leaves the high nibble of its last byte zero. Signed values are
// two's-complement nibbles in [-8, 7]; unsigned ones are plain nibbles in [0, 15].
#pragma once

#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/core/view.hpp"

namespace shrink {

// Bytes of one packed row of `length` 4-bit elements.
SHRINK_HOST_DEVICE constexpr std::int64_t int4_row_bytes(std::int64_t length) { return (length + 1) / 2; }

// Bytes of a packed 4-bit tensor: every row of the last dimension padded to whole bytes.
inline std::int64_t int4_packed_bytes(const Shape& shape) {
  if (shape.rank == 0) return 1;
  const std::int64_t last = shape.values[shape.rank - 1];
  if (last == 0) return 0;
  return shape.product() / last * int4_row_bytes(last);
}

// Packs two values (each already in [-8, 7] or [0, 15]) into one byte, `low` in bits 0-3.
SHRINK_HOST_DEVICE constexpr std::uint8_t pack_nibbles(int low, int high) {
  return static_cast<std::uint8_t>((low & 0xF) | ((high & 0xF) << 4));
}

SHRINK_HOST_DEVICE constexpr int low_nibble_unsigned(std::uint8_t byte) { return byte & 0xF; }
SHRINK_HOST_DEVICE constexpr int high_nibble_unsigned(std::uint8_t byte) { return byte >> 4; }
// Sign-extends a two's-complement nibble: 0x8..0xF map to -8..-1.
SHRINK_HOST_DEVICE constexpr int low_nibble_signed(std::uint8_t byte) { return ((byte & 0xF) ^ 0x8) - 0x8; }
SHRINK_HOST_DEVICE constexpr int high_nibble_signed(std::uint8_t byte) { return ((byte >> 4) ^ 0x8) - 0x8; }

// Reads element `index` of a packed row.
SHRINK_HOST_DEVICE constexpr int load_int4(const std::uint8_t* row, std::int64_t index, bool is_signed) {
  const std::uint8_t byte = row[index / 2];
  if (index % 2 == 0) return is_signed ? low_nibble_signed(byte) : low_nibble_unsigned(byte);
  return is_signed ? high_nibble_signed(byte) : high_nibble_unsigned(byte);
}

// Writes element `index` of a packed row, leaving its neighbour nibble as it was.
SHRINK_HOST_DEVICE inline void store_int4(std::uint8_t* row, std::int64_t index, int value) {
  std::uint8_t& byte = row[index / 2];
  if (index % 2 == 0)
    byte = static_cast<std::uint8_t>((byte & 0xF0) | (value & 0xF));
  else
    byte = static_cast<std::uint8_t>((byte & 0x0F) | ((value & 0xF) << 4));
}

}  // namespace shrink
