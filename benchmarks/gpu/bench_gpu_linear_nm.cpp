// GPU 2:4 sparse GEMM (cuda::linear_nm) against dense cuBLAS of the same precision, measured in the same run:
// Y[M, N] = X[M, K] · W[N, K]ᵀ for M in {1, 16, 128, 1024, 4096, 8192} and (N, K) in {(4096, 4096), (11008, 4096),
// (4096, 11008), (8192, 8192)}, FP16, BF16 and INT8 (int32 out for cuBLASLt; float out, scales 1, for shrink).
// Timed with CUDA events after warm-up (manual time). Counters: TFLOPS at the dense-equivalent 2MNK and at the useful
// MNK (half the products are pruned). The CPU twins (cpu::linear_nm, cpu::linear_nm_int8) run the small-M shapes.
// The "Ratios" table, printed last, divides throughputs: 2:4 over dense cuBLAS (the target: >= 1.3 for
// M >= 1024; informational below) and 2:4 GPU over the CPU twin. Every benchmark reports skipped without a device.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gpu/cublas_baseline.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/cuda/nm.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/nm_cuda.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using shrink::Device;
using shrink::Shape;
using shrink::TensorView;
namespace cpu = shrink::cpu;
namespace cuda = shrink::cuda;
namespace prune = shrink::prune;
namespace sparse = shrink::sparse;
namespace bench_gpu = shrink::bench_gpu;
// cuda_fp16.h (through cuBLAS) declares a global `half`: name shrink's types in full.
using F16 = shrink::half;
using BF16 = shrink::bfloat16;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

const std::int64_t kMs[] = {1, 16, 128, 1024, 4096, 8192};
const std::pair<std::int64_t, std::int64_t> kNKs[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {8192, 8192}};
constexpr std::int64_t kMaxM = 8192;

// Bytes of `count` elements of T.
template <class T>
std::size_t bytes_of(std::int64_t count) {
  return static_cast<std::size_t>(count) * sizeof(T);
}

// A value in [-1, 1), never zero, from an index: rows differ, so masks and products are not uniform.
float pattern_value(std::int64_t i) {
  return 0.001f * static_cast<float>((i * 7919 + (i >> 13) * 104729) % 2001 - 1000) + 0.0005f;
}

template <class T>
T encode(float v) {
  if constexpr (std::is_same_v<T, std::int8_t>)
    return static_cast<std::int8_t>(static_cast<int>(v * 120.0f));
  else
    return T(v);
}

// Fills a device [rows, cols] T matrix from pattern_value, a row at a time.
template <class T>
void fill(T* device, std::int64_t rows, std::int64_t cols, std::int64_t seed) {
  std::vector<T> row(static_cast<std::size_t>(cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      row[static_cast<std::size_t>(c)] = encode<T>(pattern_value(seed + r * 31 + c));
    check(cudaMemcpy(device + r * cols, row.data(), row.size() * sizeof(T), cudaMemcpyHostToDevice), "fill");
  }
}

// The operands of one type at one (N, K): x [kMaxM, K], W dense [N, K] and 2:4 compressed (magnitude mask of the
// half weight, computed and applied on the device), outputs for both paths, the workspace.
template <class T>
struct Operands {
  std::int64_t n, k;
  DeviceMemory x, w_dense, values;  // T
  DeviceMemory metadata;            // std::uint32_t
  DeviceMemory out_dense;           // cuBLAS: T (16-bit) or int32
  DeviceMemory out_sparse;          // shrink: T (16-bit) or float
  DeviceMemory ones;                // a unit scale for int8
  DeviceMemory workspace{256};

  Operands(std::int64_t n_, std::int64_t k_, const std::uint64_t* mask_words)
      : n(n_),
        k(k_),
        x(bytes_of<T>(kMaxM * k)),
        w_dense(bytes_of<T>(n * k)),
        values(bytes_of<T>(n * k / 2)),
        metadata(bytes_of<std::uint32_t>(cuda::nm_metadata_words<T>(n, k, prune::NmPattern{2, 4}))),
        out_dense(bytes_of<std::int32_t>(kMaxM * n)),
        out_sparse(bytes_of<float>(kMaxM * n)),
        ones(std::vector<float>{1.0f}) {
    fill(x.as<T>(), kMaxM, k, 1);
    fill(w_dense.as<T>(), n, k, 7);
    const DeviceMemory positions(bytes_of<std::uint8_t>(n * k / 2));
    cuda::compress_nm(TensorView<const T>(w_dense.as<T>(), Shape{n, k}, Device::cuda(0)), mask_words,
                      prune::NmPattern{2, 4},
                      cuda::DeviceNmCompressed<T>{values.as<T>(), positions.as<std::uint8_t>(),
                                                  metadata.as<std::uint32_t>()},
                      {workspace.as<void>(), workspace.bytes()}, nullptr, cuda::Synchronize::yes);
  }
};

// Everything for one (N, K): the magnitude mask, then operands of the three types (never freed: the process ends).
struct ShapeData {
  Operands<F16>* f16;
  Operands<BF16>* bf16;
  Operands<std::int8_t>* s8;
};

ShapeData& shape_data(std::int64_t n, std::int64_t k) {
  static std::map<std::pair<std::int64_t, std::int64_t>, ShapeData> cache;
  auto it = cache.find({n, k});
  if (it != cache.end()) return it->second;
  const DeviceMemory importance(bytes_of<F16>(n * k));
  fill(importance.as<F16>(), n, k, 7);
  const DeviceMemory mask(bytes_of<std::uint64_t>(cuda::nm_mask_words(n * k)));
  const DeviceMemory workspace(256);
  std::uint64_t* words = mask.as<std::uint64_t>();
  cuda::nm_mask(TensorView<const F16>(importance.as<F16>(), Shape{n, k}, Device::cuda(0)), prune::NmPattern{2, 4},
                words, {workspace.as<void>(), workspace.bytes()}, nullptr, prune::NmRemainder::error,
                cuda::Synchronize::yes);
  ShapeData d{new Operands<F16>(n, k, words), new Operands<BF16>(n, k, words), new Operands<std::int8_t>(n, k, words)};
  return cache.emplace(std::make_pair(n, k), d).first->second;
}

bench_gpu::Cublas& cublas() {
  static auto* c = new bench_gpu::Cublas();
  return *c;
}

// TFLOPS counters; "bytes" processed are dense-equivalent FLOPs, so the ratio table divides throughputs.
void report_flops(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k, bool sparse) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.SetBytesProcessed(static_cast<std::int64_t>(flops) * state.iterations());
  state.counters["TFLOPS_dense_equiv"] =
      benchmark::Counter(flops * 1e-12 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["TFLOPS_useful"] = benchmark::Counter(
      (sparse ? 0.5 : 1.0) * flops * 1e-12 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

enum class Kind { f16, bf16, s8 };
const char* kind_name(Kind kind) { return kind == Kind::f16 ? "f16" : kind == Kind::bf16 ? "bf16" : "int8"; }

void run_dense(benchmark::State& state, Kind kind, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (!has_device(state)) return;
  ShapeData& d = shape_data(n, k);
  time_calls_on_device(state, 1, [&](int) {
    if (kind == Kind::f16)
      cublas().gemm_f16(d.f16->x.as<void>(), d.f16->w_dense.as<void>(), d.f16->out_dense.as<void>(), int(m), int(n),
                        int(k), nullptr);
    else if (kind == Kind::bf16)
      cublas().gemm_bf16(d.bf16->x.as<void>(), d.bf16->w_dense.as<void>(), d.bf16->out_dense.as<void>(), int(m),
                         int(n), int(k), nullptr);
    else
      cublas().gemm_s8s32(d.s8->x.as<void>(), d.s8->w_dense.as<void>(), d.s8->out_dense.as<void>(), int(m), int(n),
                          int(k), nullptr);
  });
  report_flops(state, m, n, k, false);
}

template <class T, class Out>
void launch_sparse(const Operands<T>& o, std::int64_t m, Out* out) {
  cuda::LinearNmArgs<T, Out> a;
  a.x = TensorView<const T>(o.x.template as<T>(), Shape{m, o.k}, Device::cuda(0));
  a.w = {o.values.template as<T>(), o.metadata.template as<std::uint32_t>(), o.n, o.k, prune::NmPattern{2, 4},
         Device::cuda(0)};
  if constexpr (std::is_same_v<T, std::int8_t>) {
    a.epilogue.x_scales = TensorView<const float>(o.ones.template as<float>(), Shape{1}, Device::cuda(0));
    a.epilogue.w_scales = TensorView<const float>(o.ones.template as<float>(), Shape{1}, Device::cuda(0));
  }
  a.out = TensorView<Out>(out, Shape{m, o.n}, Device::cuda(0));
  cuda::linear_nm(a, {o.workspace.template as<void>(), o.workspace.bytes()}, nullptr);
}

void run_sparse(benchmark::State& state, Kind kind, std::int64_t m, std::int64_t n, std::int64_t k) {
  if (!has_device(state)) return;
  ShapeData& d = shape_data(n, k);
  time_calls_on_device(state, 1, [&](int) {
    if (kind == Kind::f16)
      launch_sparse(*d.f16, m, d.f16->out_sparse.as<F16>());
    else if (kind == Kind::bf16)
      launch_sparse(*d.bf16, m, d.bf16->out_sparse.as<BF16>());
    else
      launch_sparse(*d.s8, m, d.s8->out_sparse.as<float>());
  });
  report_flops(state, m, n, k, true);
}

// The CPU twin on host copies of the same compressed weight (wall-clock time).
void run_cpu_twin(benchmark::State& state, Kind kind, std::int64_t m, std::int64_t n, std::int64_t k) {
  std::vector<float> dense(static_cast<std::size_t>(n * k));
  for (std::int64_t i = 0; i < n * k; ++i) dense[static_cast<std::size_t>(i)] = pattern_value(7 + i);
  std::vector<float> out(static_cast<std::size_t>(m * n));
  if (kind == Kind::s8) {
    std::vector<std::int8_t> w(dense.size()), x(static_cast<std::size_t>(m * k));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = encode<std::int8_t>(dense[i]);
    for (std::size_t i = 0; i < x.size(); ++i)
      x[i] = encode<std::int8_t>(pattern_value(1 + static_cast<std::int64_t>(i)));
    const auto c = sparse::compress_nm(TensorView<const std::int8_t>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
    const float one = 1.0f;
    shrink::Epilogue unit_scales;
    unit_scales.x_scales = TensorView<const float>(&one, Shape{1});
    unit_scales.w_scales = TensorView<const float>(&one, Shape{1});
    for (auto _ : state)
      cpu::linear_nm_int8(TensorView<const std::int8_t>(x.data(), Shape{m, k}), c,
                          TensorView<float>(out.data(), Shape{m, n}), unit_scales);
  } else {
    std::vector<F16> w(dense.size()), x(static_cast<std::size_t>(m * k));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = F16(dense[i]);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = F16(pattern_value(1 + static_cast<std::int64_t>(i)));
    const auto c = sparse::compress_nm(TensorView<const F16>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
    std::vector<F16> out16(out.size());
    for (auto _ : state)
      cpu::linear_nm(TensorView<const F16>(x.data(), Shape{m, k}), c, TensorView<F16>(out16.data(), Shape{m, n}));
  }
  report_flops(state, m, n, k, true);
}

std::string shape_suffix(std::int64_t m, std::int64_t n, std::int64_t k) {
  return "/M:" + std::to_string(m) + "/N:" + std::to_string(n) + "/K:" + std::to_string(k);
}

const bool registered = [] {
  using Measure = RatioTarget::Measure;
  auto& targets = shrink::bench::ratio_targets();
  for (Kind kind : {Kind::f16, Kind::bf16, Kind::s8}) {
    const std::string type = kind_name(kind);
    for (auto [n, k] : kNKs)
      for (std::int64_t m : kMs) {
        const std::string shape = shape_suffix(m, n, k);
        const std::string dense = "gpu_dense_cublas_" + type + shape, sparse = "gpu_sparse24_shrink_" + type + shape;
        benchmark::RegisterBenchmark(dense.c_str(), shrink::bench::guarded(run_dense), kind, m, n, k)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.1);
        benchmark::RegisterBenchmark(sparse.c_str(), shrink::bench::guarded(run_sparse), kind, m, n, k)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.1);
        const bool target = m >= 1024;
        targets.push_back({sparse + "/manual_time", dense + "/manual_time", Measure::bandwidth, target ? 1.3 : 0.0,
                           target ? "2:4 >= 1.3x dense cuBLAS throughput, M >= 1024"
                                  : "2:4 over dense cuBLAS at small M (dense is the alternative)"});
      }
    // The CPU twins at decode sizes, for scale.
    for (std::int64_t m : {std::int64_t{1}, std::int64_t{16}}) {
      const std::string shape = shape_suffix(m, 4096, 4096);
      const std::string cpu = "cpu_twin_" + type + shape;
      if (kind == Kind::bf16) continue;  // the same code as f16 on the CPU
      benchmark::RegisterBenchmark(cpu.c_str(), shrink::bench::guarded(run_cpu_twin), kind, m, 4096, 4096)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(0.1);
      targets.push_back({"gpu_sparse24_shrink_" + type + shape + "/manual_time", cpu, Measure::bandwidth, 0.0,
                         "2:4 on the GPU over its CPU twin"});
    }
  }
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
