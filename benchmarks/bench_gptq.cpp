// GPTQ (quant/gptq.hpp) on SmolLM2-135M's four Linear shapes, Hessians given, one thread: each Linear alone (its
// factor made for it) and in parts (the factor; the column loop given it), the whole model's time estimated both
// ways; and the PyTorch reference of tests/golden/gen_gptq.py on the same shapes, timed in one subprocess (Debian's
// python3-torch, one thread, OpenBLAS told the core type this CPU is, so it does not fall back to its SSE3 kernels)
// for the "5x faster" ratio, per shape and for the 210 Linears.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
#include "support/calibration_data.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;
using shrink::bench::RatioTarget;

#ifndef SHRINK_BENCH_SOURCE_DIR
#define SHRINK_BENCH_SOURCE_DIR "."
#endif

// 4-bit symmetric, groups of 64 (128 does not divide 576: see docs/quantization.md), block 128.
GptqOptions options() {
  GptqOptions o;
  o.group_size = 64;
  return o;
}

// One Linear alone: its factor, then the column loop.
void BM_gptq(benchmark::State& state) {
  const std::int64_t out = state.range(0), in = state.range(1);
  const std::vector<float> w = bench::calibration_weight(out, in);
  const Hessian& h = bench::calibration_hessian(in);
  for (auto _ : state) {
    QuantizedTensor q = gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), h, options());
    benchmark::DoNotOptimize(q.data.data());
  }
}
BENCHMARK(BM_gptq)
    ->Args({576, 576})
    ->Args({192, 576})
    ->Args({1536, 576})
    ->Args({576, 1536})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The factor alone (dead inputs, damping, Cholesky, inverse): once per input, shared by the Linears reading it.
void BM_gptq_factor(benchmark::State& state) {
  const Hessian& h = bench::calibration_hessian(state.range(0));
  for (auto _ : state) {
    InverseHessianFactor f = inverse_hessian_factor(h, inverse_hessian_options(options()));
    benchmark::DoNotOptimize(f.upper.data());
  }
}
BENCHMARK(BM_gptq_factor)->Arg(576)->Arg(1536)->Unit(benchmark::kMillisecond)->MinTime(0.5);

// The column loop given the factor.
void BM_gptq_given_factor(benchmark::State& state) {
  const std::int64_t out = state.range(0), in = state.range(1);
  const std::vector<float> w = bench::calibration_weight(out, in);
  const InverseHessianFactor f =
      inverse_hessian_factor(bench::calibration_hessian(in), inverse_hessian_options(options()));
  for (auto _ : state) {
    QuantizedTensor q = gptq_quantize(TensorView<const float>(w.data(), Shape{out, in}), f, options());
    benchmark::DoNotOptimize(q.data.data());
  }
}
BENCHMARK(BM_gptq_given_factor)
    ->Args({576, 576})
    ->Args({192, 576})
    ->Args({1536, 576})
    ->Args({576, 1536})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The PyTorch reference on the four shapes, run once: `gen_gptq.py --time 576x576 ...` prints "OUTxIN seconds".
const std::map<std::string, double>& reference_seconds() {
  static const std::map<std::string, double> seconds = [] {
    std::map<std::string, double> out;
    // OpenBLAS picks its kernels from the CPU model and falls back to SSE3 on models it does not know; the core type
    // of an AVX-512 (or AVX2) CPU gives the reference the kernels this CPU runs best. A value already set is kept.
    const char* core = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : "";
    const std::string command =
        std::string("OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ") +
        (*core && !std::getenv("OPENBLAS_CORETYPE") ? std::string("OPENBLAS_CORETYPE=") + core + " " : "") +
        "/usr/bin/python3 " + SHRINK_BENCH_SOURCE_DIR +
        "/tests/golden/gen_gptq.py --time 576x576 192x576 1536x576 576x1536 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return out;
    char shape[32];
    double s = 0.0;
    while (std::fscanf(pipe, "%31s %lf", shape, &s) == 2) out[shape] = s;
    pclose(pipe);
    return out;
  }();
  return seconds;
}

void BM_gptq_pytorch_reference(benchmark::State& state) {
  const std::string shape = std::to_string(state.range(0)) + "x" + std::to_string(state.range(1));
  const auto& seconds = reference_seconds();
  const auto it = seconds.find(shape);
  for (auto _ : state) {
    if (it == seconds.end()) {
      state.SkipWithError("the PyTorch reference did not run (needs Debian's python3-torch)");
      return;
    }
    state.SetIterationTime(it->second);
  }
}
BENCHMARK(BM_gptq_pytorch_reference)
    ->Args({576, 576})
    ->Args({192, 576})
    ->Args({1536, 576})
    ->Args({576, 1536})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

double seconds_of(const shrink::bench::RecordingReporter& reporter, const std::string& name) {
  const auto* r = reporter.find(name);
  return r == nullptr ? -1.0 : r->second.seconds;
}

}  // namespace

int main(int argc, char** argv) {
  auto& targets = shrink::bench::ratio_targets();
  for (const char* shape : {"576/576", "192/576", "1536/576", "576/1536"})
    targets.push_back({std::string("BM_gptq/") + shape, std::string("BM_gptq_pytorch_reference/") + shape,
                       RatioTarget::Measure::time, 0.2,
                       "GPTQ step at least 5x faster than the PyTorch reference, same thread count"});
  set_executor(&serial_executor());
  shrink::bench::RecordingReporter reporter;
  if (!shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv, 2), reporter)) return 1;
  shrink::bench::print_ratio_table(reporter);
  // SmolLM2-135M: 30 blocks of q, o [576, 576], k, v [192, 576], gate, up [1536, 576], down [576, 1536]; q, k, v read
  // one input, gate and up another.
  const std::pair<const char*, int> per_block[] = {{"576/576", 2}, {"192/576", 2}, {"1536/576", 2}, {"576/1536", 1}};
  double alone = 0.0, reference = 0.0, shared = 0.0;
  for (const auto& [shape, count] : per_block) {
    const double a = seconds_of(reporter, std::string("BM_gptq/") + shape);
    const double r = seconds_of(reporter, std::string("BM_gptq_pytorch_reference/") + shape);
    const double g = seconds_of(reporter, std::string("BM_gptq_given_factor/") + shape);
    alone = a < 0 || alone < 0 ? -1.0 : alone + 30.0 * count * a;
    reference = r < 0 || reference < 0 ? -1.0 : reference + 30.0 * count * r;
    shared = g < 0 || shared < 0 ? -1.0 : shared + 30.0 * count * g;
  }
  const double f576 = seconds_of(reporter, "BM_gptq_factor/576"), f1536 = seconds_of(reporter, "BM_gptq_factor/1536");
  shared = shared < 0 || f576 < 0 || f1536 < 0 ? -1.0 : shared + 30.0 * (3.0 * f576 + f1536);
  std::printf("\nSmolLM2-135M, all 210 Linears, GPTQ step, Hessians given, 1 thread (target < 30 s):\n");
  if (alone >= 0) std::printf("  each Linear alone          %7.2f s\n", alone);
  if (shared >= 0) std::printf("  factors shared (4 a block) %7.2f s\n", shared);
  if (reference >= 0) std::printf("  PyTorch reference          %7.2f s\n", reference);
  if (alone > 0 && reference >= 0)
    std::printf("  reference / shrink alone   %7.2fx (target >= 5x)\n", reference / alone);
  return 0;
}
