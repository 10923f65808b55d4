// Helper of tests/io/gguf_interop.py: `make DIR` writes DIR/shrink.gguf with shrink's GgufWriter (metadata of each
// type the writer sets, and tensors of every type gguf_quantize writes, from seeded normal values of several
// magnitudes), DIR/source.gguf (those values, F32) and DIR/dequantized.gguf (shrink's dequantization of each tensor of
// shrink.gguf, F32). Exits 1 with shrink's message on any error.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_writer.hpp"

namespace {

struct Spec {
  const char* name;
  std::vector<std::int64_t> shape;
  std::uint32_t type;
};

std::vector<std::uint8_t> as_f32_bytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> out(v.size() * 4);
  shrink::io::gguf_quantize(0, v.data(), static_cast<std::int64_t>(v.size()), out.data());
  return out;
}

void make(const std::string& dir) {
  using shrink::io::GgufType;
  auto id = [](GgufType t) { return static_cast<std::uint32_t>(t); };
  const std::vector<Spec> specs = {
      {"blk.0.attn_q.weight", {64, 576}, id(GgufType::q4_0)},   {"blk.0.attn_k.weight", {32, 576}, id(GgufType::q4_1)},
      {"blk.0.attn_v.weight", {32, 576}, id(GgufType::q5_0)},   {"blk.0.ffn_up.weight", {48, 256}, id(GgufType::q5_1)},
      {"blk.0.ffn_down.weight", {40, 192}, id(GgufType::q8_0)}, {"output_norm.weight", {576}, id(GgufType::f32)},
      {"token_embd.weight", {16, 64}, id(GgufType::f16)},       {"blk.0.attn_norm.weight", {96}, id(GgufType::bf16)},
      {"blk.1.attn_q.weight", {24, 512}, id(GgufType::q4_k)},   {"blk.1.attn_k.weight", {16, 768}, id(GgufType::q5_k)},
      {"blk.1.ffn_down.weight", {20, 256}, id(GgufType::q6_k)}};
  std::mt19937 rng(20261129);
  std::normal_distribution<float> normal;
  shrink::io::GgufWriter out, source;
  out.set_string("general.architecture", "llama")
      .set_string("general.name", "shrink gguf interop")
      .set_uint32("llama.block_count", 1)
      .set_int32("test.int32", -123456)
      .set_uint64("test.uint64", 1ull << 50)
      .set_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .set_bool("test.bool", false)
      .set_strings("tokenizer.ggml.tokens", {"<|endoftext|>", "a", "\xc3\xa9"})
      .set_int32s("tokenizer.ggml.token_type", {3, 1, 1})
      .set_float32s("tokenizer.ggml.scores", {0.0f, -1.5f, 2.25f});
  source.set_string("general.architecture", "llama");
  for (const Spec& s : specs) {
    std::int64_t n = 1;
    for (std::int64_t d : s.shape) n *= d;
    std::vector<float> x(static_cast<std::size_t>(n));
    // Rows of different magnitudes and offsets, so blocks get different scales and minimums.
    const std::int64_t row = s.shape.back();
    for (std::int64_t i = 0; i < n; ++i)
      x[static_cast<std::size_t>(i)] =
          normal(rng) * std::ldexp(1.0f, static_cast<int>(i / row % 12) - 6) + (i / row % 3 == 0 ? 0.25f : 0.0f);
    const auto layout = shrink::io::gguf_type_layout(s.type);
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n / layout.block_elements * layout.block_bytes));
    shrink::io::gguf_quantize(s.type, x.data(), n, bytes.data());
    out.add_tensor(s.name, s.shape, s.type, bytes);
    source.add_tensor(s.name, s.shape, 0, as_f32_bytes(x));
  }
  out.write(dir + "/shrink.gguf");
  source.write(dir + "/source.gguf");
  const shrink::io::GgufFile written = shrink::io::GgufFile::open(dir + "/shrink.gguf");
  shrink::io::GgufWriter dequantized;
  dequantized.set_string("general.architecture", "llama");
  for (const auto& t : written.tensors())
    dequantized.add_tensor(t.name, t.shape, 0, as_f32_bytes(written.dequantize(t)));
  dequantized.write(dir + "/dequantized.gguf");
  std::printf("gguf_interop: wrote %zu tensors to %s/shrink.gguf\n", specs.size(), dir.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "make") {
      make(argv[2]);
      return 0;
    }
    std::fprintf(stderr, "usage: gguf_interop make DIR\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf_interop: %s\n", e.what());
    return 1;
  }
}
