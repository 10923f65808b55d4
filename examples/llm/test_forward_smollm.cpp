// The LLM example on the real SmolLM2-135M-Instruct (scripts/fetch-llm-data.sh, SHRINK_LLM_DATA_DIR): the first 128
// tokens of hamlet.txt, tokenized by tokenizer_gguf.hpp, through the float model and the w8 and w4-g64 recipes, give
// the NLL of the independent PyTorch forward (testdata/smollm_golden.txt, by gen_forward_golden.py --smollm) within
// 0.01%, on the same ids.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "forward_golden.hpp"
#include "llama_gguf.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "test_paths.hpp"
#include "tokenizer_gguf.hpp"

namespace {

using llm::test_paths::kDataDir;
using llm::test_paths::kTestdata;

}  // namespace

TEST_CASE("llm: SmolLM2-135M's NLL on Hamlet's first 128 tokens equals PyTorch's: base, w8, w4-g64", "[llm][smollm]") {
  const std::string model_path = kDataDir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::ifstream text_file(kDataDir + "/hamlet.txt", std::ios::binary);
  REQUIRE(text_file.good());
  const std::string text((std::istreambuf_iterator<char>(text_file)), {});
  std::vector<std::int32_t> ids = llm::smollm_tokenizer_from_gguf(model_path).encode(text);
  ids.resize(128);

  const llm::ForwardGolden golden = llm::read_forward_golden(kTestdata + "/smollm_golden.txt");
  REQUIRE(ids == golden.ids);

  const llm::LlamaWeights weights = llm::load_llama_gguf(model_path);
  const auto head = llm::float_head(weights);
  for (const auto& [reference, recipe] :
       std::map<std::string, std::string>{{"base", "base"}, {"int8", "w8"}, {"w4g64", "w4-g64"}}) {
    INFO(recipe);
    const llm::CompressedModel m = llm::compress_model(weights, llm::recipe_info(recipe), head, nullptr);
    const llm::Perplexity p = llm::evaluate(m, ids, llm::WindowSpan{128, 1}, "hamlet.txt");
    CHECK(p.predictions == 127);
    CHECK(p.nll_sum == Approx(golden.nll.at(reference)).epsilon(1e-4));
  }
}
