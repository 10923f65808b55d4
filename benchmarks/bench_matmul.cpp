// The CPU matrix-product paths of a Linear layer Y[M, N] = X[M, K] · W[N, K]ᵀ, single thread: Eigen's FP32 GEMM (the
// baseline, as this file is compiled), shrink's FP32 panel kernel, FP16 / BF16 / INT8 weight-only, INT4 weight-only in
// groups of 128 (symmetric, and affine with zero points: the zero point's cost side by side), INT8 W8A8
// (dynamic per-token activations included), CSR at 90% sparsity and 2:4, for LLM-like shapes (N, K) = (4096, 4096)
// and (11008, 4096) at M = 1, 16, 128 rows; ratios against the baseline measured in the same run.
// Each iteration's time is the thread's CPU time (a shared machine steals wall time; a quiet one shows the same).
#include <benchmark/benchmark.h>

#include <time.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "shrink/linear/csr.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/product_data.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using shrink::bench::RatioTarget;

// One weight in every form the paths read, built once per shape.
struct Weights {
  std::int64_t n = 0, k = 0;
  std::vector<float> dense;
  cpu::PackedWeight<float> f32;
  cpu::PackedWeight<half> f16;
  cpu::PackedWeight<bfloat16> bf16;
  cpu::PackedWeight<std::int8_t> int8_weight_only;
  cpu::PackedInt4Weight int4_g128;         // symmetric int4, groups of 128
  cpu::PackedInt4Weight int4_affine_g128;  // uint4 with zero points, groups of 128 (GPTQ / AWQ style)
  cpu::PackedInt8Weight int8;
  sparse::Csr<float> csr90;
  sparse::NmCompressed<float> nm24;
};

const Weights& weights(std::int64_t n, std::int64_t k) {
  static std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Weights>> cache;
  auto& slot = cache[{n, k}];
  if (slot) return *slot;
  slot = std::make_unique<Weights>();
  Weights& w = *slot;
  w.n = n;
  w.k = k;
  w.dense = shrink::bench::product_weights(n, k);
  const TensorView<const float> view(w.dense.data(), Shape{n, k});
  w.f32 = cpu::pack_weight(view);
  w.f16 = cpu::pack_weight_as<half>(view);
  w.bf16 = cpu::pack_weight_as<bfloat16>(view);
  const auto q =
      quant::quantize(view, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  w.int8_weight_only = cpu::pack_weight(q);
  w.int8 = cpu::pack_int8_weight(q);
  w.int4_g128 = cpu::pack_weight_int4(quant::quantize(
      view, quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::symmetric, 1, 128)));
  w.int4_affine_g128 = cpu::pack_weight_int4(
      quant::quantize(view, quant::QuantScheme::per_group(quant::QuantDtype::uint4, quant::Symmetry::affine, 1, 128)));
  w.csr90 = sparse::to_csr(view, prune::l1_unstructured_mask(view, prune::Amount::fraction(0.9)));
  w.nm24 = sparse::compress_nm(view, prune::NmPattern{2, 4});
  return w;
}

std::vector<float> activations(std::int64_t m, std::int64_t k) { return shrink::bench::product_activations(m, k); }

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Times `product(x, out)` with the thread's CPU time; reports the dense-equivalent flops 2·M·N·K.
template <class Product>
void run_product(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, Product product) {
  const std::vector<float> x = activations(m, k);
  std::vector<float> out(static_cast<std::size_t>(m * n));
  const TensorView<const float> xv(x.data(), Shape{m, k});
  const TensorView<float> ov(out.data(), Shape{m, n});
  product(xv, ov);  // warm-up: first touch of the output, weights into cache
  for (auto _ : state) {
    const double start = thread_seconds();
    product(xv, ov);
    benchmark::ClobberMemory();
    state.SetIterationTime(thread_seconds() - start);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

struct Path {
  const char* name;
  void (*run)(const Weights&, TensorView<const float>, TensorView<float>);
};

const Path kPaths[] = {
    {"eigen_f32",
     [](const Weights& w, TensorView<const float> x, TensorView<float> y) {
       cpu::linear_f32_eigen(x, TensorView<const float>(w.dense.data(), Shape{w.n, w.k}), y);
     }},
    {"f32", [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_f32(x, w.f32, y); }},
    {"f16_weights",
     [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_weight_only(x, w.f16, y); }},
    {"bf16_weights",
     [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_weight_only(x, w.bf16, y); }},
    {"int8_weight_only", [](const Weights& w, TensorView<const float> x,
                            TensorView<float> y) { cpu::linear_weight_only(x, w.int8_weight_only, y); }},
    {"int4_weight_only", [](const Weights& w, TensorView<const float> x,
                            TensorView<float> y) { cpu::linear_weight_only(x, w.int4_g128, y); }},
    {"int4_affine_weight_only", [](const Weights& w, TensorView<const float> x,
                                   TensorView<float> y) { cpu::linear_weight_only(x, w.int4_affine_g128, y); }},
    {"int8_w8a8",
     [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_int8_dynamic(x, w.int8, y); }},
    {"csr_90",
     [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_csr(x, w.csr90, y); }},
    {"nm_2of4", [](const Weights& w, TensorView<const float> x, TensorView<float> y) { cpu::linear_nm(x, w.nm24, y); }},
};

std::string benchmark_name(const char* path, std::int64_t n, std::int64_t k, std::int64_t m) {
  return std::string("matmul/") + path + "/" + std::to_string(n) + "x" + std::to_string(k) + "/M" + std::to_string(m);
}

// The name Google Benchmark reports a manually timed benchmark under (the ratio table's key).
std::string run_name(const char* path, std::int64_t n, std::int64_t k, std::int64_t m) {
  return benchmark_name(path, n, k, m) + "/manual_time";
}

const bool registered = [] {
  using Measure = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {11008, 4096}}) {
    for (std::int64_t m : {1, 16, 128}) {
      for (const Path& path : kPaths) {
        benchmark::RegisterBenchmark(
            benchmark_name(path.name, n, k, m).c_str(),
            [path, n = n, k = k, m](benchmark::State& state) {
              const Weights& w = weights(n, k);
              run_product(state, m, n, k, [&](TensorView<const float> x, TensorView<float> y) { path.run(w, x, y); });
            })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
      const std::string base = run_name("eigen_f32", n, k, m), ours = run_name("f32", n, k, m);
      const std::string shape = std::to_string(n) + "x" + std::to_string(k) + " M=" + std::to_string(m);
      // Time ratios: below 1 is faster than the baseline (1 / speedup).
      t.push_back({ours, base, Measure::time, 0.0, "shrink FP32 panel kernel / Eigen FP32, " + shape});
      t.push_back({run_name("int8_w8a8", n, k, m), base, Measure::time, m == 128 ? 1 / 1.5 : 0.0,
                   "INT8 W8A8 / Eigen FP32, " + shape + (m == 128 ? " (>= 1.5x faster)" : "")});
      t.push_back({run_name("int8_w8a8", n, k, m), ours, Measure::time, 0.0, "INT8 W8A8 / shrink FP32, " + shape});
      const double weight_only_target = m == 1 ? 0.5 : m == 128 ? 1 / 0.8 : 0.0;
      t.push_back({run_name("int8_weight_only", n, k, m), base, Measure::time, weight_only_target,
                   "INT8 weight-only / Eigen FP32, " + shape +
                       (m == 1     ? " (>= 2x faster)"
                        : m == 128 ? " (>= 0.8x the speed)"
                                   : "")});
      t.push_back({run_name("int8_weight_only", n, k, m), ours, Measure::time, 0.0,
                   "INT8 weight-only / shrink FP32, " + shape});
      t.push_back({run_name("int4_weight_only", n, k, m), ours, Measure::time, 0.0,
                   "INT4 weight-only (g128) / shrink FP32, " + shape});
      t.push_back({run_name("int4_affine_weight_only", n, k, m), run_name("int4_weight_only", n, k, m), Measure::time,
                   0.0, "INT4 affine (zero points) / INT4 symmetric weight-only, " + shape});
      t.push_back({run_name("f16_weights", n, k, m), ours, Measure::time, 0.0, "FP16 weights / shrink FP32, " + shape});
      t.push_back(
          {run_name("bf16_weights", n, k, m), ours, Measure::time, 0.0, "BF16 weights / shrink FP32, " + shape});
      t.push_back({run_name("csr_90", n, k, m), base, Measure::time, m == 128 ? 1 / 1.5 : 0.0,
                   "CSR 90% / Eigen FP32 dense, " + shape + (m == 128 ? " (>= 1.5x faster)" : "")});
      t.push_back({run_name("csr_90", n, k, m), ours, Measure::time, 0.0, "CSR 90% / shrink FP32 dense, " + shape});
      t.push_back({run_name("nm_2of4", n, k, m), ours, Measure::time, 0.0, "2:4 / shrink FP32 dense, " + shape});
    }
  }
  // A planned layer against the one-call form on small layers at M = 1 (decode), where the per-call checks
  // (the bias read for NaN and inf, the weight's layout) weigh most against a small product.
  for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{512, 512}, {2048, 512}}) {
    const std::int64_t m = 1;
    auto bias = std::make_shared<std::vector<float>>(shrink::bench::product_activations(1, n));
    const auto epilogue = [bias, n = n] {
      return Epilogue::with_bias(TensorView<const float>(bias->data(), Shape{n}));
    };
    benchmark::RegisterBenchmark(benchmark_name("int4_weight_only_bias", n, k, m).c_str(),
                                 [n = n, k = k, epilogue](benchmark::State& state) {
                                   const Weights& w = weights(n, k);
                                   const Epilogue e = epilogue();
                                   run_product(state, 1, n, k, [&](TensorView<const float> x, TensorView<float> y) {
                                     cpu::linear_weight_only(x, w.int4_g128, y, e);
                                   });
                                 })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(
        benchmark_name("int4_weight_only_bias_planned", n, k, m).c_str(),
        [n = n, k = k, epilogue](benchmark::State& state) {
          const Weights& w = weights(n, k);
          const auto plan = cpu::make_plan(w.int4_g128, epilogue());
          run_product(state, 1, n, k, [&](TensorView<const float> x, TensorView<float> y) { cpu::run(plan, x, y); });
        })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    t.push_back(
        {run_name("int4_weight_only_bias_planned", n, k, m), run_name("int4_weight_only_bias", n, k, m), Measure::time,
         0.0,
         "INT4 weight-only with bias, planned / one call, " + std::to_string(n) + "x" + std::to_string(k) + " M=1"});
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
