// The LLM example's forward pass (examples/llm/: SmolLM2-135M-Instruct from its GGUF) against PyTorch's on the same
// machine, thread count and tokens, in the same run (issue 18: "the FP32 forward at least as fast as PyTorch's").
//
//   BM_shrink_forward/base/threads:T    llm::forward_window of the base model (every linear FP32, cpu::linear_f32)
//                                       over the first 512 tokens of hamlet.txt: 30 blocks, the output head and the
//                                       log-softmax of all 511 predictions, under a ThreadPoolExecutor of T threads.
//   BM_pytorch_forward/base/threads:T   the same window through examples/llm/reference_forward.py (plain torch,
//                                       Debian's 1.13) in a subprocess, `--rows base --windows 1 --threads T`, with
//                                       OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set to T (torch.set_num_threads
//                                       sets OpenMP's count only; Debian's torch runs its matrix products on
//                                       OpenBLAS's own threads, which default to every core). The time reported is
//                                       the script's `seconds`: its forward pass alone (same work: 511 predictions,
//                                       head and log-softmax included), not Python's start-up or the model's loading.
//   .../window:128/threads:T            both again on the first 128 tokens.
//   BM_pytorch_forward/base/openblas:<core>/threads:T   PyTorch again with OPENBLAS_CORETYPE=<core> (SkylakeX with
//                                       AVX-512, else Haswell with AVX2): Debian's OpenBLAS 0.3.21 does not know
//                                       every recent CPU and then falls back to its SSE3 (Prescott) kernels, which
//                                       is what PyTorch runs on by default there; this row is PyTorch on the kernels
//                                       its BLAS would pick for a CPU it knows (information; the target is against
//                                       the default).
//   BM_shrink_forward/<recipe>/threads:H the compressed forwards (w8a8, w4-g64, mag-2:4, mag-50) at every hardware
//                                       thread H, shown against the FP32 one.
//
// T is 1 and every hardware thread (shrink's default_thread_count: SHRINK_NUM_THREADS overrides it). Wall-clock
// time of one forward pass; the shrink model is loaded, compressed and warmed by one untimed pass before its first
// timing. Each row also reports its tokens/s and the window's NLL sum (both sides compute the same sum, to about
// 1e-4 relative): the check that the two timed the same thing.
//
// Needs the data of scripts/fetch-llm-data.sh and the Python of `scripts/python-env.sh torch`: configured as
// SHRINK_LLM_DATA_DIR and SHRINK_TORCH_PYTHON3 (the target is not built without them: benchmarks/CMakeLists.txt);
// the environment variables of the same names override them at run time.
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
#include <vector>

#include "llama_forward.hpp"
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
using shrink::bench::run_process;
using shrink::bench::wall_seconds;

constexpr const char* kProgram = "bench_llm";
constexpr const char* kModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kTextFile = "hamlet.txt";
constexpr std::int64_t kWindows[] = {512, 128};
constexpr const char* kRecipes[] = {"w8a8", "w4-g64", "mag-2:4", "mag-50"};

// Where the inputs are: the configured paths, or the environment's.
struct Paths {
  std::string data_dir = from_environment("SHRINK_LLM_DATA_DIR", SHRINK_BENCH_LLM_DATA_DIR);
  std::string torch_python = from_environment("SHRINK_TORCH_PYTHON3", SHRINK_BENCH_TORCH_PYTHON3);
  std::string reference_forward = SHRINK_BENCH_REFERENCE_FORWARD;
  std::string work_dir;  // a temporary directory for the ids and the script's JSON, removed at exit

  std::string model() const { return data_dir + "/" + kModelFile; }
  std::string text() const { return data_dir + "/" + kTextFile; }
  std::string ids(std::int64_t window) const { return work_dir + "/ids-" + std::to_string(window) + ".bin"; }
  std::string result() const { return work_dir + "/reference.json"; }
  std::string log() const { return work_dir + "/reference.log"; }
};

Paths& paths() {
  static Paths p;
  return p;
}

int all_threads() { return shrink::default_thread_count(); }

// The model and the text's tokens, loaded once, on first use; the recipes' models compressed on first use.
struct Data : shrink::bench::LlmInputs {
  using LlmInputs::LlmInputs;
  std::set<std::pair<std::string, int>> warm;  // (recipe, threads) run once already
};

// The model and the text's first tokens (the longest window), loaded once, on first use.
Data& data() {
  static std::unique_ptr<Data> d;
  if (!d) d = std::make_unique<Data>(paths().model(), paths().text(), kWindows[0]);
  return *d;
}

const llm::CompressedModel& model(const std::string& recipe) { return data().model(recipe); }

void report(benchmark::State& state, std::int64_t window, double nll_sum) {
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(window) * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
  state.counters["nll_sum"] = nll_sum;
}

void shrink_forward(benchmark::State& state, const std::string& recipe, std::int64_t window, int threads) {
  const llm::CompressedModel& m = model(recipe);
  const std::int32_t* ids = data().ids.data();
  shrink::ScopedExecutor scope(executor_of(threads));
  if (data().warm.insert({recipe, threads}).second) llm::forward_window(m, ids, window);
  llm::WindowLoss loss;
  for (auto _ : state) {
    const double start = wall_seconds();
    loss = llm::forward_window(m, ids, window);
    benchmark::DoNotOptimize(loss);
    state.SetIterationTime(wall_seconds() - start);
  }
  report(state, window, loss.nll_sum);
}

// The OpenBLAS kernels this CPU can run that OpenBLAS_CORETYPE can name, or "" for none.
std::string openblas_core() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "Haswell" : "";
}

// This process's environment with the thread counts of OpenBLAS and OpenMP set to `threads`, and OpenBLAS's kernels
// forced to `core` unless it is empty (an OPENBLAS_CORETYPE of the caller's is dropped either way).
std::vector<std::string> environment_with_threads(int threads, const std::string& core) {
  std::vector<std::pair<std::string, std::string>> set = {{"OPENBLAS_NUM_THREADS", std::to_string(threads)},
                                                          {"OMP_NUM_THREADS", std::to_string(threads)}};
  if (!core.empty()) set.emplace_back("OPENBLAS_CORETYPE", core);
  return shrink::bench::environment_with(set, {"OPENBLAS_CORETYPE"});
}

void pytorch_forward(benchmark::State& state, std::int64_t window, int threads, const std::string& core) {
  const Paths& p = paths();
  const std::vector<std::string> argv = {
      p.torch_python, p.reference_forward,     "--gguf",    p.model(), "--ids",  p.ids(window),
      "--window",     std::to_string(window),  "--windows", "1",       "--rows", "base",
      "--threads",    std::to_string(threads), "--json",    p.result()};
  const std::vector<std::string> env = environment_with_threads(threads, core);
  double nll_sum = 0.0;
  for (auto _ : state) {
    std::remove(p.result().c_str());
    const int status = run_process(argv, env, p.log());
    nlohmann::json result;
    if (status == 0) result = nlohmann::json::parse(read_file(p.result()), nullptr, false);
    const bool complete = status == 0 && result.is_object() && result.contains("rows") &&
                          result["rows"].contains("base") && result.value("threads", 0) == threads &&
                          result["rows"]["base"].value("predictions", 0) == window - 1;
    if (!complete) {
      const std::string why = "reference_forward.py " +
                              (status == 0 ? "wrote no JSON with rows.base, " + std::to_string(threads) +
                                                 " threads and " + std::to_string(window - 1) + " predictions"
                                           : "exited with status " + std::to_string(status)) +
                              "; its output:\n" + read_file(p.log());
      state.SkipWithError(why.c_str());
      break;
    }
    state.SetIterationTime(result["rows"]["base"]["seconds"].get<double>());
    nll_sum = result["rows"]["base"]["nll_sum"].get<double>();
  }
  report(state, window, nll_sum);
}

std::string window_part(std::int64_t window) {
  return window == kWindows[0] ? "" : "window:" + std::to_string(window) + "/";
}

std::string shrink_name(const std::string& recipe, std::int64_t window, int threads) {
  return "BM_shrink_forward/" + recipe + "/" + window_part(window) + "threads:" + std::to_string(threads);
}

std::string pytorch_name(std::int64_t window, int threads, const std::string& core = "") {
  return "BM_pytorch_forward/base/" + (core.empty() ? "" : "openblas:" + core + "/") + window_part(window) +
         "threads:" + std::to_string(threads);
}

std::string at(std::int64_t window, int threads) {
  return std::to_string(window) + " tokens, " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

const bool registered = [] {
  using Measure = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  std::vector<int> thread_counts{1};
  if (all_threads() > 1) thread_counts.push_back(all_threads());
  const int most = thread_counts.back();
  for (std::int64_t window : kWindows)
    for (int threads : thread_counts) {
      benchmark::RegisterBenchmark(
          shrink_name("base", window, threads).c_str(),
          [window, threads](benchmark::State& s) { shrink_forward(s, "base", window, threads); })
          ->UseManualTime()
          ->Iterations(2)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(pytorch_name(window, threads).c_str(),
                                   [window, threads](benchmark::State& s) { pytorch_forward(s, window, threads, ""); })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
    }
  const std::string core = openblas_core();
  if (!core.empty())
    for (int threads : thread_counts)
      benchmark::RegisterBenchmark(
          pytorch_name(kWindows[0], threads, core).c_str(),
          [threads, core](benchmark::State& s) { pytorch_forward(s, kWindows[0], threads, core); })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  for (const char* recipe : kRecipes)
    benchmark::RegisterBenchmark(shrink_name(recipe, kWindows[0], most).c_str(),
                                 [recipe, most](benchmark::State& s) { shrink_forward(s, recipe, kWindows[0], most); })
        ->UseManualTime()
        ->Iterations(2)
        ->Unit(benchmark::kMillisecond);

  // Time ratios: below 1 is faster than the baseline. Information first, the target last.
  for (const char* recipe : kRecipes)
    t.push_back({shrink_name(recipe, kWindows[0], most), shrink_name("base", kWindows[0], most), Measure::time, 0.0,
                 std::string("shrink ") + recipe + " forward / shrink FP32 forward, " + at(kWindows[0], most)});
  if (most > 1) {
    t.push_back({shrink_name("base", kWindows[0], most), shrink_name("base", kWindows[0], 1), Measure::time, 0.0,
                 "shrink FP32 forward, " + at(kWindows[0], most) + " / 1 thread"});
    t.push_back({pytorch_name(kWindows[0], most), pytorch_name(kWindows[0], 1), Measure::time, 0.0,
                 "PyTorch FP32 forward, " + at(kWindows[0], most) + " / 1 thread"});
  }
  if (!core.empty())
    for (int threads : thread_counts)
      t.push_back({shrink_name("base", kWindows[0], threads), pytorch_name(kWindows[0], threads, core), Measure::time,
                   0.0,
                   "shrink FP32 forward / PyTorch FP32 forward on OpenBLAS's " + core + " kernels, " +
                       at(kWindows[0], threads)});
  for (std::int64_t window : {kWindows[1], kWindows[0]})
    for (int threads : thread_counts)
      t.push_back({shrink_name("base", window, threads), pytorch_name(window, threads), Measure::time, 1.0,
                   "shrink FP32 forward / PyTorch FP32 forward, " + at(window, threads)});
  return true;
}();

// Checks the inputs, writes the token ids the script reads; false, having said why, when something is missing.
bool prepare() {
  Paths& p = paths();
  if (p.data_dir.empty() || p.torch_python.empty()) {
    std::fprintf(stderr,
                 "bench_llm: no %s: configure with -DSHRINK_LLM_DATA_DIR=$(scripts/fetch-llm-data.sh) "
                 "-DSHRINK_TORCH_PYTHON3=$(scripts/python-env.sh torch), or set those environment variables\n",
                 p.data_dir.empty() ? "LLM data directory" : "torch Python");
    return false;
  }
  if (!readable(kProgram, p.model(), "the model") || !readable(kProgram, p.text(), "the text") ||
      !readable(kProgram, p.reference_forward, "the PyTorch forward") ||
      !readable(kProgram, p.torch_python, "the torch Python"))
    return false;
  p.work_dir = shrink::bench::make_work_dir(kProgram, "shrink-bench-llm");
  if (p.work_dir.empty()) return false;
  const std::vector<std::int32_t>& ids = data().ids;
  for (std::int64_t window : kWindows)
    if (!shrink::bench::write_int32s(kProgram, p.ids(window), ids.data(), static_cast<std::size_t>(window)))
      return false;
  return true;
}

void remove_work_dir() {
  const Paths& p = paths();
  if (p.work_dir.empty()) return;
  for (std::int64_t window : kWindows) std::remove(p.ids(window).c_str());
  std::remove(p.result().c_str());
  std::remove(p.log().c_str());
  rmdir(p.work_dir.c_str());
}

}  // namespace

// Three repetitions unless chosen (each PyTorch one starts Python and loads the model: about 10 s), then the table.
int main(int argc, char** argv) {
  return shrink::bench::run_peer_program(argc, argv, kProgram, 3, prepare, remove_work_dir);
}
