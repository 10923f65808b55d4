// shrink_llm: SmolLM2-135M-Instruct (GGUF) compressed by every recipe of recipes.hpp, each row's perplexity on a
// fixed span of held-out text, printed as a table and written as JSON (docs/llm.md).
//
//   shrink_llm [--data DIR] [--recipes all|a,b,..|none] [--window 512] [--windows 8] [--calibration-windows 16]
//              [--threads N] [--json FILE] [--write-ids FILE] [--write-calibration-ids FILE]
//              [--hessian-jitter EPS [--jitter-seed N]] [--write-calibration-stats FILE] [--write-logits FILE]
//   shrink_llm generate --prompt TEXT [--chat] ...   one recipe's model answers a prompt (generate_command.hpp)
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "calibration_file.hpp"
#include "files.hpp"
#include "generate_command.hpp"
#include "llama_gguf.hpp"
#include "recipe_table.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/io/gguf.hpp"
#include "tokenizer_gguf.hpp"

namespace {

using llm::WindowSpan;

struct Options {
  std::string data_dir;
  std::string model, eval_text, calibration_text;
  std::vector<std::string> recipes;
  WindowSpan eval{512, 8};
  WindowSpan calibration{512, 16};  // 8,192 tokens: GPTQ's [1536, 1536] Hessians need several times their width
  int threads = 0;                  // 0: shrink's default executor
  std::string json, write_ids, write_calibration_ids;
  std::string write_calibration_stats;  // the float model's input statistics, for `shrink quantize --format gguf`
  std::string write_logits;             // the float forward's logits of the first window (tests/llm/llama_cpp_logits)
  llm::HessianJitter hessian_jitter;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "shrink_llm: %s\n"
      "usage: shrink_llm [--data DIR] [--model FILE.gguf] [--eval-text FILE] [--calibration-text FILE]\n"
      "                  [--recipes all|none|NAME,NAME,...] [--window N] [--windows N]\n"
      "                  [--calibration-windows N] [--threads N] [--json FILE] [--write-ids FILE]\n"
      "                  [--write-calibration-ids FILE] [--hessian-jitter EPS [--jitter-seed N]]\n"
      "                  [--write-calibration-stats FILE] [--write-logits FILE]\n"
      "  --data DIR  scripts/fetch-llm-data.sh's directory (default: $SHRINK_LLM_DATA_DIR): the model\n"
      "              SmolLM2-135M-Instruct.Q4_1.gguf, hamlet.txt (evaluation), macbeth.txt (calibration)\n"
      "  --hessian-jitter EPS  each Hessian entry of the sequential recipes times (1 + EPS·u), u uniform in\n"
      "              [-1, 1] (symmetric): how far a row moves when its statistics move by rounding's order\n"
      "  --write-calibration-stats FILE  each linear input's Hessian and mean |x| in the float model over the\n"
      "              calibration windows, named as the GGUF's linears (`shrink quantize --format gguf\n"
      "              --method gptq|awq --calibration FILE`)\n"
      "  --write-logits FILE  the logits of the first evaluation window's positions 0 .. window - 2 through the\n"
      "              model's dequantized weights in float32 (the base recipe), raw little-endian float32\n"
      "              [window - 1, vocabulary]\n",
      why.c_str());
  std::exit(2);
}

// path, unless given, is <data_dir>/<name>; without a data directory `usage` exits naming the file.
void in_data(std::string& path, const std::string& data_dir, const char* name, void (*usage)(const std::string&)) {
  if (!path.empty()) return;
  if (data_dir.empty()) usage(std::string("no --data directory (or $SHRINK_LLM_DATA_DIR) for ") + name);
  path = data_dir + "/" + name;
}

std::int64_t positive(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < 1 || v > 1'000'000)
    usage(flag + ": '" + value + "' is not a count in [1, 10^6]");
  return v;
}

double fraction(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v >= 0.0 && v < 1.0)) usage(flag + ": '" + value + "' is not in [0, 1)");
  return v;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("SHRINK_LLM_DATA_DIR")) o.data_dir = env;
  std::string recipes = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("compresses SmolLM2-135M every way shrink can and measures perplexity");
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--data")
      o.data_dir = value;
    else if (flag == "--model")
      o.model = value;
    else if (flag == "--eval-text")
      o.eval_text = value;
    else if (flag == "--calibration-text")
      o.calibration_text = value;
    else if (flag == "--recipes")
      recipes = value;
    else if (flag == "--window")
      o.eval.window = o.calibration.window = positive(flag, value);
    else if (flag == "--windows")
      o.eval.count = positive(flag, value);
    else if (flag == "--calibration-windows")
      o.calibration.count = positive(flag, value);
    else if (flag == "--threads")
      o.threads = static_cast<int>(positive(flag, value));
    else if (flag == "--json")
      o.json = value;
    else if (flag == "--write-ids")
      o.write_ids = value;
    else if (flag == "--write-calibration-ids")
      o.write_calibration_ids = value;
    else if (flag == "--write-calibration-stats")
      o.write_calibration_stats = value;
    else if (flag == "--write-logits")
      o.write_logits = value;
    else if (flag == "--hessian-jitter")
      o.hessian_jitter.eps = fraction(flag, value);
    else if (flag == "--jitter-seed")
      o.hessian_jitter.seed = static_cast<std::uint64_t>(positive(flag, value));
    else
      usage("unknown option " + flag);
  }
  if (o.eval.window < 2) usage("--window: at least 2 tokens");
  in_data(o.model, o.data_dir, "SmolLM2-135M-Instruct.Q4_1.gguf", usage);
  in_data(o.eval_text, o.data_dir, "hamlet.txt", usage);
  in_data(o.calibration_text, o.data_dir, "macbeth.txt", usage);
  if (recipes == "all") {
    for (const auto& r : llm::kRecipes) o.recipes.push_back(r.name);
  } else if (recipes != "none") {
    o.recipes = split(recipes);
    try {
      for (const std::string& r : o.recipes) llm::recipe_info(r);  // unknown names fail here, before loading
    } catch (const shrink::Error& e) {
      usage(std::string("--recipes: ") + e.what());
    }
  }
  return o;
}

nlohmann::json row_json(const llm::TableRow& r) {
  return {{"recipe", r.recipe},
          {"path", r.path},
          {"perplexity", r.eval.perplexity()},
          {"change_percent", r.delta_percent},
          {"nll_sum", r.eval.nll_sum},
          {"predictions", r.eval.predictions},
          {"weight_bytes", r.weight_bytes},
          {"compress_seconds", r.compress_seconds},
          {"calibration_seconds", r.calibration_seconds},
          {"forward_seconds", r.eval.seconds},
          {"tokens_per_second", r.eval.tokens_per_second()}};
}

[[noreturn]] void generate_usage(const std::string& why) {
  std::fprintf(
      stderr,
      "shrink_llm generate: %s\n"
      "usage: shrink_llm generate --prompt TEXT [--chat [--system TEXT]] [--recipe NAME] [--max-tokens N]\n"
      "                  [--temperature T] [--top-k K] [--top-p P] [--seed S] [--kv-cache f32|f16|int8]\n"
      "                  [--context N] [--threads N] [--data DIR] [--model FILE] [--calibration-text FILE]\n"
      "                  [--calibration-windows N] [--head auto|f32|f16|bf16|int8] [--json FILE]\n"
      "  --chat        the prompt as the user's message in the model's chat template (ChatML), the answer\n"
      "                generated; --system replaces the template's default system message\n"
      "  --temperature 0 (the default) is greedy; top-k 0 and top-p 1 (the defaults) limit nothing\n"
      "  --kv-cache    the keys and values as f32 (default), f16, or int8 with a scale per head and position\n"
      "  --context     positions the cache holds (default: the prompt and --max-tokens)\n"
      "  --head        the output head's storage (auto: f32 for base, f16/bf16 for those recipes, else int8)\n",
      why.c_str());
  std::exit(2);
}

double number(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v)) generate_usage(flag + ": '" + value + "' is not a number");
  return v;
}

llm::GenerateCommand parse_generate(int argc, char** argv) {
  llm::GenerateCommand o;
  if (const char* env = std::getenv("SHRINK_LLM_DATA_DIR")) o.data_dir = env;
  bool has_prompt = false;
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") generate_usage("one recipe's model answers a prompt");
    if (flag == "--chat") {
      o.chat = true;
      continue;
    }
    if (i + 1 >= argc) generate_usage(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      if (flag == "--prompt")
        o.prompt = value, has_prompt = true;
      else if (flag == "--system")
        o.system = value, o.has_system = true;
      else if (flag == "--recipe")
        o.recipe = llm::recipe_info(value).name;
      else if (flag == "--max-tokens")
        o.generation.max_tokens = positive(flag, value);
      else if (flag == "--temperature")
        o.generation.sampling.temperature = static_cast<float>(number(flag, value));
      else if (flag == "--top-k")
        o.generation.sampling.top_k = value == "0" ? 0 : positive(flag, value);
      else if (flag == "--top-p")
        o.generation.sampling.top_p = static_cast<float>(number(flag, value));
      else if (flag == "--seed")
        o.generation.sampling.seed = static_cast<std::uint64_t>(value == "0" ? 0 : positive(flag, value));
      else if (flag == "--kv-cache")
        o.kv = llm::kv_form_from_name(value);
      else if (flag == "--head")
        o.head = value == "auto" ? value : llm::head_form_name(llm::head_form_from_name(value));
      else if (flag == "--context")
        o.context = positive(flag, value);
      else if (flag == "--threads")
        o.threads = static_cast<int>(positive(flag, value));
      else if (flag == "--data")
        o.data_dir = value;
      else if (flag == "--model")
        o.model = value;
      else if (flag == "--calibration-text")
        o.calibration_text = value;
      else if (flag == "--calibration-windows")
        o.calibration.count = positive(flag, value);
      else if (flag == "--json")
        o.json = value;
      else
        generate_usage("unknown option " + flag);
    } catch (const shrink::Error& e) {
      generate_usage(flag + ": " + e.what());
    }
  }
  if (!has_prompt) generate_usage("no --prompt");
  if (o.has_system && !o.chat) generate_usage("--system needs --chat");
  try {
    llm::check_sampling(o.generation.sampling);
  } catch (const shrink::Error& e) {
    generate_usage(e.what());
  }
  in_data(o.model, o.data_dir, "SmolLM2-135M-Instruct.Q4_1.gguf", generate_usage);
  const llm::RecipeInfo& r = llm::recipe_info(o.recipe);
  if (r.calibrated || r.sequential) in_data(o.calibration_text, o.data_dir, "macbeth.txt", generate_usage);
  return o;
}

int run(const Options& o) {
  std::unique_ptr<shrink::ThreadPoolExecutor> pool;
  if (o.threads > 0) {
    pool = std::make_unique<shrink::ThreadPoolExecutor>(o.threads);
    shrink::set_executor(pool.get());
  }
  const int threads = shrink::current_executor().concurrency();

  const llm::BpeTokenizer tokenizer = llm::smollm_tokenizer_from_gguf(o.model);
  llm::TableInputs in;
  in.eval_ids = tokenizer.encode(llm::read_file_text(o.eval_text));
  in.eval_span = o.eval;
  llm::require_span(in.eval_ids, in.eval_span, o.eval_text);
  if (!o.write_ids.empty()) {
    const auto* bytes = reinterpret_cast<const char*>(in.eval_ids.data());
    llm::write_file_atomically(o.write_ids, std::string(bytes, bytes + in.eval_ids.size() * sizeof(std::int32_t)));
  }
  in.calibration_ids = tokenizer.encode(llm::read_file_text(o.calibration_text));
  if (!o.write_calibration_ids.empty()) {
    const auto* bytes = reinterpret_cast<const char*>(in.calibration_ids.data());
    llm::write_file_atomically(o.write_calibration_ids,
                               std::string(bytes, bytes + in.calibration_ids.size() * sizeof(std::int32_t)));
  }
  if (o.recipes.empty() && o.write_calibration_stats.empty() && o.write_logits.empty()) return 0;
  in.calibration_span = o.calibration;
  in.hessian_jitter = o.hessian_jitter;
  in.recipes = o.recipes;

  const llm::LlamaWeights weights = llm::load_llama_gguf(o.model);
  if (!o.write_logits.empty()) {
    const llm::CompressedModel base = llm::compress_model(weights, llm::kRecipes[0], llm::float_head(weights), nullptr);
    std::vector<float> logits;
    llm::forward_window(base, in.eval_ids.data(), o.eval.window, nullptr, &logits);
    const auto* bytes = reinterpret_cast<const char*>(logits.data());
    llm::write_file_atomically(o.write_logits, std::string(bytes, bytes + logits.size() * sizeof(float)));
    std::printf("logits: positions 0 .. %lld of %s's first window, [%lld, %lld] float32, written to %s\n",
                static_cast<long long>(o.eval.window - 2), o.eval_text.c_str(),
                static_cast<long long>(o.eval.window - 1), static_cast<long long>(weights.config.vocab),
                o.write_logits.c_str());
    if (o.recipes.empty() && o.write_calibration_stats.empty()) return 0;
  }
  if (!o.write_calibration_stats.empty()) {
    const auto start = std::chrono::steady_clock::now();
    const std::int64_t tokens =
        llm::write_calibration_statistics(weights, in.calibration_ids, o.calibration, o.write_calibration_stats);
    std::printf("calibration statistics: %lld tokens of %s through the float model, written to %s in %.1f s\n",
                static_cast<long long>(tokens), o.calibration_text.c_str(), o.write_calibration_stats.c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (o.recipes.empty()) return 0;
  }
  in.weights = &weights;
  std::printf("model %s: %lld blocks, width %lld, %lld heads (%lld KV), vocabulary %lld\n", o.model.c_str(),
              static_cast<long long>(weights.config.blocks), static_cast<long long>(weights.config.width),
              static_cast<long long>(weights.config.heads), static_cast<long long>(weights.config.kv_heads),
              static_cast<long long>(weights.config.vocab));
  std::printf("evaluation: %s, %lld windows of %lld tokens (of %zu); calibration: %s, %lld windows; %d threads\n",
              o.eval_text.c_str(), static_cast<long long>(o.eval.count), static_cast<long long>(o.eval.window),
              in.eval_ids.size(), o.calibration_text.c_str(), static_cast<long long>(o.calibration.count), threads);
  llm::print_table_header(stdout);
  const llm::Table table = llm::run_table(in, [](const llm::TableRow& r) { llm::print_table_row(stdout, r); });
  if (table.calibration_tokens > 0)
    std::printf("calibration: %lld tokens through the float model in %.2f s (not in the compress times)\n",
                static_cast<long long>(table.calibration_tokens), table.calibration_seconds);

  if (!o.json.empty()) {
    nlohmann::json j = {{"model", o.model},
                        {"threads", threads},
                        {"evaluation", {{"text", o.eval_text}, {"window", o.eval.window}, {"windows", o.eval.count}}},
                        {"calibration",
                         {{"text", o.calibration_text},
                          {"window", o.calibration.window},
                          {"windows", o.calibration.count},
                          {"tokens", table.calibration_tokens},
                          {"seconds", table.calibration_seconds},
                          {"hessian_jitter", o.hessian_jitter.eps}}},
                        {"rows", nlohmann::json::array()}};
    for (const auto& r : table.rows) j["rows"].push_back(row_json(r));
    llm::write_file_atomically(o.json, j.dump(1) + "\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "generate") {
    const llm::GenerateCommand command = parse_generate(argc, argv);
    try {
      return llm::run_generate(command);
    } catch (const shrink::Error& e) {
      std::fprintf(stderr, "shrink_llm generate: %s\n", e.what());
      return 1;
    }
  }
  const Options options = parse(argc, argv);
  try {
    return run(options);
  } catch (const shrink::Error& e) {
    std::fprintf(stderr, "shrink_llm: %s\n", e.what());
    return 1;
  }
}
