// io/gguf_requantize.hpp: llama-quantize's choice of type per tensor (linears, the tied or separate output head,
// rows that are not whole blocks, vectors), the values as gguf_quantize stores the dequantized input, the metadata
// copied with the file type set, and refusals before OUT exists.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_test_support.hpp"
#include "io/temp_dir.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_requantize.hpp"
#include "shrink/io/gguf_writer.hpp"

using shrink::io::GgufFile;
using shrink::io::GgufType;
using shrink::io::GgufWriter;

namespace {

using shrink::test::ggml_type_id;
using shrink::test::gguf_stored;

// A one-block llama file: a tied embedding (no output.weight) unless `separate_head`, linears stored F32, Q8_0 and
// F16, one with rows of 48 (not whole blocks), one with rows of 96 (whole blocks of 32, not super-blocks of 256),
// norms.
std::string write_requantize_model(const shrink::test::TempDir& dir, bool separate_head) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  auto values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& e : v) e = normal(rng);
    return v;
  };
  GgufWriter w;
  w.set_string("general.architecture", "llama")
      .set_uint32("general.file_type", 0)
      .set_uint32("llama.block_count", 1)
      .set_strings("tokenizer.ggml.tokens", {"a", "b"});
  w.add_tensor("token_embd.weight", {16, 256}, ggml_type_id(GgufType::f32), gguf_stored(0, values(16 * 256)));
  w.add_tensor("blk.0.attn_norm.weight", {256}, ggml_type_id(GgufType::f32), gguf_stored(0, values(256)));
  w.add_tensor("blk.0.attn_q.weight", {64, 256}, ggml_type_id(GgufType::f32), gguf_stored(0, values(64 * 256)));
  w.add_tensor("blk.0.attn_k.weight", {32, 256}, ggml_type_id(GgufType::q8_0),
               gguf_stored(ggml_type_id(GgufType::q8_0), values(32 * 256)));
  w.add_tensor("blk.0.ffn_up.weight", {48, 256}, ggml_type_id(GgufType::f16),
               gguf_stored(ggml_type_id(GgufType::f16), values(48 * 256)));
  w.add_tensor("blk.0.ffn_down.weight", {256, 48}, ggml_type_id(GgufType::f32), gguf_stored(0, values(256 * 48)));
  w.add_tensor("blk.0.attn_v.weight", {16, 96}, ggml_type_id(GgufType::f32), gguf_stored(0, values(16 * 96)));
  if (separate_head)
    w.add_tensor("output.weight", {16, 256}, ggml_type_id(GgufType::f32), gguf_stored(0, values(16 * 256)));
  const std::string path = dir.file(separate_head ? "separate.gguf" : "tied.gguf");
  w.write(path);
  return path;
}

}  // namespace

TEST_CASE("requantize_gguf: llama-quantize's type per tensor, values as gguf_quantize stores them",
          "[io][gguf][requantize]") {
  shrink::test::TempDir dir;
  for (bool separate_head : {false, true}) {
    const GgufFile in = GgufFile::open(write_requantize_model(dir, separate_head));
    for (GgufType target : {GgufType::q4_0, GgufType::q4_1, GgufType::q5_0, GgufType::q5_1, GgufType::q8_0,
                            GgufType::q4_k, GgufType::q5_k, GgufType::q6_k, GgufType::f16}) {
      INFO((separate_head ? "separate head, " : "tied head, ") << shrink::io::gguf_type_name(ggml_type_id(target)));
      const std::string out_path = dir.file("out.gguf");
      std::vector<std::string> seen;
      const auto plans = shrink::io::requantize_gguf(
          in, out_path, ggml_type_id(target), [&](const shrink::io::GgufTensorPlan& p) { seen.push_back(p.name); });
      CHECK(seen.size() == in.tensors().size());
      const GgufFile out = GgufFile::open(out_path);
      CHECK(out.get_uint("general.file_type") == shrink::io::gguf_file_type_of(ggml_type_id(target)));
      CHECK(out.get_uint("general.quantization_version") == 2);
      CHECK(out.get_string("general.architecture") == "llama");
      CHECK(out.get_strings("tokenizer.ggml.tokens") == std::vector<std::string>{"a", "b"});
      const bool quantized = target != GgufType::f16;
      const std::string head = separate_head ? "output.weight" : "token_embd.weight";
      REQUIRE(out.tensors().size() == in.tensors().size());
      for (std::size_t i = 0; i < plans.size(); ++i) {
        const auto& t = in.tensors()[i];
        const auto& o = out.tensors()[i];
        INFO(t.name);
        CHECK(o.name == t.name);
        CHECK(o.shape == t.shape);
        // The head: Q6_K where its rows are whole super-blocks (here 256), Q8_0 for a Q8_0 target; a K-quant's rows
        // not whole super-blocks: llama.cpp's fallback; rows not whole blocks of 32: F16.
        const std::int64_t row = t.shape.back();
        std::uint32_t expected = ggml_type_id(target);
        if (t.shape.size() == 1)
          expected = t.type;
        else if (t.name == head && quantized)
          expected = ggml_type_id(target == GgufType::q8_0 ? GgufType::q8_0 : GgufType::q6_k);
        if (t.shape.size() >= 2 && quantized && row % 256 != 0) {
          if (expected == ggml_type_id(GgufType::q4_k)) expected = ggml_type_id(GgufType::q5_0);
          if (expected == ggml_type_id(GgufType::q5_k)) expected = ggml_type_id(GgufType::q5_1);
          if (expected == ggml_type_id(GgufType::q6_k)) expected = ggml_type_id(GgufType::q8_0);
        }
        if (t.shape.size() >= 2 && quantized && row % 32 != 0) expected = ggml_type_id(GgufType::f16);
        CHECK(o.type == expected);
        CHECK(plans[i].to_type == expected);
        CHECK(plans[i].copied == (expected == t.type));
        CHECK(plans[i].note.empty() == (t.shape.size() == 1 || expected == ggml_type_id(target)));
        if (target == GgufType::q4_k && t.name == "blk.0.attn_v.weight")
          CHECK(plans[i].note == "rows of 96 are not whole super-blocks of 256: Q5_0, as llama.cpp falls back to");
        if (target == GgufType::q4_k && t.name == head)
          CHECK(plans[i].note == "output head: Q6_K, as llama.cpp writes it");
        const std::vector<std::uint8_t> got(out.tensor_data(o), out.tensor_data(o) + o.bytes);
        if (plans[i].copied)
          CHECK(got == std::vector<std::uint8_t>(in.tensor_data(t), in.tensor_data(t) + t.bytes));
        else
          CHECK(got == gguf_stored(expected, in.dequantize(t)));
      }
    }
  }
}

TEST_CASE("requantize_gguf refuses a target it cannot write and a tensor it cannot read, before OUT exists",
          "[io][gguf][requantize][errors]") {
  shrink::test::TempDir dir;
  const GgufFile in = GgufFile::open(write_requantize_model(dir, false));
  const std::string out_path = dir.file("out.gguf");
  CHECK_THROWS_WITH(shrink::io::requantize_gguf(in, out_path, 10),
                    Catch::Contains("type") && Catch::Contains("Q2_K (10)"));
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("blk.0.attn_q.weight", {2, 256}, 10, std::vector<std::uint8_t>(2 * 84));  // Q2_K
  w.write(dir.file("k_quant.gguf"));
  const GgufFile k_quant = GgufFile::open(dir.file("k_quant.gguf"));
  CHECK_THROWS_WITH(shrink::io::requantize_gguf(k_quant, out_path, ggml_type_id(GgufType::q4_0)),
                    Catch::Contains("\"blk.0.attn_q.weight\" is Q2_K, which shrink cannot read"));
  CHECK_FALSE(std::ifstream(out_path).good());
}
