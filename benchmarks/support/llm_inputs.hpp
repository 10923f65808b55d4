// What the LLM benchmarks load once: SmolLM2's float weights and packed float head, and the first tokens of a text
// by the model's own tokenizer; the recipes' models compressed on first use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "files.hpp"
#include "llama_forward.hpp"
#include "llama_gguf.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "tokenizer_gguf.hpp"

namespace shrink::bench {

struct LlmInputs {
  llm::LlamaWeights weights;
  std::vector<std::int32_t> ids;  // the text's first `tokens` ids
  llm::SharedHead head;           // float32, as the table keeps it
  std::map<std::string, std::unique_ptr<llm::CompressedModel>> models;

  // Throws shrink::Error when the text holds fewer than `tokens` tokens or the model cannot be read.
  LlmInputs(const std::string& model_path, const std::string& text_path, std::int64_t tokens)
      : ids(llm::smollm_tokenizer_from_gguf(model_path).encode(llm::read_file_text(text_path))) {
    llm::require_span(ids, llm::WindowSpan{tokens, 1}, text_path);
    ids.resize(static_cast<std::size_t>(tokens));
    weights = llm::load_llama_gguf(model_path);
    head = llm::float_head(weights);
  }

  // The recipe's model, compressed on first use (non-calibrated recipes).
  llm::CompressedModel& model(const std::string& recipe) {
    auto& slot = models[recipe];
    if (!slot)
      slot =
          std::make_unique<llm::CompressedModel>(llm::compress_model(weights, llm::recipe_info(recipe), head, nullptr));
    return *slot;
  }
};

}  // namespace shrink::bench
