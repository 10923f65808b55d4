// The ggml tensor types a GGUF file may name: id, name, block size and bytes per block, and which ones shrink reads.
#pragma once

#include <cstdint>
#include <string>

namespace shrink::io {

// ggml type ids as GGUF stores them (the ones shrink dequantizes; other known ids are listed by gguf_type_name).
enum class GgufType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  bf16 = 30,
};

// How a ggml type lays out its elements: `block_elements` elements in `block_bytes` bytes (1 and the element size
// for plain types). block_elements == 0 marks an id shrink does not know.
struct GgufTypeLayout {
  const char* name = "unknown";
  std::uint32_t block_elements = 0;
  std::uint32_t block_bytes = 0;
};

// The layout of every ggml type id known to GGUF readers (ggml's type table as of 2025); ids in the gaps were
// removed from ggml and stay unknown.
constexpr GgufTypeLayout gguf_type_layout(std::uint32_t type) {
  constexpr std::uint32_t k = 256;  // the K-quants' super-block
  switch (type) {
    case 0: return {"F32", 1, 4};
    case 1: return {"F16", 1, 2};
    case 2: return {"Q4_0", 32, 2 + 16};
    case 3: return {"Q4_1", 32, 2 + 2 + 16};
    case 6: return {"Q5_0", 32, 2 + 4 + 16};
    case 7: return {"Q5_1", 32, 2 + 2 + 4 + 16};
    case 8: return {"Q8_0", 32, 2 + 32};
    case 9: return {"Q8_1", 32, 4 + 4 + 32};
    case 10: return {"Q2_K", k, 2 + 2 + k / 16 + k / 4};
    case 11: return {"Q3_K", k, 2 + k / 4 + k / 8 + 12};
    case 12: return {"Q4_K", k, 2 + 2 + k / 2 + 12};
    case 13: return {"Q5_K", k, 2 + 2 + k / 2 + k / 8 + 12};
    case 14: return {"Q6_K", k, 2 + k / 2 + k / 4 + k / 16};
    case 15: return {"Q8_K", k, 4 + k + k / 8};
    case 16: return {"IQ2_XXS", k, 2 + k / 4};
    case 17: return {"IQ2_XS", k, 2 + k / 4 + k / 32};
    case 18: return {"IQ3_XXS", k, 2 + k / 4 + k / 8};
    case 19: return {"IQ1_S", k, 2 + k / 8 + k / 16};
    case 20: return {"IQ4_NL", 32, 2 + 16};
    case 21: return {"IQ3_S", k, 2 + k / 4 + k / 8 + k / 32 + 4};
    case 22: return {"IQ2_S", k, 2 + k / 4 + k / 16};
    case 23: return {"IQ4_XS", k, 2 + 2 + k / 2 + k / 64};
    case 24: return {"I8", 1, 1};
    case 25: return {"I16", 1, 2};
    case 26: return {"I32", 1, 4};
    case 27: return {"I64", 1, 8};
    case 28: return {"F64", 1, 8};
    case 29: return {"IQ1_M", k, k / 8 + k / 16 + k / 32};
    case 30: return {"BF16", 1, 2};
    case 34: return {"TQ1_0", k, 2 + 4 * 13};
    case 35: return {"TQ2_0", k, 2 + 64};
    case 39: return {"MXFP4", 32, 1 + 16};
    default: return {};
  }
}

// "Q4_1", "Q6_K", ...; "unknown" for an id no ggml version defines.
constexpr const char* gguf_type_name(std::uint32_t type) { return gguf_type_layout(type).name; }

// Whether shrink dequantizes tensors of this type (io/gguf_dequantize.hpp).
constexpr bool gguf_type_supported(std::uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::f32:
    case GgufType::f16:
    case GgufType::bf16:
    case GgufType::q8_0:
    case GgufType::q4_0:
    case GgufType::q4_1:
    case GgufType::q5_0:
    case GgufType::q5_1:
    case GgufType::q4_k:
    case GgufType::q5_k:
    case GgufType::q6_k: return true;
  }
  return false;
}

// The supported types, for error messages.
inline std::string gguf_supported_type_names() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

}  // namespace shrink::io
