// The FP32 and INT8 products at 1 thread and at every hardware thread, against PyTorch's CPU backends on this
// machine at the same thread count, in the same run: OpenBLAS sgemm (Debian's torch runs F.linear on the system
// BLAS) and oneDNN (2.6, the version PyTorch 1.13 bundles; its matmul is the FP32 path of torch's mkldnn backend and
// the INT8 path of its onednn quantized engine, Debian's torch having no FBGEMM). Shapes: the LLM-like
// (N, K) = (4096, 4096) and (11008, 4096) at M = 1, 16 and 128 rows.
//   FP32: Y = X · Wᵀ, W [N, K] row-major (a Linear layer's weight).
//   INT8: X int8 per tensor, W int8 per output channel, exact int32 sums, out = sx · sw[n] · acc as float; shrink's
//         linear_int8 and oneDNN's s8 × s8 → f32 matmul with per-channel output scales (activations quantized
//         before the timing in both).
// Time = wall clock of one product (threads are used); shrink runs on a ThreadPoolExecutor of T threads, OpenBLAS
// with openblas_set_num_threads(T), oneDNN with omp_set_num_threads(T). Built when oneDNN (libdnnl-dev), OpenBLAS
// (libopenblas-dev) and OpenMP are found (benchmarks/CMakeLists.txt).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <time.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "shrink/core/executor.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/product_data.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using shrink::bench::RatioTarget;

double wall_seconds() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int all_threads() { return default_thread_count(); }

Executor& executor_of(int threads) {
  static std::map<int, std::unique_ptr<ThreadPoolExecutor>> pools;
  if (threads == 1) return serial_executor();
  auto& pool = pools[threads];
  if (!pool) pool = std::make_unique<ThreadPoolExecutor>(threads);
  return *pool;
}

// One weight and its int8 form, built once per shape.
struct Weights {
  std::int64_t n = 0, k = 0;
  std::vector<float> dense;
  cpu::PackedWeight<float> f32;
  quant::QuantizedTensor int8;
  cpu::PackedInt8Weight int8_packed;
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
  w.int8 =
      quant::quantize(view, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  w.int8_packed = cpu::pack_int8_weight(w.int8);
  return w;
}

std::vector<float> activations(std::int64_t m, std::int64_t k) { return shrink::bench::product_activations(m, k); }

// Times run() by the wall clock after one warm-up call; reports the dense flops 2·M·N·K.
template <class Run>
void time_product(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, Run run) {
  run();
  for (auto _ : state) {
    const double start = wall_seconds();
    run();
    benchmark::ClobberMemory();
    state.SetIterationTime(wall_seconds() - start);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void shrink_f32(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  const Weights& w = weights(n, k);
  const std::vector<float> x = activations(m, k);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  ScopedExecutor scope(executor_of(threads));
  time_product(state, m, n, k, [&] {
    cpu::linear_f32(TensorView<const float>(x.data(), Shape{m, k}), w.f32, TensorView<float>(y.data(), Shape{m, n}));
  });
}

void openblas_f32(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  const Weights& w = weights(n, k);
  const std::vector<float> x = activations(m, k);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  openblas_set_num_threads(threads);
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  time_product(state, m, n, k, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mi, ni, ki, 1.0f, x.data(), ki, w.dense.data(), ki, 0.0f,
                y.data(), ni);
  });
}

// oneDNN's matmul of src [M, K] by W [N, K] read as weights [K, N] (format tag ba), f32 or s8, into f32.
struct OnednnMatmul {
  dnnl::matmul primitive;
  dnnl::memory src, weights, dst;
  dnnl::stream stream{cpu_engine()};

  OnednnMatmul(std::int64_t m, std::int64_t n, std::int64_t k, dnnl::memory::data_type type, const void* x,
               const void* w, const std::vector<float>* output_scales) {
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src_md({m, k}, type, tag::ab), wei_md({k, n}, type, tag::ba),
        dst_md({m, n}, dnnl::memory::data_type::f32, tag::ab);
    dnnl::primitive_attr attr;
    if (output_scales != nullptr) attr.set_output_scales(1 << 1, *output_scales);  // one scale per column n
    primitive =
        dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), attr, cpu_engine()));
    src = dnnl::memory(src_md, cpu_engine(), const_cast<void*>(x));
    weights = dnnl::memory(wei_md, cpu_engine(), const_cast<void*>(w));
    dst = dnnl::memory(dst_md, cpu_engine());
  }
  void run() {
    primitive.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }
};

void onednn_f32(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  const Weights& w = weights(n, k);
  const std::vector<float> x = activations(m, k);
  omp_set_num_threads(threads);
  OnednnMatmul matmul(m, n, k, dnnl::memory::data_type::f32, x.data(), w.dense.data(), nullptr);
  time_product(state, m, n, k, [&] { matmul.run(); });
}

// The activations quantized per tensor (symmetric int8), as both INT8 paths take them.
quant::QuantizedTensor int8_activations(std::int64_t m, std::int64_t k) {
  const std::vector<float> x = activations(m, k);
  return quant::quantize(TensorView<const float>(x.data(), Shape{m, k}),
                         quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric));
}

void shrink_int8(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  const Weights& w = weights(n, k);
  const quant::QuantizedTensor xq = int8_activations(m, k);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  ScopedExecutor scope(executor_of(threads));
  time_product(state, m, n, k, [&] { cpu::linear_int8(xq, w.int8_packed, TensorView<float>(y.data(), Shape{m, n})); });
}

void onednn_int8(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  const Weights& w = weights(n, k);
  const quant::QuantizedTensor xq = int8_activations(m, k);
  std::vector<float> scales(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j)
    scales[static_cast<std::size_t>(j)] = xq.qparams.scale[0] * w.int8.qparams.scale[static_cast<std::size_t>(j)];
  omp_set_num_threads(threads);
  OnednnMatmul matmul(m, n, k, dnnl::memory::data_type::s8, xq.data.data(), w.int8.data.data(), &scales);
  time_product(state, m, n, k, [&] { matmul.run(); });
}

std::string benchmark_name(const char* path, std::int64_t n, std::int64_t k, std::int64_t m, int threads) {
  return std::string("threads/") + path + "/" + std::to_string(n) + "x" + std::to_string(k) + "/M" + std::to_string(m) +
         "/T" + std::to_string(threads);
}

std::string run_name(const char* path, std::int64_t n, std::int64_t k, std::int64_t m, int threads) {
  return benchmark_name(path, n, k, m, threads) + "/manual_time";
}

using Bench = void (*)(benchmark::State&, std::int64_t, std::int64_t, std::int64_t, int);
struct Path {
  const char* name;
  Bench run;
};
const Path kPaths[] = {{"f32_shrink", shrink_f32},
                       {"f32_openblas", openblas_f32},
                       {"f32_onednn", onednn_f32},
                       {"int8_shrink", shrink_int8},
                       {"int8_onednn", onednn_int8}};

const bool registered = [] {
  using Measure = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  std::vector<int> thread_counts{1};
  if (all_threads() > 1) thread_counts.push_back(all_threads());
  for (auto [n, k] : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {11008, 4096}}) {
    for (std::int64_t m : {1, 16, 128}) {
      for (int threads : thread_counts) {
        for (const Path& path : kPaths)
          benchmark::RegisterBenchmark(
              benchmark_name(path.name, n, k, m, threads).c_str(),
              [path, n = n, k = k, m, threads](benchmark::State& state) { path.run(state, m, n, k, threads); })
              ->UseManualTime()
              ->Unit(benchmark::kMillisecond);
        const std::string at = std::to_string(n) + "x" + std::to_string(k) + " M=" + std::to_string(m) + ", " +
                               std::to_string(threads) + (threads == 1 ? " thread" : " threads");
        // Time ratios: below 1 is faster than the baseline.
        t.push_back({run_name("f32_shrink", n, k, m, threads), run_name("f32_openblas", n, k, m, threads),
                     Measure::time, 0.0, "shrink FP32 / OpenBLAS sgemm, " + at});
        t.push_back({run_name("f32_shrink", n, k, m, threads), run_name("f32_onednn", n, k, m, threads), Measure::time,
                     0.0, "shrink FP32 / oneDNN f32 matmul, " + at});
        t.push_back({run_name("int8_shrink", n, k, m, threads), run_name("int8_onednn", n, k, m, threads),
                     Measure::time, 0.0, "shrink INT8 / oneDNN s8 matmul, " + at});
        if (threads > 1) {
          t.push_back({run_name("f32_shrink", n, k, m, threads), run_name("f32_shrink", n, k, m, 1), Measure::time, 0.0,
                       "shrink FP32, " + at + " / 1 thread"});
          t.push_back({run_name("int8_shrink", n, k, m, threads), run_name("int8_shrink", n, k, m, 1), Measure::time,
                       0.0, "shrink INT8, " + at + " / 1 thread"});
        }
      }
    }
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
