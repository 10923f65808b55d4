// Generation speed of the LLM example (examples/llm/: SmolLM2-135M-Instruct) against llama.cpp on the same machine,
// model, tokens and thread count, in the same run (issue 32):
//
//   BM_shrink_prefill/<recipe>/threads:T     llm::Decoder::feed of the first 512 tokens of hamlet.txt from an empty
//                                            KV cache (f16, as llama.cpp's default cache): every block's products at
//                                            M = 512, the head for the last token only, as generation runs a prompt.
//   BM_shrink_decode/<recipe>/threads:T      after those 512 (untimed), the next 128 tokens fed one at a time: 128
//                                            passes at M = 1, each with the next token's logits.
//   BM_llamacpp_prefill/<format>/threads:T   the same through llama.cpp's own API (llama-cpp-python 0.3.36, built by
//   BM_llamacpp_decode/<format>/threads:T    pip from its source for this machine), benchmarks/llm/llama_cpp_speed.py
//                                            in a subprocess: the same ids, one eval of 512, then 128 evals of one;
//                                            the median of 3 rounds after a warm-up, measured once per (format,
//                                            threads) and reported by every repetition. Its formats are made from
//                                            the source GGUF by llama.cpp's quantizer and kept in <data>/llama-cpp.
//
// The recipes face llama.cpp's format of the same bits: base - F32, fp16 - F16, w8 - Q8_0, w4-g64 and w4a8-g64 -
// Q4_0 (Q4_0 multiplies by activations quantized to 8 bits per block of 32, as w4a8-g64 per group of 64; w4-g64 keeps
// float activations), each with the head `shrink_llm generate` gives it (recipes.hpp's generation_head_form: f32, f16,
// int8, int8; llama.cpp's quantizer keeps the tied embedding F32, F16, Q8_0, Q8_0). T is 1 and every hardware thread.
// Each row reports tokens/s. The targets (time ratios, below 1 faster than llama.cpp): decode and prefill at least
// llama.cpp's speed at the same bits, and W4 decode (both 4-bit recipes) at least 2.5x shrink's own FP32 decode.
//
// Needs the data of scripts/fetch-llm-data.sh and the Python of `scripts/python-env.sh llama`: configured as
// SHRINK_LLM_DATA_DIR and SHRINK_LLAMA_CPP_PYTHON3 (benchmarks/CMakeLists.txt); the environment variables of the same
// names override them at run time.
#include <benchmark/benchmark.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "decoder.hpp"
#include "llama_gguf.hpp"
#include "perplexity.hpp"
#include "recipes.hpp"
#include "shrink/core/executor.hpp"
#include "support/llm_inputs.hpp"
#include "support/peer_program.hpp"
#include "support/ratio_table.hpp"
#include "support/subprocess.hpp"
#include "tokenizer_gguf.hpp"

namespace {

using shrink::bench::executor_of;
using shrink::bench::from_environment;
using shrink::bench::RatioTarget;
using shrink::bench::read_file;
using shrink::bench::readable;
using shrink::bench::wall_seconds;

constexpr const char* kProgram = "bench_llm_generate";
constexpr const char* kModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kTextFile = "hamlet.txt";
constexpr std::int64_t kPrompt = 512;
constexpr std::int64_t kDecode = 128;
constexpr llm::KvForm kCacheForm = llm::KvForm::f16;  // llama.cpp's default KV cache type: the same bytes to read
// (shrink recipe, llama.cpp format of the same bits)
const std::vector<std::pair<std::string, std::string>> kPairs = {
    {"base", "F32"}, {"fp16", "F16"}, {"w8", "Q8_0"}, {"w4-g64", "Q4_0"}, {"w4a8-g64", "Q4_0"}};

struct Paths {
  std::string data_dir = from_environment("SHRINK_LLM_DATA_DIR", SHRINK_BENCH_LLM_DATA_DIR);
  std::string llama_python = from_environment("SHRINK_LLAMA_CPP_PYTHON3", SHRINK_BENCH_LLAMA_CPP_PYTHON3);
  std::string script = SHRINK_BENCH_LLAMA_CPP_SPEED;
  std::string work_dir;  // a temporary directory for the ids and the script's JSON, removed at exit

  std::string model() const { return data_dir + "/" + kModelFile; }
  std::string text() const { return data_dir + "/" + kTextFile; }
  std::string formats_dir() const { return data_dir + "/llama-cpp"; }
  std::string ids() const { return work_dir + "/ids.bin"; }
  std::string result() const { return work_dir + "/llama-cpp.json"; }
  std::string log() const { return work_dir + "/llama-cpp.log"; }
};

Paths& paths() {
  static Paths p;
  return p;
}

int all_threads() { return shrink::default_thread_count(); }

struct Data : shrink::bench::LlmInputs {
  using LlmInputs::LlmInputs;
  std::map<std::pair<std::string, int>, nlohmann::json> llama_cpp;  // (format, threads) -> the script's result
};

// The model and the text's first kPrompt + kDecode tokens, loaded once, on first use.
Data& data() {
  static std::unique_ptr<Data> d;
  if (!d) d = std::make_unique<Data>(paths().model(), paths().text(), kPrompt + kDecode);
  return *d;
}

// The recipe's model with the head `shrink_llm generate` gives it (recipes.hpp's generation_head_form).
const llm::CompressedModel& model(const std::string& recipe) {
  Data& d = data();
  const bool first = d.models.count(recipe) == 0;
  llm::CompressedModel& m = d.model(recipe);
  if (first) m.head = llm::compress_head(d.weights, llm::generation_head_form(llm::recipe_info(recipe)));
  return m;
}

void rate(benchmark::State& state, std::int64_t tokens) {
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
}

void shrink_prefill(benchmark::State& state, const std::string& recipe, int threads) {
  const llm::CompressedModel& m = model(recipe);
  const std::vector<std::int32_t>& ids = data().ids;
  shrink::ScopedExecutor scope(executor_of(threads));
  llm::Decoder decoder(m, kPrompt + kDecode, kCacheForm);
  decoder.feed(ids.data(), kPrompt);  // warm-up
  for (auto _ : state) {
    decoder.clear();
    const double start = wall_seconds();
    benchmark::DoNotOptimize(decoder.feed(ids.data(), kPrompt).data());
    state.SetIterationTime(wall_seconds() - start);
  }
  rate(state, kPrompt);
}

void shrink_decode(benchmark::State& state, const std::string& recipe, int threads) {
  const llm::CompressedModel& m = model(recipe);
  const std::vector<std::int32_t>& ids = data().ids;
  shrink::ScopedExecutor scope(executor_of(threads));
  llm::Decoder decoder(m, kPrompt + kDecode, kCacheForm);
  for (auto _ : state) {
    decoder.clear();
    decoder.feed(ids.data(), kPrompt);
    const double start = wall_seconds();
    for (std::int64_t t = kPrompt; t < kPrompt + kDecode; ++t)
      benchmark::DoNotOptimize(decoder.feed(&ids[static_cast<std::size_t>(t)], 1).data());
    state.SetIterationTime(wall_seconds() - start);
  }
  rate(state, kDecode);
}

// llama.cpp's result for (format, threads), measured on first use; an empty object (and `why`) when it failed.
const nlohmann::json& llama_cpp_result(const std::string& format, int threads, std::string& why) {
  Data& d = data();
  const auto key = std::make_pair(format, threads);
  const auto found = d.llama_cpp.find(key);
  if (found != d.llama_cpp.end()) return found->second;
  const Paths& p = paths();
  const std::vector<std::string> argv = {p.llama_python, p.script,
                                         "--source",     p.model(),
                                         "--format",     format,
                                         "--work",       p.formats_dir(),
                                         "--ids",        p.ids(),
                                         "--prompt",     std::to_string(kPrompt),
                                         "--decode",     std::to_string(kDecode),
                                         "--threads",    std::to_string(threads),
                                         "--json",       p.result()};
  std::remove(p.result().c_str());
  const int status = shrink::bench::run_process(
      argv, shrink::bench::environment_with({{"OMP_NUM_THREADS", std::to_string(threads)}}), p.log());
  nlohmann::json result = nlohmann::json::object();
  if (status == 0) result = nlohmann::json::parse(read_file(p.result()), nullptr, false);
  if (status != 0 || !result.is_object() || !result.contains("decode_seconds")) {
    why = "llama_cpp_speed.py " +
          (status == 0 ? std::string("wrote no result") : "exited with " + std::to_string(status)) +
          "; the end of its output:\n" + read_file(p.log()).substr(0, 4000);
    result = nlohmann::json::object();
  } else {
    std::fprintf(stderr, "llama.cpp %s, %d threads: %s\n", format.c_str(), threads,
                 result.value("system_info", std::string()).c_str());
  }
  return d.llama_cpp.emplace(key, result).first->second;
}

void llama_cpp(benchmark::State& state, const std::string& format, int threads, bool decode) {
  std::string why;
  const nlohmann::json& r = llama_cpp_result(format, threads, why);
  for (auto _ : state) {
    if (r.empty()) {
      state.SkipWithError(why.empty() ? "llama_cpp_speed.py failed earlier for this format" : why.c_str());
      break;
    }
    state.SetIterationTime(r[decode ? "decode_seconds" : "prefill_seconds"].get<double>());
  }
  rate(state, decode ? kDecode : kPrompt);
}

std::string row(const std::string& who, const std::string& what, const std::string& precision, int threads) {
  return "BM_" + who + "_" + what + "/" + precision + "/threads:" + std::to_string(threads);
}

std::string at(int threads) { return std::to_string(threads) + (threads == 1 ? " thread" : " threads"); }

const bool registered = [] {
  using Measure = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  // Built whole: GCC 12 warns (-Warray-bounds, a false positive) on a push_back into the one-element vector.
  const std::vector<int> thread_counts = all_threads() > 1 ? std::vector<int>{1, all_threads()} : std::vector<int>{1};
  for (int threads : thread_counts) {
    std::set<std::string> formats;  // llama.cpp's rows once per format
    for (const auto& [recipe, format] : kPairs) {
      benchmark::RegisterBenchmark(
          row("shrink", "prefill", recipe, threads).c_str(),
          [recipe = recipe, threads](benchmark::State& s) { shrink_prefill(s, recipe, threads); })
          ->UseManualTime()
          ->Iterations(2)
          ->Unit(benchmark::kMillisecond);
      const bool first_use = formats.insert(format).second;
      if (first_use)
        benchmark::RegisterBenchmark(
            row("llamacpp", "prefill", format, threads).c_str(),
            [format = format, threads](benchmark::State& s) { llama_cpp(s, format, threads, false); })
            ->UseManualTime()
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          row("shrink", "decode", recipe, threads).c_str(),
          [recipe = recipe, threads](benchmark::State& s) { shrink_decode(s, recipe, threads); })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
      if (first_use)
        benchmark::RegisterBenchmark(
            row("llamacpp", "decode", format, threads).c_str(),
            [format = format, threads](benchmark::State& s) { llama_cpp(s, format, threads, true); })
            ->UseManualTime()
            ->Iterations(1)
            ->Unit(benchmark::kMillisecond);
    }
  }
  for (int threads : thread_counts) {
    for (const char* w4 : {"w4-g64", "w4a8-g64"})
      t.push_back(
          {row("shrink", "decode", w4, threads), row("shrink", "decode", "base", threads), Measure::time, 1.0 / 2.5,
           std::string("shrink ") + w4 + " decode / shrink FP32 decode, " + at(threads) + " (at least 2.5x faster)"});
    for (const auto& [recipe, format] : kPairs) {
      t.push_back({row("shrink", "prefill", recipe, threads), row("llamacpp", "prefill", format, threads),
                   Measure::time, 1.0,
                   "shrink " + recipe + " prefill (512) / llama.cpp " + format + " prefill, " + at(threads)});
      t.push_back({row("shrink", "decode", recipe, threads), row("llamacpp", "decode", format, threads), Measure::time,
                   1.0, "shrink " + recipe + " decode (128) / llama.cpp " + format + " decode, " + at(threads)});
    }
  }
  return true;
}();

// Checks the inputs, writes the token ids the script reads; false, having said why, when something is missing.
bool prepare() {
  Paths& p = paths();
  if (p.data_dir.empty() || p.llama_python.empty()) {
    std::fprintf(stderr,
                 "bench_llm_generate: no %s: configure with -DSHRINK_LLM_DATA_DIR=$(scripts/fetch-llm-data.sh) "
                 "-DSHRINK_LLAMA_CPP_PYTHON3=$(scripts/python-env.sh llama), or set those environment variables\n",
                 p.data_dir.empty() ? "LLM data directory" : "llama.cpp Python");
    return false;
  }
  if (!readable(kProgram, p.model(), "the model") || !readable(kProgram, p.text(), "the text") ||
      !readable(kProgram, p.script, "the llama.cpp timing script") ||
      !readable(kProgram, p.llama_python, "the llama.cpp Python"))
    return false;
  p.work_dir = shrink::bench::make_work_dir(kProgram, "shrink-bench-generate");
  if (p.work_dir.empty()) return false;
  const std::vector<std::int32_t>& ids = data().ids;
  return shrink::bench::write_int32s(kProgram, p.ids(), ids.data(), ids.size());
}

void remove_work_dir() {
  const Paths& p = paths();
  if (p.work_dir.empty()) return;
  for (const std::string& f : {p.ids(), p.result(), p.log()}) std::remove(f.c_str());
  rmdir(p.work_dir.c_str());
}

}  // namespace

// Three repetitions unless chosen (llama.cpp is measured once per format and thread count), then the table.
int main(int argc, char** argv) {
  return shrink::bench::run_peer_program(argc, argv, kProgram, 3, prepare, remove_work_dir);
}
