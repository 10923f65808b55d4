// Bit-level building blocks of the weight-only GEMM kernels (shrink/cuda/gemm_weight_only*.cuh): small integers
// turned into 16-bit or 32-bit floats with integer operations and one exact subtraction, and the order in which one
// thread hands its weights and activations to mma.sync. Plain C++ callable from host and device code, so the host
// tests check them exhaustively: the kernels run exactly these functions.
//
// Magic numbers: a float whose exponent makes the unit in the last place 1 holds a small unsigned integer u in its
// low mantissa bits: half 0x6400 | u = 1024 + u (u < 1024), bfloat16 0x4300 | u = 128 + u (u < 128), float
// 0x4B000000 | u = 2^23 + u (u < 2^23). A signed q becomes u = q + 128 (int8) or q + 8 (int4) by flipping its sign
// bit, and subtracting the magic plus that offset leaves q exactly.
//
// mma.sync m16n8k16 order: the product sums over k, so any order of k works as long as A (activations) and B
// (weights) follow the same one. Thread t of a quad (lane % 4) loads 16 consecutive k of its weight row, k = kb + 16t
// + i (i < 16) in a block of 64; in step s (of 4) its B registers hold weight pairs and its A registers the matching
// activation pairs, as below, so every k of the block meets its own activation exactly once:
//   int8: B0 = (i = 4s, 4s + 1), B1 = (4s + 2, 4s + 3)                   A: the same, contiguous
//   int4: B0 = (i = a, a + 4), B1 = (a + 1, a + 5), a = 8 (s / 2) + 2 (s % 2)   A: the same pairs
// (for int4 the pairs (j, j + 4) of a 32-bit word of nibbles are what one AND and one OR extract).
#pragma once

#include <cstdint>

#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"

namespace shrink::cuda::kernels::linear_weight_only {

// ---- Constants (16-bit pairs: the same value in both halves) ---------------------------------------------------
inline constexpr std::uint32_t kHalfMagicPair = 0x64006400u;           // half 1024
inline constexpr std::uint32_t kBfloat16MagicPair = 0x43004300u;       // bfloat16 128
inline constexpr std::uint32_t kHalfMinus1152Pair = 0xE480E480u;       // half -(1024 + 128): int8 offset
inline constexpr std::uint32_t kHalfMinus1032Pair = 0xE408E408u;       // half -(1024 + 8): int4 offset
inline constexpr std::uint32_t kBfloat16Minus136Pair = 0xC308C308u;    // bfloat16 -(128 + 8): int4 offset
inline constexpr std::uint32_t kHalfOnePair = 0x3C003C00u;             // half 1
inline constexpr std::uint32_t kBfloat16OnePair = 0x3F803F80u;         // bfloat16 1
inline constexpr std::uint32_t kFloatMagicBits = 0x4B000000u;          // float 2^23
inline constexpr float kFloatMagicInt8 = 8388736.0f;                   // 2^23 + 128
inline constexpr float kFloatMagicInt4 = 8388616.0f;                   // 2^23 + 8

// ---- Sign flips: q (two's complement) becomes u = q + 128 or q + 8 in every byte or nibble ----------------------
SHRINK_HOST_DEVICE constexpr std::uint32_t flip_int8_signs(std::uint32_t word) { return word ^ 0x80808080u; }
SHRINK_HOST_DEVICE constexpr std::uint32_t flip_int4_signs(std::uint32_t word) { return word ^ 0x88888888u; }

// ---- int8 ---------------------------------------------------------------------------------------------------------
// Bytes 2p and 2p + 1 of a flipped word as halves 1024 + u (low half from the lower byte); subtract
// kHalfMinus1152Pair's value to get q.
SHRINK_HOST_DEVICE constexpr std::uint32_t int8_pair_as_biased_half(std::uint32_t flipped, int pair) {
  return ((flipped >> (16 * pair)) & 0xFFu) | (((flipped >> (16 * pair + 8)) & 0xFFu) << 16) | kHalfMagicPair;
}

// Byte b of a flipped word as the float q, exactly: (2^23 + u) - (2^23 + 128).
SHRINK_HOST_DEVICE inline float int8_byte_as_float(std::uint32_t flipped, int byte) {
  return shrink::bits_to_float(kFloatMagicBits | ((flipped >> (8 * byte)) & 0xFFu)) - kFloatMagicInt8;
}

// Bytes 2p and 2p + 1 of a flipped word as a bfloat16 pair, exactly (q has at most 8 significant bits): the top
// halves of the two floats. bfloat16 has no exact magic for 256 values, hence the detour through float.
SHRINK_HOST_DEVICE inline std::uint32_t int8_pair_as_bfloat16(std::uint32_t flipped, int pair) {
  const std::uint32_t low = shrink::float_to_bits(int8_byte_as_float(flipped, 2 * pair));
  const std::uint32_t high = shrink::float_to_bits(int8_byte_as_float(flipped, 2 * pair + 1));
  return (low >> 16) | (high & 0xFFFF0000u);
}

// ---- int4 (element e of a word in bits 4e .. 4e + 3: core/int4.hpp's order) ----------------------------------------
// Elements j and j + 4 (j < 4) of a flipped word as magic | u in each half: half 1024 + u, bfloat16 128 + u; subtract
// kHalfMinus1032Pair's or kBfloat16Minus136Pair's value to get q.
SHRINK_HOST_DEVICE constexpr std::uint32_t int4_pair_as_biased(std::uint32_t flipped, int j, std::uint32_t magic) {
  return ((flipped >> (4 * j)) & 0x000F000Fu) | magic;
}

// Element e of a flipped word as the float q, exactly: (2^23 + u) - (2^23 + 8).
SHRINK_HOST_DEVICE inline float int4_element_as_float(std::uint32_t flipped, int e) {
  return shrink::bits_to_float(kFloatMagicBits | ((flipped >> (4 * e)) & 0xFu)) - kFloatMagicInt4;
}

// ---- Zero points (affine int4 / uint4): one offset o per group replaces the fixed 8 -------------------------------
// A nibble u (after the sign flip for int4, as it is for uint4) stands for u − o: o = 8 + zp for int4 (zp in [-8, 7]),
// o = zp for uint4 (zp in [0, 15]), o = 8 without zero points (symmetric int4; uint4 with zp 8). o is in [0, 15], so
// the subtracted magics −(1024 + o), −(128 + o) and 2^23 + o are exact in half, bfloat16 and float (their unit in
// the last place is 1 there), and so is every difference u − o in [-15, 15].
SHRINK_HOST_DEVICE constexpr std::uint32_t half_minus_offset_pair(std::uint32_t o) {
  return (0xE400u | o) * 0x00010001u;  // half −(1024 + o) in both halves; o = 8 gives kHalfMinus1032Pair
}
SHRINK_HOST_DEVICE constexpr std::uint32_t bfloat16_minus_offset_pair(std::uint32_t o) {
  return (0xC300u | o) * 0x00010001u;  // bfloat16 −(128 + o) in both halves; o = 8 gives kBfloat16Minus136Pair
}
SHRINK_HOST_DEVICE inline float float_magic_offset(std::uint32_t o) {
  return shrink::bits_to_float(kFloatMagicBits | o);  // 2^23 + o; o = 8 gives kFloatMagicInt4
}
// Element e of a word (flipped or not, see above) as the float u − o, exactly: (2^23 + u) − (2^23 + o).
SHRINK_HOST_DEVICE inline float int4_element_minus_offset(std::uint32_t word, int e, float magic_offset) {
  return shrink::bits_to_float(kFloatMagicBits | ((word >> (4 * e)) & 0xFu)) - magic_offset;
}

// ---- The mma.sync order of one thread's block (see the file comment) ----------------------------------------------
// run[r] holds the activations k = kb + 16t + 2r (low half) and + 2r + 1 (high half), as loaded.
// A register of step s for the weight pair `which` (0: B0, 1: B1).
SHRINK_HOST_DEVICE constexpr std::uint32_t int8_activation_pair(const std::uint32_t (&run)[8], int step, int which) {
  return run[2 * step + which];
}
SHRINK_HOST_DEVICE constexpr std::uint32_t int4_activation_pair(const std::uint32_t (&run)[8], int step, int which) {
  // Pairs (a, a + 4) and (a + 1, a + 5) with a = 8 (s / 2) + 2 (s % 2): the low halves or the high halves of run
  // words a / 2 and a / 2 + 2.
  return which == 0 ? (run[4 * (step / 2) + step % 2] & 0xFFFFu) | (run[4 * (step / 2) + step % 2 + 2] << 16)
                    : (run[4 * (step / 2) + step % 2] >> 16) | (run[4 * (step / 2) + step % 2 + 2] & 0xFFFF0000u);
}

// The biased weight pair (before subtracting the offset) of step s for `which`, from the thread's raw weights:
// int8: words[0 .. 3] = 16 bytes; int4: words[0 .. 1] = 16 nibbles. Already flipped.
SHRINK_HOST_DEVICE constexpr std::uint32_t int8_weight_pair_biased_half(const std::uint32_t* flipped, int step,
                                                                         int which) {
  return int8_pair_as_biased_half(flipped[step], which);
}
SHRINK_HOST_DEVICE inline std::uint32_t int8_weight_pair_bfloat16(const std::uint32_t* flipped, int step, int which) {
  return int8_pair_as_bfloat16(flipped[step], which);
}
SHRINK_HOST_DEVICE constexpr std::uint32_t int4_weight_pair_biased(const std::uint32_t* flipped, int step, int which,
                                                                   std::uint32_t magic) {
  return int4_pair_as_biased(flipped[step / 2], 2 * (step % 2) + which, magic);
}

}  // namespace shrink::cuda::kernels::linear_weight_only
