// Writing llama.cpp's block formats: a block's integer codes and fp16 scale (and minimum) laid out as ggml stores them
// (encode_*_block, the inverse of io/gguf_dequantize.hpp's layouts; the K-quants' super-blocks too), a method's blocks
// (quant::BlockQuantized) in those bytes (encode_gguf_blocks), and llama.cpp's reference round-to-nearest quantizers
// of the legacy formats (ggml's quantize_row_*_ref, which llama-quantize uses without an importance matrix) choosing
// them from 32 floats:
//   Q8_0: d = amax / 127,               q = round(x / d) (half away from zero)      x ≈ d · q
//   Q4_0: d = max / −8,                  q = min(15, trunc(x / d + 8.5))             x ≈ d · (q − 8)
//   Q5_0: d = max / −16,                 q = min(31, trunc(x / d + 16.5))            x ≈ d · (q − 16)
//   Q4_1: d = (max − min) / 15, m = min, q = min(15, trunc((x − m) / d + 0.5))       x ≈ d · q + m
//   Q5_1: d = (max − min) / 31, m = min, q = min(31, trunc((x − m) / d + 0.5))       x ≈ d · q + m
// where amax = max |x|, "max" in the symmetric formats is the value of largest magnitude with its sign (the first
// of equals), and "/ d" is a multiplication by id = 1 / d in float (0 when d is 0), as ggml computes it. The scale
// the codes are chosen with is the float d; the block stores d and m rounded to fp16 (to nearest even). The K-quants
// are written by quant::grid_round_to_nearest (quant/block_grid.hpp): llama.cpp's weights and search family for its
// reference K quantizers, every block's codes then refined on the stored grid, so its bytes are not llama.cpp's.
#pragma once

#include <algorithm>
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

// The K-quants: one super-block of 256 codes (Q4_K: 0..15; Q5_K: 0..31; Q6_K: 0..63, the code + 32) with fp16 bits of
// d (and dmin) and the block codes (Q4_K, Q5_K: 8 pairs sc, mc in [0, 63]; Q6_K: 16 sc in [−128, 127]), in
// io/gguf_dequantize.hpp's layouts.
namespace gguf_detail {
// The inverse of kquant_scale_min: pairs 0-3 in the low 6 bits of bytes s and s + 4, pairs 4-7 in the nibbles of
// byte s + 4 with their top two bits in bytes s − 4 (scale) and s (min).
inline void pack_kquant_scale_min(const int* sc, const int* mc, std::uint8_t* packed) {
  for (int s = 0; s < 12; ++s) packed[s] = 0;
  for (int s = 0; s < 8; ++s)
    if (s < 4) {
      packed[s] = static_cast<std::uint8_t>(packed[s] | sc[s]);
      packed[s + 4] = static_cast<std::uint8_t>(packed[s + 4] | mc[s]);
    } else {
      packed[s + 4] = static_cast<std::uint8_t>((sc[s] & 0x0F) | ((mc[s] & 0x0F) << 4));
      packed[s - 4] = static_cast<std::uint8_t>(packed[s - 4] | ((sc[s] >> 4) << 6));
      packed[s] = static_cast<std::uint8_t>(packed[s] | ((mc[s] >> 4) << 6));
    }
}
// Elements 64k .. 64k + 31 in the low nibbles of qs[32k ..], the next 32 in the high ones; with qh (Q5_K), the fifth
// bit of element 64k + l in bit 2k of qh[l] and of 64k + 32 + l in bit 2k + 1.
inline void pack_kquant_nibbles(const std::uint8_t* q, std::uint8_t* qh, std::uint8_t* qs) {
  if (qh != nullptr)
    for (int l = 0; l < 32; ++l) qh[l] = 0;
  for (int k = 0; k < 4; ++k)
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t lo = q[64 * k + l], hi = q[64 * k + 32 + l];
      qs[32 * k + l] = static_cast<std::uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      if (qh != nullptr)
        qh[l] = static_cast<std::uint8_t>(qh[l] | (((lo >> 4) & 1) << (2 * k)) | (((hi >> 4) & 1) << (2 * k + 1)));
    }
}
}  // namespace gguf_detail

inline void encode_q4_k_block(std::uint16_t d, std::uint16_t dmin, const int* sc, const int* mc, const std::uint8_t* q,
                              std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::store_u16(out + 2, dmin);
  gguf_detail::pack_kquant_scale_min(sc, mc, out + 4);
  gguf_detail::pack_kquant_nibbles(q, nullptr, out + 16);
}
inline void encode_q5_k_block(std::uint16_t d, std::uint16_t dmin, const int* sc, const int* mc, const std::uint8_t* q,
                              std::uint8_t* out) {
  gguf_detail::store_u16(out, d);
  gguf_detail::store_u16(out + 2, dmin);
  gguf_detail::pack_kquant_scale_min(sc, mc, out + 4);
  gguf_detail::pack_kquant_nibbles(q, out + 16, out + 48);
}
// ql (128 bytes), qh (64), 16 int8 scales, fp16 d: in each half h of 128 elements, element 32i + l (quarter i) has
// its low 4 bits in ql[64h + l + 32·(i & 1)] (low nibble for i < 2) and its high 2 bits in bits 2i, 2i + 1 of
// qh[32h + l].
inline void encode_q6_k_block(std::uint16_t d, const int* sc, const std::uint8_t* q, std::uint8_t* out) {
  std::uint8_t* ql = out;
  std::uint8_t* qh = out + 128;
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t* e = q + 128 * h + l;
      ql[64 * h + l] = static_cast<std::uint8_t>((e[0] & 0x0F) | ((e[64] & 0x0F) << 4));
      ql[64 * h + l + 32] = static_cast<std::uint8_t>((e[32] & 0x0F) | ((e[96] & 0x0F) << 4));
      qh[32 * h + l] =
          static_cast<std::uint8_t>((e[0] >> 4) | ((e[32] >> 4) << 2) | ((e[64] >> 4) << 4) | ((e[96] >> 4) << 6));
    }
  for (int s = 0; s < 16; ++s) out[192 + s] = static_cast<std::uint8_t>(static_cast<std::int8_t>(sc[s]));
  gguf_detail::store_u16(out + 208, d);
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

// ---- A method's blocks (quant/block_grid.hpp) in the format's bytes.

// The block format of a ggml type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), or nothing for any other type.
inline std::optional<quant::BlockFormat> gguf_block_format(std::uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::q8_0: return quant::BlockFormat::q8_0;
    case GgufType::q4_0: return quant::BlockFormat::q4_0;
    case GgufType::q4_1: return quant::BlockFormat::q4_1;
    case GgufType::q5_0: return quant::BlockFormat::q5_0;
    case GgufType::q5_1: return quant::BlockFormat::q5_1;
    case GgufType::q4_k: return quant::BlockFormat::q4_k;
    case GgufType::q5_k: return quant::BlockFormat::q5_k;
    case GgufType::q6_k: return quant::BlockFormat::q6_k;
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
    case quant::BlockFormat::q4_k: return static_cast<std::uint32_t>(GgufType::q4_k);
    case quant::BlockFormat::q5_k: return static_cast<std::uint32_t>(GgufType::q5_k);
    case quant::BlockFormat::q6_k: return static_cast<std::uint32_t>(GgufType::q6_k);
  }
  fail("shrink::io::gguf_type_of", "format", static_cast<int>(format), "a quant::BlockFormat");
}

namespace gguf_detail {

// Checks t for encode_gguf_blocks (its comment), naming the first bad field.
inline void check_block_quantized(const quant::BlockQuantized& t, const char* where) {
  const quant::BlockGrid grid = quant::block_grid(t.format);
  const std::int64_t unit = quant::grid_row_unit(grid);
  const std::int64_t blocks = t.cols / grid.block;
  const std::int64_t supers = grid.super_block > 0 ? t.cols / grid.super_block : 0;
  if (t.rows < 0 || t.cols < 0 || t.cols % unit != 0 || static_cast<std::int64_t>(t.codes.size()) != t.rows * t.cols ||
      static_cast<std::int64_t>(t.scales.size()) != t.rows * blocks ||
      static_cast<std::int64_t>(t.supers.size()) != t.rows * supers)
    fail(where, "t",
         "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "] with " + std::to_string(t.codes.size()) +
             " codes, " + std::to_string(t.scales.size()) + " scales and " + std::to_string(t.supers.size()) +
             " super-block scales",
         "codes [rows, cols], cols a multiple of " + std::to_string(unit) + ", one scale per row and block of " +
             std::to_string(grid.block) + " columns" +
             (grid.super_block > 0 ? ", one super-block scale per row and 256 columns" : ", no super-block scales"));
  for (std::size_t k = 0; k < t.codes.size(); ++k)
    if (t.codes[k] < grid.qmin || t.codes[k] > grid.qmax)
      fail(where, ("t.codes[" + std::to_string(k) + "]").c_str(), static_cast<int>(t.codes[k]),
           "a code in [" + std::to_string(grid.qmin) + ", " + std::to_string(grid.qmax) + "] for " +
               quant::block_format_name(t.format));
  auto fp16_exact = [](float v) { return quant::round_to_fp16(v) == v; };
  auto field = [](const char* array, std::size_t k, const char* member) {
    return std::string(array) + "[" + std::to_string(k) + "]." + member;
  };
  for (std::size_t k = 0; k < t.supers.size(); ++k) {
    if (!fp16_exact(t.supers[k].d))
      fail(where, field("t.supers", k, "d").c_str(), t.supers[k].d, "a value fp16 holds exactly");
    if (grid.has_minimum ? !fp16_exact(t.supers[k].dmin) : t.supers[k].dmin != 0.0f)
      fail(where, field("t.supers", k, "dmin").c_str(), t.supers[k].dmin,
           grid.has_minimum ? "a value fp16 holds exactly" : "0 (the format has no minimum)");
  }
  const std::int64_t per_super = grid.super_block > 0 ? grid.super_block / grid.block : 0;
  for (std::size_t k = 0; k < t.scales.size(); ++k) {
    const quant::BlockScale& s = t.scales[k];
    if (grid.super_block == 0) {
      if (!fp16_exact(s.d)) fail(where, field("t.scales", k, "d").c_str(), s.d, "a value fp16 holds exactly");
      if (grid.has_minimum ? !fp16_exact(s.m) : s.m != 0.0f)
        fail(where, field("t.scales", k, "m").c_str(), s.m,
             grid.has_minimum ? "a value fp16 holds exactly" : "0 (the format has no minimum)");
      continue;
    }
    if (s.scale_code < grid.scale_code_min || s.scale_code > grid.scale_code_max)
      fail(where, field("t.scales", k, "scale_code").c_str(), static_cast<int>(s.scale_code),
           "a code in [" + std::to_string(grid.scale_code_min) + ", " + std::to_string(grid.scale_code_max) + "]");
    if (grid.has_minimum ? (s.min_code < 0 || s.min_code > 63) : s.min_code != 0)
      fail(where, field("t.scales", k, "min_code").c_str(), static_cast<int>(s.min_code),
           grid.has_minimum ? "a code in [0, 63]" : "0 (the format has no minimum)");
    const quant::SuperBlockScale& u = t.supers[k / static_cast<std::size_t>(per_super)];
    const quant::GridParams p = quant::k_block_params(grid, u.d, u.dmin, s.scale_code, s.min_code);
    if (p.d != s.d || p.m != s.m)
      fail(where, field("t.scales", k, "d, m").c_str(), to_text(s.d) + ", " + to_text(s.m),
           "the super-block's d · scale_code and −(dmin · min_code): " + to_text(p.d) + ", " + to_text(p.m));
  }
}

}  // namespace gguf_detail

// Writes t's blocks in its format's bytes at out (rows · cols / block-size blocks, row after row), so that
// gguf_dequantize gives back quant::dequantize(t) bit for bit. Everything is checked before a byte is written: the
// sizes, every code inside the format's range, every d and m (K: super-block d and dmin) a value fp16 holds exactly,
// and in the K formats every block's codes in range with its d and m what they and its super-block's scales give.
inline void encode_gguf_blocks(const quant::BlockQuantized& t, std::uint8_t* out) {
  const char* where = "shrink::io::encode_gguf_blocks";
  gguf_detail::check_block_quantized(t, where);
  const quant::BlockGrid grid = quant::block_grid(t.format);
  const GgufTypeLayout layout = gguf_type_layout(gguf_type_of(t.format));
  const std::int64_t unit = quant::grid_row_unit(grid), per_unit = unit / grid.block;
  std::uint8_t q[quant::kSuperBlock];
  std::int8_t q8[gguf_detail::kBlock32];
  int sc[16], mc[16];
  const int offset = grid.has_minimum ? 0 : -grid.qmin;  // the stored code of 0 (Q4_0: 8, Q5_0: 16, Q6_K: 32)
  for (std::int64_t b = 0; b < t.rows * (t.cols / unit); ++b) {
    const std::int8_t* codes = t.codes.data() + b * unit;
    const quant::BlockScale* s = t.scales.data() + b * per_unit;
    std::uint8_t* o = out + b * static_cast<std::int64_t>(layout.block_bytes);
    for (std::int64_t j = 0; j < unit; ++j) q[j] = static_cast<std::uint8_t>(codes[j] + offset);
    const std::uint16_t d = float_to_half_bits(grid.super_block > 0 ? t.supers[static_cast<std::size_t>(b)].d : s->d);
    const std::uint16_t m =
        float_to_half_bits(grid.super_block > 0 ? t.supers[static_cast<std::size_t>(b)].dmin : s->m);
    for (std::int64_t k = 0; k < per_unit && grid.super_block > 0; ++k) {
      sc[k] = s[k].scale_code;
      mc[k] = s[k].min_code;
    }
    switch (t.format) {
      case quant::BlockFormat::q8_0:
        for (int j = 0; j < gguf_detail::kBlock32; ++j) q8[j] = codes[j];
        encode_q8_0_block(d, q8, o);
        break;
      case quant::BlockFormat::q4_0: encode_q4_0_block(d, q, o); break;
      case quant::BlockFormat::q4_1: encode_q4_1_block(d, m, q, o); break;
      case quant::BlockFormat::q5_0: encode_q5_0_block(d, q, o); break;
      case quant::BlockFormat::q5_1: encode_q5_1_block(d, m, q, o); break;
      case quant::BlockFormat::q4_k: encode_q4_k_block(d, m, sc, mc, q, o); break;
      case quant::BlockFormat::q5_k: encode_q5_k_block(d, m, sc, mc, q, o); break;
      case quant::BlockFormat::q6_k: encode_q6_k_block(d, sc, q, o); break;
    }
  }
}

// The types gguf_quantize writes: every type shrink reads (gguf_type_supported).
constexpr bool gguf_type_writable(std::uint32_t type) { return gguf_type_supported(type); }

// The types gguf_quantize writes, for error messages.
inline std::string gguf_writable_type_names() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

// Stores `elements` floats as ggml type `type` at out (the type's bytes for them: elements / block size blocks), the
// legacy quantized types by llama.cpp's reference quantizers above, the K-quants by quant::grid_round_to_nearest
// (llama.cpp's weighting and search, each block's codes refined on the stored grid: not llama.cpp's bytes),
// F16 and BF16 rounded to nearest even. Refused with
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
  if (const std::optional<quant::BlockFormat> k = gguf_block_format(type); k && quant::block_grid(*k).super_block > 0) {
    constexpr std::int64_t kChunk = 1024;  // super-blocks quantized together: bounded memory for a large tensor
    for (std::int64_t b = 0; b < blocks; b += kChunk) {
      const std::int64_t count = std::min(kChunk, blocks - b);
      encode_gguf_blocks(quant::grid_round_to_nearest(*k, x + b * layout.block_elements, count, layout.block_elements),
                         out + b * stride);
    }
    return;
  }
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
      case GgufType::q6_k: break;  // written above
    }
  }
}

}  // namespace shrink::io
