// Tests for shrink/io/quantized_safetensors.hpp: round trips of every integer dtype, symmetry and granularity,
// FP8 and FP16/BF16 casts, listing and whole-file dequantization, and hostile metadata or parameter tensors
// (each an Error naming what was expected, never a crash, and no output file left by dequantize_file).
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
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
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

void write_raw(const std::string& path, const std::vector<RawTensor>& tensors,
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
  write_raw(path, {v.scale(), v.data(), v.zero_point()}, v.metadata(v.record()));
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
    write_raw(path, c.tensors, c.metadata);
    require_rejected(dir, path, c.expected);
  }
}

TEST_CASE("a tensor claimed by two records is rejected", "[io][quantized_safetensors]") {
  shrink::test::TempDir dir;
  const std::vector<float> x = shrink::test::random_values(4, 1);
  const TensorView<const float> view(x.data(), Shape{4});
  // "w_scale" is w's scale and also claims to be a cast tensor of its own.
  const std::string path = dir.file("q.safetensors");
  write_raw(path, {{"w_scale", ScalarType::f32, {}, bytes_of(std::vector<float>{0.5f})},
                   {"w", ScalarType::i8, {4}, {1, 2, 3, 4}}},
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
