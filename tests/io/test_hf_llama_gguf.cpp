// io/hf_llama_gguf.hpp: a tiny Hugging Face Llama checkpoint written here (config.json, tokenizer files, one file
// or two shards) becomes a GGUF in llama's layout: the metadata from config.json, the vocabulary, merges, token types
// and special ids, every tensor under llama.cpp's name with q and k rows in its rotary order; and what the layout
// cannot express is refused by name before OUT exists.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/temp_dir.hpp"
#include "shrink/core/half.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/hf_llama_gguf.hpp"
#include "shrink/io/safetensors.hpp"

namespace {

using shrink::ScalarType;

void write_hf_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The config of the tiny model: width 8, 2 heads of 4 (1 KV head), ffn 16, 1 block, vocabulary 8, tied head.
std::string hf_config(const std::string& extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8, "hidden_size": 8,
             "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
             "max_position_embeddings": 64, "rms_norm_eps": 1e-05, "rope_theta": 100000.0,
             "tie_word_embeddings": true, "hidden_act": "silu", "rope_scaling": null)" +
         extra + "}";
}

const char* kHfTokenizer = R"({"added_tokens": [{"id": 4, "content": "<|im_start|>", "special": true},
                                                {"id": 5, "content": "<|eos|>", "special": true},
                                                {"id": 6, "content": "hello", "special": false}],
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, "merges": ["a b", ["ab", "c"]]}})";

const char* kHfTokenizerConfig = R"({"bos_token": "<|im_start|>", "eos_token": {"content": "<|eos|>"},
  "add_bos_token": false, "chat_template": "{{ messages }}"})";

// Tensor `name` of `shape`: element k is base + k (distinct in every tensor), stored as `dtype`.
struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  ScalarType dtype = ScalarType::f32;
  float base = 0.0f;
};

std::vector<HfTensor> hf_tensors() {
  return {{"model.embed_tokens.weight", {8, 8}, ScalarType::f16, 0.0f},
          {"model.layers.0.input_layernorm.weight", {8}, ScalarType::bf16, 100.0f},
          {"model.layers.0.self_attn.q_proj.weight", {8, 8}, ScalarType::f32, 200.0f},
          {"model.layers.0.self_attn.k_proj.weight", {4, 8}, ScalarType::f32, 300.0f},
          {"model.layers.0.self_attn.v_proj.weight", {4, 8}, ScalarType::f32, 400.0f},
          {"model.layers.0.self_attn.o_proj.weight", {8, 8}, ScalarType::f32, 500.0f},
          {"model.layers.0.self_attn.rotary_emb.inv_freq", {2}, ScalarType::f32, 0.5f},
          {"model.layers.0.post_attention_layernorm.weight", {8}, ScalarType::f32, 600.0f},
          {"model.layers.0.mlp.gate_proj.weight", {16, 8}, ScalarType::f32, 700.0f},
          {"model.layers.0.mlp.up_proj.weight", {16, 8}, ScalarType::f32, 900.0f},
          {"model.layers.0.mlp.down_proj.weight", {8, 16}, ScalarType::f32, 1100.0f},
          {"model.norm.weight", {8}, ScalarType::f32, 1300.0f}};
}

std::int64_t hf_numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// The stored bytes of t's values (values a half and a bfloat16 hold exactly: integers below 2^8 plus .0 or .5).
std::vector<std::uint8_t> hf_bytes(const HfTensor& t) {
  const std::int64_t n = hf_numel(t.shape);
  std::vector<std::uint8_t> out;
  for (std::int64_t k = 0; k < n; ++k) {
    const float v = t.dtype == ScalarType::f32 ? t.base + static_cast<float>(k) : static_cast<float>(k) + 0.5f;
    if (t.dtype == ScalarType::f32 || t.dtype == ScalarType::i32) {  // i32: 4 bytes of anything, to be refused
      std::uint8_t b[4];
      std::memcpy(b, &v, 4);
      out.insert(out.end(), b, b + 4);
    } else {
      const std::uint16_t bits =
          t.dtype == ScalarType::f16 ? shrink::float_to_half_bits(v) : shrink::float_to_bfloat16_bits(v);
      out.push_back(static_cast<std::uint8_t>(bits));
      out.push_back(static_cast<std::uint8_t>(bits >> 8));
    }
  }
  return out;
}

void write_hf_shard(const std::string& path, const std::vector<HfTensor>& tensors) {
  std::vector<shrink::io::TensorDeclaration> declared;
  for (const HfTensor& t : tensors) declared.push_back({t.name, t.dtype, t.shape});
  shrink::io::SafetensorsWriter w(path, declared);
  for (const HfTensor& t : tensors) {
    const std::vector<std::uint8_t> bytes = hf_bytes(t);
    w.write(t.name, bytes.data(), bytes.size());
  }
  w.finish();
}

// The checkpoint in `dir`: one model.safetensors, or two shards with their index.
void write_hf_checkpoint(const std::string& dir, const std::vector<HfTensor>& tensors, bool sharded,
                         const std::string& config = hf_config()) {
  std::filesystem::create_directories(dir);
  write_hf_text(dir + "/config.json", config);
  write_hf_text(dir + "/tokenizer.json", kHfTokenizer);
  write_hf_text(dir + "/tokenizer_config.json", kHfTokenizerConfig);
  if (!sharded) {
    write_hf_shard(dir + "/model.safetensors", tensors);
    return;
  }
  const std::size_t half = tensors.size() / 2;
  const std::vector<HfTensor> first(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(half));
  const std::vector<HfTensor> second(tensors.begin() + static_cast<std::ptrdiff_t>(half), tensors.end());
  write_hf_shard(dir + "/model-00001-of-00002.safetensors", first);
  write_hf_shard(dir + "/model-00002-of-00002.safetensors", second);
  std::string map;
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    map += std::string(map.empty() ? "" : ", ") + "\"" + tensors[k].name + "\": \"model-0000" + (k < half ? "1" : "2") +
           "-of-00002.safetensors\"";
    total += hf_bytes(tensors[k]).size();
  }
  write_hf_text(dir + "/model.safetensors.index.json",
                "{\"metadata\": {\"total_size\": " + std::to_string(total) + "}, \"weight_map\": {" + map + "}}");
}

std::vector<float> hf_expected(const HfTensor& t) {
  std::vector<float> v(static_cast<std::size_t>(hf_numel(t.shape)));
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = t.dtype == ScalarType::f32 ? t.base + static_cast<float>(k) : static_cast<float>(k) + 0.5f;
  return v;
}

}  // namespace

TEST_CASE("llama_rope_row: within each head, HF row i -> 2i and d/2 + i -> 2i + 1", "[io][hf]") {
  const std::int64_t expected[] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (std::int64_t r = 0; r < 8; ++r) CHECK(shrink::io::llama_rope_row(r, 4) == expected[r]);
  CHECK(shrink::io::llama_rope_row(64 + 3, 64) == 64 + 6);
  CHECK(shrink::io::llama_rope_row(64 + 32 + 3, 64) == 64 + 7);
}

TEST_CASE("write_hf_llama_gguf: a Llama checkpoint as llama.cpp's GGUF, one file or shards", "[io][hf]") {
  shrink::test::TempDir tmp;
  for (bool sharded : {false, true}) {
    INFO((sharded ? "sharded" : "one file"));
    const std::string dir = tmp.file(sharded ? "sharded" : "single");
    write_hf_checkpoint(dir, hf_tensors(), sharded);
    const std::string out = tmp.file(sharded ? "sharded.gguf" : "single.gguf");
    shrink::io::write_hf_llama_gguf(dir, out);
    const shrink::io::GgufFile g = shrink::io::GgufFile::open(out);
    CHECK(g.get_string("general.architecture") == "llama");
    CHECK(g.get_string("general.name") == (sharded ? "sharded" : "single"));
    CHECK(g.get_uint("llama.block_count") == 1);
    CHECK(g.get_uint("llama.embedding_length") == 8);
    CHECK(g.get_uint("llama.feed_forward_length") == 16);
    CHECK(g.get_uint("llama.attention.head_count") == 2);
    CHECK(g.get_uint("llama.attention.head_count_kv") == 1);
    CHECK(g.get_uint("llama.context_length") == 64);
    CHECK(g.get_uint("llama.rope.dimension_count") == 4);
    CHECK(g.get_uint("llama.vocab_size") == 8);
    CHECK(g.get_float("llama.rope.freq_base") == 100000.0);
    CHECK(g.get_float("llama.attention.layer_norm_rms_epsilon") == static_cast<double>(1e-5f));
    CHECK(g.get_string("tokenizer.ggml.model") == "gpt2");
    CHECK(g.get_strings("tokenizer.ggml.tokens") ==
          std::vector<std::string>{"a", "b", "ab", "c", "<|im_start|>", "<|eos|>", "hello", "[PAD7]"});
    CHECK(g.get_ints("tokenizer.ggml.token_type") == std::vector<std::int64_t>{1, 1, 1, 1, 3, 3, 4, 5});
    CHECK(g.get_strings("tokenizer.ggml.merges") == std::vector<std::string>{"a b", "ab c"});
    CHECK(g.get_uint("tokenizer.ggml.bos_token_id") == 4);
    CHECK(g.get_uint("tokenizer.ggml.eos_token_id") == 5);
    CHECK_FALSE(g.has("tokenizer.ggml.unknown_token_id"));
    CHECK(g.get_bool("tokenizer.ggml.add_bos_token") == false);
    CHECK(g.get_string("tokenizer.chat_template") == "{{ messages }}");
    CHECK_FALSE(g.has("tokenizer.ggml.pre"));  // kHfTokenizer has no pre_tokenizer

    // Names, types (norms widened to F32), values; q and k rows in llama.cpp's rotary order; no output (tied).
    CHECK(g.tensors().size() == 11);
    CHECK(g.find_tensor("output.weight") == nullptr);
    CHECK(g.find_tensor("blk.0.rotary_emb.inv_freq") == nullptr);
    const std::vector<HfTensor> source = hf_tensors();
    auto source_of = [&](const std::string& name) {
      for (const HfTensor& t : source)
        if (t.name == name) return t;
      FAIL("no source tensor " << name);
      return HfTensor{};
    };
    const std::pair<const char*, const char*> names[] = {
        {"model.embed_tokens.weight", "token_embd.weight"},
        {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
        {"model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight"},
        {"model.layers.0.self_attn.o_proj.weight", "blk.0.attn_output.weight"},
        {"model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight"},
        {"model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"},
        {"model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight"},
        {"model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
        {"model.norm.weight", "output_norm.weight"}};
    for (const auto& [hf, gguf] : names) {
      INFO(gguf);
      const HfTensor t = source_of(hf);
      const shrink::io::GgufTensorInfo& info = g.tensor(gguf);
      CHECK(info.shape == t.shape);
      CHECK(g.dequantize(info) == hf_expected(t));
    }
    CHECK(g.tensor("token_embd.weight").type == static_cast<std::uint32_t>(shrink::io::GgufType::f16));
    CHECK(g.tensor("blk.0.attn_norm.weight").type == static_cast<std::uint32_t>(shrink::io::GgufType::f32));
    for (const auto& [hf, gguf] :
         {std::pair<const char*, const char*>{"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
          {"model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight"}}) {
      INFO(gguf);
      const HfTensor t = source_of(hf);
      const std::vector<float> in = hf_expected(t), got = g.dequantize(gguf);
      const std::int64_t rows = t.shape[0], cols = t.shape[1];
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
          CHECK(got[static_cast<std::size_t>(shrink::io::llama_rope_row(r, 4) * cols + c)] ==
                in[static_cast<std::size_t>(r * cols + c)]);
    }
  }
}

TEST_CASE("write_hf_llama_gguf refuses what llama's layout cannot express, by name, before OUT exists",
          "[io][hf][errors]") {
  shrink::test::TempDir tmp;
  const std::string out = tmp.file("out.gguf");
  auto refused = [&](const std::string& name, const std::vector<HfTensor>& tensors, const std::string& config,
                     const std::string& expected) {
    const std::string dir = tmp.file(name);
    write_hf_checkpoint(dir, tensors, false, config);
    CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out), Catch::Contains(expected));
    CHECK_FALSE(std::filesystem::exists(out));
  };
  refused("scaling", hf_tensors(), hf_config(R"(, "rope_scaling": {"type": "linear", "factor": 2.0})"),
          "\"rope_scaling\"");
  refused("bias", hf_tensors(), hf_config(R"(, "attention_bias": true)"), "attention biases");
  refused("act", hf_tensors(), hf_config(R"(, "hidden_act": "gelu")"), "\"hidden_act\"");
  refused("arch", hf_tensors(), R"({"architectures": ["BertModel"], "vocab_size": 8})", "\"architectures\"");
  refused("heads", hf_tensors(), hf_config(R"(, "num_key_value_heads": 3)"), "num_key_value_heads");
  refused("missing", hf_tensors(),
          R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1,
              "num_attention_heads": 2})",
          "no \"intermediate_size\"");
  std::vector<HfTensor> extra = hf_tensors();
  extra.push_back({"model.layers.0.self_attn.q_proj.bias", {8}, ScalarType::f32, 0.0f});
  refused("extra", extra, hf_config(), "\"model.layers.0.self_attn.q_proj.bias\" has no place in llama's layout");
  std::vector<HfTensor> wrong = hf_tensors();
  wrong[5].shape = {8, 4};  // o_proj
  refused("shape", wrong, hf_config(), "\"model.layers.0.self_attn.o_proj.weight\" has shape [8, 4]: expected [8, 8]");
  std::vector<HfTensor> lacking = hf_tensors();
  lacking.pop_back();  // model.norm
  refused("lacking", lacking, hf_config(), "no tensor \"model.norm.weight\"");
  std::vector<HfTensor> untied = hf_tensors();
  refused("untied", untied, hf_config(R"(, "tie_word_embeddings": false)"), "no tensor \"lm_head.weight\"");
  std::vector<HfTensor> ints = hf_tensors();
  ints[2].dtype = ScalarType::i32;
  refused("ints", ints, hf_config(), "is I32: expected F32, F16 or BF16");

  const std::string dir = tmp.file("spm");
  write_hf_checkpoint(dir, hf_tensors(), false);
  write_hf_text(dir + "/tokenizer.json",
                R"({"model": {"type": "BPE", "byte_fallback": true, "vocab": {}, "merges": []}})");
  CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out), Catch::Contains("byte_fallback"));
  write_hf_text(dir + "/tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 9}, "merges": []}})");
  CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out),
                    Catch::Contains("token \"a\" has id 9: expected an id in [0, 8)"));
  write_hf_text(dir + "/tokenizer.json", kHfTokenizer);
  write_hf_text(dir + "/tokenizer_config.json", R"({"bos_token": "<s>"})");
  CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out),
                    Catch::Contains("\"bos_token\" \"<s>\": expected a token of tokenizer.json"));
  write_hf_text(dir + "/tokenizer_config.json", "{\"bos_token\": ");
  CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out), Catch::Contains("not valid JSON"));
  std::filesystem::remove(dir + "/tokenizer_config.json");
  CHECK_THROWS_WITH(shrink::io::write_hf_llama_gguf(dir, out), Catch::Contains("tokenizer_config.json"));
  CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("hf_pre_tokenizer_name: the pre-tokenizers llama.cpp names, nothing for the others", "[io][hf]") {
  using shrink::io::hf_pre_tokenizer_name;
  const auto parse = [](const char* text) { return nlohmann::json::parse(text); };
  CHECK(hf_pre_tokenizer_name(parse(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})")) ==
        "gpt-2");
  CHECK(hf_pre_tokenizer_name(parse(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Digits", "individual_digits": true},
          {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]})")) == "smollm");
  CHECK(hf_pre_tokenizer_name(parse(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
           "behavior": "Isolated", "invert": false},
          {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]})")) ==
        "llama-bpe");
  // A prefix space, digits grouped, another expression, another type: not what llama.cpp's names split.
  CHECK_FALSE(hf_pre_tokenizer_name(parse(R"({"type": "ByteLevel", "add_prefix_space": true})")).has_value());
  CHECK_FALSE(hf_pre_tokenizer_name(parse(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Digits", "individual_digits": false}, {"type": "ByteLevel", "add_prefix_space": false}]})"))
                  .has_value());
  CHECK_FALSE(hf_pre_tokenizer_name(parse(R"({"type": "Sequence", "pretokenizers": [
          {"type": "Split", "pattern": {"Regex": "\\s+"}}, {"type": "ByteLevel", "use_regex": false,
           "add_prefix_space": false}]})"))
                  .has_value());
  CHECK_FALSE(hf_pre_tokenizer_name(parse(R"({"type": "Metaspace", "replacement": "_"})")).has_value());

  // Written into the file when named.
  shrink::test::TempDir tmp;
  const std::string dir = tmp.file("smol");
  write_hf_checkpoint(dir, hf_tensors(), false);
  nlohmann::json tokenizer = nlohmann::json::parse(kHfTokenizer);
  tokenizer["pre_tokenizer"] = parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true}, {"type": "ByteLevel", "add_prefix_space": false}]})");
  write_hf_text(dir + "/tokenizer.json", tokenizer.dump());
  const shrink::io::HfGgufWritten written = shrink::io::write_hf_llama_gguf(dir, tmp.file("smol.gguf"));
  CHECK(written.pre == "smollm");
  CHECK(written.tensors.size() == 11);
  CHECK(shrink::io::GgufFile::open(tmp.file("smol.gguf")).get_string("tokenizer.ggml.pre") == "smollm");
}
