// Generation on the real SmolLM2-135M-Instruct (scripts/fetch-llm-data.sh, SHRINK_LLM_DATA_DIR), float32: the
// prompts' ids (the chat ones through the GGUF's template and special tokens) equal Hugging Face's, greedy
// generation equals PyTorch's token for token for 64 tokens (testdata/generate_smollm_golden.txt, by
// gen_generate_golden.py --smollm), and the KV-cache decode gives the logits of recomputing the sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "chat.hpp"
#include "decoder.hpp"
#include "generate.hpp"
#include "llama_gguf.hpp"
#include "recipes.hpp"
#include "test_paths.hpp"
#include "tokenizer_gguf.hpp"

namespace {

using llm::test_paths::kDataDir;
using llm::test_paths::kTestdata;

struct GoldenCase {
  std::vector<std::int32_t> prompt, generated;
};

std::map<std::string, GoldenCase> read_generate_golden(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::map<std::string, GoldenCase> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    std::size_t count = 0;
    GoldenCase c;
    fields >> name >> count;
    c.prompt.resize(count);
    for (auto& id : c.prompt) fields >> id;
    fields >> count;
    c.generated.resize(count);
    for (auto& id : c.generated) fields >> id;
    REQUIRE(fields);
    cases[name] = c;
  }
  return cases;
}

}  // namespace

TEST_CASE("llm: SmolLM2-135M's greedy generation equals PyTorch's for 64 tokens, chat prompts included",
          "[llm][smollm][generate]") {
  const std::string path = kDataDir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  const shrink::io::GgufFile file = shrink::io::GgufFile::open(path);
  const llm::BpeTokenizer tokenizer = llm::smollm_tokenizer_from_gguf(file);
  const llm::SpecialTokens specials = llm::special_tokens_from_gguf(file, tokenizer);
  const llm::ChatFormat chat = llm::chat_format_from_gguf(file, tokenizer);
  CHECK(chat.default_system == "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  CHECK(chat.end_id == 2);

  // gen_generate_golden.py's prompts: (name, text, chat).
  const std::vector<std::tuple<std::string, std::string, bool>> prompts = {
      {"raw_hamlet", "To be, or not to be, that is the question:", false},
      {"raw_recipe", "The three most important things to remember when baking bread are", false},
      {"chat_capital", "What is the capital of France?", true},
      {"chat_gravity", "Explain gravity to a child in two sentences.", true},
  };
  const std::map<std::string, GoldenCase> golden = read_generate_golden(kTestdata + "/generate_smollm_golden.txt");
  const llm::LlamaWeights weights = llm::load_llama_gguf(path);
  const auto head = llm::float_head(weights);
  const llm::CompressedModel m = llm::compress_model(weights, llm::recipe_info("base"), head, nullptr);
  for (const auto& [name, text, is_chat] : prompts) {
    INFO(name);
    REQUIRE(golden.count(name) == 1);
    const GoldenCase& expected = golden.at(name);
    const std::vector<std::int32_t> prompt =
        llm::encode_with_special_tokens(tokenizer, specials, is_chat ? llm::chat_prompt(chat, text) : text);
    CHECK(prompt == expected.prompt);
    llm::Decoder decoder(m, static_cast<std::int64_t>(prompt.size() + expected.generated.size()), llm::KvForm::f32);
    llm::GenerateOptions o;
    o.max_tokens = static_cast<std::int64_t>(expected.generated.size());
    const llm::Generation g = llm::generate(decoder, expected.prompt, o, [](std::int32_t) {});
    CHECK(g.ids == expected.generated);
  }
}

TEST_CASE("llm: SmolLM2-135M's KV-cache decode gives the logits of recomputing the sequence",
          "[llm][smollm][generate]") {
  const std::string path = kDataDir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  const llm::LlamaWeights weights = llm::load_llama_gguf(path);
  const auto head = llm::float_head(weights);
  std::ifstream text_file(kDataDir + "/hamlet.txt", std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(text_file)), {});
  std::vector<std::int32_t> ids = llm::smollm_tokenizer_from_gguf(path).encode(text.substr(0, 4000));
  ids.resize(72);
  for (const std::string recipe : {"base", "w4-g64"}) {
    INFO(recipe);
    const llm::CompressedModel m = llm::compress_model(weights, llm::recipe_info(recipe), head, nullptr);
    llm::Decoder decoder(m, 72, llm::KvForm::f32);
    decoder.feed(ids.data(), 40);
    for (std::int64_t t = 40; t < 72; t += 1) {
      const std::vector<float> step = decoder.feed(&ids[static_cast<std::size_t>(t)], 1);
      if (t % 8 != 7) continue;  // every eighth position recomputed (each recomputation is a whole pass)
      llm::Decoder fresh(m, t + 1, llm::KvForm::f32);
      const std::vector<float>& whole = fresh.feed(ids.data(), t + 1);
      double diff = 0.0, scale = 0.0;
      for (std::size_t j = 0; j < whole.size(); ++j) {
        diff = std::max(diff, std::fabs(static_cast<double>(step[j]) - whole[j]));
        scale = std::max(scale, std::fabs(static_cast<double>(whole[j])));
      }
      INFO("position " << t);
      CHECK(diff / scale < 1e-4);
    }
  }
}
