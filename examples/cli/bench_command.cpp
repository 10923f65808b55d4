// `shrink bench`: times Y = X · Wᵀ at every precision on this machine (CPU rows at 1 thread and at every hardware
// thread, through shrink's executor; GPU rows on CUDA device 0 when the command is built with the CUDA layer and a
// device is found), with the error of each against the CPU fp32 output, and writes the table, bench.json, bench.svg
// (CPU rows) and bench-gpu.svg (GPU rows, when there are some).
#include "bench_command.hpp"

#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_data.hpp"
#include "bench_gpu.hpp"
#include "bench_precisions.hpp"
#include "bench_report.hpp"
#include "progress.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/cpu/gemm_int8.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cli {
namespace {

constexpr const char* kCommand = "shrink bench";

struct Shape2 {
  std::int64_t n = 0, k = 0;
};

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Timing {
  double cpu = 0, wall = 0;
  std::int64_t repetitions = 0;
};

// Best of at least `min_runs` runs, and of as many more as fit in `min_time` seconds (at most 1000).
Timing time_best(const std::function<void()>& run, double min_time, std::int64_t min_runs) {
  Timing t{std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity(), 0};
  const double start = wall_seconds();
  while (t.repetitions < min_runs || (wall_seconds() - start < min_time && t.repetitions < 1000)) {
    const double c0 = thread_seconds(), w0 = wall_seconds();
    run();
    const double c1 = thread_seconds(), w1 = wall_seconds();
    t.cpu = std::min(t.cpu, c1 - c0);
    t.wall = std::min(t.wall, w1 - w0);
    ++t.repetitions;
  }
  return t;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  return parts;
}

std::int64_t parse_size(const std::string& option, const std::string& text, std::int64_t max) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    throw UsageError(option + " = '" + text + "': expected positive integers");
  const double v = ArgParser::parse_number(option, text, 1, static_cast<double>(max));
  return static_cast<std::int64_t>(v);
}

// "4096x4096,11008x4096" -> (N, K) pairs.
std::vector<Shape2> parse_shapes(const std::string& text) {
  std::vector<Shape2> shapes;
  for (const std::string& item : split(text, ',')) {
    const auto parts = split(item, 'x');
    if (parts.size() != 2)
      throw UsageError("--shapes = '" + text + "': expected NxK[,NxK...] such as 4096x4096,11008x4096");
    shapes.push_back(Shape2{parse_size("--shapes", parts[0], 1 << 20), parse_size("--shapes", parts[1], 1 << 20)});
  }
  if (shapes.empty()) throw UsageError("--shapes is empty: expected NxK[,NxK...]");
  return shapes;
}

// "1,all" -> thread counts, "all" being default_thread_count(); each once, in the order given.
std::vector<int> parse_threads(const std::string& text) {
  std::vector<int> threads;
  for (const std::string& item : split(text, ',')) {
    const int t = item == "all" ? default_thread_count() : static_cast<int>(parse_size("--threads", item, 1024));
    if (std::find(threads.begin(), threads.end(), t) == threads.end()) threads.push_back(t);
  }
  if (threads.empty()) throw UsageError("--threads is empty: expected T[,T...] such as 1,all");
  return threads;
}

std::vector<std::int64_t> parse_batches(const std::string& text) {
  std::vector<std::int64_t> batches;
  for (const std::string& item : split(text, ',')) batches.push_back(parse_size("--batches", item, 1 << 16));
  if (batches.empty()) throw UsageError("--batches is empty: expected M[,M...] such as 1,16,128");
  return batches;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::string joined(const std::vector<std::string>& list) {
  std::string text;
  for (const std::string& item : list) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// The rows to run: CPU ones (fp32 first, always: the reference of speed and error) and GPU ones (in the order of
// gpu_precision_names(), the baseline first, always with the others; all of them when none is named).
struct Selection {
  std::vector<std::string> cpu = {"fp32"};
  std::vector<std::string> gpu;
  bool gpu_named = false;  // the command line named GPU rows
};

Selection parse_precisions(const std::string& text) {
  Selection s;
  if (text == "all") {
    s.cpu = cpu_precision_names();
    s.gpu = gpu_precision_names();
    return s;
  }
  std::vector<std::string> gpu_named;
  for (const std::string& item : split(text, ',')) {
    if (contains(cpu_precision_names(), item)) {
      if (!contains(s.cpu, item)) s.cpu.push_back(item);
    } else if (contains(gpu_precision_names(), item)) {
      gpu_named.push_back(item);
    } else {
      throw UsageError("--precisions: unknown '" + item + "': expected some of " + joined(cpu_precision_names()) +
                       ", " + joined(gpu_precision_names()));
    }
  }
  s.gpu_named = !gpu_named.empty();
  for (const std::string& name : gpu_precision_names())
    if (!s.gpu_named || name == kGpuBaseline || contains(gpu_named, name)) s.gpu.push_back(name);
  return s;
}

// The GPU rows' backend on device 0, or none: with --gpu off, in a build without CUDA, or without a usable device
// (--gpu auto: a note on stderr, unless this build has no CUDA and no GPU row was named; --gpu on: an error, exit 1).
std::unique_ptr<GpuBench> open_gpu(const std::string& mode, bool gpu_named) {
  if (mode == "off") return nullptr;
#ifdef SHRINK_CLI_HAS_CUDA
  const std::string unavailable = gpu_unavailable_reason();
  if (unavailable.empty()) return open_gpu_bench();
  const bool note = true;
  (void)gpu_named;
#else
  const std::string unavailable =
      "this shrink was built without CUDA (configure with the CUDA toolkit and SHRINK_ENABLE_CUDA=AUTO or ON)";
  const bool note = gpu_named;
#endif
  if (mode == "on") throw std::runtime_error("--gpu on: " + unavailable);
  if (note) std::fprintf(stderr, "%s: no GPU rows: %s\n", kCommand, unavailable.c_str());
  return nullptr;
}

// What every row derives from its time: GFLOP/s, the speedup against the CPU fp32 row (also its own speedup for a
// CPU row) and, given a price, the cost of a million rows.
void complete_result(BenchResult& r, double fp32_seconds, double price) {
  if (!r.not_run.empty()) return;
  r.gflops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k) / r.seconds * 1e-9;
  r.speedup_vs_fp32 = fp32_seconds / r.seconds;
  if (r.device == "cpu") r.speedup = r.speedup_vs_fp32;
  if (!std::isnan(price)) r.cost_per_million_rows = price / 3600.0 * r.seconds / static_cast<double>(r.m) * 1e6;
}

std::string cpu_model() {
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write '" + path.string() + "'");
}

// The command line of `shrink bench`.
void declare_bench_options(ArgParser& args) {
  args.option("shapes", "NxK,...", "weight shapes [N out, K in]", "4096x4096,11008x4096,4096x11008")
      .option("batches", "M,...", "rows of X (batch size or tokens)", "1,16,128")
      .option("precisions", "NAME,...",
              "rows besides fp32: fp32-eigen, fp16-weights, bf16-weights, int8-w8a8, int8-weight-only, 2:4-sparse, "
              "csr-90%; GPU rows (see --gpu): " +
                  joined(std::vector<std::string>(gpu_precision_names().begin() + 1, gpu_precision_names().end())) +
                  " (all of them when none is named; " + kGpuBaseline + ", their baseline, always runs with them)",
              "all")
      .option("gpu", "auto|on|off",
              "GPU rows on CUDA device 0: auto adds them when this shrink is built with CUDA and finds a device, on "
              "requires them (exit 1 without), off leaves them out",
              "auto")
      .option("threads", "T,...",
              "CPU thread counts to time every CPU row at (all = the hardware's, or SHRINK_NUM_THREADS)", "1,all")
      .option("min-time", "S", "seconds spent timing each row (at least 3 runs; the best is kept)", "0.2")
      .option("price-per-hour", "P",
              "machine price per hour: adds the cost of 1M rows per precision, P/3600 * s/row * 1e6")
      .option("out", "DIR", "directory for bench.json and bench.svg (created)", "shrink-bench")
      .option("seed", "N", "seed of the generated weights and activations", "1")
      .flag("quick", "a fast subset: 4096x4096 at M = 1 and 128, 0.05 s a row")
      .flag("json", "print the JSON on stdout instead of the table")
      .epilog(
          "Weights are normal(0, 0.02) with 0.1% outliers x10; activations Laplace with hot channels (LLM-like).\n"
          "Times are the best wall-clock time of repeated runs, at each --threads count (shrink's executor,\n"
          "results identical at every count); speedups compare rows at the same thread count. fp16/bf16/int8\n"
          "weight-only rows store the weight in fewer bits and compute in float; int8-w8a8 quantizes the\n"
          "activations per token at run time (included in its time) and sums in int32.\n"
          "\n"
          "GPU rows (a build with CUDA, a device of compute capability 8.0 or later): the same shapes and\n"
          "batches with half activations; time = the median over samples of 10 back-to-back products timed\n"
          "with CUDA events, each product reading another copy of the weight (from DRAM, not L2); speedup\n"
          "against gpu-fp16-cublas (cuBLAS FP16 GEMM), error against the CPU fp32 output. The weight-only rows\n"
          "(W8A16, W4A16 with groups of 128) run at M <= 64 only: n/a above. bench.svg charts the CPU rows,\n"
          "bench-gpu.svg the GPU rows.");
}

struct BenchSettings {
  std::vector<Shape2> shapes;
  std::vector<std::int64_t> batches;
  std::vector<int> threads;
  Selection selection;
  std::string gpu_mode;
  double min_time = 0.2;
  double price = NAN;
  unsigned seed = 1;
  std::filesystem::path out_dir;
  bool json_only = false;
};

// The parsed options, read in the order their errors are reported.
BenchSettings read_bench_settings(const ArgParser& args) {
  BenchSettings s;
  const bool quick = args.flag_set("quick");
  s.shapes = parse_shapes(args.text("shapes", quick ? "4096x4096" : "4096x4096,11008x4096,4096x11008"));
  s.batches = parse_batches(args.text("batches", quick ? "1,128" : "1,16,128"));
  s.threads = parse_threads(args.text("threads", "1,all"));
  s.selection = parse_precisions(args.text("precisions", "all"));
  s.gpu_mode = args.choice("gpu", {"auto", "on", "off"}, "auto");
  s.min_time = args.number("min-time", 0.0, 60.0, quick ? 0.05 : 0.2);
  s.price = args.number("price-per-hour", 0.0, 1e9, NAN);
  s.seed = static_cast<unsigned>(args.integer("seed", 0, 1LL << 31, 1));
  s.out_dir = args.text("out", "shrink-bench");
  s.json_only = args.flag_set("json");
  return s;
}

// Creates the output directory (and its parents), or throws saying why it cannot.
void create_output_directory(const std::filesystem::path& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    throw std::runtime_error("cannot create the output directory '" + out_dir.string() + "'" +
                             (ec ? ": " + ec.message() : ""));
}

// The report's description of this machine and of the timing, with no result yet.
BenchReport empty_report(double price, const GpuBench* gpu) {
  BenchReport report;
  report.cpu = cpu_model();
  report.simd = simd_text();
  report.timing = "time = best wall-clock time of at least 3 runs";
  report.hardware_threads = default_thread_count();
  report.price_per_hour = price;
  if (gpu) {
    report.gpu = gpu->description();
    report.gpu_timing = gpu->timing();
  }
  return report;
}

// The progress line of every row: one step each, counted over the whole run.
struct RowProgress {
  Progress progress{kCommand};
  std::size_t done = 0;
  std::size_t total = 0;
};

// Times one CPU row on x [M, K]; its output goes to `reference` when it is the CPU fp32 row (which then sets
// fp32_seconds), to `y` otherwise.
BenchResult time_cpu_row(const PreparedPrecision& row, const TensorView<const float>& xv, const Shape2& shape,
                         std::int64_t m, int threads, std::vector<float>& reference, std::vector<float>& y,
                         double& fp32_seconds, const BenchSettings& settings) {
  const bool is_reference = row.name == "fp32" && row.device == "cpu";
  std::vector<float>& out = is_reference ? reference : y;
  const TensorView<float> ov(out.data(), Shape{m, shape.n});
  const Timing t = time_best([&] { row.run(xv, ov); }, settings.min_time, 3);
  BenchResult r;
  r.device = row.device;
  r.precision = row.name;
  r.stored = row.stored;
  r.n = shape.n;
  r.k = shape.k;
  r.m = m;
  r.threads = threads;
  r.seconds = t.wall;
  r.wall_seconds = t.wall;
  r.cpu_seconds = t.cpu;
  r.repetitions = t.repetitions;
  if (is_reference) fp32_seconds = t.wall;
  r.weight_bytes = row.weight_bytes;
  measure_error(r, reference, out);
  complete_result(r, fp32_seconds, settings.price);
  return r;
}

// Every row of one shape at M = m: the CPU rows (fp32 first: the reference), then the GPU rows.
void bench_batch(BenchReport& report, const Shape2& shape, std::int64_t m, const std::vector<PreparedPrecision>& rows,
                 GpuBench* gpu, const BenchSettings& settings, RowProgress& progress) {
  const std::vector<float> x = llm_like_activations(m, shape.k, settings.seed + 1 + static_cast<unsigned>(m));
  const TensorView<const float> xv(x.data(), Shape{m, shape.k});
  std::vector<float> reference(static_cast<std::size_t>(m * shape.n)), y(reference.size());
  double fp32_seconds = NAN;  // of the thread count being timed; the last one's for the GPU rows
  const auto announce = [&](const std::string& name) {
    progress.progress.step(
        name + " " + std::to_string(shape.n) + "x" + std::to_string(shape.k) + " M=" + std::to_string(m),
        progress.done++, progress.total);
  };
  for (int threads : settings.threads) {
    ThreadPoolExecutor pool(threads);
    ScopedExecutor scope(threads == 1 ? static_cast<Executor&>(serial_executor()) : pool);
    for (const PreparedPrecision& row : rows) {
      announce(row.name + " " + std::to_string(threads) + (threads == 1 ? " thread" : " threads"));
      report.results.push_back(time_cpu_row(row, xv, shape, m, threads, reference, y, fp32_seconds, settings));
    }
  }
  if (gpu)
    for (BenchResult& r : gpu->run_batch(x, m, reference, settings.min_time, announce)) {
      complete_result(r, fp32_seconds, settings.price);
      report.results.push_back(r);
    }
}

// Every shape at every batch size: the weights of a shape are generated and prepared once for all its batches.
void bench_all(BenchReport& report, GpuBench* gpu, const BenchSettings& settings) {
  const std::vector<std::string>& precisions = settings.selection.cpu;
  RowProgress progress;
  const std::size_t rows_per_batch =
      precisions.size() * settings.threads.size() + (gpu ? settings.selection.gpu.size() : 0);
  progress.total = settings.shapes.size() * settings.batches.size() * rows_per_batch;
  for (const Shape2& shape : settings.shapes) {
    progress.progress.step("preparing the weights of " + std::to_string(shape.n) + "x" + std::to_string(shape.k),
                           progress.done, progress.total);
    const std::vector<float> w = llm_like_weights(shape.n, shape.k, settings.seed);
    const std::vector<PreparedPrecision> rows = prepare_cpu_precisions(w, shape.n, shape.k, precisions);
    if (gpu) gpu->prepare_shape(w, shape.n, shape.k, settings.selection.gpu);
    for (std::int64_t m : settings.batches) bench_batch(report, shape, m, rows, gpu, settings, progress);
  }
}

// Writes bench.json and bench.svg, and bench-gpu.svg with GPU rows (else removes a previous run's); returns the JSON.
Json write_outputs(const BenchReport& report, const std::filesystem::path& out_dir, bool has_gpu) {
  const Json json = bench_json(report);
  write_file(out_dir / "bench.json", json.dump(2) + "\n");
  write_file(out_dir / "bench.svg", bench_svg(report, ChartRows::cpu));
  const std::filesystem::path gpu_chart = out_dir / "bench-gpu.svg";
  std::error_code ec;
  if (has_gpu)
    write_file(gpu_chart, bench_svg(report, ChartRows::gpu));
  else
    std::filesystem::remove(gpu_chart, ec);  // a previous run's chart would not match this bench.json
  return json;
}

// Prints the JSON (--json), or the table and the files written.
void print_result(const BenchReport& report, const Json& json, const std::filesystem::path& out_dir, bool has_gpu,
                  bool json_only) {
  if (json_only) {
    std::printf("%s\n", json.dump(2).c_str());
    return;
  }
  print_bench_table(report, stdout);
  std::string written =
      (out_dir / "bench.json").string() + (has_gpu ? ", " : " and ") + (out_dir / "bench.svg").string();
  if (has_gpu) written += " and " + (out_dir / "bench-gpu.svg").string();
  std::printf("\nwrote %s\n", written.c_str());
}

int run(int argc, char** argv) {
  ArgParser args(kCommand,
                 "Time the matrix product of a Linear layer, Y[M,N] = X[M,K] * W[N,K]^T, at each precision on this "
                 "machine (CPU rows at each --threads count, and CUDA device 0 when there is one), with its speedup "
                 "and error against fp32, the bytes of the weight and, given a price, the cost of a million rows. "
                 "Prints a table and "
                 "writes bench.json and bench.svg (and bench-gpu.svg with GPU rows).");
  declare_bench_options(args);
  if (!args.parse(argc, argv)) return kExitOk;
  const BenchSettings settings = read_bench_settings(args);
  const std::unique_ptr<GpuBench> gpu = open_gpu(settings.gpu_mode, settings.selection.gpu_named);
  create_output_directory(settings.out_dir);

  BenchReport report = empty_report(settings.price, gpu.get());
  bench_all(report, gpu.get(), settings);
  const Json json = write_outputs(report, settings.out_dir, gpu != nullptr);
  print_result(report, json, settings.out_dir, gpu != nullptr, settings.json_only);
  return kExitOk;
}

}  // namespace

std::string simd_text() {
  switch (cpu::simd_level()) {
    case cpu::SimdLevel::avx512: return cpu::use_avx512_vnni() ? "AVX-512 + VNNI" : "AVX-512";
    case cpu::SimdLevel::avx2: return "AVX2";
    case cpu::SimdLevel::sse2: return "SSE2";
    case cpu::SimdLevel::scalar: return "scalar";
  }
  return "?";
}

int run_bench_command(int argc, char** argv) {
  return run_command(kCommand, [&] { return run(argc, argv); });
}

}  // namespace shrink::cli
