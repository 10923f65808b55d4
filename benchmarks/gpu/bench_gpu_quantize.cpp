// GPU quantize / dequantize / fake-quantize on 256M floats against a device-to-device copy of the same bytes, timed
// with CUDA events after warm-up (manual time); on a machine without a device every benchmark reports skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "shrink/cuda/device.hpp"
#include "shrink/cuda/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 16384, kCols = 16384;  // 256M floats, 1 GiB: far past any L2
const Shape kShape{kRows, kCols};

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Device buffers shared by every benchmark: x (random, never zero), an output as large as x, parameters, workspace.
struct DeviceData {
  float* x = nullptr;
  void* out = nullptr;
  float* scales = nullptr;
  std::int32_t* zero_points = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_size = 0;

  DeviceData() {
    const std::size_t bytes = static_cast<std::size_t>(kRows * kCols) * sizeof(float);
    check(cudaMalloc(reinterpret_cast<void**>(&x), bytes), "cudaMalloc x");
    check(cudaMalloc(&out, bytes), "cudaMalloc out");
    std::vector<float> host(static_cast<std::size_t>(kCols));
    for (std::int64_t i = 0; i < kCols; ++i)  // spread over [-1, 1], never zero
      host[static_cast<std::size_t>(i)] = 0.001f * static_cast<float>((i * 7919) % 2001 - 1000) + 0.0005f;
    for (std::int64_t r = 0; r < kRows; ++r)
      check(cudaMemcpy(x + r * kCols, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), "fill x");
    const std::vector<float> s(static_cast<std::size_t>(kRows), 1.0f / 127.0f);
    const std::vector<std::int32_t> z(static_cast<std::size_t>(kRows), 0);
    check(cudaMalloc(reinterpret_cast<void**>(&scales), s.size() * sizeof(float)), "cudaMalloc scales");
    check(cudaMalloc(reinterpret_cast<void**>(&zero_points), z.size() * sizeof(std::int32_t)), "cudaMalloc zero points");
    check(cudaMemcpy(scales, s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice), "scales");
    check(cudaMemcpy(zero_points, z.data(), z.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), "zero points");
    workspace_size = cuda::workspace_bytes(kShape, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
    check(cudaMalloc(&workspace, workspace_size), "cudaMalloc workspace");
  }
};

DeviceData* data() {
  static DeviceData* d = new DeviceData();  // lives for the process: the driver tears it down at exit
  return d;
}

bool has_device(benchmark::State& state) {
  if (cuda::device_count() > 0) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

// Times `launch` with CUDA events around each iteration (the median over many is what Google Benchmark reports).
template <class Launch>
void time_on_device(benchmark::State& state, std::int64_t bytes_moved, Launch launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) launch();  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  for (auto _ : state) {
    check(cudaEventRecord(start), "record");
    launch();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(state.iterations() * bytes_moved);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

const std::int64_t kFloatBytes = kRows * kCols * 4;

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  time_on_device(state, 2 * kFloatBytes, [&] {
    check(cudaMemcpyAsync(d->out, d->x, static_cast<std::size_t>(kFloatBytes), cudaMemcpyDeviceToDevice), "copy");
  });
}
BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

QuantScheme scheme_for(int granularity, QuantDtype dtype) {
  return granularity == 0 ? QuantScheme::per_tensor(dtype, Symmetry::symmetric)
                          : QuantScheme::per_channel(dtype, Symmetry::symmetric, 0);
}

void BM_gpu_quantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const QuantDtype dtype = state.range(1) == 8 ? QuantDtype::int8 : QuantDtype::int4;
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)), dtype);
  const TensorView<const float> x(d->x, kShape, Device::cuda(0));
  const std::int64_t out_bytes = quantized_data_bytes(dtype, kShape);
  time_on_device(state, kFloatBytes + out_bytes, [&] {
    cuda::quantize(x, scheme, {d->scales, d->zero_points}, d->out, {d->workspace, d->workspace_size}, nullptr);
  });
}
BENCHMARK(BM_gpu_quantize)->ArgNames({"per_channel", "bits"})->Args({0, 8})->Args({1, 8})->Args({1, 4})
    ->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_dequantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)), QuantDtype::int8);
  const TensorView<float> out(d->x, kShape, Device::cuda(0));  // reads `out` as int8, writes floats over x
  time_on_device(state, kFloatBytes + kRows * kCols, [&] {
    cuda::dequantize(d->out, scheme, {d->scales, d->zero_points}, out, {d->workspace, d->workspace_size}, nullptr);
  });
}
BENCHMARK(BM_gpu_dequantize)->ArgNames({"per_channel"})->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_fake_quantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const QuantScheme scheme = scheme_for(1, QuantDtype::int8);
  const TensorView<const float> x(d->x, kShape, Device::cuda(0));
  time_on_device(state, 2 * kFloatBytes, [&] {
    cuda::fake_quantize(x, scheme, {d->scales, d->zero_points}, static_cast<float*>(d->out), nullptr,
                        {d->workspace, d->workspace_size}, nullptr);
  });
}
BENCHMARK(BM_gpu_fake_quantize)->UseManualTime()->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (const char* name : {"BM_gpu_quantize/per_channel:0/bits:8", "BM_gpu_quantize/per_channel:1/bits:8",
                           "BM_gpu_quantize/per_channel:1/bits:4", "BM_gpu_dequantize/per_channel:0",
                           "BM_gpu_dequantize/per_channel:1", "BM_gpu_fake_quantize"})
    t.push_back({std::string(name) + "/manual_time", "BM_gpu_copy/manual_time", M::bandwidth, 0.85,
                 "GPU quantize/dequantize >= 0.85 of device-to-device copy bandwidth, bytes read + written"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
