// Prompts for generation: special tokens and the chat format of a GGUF.
//
// Special tokens are those of token type 3 (control) in tokenizer.ggml.token_type, such as <|im_start|>. In a
// prompt, each occurrence of one's text becomes its id (the longest match where several start at one place) and the
// text between them is encoded as ordinary text, as the Hugging Face tokenizer matches added tokens first.
//
// The chat format is read from tokenizer.chat_template. The one format implemented is ChatML, the template of
// SmolLM2-Instruct (and Qwen's, among others), recognised by its parts: each message as
//   <|im_start|>{role}\n{content}<|im_end|>\n
// and, for the answer, <|im_start|>assistant\n. A template that puts a system message first when the conversation
// has none ("You are a helpful AI assistant named SmolLM, ..." in SmolLM2's) gives that text as the default system
// message. Any other template is refused by name (Jinja is not interpreted here).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/gguf.hpp"
#include "tokenizer.hpp"

namespace llm {

// (text, id) of every special token.
using SpecialTokens = std::vector<std::pair<std::string, std::int32_t>>;

inline SpecialTokens special_tokens_from_gguf(const shrink::io::GgufFile& file, const BpeTokenizer& tokenizer) {
  const char* fn = "llm::special_tokens_from_gguf";
  SpecialTokens out;
  if (!file.has("tokenizer.ggml.token_type")) return out;
  const std::vector<std::int64_t> types = file.get_ints("tokenizer.ggml.token_type");
  if (types.size() != tokenizer.vocab_size())
    shrink::fail(fn, "tokenizer.ggml.token_type", types.size(),
                 "one type per token (" + std::to_string(tokenizer.vocab_size()) + ")");
  for (std::size_t id = 0; id < types.size(); ++id)
    if (types[id] == 3) {
      const auto token = static_cast<std::int32_t>(id);
      out.emplace_back(tokenizer.decode({token}), token);
    }
  return out;
}

// The ids of `text`, each special token's text mapped to its id and the text between encoded as ordinary text.
inline std::vector<std::int32_t> encode_with_special_tokens(const BpeTokenizer& tokenizer,
                                                            const SpecialTokens& specials, std::string_view text) {
  std::vector<std::int32_t> ids;
  std::size_t plain = 0;  // start of the ordinary text not yet encoded
  for (std::size_t at = 0; at < text.size();) {
    const std::pair<std::string, std::int32_t>* match = nullptr;
    for (const auto& special : specials)
      if (!special.first.empty() && text.compare(at, special.first.size(), special.first) == 0 &&
          (match == nullptr || special.first.size() > match->first.size()))
        match = &special;
    if (match == nullptr) {
      ++at;
      continue;
    }
    const std::vector<std::int32_t> before = tokenizer.encode(text.substr(plain, at - plain));
    ids.insert(ids.end(), before.begin(), before.end());
    ids.push_back(match->second);
    at += match->first.size();
    plain = at;
  }
  const std::vector<std::int32_t> rest = tokenizer.encode(text.substr(plain));
  ids.insert(ids.end(), rest.begin(), rest.end());
  return ids;
}

struct ChatFormat {
  std::string default_system;  // the system message the template adds when there is none; may be empty
  std::int32_t end_id = -1;    // <|im_end|>: the end of the answer
};

inline ChatFormat chat_format_from_gguf(const shrink::io::GgufFile& file, const BpeTokenizer& tokenizer) {
  const char* fn = "llm::chat_format_from_gguf";
  const char* key = "tokenizer.chat_template";
  if (!file.has(key)) shrink::fail(fn, key, "absent", "a chat template (ChatML) in the model's metadata");
  const std::string t = file.get_string(key);
  for (const char* part : {"<|im_start|>", "<|im_end|>", "message['role']", "message['content']",
                           "add_generation_prompt", "<|im_start|>assistant"})
    if (t.find(part) == std::string::npos)
      shrink::fail(fn, key, "a template without " + std::string(part), "ChatML (<|im_start|>role\\ncontent<|im_end|>)");
  ChatFormat f;
  f.end_id = tokenizer.id_of("<|im_end|>");
  if (f.end_id < 0) shrink::fail(fn, "tokenizer.ggml.tokens", "no <|im_end|>", "ChatML's special tokens");
  // A default system message: the literal <|im_start|>system<newline>TEXT<|im_end|> of the template.
  const std::string opening = "<|im_start|>system";
  const std::size_t at = t.find(opening);
  if (at != std::string::npos && t.find("!= 'system'") != std::string::npos) {
    std::size_t begin = at + opening.size();
    if (t.compare(begin, 2, "\\n") == 0)
      begin += 2;  // the newline written as an escape in the Jinja string
    else if (begin < t.size() && t[begin] == '\n')
      begin += 1;
    const std::size_t end = t.find("<|im_end|>", begin);
    if (end != std::string::npos) f.default_system = t.substr(begin, end - begin);
  }
  return f;
}

// The prompt text of one user message: the system message (`system`, else the template's default), the user's,
// then the opening of the assistant's answer.
inline std::string chat_prompt(const ChatFormat& f, const std::string& user, const std::string* system = nullptr) {
  const std::string& sys = system != nullptr ? *system : f.default_system;
  std::string text;
  if (system != nullptr || !f.default_system.empty()) text += "<|im_start|>system\n" + sys + "<|im_end|>\n";
  text += "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  return text;
}

}  // namespace llm
