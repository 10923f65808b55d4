// The compressed-tensors convention: the checkpoints that vLLM and Hugging Face transformers load when config.json says
// `"quantization_config": {"quant_method": "compressed-tensors", ...}`. Weight-only quantized Linear layers `X`:
//
//   int (4 or 8 bits)  "pack-quantized"   X.weight_packed      I32 [N, ceil(K / (32 / bits))]: value j*f + i of a row
//                                                              (f = 32 / bits values a word) in bits [bits*i,
//                                                              bits*(i+1)) of word j, stored as v + 2^(bits-1)
//                                                              (unsigned), padding 0
//                                        X.weight_scale       [1] per tensor, [N, 1] per channel, [N, K / group] per
//                                        group X.weight_zero_point  asymmetric only: I32, the [N, G] zero points
//                                        (signed, as the
//                                                              values) packed the same way along N: [ceil(N / f), G]
//                                        X.weight_shape       I64 [2]: N, K
//   FP8 E4M3           "naive-quantized"  X.weight             F8_E4M3 [N, K], codes of w / scale
//                                        X.weight_scale       [1] per tensor, [N, 1] per channel
//
// and w = (v - zero_point) * scale (FP8: value(code) * scale). These formats are the ones compressed-tensors' own
// format inference picks for weight-only schemes (no input activations): integers of 1..8 bits pack, FP8 weights alone
// are stored naively ("float-quantized" is its name when activations are quantized too). A `weight_g_idx` tensor is
// needed only for activation-ordered (GPTQ act-order) groups, which shrink does not produce, so none is written. Scales
// are written F32 (compressed-tensors takes the scale's dtype for the decompressed weight; F32 keeps shrink's values).
// Unsigned shrink types become signed by subtracting 2^(bits-1) from values and zero points alike.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/dtype.hpp"
#include "shrink/core/fp8.hpp"
#include "shrink/io/quant_record.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::io::compressed_tensors {

inline constexpr const char* kQuantMethod = "compressed-tensors";
inline constexpr const char* kPackQuantized = "pack-quantized";
inline constexpr const char* kNaiveQuantized = "naive-quantized";
// The compressed-tensors release whose source this writer follows (and the tests load with).
inline constexpr const char* kVersion = "0.12.2";

// The `weights` QuantizationArgs of a config group, and the format its tensors are stored in.
struct WeightArgs {
  int num_bits = 8;
  std::string type = "int";  // "int" or "float"
  bool symmetric = true;
  std::string strategy = "channel";  // "tensor", "channel" or "group"
  std::int64_t group_size = 0;       // group only
  std::string format = kPackQuantized;

  bool operator==(const WeightArgs& o) const {
    return num_bits == o.num_bits && type == o.type && symmetric == o.symmetric && strategy == o.strategy &&
           group_size == o.group_size && format == o.format;
  }
  bool operator!=(const WeightArgs& o) const { return !(*this == o); }
};

// What a record becomes: its arguments, or why compressed-tensors cannot express it.
struct Expressible {
  std::optional<WeightArgs> args;
  std::string why_not;
};

// The amount subtracted from a shrink integer to get compressed-tensors' signed value: 2^(bits-1) for unsigned types.
inline std::int32_t unsigned_shift(const quant::QuantScheme& s) {
  return quant::is_signed(s.dtype) ? 0 : std::int32_t{1} << (quant::bit_width(s.dtype) - 1);
}

// Whether the scheme's zero point is 0 once signed, so that no zero-point tensor is written.
inline bool symmetric_once_signed(const quant::QuantScheme& s) {
  return s.symmetry == quant::Symmetry::symmetric && quant::symmetric_zero_point(s) == unsigned_shift(s);
}

// Whether the record is a Linear weight `X.weight` [N, K] stored in a way compressed-tensors can express.
inline Expressible weight_args(const QuantizationRecord& r) {
  auto no = [](std::string why) { return Expressible{std::nullopt, std::move(why)}; };
  const std::string suffix = ".weight";
  if (r.name.size() <= suffix.size() || r.name.compare(r.name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return no("not a Linear weight (compressed-tensors stores NAME.weight of Linear layers)");
  if (r.shape.size() != 2) return no("not a Linear weight [out, in] (rank " + std::to_string(r.shape.size()) + ")");
  WeightArgs a;
  if (r.encoding == StoredEncoding::fp8) {
    if (r.fp8_format != Fp8Format::e4m3) return no("compressed-tensors stores FP8 weights as E4M3 only");
    if (r.fp8_axis > 0) return no("FP8 scales per channel along axis 1: compressed-tensors has one per output row");
    a.num_bits = 8;
    a.type = "float";
    a.strategy = r.fp8_axis < 0 ? "tensor" : "channel";
    a.format = kNaiveQuantized;
    return {a, {}};
  }
  if (r.encoding != StoredEncoding::integer) return no("a cast has no compressed-tensors form");
  if (r.has_input_scale()) return no("an input scale (the integers are those of W·diag(s)): not written yet");
  if (r.scheme.float_zero_point)
    return no("fractional zero points (HQQ, \"zero_point\":\"float\"): compressed-tensors stores integer ones");
  const quant::QuantScheme& s = r.scheme;
  if (s.bits != 0)
    return no("a range narrower than the dtype (bits = " + std::to_string(s.bits) + "): not written yet");
  a.num_bits = quant::bit_width(s.dtype);
  a.symmetric = symmetric_once_signed(s);
  switch (s.granularity) {
    case quant::Granularity::per_tensor:
      if (!a.symmetric) return no("a per-tensor zero point: compressed-tensors packs zero points per channel or group");
      a.strategy = "tensor";
      break;
    case quant::Granularity::per_channel:
      if (s.axis != 0) return no("channels along axis 1: compressed-tensors has one scale per output row (axis 0)");
      a.strategy = "channel";
      break;
    case quant::Granularity::per_group:
      if (s.axis != 1) return no("groups along axis 0: compressed-tensors groups the input dimension (axis 1)");
      a.strategy = "group";
      a.group_size = s.group_size;
      break;
  }
  return {a, {}};
}

// The parts a Linear weight is stored in.
enum class Part : std::uint8_t { data, scale, zero_point, shape };

struct PartDeclaration {
  TensorDeclaration tensor;
  Part part;
};

inline std::string module_name(const QuantizationRecord& r) { return r.name.substr(0, r.name.size() - 7); }

// The scale shape: [1], [N, 1] or [N, G].
inline std::vector<std::int64_t> scale_shape(const QuantizationRecord& r, const WeightArgs& a) {
  if (a.strategy == "tensor") return {1};
  if (a.strategy == "channel") return {r.shape[0], 1};
  return {r.shape[0], r.shape[1] / a.group_size};
}

inline std::int64_t values_per_word(int num_bits) { return 32 / num_bits; }

// The tensors of one weight, in the order data, scale, zero point, shape (as present).
inline std::vector<PartDeclaration> declarations(const QuantizationRecord& r, const WeightArgs& a) {
  const std::string m = module_name(r);
  const std::vector<std::int64_t> scales = scale_shape(r, a);
  if (a.format == kNaiveQuantized)
    return {{{m + ".weight", ScalarType::f8_e4m3, r.shape}, Part::data},
            {{m + ".weight_scale", ScalarType::f32, scales}, Part::scale}};
  const std::int64_t f = values_per_word(a.num_bits);
  std::vector<PartDeclaration> out{
      {{m + ".weight_packed", ScalarType::i32, {r.shape[0], (r.shape[1] + f - 1) / f}}, Part::data},
      {{m + ".weight_scale", ScalarType::f32, scales}, Part::scale}};
  if (!a.symmetric)
    out.push_back(
        {{m + ".weight_zero_point", ScalarType::i32, {(scales[0] + f - 1) / f, scales[1]}}, Part::zero_point});
  out.push_back({{m + ".weight_shape", ScalarType::i64, {2}}, Part::shape});
  return out;
}

// Packs a [rows, cols] matrix of signed `bits`-bit values (at(r, c)) into int32 words along `cols` when `along_rows`
// is false (the weight) or along `rows` when true (the zero points): each value stored as v + 2^(bits-1).
template <class At>
ByteBuffer pack_int32(std::int64_t rows, std::int64_t cols, int bits, bool along_rows, At at) {
  const std::int64_t f = values_per_word(bits);
  const std::int64_t out_rows = along_rows ? (rows + f - 1) / f : rows;
  const std::int64_t out_cols = along_rows ? cols : (cols + f - 1) / f;
  const std::uint32_t offset = std::uint32_t{1} << (bits - 1);
  const std::uint32_t mask = (std::uint64_t{1} << bits) - 1;
  std::vector<std::uint32_t> words(static_cast<std::size_t>(out_rows * out_cols), 0u);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t packed = along_rows ? r : c;  // the index that runs along the packed dimension
      const std::int64_t word = along_rows ? (packed / f) * out_cols + c : r * out_cols + packed / f;
      const std::uint32_t u = (static_cast<std::uint32_t>(at(r, c)) + offset) & mask;
      words[static_cast<std::size_t>(word)] |= u << (bits * (packed % f));
    }
  ByteBuffer out(words.size() * 4);
  if (!words.empty()) std::memcpy(out.data(), words.data(), out.size());
  return out;
}

// X.weight_packed of an integer weight.
inline ByteBuffer packed_weight(const quant::QuantizedTensor& q, const WeightArgs& a) {
  const std::int32_t shift = unsigned_shift(q.scheme);
  const std::int64_t cols = q.shape[1];
  return pack_int32(q.shape[0], cols, a.num_bits, false,
                    [&](std::int64_t r, std::int64_t c) { return q.value(r * cols + c) - shift; });
}

// X.weight_zero_point of an asymmetric weight, from shrink's zero points (one per scale, row-major).
inline ByteBuffer packed_zero_points(const QuantizationRecord& r, const WeightArgs& a,
                                     const std::vector<std::int32_t>& zero_points) {
  const std::vector<std::int64_t> shape = scale_shape(r, a);
  const std::int32_t shift = unsigned_shift(r.scheme);
  return pack_int32(shape[0], shape[1], a.num_bits, true,
                    [&](std::int64_t i, std::int64_t j) { return zero_points[i * shape[1] + j] - shift; });
}

// X.weight_shape.
inline ByteBuffer shape_tensor(const QuantizationRecord& r) {
  ByteBuffer out(16);
  std::memcpy(out.data(), r.shape.data(), 16);
  return out;
}

// The `quantization_config` entry of config.json for one group of Linear layers, and the Linear layers left alone.
inline nlohmann::ordered_json quantization_config(const WeightArgs& a, const std::vector<std::string>& ignore) {
  nlohmann::ordered_json weights;
  weights["num_bits"] = a.num_bits;
  weights["type"] = a.type;
  weights["symmetric"] = a.symmetric;
  weights["group_size"] = a.strategy == "group" ? nlohmann::ordered_json(a.group_size) : nlohmann::ordered_json();
  weights["strategy"] = a.strategy;
  weights["block_structure"] = nullptr;
  weights["dynamic"] = false;
  weights["actorder"] = nullptr;
  weights["observer"] = "minmax";
  weights["observer_kwargs"] = nlohmann::ordered_json::object();
  nlohmann::ordered_json group;
  group["targets"] = {"Linear"};
  group["weights"] = weights;
  group["input_activations"] = nullptr;
  group["output_activations"] = nullptr;
  group["format"] = a.format;
  nlohmann::ordered_json c;
  c["quant_method"] = kQuantMethod;
  c["format"] = a.format;
  c["quantization_status"] = "compressed";
  c["config_groups"] = {{"group_0", group}};
  c["ignore"] = ignore;
  c["kv_cache_scheme"] = nullptr;
  c["global_compression_ratio"] = nullptr;
  c["version"] = kVersion;
  return c;
}

}  // namespace shrink::io::compressed_tensors
