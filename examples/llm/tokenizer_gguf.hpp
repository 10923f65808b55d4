// SmolLM2's tokenizer from a GGUF model file: the vocabulary (tokenizer.ggml.tokens) and merges
// (tokenizer.ggml.merges) of a file whose tokenizer.ggml.model is "gpt2" (byte-level BPE) and tokenizer.ggml.pre
// "smollm" (the only pre-tokenization tokenizer.hpp implements); anything else raises shrink::Error naming the key.
// The model's other tokenizer keys hold what BpeTokenizer does not need: token types (special tokens are plain
// text here, see tokenizer.hpp), and add_bos_token / add_space_prefix, both false for SmolLM2 (the caller adds a
// BOS id itself if it wants one).
#pragma once

#include <string>

#include "shrink/core/error.hpp"
#include "shrink/io/gguf.hpp"
#include "tokenizer.hpp"

namespace llm {

inline BpeTokenizer smollm_tokenizer_from_gguf(const shrink::io::GgufFile& file) {
  const char* fn = "llm::smollm_tokenizer_from_gguf";
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2") shrink::fail(fn, "tokenizer.ggml.model", "\"" + model + "\"", "\"gpt2\" (byte-level BPE)");
  const std::string pre = file.get_string("tokenizer.ggml.pre");
  if (pre != "smollm")
    shrink::fail(fn, "tokenizer.ggml.pre", "\"" + pre + "\"", "\"smollm\" (the pre-tokenization implemented)");
  return BpeTokenizer(file.get_strings("tokenizer.ggml.tokens"), file.get_strings("tokenizer.ggml.merges"));
}

inline BpeTokenizer smollm_tokenizer_from_gguf(const std::string& path) {
  return smollm_tokenizer_from_gguf(shrink::io::GgufFile::open(path));
}

}  // namespace llm
