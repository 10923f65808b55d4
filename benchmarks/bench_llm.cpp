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
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
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
#include "support/ratio_table.hpp"
#include "tokenizer_gguf.hpp"

extern char** environ;

namespace {

using shrink::bench::RatioTarget;

constexpr const char* kModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
constexpr const char* kTextFile = "hamlet.txt";
constexpr std::int64_t kWindows[] = {512, 128};
constexpr const char* kRecipes[] = {"w8a8", "w4-g64", "mag-2:4", "mag-50"};

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

std::string from_environment(const char* name, const char* configured) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : configured;
}

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

shrink::Executor& executor_of(int threads) {
  static std::map<int, std::unique_ptr<shrink::ThreadPoolExecutor>> pools;
  auto& pool = pools[threads];
  if (!pool) pool = std::make_unique<shrink::ThreadPoolExecutor>(threads);
  return *pool;
}

// The model and the text's tokens, loaded once, on first use; the recipes' models compressed on first use.
struct Data {
  llm::LlamaWeights weights;
  std::vector<std::int32_t> ids;  // the text's first tokens (the longest window)
  std::shared_ptr<const shrink::cpu::PackedWeight<float>> head;
  std::map<std::string, std::unique_ptr<llm::CompressedModel>> models;
  std::set<std::pair<std::string, int>> warm;  // (recipe, threads) run once already
};

Data& data() {
  static std::unique_ptr<Data> d;
  if (d) return *d;
  d = std::make_unique<Data>();
  const Paths& p = paths();
  std::ifstream in(p.text(), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  d->ids = llm::smollm_tokenizer_from_gguf(p.model()).encode(text);
  llm::require_span(d->ids, llm::WindowSpan{kWindows[0], 1}, p.text());
  d->ids.resize(static_cast<std::size_t>(kWindows[0]));
  d->weights = llm::load_llama_gguf(p.model());
  d->head = std::make_shared<const shrink::cpu::PackedWeight<float>>(
      shrink::cpu::pack_weight(d->weights.output_head().view()));
  return *d;
}

const llm::CompressedModel& model(const std::string& recipe) {
  Data& d = data();
  auto& slot = d.models[recipe];
  if (!slot)
    slot = std::make_unique<llm::CompressedModel>(
        llm::compress_model(d.weights, llm::recipe_info(recipe), d.head, nullptr));
  return *slot;
}

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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Runs `argv` with `environment`, its output into `log`; the exit status, or a negative value when it could not run.
int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                const std::string& log) {
  std::vector<char*> args, env;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : environment) env.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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
  const std::string names[] = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE"};
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const std::string& name : names) replaced = replaced || entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  env.push_back("OPENBLAS_NUM_THREADS=" + std::to_string(threads));
  env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
  if (!core.empty()) env.push_back("OPENBLAS_CORETYPE=" + core);
  return env;
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

// A readable path, or the reason it is not.
bool readable(const std::string& path, const char* what) {
  if (access(path.c_str(), R_OK) == 0) return true;
  std::fprintf(stderr, "bench_llm: %s %s: %s\n", what, path.c_str(), std::strerror(errno));
  return false;
}

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
  if (!readable(p.model(), "the model") || !readable(p.text(), "the text") ||
      !readable(p.reference_forward, "the PyTorch forward") || !readable(p.torch_python, "the torch Python"))
    return false;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/shrink-bench-llm-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "bench_llm: cannot make a temporary directory %s: %s\n", pattern.c_str(),
                 std::strerror(errno));
    return false;
  }
  p.work_dir = pattern;
  const std::vector<std::int32_t>& ids = data().ids;
  for (std::int64_t window : kWindows) {
    std::ofstream out(p.ids(window), std::ios::binary);
    out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(window * sizeof(std::int32_t)));
    if (!out.flush()) {
      std::fprintf(stderr, "bench_llm: cannot write %s\n", p.ids(window).c_str());
      return false;
    }
  }
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
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::string(argv[i]) == "--benchmark_list_tests=true" ||
              std::string(argv[i]) == "--benchmark_list_tests";
  if (!listing) {
    try {
      if (!prepare()) {
        remove_work_dir();
        return 1;
      }
    } catch (const shrink::Error& e) {
      std::fprintf(stderr, "bench_llm: %s\n", e.what());
      remove_work_dir();
      return 1;
    }
  }
  shrink::set_executor(&shrink::serial_executor());
  shrink::bench::RecordingReporter reporter;
  const bool ran = shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv, 3), reporter);
  remove_work_dir();
  if (!ran) return 1;
  shrink::bench::print_ratio_table(reporter);
  return 0;
}
