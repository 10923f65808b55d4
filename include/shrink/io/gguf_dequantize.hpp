// The dequantization formulas of the GGUF tensor types shrink reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K), each written once, on raw little-endian bytes; GgufFile (io/gguf.hpp) calls them tensor by tensor,
// and io/gguf_quantize.hpp writes the same blocks.
//
// Block layouts (ggml; checked against gguf-py's gguf.quants):
//   Q8_0: 34 bytes per 32 elements: fp16 d, then 32 int8 q;             x[j] = d * q[j]
//   Q4_0: 18 bytes per 32 elements: fp16 d, then 16 bytes of nibbles;    x[j] = d * (q[j] - 8)
//   Q4_1: 20 bytes per 32 elements: fp16 d, fp16 m, then 16 bytes;       x[j] = d * q[j] + m
//   Q5_0: 22 bytes per 32 elements: fp16 d, u32 qh, then 16 bytes;       x[j] = d * (q[j] - 16)
//   Q5_1: 24 bytes per 32 elements: fp16 d, fp16 m, u32 qh, 16 bytes;    x[j] = d * q[j] + m
// where, in the 4- and 5-bit types, element j < 16 has its low 4 bits in the low nibble of byte j and element j + 16
// in its high nibble; a 5-bit q[j] takes bit j of qh (little-endian) as its fifth bit.
// The K-quants: super-blocks of 256 elements in 8 sub-blocks of 32 (Q4_K, Q5_K) or 16 of 16 (Q6_K):
//   Q4_K: 144 bytes: fp16 d, fp16 dmin, 12 bytes of 6-bit (scale, min) pairs, 128 bytes of nibbles
//         x = (d·sc_s)·q − dmin·m_s        sub-block s; pairs 0-3 in the low 6 bits of bytes s and s + 4, pairs 4-7
//                                          in the nibbles of byte s + 4 with bytes s − 4 (scale) and s (min) giving
//                                          their top two bits
//         elements 64k .. 64k + 31 are the low nibbles of bytes 32k .. 32k + 31, the next 32 their high nibbles
//   Q5_K: 176 bytes: as Q4_K with 32 bytes qh after the pairs: element 64k + l takes bit 2k of qh[l] as its fifth
//         bit, element 64k + 32 + l bit 2k + 1
//   Q6_K: 210 bytes: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, fp16 d last
//         x = (d·sc)·(q − 32); in each half of 128 elements (ql + 64h, qh + 32h, scales + 8h), element l < 32 of
//         quarter i takes its low bits from ql[l + 32·(i & 1)] (low nibble for i < 2, high for i >= 2) and its high
//         bits from bits 2i, 2i + 1 of qh[l], and scale 2i + l / 16
// d·sc, dmin·m and (d·sc)·q are exact in float for Q4_K and Q5_K (11-bit times 6-bit times 5-bit significands), so each
// value is rounded once, in the subtraction; in Q6_K the last product rounds once.
// Scales are decoded exactly (core/half.hpp) and every product d * q is exact in float (an 11-bit significand times
// an integer of at most 8 bits), so each value is rounded at most once: a fused multiply-add gives the same bits.
// Non-finite scales are not checked here: they give non-finite values, which the caller checks if it cares.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/io/gguf_types.hpp"

namespace shrink::io {

namespace gguf_detail {

inline std::uint16_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (static_cast<unsigned>(p[1]) << 8));
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

constexpr int kBlock32 = 32;  // elements per block of Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1

inline void dequantize_q8_0_block(const std::uint8_t* block, float* out) {
  const float d = half_bits_to_float(load_u16(block));
  const std::uint8_t* q = block + 2;
  for (int j = 0; j < kBlock32; ++j) out[j] = d * static_cast<float>(static_cast<std::int8_t>(q[j]));  // x = d*q
}

inline void dequantize_q4_0_block(const std::uint8_t* block, float* out) {
  const float d = half_bits_to_float(load_u16(block));
  const std::uint8_t* q = block + 2;
  for (int j = 0; j < kBlock32 / 2; ++j) {
    out[j] = d * static_cast<float>((q[j] & 0x0F) - 8);               // x = d*(q-8), low nibble: element j
    out[j + kBlock32 / 2] = d * static_cast<float>((q[j] >> 4) - 8);  // high nibble: element j + 16
  }
}

inline void dequantize_q4_1_block(const std::uint8_t* block, float* out) {
  const float d = half_bits_to_float(load_u16(block));
  const float m = half_bits_to_float(load_u16(block + 2));
  const std::uint8_t* q = block + 4;
  for (int j = 0; j < kBlock32 / 2; ++j) {
    out[j] = d * static_cast<float>(q[j] & 0x0F) + m;               // x = d*q + m, low nibble: element j
    out[j + kBlock32 / 2] = d * static_cast<float>(q[j] >> 4) + m;  // high nibble: element j + 16
  }
}

// The 5-bit values of a Q5_0 / Q5_1 block: low 4 bits from the nibbles at qs, the fifth from bit j of qh.
inline void unpack_q5_values(std::uint32_t qh, const std::uint8_t* qs, int* q) {
  for (int j = 0; j < kBlock32 / 2; ++j) {
    q[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + kBlock32 / 2] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kBlock32 / 2)) & 1u) << 4);
  }
}

inline void dequantize_q5_0_block(const std::uint8_t* block, float* out) {
  const float d = half_bits_to_float(load_u16(block));
  int q[kBlock32];
  unpack_q5_values(load_u32(block + 2), block + 6, q);
  for (int j = 0; j < kBlock32; ++j) out[j] = d * static_cast<float>(q[j] - 16);  // x = d*(q-16)
}

inline void dequantize_q5_1_block(const std::uint8_t* block, float* out) {
  const float d = half_bits_to_float(load_u16(block));
  const float m = half_bits_to_float(load_u16(block + 2));
  int q[kBlock32];
  unpack_q5_values(load_u32(block + 4), block + 8, q);
  for (int j = 0; j < kBlock32; ++j) out[j] = d * static_cast<float>(q[j]) + m;  // x = d*q + m
}

constexpr int kSuperBlock = 256;  // elements per block of the K-quants

// Scale and minimum of sub-block s (0..7) of a Q4_K / Q5_K super-block from its 12 packed bytes.
inline void kquant_scale_min(const std::uint8_t* packed, int s, int& scale, int& min) {
  if (s < 4) {
    scale = packed[s] & 63;
    min = packed[s + 4] & 63;
  } else {
    scale = (packed[s + 4] & 0x0F) | ((packed[s - 4] >> 6) << 4);
    min = (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
  }
}

// Q4_K (qh == nullptr) and Q5_K: x = (d·sc)·q − dmin·m per sub-block.
inline void dequantize_q4_5_k_block(const std::uint8_t* block, const std::uint8_t* qh, const std::uint8_t* qs,
                                    float* out) {
  const float d = half_bits_to_float(load_u16(block));
  const float dmin = half_bits_to_float(load_u16(block + 2));
  const std::uint8_t* packed = block + 4;
  for (int k = 0; k < 4; ++k) {  // 64 elements: sub-blocks 2k (low nibbles) and 2k + 1 (high nibbles)
    for (int half = 0; half < 2; ++half) {
      int sc = 0, m = 0;
      kquant_scale_min(packed, 2 * k + half, sc, m);
      const float scale = d * static_cast<float>(sc), minimum = dmin * static_cast<float>(m);
      for (int l = 0; l < kBlock32; ++l) {
        int q = half == 0 ? (qs[32 * k + l] & 0x0F) : (qs[32 * k + l] >> 4);
        if (qh != nullptr) q |= ((qh[l] >> (2 * k + half)) & 1) << 4;
        out[64 * k + 32 * half + l] = scale * static_cast<float>(q) - minimum;
      }
    }
  }
}

inline void dequantize_q6_k_block(const std::uint8_t* block, float* out) {
  const std::uint8_t* ql = block;
  const std::uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
  const float d = half_bits_to_float(load_u16(block + 208));
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i)
      for (int l = 0; l < kBlock32; ++l) {
        const std::uint8_t low = ql[64 * h + l + 32 * (i & 1)];
        const int q = (i < 2 ? (low & 0x0F) : (low >> 4)) | (((qh[32 * h + l] >> (2 * i)) & 3) << 4);
        const float scale = d * static_cast<float>(scales[8 * h + 2 * i + l / 16]);
        out[128 * h + 32 * i + l] = scale * static_cast<float>(q - 32);  // x = (d·sc)·(q − 32)
      }
}

}  // namespace gguf_detail

// Dequantizes `elements` elements of ggml type `type` stored at `data` into out[0, elements). `elements` must be a
// multiple of the type's block size, and data must hold elements / block size blocks (GgufFile checks both when it
// opens a file). Unsupported types raise shrink::Error.
inline void gguf_dequantize(std::uint32_t type, const std::uint8_t* data, std::int64_t elements, float* out) {
  const GgufTypeLayout layout = gguf_type_layout(type);
  if (!gguf_type_supported(type))
    fail("shrink::io::gguf_dequantize", "type", std::string(layout.name) + " (" + std::to_string(type) + ")",
         "one of " + gguf_supported_type_names());
  if (elements < 0 || elements % layout.block_elements != 0)
    fail("shrink::io::gguf_dequantize", "elements", elements,
         "a non-negative multiple of " + std::to_string(layout.block_elements) + " for " + layout.name);
  const std::int64_t blocks = elements / layout.block_elements;
  const auto stride = static_cast<std::int64_t>(layout.block_bytes);
  switch (static_cast<GgufType>(type)) {
    case GgufType::f32:
      for (std::int64_t i = 0; i < elements; ++i) out[i] = bits_to_float(gguf_detail::load_u32(data + 4 * i));
      return;
    case GgufType::f16:
      for (std::int64_t i = 0; i < elements; ++i) out[i] = half_bits_to_float(gguf_detail::load_u16(data + 2 * i));
      return;
    case GgufType::bf16:
      for (std::int64_t i = 0; i < elements; ++i) out[i] = bfloat16_bits_to_float(gguf_detail::load_u16(data + 2 * i));
      return;
    case GgufType::q8_0:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q8_0_block(data + b * stride, out + b * gguf_detail::kBlock32);
      return;
    case GgufType::q4_0:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q4_0_block(data + b * stride, out + b * gguf_detail::kBlock32);
      return;
    case GgufType::q4_1:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q4_1_block(data + b * stride, out + b * gguf_detail::kBlock32);
      return;
    case GgufType::q5_0:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q5_0_block(data + b * stride, out + b * gguf_detail::kBlock32);
      return;
    case GgufType::q5_1:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q5_1_block(data + b * stride, out + b * gguf_detail::kBlock32);
      return;
    case GgufType::q4_k:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q4_5_k_block(data + b * stride, nullptr, data + b * stride + 16,
                                             out + b * gguf_detail::kSuperBlock);
      return;
    case GgufType::q5_k:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q4_5_k_block(data + b * stride, data + b * stride + 16, data + b * stride + 48,
                                             out + b * gguf_detail::kSuperBlock);
      return;
    case GgufType::q6_k:
      for (std::int64_t b = 0; b < blocks; ++b)
        gguf_detail::dequantize_q6_k_block(data + b * stride, out + b * gguf_detail::kSuperBlock);
      return;
  }
}

}  // namespace shrink::io
