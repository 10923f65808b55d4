// A llama.cpp model file requantized to one of the block formats shrink writes, tensor by tensor as llama.cpp's own
// quantizer (llama-quantize, without an importance matrix) chooses for that file type:
//   - tensors of one dimension (norms, biases) are copied as stored;
//   - the output head (`output.weight`, or `token_embd.weight` when the model ties it and has no `output.weight`)
//     takes, for a quantized target, Q6_K where its rows are whole 256-element super-blocks and Q8_0 otherwise
//     (SmolLM2's 576), or Q8_0 for a Q8_0 target, as llama.cpp does. An F32 / F16 / BF16 target gives it that type;
//   - every other tensor of two or more dimensions (the linears, an untied embedding) takes the target type; where
//     its rows are not whole blocks of the type, llama.cpp's fallback (a note says so): Q4_K → Q5_0, Q5_K → Q5_1,
//     Q6_K → Q8_0 for rows not whole super-blocks of 256, then F16 for rows not whole blocks of 32.
// Re-encoded tensors are dequantized from their stored type first (io/gguf_dequantize.hpp), as llama-quantize does
// with --allow-requantize; their values are then stored by io/gguf_quantize.hpp. The metadata is copied in order
// with `general.quantization_version` (2) and `general.file_type` (llama.cpp's file type of the target) set last.
// Everything is planned and checked before OUT is created (a tensor of a type shrink cannot read that would need
// re-encoding is refused by name), and OUT is written through GgufWriter, one tensor in memory at a time: a NaN or
// infinite value met on the way (refused by gguf_quantize) leaves OUT as it was.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_types.hpp"
#include "shrink/io/gguf_writer.hpp"

namespace shrink::io {

// What happens to one tensor.
struct GgufTensorPlan {
  std::string name;
  std::uint32_t from_type = 0;
  std::uint32_t to_type = 0;
  bool copied = false;  // stored bytes copied as they are (to_type == from_type)
  std::string note;     // why it does not take the target type, where it does not
};

// llama.cpp's file type (general.file_type, enum llama_ftype) of a file whose linears are `type`.
inline std::uint32_t gguf_file_type_of(std::uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::f32: return 0;    // LLAMA_FTYPE_ALL_F32
    case GgufType::f16: return 1;    // MOSTLY_F16
    case GgufType::q4_0: return 2;   // MOSTLY_Q4_0
    case GgufType::q4_1: return 3;   // MOSTLY_Q4_1
    case GgufType::q8_0: return 7;   // MOSTLY_Q8_0
    case GgufType::q5_0: return 8;   // MOSTLY_Q5_0
    case GgufType::q5_1: return 9;   // MOSTLY_Q5_1
    case GgufType::bf16: return 32;  // MOSTLY_BF16
    case GgufType::q4_k: return 14;  // MOSTLY_Q4_K_S (every linear Q4_K, no mixture)
    case GgufType::q5_k: return 16;  // MOSTLY_Q5_K_S
    case GgufType::q6_k: return 18;  // MOSTLY_Q6_K
  }
  fail("shrink::io::gguf_file_type_of", "type", gguf_type_name(type), "a type gguf_quantize writes");
}

// llama.cpp's type for a row that is not whole super-blocks of a K-quant (Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0); any
// other type unchanged.
inline std::uint32_t gguf_k_fallback(std::uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::q4_k: return static_cast<std::uint32_t>(GgufType::q5_0);
    case GgufType::q5_k: return static_cast<std::uint32_t>(GgufType::q5_1);
    case GgufType::q6_k: return static_cast<std::uint32_t>(GgufType::q8_0);
    default: return type;
  }
}

// The tensor of a llama file that serves as its output head.
inline const GgufTensorInfo* gguf_output_head(const GgufFile& in) {
  const GgufTensorInfo* head = in.find_tensor("output.weight");
  return head != nullptr ? head : in.find_tensor("token_embd.weight");
}

// Each tensor's plan for target `type` (the file comment's rules). Refuses a target gguf_quantize does not write
// and a tensor that needs re-encoding from a type shrink does not read.
inline std::vector<GgufTensorPlan> plan_gguf_requantize(const GgufFile& in, std::uint32_t type) {
  const char* where = "shrink::io::plan_gguf_requantize";
  if (!gguf_type_writable(type))
    fail(where, "type", std::string(gguf_type_name(type)) + " (" + std::to_string(type) + ")",
         "one of " + gguf_writable_type_names());
  const bool quantized = gguf_type_layout(type).block_elements > 1;
  const GgufTensorInfo* head = gguf_output_head(in);
  std::vector<GgufTensorPlan> plans;
  for (const GgufTensorInfo& t : in.tensors()) {
    GgufTensorPlan p{t.name, t.type, t.type, true, {}};
    if (t.shape.size() >= 2) {
      const std::int64_t row = t.shape.back();
      p.to_type = type;
      if (&t == head && quantized) {
        const auto q6_k = static_cast<std::uint32_t>(GgufType::q6_k), q8_0 = static_cast<std::uint32_t>(GgufType::q8_0);
        p.to_type = type != q8_0 && row % 256 == 0 ? q6_k : q8_0;
        if (p.to_type == q8_0 && type != q8_0)
          p.note = "output head: Q8_0, as llama.cpp's Q6_K falls back to for rows of " + std::to_string(row);
        else if (p.to_type != type)
          p.note = "output head: Q6_K, as llama.cpp writes it";
      }
      if (row % static_cast<std::int64_t>(gguf_type_layout(p.to_type).block_elements) != 0) {
        const std::uint32_t fallback = gguf_k_fallback(p.to_type);
        if (fallback != p.to_type) {
          p.note = "rows of " + std::to_string(row) +
                   " are not whole super-blocks of 256: " + gguf_type_name(fallback) + ", as llama.cpp falls back to";
          p.to_type = fallback;
        }
      }
      if (gguf_type_layout(p.to_type).block_elements > 1 && row % 32 != 0) {
        p.note = "rows of " + std::to_string(row) + " are not whole blocks of 32: F16, as llama.cpp falls back to";
        p.to_type = static_cast<std::uint32_t>(GgufType::f16);
      }
      p.copied = p.to_type == t.type;  // as llama-quantize: a tensor already of its type is copied
      if (!p.copied && !gguf_type_supported(t.type))
        fail(where, in.path() + ": tensor \"" + t.name + "\" is " + gguf_type_name(t.type) + ", which shrink cannot " +
                        "read: expected one of " + gguf_supported_type_names() + " to requantize it to " +
                        gguf_type_name(p.to_type));
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

// A caller's bytes for a tensor in place of the reference path (a method's blocks, a norm with a factor folded in):
// called with the tensor's plan, its input and the buffer of its bytes in plan.to_type; returns false to leave the
// tensor to the reference path (copied, or requantized by gguf_quantize).
using GgufTensorEncoder =
    std::function<bool(const GgufTensorPlan& plan, const GgufTensorInfo& tensor, std::uint8_t* out, std::size_t bytes)>;

// Writes `in` requantized to `type` at out_path (the file comment). `progress`, when given, is called before each
// tensor is written with its plan; `encoder`, when given, may write any tensor itself. A throw from either leaves
// out_path as it was.
inline std::vector<GgufTensorPlan> requantize_gguf(const GgufFile& in, const std::string& out_path, std::uint32_t type,
                                                   const std::function<void(const GgufTensorPlan&)>& progress = {},
                                                   const GgufTensorEncoder& encoder = {}) {
  const std::vector<GgufTensorPlan> plans = plan_gguf_requantize(in, type);
  GgufWriter writer;
  if (in.has("general.alignment")) writer.set_uint32("general.alignment", static_cast<std::uint32_t>(in.alignment()));
  for (const GgufMetadataEntry& e : in.metadata())
    if (e.key != "general.alignment" && e.key != "general.file_type" && e.key != "general.quantization_version")
      writer.copy_metadata(in, e);
  writer.set_uint32("general.quantization_version", 2);  // llama-quantize's order
  writer.set_uint32("general.file_type", gguf_file_type_of(type));
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const GgufTensorPlan& p = plans[i];
    const GgufTensorInfo& t = in.tensors()[i];
    if (p.copied) {
      writer.add_tensor(t.name, t.shape, t.type, [&](std::uint8_t* out, std::size_t bytes) {
        if (progress) progress(p);
        if (encoder && encoder(p, t, out, bytes)) return;
        std::copy(in.tensor_data(t), in.tensor_data(t) + bytes, out);
      });
      continue;
    }
    writer.add_tensor(t.name, t.shape, p.to_type, [&](std::uint8_t* out, std::size_t bytes) {
      if (progress) progress(p);
      if (encoder && encoder(p, t, out, bytes)) return;
      const std::vector<float> values = in.dequantize(t);
      gguf_quantize(p.to_type, values.data(), static_cast<std::int64_t>(values.size()), out);
    });
  }
  writer.write(out_path);
  return plans;
}

}  // namespace shrink::io
