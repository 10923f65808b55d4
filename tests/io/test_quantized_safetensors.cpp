// Tests for shrink/io/quantized_safetensors.hpp: round trips of every integer dtype, symmetry and granularity,
// FP8 and FP16/BF16 casts, AWQ's input scale, listing and whole-file dequantization, and hostile metadata or parameter
// tensors (each an Error naming what was expected, never a crash, and no output file left by dequantize_file).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"
#include "shrink/io/compressed_tensors.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/metrics/error.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/hqq.hpp"
#include "support/random.hpp"

using shrink::ByteBuffer;
using shrink::Error;
using shrink::ScalarType;
using shrink::Shape;
using shrink::TensorView;
using namespace shrink::io;
using namespace shrink::quant;

namespace {

// A tensor for a hand-made (possibly hostile) file.
struct RawTensor {
  std::string name;
  ScalarType dtype;
  std::vector<std::int64_t> shape;
  std::vector<std::uint8_t> bytes;
};

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

void write_raw_tensors(const std::string& path, const std::vector<RawTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  SafetensorsWriter writer(path);
  for (const auto& t : tensors) writer.add_tensor(t.name, t.dtype, t.shape);
  for (const auto& m : metadata) writer.add_metadata(m.first, m.second);
  writer.write_header();
  for (const auto& t : tensors) writer.write(t.name, t.bytes.data(), t.bytes.size());
  writer.finish();
}

void write_encoded(const std::string& path, const std::vector<EncodedQuantization>& encoded,
                   const std::vector<RawTensor>& plain = {}) {
  SafetensorsWriter writer(path);
  for (const auto& e : encoded) e.declare(writer);
  for (const auto& t : plain) writer.add_tensor(t.name, t.dtype, t.shape);
  writer.add_metadata("format", "pt");
  writer.write_header();
  for (const auto& e : encoded) e.write(writer);
  for (const auto& t : plain) writer.write(t.name, t.bytes.data(), t.bytes.size());
  writer.finish();
}

void require_same(const QuantizedTensor& a, const QuantizedTensor& b) {
  REQUIRE(a.shape == b.shape);
  REQUIRE(a.scheme.dtype == b.scheme.dtype);
  REQUIRE(a.scheme.symmetry == b.scheme.symmetry);
  REQUIRE(a.scheme.granularity == b.scheme.granularity);
  REQUIRE(a.scheme.restricted_range == b.scheme.restricted_range);
  REQUIRE(a.scheme.reduce_range == b.scheme.reduce_range);
  REQUIRE(a.scheme.bits == b.scheme.bits);
  if (a.scheme.granularity == Granularity::per_group) REQUIRE(a.scheme.group_size == b.scheme.group_size);
  REQUIRE(a.qparams.shape == b.qparams.shape);
  REQUIRE(a.qparams.scale == b.qparams.scale);
  REQUIRE(a.qparams.zero_point == b.qparams.zero_point);
  REQUIRE(a.scheme.float_zero_point == b.scheme.float_zero_point);
  REQUIRE(a.qparams.float_zero_point == b.qparams.float_zero_point);
  REQUIRE(std::vector<std::uint8_t>(a.data.begin(), a.data.end()) == std::vector<std::uint8_t>(b.data.begin(), b.data.end()));
}

// A valid int8 per-channel affine tensor "w" [4, 6] as raw parts, for the hostile variants below.
struct ValidParts {
  std::vector<float> x = shrink::test::random_values(24, 7);
  QuantizedTensor q;
  ValidParts() {
    q = quantize(TensorView<const float>(x.data(), Shape{4, 6}), QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0));
  }
  RawTensor data() const { return {"w", ScalarType::i8, {4, 6}, std::vector<std::uint8_t>(q.data.begin(), q.data.end())}; }
  RawTensor scale() const { return {"w_scale", ScalarType::f32, {4}, bytes_of(q.qparams.scale)}; }
  RawTensor zero_point() const {
    std::vector<std::int8_t> zp(q.qparams.zero_point.begin(), q.qparams.zero_point.end());
    return {"w_zero_point", ScalarType::i8, {4}, bytes_of(zp)};
  }
  std::string record() const {
    return R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"shape":[4,6]})";
  }
  std::map<std::string, std::string> metadata(const std::string& record_text) const {
    return {{"shrink.format_version", "1"}, {"shrink.quant.w", record_text}};
  }
};

// Opening and reading `path` fails with an Error whose message holds `expected`; dequantize_file leaves no output.
void require_rejected(const shrink::test::TempDir& dir, const std::string& path, const std::string& expected) {
  auto read_all = [&] {
    const SafetensorsFile file(path);
    for (const auto& r : quantization_records(file)) read_float(file, r.name);
    read_float(file, "w");
  };
  REQUIRE_THROWS_WITH(read_all(), Catch::Contains(expected));
  const std::string out = dir.file("out.safetensors");
  REQUIRE_THROWS_AS(dequantize_file(path, out), Error);
  REQUIRE_FALSE(std::filesystem::exists(out));
}

}  // namespace

TEST_CASE("integer tensors round-trip through a file for every dtype, symmetry and granularity",
          "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const Shape shape{6, 10};
  const std::vector<float> x = shrink::test::random_values(60, 11);
  const TensorView<const float> view(x.data(), shape);
  for (QuantDtype dtype : {QuantDtype::int8, QuantDtype::uint8, QuantDtype::int4, QuantDtype::uint4})
    for (Symmetry symmetry : {Symmetry::symmetric, Symmetry::affine})
      for (int variant = 0; variant < 7; ++variant) {
        QuantScheme scheme = variant == 0   ? QuantScheme::per_tensor(dtype, symmetry)
                             : variant == 1 ? QuantScheme::per_channel(dtype, symmetry, 0)
                             : variant == 2 ? QuantScheme::per_channel(dtype, symmetry, -1)
                             : variant == 3 ? QuantScheme::per_group(dtype, symmetry, 1, 5)
                             : variant == 4 ? QuantScheme::per_group(dtype, symmetry, 0, 3)
                                            : QuantScheme::per_channel(dtype, symmetry, 1);
        scheme.restricted_range = variant == 4;
        scheme.reduce_range = variant == 5;
        if (variant == 6) scheme.bits = bit_width(dtype) - 1;  // GPTQ's narrower ranges (quant/gptq.hpp)
        CAPTURE(to_string(dtype), to_string(symmetry), variant);
        const QuantizedTensor q = quantize(view, scheme);
        const std::string path = dir.file("q.safetensors");
        write_encoded(path, {encode_quantized("layer.weight", q, "minmax")});

        const SafetensorsFile file(path);
        REQUIRE(is_quantized(file, "layer.weight"));
        const QuantizedTensor back = read_quantized(file, "layer.weight");
        require_same(q, back);
        REQUIRE(back.scheme.axis == (scheme.granularity == Granularity::per_tensor ? 0 : (scheme.axis + 2) % 2));
        REQUIRE(read_float(file, "layer.weight") == dequantize(q));
        REQUIRE(logical_shape(file, "layer.weight") == std::vector<std::int64_t>{6, 10});

        const auto record = quantization_record(file, "layer.weight");
        REQUIRE(record->calibrator == "minmax");
        REQUIRE(record->encoding == StoredEncoding::integer);
        REQUIRE(file.info("layer.weight").dtype == (dtype == QuantDtype::int8 ? ScalarType::i8 : ScalarType::u8));
        REQUIRE(file.info("layer.weight").shape ==
                std::vector<std::int64_t>{6, is_packed(dtype) ? 5 : 10});  // 10 nibbles pack into 5 bytes
        REQUIRE(file.info("layer.weight_scale").shape == q.qparams.shape.to_vector());
        REQUIRE(file.contains("layer.weight_zero_point") == (symmetry == Symmetry::affine));
        if (symmetry == Symmetry::affine)
          REQUIRE(file.info("layer.weight_zero_point").dtype == (is_signed(dtype) ? ScalarType::i8 : ScalarType::u8));
      }
}

TEST_CASE("GPTQ's weights (2-8 bits, scheme.bits) round-trip through a file", "[io][quantized_safetensors][gptq]") {
  shrink::test::TempDir dir;
  const std::vector<float> w = shrink::test::random_values(8 * 64, 21);
  const std::vector<float> calibration = shrink::test::random_values(100 * 64, 22);
  HessianObserver observer;
  observer.observe(TensorView<const float>(calibration.data(), Shape{100, 64}));
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (Symmetry symmetry : {Symmetry::symmetric, Symmetry::affine}) {
      CAPTURE(bits, to_string(symmetry));
      GptqOptions o;
      o.bits = bits;
      o.symmetry = symmetry;
      o.group_size = bits % 2 == 0 ? 32 : 0;
      const QuantizedTensor q = gptq_quantize(TensorView<const float>(w.data(), Shape{8, 64}), observer.hessian(), o);
      const std::string path = dir.file("gptq.safetensors");
      write_encoded(path, {encode_quantized("layer.weight", q, "gptq")});
      const SafetensorsFile file(path);
      const QuantizedTensor back = read_quantized(file, "layer.weight");
      require_same(q, back);
      REQUIRE(quant_range(back.scheme).qmax - quant_range(back.scheme).qmin == (1 << bits) - 1);
      REQUIRE(read_float(file, "layer.weight") == dequantize(q));
    }
}

TEST_CASE("odd last dimensions, 0-d tensors and per-tensor scales of shape []", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(21, 3);
  const QuantizedTensor odd = quantize(TensorView<const float>(x.data(), Shape{3, 7}),
                                       QuantScheme::per_channel(QuantDtype::int4, Symmetry::affine, 0));
  const QuantizedTensor scalar = quantize(TensorView<const float>(x.data(), Shape{}),
                                          QuantScheme::per_tensor(QuantDtype::uint4, Symmetry::symmetric));
  const std::string path = dir.file("q.safetensors");
  write_encoded(path, {encode_quantized("odd", odd), encode_quantized("scalar", scalar)});
  const SafetensorsFile file(path);
  REQUIRE(file.info("odd").shape == std::vector<std::int64_t>{3, 4});
  REQUIRE(file.info("scalar").shape.empty());
  REQUIRE(file.info("scalar_scale").shape.empty());
  require_same(odd, read_quantized(file, "odd"));
  require_same(scalar, read_quantized(file, "scalar"));
  REQUIRE(read_float(file, "scalar") == dequantize(scalar));
}

TEST_CASE("FP8 tensors and FP16/BF16 casts round-trip", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const Shape shape{5, 8};
  const std::vector<float> x = shrink::test::random_values(40, 5);
  const TensorView<const float> view(x.data(), shape);
  const Fp8Tensor e4m3 = quantize_fp8(view, shrink::Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, 1);
  const Fp8Tensor e5m2 = quantize_fp8(view, shrink::Fp8Format::e5m2);
  const std::string path = dir.file("q.safetensors");
  write_encoded(path, {encode_fp8("a", e4m3, "amax"), encode_fp8("b", e5m2), encode_cast("c", view, ScalarType::f16),
                       encode_cast("d", view, ScalarType::bf16)});
  const SafetensorsFile file(path);
  REQUIRE(file.info("a").dtype == ScalarType::f8_e4m3);
  REQUIRE(file.info("a_scale").shape == std::vector<std::int64_t>{8});
  REQUIRE(file.info("b").dtype == ScalarType::f8_e5m2);
  REQUIRE(file.info("b_scale").shape.empty());
  REQUIRE(file.info("c").dtype == ScalarType::f16);
  REQUIRE(file.info("d").dtype == ScalarType::bf16);
  REQUIRE_FALSE(file.contains("c_scale"));

  for (const auto* q : {&e4m3, &e5m2}) {
    const Fp8Tensor back = read_fp8(file, q == &e4m3 ? "a" : "b");
    REQUIRE(back.scale == q->scale);
    REQUIRE(back.axis == q->axis);
    REQUIRE(back.format == q->format);
    REQUIRE(std::equal(back.data.begin(), back.data.end(), q->data.begin(), q->data.end()));
    std::vector<float> expected(40);
    dequantize_fp8(*q, TensorView<float>(expected.data(), shape));
    REQUIRE(read_float(file, q == &e4m3 ? "a" : "b") == expected);
  }
  const std::vector<float> c = read_float(file, "c");
  const std::vector<float> d = read_float(file, "d");
  for (std::size_t i = 0; i < x.size(); ++i) {
    REQUIRE(c[i] == shrink::half(x[i]).to_float());
    REQUIRE(d[i] == shrink::bfloat16(x[i]).to_float());
  }
  REQUIRE(quantization_record(file, "c")->cast_from == "F32");
  REQUIRE_THROWS_WITH(read_quantized(file, "a"), Catch::Contains("fp8_e4m3"));
}

TEST_CASE("records are listed in file order with their parameter tensors", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(32, 9);
  const TensorView<const float> view(x.data(), Shape{4, 8});
  const std::string path = dir.file("q.safetensors");
  write_encoded(path,
                {encode_quantized("w1", quantize(view, QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0))),
                 encode_quantized("w2", quantize(view, QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric)))},
                {{"bias", ScalarType::f32, {4}, bytes_of(std::vector<float>{1, 0, 2, 0})}});
  const SafetensorsFile file(path);
  const auto records = quantization_records(file);
  REQUIRE(records.size() == 2);
  REQUIRE(records[0].name == "w1");
  REQUIRE(records[1].name == "w2");
  REQUIRE(parameter_tensor_names(records) == std::set<std::string>{"w1_scale", "w1_zero_point", "w2_scale"});
  REQUIRE_FALSE(is_quantized(file, "bias"));
  REQUIRE(read_float(file, "bias") == std::vector<float>{1, 0, 2, 0});
  REQUIRE_THROWS_WITH(read_quantized(file, "bias"), Catch::Contains("no \"shrink.quant.bias\" metadata"));
}

TEST_CASE("dequantize_file writes float32 and drops the convention's tensors and metadata",
          "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(64, 13);
  const TensorView<const float> view(x.data(), Shape{8, 8});
  const QuantizedTensor q = quantize(view, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 4));
  const Fp8Tensor f = quantize_fp8(view, shrink::Fp8Format::e4m3);
  const std::string in = dir.file("q.safetensors");
  write_encoded(in, {encode_quantized("a", q), encode_fp8("b", f), encode_cast("c", view, ScalarType::bf16)},
                {{"ids", ScalarType::i64, {3}, bytes_of(std::vector<std::int64_t>{1, 2, 3})}});
  const std::string out = dir.file("d.safetensors");
  std::vector<std::string> progress;
  const DequantizeFileSummary summary =
      dequantize_file(in, out, [&](const std::string& name, std::size_t, std::size_t) { progress.push_back(name); });
  REQUIRE(summary.dequantized == std::vector<std::string>{"a", "b", "c"});
  REQUIRE(summary.copied == std::vector<std::string>{"ids"});
  REQUIRE(progress.size() == 4);

  const SafetensorsFile file(out);
  REQUIRE(file.tensors().size() == 4);
  for (const char* name : {"a", "b", "c"}) {
    REQUIRE(file.info(name).dtype == ScalarType::f32);
    REQUIRE(file.info(name).shape == std::vector<std::int64_t>{8, 8});
  }
  REQUIRE(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(read_float(file, "a") == dequantize(q));
  REQUIRE(read_float(file, "ids") == std::vector<float>{1, 2, 3});
  const TensorView<const float> a = file.view<float>("a");  // widest first: F32 stays aligned
  REQUIRE(a.numel() == 64);
}

TEST_CASE("dequantize_file writes each tensor in its recorded source dtype, or the dtype asked",
          "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(64, 14);
  const TensorView<const float> view(x.data(), Shape{8, 8});
  const QuantizedTensor q = quantize(view, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
  const Fp8Tensor f = quantize_fp8(view, shrink::Fp8Format::e4m3);
  const std::string in = dir.file("q.safetensors");
  write_encoded(in, {encode_quantized("bf", q, "minmax", "BF16"), encode_quantized("h", q, "minmax", "F16"),
                     encode_fp8("d", f, "amax", "F64"), encode_quantized("old", q),
                     encode_cast("c", view, ScalarType::f16, "BF16")});
  REQUIRE(quantization_record(SafetensorsFile(in), "bf")->source_dtype == "BF16");
  REQUIRE(quantization_record(SafetensorsFile(in), "old")->source_dtype.empty());
  const std::string out = dir.file("d.safetensors");
  const DequantizeFileSummary summary = dequantize_file(in, out);
  const SafetensorsFile file(out);
  REQUIRE(file.info("bf").dtype == ScalarType::bf16);
  REQUIRE(file.info("h").dtype == ScalarType::f16);
  REQUIRE(file.info("d").dtype == ScalarType::f64);
  REQUIRE(file.info("old").dtype == ScalarType::f32);
  REQUIRE(file.info("c").dtype == ScalarType::bf16);
  REQUIRE(summary.notes.size() == 1);
  REQUIRE(summary.notes.at("old").find("no source dtype recorded") != std::string::npos);
  const std::vector<float> exact = dequantize(q);
  const std::vector<float> bf = read_float(file, "bf");
  const std::vector<float> h = read_float(file, "h");
  for (std::size_t i = 0; i < exact.size(); ++i) {
    REQUIRE(bf[i] == shrink::bfloat16(exact[i]).to_float());  // the float32 value rounded once
    REQUIRE(h[i] == shrink::half(exact[i]).to_float());
  }
  REQUIRE(read_float(file, "old") == exact);

  for (const auto& forced :
       {std::make_pair(DequantizeTo::f32, ScalarType::f32), std::make_pair(DequantizeTo::bf16, ScalarType::bf16),
        std::make_pair(DequantizeTo::f16, ScalarType::f16)}) {
    const DequantizeFileSummary s = dequantize_file(in, out, {}, forced.first);
    REQUIRE(s.notes.empty());
    const SafetensorsFile g(out);
    for (const char* name : {"bf", "h", "d", "old", "c"}) REQUIRE(g.info(name).dtype == forced.second);
  }
}

TEST_CASE("a record's source_dtype is checked", "[io][quantized_safetensors]") {
  const std::string base = R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","shape":[4],)";
  REQUIRE(parse_quantization_record("w", base + R"("source_dtype":"BF16"})").source_dtype == "BF16");
  REQUIRE_THROWS_WITH(parse_quantization_record("w", base + R"("source_dtype":"I8"})"),
                      Catch::Contains("expected \"F32\", \"F16\", \"BF16\" or \"F64\""));
  REQUIRE_THROWS_WITH(parse_quantization_record("w", R"({"dtype":"bf16","source_dtype":"F32","shape":[4]})"),
                      Catch::Contains("unexpected key \"source_dtype\""));
}

TEST_CASE("parse_quantization_record reads and rejects record texts", "[io][quantized_safetensors]") {
  const QuantizationRecord r = parse_quantization_record(
      "w", R"({"dtype":"int4","scheme":"affine","granularity":"per_group","axis":-1,"group_size":32,"shape":[64,128]})");
  REQUIRE(r.scheme.axis == 1);
  REQUIRE(r.scheme.group_size == 32);
  REQUIRE_FALSE(r.scheme.restricted_range);
  REQUIRE(parse_quantization_record("w", to_metadata_value(r)).scheme.group_size == 32);

  const std::pair<const char*, const char*> bad[] = {
      {"{", "not valid JSON"},
      {"[1,2]", "expected a JSON object"},
      {R"({"dtype":"int3","shape":[2]})", "expected int8, uint8"},
      {R"({"dtype":7,"shape":[2]})", "expected a string"},
      {R"({"shape":[2]})", "no \"dtype\""},
      {R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor"})", "no \"shape\""},
      {R"({"dtype":"int8","scheme":"odd","granularity":"per_tensor","shape":[2]})", "expected \"symmetric\" or \"affine\""},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_row","shape":[2]})", "expected \"per_tensor\""},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","shape":[2,3]})", "no \"axis\""},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":2,"shape":[2,3]})", "expected an integer in [-2, 1]"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0.5,"shape":[2,3]})", "expected an integer"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":18446744073709551615,"shape":[2,3]})", "expected an integer"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_group","axis":1,"group_size":2,"shape":[2,3]})", "positive divisor"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_group","axis":1,"shape":[2,3]})", "positive divisor"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","group_size":4,"shape":[2,3]})", "expected 0"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[2,-3]})", "non-negative integer sizes"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[2,0]})", "at least one element"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[4294967296,4294967296]})", "overflows"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[1,1,1,1,1,1,1,1,1]})", "rank <= 8"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":"2"})", "expected an array"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[[2]]})", "nested"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[2],"extra":{"a":1}})", "inside the record"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[2],"colour":"red"})", "unexpected key"},
      {R"({"dtype":"int8","dtype":"int8","scheme":"affine","granularity":"per_tensor","shape":[2]})", "duplicate key"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor","restricted_range":1,"shape":[2]})", "true or false"},
      {R"({"dtype":"fp8_e4m3","granularity":"per_group","axis":0,"shape":[2]})", "for FP8"},
      {R"({"dtype":"fp16","scheme":"affine","shape":[2]})", "unexpected key"},
      {R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"shape":[]})", "rank >= 1"},
  };
  for (const auto& [text, expected] : bad) {
    CAPTURE(text);
    REQUIRE_THROWS_WITH(parse_quantization_record("w", text), Catch::Contains(expected) && Catch::Contains("shrink.quant.w"));
  }
  const std::string deep = std::string(10000, '[') + std::string(10000, ']');
  REQUIRE_THROWS_AS(parse_quantization_record("w", deep), Error);
}

TEST_CASE("hostile parameter tensors and metadata are rejected", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const ValidParts v;
  const std::string path = dir.file("hostile.safetensors");

  // The valid file reads.
  write_raw_tensors(path, {v.scale(), v.data(), v.zero_point()}, v.metadata(v.record()));
  {
    const SafetensorsFile file(path);
    require_same(read_quantized(file, "w"), v.q);
  }

  auto with_scales = [&](std::vector<float> scales) {
    RawTensor s = v.scale();
    s.bytes = bytes_of(scales);
    return s;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* what;
    std::vector<RawTensor> tensors;
    std::map<std::string, std::string> metadata;
    const char* expected;
  };
  RawTensor wrong_scale_shape = v.scale();
  wrong_scale_shape.shape = {2, 2};
  RawTensor wrong_scale_dtype{"w_scale", ScalarType::f16, {4}, std::vector<std::uint8_t>(8, 0x3C)};
  RawTensor zp_out_of_range = v.zero_point();
  zp_out_of_range.bytes[2] = static_cast<std::uint8_t>(-128);  // outside [-127, 127] of the restricted range
  RawTensor packed_wrong{"w", ScalarType::u8, {4, 6}, std::vector<std::uint8_t>(24, 0)};
  RawTensor zp_u8 = v.zero_point();
  zp_u8.dtype = ScalarType::u8;
  const std::string restricted =
      R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"restricted_range":true,"shape":[4,6]})";
  const std::vector<Case> cases = {
      {"missing scale", {v.data(), v.zero_point()}, v.metadata(v.record()), "no scale tensor \"w_scale\""},
      {"wrong scale shape", {wrong_scale_shape, v.data(), v.zero_point()}, v.metadata(v.record()), "expected F32 [4]"},
      {"wrong scale dtype", {wrong_scale_dtype, v.data(), v.zero_point()}, v.metadata(v.record()), "expected F32 [4]"},
      {"negative scale", {with_scales({1, -1, 1, 1}), v.data(), v.zero_point()}, v.metadata(v.record()), "w_scale\"[1] = -1"},
      {"zero scale", {with_scales({1, 1, 0, 1}), v.data(), v.zero_point()}, v.metadata(v.record()), "finite scale > 0"},
      {"NaN scale", {with_scales({nan, 1, 1, 1}), v.data(), v.zero_point()}, v.metadata(v.record()), "finite scale > 0"},
      {"inf scale", {with_scales({1, 1, 1, inf}), v.data(), v.zero_point()}, v.metadata(v.record()), "finite scale > 0"},
      {"missing zero point", {v.scale(), v.data()}, v.metadata(v.record()), "no zero point tensor"},
      {"zero point of wrong dtype", {v.scale(), v.data(), zp_u8}, v.metadata(v.record()), "expected I8 [4]"},
      {"zero point out of range", {v.scale(), v.data(), zp_out_of_range}, v.metadata(restricted), "expected a zero point in [-127, 127]"},
      {"zero point for a symmetric scheme", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int8","scheme":"symmetric","granularity":"per_channel","axis":0,"shape":[4,6]})"),
       "symmetric scheme"},
      {"bad JSON", {v.scale(), v.data(), v.zero_point()}, v.metadata("{\"dtype\":"), "not valid JSON"},
      {"unknown dtype", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int2","scheme":"affine","granularity":"per_tensor","shape":[4,6]})"), "expected int8, uint8"},
      {"wrong packed size", {v.scale(), packed_wrong, v.zero_point()},
       v.metadata(R"({"dtype":"uint4","scheme":"affine","granularity":"per_channel","axis":0,"shape":[4,6]})"),
       "data tensor \"w\" has dtype U8 and shape [4,6]: expected U8 [4,3]"},
      {"data of the wrong dtype", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"uint8","scheme":"affine","granularity":"per_channel","axis":0,"shape":[4,6]})"),
       "expected U8 [4,6]"},
      {"logical shape that does not match", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"shape":[6,4]})"),
       "expected I8 [6,4]"},
      {"axis out of range", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":5,"shape":[4,6]})"),
       "expected an integer in [-2, 1]"},
      {"bits wider than the dtype", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"bits":9,"shape":[4,6]})"),
       "\"bits\" = 9: expected an integer in [0, 8]"},
      {"a one-bit range", {v.scale(), v.data(), v.zero_point()},
       v.metadata(R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"bits":1,"shape":[4,6]})"),
       "\"bits\" = 1: expected 0"},
      {"missing format version", {v.scale(), v.data(), v.zero_point()}, {{"shrink.quant.w", v.record()}},
       "no \"shrink.format_version\""},
      {"future format version", {v.scale(), v.data(), v.zero_point()},
       {{"shrink.format_version", "2"}, {"shrink.quant.w", v.record()}}, "expected \"1\""},
      {"record naming no tensor", {v.scale(), v.data(), v.zero_point()},
       {{"shrink.format_version", "1"}, {"shrink.quant.w", v.record()}, {"shrink.quant.ghost", v.record()}},
       "names no tensor"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    write_raw_tensors(path, c.tensors, c.metadata);
    require_rejected(dir, path, c.expected);
  }
}

TEST_CASE("a tensor claimed by two records is rejected", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(4, 1);
  const TensorView<const float> view(x.data(), Shape{4});
  // "w_scale" is w's scale and also claims to be a cast tensor of its own.
  const std::string path = dir.file("q.safetensors");
  write_raw_tensors(
      path,
      {{"w_scale", ScalarType::f32, {}, bytes_of(std::vector<float>{0.5f})}, {"w", ScalarType::i8, {4}, {1, 2, 3, 4}}},
      {{"shrink.format_version", "1"},
       {"shrink.quant.w", R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","shape":[4]})"},
       {"shrink.quant.w_scale", R"({"dtype":"fp16","shape":[]})"}});
  const SafetensorsFile file(path);
  REQUIRE_THROWS_WITH(quantization_records(file), Catch::Contains("expected F16 []"));
  (void)view;
}

TEST_CASE("encoding checks its input", "[io][quantized_safetensors]") {
  const std::vector<float> x = shrink::test::random_values(8, 2);
  QuantizedTensor q = quantize(TensorView<const float>(x.data(), Shape{2, 4}),
                               QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
  QuantizedTensor short_data = q;
  short_data.data.resize(3);
  REQUIRE_THROWS_WITH(encode_quantized("w", short_data), Catch::Contains("q.data.size()"));
  QuantizedTensor bad_scale = q;
  bad_scale.qparams.scale[0] = -1.0f;
  REQUIRE_THROWS_WITH(encode_quantized("w", bad_scale), Catch::Contains("finite scale > 0"));
  REQUIRE_THROWS_AS(cast_record("w", ScalarType::i8, Shape{2}), Error);
  REQUIRE_THROWS_AS(integer_record("w", QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 3), Shape{2, 4}),
                    Error);
}

namespace {

// AWQ's stored form of a weight [6, 16]: the integers of W·diag(s), 4-bit affine groups of 8, and s far from 1.
struct AwqParts {
  static constexpr std::int64_t out = 6, in = 16;
  std::vector<float> w = shrink::test::random_values(out * in, 31, 0.05f);
  std::vector<float> s;
  QuantizedTensor q;
  AwqParts() {
    AwqOptions o;
    o.group_size = 8;
    for (float v : shrink::test::random_values(in, 32)) s.push_back(std::exp(0.8f * v));
    q = awq_quantize(TensorView<const float>(w.data(), Shape{out, in}), s, o);
  }
  EncodedQuantization encoded(const std::string& name = "l.weight", const std::string& scale = "l.input_scale") const {
    EncodedQuantization e = encode_quantized(name, q, "awq", "F32");
    add_input_scale(e, scale, s);
    return e;
  }
  // The convention's value, written out here: dequantize(q)[r, c] / s[c], one float division.
  std::vector<float> expected() const {
    std::vector<float> v = dequantize(q);
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t c = 0; c < in; ++c) v[static_cast<std::size_t>(r * in + c)] /= s[static_cast<std::size_t>(c)];
    return v;
  }
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEST_CASE("an input scale (AWQ): read_float gives dequantize(q)[r, c] / s[c], the weight itself",
          "[io][quantized_safetensors][awq]") {
  shrink::test::TempDir dir;
  const AwqParts p;
  const std::string path = dir.file("awq.safetensors");
  write_encoded(path, {p.encoded()}, {{"l.bias", ScalarType::f32, {6}, bytes_of(std::vector<float>(6, 0.5f))}});
  const SafetensorsFile file(path);

  const auto record = quantization_record(file, "l.weight");
  REQUIRE(record->input_scale == "l.input_scale");
  REQUIRE(parse_quantization_record("l.weight", to_metadata_value(*record)).input_scale == "l.input_scale");
  const std::vector<TensorDeclaration> stored = stored_tensors(*record);
  REQUIRE(stored.size() == 4);  // data, scale, zero point, input scale
  REQUIRE(stored.back().name == "l.input_scale");
  REQUIRE(stored.back().dtype == ScalarType::f32);
  REQUIRE(stored.back().shape == std::vector<std::int64_t>{16});
  REQUIRE(parameter_tensor_names(quantization_records(file)) ==
          std::set<std::string>{"l.weight_scale", "l.weight_zero_point", "l.input_scale"});

  require_same(read_quantized(file, "l.weight"), p.q);  // the stored integers: those of W·diag(s)
  REQUIRE(read_input_scale(file, "l.weight") == p.s);
  REQUIRE(read_input_scale(file, "l.bias").empty());
  const std::vector<float> w = read_float(file, "l.weight");
  REQUIRE(same_bits(w, p.expected()));

  // What it reads is W, near the original; the stored values alone are W·diag(s), far from it.
  const Shape shape{AwqParts::out, AwqParts::in};
  const std::vector<float> scaled = dequantize(p.q);
  const double real =
      shrink::metrics::sqnr_db(TensorView<const float>(p.w.data(), shape), TensorView<const float>(w.data(), shape));
  const double stored_only = shrink::metrics::sqnr_db(TensorView<const float>(p.w.data(), shape),
                                                      TensorView<const float>(scaled.data(), shape));
  CAPTURE(real, stored_only);
  REQUIRE(real > 12.0);
  REQUIRE(stored_only < 5.0);

  // dequantize_file writes W and drops the input scale with the other parameters.
  const std::string out = dir.file("d.safetensors");
  for (const DequantizeTo to : {DequantizeTo::source, DequantizeTo::f32}) {
    const DequantizeFileSummary summary = dequantize_file(path, out, {}, to);
    REQUIRE(summary.dequantized == std::vector<std::string>{"l.weight"});
    REQUIRE(summary.copied == std::vector<std::string>{"l.bias"});
    const SafetensorsFile restored(out);
    REQUIRE(restored.tensors().size() == 2);
    REQUIRE_FALSE(restored.contains("l.input_scale"));
    REQUIRE(restored.info("l.weight").dtype == ScalarType::f32);
    REQUIRE(same_bits(read_float(restored, "l.weight"), p.expected()));
  }
}

TEST_CASE("parse_quantization_record reads the input_scale field and rejects bad ones",
          "[io][quantized_safetensors][awq]") {
  const std::string head = R"({"dtype":"int8","scheme":"affine","granularity":"per_tensor",)";
  REQUIRE(parse_quantization_record("w", head + R"("input_scale":"l.input_scale","shape":[2,3]})").input_scale ==
          "l.input_scale");
  REQUIRE_FALSE(parse_quantization_record("w", head + R"("shape":[2,3]})").has_input_scale());  // older files
  const std::pair<std::string, const char*> bad[] = {
      {head + R"("input_scale":5,"shape":[2,3]})", "\"input_scale\" is a non-negative integer: expected a string"},
      {head + R"("input_scale":"s","shape":[6]})", "expected a Linear weight [out, in] (rank 2)"},
      {head + R"("input_scale":"s","shape":[2,3,4]})", "expected a Linear weight [out, in] (rank 2)"},
      {head + R"("input_scale":"","shape":[2,3]})", "an empty name: expected the name of an F32 tensor [3]"},
      {head + R"("input_scale":"w","shape":[2,3]})", "names the record's own tensor \"w\""},
      {head + R"("input_scale":"w_zero_point","shape":[2,3]})", "names the record's own tensor \"w_zero_point\""},
      {R"({"dtype":"fp8_e4m3","granularity":"per_tensor","input_scale":"s","shape":[2,3]})",
       "unexpected key \"input_scale\""},
      {R"({"dtype":"bf16","input_scale":"s","shape":[2,3]})", "unexpected key \"input_scale\""},
  };
  for (const auto& [text, expected] : bad) {
    CAPTURE(text);
    REQUIRE_THROWS_WITH(parse_quantization_record("w", text),
                        Catch::Contains(expected) && Catch::Contains("shrink.quant.w"));
  }
}

TEST_CASE("divide_by_input_scale is one float division per value and checks its sizes",
          "[io][quantized_safetensors][awq]") {
  std::vector<float> v = {1.0f, 1.0f, 1.0f, 3.0f, 0.1f, -7.0f};
  divide_by_input_scale(v, {3.0f, 0.1f, 7.0f});
  REQUIRE(v == std::vector<float>{1.0f / 3.0f, 1.0f / 0.1f, 1.0f / 7.0f, 3.0f / 3.0f, 0.1f / 0.1f, -7.0f / 7.0f});
  REQUIRE(v[4] == 1.0f);  // a division, not a product with the reciprocal (0.1f * (1 / 0.1f) rounds elsewhere)
  std::vector<float> odd(5, 1.0f);
  REQUIRE_THROWS_WITH(divide_by_input_scale(odd, {1.0f, 2.0f}), Catch::Contains("values.size() = 5"));
  REQUIRE_THROWS_WITH(divide_by_input_scale(odd, {}), Catch::Contains("input_scale.size() = 0"));
  REQUIRE(odd == std::vector<float>(5, 1.0f));
}

TEST_CASE("hostile input scales are rejected, each with one Error, and dequantize_file writes nothing",
          "[io][quantized_safetensors][awq]") {
  shrink::test::TempDir dir;
  const ValidParts v;  // "w" int8 [4, 6], per channel along axis 0
  const std::string path = dir.file("hostile.safetensors");
  const std::string with_field =
      R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"input_scale":"s","shape":[4,6]})";
  auto scale = [](std::vector<float> values) {
    const std::int64_t n = static_cast<std::int64_t>(values.size());
    return RawTensor{"s", ScalarType::f32, {n}, bytes_of(values)};
  };
  const RawTensor good = scale({0.5f, 1.0f, 2.0f, 4.0f, 1.5f, 0.25f});

  // The valid file reads, with the weight divided by s.
  write_raw_tensors(path, {v.scale(), v.data(), v.zero_point(), good}, v.metadata(with_field));
  {
    const SafetensorsFile file(path);
    std::vector<float> expected = dequantize(v.q);
    divide_by_input_scale(expected, {0.5f, 1.0f, 2.0f, 4.0f, 1.5f, 0.25f});
    REQUIRE(read_float(file, "w") == expected);
  }

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  RawTensor f16{"s", ScalarType::f16, {6}, std::vector<std::uint8_t>(12, 0x3C)};
  RawTensor rank2 = good;
  rank2.shape = {1, 6};
  // Another record "u" (int8 [6], per tensor) whose data or scale w's field names.
  const RawTensor u{"u", ScalarType::i8, {6}, {1, 2, 3, 4, 5, 6}};
  const RawTensor u_scale{"u_scale", ScalarType::f32, {6}, bytes_of(std::vector<float>(6, 0.5f))};
  const std::string u_record =
      R"({"dtype":"int8","scheme":"symmetric","granularity":"per_channel","axis":0,"shape":[6]})";
  auto two_records = [&](const std::string& name) {
    std::map<std::string, std::string> m =
        v.metadata(R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"input_scale":")" + name +
                   R"(","shape":[4,6]})");
    m["shrink.quant.u"] = u_record;
    return m;
  };
  struct Case {
    const char* what;
    std::vector<RawTensor> tensors;
    std::map<std::string, std::string> metadata;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"missing tensor",
       {v.scale(), v.data(), v.zero_point()},
       v.metadata(with_field),
       "no input scale tensor \"s\": expected one of dtype F32 and shape [6]"},
      {"F16",
       {v.scale(), v.data(), v.zero_point(), f16},
       v.metadata(with_field),
       "input scale tensor \"s\" has dtype F16 and shape [6]: expected F32 [6]"},
      {"too short",
       {v.scale(), v.data(), v.zero_point(), scale({1, 1, 1, 1})},
       v.metadata(with_field),
       "has dtype F32 and shape [4]: expected F32 [6]"},
      {"rank 2", {v.scale(), v.data(), v.zero_point(), rank2}, v.metadata(with_field), "shape [1,6]: expected F32 [6]"},
      {"zero",
       {v.scale(), v.data(), v.zero_point(), scale({1, 1, 0, 1, 1, 1})},
       v.metadata(with_field),
       "tensor \"s\"[2] = 0: expected a finite input scale > 0 (of tensor \"w\")"},
      {"negative",
       {v.scale(), v.data(), v.zero_point(), scale({1, 1, 1, -2, 1, 1})},
       v.metadata(with_field),
       "\"s\"[3] = -2: expected a finite input scale > 0"},
      {"NaN",
       {v.scale(), v.data(), v.zero_point(), scale({nan, 1, 1, 1, 1, 1})},
       v.metadata(with_field),
       "\"s\"[0] = nan: expected a finite input scale > 0"},
      {"infinity",
       {v.scale(), v.data(), v.zero_point(), scale({1, 1, 1, 1, 1, inf})},
       v.metadata(with_field),
       "\"s\"[5] = inf: expected a finite input scale > 0"},
      {"not a string",
       {v.scale(), v.data(), v.zero_point(), good},
       v.metadata(
           R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"input_scale":["s"],"shape":[4,6]})"),
       "\"input_scale\" is a JSON array: expected a string"},
      {"on a 1-D record",
       {{"w_scale", ScalarType::f32, {}, bytes_of(std::vector<float>{0.5f})},
        {"w", ScalarType::i8, {4}, {1, 2, 3, 4}},
        scale({1, 1, 1, 1})},
       v.metadata(R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","input_scale":"s","shape":[4]})"),
       "an input scale on a record of shape [4]: expected a Linear weight [out, in] (rank 2)"},
      {"itself",
       {v.scale(), v.data(), v.zero_point()},
       v.metadata(
           R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"input_scale":"w","shape":[4,6]})"),
       "\"input_scale\" = \"w\": names the record's own tensor \"w\""},
      {"its own scale",
       {v.scale(), v.data(), v.zero_point()},
       v.metadata(
           R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"input_scale":"w_scale","shape":[4,6]})"),
       "names the record's own tensor \"w_scale\""},
      {"another record's data",
       {v.scale(), v.data(), v.zero_point(), u, u_scale},
       two_records("u"),
       "input scale tensor \"u\" is the data of tensor \"u\"'s record: expected a tensor of its own"},
      {"another record's scale",
       {v.scale(), v.data(), v.zero_point(), u, u_scale},
       two_records("u_scale"),
       "tensor \"u_scale\" belongs to both \"u\" and \"w\": expected each tensor in one record"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    write_raw_tensors(path, c.tensors, c.metadata);
    require_rejected(dir, path, c.expected);
  }
}

TEST_CASE("two records naming one input scale are rejected", "[io][quantized_safetensors][awq]") {
  shrink::test::TempDir dir;
  const AwqParts p;
  EncodedQuantization a = p.encoded("a.weight", "shared.input_scale");
  EncodedQuantization b = p.encoded("b.weight", "shared.input_scale");
  b.tensors.pop_back();  // the tensor is written once, by a
  const std::string path = dir.file("shared.safetensors");
  write_encoded(path, {a, b});
  const SafetensorsFile file(path);
  REQUIRE(read_float(file, "b.weight") == p.expected());  // one record alone reads
  REQUIRE_THROWS_WITH(quantization_records(file),
                      Catch::Contains("tensor \"shared.input_scale\" belongs to both \"a.weight\" and \"b.weight\""));
  const std::string out = dir.file("out.safetensors");
  REQUIRE_THROWS_AS(dequantize_file(path, out), Error);
  REQUIRE_FALSE(std::filesystem::exists(out));
}

TEST_CASE("add_input_scale and set_input_scale check their input and change nothing on failure",
          "[io][quantized_safetensors][awq]") {
  const AwqParts p;
  const EncodedQuantization plain = encode_quantized("l.weight", p.q);
  auto rejected = [&](const std::string& tensor, const std::vector<float>& s, const std::string& expected) {
    EncodedQuantization e = plain;
    REQUIRE_THROWS_WITH(add_input_scale(e, tensor, s), Catch::Contains(expected));
    REQUIRE(e.tensors.size() == plain.tensors.size());
    REQUIRE_FALSE(e.record.has_input_scale());
  };
  rejected("l.input_scale", std::vector<float>(15, 1.0f),
           "input_scale.size() = 15: expected the record's input width 16");
  std::vector<float> bad = p.s;
  bad[9] = 0.0f;
  rejected("l.input_scale", bad, "input_scale[9] = 0: expected a finite input scale > 0");
  bad[9] = std::numeric_limits<float>::quiet_NaN();
  rejected("l.input_scale", bad, "input_scale[9] = nan");
  rejected("l.weight_scale", p.s, "names the record's own tensor \"l.weight_scale\"");
  rejected("", p.s, "an empty name");
  EncodedQuantization twice = p.encoded();
  REQUIRE_THROWS_WITH(add_input_scale(twice, "other", p.s), Catch::Contains("expected none yet"));

  const std::vector<float> x = shrink::test::random_values(16, 4);
  EncodedQuantization fp8 =
      encode_fp8("f", quantize_fp8(TensorView<const float>(x.data(), Shape{2, 8}), shrink::Fp8Format::e4m3));
  REQUIRE_THROWS_WITH(add_input_scale(fp8, "f.input_scale", std::vector<float>(8, 1.0f)),
                      Catch::Contains("an input scale on a fp8_e4m3 record: expected one on an integer record only"));
  EncodedQuantization flat =
      encode_quantized("v", quantize(TensorView<const float>(x.data(), Shape{16}),
                                     QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric)));
  REQUIRE_THROWS_WITH(add_input_scale(flat, "v.input_scale", std::vector<float>(16, 1.0f)),
                      Catch::Contains("expected a Linear weight [out, in] (rank 2)"));
  QuantizationRecord record =
      integer_record("m", QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), Shape{2, 8});
  REQUIRE_THROWS_WITH(set_input_scale(record, "m"), Catch::Contains("shrink::io::set_input_scale: tensor = \"m\""));
  REQUIRE_FALSE(record.has_input_scale());
  set_input_scale(record, "m.input_scale");
  REQUIRE(stored_tensors(record).back().shape == std::vector<std::int64_t>{8});
}

TEST_CASE("fractional zero points (HQQ) round-trip as an F32 _zero_point under \"zero_point\":\"float\"",
          "[io][quantized_safetensors][fractional]") {
  shrink::test::TempDir dir;
  const std::vector<float> w = shrink::test::random_values(6 * 32, 41, 0.05f);
  for (const int bits : {3, 4, 6}) {
    CAPTURE(bits);
    HqqOptions o;
    o.bits = bits;
    o.group_size = 16;
    const QuantizedTensor q = hqq_quantize(TensorView<const float>(w.data(), Shape{6, 32}), o);
    REQUIRE(q.qparams.fractional());
    const EncodedQuantization e = encode_quantized("l.weight", q, "hqq", "F32");
    REQUIRE(e.tensors.size() == 3);
    REQUIRE(e.tensors[2].declaration.name == "l.weight_zero_point");
    REQUIRE(e.tensors[2].declaration.dtype == ScalarType::f32);
    REQUIRE(e.tensors[2].declaration.shape == std::vector<std::int64_t>{6, 2});
    REQUIRE(to_metadata_value(e.record).find(R"("zero_point":"float")") != std::string::npos);
    const std::string path = dir.file("hqq.safetensors");
    write_encoded(path, {e});
    const SafetensorsFile file(path);
    require_same(read_quantized(file, "l.weight"), q);
    const std::vector<float> expected = dequantize(q);  // (float(q) − z) · s
    const std::vector<float> read = read_float(file, "l.weight");
    REQUIRE(std::memcmp(read.data(), expected.data(), read.size() * sizeof(float)) == 0);
    const std::string out = dir.file("restored.safetensors");
    dequantize_file(path, out, {}, DequantizeTo::f32);
    const std::vector<float> restored = read_float(SafetensorsFile(out), "l.weight");
    REQUIRE(std::memcmp(restored.data(), expected.data(), restored.size() * sizeof(float)) == 0);
    // compressed-tensors stores integer zero points only.
    const compressed_tensors::Expressible ct = compressed_tensors::weight_args(e.record);
    REQUIRE_FALSE(ct.args);
    REQUIRE(ct.why_not.find("fractional zero points") != std::string::npos);
  }
}

TEST_CASE("hostile fractional zero points are rejected, each with one Error, and dequantize_file writes nothing",
          "[io][quantized_safetensors][fractional]") {
  shrink::test::TempDir dir;
  const ValidParts v;  // "w" int8 [4, 6], per channel along axis 0
  const std::string path = dir.file("hostile.safetensors");
  const std::string with_field =
      R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"zero_point":"float","shape":[4,6]})";
  auto zero = [](std::vector<float> values) {
    const std::int64_t n = static_cast<std::int64_t>(values.size());
    return RawTensor{"w_zero_point", ScalarType::f32, {n}, bytes_of(values)};
  };
  const std::vector<float> z = {1.5f, -0.25f, 300.0f, 0.75f};  // finite is all that is asked
  // The valid file reads, with (float(q) − z) · s.
  write_raw_tensors(path, {v.scale(), v.data(), zero(z)}, v.metadata(with_field));
  {
    const SafetensorsFile file(path);
    const QuantizedTensor q = read_quantized(file, "w");
    REQUIRE(q.scheme.float_zero_point);
    REQUIRE(q.qparams.float_zero_point == z);
    REQUIRE(q.qparams.zero_point.empty());
    const std::vector<float> got = read_float(file, "w");
    for (std::size_t k = 0; k < got.size(); ++k) {
      const float centred = static_cast<float>(q.value(static_cast<std::int64_t>(k))) - z[k / 6];
      const float expected = centred * v.q.qparams.scale[k / 6];
      REQUIRE(std::memcmp(&got[k], &expected, sizeof(float)) == 0);
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* what;
    std::vector<RawTensor> tensors;
    std::string record;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"NaN",
       {v.scale(), v.data(), zero({1, nan, 1, 1})},
       with_field,
       "tensor \"w_zero_point\"[1] = nan: expected a finite zero point (fractional: \"zero_point\":\"float\")"},
      {"infinity", {v.scale(), v.data(), zero({1, 1, 1, -inf})}, with_field, "\"w_zero_point\"[3] = -inf"},
      {"I8 under the field",
       {v.scale(), v.data(), v.zero_point()},
       with_field,
       "zero point tensor \"w_zero_point\" has dtype I8 and shape [4]: expected F32 [4]"},
      {"F32 without the field",
       {v.scale(), v.data(), zero(z)},
       v.record(),
       "zero point tensor \"w_zero_point\" has dtype F32 and shape [4]: expected I8 [4]"},
      {"too short",
       {v.scale(), v.data(), zero({1, 2, 3})},
       with_field,
       "has dtype F32 and shape [3]: expected F32 [4]"},
      {"missing",
       {v.scale(), v.data()},
       with_field,
       "no zero point tensor \"w_zero_point\": expected one of dtype F32"},
      {"another value",
       {v.scale(), v.data(), zero(z)},
       R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"zero_point":"int","shape":[4,6]})",
       "\"zero_point\" = \"int\": expected \"float\" (fractional zero points) or no \"zero_point\""},
      {"not a string",
       {v.scale(), v.data(), zero(z)},
       R"({"dtype":"int8","scheme":"affine","granularity":"per_channel","axis":0,"zero_point":true,"shape":[4,6]})",
       "\"zero_point\" is a JSON boolean: expected a string"},
      {"symmetric",
       {v.scale(), v.data()},
       R"({"dtype":"int8","scheme":"symmetric","granularity":"per_channel","axis":0,"zero_point":"float","shape":[4,6]})",
       "\"zero_point\" = \"float\" with \"scheme\":\"symmetric\": expected fractional zero points with an affine "
       "scheme only"},
      {"on an FP8 record",
       {{"w", ScalarType::f8_e4m3, {4, 6}, std::vector<std::uint8_t>(24, 0x38)}, v.scale()},
       R"({"dtype":"fp8_e4m3","granularity":"per_channel","axis":0,"zero_point":"float","shape":[4,6]})",
       "unexpected key \"zero_point\" for dtype \"fp8_e4m3\""},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    write_raw_tensors(path, c.tensors, v.metadata(c.record));
    require_rejected(dir, path, c.expected);
  }
}
