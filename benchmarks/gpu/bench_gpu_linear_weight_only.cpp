// GPU weight-only GEMM (shrink::cuda::linear_weight_only: W8A16, W4A16 with groups of 128 and 64) against cuBLAS FP16
// and BF16 GEMMs (cublasGemmEx, tensor ops) and a device-to-device copy, all measured in this run, on decode-sized
// batches: M in {1, 4, 16, 32, 64} x (N, K) in {(4096, 4096), (11008, 4096), (4096, 11008), (8192, 8192)}.
//
// Rows: BM_cublas_f16 / BM_cublas_bf16 (m, n, k), BM_w8a16 / BM_w4a16_g128 / BM_w4a16_g64 (path, m, n, k) with path
// 0 automatic, 1 cuda_core, 2 tensor_core. Weights (and scales) rotate through a 1 GiB arena, so every call reads
// them from HBM and not from L2; a timed iteration is kLaunches back-to-back calls between CUDA events (host launch
// costs overlap the device's work), reported per call. Bytes counted: weights + scales + activations + output.
// Printed last: a summary (time, speedup over cuBLAS FP16, bandwidth and its fraction of the copy's) and the ratio
// table with the targets (M <= 16: W8A16 >= 1.7x, W4A16 >= 3x cuBLAS FP16; >= 0.75 of the copy's bandwidth).
// On a machine without a device every benchmark reports skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/cublas_baseline.hpp"
#include "shrink/core/half.hpp"
#include "shrink/linear/weight_only_cuda.hpp"
#include "support/gpu_baselines.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;
using Half = shrink::half;  // cuda_fp16.h (through cuBLAS) declares a global `half` too

constexpr std::size_t kArenaBytes = std::size_t{1} << 30;       // weights rotate through it: far past any L2
constexpr std::size_t kScaleArenaBytes = std::size_t{64} << 20;  // float scales, rotating alike
constexpr std::size_t kCopyBytes = std::size_t{256} << 20;       // the copy baseline: arena half to arena half
constexpr std::size_t kWorkspaceBytes = std::size_t{256} << 20;  // K-slice partials of the largest shape
constexpr std::int64_t kMaxM = 64, kMaxN = 11008, kMaxK = 14336;
constexpr int kLaunches = 10;
constexpr int kMinComputeCapability = 80;
// Each benchmark runs for at least 50 ms (275 of them). Google Benchmark appends that to the run's name, spelt
// differently across its versions: rows are looked up by the name up to it (RecordingReporter::find).
constexpr double kMinTime = 0.05;

const std::vector<std::int64_t> kRows = {1, 4, 16, 32, 64};
// N x K; 4096 x 14336 is a Llama-3-8B down projection.
const std::vector<std::pair<std::int64_t, std::int64_t>> kShapes = {{4096, 4096}, {11008, 4096}, {4096, 11008},
                                                                    {8192, 8192}, {4096, 14336}};

// The offset of call i's copy of `bytes` in an arena of `arena` bytes: consecutive calls read disjoint regions.
std::size_t rotating_offset(int i, std::size_t bytes, std::size_t arena) {
  const std::size_t step = (bytes + 255) / 256 * 256;
  const std::size_t slots = std::max<std::size_t>(1, (arena - bytes) / step);
  return static_cast<std::size_t>(i) % slots * step;
}

// Device buffers shared by every benchmark.
struct DeviceData {
  DeviceMemory arena{kArenaBytes};
  DeviceMemory scales{std::vector<float>(kScaleArenaBytes / sizeof(float), 0.01f)};
  DeviceMemory x{std::vector<Half>(static_cast<std::size_t>(kMaxM * kMaxK), Half(0.5f))};
  DeviceMemory out{static_cast<std::size_t>(kMaxM * kMaxN) * sizeof(float)};
  DeviceMemory workspace{kWorkspaceBytes};
  bench_gpu::Cublas cublas;

  DeviceData() {
    // 0x3C in every byte: half 1.06, bfloat16 0.0115, int8 60, int4 (12 -> -4, 3): valid values for every format.
    check(cudaMemset(arena.as<void>(), 0x3C, kArenaBytes), "fill arena");
  }
  // Call i's copy of `bytes` of the arena (consecutive calls read disjoint regions).
  const std::uint8_t* arena_at(int i, std::size_t bytes) const {
    return arena.as<std::uint8_t>() + rotating_offset(i, bytes, kArenaBytes);
  }
};

// Times kLaunches calls of launch(i) between CUDA events per iteration; reports the time of one call.
template <class Launch>
void time_launches(benchmark::State& state, std::int64_t bytes_per_call, Launch launch) {
  time_calls_on_device(state, kLaunches, launch);
  state.SetBytesProcessed(state.iterations() * bytes_per_call);
}

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state, kMinComputeCapability)) return;
  DeviceData* d = shared_data<DeviceData>();
  std::uint8_t* arena = d->arena.as<std::uint8_t>();
  time_launches(state, static_cast<std::int64_t>(2 * kCopyBytes),
                [&](int) { copy_all(arena + kArenaBytes / 2, arena, kCopyBytes); });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(kMinTime);

void cublas_gemm(benchmark::State& state, bool bf16) {
  if (!has_device(state, kMinComputeCapability)) return;
  DeviceData* d = shared_data<DeviceData>();
  const int m = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1)),
            k = static_cast<int>(state.range(2));
  const std::size_t weight_bytes = static_cast<std::size_t>(n) * k * 2;
  time_launches(state, static_cast<std::int64_t>(weight_bytes) + 2LL * m * k + 2LL * m * n, [&](int i) {
    const void* b = d->arena_at(i, weight_bytes);
    if (bf16)
      d->cublas.gemm_bf16(d->x.as<void>(), b, d->out.as<void>(), m, n, k, nullptr);
    else
      d->cublas.gemm_f16(d->x.as<void>(), b, d->out.as<void>(), m, n, k, nullptr);
  });
}
void BM_cublas_f16(benchmark::State& state) { cublas_gemm(state, false); }
void BM_cublas_bf16(benchmark::State& state) { cublas_gemm(state, true); }

// format: 8 (int8 per row) or the int4 group size.
void weight_only(benchmark::State& state, int format) {
  if (!has_device(state, kMinComputeCapability)) return;
  DeviceData* d = shared_data<DeviceData>();
  const auto path = static_cast<cuda::WeightOnlyPath>(state.range(0));
  const std::int64_t m = state.range(1), n = state.range(2), k = state.range(3);
  const bool int4 = format != 8;
  const std::size_t weight_bytes = static_cast<std::size_t>(int4 ? n * k / 2 : n * k);
  const std::int64_t scale_count = int4 ? n * (k / format) : n;
  const std::size_t scale_bytes = static_cast<std::size_t>(scale_count) * sizeof(float);
  cuda::LinearWeightOnlyArgs<Half> args;
  args.x = TensorView<const Half>(d->x.as<Half>(), Shape{m, k}, Device::cuda(0));
  args.out = TensorView<Half>(d->out.as<Half>(), Shape{m, n}, Device::cuda(0));
  args.path = path;
  auto weight_at = [&](int i) {
    const std::uint8_t* w = d->arena_at(i, weight_bytes);
    const float* s = d->scales.as<float>() + rotating_offset(i, scale_bytes, kScaleArenaBytes) / sizeof(float);
    return int4 ? cuda::WeightOnlyWeight::int4(TensorView<const std::uint8_t>(w, Shape{n, k / 2}, Device::cuda(0)),
                                               TensorView<const float>(s, Shape{n, k / format}, Device::cuda(0)),
                                               format)
                : cuda::WeightOnlyWeight::int8(
                      TensorView<const std::int8_t>(reinterpret_cast<const std::int8_t*>(w), Shape{n, k},
                                                    Device::cuda(0)),
                      TensorView<const float>(s, Shape{n}, Device::cuda(0)));
  };
  args.w = weight_at(0);
  if (cuda::linear_weight_only_workspace_bytes(args) > kWorkspaceBytes) {
    state.SkipWithError("workspace larger than the benchmark's");
    return;
  }
  const cuda::Workspace workspace{d->workspace.as<void>(), kWorkspaceBytes};
  time_launches(state, static_cast<std::int64_t>(weight_bytes + scale_bytes) + 2 * m * k + 2 * m * n, [&](int i) {
    args.w = weight_at(i);
    cuda::linear_weight_only(args, workspace, nullptr);
  });
}
void BM_w8a16(benchmark::State& state) { weight_only(state, 8); }
void BM_w4a16_g128(benchmark::State& state) { weight_only(state, 128); }
void BM_w4a16_g64(benchmark::State& state) { weight_only(state, 64); }

const bool registered = [] {
  using shrink::bench::guarded;
  for (auto* bench : {benchmark::RegisterBenchmark("BM_cublas_f16", guarded(BM_cublas_f16)),
                      benchmark::RegisterBenchmark("BM_cublas_bf16", guarded(BM_cublas_bf16))}) {
    bench->ArgNames({"m", "n", "k"})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(kMinTime);
    for (const auto& [n, k] : kShapes)
      for (const std::int64_t m : kRows) bench->Args({m, n, k});
  }
  for (auto* bench : {benchmark::RegisterBenchmark("BM_w8a16", guarded(BM_w8a16)),
                      benchmark::RegisterBenchmark("BM_w4a16_g128", guarded(BM_w4a16_g128)),
                      benchmark::RegisterBenchmark("BM_w4a16_g64", guarded(BM_w4a16_g64))}) {
    bench->ArgNames({"path", "m", "n", "k"})->UseManualTime()->Unit(benchmark::kMicrosecond)->MinTime(kMinTime);
    for (const auto& [n, k] : kShapes)
      for (const std::int64_t m : kRows)
        for (const std::int64_t path : {0, 1, 2}) bench->Args({path, m, n, k});
  }

  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (const auto& [n, k] : kShapes)
    for (const std::int64_t m : kRows) {
      const std::string shape = "/m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k);
      const std::string cublas = "BM_cublas_f16" + shape;
      const bool small = m <= 16;
      t.push_back({"BM_cublas_bf16" + shape, cublas, M::time, 0, "cuBLAS BF16 / FP16 time"});
      const std::pair<const char*, double> formats[] = {{"BM_w8a16", 1.7}, {"BM_w4a16_g128", 3.0}, {"BM_w4a16_g64", 3.0}};
      for (const auto& [name, speedup] : formats) {
        const std::string row = std::string(name) + "/path:0" + shape;
        t.push_back({row, cublas, M::time, small ? 1.0 / speedup : 0.0,
                     std::string(name) + " time / cuBLAS FP16 (M <= 16: >= " + std::to_string(speedup).substr(0, 3) +
                         "x faster)"});
        t.push_back({row, "BM_gpu_copy", M::bandwidth, small ? 0.75 : 0.0,
                     std::string(name) + " bytes / copy bandwidth (M <= 16: >= 0.75)"});
      }
    }
  return true;
}();

// Per shape and M: cuBLAS FP16's time and, per format (automatic path), time, speedup, bandwidth, fraction of copy.
void print_summary(const shrink::bench::RecordingReporter& reporter) {
  const auto* copy = reporter.find("BM_gpu_copy");
  const double copy_bandwidth = copy == nullptr ? 0.0 : copy->second.bytes_per_second;
  std::printf("\nWeight-only summary (automatic path; time per call, speedup over cuBLAS FP16, achieved GB/s and its "
              "fraction of the copy's %.0f GB/s):\n",
              copy_bandwidth / 1e9);
  std::printf("%5s %6s %6s %10s | %-30s | %-30s | %-30s\n", "M", "N", "K", "FP16 us", "W8A16", "W4A16 g128",
              "W4A16 g64");
  for (const auto& [n, k] : kShapes)
    for (const std::int64_t m : kRows) {
      const std::string shape = "/m:" + std::to_string(m) + "/n:" + std::to_string(n) + "/k:" + std::to_string(k);
      const auto* base = reporter.find("BM_cublas_f16" + shape);
      if (base == nullptr) continue;
      std::printf("%5lld %6lld %6lld %10.2f", static_cast<long long>(m), static_cast<long long>(n),
                  static_cast<long long>(k), base->second.seconds * 1e6);
      for (const char* name : {"BM_w8a16", "BM_w4a16_g128", "BM_w4a16_g64"}) {
        const auto* row = reporter.find(std::string(name) + "/path:0" + shape);
        if (row == nullptr) {
          std::printf(" | %-30s", "-");
          continue;
        }
        std::printf(" | %7.2f us %5.2fx %5.0f GB/s %3.0f%%", row->second.seconds * 1e6,
                    base->second.seconds / row->second.seconds, row->second.bytes_per_second / 1e9,
                    copy_bandwidth > 0 ? 100.0 * row->second.bytes_per_second / copy_bandwidth : 0.0);
      }
      std::printf("\n");
    }
}

}  // namespace

int main(int argc, char** argv) {
  return shrink::bench::guarded_main([&] {
    shrink::bench::RecordingReporter reporter;
    if (!shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv), reporter)) return 1;
    print_summary(reporter);
    shrink::bench::print_ratio_table(reporter);
    return 0;
  });
}
