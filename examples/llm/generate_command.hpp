// `shrink_llm generate`: one recipe's model answers a prompt, the tokens streamed to stdout as they are drawn; the
// figures (prompt and generated tokens, prefill and decode tokens/s, the cache's and the weights' bytes, peak
// resident memory) go to stderr, and with --json to a file.
//
//   shrink_llm generate --prompt TEXT [--chat [--system TEXT]] [--recipe NAME] [--max-tokens N]
//                       [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f32|f16|int8]
//                       [--context N] [--threads N] [--data DIR] [--model FILE] [--calibration-text FILE]
//                       [--calibration-windows N] [--head auto|f32|f16|bf16|int8] [--json FILE]
//
// The recipe is applied at start (the calibrated ones read the calibration text, as the table does); the float32
// block linears are released once compressed. The head is stored as --head says (default: the recipe's
// generation_head_form, recipes.hpp: f32 for base, f16 / bf16 for those recipes, else int8 per output channel). The
// cache holds --context positions (default: the prompt and --max-tokens, at most the model's context length).
// Generation ends at the end-of-sequence token, <|im_end|>, or
// <|endoftext|>, at --max-tokens, or when the context is full.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "chat.hpp"
#include "files.hpp"
#include "generate.hpp"
#include "llama_gguf.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/io/gguf.hpp"
#include "tokenizer_gguf.hpp"

namespace llm {

struct GenerateCommand {
  std::string data_dir, model, calibration_text, json;
  std::string recipe = "base";
  std::string prompt;
  bool chat = false;
  bool has_system = false;
  std::string system;
  GenerateOptions generation;
  KvForm kv = KvForm::f32;
  std::string head = "auto";  // auto: generation_head_form(recipe); else a HeadForm's name
  std::int64_t context = 0;   // 0: the prompt and max_tokens
  WindowSpan calibration{512, 16};
  int threads = 0;
};

// Peak resident memory of this process so far, in bytes (getrusage: kilobytes on Linux).
inline std::int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

// Resident memory now, in bytes (the second field of /proc/self/statm, in pages); 0 where there is no /proc.
inline std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return static_cast<std::int64_t>(resident) * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

// The model of one recipe, calibrated where it needs it; `weights` loses its block linears once they are compressed.
inline CompressedModel compress_for_generation(LlamaWeights& weights, const RecipeInfo& recipe, SharedHead head,
                                               const std::vector<std::int32_t>& calibration_ids,
                                               const WindowSpan& span) {
  CompressedModel m;
  if (recipe.sequential) {
    require_span(calibration_ids, span, "calibration text");
    SequentialTiming timing;
    m = compress_model_sequential(weights, recipe, head, calibration_ids, span, &timing);
  } else if (recipe.calibrated) {
    require_span(calibration_ids, span, "calibration text");
    const CalibrationStats stats = float_model_statistics(weights, head, calibration_ids, span);
    m = compress_model(weights, recipe, head, &stats);
  } else {
    m = compress_model(weights, recipe, head, nullptr);
  }
  for (BlockWeights& b : weights.blocks)
    for (FloatMatrix& l : b.linears) l = FloatMatrix();
  return m;
}

inline std::vector<std::int32_t> stop_ids_of(const shrink::io::GgufFile& file, const BpeTokenizer& tokenizer) {
  std::vector<std::int32_t> stop;
  if (file.has("tokenizer.ggml.eos_token_id"))
    stop.push_back(static_cast<std::int32_t>(file.get_uint("tokenizer.ggml.eos_token_id")));
  for (const char* text : {"<|im_end|>", "<|endoftext|>"})
    if (tokenizer.id_of(text) >= 0) stop.push_back(tokenizer.id_of(text));
  return stop;
}

inline int run_generate(const GenerateCommand& o) {
  using clock = std::chrono::steady_clock;
  std::unique_ptr<shrink::ThreadPoolExecutor> pool;
  if (o.threads > 0) {
    pool = std::make_unique<shrink::ThreadPoolExecutor>(o.threads);
    shrink::set_executor(pool.get());
  }
  const int threads = shrink::current_executor().concurrency();
  const RecipeInfo& recipe = recipe_info(o.recipe);

  const shrink::io::GgufFile file = shrink::io::GgufFile::open(o.model);
  const BpeTokenizer tokenizer = smollm_tokenizer_from_gguf(file);
  const SpecialTokens specials = special_tokens_from_gguf(file, tokenizer);
  std::string text = o.prompt;
  if (o.chat) text = chat_prompt(chat_format_from_gguf(file, tokenizer), o.prompt, o.has_system ? &o.system : nullptr);
  const std::vector<std::int32_t> prompt = encode_with_special_tokens(tokenizer, specials, text);
  if (prompt.empty()) shrink::fail("shrink_llm generate", "prompt", "\"\"", "a prompt of at least one token");
  GenerateOptions generation = o.generation;
  generation.stop_ids = stop_ids_of(file, tokenizer);

  const auto start = clock::now();
  LlamaWeights weights = load_llama_gguf(o.model);
  const LlamaConfig& c = weights.config;
  std::int64_t context = o.context;
  if (context == 0) {
    context = static_cast<std::int64_t>(prompt.size()) + generation.max_tokens;
    if (c.context > 0) context = std::min(context, c.context);
  }
  if (static_cast<std::int64_t>(prompt.size()) > context)
    shrink::fail("shrink_llm generate", "prompt", std::to_string(prompt.size()) + " tokens",
                 "at most the context of " + std::to_string(context) + " positions");
  std::vector<std::int32_t> calibration_ids;
  if (recipe.calibrated || recipe.sequential) calibration_ids = tokenizer.encode(read_file_text(o.calibration_text));
  const HeadForm head_form = o.head == "auto" ? generation_head_form(recipe) : head_form_from_name(o.head);
  CompressedModel m = compress_for_generation(weights, recipe, float_head(weights), calibration_ids, o.calibration);
  m.head = compress_head(weights, head_form);
  const double setup_seconds = std::chrono::duration<double>(clock::now() - start).count();

  Decoder decoder(m, context, o.kv);
  const std::int64_t resident_before = resident_bytes();  // the compressed model and the cache, no float32 linears
  const Generation g = generate(decoder, prompt, generation, [&](std::int32_t id) {
    const std::string bytes = tokenizer.decode({id});
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);

  const std::int64_t peak = peak_resident_bytes();
  const std::int64_t resident_after = resident_bytes();
  std::fprintf(
      stderr,
      "\n[%s, %s head, %s cache, %d threads] prompt %lld tokens: %.1f tokens/s; generated %lld tokens (%s): decode "
      "%.1f tokens/s\n[weights %.1f MB, cache %.1f MB for %lld positions; resident %.1f MB generating (%.1f MB at "
      "the end), peak %.1f MB (loading); set-up %.2f s]\n",
      recipe.name, head_form_name(head_form), kv_form_name(o.kv), threads, static_cast<long long>(g.prompt_tokens),
      g.prefill_tokens_per_second(), static_cast<long long>(g.ids.size()), g.stop.c_str(),
      g.decode_passes > 0 ? g.decode_tokens_per_second() : 0.0, static_cast<double>(m.linear_bytes()) / 1e6,
      static_cast<double>(decoder.cache().bytes()) / 1e6, static_cast<long long>(context),
      static_cast<double>(resident_before) / 1e6, static_cast<double>(resident_after) / 1e6,
      static_cast<double>(peak) / 1e6, setup_seconds);
  if (!o.json.empty()) {
    const nlohmann::json j = {{"recipe", recipe.name},
                              {"head", head_form_name(head_form)},
                              {"kv_cache", kv_form_name(o.kv)},
                              {"threads", threads},
                              {"prompt_tokens", g.prompt_tokens},
                              {"generated_tokens", g.ids.size()},
                              {"generated_ids", g.ids},
                              {"text", tokenizer.decode(g.ids)},
                              {"stop", g.stop},
                              {"prefill_seconds", g.prefill_seconds},
                              {"prefill_tokens_per_second", g.prefill_tokens_per_second()},
                              {"decode_passes", g.decode_passes},
                              {"decode_seconds", g.decode_seconds},
                              {"decode_tokens_per_second", g.decode_passes > 0 ? g.decode_tokens_per_second() : 0.0},
                              {"weight_bytes", m.linear_bytes()},
                              {"cache_bytes", decoder.cache().bytes()},
                              {"context", context},
                              {"resident_bytes_generating", resident_before},
                              {"resident_bytes_at_end", resident_after},
                              {"peak_resident_bytes", peak},
                              {"setup_seconds", setup_seconds}};
    write_file_atomically(o.json, j.dump(1) + "\n");
  }
  return 0;
}

}  // namespace llm
