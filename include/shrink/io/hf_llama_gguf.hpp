// A Hugging Face Llama-family checkpoint (config.json, tokenizer.json and tokenizer_config.json beside one
// model.safetensors or shards listed by model.safetensors.index.json) written as a llama.cpp GGUF in llama's layout,
// the tensors in their stored float types (F32, F16, BF16; norms F32), ready for io/gguf_requantize.hpp:
//   metadata    general.architecture "llama", general.name; llama.{context_length, embedding_length, block_count,
//               feed_forward_length, attention.head_count, attention.head_count_kv, rope.freq_base,
//               attention.layer_norm_rms_epsilon, vocab_size, rope.dimension_count} from config.json
//   tokenizer   a byte-level BPE tokenizer.json as llama.cpp's "gpt2" vocabulary: tokenizer.ggml.{tokens,
//               token_type, merges} (ids without a token: "[PAD<id>]", unused), bos/eos/unknown/padding ids,
//               add_bos_token / add_eos_token and tokenizer.chat_template from tokenizer_config.json;
//               tokenizer.ggml.pre, llama.cpp's name for the pre-tokenizer's expressions, where tokenizer.json's
//               pre_tokenizer is one llama.cpp names (hf_pre_tokenizer_name: GPT-2's, SmolLM's and StarCoder's
//               digits then GPT-2's, Llama 3's); otherwise it is not written and llama.cpp splits text with its
//               default expressions (token ids given directly are unaffected)
//   tensors     model.embed_tokens -> token_embd, model.layers.N.{input_layernorm -> attn_norm,
//               self_attn.{q,k,v,o}_proj -> attn_{q,k,v,output}, post_attention_layernorm -> ffn_norm,
//               mlp.{gate,up,down}_proj -> ffn_{gate,up,down}}, model.norm -> output_norm, lm_head -> output
//               (absent when tied); rotary_emb.inv_freq buffers are skipped
// q and k are stored with their rows reordered for llama.cpp's rotary layout: Hugging Face rotates the pairs
// (i, i + d/2) of each head of d rows, llama.cpp the pairs (2i, 2i + 1), so within each head
//   GGUF row 2i = HF row i,   GGUF row 2i + 1 = HF row d/2 + i      (i < d/2; llama_rope_row below)
// Everything is read and checked before OUT is created (config keys and their ranges, every tensor's name, type and
// shape against the config, the tokenizer's ids): what llama's layout cannot express (biases, rope_scaling, an
// activation other than silu, a head size llama.cpp would not derive, a SentencePiece-style byte-fallback
// vocabulary) is refused by name. Files from users are untrusted: sizes capped, JSON depth limited.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/checkpoint.hpp"
#include "shrink/io/gguf_dequantize.hpp"
#include "shrink/io/gguf_types.hpp"
#include "shrink/io/gguf_writer.hpp"
#include "shrink/io/mapped_file.hpp"

namespace shrink::io {

inline constexpr std::uint64_t kHfJsonMaxBytes = 200'000'000;  // tokenizer.json of a 256k vocabulary is ~20 MB

// config.json's keys for llama's layout.
struct HfLlamaConfig {
  std::string architecture;  // architectures[0]
  std::string name;          // the checkpoint directory's name
  std::int64_t vocab = 0, width = 0, ffn = 0, blocks = 0, heads = 0, kv_heads = 0, context = 0;
  double rms_eps = 1e-6, rope_base = 10000.0;
  bool tied = false;  // tie_word_embeddings
  std::int64_t head_dim() const { return width / heads; }
};

// tokenizer.json and tokenizer_config.json as llama.cpp's "gpt2" vocabulary.
struct HfTokenizer {
  std::vector<std::string> tokens;  // by id, [vocab]
  std::vector<std::int32_t> types;  // llama.cpp's token types: 1 normal, 3 control, 4 user-defined, 5 unused
  std::vector<std::string> merges;  // "a b"
  std::optional<std::uint32_t> bos, eos, unknown, padding;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;
  std::string pre;  // tokenizer.ggml.pre; empty where the pre-tokenizer is not one llama.cpp names
};

// llama.cpp's name (tokenizer.ggml.pre) for a tokenizer.json pre_tokenizer whose expressions it implements, or
// nothing:
//   ByteLevel (GPT-2's expression, no prefix space)                        -> "gpt-2"
//   Sequence [Digits (each digit alone), ByteLevel (GPT-2's expression)]   -> "smollm" (StarCoder's family)
//   Sequence [Split (Llama 3's expression), ByteLevel (no expression)]     -> "llama-bpe"
inline std::optional<std::string> hf_pre_tokenizer_name(const nlohmann::json& pre) {
  auto is = [](const nlohmann::json& j, const char* type) {
    return j.is_object() && j.contains("type") && j["type"] == type;
  };
  auto flag = [](const nlohmann::json& j, const char* key, bool fallback) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
  };
  auto byte_level = [&](const nlohmann::json& j, bool regex) {
    return is(j, "ByteLevel") && !flag(j, "add_prefix_space", true) && flag(j, "use_regex", true) == regex;
  };
  if (byte_level(pre, true)) return "gpt-2";
  if (!is(pre, "Sequence") || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array() ||
      pre["pretokenizers"].size() != 2)
    return std::nullopt;
  const nlohmann::json& first = pre["pretokenizers"][0];
  const nlohmann::json& second = pre["pretokenizers"][1];
  if (is(first, "Digits") && flag(first, "individual_digits", false) && byte_level(second, true)) return "smollm";
  const char* llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (is(first, "Split") && first.contains("pattern") && first["pattern"].is_object() &&
      first["pattern"].value("Regex", "") == llama3 && byte_level(second, false))
    return "llama-bpe";
  return std::nullopt;
}

// llama.cpp's row of HF row `row` of a q or k projection with heads of `head_dim` rows (see the file comment).
inline std::int64_t llama_rope_row(std::int64_t row, std::int64_t head_dim) {
  const std::int64_t head = row / head_dim, j = row % head_dim, half = head_dim / 2;
  return head * head_dim + (j < half ? 2 * j : 2 * (j - half) + 1);
}

namespace hf_detail {

inline nlohmann::json read_json(const std::string& path, const char* fn) {
  const MappedFile file(path);
  if (file.size() > kHfJsonMaxBytes)
    fail(fn, path + ": " + std::to_string(file.size()) + " bytes: expected at most " + std::to_string(kHfJsonMaxBytes));
  constexpr int kMaxDepth = 32;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) -> bool {
    if ((event == nlohmann::json::parse_event_t::object_start || event == nlohmann::json::parse_event_t::array_start) &&
        depth >= kMaxDepth)
      fail(fn, path + ": JSON nested deeper than " + std::to_string(kMaxDepth) + " levels");
    return true;
  };
  const char* text = reinterpret_cast<const char*>(file.bytes().data);
  try {
    return nlohmann::json::parse(text, text + file.size(), callback);
  } catch (const nlohmann::json::exception& e) {
    std::string message = e.what();
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    fail(fn, path + ": not valid JSON: " + message);
  }
}

// root[key] as an integer in [lo, hi], or `fallback` when absent and a fallback is given.
inline std::int64_t integer(const nlohmann::json& root, const char* key, std::int64_t lo, std::int64_t hi,
                            const std::string& path, const char* fn, std::optional<std::int64_t> fallback = {}) {
  if (!root.contains(key) || root[key].is_null()) {
    if (fallback) return *fallback;
    fail(fn, path + ": no \"" + std::string(key) + "\": expected an integer in [" + std::to_string(lo) + ", " +
                 std::to_string(hi) + "]");
  }
  const nlohmann::json& v = root[key];
  if (!v.is_number_integer() || v.get<std::int64_t>() < lo || v.get<std::int64_t>() > hi)
    fail(fn, path + ": \"" + std::string(key) + "\" = " + v.dump() + ": expected an integer in [" + std::to_string(lo) +
                 ", " + std::to_string(hi) + "]");
  return v.get<std::int64_t>();
}

inline double positive_number(const nlohmann::json& root, const char* key, double fallback, const std::string& path,
                              const char* fn) {
  if (!root.contains(key) || root[key].is_null()) return fallback;
  const nlohmann::json& v = root[key];
  if (!v.is_number() || !(v.get<double>() > 0.0) || !(v.get<double>() < 1e30))
    fail(fn, path + ": \"" + std::string(key) + "\" = " + v.dump() + ": expected a positive number");
  return v.get<double>();
}

// The name of the directory holding `path` ("model" when it has none).
inline std::string parent_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "model";
  const std::string parent = path.substr(0, slash);
  const std::size_t before = parent.find_last_of('/');
  return before == std::string::npos ? parent : parent.substr(before + 1);
}

// A special token's text in tokenizer_config.json: a string or {"content": string}; nothing when absent or null.
inline std::optional<std::string> token_text(const nlohmann::json& config, const char* key, const std::string& path,
                                             const char* fn) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail(fn, path + ": \"" + std::string(key) + "\" = " + v.dump().substr(0, 80) +
               ": expected a token's text, or {\"content\": text}");
}

}  // namespace hf_detail

// Reads and checks config.json (its path) for llama's layout.
inline HfLlamaConfig read_hf_llama_config(const std::string& path) {
  const char* fn = "shrink::io::read_hf_llama_config";
  const nlohmann::json root = hf_detail::read_json(path, fn);
  if (!root.is_object()) fail(fn, path + ": expected a JSON object");
  HfLlamaConfig c;
  const std::set<std::string> llama_family = {"LlamaForCausalLM", "MistralForCausalLM"};
  if (!root.contains("architectures") || !root["architectures"].is_array() || root["architectures"].size() != 1 ||
      !root["architectures"][0].is_string() || !llama_family.count(root["architectures"][0].get<std::string>()))
    fail(fn, path +
                 ": \"architectures\" = " + (root.contains("architectures") ? root["architectures"].dump() : "none") +
                 ": expected [\"LlamaForCausalLM\"] or [\"MistralForCausalLM\"] (llama's layout)");
  c.architecture = root["architectures"][0].get<std::string>();
  using hf_detail::integer;
  constexpr std::int64_t kBig = std::int64_t{1} << 31;
  c.vocab = integer(root, "vocab_size", 1, kBig, path, fn);
  c.width = integer(root, "hidden_size", 1, kBig, path, fn);
  c.ffn = integer(root, "intermediate_size", 1, kBig, path, fn);
  c.blocks = integer(root, "num_hidden_layers", 1, 100000, path, fn);
  c.heads = integer(root, "num_attention_heads", 1, 100000, path, fn);
  c.kv_heads = integer(root, "num_key_value_heads", 1, c.heads, path, fn, c.heads);
  c.context = integer(root, "max_position_embeddings", 1, kBig, path, fn, 2048);
  c.rms_eps = hf_detail::positive_number(root, "rms_norm_eps", 1e-6, path, fn);
  c.rope_base = hf_detail::positive_number(root, "rope_theta", 10000.0, path, fn);
  if (root.contains("tie_word_embeddings") && !root["tie_word_embeddings"].is_null()) {
    if (!root["tie_word_embeddings"].is_boolean())
      fail(fn, path + ": \"tie_word_embeddings\" = " + root["tie_word_embeddings"].dump() + ": expected true or false");
    c.tied = root["tie_word_embeddings"].get<bool>();
  }
  if (c.width % c.heads != 0 || c.head_dim() % 2 != 0)
    fail(fn, path + ": hidden_size " + std::to_string(c.width) + " over " + std::to_string(c.heads) +
                 " heads: expected an even head size that divides it");
  if (c.heads % c.kv_heads != 0)
    fail(fn, path + ": num_key_value_heads " + std::to_string(c.kv_heads) + ": expected a divisor of the " +
                 std::to_string(c.heads) + " attention heads");
  if (root.contains("head_dim") && !root["head_dim"].is_null() &&
      integer(root, "head_dim", 1, kBig, path, fn) != c.head_dim())
    fail(fn, path + ": \"head_dim\" = " + root["head_dim"].dump() + ": expected hidden_size / num_attention_heads (" +
                 std::to_string(c.head_dim()) + "), the head size llama's layout derives");
  auto refuse_true = [&](const char* key, const char* why) {
    if (root.contains(key) && root[key].is_boolean() && root[key].get<bool>())
      fail(fn, path + ": \"" + std::string(key) + "\" = true: " + why);
  };
  refuse_true("attention_bias", "llama's layout has no attention biases");
  refuse_true("mlp_bias", "llama's layout has no MLP biases");
  if (root.contains("rope_scaling") && !root["rope_scaling"].is_null())
    fail(fn, path + ": \"rope_scaling\" = " + root["rope_scaling"].dump().substr(0, 120) +
                 ": expected null (scaled rotary positions are not written yet)");
  if (root.contains("hidden_act") && root["hidden_act"] != "silu")
    fail(fn, path + ": \"hidden_act\" = " + root["hidden_act"].dump() + ": expected \"silu\" (llama's SwiGLU)");
  c.name = hf_detail::parent_name(path);
  return c;
}

// Reads and checks tokenizer.json and tokenizer_config.json (their paths) for a vocabulary of `vocab` ids.
inline HfTokenizer read_hf_tokenizer(const std::string& tokenizer_path, const std::string& config_path,
                                     std::int64_t vocab) {
  const char* fn = "shrink::io::read_hf_tokenizer";
  const nlohmann::json root = hf_detail::read_json(tokenizer_path, fn);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object())
    fail(fn, tokenizer_path + ": expected a tokenizers file with a \"model\" object");
  const nlohmann::json& model = root["model"];
  if (!model.contains("type") || model["type"] != "BPE")
    fail(fn, tokenizer_path + ": model type " + (model.contains("type") ? model["type"].dump() : "none") +
                 ": expected \"BPE\" (llama.cpp's gpt2 vocabulary)");
  if (model.contains("byte_fallback") && model["byte_fallback"].is_boolean() && model["byte_fallback"].get<bool>())
    fail(fn, tokenizer_path +
                 ": \"byte_fallback\" = true: a SentencePiece-style vocabulary (llama.cpp's \"llama\" "
                 "model, from tokenizer.model) is not written yet; expected a byte-level BPE");
  if (!model.contains("vocab") || !model["vocab"].is_object())
    fail(fn, tokenizer_path + ": no \"model.vocab\" object: expected {token: id, ...}");
  HfTokenizer t;
  t.tokens.assign(static_cast<std::size_t>(vocab), std::string());
  t.types.assign(static_cast<std::size_t>(vocab), 0);
  std::map<std::string, std::uint32_t> id_of;
  auto place = [&](const std::string& token, const nlohmann::json& id, std::int32_t type, const std::string& where) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() >= vocab)
      fail(fn, tokenizer_path + ": " + where + " has id " + id.dump() + ": expected an id in [0, " +
                   std::to_string(vocab) + ") (config.json's vocab_size)");
    const auto k = static_cast<std::size_t>(id.get<std::int64_t>());
    if (t.types[k] != 0 && t.tokens[k] != token)
      fail(fn, tokenizer_path + ": id " + std::to_string(k) + " is both " + detail::quoted(t.tokens[k]) + " and " +
                   detail::quoted(token) + ": expected one token per id");
    t.tokens[k] = token;
    t.types[k] = type;
    id_of[token] = static_cast<std::uint32_t>(k);
  };
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it)
    place(it.key(), it.value(), 1, "token " + detail::quoted(it.key()));
  if (root.contains("added_tokens") && root["added_tokens"].is_array())
    for (const nlohmann::json& a : root["added_tokens"]) {
      if (!a.is_object() || !a.contains("content") || !a["content"].is_string() || !a.contains("id"))
        fail(fn, tokenizer_path + ": an added token " + a.dump().substr(0, 80) + ": expected {\"id\", \"content\"}");
      const bool special = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
      place(a["content"].get<std::string>(), a["id"], special ? 3 : 4,
            "added token " + detail::quoted(a["content"].get<std::string>()));
    }
  for (std::size_t k = 0; k < t.tokens.size(); ++k)
    if (t.types[k] == 0) {
      t.tokens[k] = "[PAD" + std::to_string(k) + "]";  // an id the vocabulary leaves free (convert_hf_to_gguf's name)
      t.types[k] = 5;
    }
  if (!model.contains("merges") || !model["merges"].is_array())
    fail(fn, tokenizer_path + ": no \"model.merges\" array: expected the BPE merges");
  for (const nlohmann::json& m : model["merges"]) {
    if (m.is_string()) {
      t.merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      t.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      fail(fn, tokenizer_path + ": a merge " + m.dump().substr(0, 80) + ": expected \"a b\" or [\"a\", \"b\"]");
    }
  }
  if (root.contains("pre_tokenizer")) t.pre = hf_pre_tokenizer_name(root["pre_tokenizer"]).value_or("");
  const nlohmann::json config = hf_detail::read_json(config_path, fn);
  if (!config.is_object()) fail(fn, config_path + ": expected a JSON object");
  auto special_id = [&](const char* key) -> std::optional<std::uint32_t> {
    const std::optional<std::string> text = hf_detail::token_text(config, key, config_path, fn);
    if (!text) return std::nullopt;
    const auto found = id_of.find(*text);
    if (found == id_of.end())
      fail(fn, config_path + ": \"" + std::string(key) + "\" " + detail::quoted(*text) +
                   ": expected a token of tokenizer.json");
    return found->second;
  };
  t.bos = special_id("bos_token");
  t.eos = special_id("eos_token");
  t.unknown = special_id("unk_token");
  t.padding = special_id("pad_token");
  for (auto [key, flag] :
       {std::pair<const char*, std::optional<bool>*>{"add_bos_token", &t.add_bos}, {"add_eos_token", &t.add_eos}})
    if (config.contains(key) && !config[key].is_null()) {
      if (!config[key].is_boolean())
        fail(fn, config_path + ": \"" + std::string(key) + "\" = " + config[key].dump() + ": expected true or false");
      *flag = config[key].get<bool>();
    }
  if (config.contains("chat_template")) {
    const nlohmann::json& c = config["chat_template"];
    if (c.is_string()) {
      t.chat_template = c.get<std::string>();
    } else if (c.is_array()) {  // named templates: the "default" one
      for (const nlohmann::json& named : c)
        if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
            named["template"].is_string())
          t.chat_template = named["template"].get<std::string>();
    } else if (!c.is_null()) {
      fail(fn, config_path + ": \"chat_template\" is " + detail::json_type(c) + ": expected a string");
    }
  }
  return t;
}

// One tensor of the GGUF: its name, shape, type and where its rows come from.
struct HfGgufTensor {
  std::string hf_name, name;
  std::vector<std::int64_t> shape;
  std::uint32_t type = 0;          // F32, F16 or BF16
  std::int64_t rope_head_dim = 0;  // > 0: rows reordered by llama_rope_row (q, k)
};

// The GGUF tensors of a checkpoint's tensors (`tensors`: name -> (dtype, shape)) for config `c`, in llama.cpp's
// order, every name, type and shape checked; the skipped buffers are left out.
inline std::vector<HfGgufTensor> plan_hf_llama_tensors(const std::vector<TensorInfo>& tensors, const HfLlamaConfig& c,
                                                       const std::string& where) {
  const char* fn = "shrink::io::plan_hf_llama_tensors";
  std::map<std::string, const TensorInfo*> by_name;
  for (const TensorInfo& t : tensors) {
    if (detail::ends_with(t.name, ".rotary_emb.inv_freq")) continue;  // a buffer, recomputed by llama.cpp
    by_name[t.name] = &t;
  }
  const std::int64_t d = c.head_dim();
  std::vector<HfGgufTensor> plan;
  std::set<std::string> used;
  auto add = [&](const std::string& hf, const std::string& gguf, std::vector<std::int64_t> shape, bool norm,
                 std::int64_t rope) {
    const auto found = by_name.find(hf);
    if (found == by_name.end())
      fail(fn, where + ": no tensor " + detail::quoted(hf) + ": expected it in llama's layout");
    const TensorInfo& t = *found->second;
    if (t.shape != shape)
      fail(fn, where + ": tensor " + detail::quoted(hf) + " has shape " + detail::dims_text(t.shape) + ": expected " +
                   detail::dims_text(shape) + " (config.json)");
    std::uint32_t type = 0;
    switch (t.dtype) {
      case ScalarType::f32: type = static_cast<std::uint32_t>(GgufType::f32); break;
      case ScalarType::f16: type = static_cast<std::uint32_t>(GgufType::f16); break;
      case ScalarType::bf16: type = static_cast<std::uint32_t>(GgufType::bf16); break;
      default:
        fail(fn, where + ": tensor " + detail::quoted(hf) + " is " + safetensors_dtype_name(t.dtype) +
                     ": expected F32, F16 or BF16");
    }
    if (norm) type = static_cast<std::uint32_t>(GgufType::f32);  // llama.cpp keeps norms in F32
    plan.push_back({hf, gguf, std::move(shape), type, rope});
    used.insert(hf);
  };
  add("model.embed_tokens.weight", "token_embd.weight", {c.vocab, c.width}, false, 0);
  for (std::int64_t b = 0; b < c.blocks; ++b) {
    const std::string hf = "model.layers." + std::to_string(b) + ".", gguf = "blk." + std::to_string(b) + ".";
    add(hf + "input_layernorm.weight", gguf + "attn_norm.weight", {c.width}, true, 0);
    add(hf + "self_attn.q_proj.weight", gguf + "attn_q.weight", {c.heads * d, c.width}, false, d);
    add(hf + "self_attn.k_proj.weight", gguf + "attn_k.weight", {c.kv_heads * d, c.width}, false, d);
    add(hf + "self_attn.v_proj.weight", gguf + "attn_v.weight", {c.kv_heads * d, c.width}, false, 0);
    add(hf + "self_attn.o_proj.weight", gguf + "attn_output.weight", {c.width, c.heads * d}, false, 0);
    add(hf + "post_attention_layernorm.weight", gguf + "ffn_norm.weight", {c.width}, true, 0);
    add(hf + "mlp.gate_proj.weight", gguf + "ffn_gate.weight", {c.ffn, c.width}, false, 0);
    add(hf + "mlp.up_proj.weight", gguf + "ffn_up.weight", {c.ffn, c.width}, false, 0);
    add(hf + "mlp.down_proj.weight", gguf + "ffn_down.weight", {c.width, c.ffn}, false, 0);
  }
  add("model.norm.weight", "output_norm.weight", {c.width}, true, 0);
  if (!c.tied || by_name.count("lm_head.weight")) add("lm_head.weight", "output.weight", {c.vocab, c.width}, false, 0);
  for (const auto& [name, info] : by_name)
    if (!used.count(name))
      fail(fn, where + ": tensor " + detail::quoted(name) +
                   " has no place in llama's layout: expected only its tensors (biases and other extras are not "
                   "written)");
  return plan;
}

// What write_hf_llama_gguf wrote: the tensors, and tokenizer.ggml.pre (empty: not written, see the file comment).
struct HfGgufWritten {
  std::vector<HfGgufTensor> tensors;
  std::string pre;
};

// Writes the checkpoint at `checkpoint_path` (a directory, model.safetensors, or model.safetensors.index.json, with
// config.json, tokenizer.json and tokenizer_config.json in its directory) as a GGUF at out_path (the file comment).
// Returns what it wrote. Everything is checked before out_path is created; a failure while writing leaves it
// as it was (io/atomic_file.hpp).
inline HfGgufWritten write_hf_llama_gguf(const std::string& checkpoint_path, const std::string& out_path) {
  const Checkpoint checkpoint = open_checkpoint(checkpoint_path);
  std::string directory = checkpoint.directory;
  if (directory.empty()) {
    const std::size_t slash = checkpoint_path.find_last_of('/');
    directory = slash == std::string::npos ? "." : checkpoint_path.substr(0, slash);
  }
  const HfLlamaConfig c = read_hf_llama_config(directory + "/config.json");
  const HfTokenizer tok =
      read_hf_tokenizer(directory + "/tokenizer.json", directory + "/tokenizer_config.json", c.vocab);
  const std::vector<HfGgufTensor> plan = plan_hf_llama_tensors(checkpoint.tensors(), c, checkpoint_path);

  GgufWriter w;
  w.set_string("general.architecture", "llama").set_string("general.type", "model");
  w.set_string("general.name", c.name.empty() ? "model" : c.name);
  auto u32 = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  w.set_uint32("llama.block_count", u32(c.blocks))
      .set_uint32("llama.context_length", u32(c.context))
      .set_uint32("llama.embedding_length", u32(c.width))
      .set_uint32("llama.feed_forward_length", u32(c.ffn))
      .set_uint32("llama.attention.head_count", u32(c.heads))
      .set_uint32("llama.attention.head_count_kv", u32(c.kv_heads))
      .set_float32("llama.rope.freq_base", static_cast<float>(c.rope_base))
      .set_float32("llama.attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_eps))
      .set_uint32("general.file_type", 0)
      .set_uint32("llama.vocab_size", u32(c.vocab))
      .set_uint32("llama.rope.dimension_count", u32(c.head_dim()));
  w.set_string("tokenizer.ggml.model", "gpt2");
  if (!tok.pre.empty()) w.set_string("tokenizer.ggml.pre", tok.pre);
  w.set_strings("tokenizer.ggml.tokens", tok.tokens);
  w.set_int32s("tokenizer.ggml.token_type", tok.types);
  w.set_strings("tokenizer.ggml.merges", tok.merges);
  if (tok.bos) w.set_uint32("tokenizer.ggml.bos_token_id", *tok.bos);
  if (tok.eos) w.set_uint32("tokenizer.ggml.eos_token_id", *tok.eos);
  if (tok.unknown) w.set_uint32("tokenizer.ggml.unknown_token_id", *tok.unknown);
  if (tok.padding) w.set_uint32("tokenizer.ggml.padding_token_id", *tok.padding);
  if (tok.add_bos) w.set_bool("tokenizer.ggml.add_bos_token", *tok.add_bos);
  if (tok.add_eos) w.set_bool("tokenizer.ggml.add_eos_token", *tok.add_eos);
  if (!tok.chat_template.empty()) w.set_string("tokenizer.chat_template", tok.chat_template);

  CheckpointReader reader(checkpoint);
  for (const HfGgufTensor& p : plan)
    w.add_tensor(p.name, p.shape, p.type, [&reader, &p](std::uint8_t* out, std::size_t bytes) {
      const SafetensorsFile& file = reader.file_of(p.hf_name);
      const TensorInfo& t = file.info(p.hf_name);
      const ByteView source = file.bytes(p.hf_name);
      if (p.type == static_cast<std::uint32_t>(GgufType::f32) && t.dtype != ScalarType::f32) {
        // A norm stored in F16 / BF16, widened exactly by the GGUF reader's own decoding of those types.
        const auto stored = static_cast<std::uint32_t>(t.dtype == ScalarType::f16 ? GgufType::f16 : GgufType::bf16);
        std::vector<float> values(bytes / sizeof(float));
        gguf_dequantize(stored, reinterpret_cast<const std::uint8_t*>(source.data),
                        static_cast<std::int64_t>(values.size()), values.data());
        std::memcpy(out, values.data(), bytes);
        return;
      }
      if (p.rope_head_dim == 0) {
        std::memcpy(out, source.data, bytes);
        return;
      }
      const std::size_t row = bytes / static_cast<std::size_t>(p.shape[0]);
      for (std::int64_t r = 0; r < p.shape[0]; ++r)
        std::memcpy(out + static_cast<std::size_t>(llama_rope_row(r, p.rope_head_dim)) * row,
                    source.data + static_cast<std::size_t>(r) * row, row);
    });
  w.write(out_path);
  return {plan, tok.pre};
}

}  // namespace shrink::io
