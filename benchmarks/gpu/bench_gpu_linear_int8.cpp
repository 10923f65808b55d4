// W8A8 GEMM on the GPU (shrink::cuda::linear_int8, epilogue included: per-token and per-channel scales, bias, FP16 out)
// against cuBLAS FP16 (cublasGemmEx, tensor ops) and cuBLASLt INT8 → INT32 followed by a separate epilogue kernel
// (apply_int8_epilogue, as a user of cuBLASLt would need), on the shapes M ∈ {1, 16, 128, 1024, 4096, 8192}
// × (N, K) ∈ {(4096, 4096), (11008, 4096), (4096, 11008), (8192, 8192)}; plus the other output types and the fused
// per-token quantizer on a few shapes. Timed with CUDA events around each launch after warm-up, L2 flushed before
// each iteration (weights stream from DRAM, as in a model whose layers differ); on a machine without a device every
// benchmark reports skipped. Prints a table of TOPS (2·M·N·K / time) and fraction of the device's dense peak, then
// the ratio table (benchmarks/notes/gpu_linear_int8.md explains the targets and the peak formula).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu/cublas_baseline.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/linear/int8_cuda.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bfloat16;  // not cuda_fp16.h's ::half, which cuBLAS's headers bring in
using shrink::half;
using shrink::bench::RatioTarget;

struct Shape3 {
  int m, n, k;
};

const int kMs[] = {1, 16, 128, 1024, 4096, 8192};
const std::pair<int, int> kNKs[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}, {8192, 8192}};
constexpr std::size_t kMaxM = 8192, kMaxN = 11008, kMaxK = 11008, kMaxNK = 8192 * 8192;
constexpr std::size_t kMaxMN = std::max(kMaxM, kMaxN);
constexpr std::size_t kFlushBytes = std::size_t{256} << 20;  // past any L2 (50 MiB on H100, 60 MiB on H200)

std::string shape_name(const Shape3& s) {
  return "M:" + std::to_string(s.m) + "/N:" + std::to_string(s.n) + "/K:" + std::to_string(s.k);
}

// Fills `memory` with random bytes and-ed with `mask` (a 1 MiB random block repeated).
void fill_random(DeviceMemory& memory, unsigned mask) {
  std::vector<std::uint8_t> block(std::size_t{1} << 20);
  std::mt19937 rng(static_cast<unsigned>(memory.bytes()));
  for (auto& b : block) b = static_cast<std::uint8_t>(rng() & mask);
  memory.fill_repeating(block);
}

// Device buffers shared by every benchmark, sized for the largest shape, filled with random non-zero data.
struct DeviceData {
  DeviceMemory x{kMaxM * kMaxK}, w{kMaxNK};
  DeviceMemory x16{kMaxM * kMaxK * 2}, w16{kMaxNK * 2};  // fp16 copies for cuBLAS
  DeviceMemory out{kMaxM * kMaxN * 4};                   // any output, up to M · N floats
  DeviceMemory acc{kMaxM * kMaxN * 4};                   // cuBLASLt's int32 result
  DeviceMemory activations{kMaxM * kMaxK * 2};           // [M, K] half input of the quantizer
  DeviceMemory flush{kFlushBytes};
  DeviceMemory x_scales{kMaxMN * 4}, w_scales{kMaxMN * 4}, bias{kMaxMN * 4};
  std::unique_ptr<DeviceMemory> workspace;
  bench_gpu::Cublas cublas;

  DeviceData() {
    fill_random(x, 0xFFu);
    fill_random(w, 0xFFu);
    fill_random(x16, 0x1Fu);  // fp16 exponent field ≤ 7: |v| < 2^-7, never inf or NaN
    fill_random(w16, 0x1Fu);
    fill_random(out, 0xFFu);
    fill_random(acc, 0xFFu);
    fill_random(activations, 0x3Bu);  // exponent field ≤ 14: finite
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), offset(-1.0f, 1.0f);
    std::vector<float> host(kMaxMN);
    for (float& v : host) v = scale(rng);
    x_scales.upload(host);
    w_scales.upload(host);
    for (float& v : host) v = offset(rng);
    bias.upload(host);
  }

  // The workspace, grown to `bytes` when smaller.
  cuda::Workspace workspace_of(std::size_t bytes) {
    if (bytes > (workspace ? workspace->bytes() : 0)) {
      workspace.reset();
      workspace = std::make_unique<DeviceMemory>(bytes);
    }
    if (!workspace) return {nullptr, 0};
    return {workspace->as<void>(), workspace->bytes()};
  }
};

// Times `launch` with CUDA events around each iteration (warm-up builds cuBLASLt's plan), after flushing L2 outside
// the timed region.
template <class Launch>
void time_flushed(benchmark::State& state, Launch launch) {
  DeviceData* d = shared_data<DeviceData>();
  time_calls_on_device(
      state, 1, [&](int) { launch(); },
      [&] {
        check(cudaMemsetAsync(d->flush.as<void>(), static_cast<int>(state.iterations() & 0xFF), kFlushBytes),
              "flush L2");
      });
}

// The W8A8 operands of one shape, the output a view of `out` typed Out.
template <class Out>
cuda::LinearInt8Args w8a8_args(const Shape3& s, cuda::LinearInt8Path path, float out_scale = 0.0f) {
  DeviceData* d = shared_data<DeviceData>();
  cuda::LinearInt8Args a;
  a.x.values = TensorView<const std::int8_t>(d->x.as<std::int8_t>(), Shape{s.m, s.k}, Device::cuda(0));
  a.x.scales = TensorView<const float>(d->x_scales.as<float>(), Shape{s.m}, Device::cuda(0));
  a.w.values = TensorView<const std::int8_t>(d->w.as<std::int8_t>(), Shape{s.n, s.k}, Device::cuda(0));
  a.w.scales = TensorView<const float>(d->w_scales.as<float>(), Shape{s.n}, Device::cuda(0));
  a.epilogue.bias = TensorView<const float>(d->bias.as<float>(), Shape{s.n}, Device::cuda(0));
  a.epilogue.activation = Activation::none;
  a.out = TensorView<Out>(d->out.as<Out>(), Shape{s.m, s.n}, Device::cuda(0));
  a.epilogue.out_scale = out_scale;
  a.path = path;
  return a;
}

void bench_cublas_f16(benchmark::State& state, Shape3 s) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_flushed(state, [&] {
    d->cublas.gemm_f16(d->x16.as<void>(), d->w16.as<void>(), d->out.as<void>(), s.m, s.n, s.k, nullptr);
  });
}

void bench_cublaslt_s8(benchmark::State& state, Shape3 s, bool with_epilogue) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const cuda::LinearInt8Args args = w8a8_args<half>(s, cuda::LinearInt8Path::automatic);
  Epilogue epilogue = args.epilogue;  // the epilogue alone takes the scales the operands carry
  epilogue.x_scales = args.x.scales;
  epilogue.w_scales = args.w.scales;
  const TensorView<const std::int32_t> acc(d->acc.as<std::int32_t>(), Shape{s.m, s.n}, Device::cuda(0));
  const cuda::Workspace ws = d->workspace_of(cuda::int8_epilogue_workspace_bytes());
  time_flushed(state, [&] {
    d->cublas.gemm_s8s32(d->x.as<void>(), d->w.as<void>(), d->acc.as<void>(), s.m, s.n, s.k, nullptr);
    if (with_epilogue) cuda::apply_int8_epilogue(acc, epilogue, args.out, ws, nullptr);
  });
}

template <class Out>
void bench_w8a8(benchmark::State& state, Shape3 s, cuda::LinearInt8Path path) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const cuda::LinearInt8Args args = w8a8_args<Out>(s, path, 0.05f);
  const cuda::Workspace ws = d->workspace_of(cuda::linear_int8_workspace_bytes(args));
  time_flushed(state, [&] { cuda::linear_int8(args, ws, nullptr); });
}

void bench_quantize_rows(benchmark::State& state, int m, int k) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const TensorView<const half> x(d->activations.as<half>(), Shape{m, k}, Device::cuda(0));
  const TensorView<std::int8_t> q(d->x.as<std::int8_t>(), Shape{m, k}, Device::cuda(0));
  const TensorView<float> scales(d->out.as<float>(), Shape{m}, Device::cuda(0));
  const cuda::Workspace ws = d->workspace_of(cuda::quantize_rows_absmax_workspace_bytes());
  time_flushed(state, [&] { cuda::quantize_rows_absmax(x, q, scales, ws, nullptr); });
  state.SetBytesProcessed(state.iterations() * (static_cast<std::int64_t>(m) * k * 3 + m * 4));
}

// linear_int8_dynamic: the half activations quantized per token, then the GEMM, as one call (the CLI's gpu-int8-w8a8).
void bench_w8a8_dynamic(benchmark::State& state, Shape3 s) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const cuda::LinearInt8Args gemm = w8a8_args<half>(s, cuda::LinearInt8Path::automatic);
  cuda::LinearInt8DynamicArgs args;
  args.x = TensorView<const half>(d->activations.as<half>(), Shape{s.m, s.k}, Device::cuda(0));
  args.w = gemm.w;
  args.epilogue = gemm.epilogue;
  args.out = gemm.out;
  const cuda::Workspace ws = d->workspace_of(cuda::linear_int8_dynamic_workspace_bytes(args));
  time_flushed(state, [&] { cuda::linear_int8_dynamic(args, ws, nullptr); });
}

// A row of the final table: which benchmark, its shape, and the peak it is measured against.
struct Row {
  std::string name;
  Shape3 shape;
  bool int8;  // int8 peak (else fp16)
};

std::vector<Row>& rows() {
  static std::vector<Row> r;
  return r;
}

// A fixed count of timed iterations: a time budget would run tens of thousands of the microsecond-long ones, each
// behind a 256 MiB L2 flush.
constexpr int kIterations = 100;

// The name Google Benchmark reports for a benchmark registered as `name`.
std::string run_name(const std::string& name) {
  return name + "/iterations:" + std::to_string(kIterations) + "/manual_time";
}

void add(const std::string& name, Shape3 s, bool int8, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), bench::guarded(std::move(fn)))
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(kIterations);
  rows().push_back({run_name(name), s, int8});
}

// Dense peaks from the SM count and the maximum clock: int8 8192 ops per clock per SM on sm_90 (4096 on sm_80),
// fp16 half of that (benchmarks/notes/gpu_linear_int8.md).
struct Peaks {
  double int8 = 0, fp16 = 0;
  std::string device;
};

Peaks device_peaks() {
  Peaks p;
  if (cuda::device_count() == 0) return p;
  const cuda::DeviceInfo info = cuda::device_info(0);
  int clock_khz = 0;
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0), "clock rate");
  const double per_sm = info.compute_capability_major >= 9 ? 8192.0 : 4096.0;
  p.int8 = info.multiprocessor_count * per_sm * clock_khz * 1e3;
  p.fp16 = p.int8 / 2;
  p.device = cuda::describe(info) + ", " + std::to_string(clock_khz / 1000) + " MHz";
  return p;
}

void print_tops_table(const bench::RecordingReporter& reporter, const Peaks& peaks) {
  std::printf("\nThroughput (fastest repetition), %s; dense peak int8 %.0f TOPS, fp16 %.0f TFLOP/s:\n",
              peaks.device.c_str(), peaks.int8 / 1e12, peaks.fp16 / 1e12);
  std::printf("%-62s %11s %9s %8s\n", "benchmark", "time (us)", "TOPS", "of peak");
  for (const Row& r : rows()) {
    const auto found = reporter.results().find(r.name);
    if (found == reporter.results().end() || found->second.seconds <= 0) continue;
    const double ops = 2.0 * r.shape.m * r.shape.n * r.shape.k;
    const double tops = ops / found->second.seconds / 1e12;
    const double peak = (r.int8 ? peaks.int8 : peaks.fp16) / 1e12;
    std::printf("%-62s %11.1f %9.1f %7.1f%%\n", r.name.c_str(), found->second.seconds * 1e6, tops,
                peak > 0 ? 100.0 * tops / peak : 0.0);
  }
}

void register_all(bool wgmma) {
  using cuda::LinearInt8Path;
  std::vector<std::pair<LinearInt8Path, std::string>> paths = {{LinearInt8Path::automatic, "automatic"},
                                                               {LinearInt8Path::mma_sync, "mma_sync"}};
  if (wgmma) paths.push_back({LinearInt8Path::wgmma, "wgmma"});
  auto& targets = bench::ratio_targets();
  using M = RatioTarget::Measure;
  for (const auto& [n, k] : kNKs)
    for (const int m : kMs) {
      const Shape3 s{m, n, k};
      const std::string tail = "/" + shape_name(s);
      add("cublas_f16" + tail, s, false, [s](benchmark::State& st) { bench_cublas_f16(st, s); });
      add("cublaslt_s8_epilogue" + tail, s, true, [s](benchmark::State& st) { bench_cublaslt_s8(st, s, true); });
      if (m >= 1024)
        add("cublaslt_s8_alone" + tail, s, true, [s](benchmark::State& st) { bench_cublaslt_s8(st, s, false); });
      for (const auto& [path, path_name] : paths) {
        const std::string name = "w8a8_" + path_name + "_f16" + tail;
        add(name, s, true, [s, path = path](benchmark::State& st) { bench_w8a8<half>(st, s, path); });
        // Time ratios: 1.6x cuBLAS FP16's throughput is 1 / 1.6 of its time; 0.9x cuBLASLt's is 1 / 0.9.
        const bool target = m >= 1024 && path == LinearInt8Path::automatic;
        targets.push_back({run_name(name), run_name("cublas_f16" + tail), M::time, target ? 1 / 1.6 : 0,
                           "W8A8 (epilogue included) >= 1.6x cuBLAS FP16 throughput, M >= 1024"});
        targets.push_back({run_name(name), run_name("cublaslt_s8_epilogue" + tail), M::time, target ? 1 / 0.9 : 0,
                           "W8A8 >= 0.9x cuBLASLt INT8 + separate epilogue throughput, M >= 1024"});
      }
    }
  // Every output type on two shapes, automatic path.
  for (const int m : {16, 4096}) {
    const Shape3 s{m, 4096, 4096};
    const std::string tail = "/" + shape_name(s);
    add("w8a8_automatic_f32" + tail, s, true,
        [s](benchmark::State& st) { bench_w8a8<float>(st, s, cuda::LinearInt8Path::automatic); });
    add("w8a8_automatic_bf16" + tail, s, true,
        [s](benchmark::State& st) { bench_w8a8<bfloat16>(st, s, cuda::LinearInt8Path::automatic); });
    add("w8a8_automatic_s8" + tail, s, true,
        [s](benchmark::State& st) { bench_w8a8<std::int8_t>(st, s, cuda::LinearInt8Path::automatic); });
  }
  for (const int m : {1, 16, 4096}) {
    const Shape3 s{m, 4096, 4096};
    add("w8a8_dynamic_f16/" + shape_name(s), s, true, [s](benchmark::State& st) { bench_w8a8_dynamic(st, s); });
  }
  for (const int m : {16, 4096}) {
    const std::string name = "quantize_rows_absmax_f16/M:" + std::to_string(m) + "/K:4096";
    benchmark::RegisterBenchmark(name.c_str(),
                                 bench::guarded([m](benchmark::State& st) { bench_quantize_rows(st, m, 4096); }))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(kIterations);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::guarded_main([&] {
    const Peaks peaks = device_peaks();
    bool wgmma = false;
    if (cuda::device_count() > 0) wgmma = cuda::device_info(0).compute_capability() == 90;
    register_all(wgmma);
    bench::RecordingReporter reporter;
    if (!bench::run_benchmarks(bench::arguments_with_repetitions(argc, argv), reporter)) return 1;
    print_tops_table(reporter, peaks);
    bench::print_ratio_table(reporter);  // last: device-check.sh collects its PASS and MISS lines
    return 0;
  });
}
