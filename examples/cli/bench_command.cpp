// `shrink bench`: times Y = X · Wᵀ at every precision on this machine (one CPU thread; GPU rows when a backend
// for them is built), with the error of each against fp32, and writes the table, bench.json and bench.svg.
#include "bench_command.hpp"

#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "args.hpp"
#include "bench_data.hpp"
#include "bench_precisions.hpp"
#include "bench_report.hpp"
#include "progress.hpp"
#include "shrink/cpu/gemm_int8.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/metrics/error.hpp"

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

std::vector<std::int64_t> parse_batches(const std::string& text) {
  std::vector<std::int64_t> batches;
  for (const std::string& item : split(text, ',')) batches.push_back(parse_size("--batches", item, 1 << 16));
  if (batches.empty()) throw UsageError("--batches is empty: expected M[,M...] such as 1,16,128");
  return batches;
}

std::vector<std::string> parse_precisions(const std::string& text) {
  std::vector<std::string> chosen = {"fp32"};  // always: the reference of speed and error
  for (const std::string& item : split(text, ',')) {
    const auto& known = cpu_precision_names();
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw UsageError("--precisions: unknown '" + item + "': expected some of " + list);
    }
    if (std::find(chosen.begin(), chosen.end(), item) == chosen.end()) chosen.push_back(item);
  }
  return chosen;
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

std::string simd_text() {
  switch (cpu::simd_level()) {
    case cpu::SimdLevel::avx512: return cpu::use_avx512_vnni() ? "AVX-512 + VNNI" : "AVX-512";
    case cpu::SimdLevel::avx2: return "AVX2";
    case cpu::SimdLevel::sse2: return "SSE2";
    case cpu::SimdLevel::scalar: return "scalar";
  }
  return "?";
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write '" + path.string() + "'");
}

int run(int argc, char** argv) {
  ArgParser args(kCommand,
                 "Time the matrix product of a Linear layer, Y[M,N] = X[M,K] * W[N,K]^T, at each precision on this "
                 "machine (one CPU thread), with its speedup and error against fp32, the bytes of the weight and, "
                 "given a price, the cost of a million rows. Prints a table and writes bench.json and bench.svg.");
  args.option("shapes", "NxK,...", "weight shapes [N out, K in]", "4096x4096,11008x4096,4096x11008")
      .option("batches", "M,...", "rows of X (batch size or tokens)", "1,16,128")
      .option(
          "precisions", "NAME,...",
          "rows besides fp32: fp32-eigen, fp16-weights, bf16-weights, int8-w8a8, int8-weight-only, 2:4-sparse, csr-90%",
          "all")
      .option("min-time", "S", "seconds spent timing each row (at least 3 runs; the best is kept)", "0.2")
      .option("price-per-hour", "P",
              "machine price per hour: adds the cost of 1M rows per precision, P/3600 * s/row * 1e6")
      .option("out", "DIR", "directory for bench.json and bench.svg (created)", "shrink-bench")
      .option("seed", "N", "seed of the generated weights and activations", "1")
      .flag("quick", "a fast subset: 4096x4096 at M = 1 and 128, 0.05 s a row")
      .flag("json", "print the JSON on stdout instead of the table")
      .epilog(
          "Weights are normal(0, 0.02) with 0.1% outliers x10; activations Laplace with hot channels (LLM-like).\n"
          "Times are the best thread CPU time of repeated runs (wall time is in the JSON). fp16/bf16/int8\n"
          "weight-only rows store the weight in fewer bits and compute in float; int8-w8a8 quantizes the\n"
          "activations per token at run time (included in its time) and sums in int32.");
  if (!args.parse(argc, argv)) return kExitOk;

  const bool quick = args.flag_set("quick");
  std::vector<Shape2> shapes =
      parse_shapes(args.text("shapes", quick ? "4096x4096" : "4096x4096,11008x4096,4096x11008"));
  std::vector<std::int64_t> batches = parse_batches(args.text("batches", quick ? "1,128" : "1,16,128"));
  const std::vector<std::string> precisions = args.has("precisions") && args.text("precisions", "") != "all"
                                                  ? parse_precisions(args.text("precisions", ""))
                                                  : cpu_precision_names();
  const double min_time = args.number("min-time", 0.0, 60.0, quick ? 0.05 : 0.2);
  const double price = args.number("price-per-hour", 0.0, 1e9, NAN);
  const auto seed = static_cast<unsigned>(args.integer("seed", 0, 1LL << 31, 1));
  const std::filesystem::path out_dir = args.text("out", "shrink-bench");
  const bool json_only = args.flag_set("json");

  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec || !std::filesystem::is_directory(out_dir))
    throw std::runtime_error("cannot create the output directory '" + out_dir.string() + "'" +
                             (ec ? ": " + ec.message() : ""));

  BenchReport report;
  report.cpu = cpu_model();
  report.simd = simd_text();
  report.timing = "time = best single-thread CPU time of at least 3 runs";
  report.price_per_hour = price;

  const Progress progress(kCommand);
  const std::size_t total = shapes.size() * batches.size() * precisions.size();
  std::size_t done = 0;
  for (const Shape2& shape : shapes) {
    progress.step("preparing the weights of " + std::to_string(shape.n) + "x" + std::to_string(shape.k), done, total);
    const std::vector<float> w = llm_like_weights(shape.n, shape.k, seed);
    const std::vector<PreparedPrecision> rows = prepare_cpu_precisions(w, shape.n, shape.k, precisions);
    for (std::int64_t m : batches) {
      const std::vector<float> x = llm_like_activations(m, shape.k, seed + 1 + static_cast<unsigned>(m));
      const TensorView<const float> xv(x.data(), Shape{m, shape.k});
      std::vector<float> reference(static_cast<std::size_t>(m * shape.n)), y(reference.size());
      double fp32_seconds = NAN;
      for (const PreparedPrecision& row : rows) {
        progress.step(
            row.name + " " + std::to_string(shape.n) + "x" + std::to_string(shape.k) + " M=" + std::to_string(m),
            done++, total);
        const bool is_reference = row.name == "fp32" && row.device == "cpu";
        std::vector<float>& out = is_reference ? reference : y;
        const TensorView<float> ov(out.data(), Shape{m, shape.n});
        const Timing t = time_best([&] { row.run(xv, ov); }, min_time, 3);
        BenchResult r;
        r.device = row.device;
        r.precision = row.name;
        r.stored = row.stored;
        r.n = shape.n;
        r.k = shape.k;
        r.m = m;
        r.seconds = t.cpu;
        r.wall_seconds = t.wall;
        r.repetitions = t.repetitions;
        r.gflops =
            2.0 * static_cast<double>(m) * static_cast<double>(shape.n) * static_cast<double>(shape.k) / t.cpu * 1e-9;
        if (is_reference) fp32_seconds = t.cpu;
        r.speedup = fp32_seconds / t.cpu;
        r.weight_bytes = row.weight_bytes;
        const metrics::ErrorStats e = metrics::error_stats(TensorView<const float>(reference.data(), Shape{m, shape.n}),
                                                           TensorView<const float>(out.data(), Shape{m, shape.n}));
        r.sqnr_db = e.sqnr_db;
        r.relative_error = std::isinf(e.sqnr_db) && e.sqnr_db > 0 ? 0.0 : std::pow(10.0, -e.sqnr_db / 20.0);
        if (!std::isnan(price)) r.cost_per_million_rows = price / 3600.0 * t.cpu / static_cast<double>(m) * 1e6;
        report.results.push_back(r);
      }
    }
  }

  const Json json = bench_json(report);
  write_file(out_dir / "bench.json", json.dump(2) + "\n");
  write_file(out_dir / "bench.svg", bench_svg(report));
  if (json_only) {
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    print_bench_table(report, stdout);
    std::printf("\nwrote %s and %s\n", (out_dir / "bench.json").string().c_str(),
                (out_dir / "bench.svg").string().c_str());
  }
  return kExitOk;
}

}  // namespace

int run_bench_command(int argc, char** argv) {
  return run_command(kCommand, [&] { return run(argc, argv); });
}

}  // namespace shrink::cli
