// Writing llama.cpp's legacy block formats: a block's integer codes and fp16 scale (and minimum) laid out as ggml
// stores them (encode_*_block, the inverse of io/gguf_dequantize.hpp's layouts), and llama.cpp's reference
// round-to-nearest quantizers (ggml's quantize_row_*_ref, which llama-quantize uses without an importance matrix)
// choosing them from 32 floats:
//   Q8_0: d = amax / 127,               q = round(x / d) (half away from zero)      x ≈ d · q
//   Q4_0: d = max / −8,                  q = min(15, trunc(x / d + 8.5))             x ≈ d · (q − 8)
//   Q5_0: d = max / −16,                 q = min(31, trunc(x / d + 16.5))            x ≈ d · (q − 16)
//   Q4_1: d = (max − min) / 15, m = min, q = min(15, trunc((x − m) / d + 0.5))       x ≈ d · q + m
//   Q5_1: d = (max − min) / 31, m = min, q = min(31, trunc((x − m) / d + 0.5))       x ≈ d · q + m
// where amax = max |x|, "max" in the symmetric formats is the value of largest magnitude with its sign (the first
// of equals), and "/ d" is a multiplication by id = 1 / d in float (0 when d is 0), as ggml computes it. The scale
// the codes are chosen with is the float d; the block stores d and m rounded to fp16 (to nearest even).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/io/gguf_dequantize.hpp"
#include "shrink/io/gguf_types.hpp"
#include "shrink/quant/block_grid.hpp"

namespace shrink::io {

namespace gguf_detail {

inline void store_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int b = 0; b < 4; ++b) p[b] = static_cast<std::uint8_t>(v >> (8 * b));
}

// Codes j and j + 16 share byte j: j in the low nibble (the low 4 bits of a 5-bit code), j + 16 in the high one.
inline void pack_low_nibbles(const std::uint8_t* q, std::uint8_t* qs) {
  for (int j = 0; j < kBlock32 / 2; ++j)
    qs[j] = static_cast<std::uint8_t>((q[j] & 0x0F) | ((q[j + kBlock32 / 2] & 0x0F) << 4));
}
// Bit j of qh is the fifth bit of code j.
inline std::uint32_t fifth_bits(const std::uint8_t* q) {
  std::uint32_t qh = 0;
  for (int j = 0; j < kBlock32; ++j) qh |= static_cast<std::uint32_t>((q[j] >> 4) & 1u) << j;
  return qh;
}

// The value of largest magnitude with its sign, the first of equals (ggml's `max` of Q4_0 / Q5_0).
inline float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock32; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  return max;
}

inline float inverse_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// trunc(v) for v in [0, 2^31): the (int) conversion ggml's casts do.
inline std::uint8_t truncated_code(float v, int largest) {
  const int q = static_cast<int>(v);
  return static_cast<std::uint8_t>(q < largest ? q : largest);
}

}  // namespace gguf_detail

// ---- Block encoders: codes (Q8_0: int8; Q4: 0..15; Q5: 0..31) and fp16 bits of d (and m) to a block's bytes.

inline void encode_q8_0_block(std::uint16_t d, const std::int8_t* q, std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  for (int j = 0; j < gguf_detail::kBlock32; ++j) out[2 + j] = static_cast<std::uint8_t>(q[j]);
}
inline void encode_q4_0_block(std::uint16_t d, const std::uint8_t* q, std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::pack_low_nibbles(q, out + 2);
}
inline void encode_q4_1_block(std::uint16_t d, std::uint16_t m, const std::uint8_t* q, std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::store_u16(out + 2, m);
  gguf_detail::pack_low_nibbles(q, out + 4);
}
inline void encode_q5_0_block(std::uint16_t d, const std::uint8_t* q, std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::store_u32(out + 2, gguf_detail::fifth_bits(q));
  gguf_detail::pack_low_nibbles(q, out + 6);
}
inline void encode_q5_1_block(std::uint16_t d, std::uint16_t m, const std::uint8_t* q, std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::store_u16(out + 2, m);
  gguf_detail::store_u32(out + 4, gguf_detail::fifth_bits(q));
  gguf_detail::pack_low_nibbles(q, out + 8);
}

// ---- llama.cpp's reference quantizers, one block of 32 finite floats each (the formulas in the file comment). Each
// float operation rounds on its own, as ggml's reference C without FMA: x · id, then + ½, never fused.

SHRINK_NO_CONTRACT inline void quantize_q8_0_block(const float* x, std::uint8_t* out) {
  SHRINK_NO_CONTRACT_BODY
  float amax = 0.0f;
  for (int j = 0; j < gguf_detail::kBlock32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = gguf_detail::inverse_or_zero(d);
  std::int8_t q[gguf_detail::kBlock32];
  for (int j = 0; j < gguf_detail::kBlock32; ++j) q[j] = static_cast<std::int8_t>(std::round(x[j] * id));
  encode_q8_0_block(float_to_half_bits(d), q, out);
}

// Q4_0 (levels 16, offset 8) and Q5_0 (32, 16): d = max / −offset, q = min(levels − 1, trunc(x · id + offset + ½)).
SHRINK_NO_CONTRACT inline void quantize_symmetric_block(const float* x, int levels, std::uint8_t* q,
                                                        std::uint16_t& d_bits) {
  SHRINK_NO_CONTRACT_BODY
  const float offset = static_cast<float>(levels / 2);
  const float d = gguf_detail::signed_absmax(x) / -offset;
  const float id = gguf_detail::inverse_or_zero(d);
  for (int j = 0; j < gguf_detail::kBlock32; ++j)
    q[j] = gguf_detail::truncated_code(x[j] * id + (offset + 0.5f), levels - 1);
  d_bits = float_to_half_bits(d);
}

// Q4_1 (levels 16) and Q5_1 (32): d = (max − min) / (levels − 1), m = min, q = min(levels − 1, trunc((x − m) · id +
// ½)).
SHRINK_NO_CONTRACT inline void quantize_affine_block(const float* x, int levels, std::uint8_t* q, std::uint16_t& d_bits,
                                                     std::uint16_t& m_bits) {
  SHRINK_NO_CONTRACT_BODY
  float min = std::numeric_limits<float>::max(), max = -std::numeric_limits<float>::max();
  for (int j = 0; j < gguf_detail::kBlock32; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / static_cast<float>(levels - 1);
  const float id = gguf_detail::inverse_or_zero(d);
  for (int j = 0; j < gguf_detail::kBlock32; ++j)
    q[j] = gguf_detail::truncated_code((x[j] - min) * id + 0.5f, levels - 1);
  d_bits = float_to_half_bits(d);
  m_bits = float_to_half_bits(min);
}

// The types gguf_quantize writes: every type shrink reads (gguf_type_supported) but the K-quants.
constexpr bool gguf_type_writable(std::uint32_t type) {
  return gguf_type_supported(type) && gguf_type_layout(type).block_elements <= 32;
}

// The types gguf_quantize writes, for error messages.
inline std::string gguf_writable_type_names() { return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1"; }

// Stores `elements` floats as ggml type `type` at out (the type's bytes for them: elements / block size blocks), the
// quantized types by llama.cpp's reference quantizers above, F16 and BF16 rounded to nearest even. Refused with
// shrink::Error, before anything is written: a type it does not write, a count that is not a multiple of the block,
// and (for the block types, whose scales would be meaningless) a NaN or infinite value, named by index.
inline void gguf_quantize(std::uint32_t type, const float* x, std::int64_t elements, std::uint8_t* out) {
  const char* where = "shrink::io::gguf_quantize";
  const GgufTypeLayout layout = gguf_type_layout(type);
  if (!gguf_type_writable(type))
    fail(where, "type", std::string(layout.name) + " (" + std::to_string(type) + ")",
         "one of " + gguf_writable_type_names());
  if (elements < 0 || elements % layout.block_elements != 0)
    fail(where, "elements", elements,
         "a non-negative multiple of " + std::to_string(layout.block_elements) + " for " + layout.name);
  if (layout.block_elements > 1) {
    const std::int64_t bad = cpu::first_nonfinite(x, elements);
    if (bad >= 0) fail(where, "x", "a non-finite value at element " + std::to_string(bad), "finite values to quantize");
  }
  const std::int64_t blocks = elements / layout.block_elements;
  const auto stride = static_cast<std::int64_t>(layout.block_bytes);
  std::uint8_t q[gguf_detail::kBlock32];
  std::uint16_t d = 0, m = 0;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const float* v = x + b * layout.block_elements;
    std::uint8_t* o = out + b * stride;
    switch (static_cast<GgufType>(type)) {
      case GgufType::f32: gguf_detail::store_u32(o, float_to_bits(*v)); break;
      case GgufType::f16: gguf_detail::store_u16(o, float_to_half_bits(*v)); break;
      case GgufType::bf16: gguf_detail::store_u16(o, float_to_bfloat16_bits(*v)); break;
      case GgufType::q8_0: quantize_q8_0_block(v, o); break;
      case GgufType::q4_0:
        quantize_symmetric_block(v, 16, q, d);
        encode_q4_0_block(d, q, o);
        break;
      case GgufType::q5_0:
        quantize_symmetric_block(v, 32, q, d);
        encode_q5_0_block(d, q, o);
        break;
      case GgufType::q4_1:
        quantize_affine_block(v, 16, q, d, m);
        encode_q4_1_block(d, m, q, o);
        break;
      case GgufType::q5_1:
        quantize_affine_block(v, 32, q, d, m);
        encode_q5_1_block(d, m, q, o);
        break;
      case GgufType::q4_k:
      case GgufType::q5_k:
      case GgufType::q6_k: break;  // not writable: refused above
    }
  }
}

// ---- A method's blocks (quant/block_grid.hpp) in the format's bytes.

// The block format of a ggml type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), or nothing for any other type.
inline std::optional<quant::BlockFormat> gguf_block_format(std::uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::q8_0: return quant::BlockFormat::q8_0;
    case GgufType::q4_0: return quant::BlockFormat::q4_0;
    case GgufType::q4_1: return quant::BlockFormat::q4_1;
    case GgufType::q5_0: return quant::BlockFormat::q5_0;
    case GgufType::q5_1: return quant::BlockFormat::q5_1;
    default: return std::nullopt;
  }
}

inline std::uint32_t gguf_type_of(quant::BlockFormat format) {
  switch (format) {
    case quant::BlockFormat::q8_0: return static_cast<std::uint32_t>(GgufType::q8_0);
    case quant::BlockFormat::q4_0: return static_cast<std::uint32_t>(GgufType::q4_0);
    case quant::BlockFormat::q4_1: return static_cast<std::uint32_t>(GgufType::q4_1);
    case quant::BlockFormat::q5_0: return static_cast<std::uint32_t>(GgufType::q5_0);
    case quant::BlockFormat::q5_1: return static_cast<std::uint32_t>(GgufType::q5_1);
  }
  fail("shrink::io::gguf_type_of", "format", static_cast<int>(format), "Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1");
}

// Writes t's blocks in its format's bytes at out (rows · cols / 32 blocks, row after row), so that gguf_dequantize
// gives back quant::dequantize(t) bit for bit. Everything is checked before a byte is written: the sizes, every code
// inside the format's range, every d and m a value fp16 holds exactly.
inline void encode_gguf_blocks(const quant::BlockQuantized& t, std::uint8_t* out) {
  const char* where = "shrink::io::encode_gguf_blocks";
  const quant::BlockGrid grid = quant::block_grid(t.format);
  const std::int64_t blocks = t.cols / gguf_detail::kBlock32;
  if (t.rows < 0 || t.cols < 0 || t.cols % gguf_detail::kBlock32 != 0 ||
      static_cast<std::int64_t>(t.codes.size()) != t.rows * t.cols ||
      static_cast<std::int64_t>(t.scales.size()) != t.rows * blocks)
    fail(where, "t",
         "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "] with " + std::to_string(t.codes.size()) +
             " codes and " + std::to_string(t.scales.size()) + " scales",
         "codes [rows, cols], cols a multiple of 32, one scale per row and block of 32 columns");
  for (std::size_t k = 0; k < t.codes.size(); ++k)
    if (t.codes[k] < grid.qmin || t.codes[k] > grid.qmax)
      fail(where, ("t.codes[" + std::to_string(k) + "]").c_str(), static_cast<int>(t.codes[k]),
           "a code in [" + std::to_string(grid.qmin) + ", " + std::to_string(grid.qmax) + "] for " +
               quant::block_format_name(t.format));
  auto fp16_exact = [](float v) { return quant::round_to_fp16(v) == v; };
  for (std::size_t k = 0; k < t.scales.size(); ++k) {
    if (!fp16_exact(t.scales[k].d))
      fail(where, ("t.scales[" + std::to_string(k) + "].d").c_str(), t.scales[k].d, "a value fp16 holds exactly");
    if (grid.has_minimum ? !fp16_exact(t.scales[k].m) : t.scales[k].m != 0.0f)
      fail(where, ("t.scales[" + std::to_string(k) + "].m").c_str(), t.scales[k].m,
           grid.has_minimum ? "a value fp16 holds exactly" : "0 (the format has no minimum)");
  }
  const GgufTypeLayout layout = gguf_type_layout(gguf_type_of(t.format));
  std::uint8_t q[gguf_detail::kBlock32];
  std::int8_t q8[gguf_detail::kBlock32];
  for (std::int64_t b = 0; b < t.rows * blocks; ++b) {
    const std::int8_t* codes = t.codes.data() + b * gguf_detail::kBlock32;
    const quant::BlockScale& s = t.scales[static_cast<std::size_t>(b)];
    const std::uint16_t d = float_to_half_bits(s.d), m = float_to_half_bits(s.m);
    std::uint8_t* o = out + b * static_cast<std::int64_t>(layout.block_bytes);
    const int offset = grid.has_minimum ? 0 : -grid.qmin;  // the stored code of 0 (Q4_0: 8, Q5_0: 16)
    for (int j = 0; j < gguf_detail::kBlock32; ++j) {
      q[j] = static_cast<std::uint8_t>(codes[j] + offset);
      q8[j] = codes[j];
    }
    switch (t.format) {
      case quant::BlockFormat::q8_0: encode_q8_0_block(d, q8, o); break;
      case quant::BlockFormat::q4_0: encode_q4_0_block(d, q, o); break;
      case quant::BlockFormat::q4_1: encode_q4_1_block(d, m, q, o); break;
      case quant::BlockFormat::q5_0: encode_q5_0_block(d, q, o); break;
      case quant::BlockFormat::q5_1: encode_q5_1_block(d, m, q, o); break;
    }
  }
}

}  // namespace shrink::io
