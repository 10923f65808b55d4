// GPU CSR SpMM (shrink::cuda::linear_csr): out[M, N] = X[M, K] · W[N, K]ᵀ with W pruned, for float, shrink::half and
// shrink::bfloat16, against baselines measured in the same run on the same data: cuSPARSE SpMM (CSR, each algorithm
// that accepts the layout), dense cuBLAS of the same precision on the unpruned weight (cublasSgemm; FP16/BF16 through
// cublas_baseline.hpp, tensor cores) and the CPU twin cpu::linear_csr (float, single thread). Shapes: M in
// {1, 16, 128, 1024, 4096, 8192} x (N, K) in {(4096, 4096), (11008, 4096), (4096, 11008), (8192, 8192)} at 90%
// sparsity, and a sweep of 50..99% at M = 4096, N = K = 4096 for where shrink overtakes dense cuBLAS. Times are CUDA
// events around each call after warm-up (manual time); every benchmark reports skipped without a device.
// Printed last: the ratio table, then the speedup over the fastest cuSPARSE algorithm and the crossover sparsity.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusparse.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gpu/cublas_baseline.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/linear/csr.hpp"
#include "shrink/linear/csr_cuda.hpp"
#include "shrink/sparse/csr.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;
using shrink::bench::guarded;
using shrink::bench::gpu::check;  // beside the cuBLAS overload below

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
}

const std::int64_t kMs[] = {1, 16, 128, 1024, 4096, 8192};
const std::int64_t kMaxM = 8192;
struct Layer {
  std::int64_t n, k;
};
const Layer kLayers[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {8192, 8192}};
const std::int64_t kMaxElements = 8192 * 11008;  // the largest of M x K, M x N and N x K
const int kIssueSparsity = 900;                  // per mille
const int kSweep[] = {500, 600, 700, 800, 900, 950, 980, 990};
const Layer kSweepLayer{4096, 4096};
const std::int64_t kSweepM = 4096;

template <class T>
const char* type_name() {
  return std::is_same<T, float>::value ? "f32" : std::is_same<T, shrink::half>::value ? "f16" : "bf16";
}
template <class T>
cudaDataType_t cuda_type() {
  return std::is_same<T, float>::value ? CUDA_R_32F : std::is_same<T, shrink::half>::value ? CUDA_R_16F : CUDA_R_16BF;
}
template <class T>
T from_float(float v) {
  if constexpr (std::is_same<T, float>::value)
    return v;
  else
    return T(v);
}

// A reproducible uniform number in [0, 1) for element i of stream `seed` (splitmix64).
double uniform(std::uint64_t i, std::uint64_t seed) {
  std::uint64_t z = i + seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// Weights in [-0.05, 0.05], never zero; pruned as magnitude pruning leaves a real layer: an unstructured mask whose
// rows keep (1 - sparsity) x a row factor in [0.5, 1.5] of their elements.
template <class T>
std::vector<T> weight(const Layer& layer, int sparsity_per_mille) {
  std::vector<T> w(static_cast<std::size_t>(layer.n * layer.k));
  const double density = 1.0 - sparsity_per_mille / 1000.0;
  for (std::int64_t r = 0; r < layer.n; ++r) {
    const double keep = density * (0.5 + uniform(static_cast<std::uint64_t>(r), 11));
    for (std::int64_t c = 0; c < layer.k; ++c) {
      const auto i = static_cast<std::uint64_t>(r * layer.k + c);
      const bool kept =
          sparsity_per_mille == 0 || uniform(i, 12 + static_cast<std::uint64_t>(sparsity_per_mille)) < keep;
      const double v = uniform(i, 13) - 0.5;
      w[i] = from_float<T>(kept ? static_cast<float>(0.1 * (v + (v < 0 ? -0.01 : 0.01))) : 0.0f);
    }
  }
  return w;
}

// A pruned weight in CSR on the device.
template <class T>
struct DeviceCsr {
  explicit DeviceCsr(const sparse::Csr<T>& host)
      : nnz(host.nnz()), offsets(host.row_offsets), columns(host.column_indices), values(host.values) {}
  std::int64_t nnz;
  DeviceMemory offsets, columns, values;
};

// Device data of one element type, built on first use and kept for the process (the driver frees it at exit).
template <class T>
struct Data {
  DeviceMemory x{random_x()};  // [8192, 11008] random, never zero: X [M, K] is its first M x K elements
  DeviceMemory out{static_cast<std::size_t>(kMaxElements) * sizeof(T)};
  DeviceMemory workspace{cuda::kStatusBytes + static_cast<std::size_t>(kMaxElements) * sizeof(T) + 4096};
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<DeviceMemory>> dense;  // unpruned, for cuBLAS
  std::map<std::tuple<std::int64_t, std::int64_t, int>, std::unique_ptr<DeviceCsr<T>>> csr;

  static std::vector<T> random_x() {
    std::vector<T> host(static_cast<std::size_t>(kMaxElements));
    for (std::size_t i = 0; i < host.size(); ++i)
      host[i] = from_float<T>(static_cast<float>(uniform(i, 1) * 2 - 1 + 1e-3));
    return host;
  }

  const T* dense_weight(const Layer& layer) {
    std::unique_ptr<DeviceMemory>& d = dense[{layer.n, layer.k}];
    if (!d) d = std::make_unique<DeviceMemory>(weight<T>(layer, 0));
    return d->as<T>();
  }

  const DeviceCsr<T>& sparse_weight(const Layer& layer, int sparsity) {
    std::unique_ptr<DeviceCsr<T>>& d = csr[{layer.n, layer.k, sparsity}];
    if (!d) {
      const std::vector<T> w = weight<T>(layer, sparsity);
      d = std::make_unique<DeviceCsr<T>>(sparse::to_csr(TensorView<const T>(w.data(), Shape{layer.n, layer.k})));
    }
    return *d;
  }
};

// Times `launch` with CUDA events around each iteration, after warm-up; flops = 2 · M · (nnz or N · K).
template <class Launch>
void time_flops(benchmark::State& state, double flops, Launch launch) {
  const double total = time_calls_on_device(state, 1, [&](int) { launch(); });
  if (total > 0) state.counters["TFLOP/s"] = flops * static_cast<double>(state.iterations()) / total / 1e12;
}

std::string name(const char* kind, const char* type, std::int64_t m, const Layer& layer, int sparsity) {
  return std::string("spmm/") + type + "/" + kind + "/M:" + std::to_string(m) + "/N:" + std::to_string(layer.n) +
         "/K:" + std::to_string(layer.k) + "/sparsity:" + std::to_string(sparsity);
}

template <class T>
void bench_shrink(benchmark::State& state, std::int64_t m, Layer layer, int sparsity, cuda::LinearCsrPath path) {
  if (!has_device(state)) return;
  Data<T>& d = *shared_data<Data<T>>();
  const DeviceCsr<T>& w = d.sparse_weight(layer, sparsity);
  const Device dev = Device::cuda(0);
  cuda::LinearCsrArgs<T> args;
  args.x = TensorView<const T>(d.x.template as<T>(), Shape{m, layer.k}, dev);
  args.row_offsets = TensorView<const std::int32_t>(w.offsets.template as<std::int32_t>(), Shape{layer.n + 1}, dev);
  args.column_indices = TensorView<const std::int32_t>(w.columns.template as<std::int32_t>(), Shape{w.nnz}, dev);
  args.values = TensorView<const T>(w.values.template as<T>(), Shape{w.nnz}, dev);
  args.out = TensorView<T>(d.out.template as<T>(), Shape{m, layer.n}, dev);
  args.path = path;
  const std::size_t bytes = cuda::linear_csr_workspace_bytes(args);
  if (bytes > d.workspace.bytes()) throw std::runtime_error("workspace too small");
  const cuda::Workspace workspace{d.workspace.template as<void>(), bytes};
  cuda::linear_csr(args, workspace, nullptr, cuda::Synchronize::yes);  // checks the indices once
  time_flops(state, 2.0 * static_cast<double>(m) * static_cast<double>(w.nnz),
             [&] { cuda::linear_csr(args, workspace, nullptr); });
  state.counters["nnz"] = static_cast<double>(w.nnz);
}

// cuSPARSE SpMM on the same CSR: C = W · B with B = X row-major [M, K] read as the column-major K x M matrix Xᵀ (ld K)
// and C the column-major N x M matrix Yᵀ (ld N), which is Y row-major: no transposition on either side. Its
// preprocessing (for repeated calls with one pattern) runs before the timing.
template <class T>
void bench_cusparse(benchmark::State& state, std::int64_t m, Layer layer, int sparsity, cusparseSpMMAlg_t alg) {
  if (!has_device(state)) return;
  Data<T>& d = *shared_data<Data<T>>();
  const DeviceCsr<T>& w = d.sparse_weight(layer, sparsity);
  cusparseHandle_t handle = nullptr;
  if (cusparseCreate(&handle) != CUSPARSE_STATUS_SUCCESS) return state.SkipWithError("cusparseCreate failed");
  cusparseSpMatDescr_t a = nullptr;
  cusparseDnMatDescr_t b = nullptr, c = nullptr;
  cusparseCreateCsr(&a, layer.n, layer.k, w.nnz, w.offsets.template as<void>(), w.columns.template as<void>(),
                    w.values.template as<void>(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                    cuda_type<T>());
  cusparseCreateDnMat(&b, layer.k, m, layer.k, d.x.template as<void>(), cuda_type<T>(), CUSPARSE_ORDER_COL);
  cusparseCreateDnMat(&c, layer.n, m, layer.n, d.out.template as<void>(), cuda_type<T>(), CUSPARSE_ORDER_COL);
  const float alpha = 1.0f, beta = 0.0f;
  const auto op = CUSPARSE_OPERATION_NON_TRANSPOSE;
  std::size_t buffer_bytes = 0;
  std::unique_ptr<DeviceMemory> buffer_memory;
  void* buffer = nullptr;
  cusparseStatus_t status =
      cusparseSpMM_bufferSize(handle, op, op, &alpha, a, b, &beta, c, CUDA_R_32F, alg, &buffer_bytes);
  if (status == CUSPARSE_STATUS_SUCCESS) {
    buffer_memory = std::make_unique<DeviceMemory>(std::max<std::size_t>(buffer_bytes, 16));
    buffer = buffer_memory->as<void>();
    status = cusparseSpMM_preprocess(handle, op, op, &alpha, a, b, &beta, c, CUDA_R_32F, alg, buffer);
  }
  if (status == CUSPARSE_STATUS_SUCCESS)
    status = cusparseSpMM(handle, op, op, &alpha, a, b, &beta, c, CUDA_R_32F, alg, buffer);
  if (status != CUSPARSE_STATUS_SUCCESS) {
    state.SkipWithError((std::string("cuSPARSE: ") + cusparseGetErrorString(status)).c_str());
  } else {
    time_flops(state, 2.0 * static_cast<double>(m) * static_cast<double>(w.nnz),
               [&] { cusparseSpMM(handle, op, op, &alpha, a, b, &beta, c, CUDA_R_32F, alg, buffer); });
  }
  cusparseDestroyDnMat(c);
  cusparseDestroyDnMat(b);
  cusparseDestroySpMat(a);
  cusparseDestroy(handle);
}

// Dense cuBLAS of the same precision on the unpruned weight: cublasSgemm (FP32, no TF32) or tensor-core FP16/BF16.
template <class T>
void bench_cublas(benchmark::State& state, std::int64_t m, Layer layer) {
  if (!has_device(state)) return;
  Data<T>& d = *shared_data<Data<T>>();
  const T* w = d.dense_weight(layer);
  const T* x = d.x.template as<T>();
  T* out = d.out.template as<T>();
  const int mi = static_cast<int>(m), n = static_cast<int>(layer.n), k = static_cast<int>(layer.k);
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(layer.n) * static_cast<double>(layer.k);
  if constexpr (std::is_same<T, float>::value) {
    static cublasHandle_t handle = [] {
      cublasHandle_t h = nullptr;
      check(cublasCreate(&h), "cublasCreate");
      return h;
    }();
    const float alpha = 1.0f, beta = 0.0f;
    time_flops(state, flops, [&] {
      check(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, mi, k, &alpha, w, k, x, k, &beta, out, n), "sgemm");
    });
  } else {
    static bench_gpu::Cublas cublas;
    time_flops(state, flops, [&] {
      if (std::is_same<T, shrink::half>::value)
        cublas.gemm_f16(x, w, out, mi, n, k, nullptr);
      else
        cublas.gemm_bf16(x, w, out, mi, n, k, nullptr);
    });
  }
}

// The CPU twin, float, one thread (what a user without a GPU gets).
void bench_cpu(benchmark::State& state, std::int64_t m, Layer layer, int sparsity) {
  static const std::vector<float> x = [] {
    std::vector<float> v(static_cast<std::size_t>(1024 * 11008));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(uniform(i, 1) * 2 - 1 + 1e-3);
    return v;
  }();
  static std::map<std::tuple<std::int64_t, std::int64_t, int>, sparse::Csr<float>> weights;
  sparse::Csr<float>& csr = weights[{layer.n, layer.k, sparsity}];
  if (csr.rows == 0) {
    const std::vector<float> w = weight<float>(layer, sparsity);
    csr = sparse::to_csr(TensorView<const float>(w.data(), Shape{layer.n, layer.k}));
  }
  std::vector<float> out(static_cast<std::size_t>(m * layer.n));
  for (auto _ : state) {
    cpu::linear_csr(TensorView<const float>(x.data(), Shape{m, layer.k}), csr,
                    TensorView<float>(out.data(), Shape{m, layer.n}));
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(m) * static_cast<double>(csr.nnz()) / 1e12,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

struct CusparseAlg {
  const char* kind;
  cusparseSpMMAlg_t alg;
};
const CusparseAlg kCusparseAlgs[] = {{"cusparse_default", CUSPARSE_SPMM_ALG_DEFAULT},
                                     {"cusparse_csr_alg1", CUSPARSE_SPMM_CSR_ALG1},
                                     {"cusparse_csr_alg2", CUSPARSE_SPMM_CSR_ALG2},
                                     {"cusparse_csr_alg3", CUSPARSE_SPMM_CSR_ALG3}};

std::string manual(const std::string& n) { return n + "/manual_time"; }

// Every comparison of one (type, M, layer, sparsity): shrink and its baselines, and the ratio rows.
template <class T>
void register_point(std::int64_t m, const Layer& layer, int sparsity, bool with_cublas) {
  const char* type = type_name<T>();
  const auto configure = [](benchmark::internal::Benchmark* b) { b->UseManualTime()->Unit(benchmark::kMillisecond); };
  const std::string shrink_name = name("shrink", type, m, layer, sparsity);
  configure(benchmark::RegisterBenchmark(shrink_name.c_str(), guarded([=](benchmark::State& s) {
    bench_shrink<T>(s, m, layer, sparsity, cuda::LinearCsrPath::automatic);
  })));
  // Forced paths beside automatic: at M 16 against row_dots, at M 128 and 4096 among the tile paths, and over the
  // whole sweep (where staged should give way to nnz_split: the setting of kCsrStagedMinDensity).
  const bool sweep = m == kSweepM && layer.n == kSweepLayer.n && layer.k == kSweepLayer.k;
  std::vector<std::pair<const char*, cuda::LinearCsrPath>> forced;
  if (sparsity == kIssueSparsity && m == 16)
    forced = {{"shrink_nnz_split", cuda::LinearCsrPath::nnz_split}, {"shrink_staged", cuda::LinearCsrPath::staged}};
  if ((sparsity == kIssueSparsity && (m == 128 || m == 4096)) || sweep)
    forced = {{"shrink_row_split", cuda::LinearCsrPath::row_split},
              {"shrink_nnz_split", cuda::LinearCsrPath::nnz_split},
              {"shrink_staged", cuda::LinearCsrPath::staged}};
  for (const auto& [kind, path] : forced) {
    const cuda::LinearCsrPath p = path;
    configure(benchmark::RegisterBenchmark(
        name(kind, type, m, layer, sparsity).c_str(),
        guarded([=](benchmark::State& s) { bench_shrink<T>(s, m, layer, sparsity, p); })));
  }
  for (const CusparseAlg& alg : kCusparseAlgs) {
    if (sparsity != kIssueSparsity && alg.alg != CUSPARSE_SPMM_ALG_DEFAULT) continue;  // the sweep: default only
    const cusparseSpMMAlg_t a = alg.alg;
    configure(benchmark::RegisterBenchmark(
        name(alg.kind, type, m, layer, sparsity).c_str(),
        guarded([=](benchmark::State& s) { bench_cusparse<T>(s, m, layer, sparsity, a); })));
  }
  const std::string dense_name = name("cublas", type, m, layer, 0);
  if (with_cublas)
    configure(benchmark::RegisterBenchmark(dense_name.c_str(),
                                           guarded([=](benchmark::State& s) { bench_cublas<T>(s, m, layer); })));
  auto& t = shrink::bench::ratio_targets();
  using Measure = RatioTarget::Measure;
  if (sparsity == kIssueSparsity)
    t.push_back({manual(shrink_name), manual(name("cusparse_default", type, m, layer, sparsity)), Measure::time,
                 1.0 / 1.5, "time vs cuSPARSE SpMM (default algorithm): CSR at 90% >= 1.5x faster"});
  t.push_back({manual(shrink_name), manual(dense_name), Measure::time, 0,
               "time vs dense cuBLAS, same precision (< 1: sparse wins)"});
}

const bool registered = [] {
  const auto each_type = [](auto point) {
    point(float{});
    point(shrink::half{});
    point(shrink::bfloat16{});
  };
  each_type([](auto tag) {
    using T = decltype(tag);
    for (const Layer& layer : kLayers)
      for (std::int64_t m : kMs) register_point<T>(m, layer, kIssueSparsity, true);
    for (int sparsity : kSweep)
      if (sparsity != kIssueSparsity) register_point<T>(kSweepM, kSweepLayer, sparsity, false);
  });
  for (std::int64_t m : {1, 16, 128, 1024}) {
    const std::string cpu_name = name("cpu", "f32", m, kSweepLayer, kIssueSparsity);
    benchmark::RegisterBenchmark(cpu_name.c_str(),
                                 guarded([=](benchmark::State& s) { bench_cpu(s, m, kSweepLayer, kIssueSparsity); }))
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    shrink::bench::ratio_targets().push_back({manual(name("shrink", "f32", m, kSweepLayer, kIssueSparsity)),
                                              cpu_name + "/real_time", RatioTarget::Measure::time, 0,
                                              "time vs the CPU twin cpu::linear_csr, one thread"});
  }
  return true;
}();

// A benchmark's fastest time so far, or -1 before it has reported.
double seconds_of(const shrink::bench::RecordingReporter& reporter, const std::string& n) {
  auto it = reporter.results().find(manual(n));
  return it == reporter.results().end() ? -1.0 : it->second.seconds;
}

// The fastest time of the cuSPARSE algorithms at one point that have one, or -1.
double fastest_cusparse(const shrink::bench::RecordingReporter& reporter, const char* type, std::int64_t m,
                        const Layer& layer) {
  double best = -1;
  for (const CusparseAlg& alg : kCusparseAlgs) {
    const double s = seconds_of(reporter, name(alg.kind, type, m, layer, kIssueSparsity));
    if (s > 0 && (best < 0 || s < best)) best = s;
  }
  return best;
}

// The speedup over the fastest cuSPARSE algorithm as a target line of each point, as soon as shrink has a time and
// all four algorithms have reported (a time, or an error such as an algorithm a type lacks). print_summary's table
// repeats them at the end, in a form the check does not count again.
void print_cusparse_targets_early(shrink::bench::RecordingReporter& reporter) {
  for (const char* type : {"f32", "f16", "bf16"})
    for (const Layer& layer : kLayers)
      for (std::int64_t m : kMs)
        reporter.when_ready([=](const shrink::bench::RecordingReporter& r) {
          for (const CusparseAlg& alg : kCusparseAlgs)
            if (!r.reported(manual(name(alg.kind, type, m, layer, kIssueSparsity)))) return false;
          const double ours = seconds_of(r, name("shrink", type, m, layer, kIssueSparsity));
          const double best = fastest_cusparse(r, type, m, layer);
          if (ours <= 0 || best <= 0) return false;
          shrink::bench::print_target_line(manual(name("shrink", type, m, layer, kIssueSparsity)),
                                           "fastest cuSPARSE algorithm", best / ours, true, 1.5,
                                           "speedup over the fastest cuSPARSE SpMM algorithm, CSR at 90%");
          return true;
        });
}

// After the ratio table: shrink against the fastest cuSPARSE algorithm that ran, and the sparsity from which shrink
// beats dense cuBLAS at M = 4096, N = K = 4096.
void print_summary(const shrink::bench::RecordingReporter& reporter) {
  const auto seconds = [&](const std::string& n) { return seconds_of(reporter, n); };
  std::printf("\nRatios, continued: speedup of shrink over the fastest cuSPARSE algorithm (target >= 1.5 at 90%%)\n");
  std::printf("%-48s %10s %10s %8s  %s\n", "point", "shrink ms", "cuSPARSE", "speedup", "vs dense cuBLAS");
  for (const char* type : {"f32", "f16", "bf16"})
    for (const Layer& layer : kLayers)
      for (std::int64_t m : kMs) {
        const double ours = seconds(name("shrink", type, m, layer, kIssueSparsity));
        const double best = fastest_cusparse(reporter, type, m, layer);
        const double dense = seconds(name("cublas", type, m, layer, 0));
        if (ours <= 0 || best <= 0) continue;
        const std::string point = std::string(type) + " M " + std::to_string(m) + " N " + std::to_string(layer.n) +
                                  " K " + std::to_string(layer.k);
        // "PASS," not "PASS  dense/": the check counts the early target lines, and these once more would count each
        // twice.
        std::printf("%-48s %10.4f %10.4f %8.2f  %s, dense/shrink %.2f%s\n", point.c_str(), ours * 1e3, best * 1e3,
                    best / ours, best / ours >= 1.5 ? "PASS" : "MISS", dense > 0 ? dense / ours : 0.0,
                    m <= 16 ? "  (small M: compare the dense alternative)" : "");
      }
  std::printf("\nCrossover with dense cuBLAS at M %lld, N %lld, K %lld (dense time / shrink time; > 1: sparse wins)\n",
              static_cast<long long>(kSweepM), static_cast<long long>(kSweepLayer.n),
              static_cast<long long>(kSweepLayer.k));
  for (const char* type : {"f32", "f16", "bf16"}) {
    const double dense = seconds(name("cublas", type, kSweepM, kSweepLayer, 0));
    if (dense <= 0) continue;
    std::printf("%-5s", type);
    int crossover = -1;
    for (int sparsity : kSweep) {
      const double ours = seconds(name("shrink", type, kSweepM, kSweepLayer, sparsity));
      if (ours <= 0) continue;
      std::printf("  %d%%: %.2f", sparsity / 10, dense / ours);
      if (dense / ours > 1.0) {
        if (crossover < 0) crossover = sparsity;
      } else {
        crossover = -1;  // the crossover is the sparsity from which every higher one wins
      }
    }
    if (crossover >= 0)
      std::printf("   -> shrink overtakes dense cuBLAS from %.1f%% sparsity\n", crossover / 10.0);
    else
      std::printf("   -> shrink does not overtake dense cuBLAS below 99%% sparsity here\n");
    std::printf("%-5s staged / nnz_split time (< 1: staged is faster; automatic switches at %.0f%% sparsity):\n     ",
                type, 100.0 * (1.0 - cuda::kCsrStagedMinDensity));
    for (int sparsity : kSweep) {
      const double staged = seconds(name("shrink_staged", type, kSweepM, kSweepLayer, sparsity));
      const double split = seconds(name("shrink_nnz_split", type, kSweepM, kSweepLayer, sparsity));
      if (staged > 0 && split > 0) std::printf("  %d%%: %.2f", sparsity / 10, staged / split);
    }
    std::printf("\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return shrink::bench::guarded_main([&] {
    std::vector<char*> args = shrink::bench::arguments_with_repetitions(argc, argv);
    // Hundreds of points: 0.05 s each unless the caller says otherwise (a per-benchmark MinTime would change the
    // names).
    static std::string min_time = "--benchmark_min_time=0.05";
    bool chosen = false;
    for (int i = 1; i < argc; ++i) chosen = chosen || std::string(argv[i]).rfind("--benchmark_min_time", 0) == 0;
    if (!chosen) args.push_back(min_time.data());
    if (cuda::device_count() > 0) std::printf("%s\n", cuda::describe(cuda::device_info(0)).c_str());
    shrink::bench::RecordingReporter reporter;
    print_cusparse_targets_early(reporter);
    if (!shrink::bench::run_benchmarks(args, reporter)) return 1;
    shrink::bench::print_ratio_table(reporter);
    print_summary(reporter);
    return 0;
  });
}
