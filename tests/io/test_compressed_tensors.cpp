// Tests for shrink/io/compressed_tensors.hpp: the packing order and offset, the tensors declared for each scheme, what
// cannot be expressed, and the config entry. (cli/compressed_tensors_interop loads the files with the package itself.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shrink/io/compressed_tensors.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/random.hpp"

using shrink::ScalarType;
using shrink::Shape;
using shrink::TensorView;
using namespace shrink::io;
using namespace shrink::quant;
namespace ct = shrink::io::compressed_tensors;

namespace {

std::vector<std::uint32_t> words(const shrink::ByteBuffer& bytes) {
  std::vector<std::uint32_t> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

TEST_CASE("pack_int32 puts element j*f + i in bits [b*i, b*(i+1)) of word j, offset by 2^(b-1)",
          "[io][compressed_tensors]") {
  // One row of 9 int4 values: the first word holds 8 (the first in the lowest nibble), the second 1 plus padding 0.
  const std::vector<int> row = {-8, -1, 0, 1, 7, 2, -3, 5, 6};
  const auto packed = words(ct::pack_int32(1, 9, 4, false, [&](std::int64_t, std::int64_t c) { return row[c]; }));
  REQUIRE(packed.size() == 2);
  std::uint32_t expected = 0;
  for (int i = 0; i < 8; ++i) expected |= static_cast<std::uint32_t>(row[i] + 8) << (4 * i);
  REQUIRE(packed[0] == expected);
  REQUIRE(packed[1] == 14u);
  // 8 bits: four values a word.
  const auto bytes =
      words(ct::pack_int32(1, 4, 8, false, [](std::int64_t, std::int64_t c) { return c == 0 ? -128 : 127; }));
  REQUIRE(bytes == std::vector<std::uint32_t>{0xFFFFFF00u});
  // Along rows (zero points): column c of rows 8r..8r+7 in word (r, c).
  const auto zp =
      words(ct::pack_int32(10, 2, 4, true, [](std::int64_t r, std::int64_t c) { return c == 0 ? int(r) - 8 : 0; }));
  REQUIRE(zp.size() == 4);  // [ceil(10 / 8), 2]
  REQUIRE(zp[0] == 0x76543210u);
  REQUIRE(zp[1] == 0x88888888u);
  REQUIRE(zp[2] == 0x98u);
  REQUIRE(zp[3] == 0x88u);
}

TEST_CASE("the tensors of each scheme, and the schemes compressed-tensors cannot express", "[io][compressed_tensors]") {
  const Shape shape{30, 64};
  const QuantizationRecord group =
      integer_record("m.q.weight", QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 16), shape);
  const ct::Expressible e = ct::weight_args(group);
  REQUIRE(e.args);
  REQUIRE_FALSE(e.args->symmetric);
  REQUIRE(e.args->strategy == "group");
  const auto d = ct::declarations(group, *e.args);
  REQUIRE(d.size() == 4);
  REQUIRE(d[0].tensor.name == "m.q.weight_packed");
  REQUIRE(d[0].tensor.dtype == ScalarType::i32);
  REQUIRE(d[0].tensor.shape == std::vector<std::int64_t>{30, 8});
  REQUIRE(d[1].tensor.shape == std::vector<std::int64_t>{30, 4});
  REQUIRE(d[2].tensor.name == "m.q.weight_zero_point");
  REQUIRE(d[2].tensor.shape == std::vector<std::int64_t>{4, 4});
  REQUIRE(d[3].tensor.name == "m.q.weight_shape");
  REQUIRE(d[3].tensor.dtype == ScalarType::i64);

  // uint8 symmetric has zero point 128, 0 once signed: no zero-point tensor.
  const QuantizationRecord u8 =
      integer_record("fc.weight", QuantScheme::per_channel(QuantDtype::uint8, Symmetry::symmetric, 0), shape);
  REQUIRE(ct::weight_args(u8).args->symmetric);
  REQUIRE(ct::declarations(u8, *ct::weight_args(u8).args).size() == 3);
  const QuantizationRecord fp8 =
      fp8_record("fc.weight", shrink::Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 0, shape);
  REQUIRE(ct::weight_args(fp8).args->format == std::string(ct::kNaiveQuantized));
  REQUIRE(ct::declarations(fp8, *ct::weight_args(fp8).args)[0].tensor.name == "fc.weight");

  auto why = [](const QuantizationRecord& r) { return ct::weight_args(r).why_not; };
  REQUIRE(why(integer_record("conv.weight", QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0),
                             Shape{4, 2, 3, 3}))
              .find("rank 4") != std::string::npos);
  REQUIRE(why(integer_record("fc.bias2", QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0), shape))
              .find("not a Linear weight") != std::string::npos);
  REQUIRE(why(integer_record("fc.weight", QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 1), shape))
              .find("axis 1") != std::string::npos);
  REQUIRE(why(integer_record("fc.weight", QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine), shape))
              .find("per-tensor zero point") != std::string::npos);
  REQUIRE(
      why(fp8_record("fc.weight", shrink::Fp8Format::e5m2, Fp8ScaleGranularity::per_tensor, 0, shape)).find("E4M3") !=
      std::string::npos);
}

TEST_CASE("packed_weight and packed_zero_points sign unsigned types", "[io][compressed_tensors]") {
  const std::vector<float> x = shrink::test::random_values(8 * 16, 3);
  const TensorView<const float> view(x.data(), Shape{8, 16});
  const QuantizedTensor q = quantize(view, QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 8));
  const QuantizationRecord r = integer_record("fc.weight", q.scheme, q.shape);
  const ct::WeightArgs a = *ct::weight_args(r).args;
  const auto packed = words(ct::packed_weight(q, a));
  REQUIRE(packed.size() == 16);
  for (std::int64_t i = 0; i < 128; ++i) {
    const std::uint32_t nibble = (packed[static_cast<std::size_t>(i / 8)] >> (4 * (i % 8))) & 0xF;
    REQUIRE(static_cast<std::int32_t>(nibble) == q.value(i));  // uint4: (q - 8) + 8, the same nibble
  }
  const auto zp = words(ct::packed_zero_points(r, a, q.qparams.zero_point));
  REQUIRE(zp.size() == 2);  // [ceil(8 / 8), 2]
  for (std::int64_t row = 0; row < 8; ++row)
    for (std::int64_t g = 0; g < 2; ++g)
      REQUIRE(static_cast<std::int32_t>((zp[static_cast<std::size_t>(g)] >> (4 * row)) & 0xF) ==
              q.qparams.zero_point[static_cast<std::size_t>(row * 2 + g)]);
}

TEST_CASE("quantization_config names the group, the ignored layers and the version", "[io][compressed_tensors]") {
  ct::WeightArgs a;
  a.num_bits = 4;
  a.symmetric = false;
  a.strategy = "group";
  a.group_size = 128;
  const auto c = ct::quantization_config(a, {"lm_head"});
  REQUIRE(c["quant_method"] == "compressed-tensors");
  REQUIRE(c["format"] == "pack-quantized");
  REQUIRE(c["config_groups"]["group_0"]["targets"] == nlohmann::ordered_json{"Linear"});
  REQUIRE(c["config_groups"]["group_0"]["weights"]["group_size"] == 128);
  REQUIRE(c["config_groups"]["group_0"]["weights"]["symmetric"] == false);
  REQUIRE(c["ignore"] == nlohmann::ordered_json{"lm_head"});
  REQUIRE(c["version"] == ct::kVersion);
  a.strategy = "channel";
  REQUIRE(ct::quantization_config(a, {})["config_groups"]["group_0"]["weights"]["group_size"].is_null());
}
