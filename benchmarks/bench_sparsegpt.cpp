// SparseGPT (prune/sparsegpt.hpp) on SmolLM2-135M's four Linear shapes, Hessians given, one thread: 50% unstructured,
// 2:4, and 50% with 4-bit joint quantization; the whole model's time estimated from them; and the PyTorch reference
// of tests/golden/gen_sparsegpt.py at 50% on one 1536x576 layer, timed in a subprocess (Debian's python3-torch, one
// thread).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "shrink/prune/sparsegpt.hpp"
#include "shrink/quant/hessian.hpp"
#include "support/calibration_data.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::prune;
using shrink::bench::RatioTarget;

#ifndef SHRINK_BENCH_SOURCE_DIR
#define SHRINK_BENCH_SOURCE_DIR "."
#endif

// Mask and lazy blocks of 128 (the paper's), damping 1%; the factor made inside each iteration, as GPTQ's benchmark.
void run(benchmark::State& state, const SparseGptOptions& o) {
  const std::int64_t out = state.range(0), in = state.range(1);
  const std::vector<float> w = bench::calibration_weight(out, in);
  const quant::Hessian& h = bench::calibration_hessian(in);
  for (auto _ : state) {
    SparseGptResult r = sparsegpt_prune(TensorView<const float>(w.data(), Shape{out, in}), h, o);
    benchmark::DoNotOptimize(r.weight.data());
  }
}

void BM_sparsegpt_50(benchmark::State& state) { run(state, SparseGptOptions{}); }

void BM_sparsegpt_2of4(benchmark::State& state) {
  SparseGptOptions o;
  o.pattern = NmPattern{2, 4};
  run(state, o);
}

// 4-bit symmetric, groups of 64 (128 does not divide 576), as bench_gptq.cpp.
void BM_sparsegpt_50_4bit(benchmark::State& state) {
  SparseGptOptions o;
  o.quantize = true;
  o.group_size = 64;
  run(state, o);
}

#define SHRINK_SMOLLM2_SHAPES(bm)     \
  BENCHMARK(bm)                       \
      ->Args({576, 576})              \
      ->Args({192, 576})              \
      ->Args({1536, 576})             \
      ->Args({576, 1536})             \
      ->Unit(benchmark::kMillisecond) \
      ->MinTime(0.5)
SHRINK_SMOLLM2_SHAPES(BM_sparsegpt_50);
SHRINK_SMOLLM2_SHAPES(BM_sparsegpt_2of4);
SHRINK_SMOLLM2_SHAPES(BM_sparsegpt_50_4bit);

// The PyTorch reference on one 1536x576 layer: `gen_sparsegpt.py --time 1536 576` prints the seconds of its step.
void BM_sparsegpt_pytorch_reference(benchmark::State& state) {
  const std::string command = std::string("OMP_NUM_THREADS=1 /usr/bin/python3 ") + SHRINK_BENCH_SOURCE_DIR +
                              "/tests/golden/gen_sparsegpt.py --time 1536 576 2>/dev/null";
  for (auto _ : state) {
    FILE* pipe = popen(command.c_str(), "r");
    double seconds = -1.0;
    if (pipe == nullptr || std::fscanf(pipe, "%lf", &seconds) != 1 || (pclose(pipe), seconds < 0.0)) {
      state.SkipWithError("the PyTorch reference did not run (needs Debian's python3-torch)");
      return;
    }
    state.SetIterationTime(seconds);
  }
}
BENCHMARK(BM_sparsegpt_pytorch_reference)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  shrink::bench::ratio_targets() = {
      {"BM_sparsegpt_50/1536/576", "BM_sparsegpt_pytorch_reference", RatioTarget::Measure::time, 0.2,
       "SparseGPT step at least 5x faster than the PyTorch reference, same thread count"},
  };
  set_executor(&serial_executor());
  shrink::bench::RecordingReporter reporter;
  if (!shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv, 2), reporter)) return 1;
  shrink::bench::print_ratio_table(reporter);
  // SmolLM2-135M: 30 blocks of q, o [576, 576], k, v [192, 576], gate, up [1536, 576], down [576, 1536].
  const std::pair<const char*, int> per_block[] = {{"576/576", 2}, {"192/576", 2}, {"1536/576", 2}, {"576/1536", 1}};
  for (const char* method : {"BM_sparsegpt_50", "BM_sparsegpt_2of4", "BM_sparsegpt_50_4bit"}) {
    double total = 0.0;
    bool complete = true;
    for (const auto& [shape, count] : per_block) {
      const auto* r = reporter.find(std::string(method) + "/" + shape);
      if (r == nullptr) {
        complete = false;  // filtered out of this run
        break;
      }
      total += 30.0 * count * r->second.seconds;
    }
    if (complete)
      std::printf("SmolLM2-135M, all 210 Linears (%s, Hessians given, 1 thread): %.2f s estimated\n", method, total);
  }
  return 0;
}
