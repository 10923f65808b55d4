// The LLM example's forward pass and recipes on a tiny llama GGUF (testdata/tiny_llama.gguf: Q4_1 linears, a Q8_0
// embedding, F32 norms) against testdata/forward_golden.txt, the NLL of the independent PyTorch forward
// (reference_forward.py, via gen_forward_golden.py) under each round-to-nearest and magnitude row; SmoothQuant's
// folding leaves the float function unchanged; the bits do not depend on the executor; bad models and short texts
// are refused. SHRINK_LLM_TESTDATA is the testdata directory.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "forward_golden.hpp"
#include "llama_gguf.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "shrink/core/executor.hpp"
#include "test_paths.hpp"

namespace {

using llm::test_paths::kTestdata;

struct Tiny {
  llm::LlamaWeights weights = llm::load_llama_gguf(kTestdata + "/tiny_llama.gguf");
  llm::SharedHead head = llm::float_head(weights);

  llm::CompressedModel model(const std::string& recipe, const llm::CalibrationStats* stats = nullptr) const {
    return llm::compress_model(weights, llm::recipe_info(recipe), head, stats);
  }
};

const llm::WindowSpan kTinySpan{32, 2};

double nll_of(const llm::CompressedModel& m, const std::vector<std::int32_t>& ids) {
  return llm::evaluate(m, ids, kTinySpan, "ids").nll_sum;
}

}  // namespace

TEST_CASE("llm: the tiny GGUF loads with the configuration of its metadata", "[llm]") {
  const Tiny tiny;
  const llm::LlamaConfig& c = tiny.weights.config;
  CHECK(c.blocks == 2);
  CHECK(c.width == 64);
  CHECK(c.heads == 4);
  CHECK(c.kv_heads == 2);
  CHECK(c.ffn == 128);
  CHECK(c.vocab == 96);
  CHECK(c.head_dim() == 16);
  CHECK(tiny.weights.head.values.empty());  // tied: no output.weight
  CHECK(tiny.weights.blocks[1].linear(llm::LinearSlot::k).rows == 32);
  CHECK(tiny.weights.blocks[1].linear(llm::LinearSlot::down).cols == 128);
}

TEST_CASE("llm: each round-to-nearest and magnitude row equals the PyTorch forward's NLL", "[llm]") {
  const Tiny tiny;
  const llm::ForwardGolden golden = llm::read_forward_golden(kTestdata + "/forward_golden.txt");
  REQUIRE(golden.ids.size() == 64);
  REQUIRE(golden.predictions == 62);
  // reference_forward.py's row name -> recipe, and the relative tolerance on the NLL sum. W8A8 and W4A8 round
  // activations at every layer, so float-order differences can move a value across a rounding boundary: a looser bound.
  const std::vector<std::tuple<std::string, std::string, double>> rows = {
      {"base", "base", 2e-6},          {"fp16", "fp16", 2e-6},
      {"bf16", "bf16", 2e-6},          {"int8", "w8", 2e-6},
      {"w8a8", "w8a8", 1e-3},          {"w4g64", "w4-g64", 2e-6},
      {"w4a8g64", "w4a8-g64", 1e-3},   {"w3g64", "w3-g64", 2e-6},
      {"magnitude50", "mag-50", 2e-6}, {"magnitude24", "mag-2:4", 2e-6},
  };
  for (const auto& [reference, recipe, tolerance] : rows) {
    INFO(recipe);
    REQUIRE(golden.nll.count(reference) == 1);
    CHECK(nll_of(tiny.model(recipe), golden.ids) == Approx(golden.nll.at(reference)).epsilon(tolerance));
  }
}

TEST_CASE("llm: SmoothQuant's folded factors leave the float model's function unchanged", "[llm]") {
  const Tiny tiny;
  const llm::ForwardGolden golden = llm::read_forward_golden(kTestdata + "/forward_golden.txt");
  llm::CalibrationStats stats(tiny.weights.config.blocks);
  llm::evaluate(tiny.model("base"), golden.ids, kTinySpan, "calibration", &stats);
  CHECK(stats.tokens() == 64);

  // The smoothed weights kept in float: norms and up rows absorb the factors, o keeps them as input scales.
  llm::CompressedModel smoothed = tiny.model("base");
  for (std::int64_t b = 0; b < tiny.weights.config.blocks; ++b) {
    llm::BlockWeights w = tiny.weights.blocks[static_cast<std::size_t>(b)];
    const std::vector<float> o_scales = llm::detail::smooth_block(w, stats, b);
    llm::CompressedBlock& out = smoothed.blocks[static_cast<std::size_t>(b)];
    out.attn_norm = w.attn_norm;
    out.ffn_norm = w.ffn_norm;
    for (llm::LinearSlot s : llm::kLinearSlots)
      out.linear(s) = llm::CompressedLinear(shrink::cpu::pack_weight(w.linear(s).view()),
                                            s == llm::LinearSlot::o ? o_scales : std::vector<float>{});
    CHECK(w.attn_norm != tiny.weights.blocks[static_cast<std::size_t>(b)].attn_norm);
  }
  CHECK(nll_of(smoothed, golden.ids) == Approx(golden.nll.at("base")).epsilon(1e-5));

  // And the quantized SmoothQuant and Wanda rows run and stay near the base model.
  for (const char* recipe : {"sq-w8a8", "wanda-50", "wanda-2:4"}) {
    INFO(recipe);
    const double nll = nll_of(tiny.model(recipe, &stats), golden.ids);
    CHECK(std::isfinite(nll));
    CHECK(nll == Approx(golden.nll.at("base")).epsilon(0.2));
  }
  CHECK_THROWS_WITH(tiny.model("wanda-50"), Catch::Contains("stats") && Catch::Contains("calibration"));
}

TEST_CASE("llm: the NLL has the same bits on any executor", "[llm]") {
  const Tiny tiny;
  const llm::ForwardGolden golden = llm::read_forward_golden(kTestdata + "/forward_golden.txt");
  for (const char* recipe : {"base", "w8a8", "w4-g64", "mag-50", "mag-2:4"}) {
    INFO(recipe);
    const llm::CompressedModel m = tiny.model(recipe);
    double serial = 0.0, pooled = 0.0;
    {
      shrink::SerialExecutor executor;
      shrink::ScopedExecutor scope(executor);
      serial = nll_of(m, golden.ids);
    }
    {
      shrink::ThreadPoolExecutor executor(3);
      shrink::ScopedExecutor scope(executor);
      pooled = nll_of(m, golden.ids);
    }
    CHECK(serial == pooled);
  }
}

TEST_CASE("llm: stored bytes follow each format", "[llm]") {
  const Tiny tiny;
  const std::int64_t elements = 2 * (64 * 64 * 2 + 32 * 64 * 2 + 128 * 64 * 3);
  CHECK(tiny.model("base").linear_bytes() == 4 * elements);
  CHECK(tiny.model("fp16").linear_bytes() == 2 * elements);
  CHECK(tiny.model("w8").linear_bytes() == elements + 4 * 2 * (64 + 32 + 32 + 64 + 128 + 128 + 64));
  // uint4 affine per group of 64: half a byte a weight, a float scale and a byte of zero point a group.
  CHECK(tiny.model("w4-g64").linear_bytes() == elements / 2 + 5 * elements / 64);
}

TEST_CASE("llm: a model whose shapes disagree with its metadata is refused, naming the tensor", "[llm]") {
  CHECK_THROWS_WITH(
      llm::load_llama_gguf(kTestdata + "/tiny_llama_bad_shape.gguf"),
      Catch::Contains("blk.1.attn_k.weight.shape") && Catch::Contains("[31, 64]") && Catch::Contains("[32, 64]"));
  CHECK_THROWS_WITH(llm::load_llama_gguf(kTestdata + "/forward_golden.txt"), Catch::Contains("forward_golden.txt"));
  CHECK_THROWS_WITH(llm::load_llama_gguf(kTestdata + "/no_such_model.gguf"), Catch::Contains("no_such_model.gguf"));
}

TEST_CASE("llm: a text shorter than its windows, a bad window and bad token ids are refused", "[llm]") {
  const Tiny tiny;
  const llm::CompressedModel m = tiny.model("base");
  const std::vector<std::int32_t> ids(40, 1);
  CHECK_THROWS_WITH(llm::evaluate(m, ids, kTinySpan, "hamlet.txt"),
                    Catch::Contains("hamlet.txt: tokens") && Catch::Contains("2 windows of 32 tokens (64)"));
  CHECK_THROWS_WITH(llm::evaluate(m, ids, llm::WindowSpan{1, 1}, "text"), Catch::Contains("window"));
  const std::vector<std::int32_t> out_of_range = {1, 2, 96, 3};
  CHECK_THROWS_WITH(llm::evaluate(m, out_of_range, llm::WindowSpan{4, 1}, "text"),
                    Catch::Contains("ids[2]") && Catch::Contains("vocabulary size 96"));
  CHECK_THROWS_WITH(llm::recipe_info("w2"), Catch::Contains("w2") && Catch::Contains("wanda-2:4"));
}
