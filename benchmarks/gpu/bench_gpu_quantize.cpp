// GPU quantize / dequantize / fake-quantize on 256M floats against a device-to-device copy of the same bytes, timed
// with CUDA events after warm-up (manual time); on a machine without a device every benchmark reports skipped.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/cuda/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 16384, kCols = 16384;  // 256M floats, 1 GiB: far past any L2
const Shape kShape{kRows, kCols};
const std::int64_t kFloatBytes = kRows * kCols * 4;

// Spread over [-1, 1], never zero.
std::vector<float> x_row() {
  std::vector<float> host(static_cast<std::size_t>(kCols));
  for (std::int64_t i = 0; i < kCols; ++i)
    host[static_cast<std::size_t>(i)] = 0.001f * static_cast<float>((i * 7919) % 2001 - 1000) + 0.0005f;
  return host;
}

// Device buffers shared by every benchmark: x (one row repeated), an output as large as x, parameters, workspace.
struct DeviceData {
  DeviceMemory x{static_cast<std::size_t>(kFloatBytes)};
  DeviceMemory out{static_cast<std::size_t>(kFloatBytes)};
  DeviceMemory scales{std::vector<float>(static_cast<std::size_t>(kRows), 1.0f / 127.0f)};
  DeviceMemory zero_points{std::vector<std::int32_t>(static_cast<std::size_t>(kRows), 0)};
  DeviceMemory workspace{
      cuda::workspace_bytes(kShape, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0))};

  DeviceData() { x.fill_repeating(x_row()); }
  cuda::DeviceQParams qparams() const { return {scales.as<float>(), zero_points.as<std::int32_t>()}; }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
};

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_copy(state, d->out, d->x, static_cast<std::size_t>(kFloatBytes));
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

QuantScheme scheme_for(int granularity, QuantDtype dtype) {
  return granularity == 0 ? QuantScheme::per_tensor(dtype, Symmetry::symmetric)
                          : QuantScheme::per_channel(dtype, Symmetry::symmetric, 0);
}

void BM_gpu_quantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const QuantDtype dtype = state.range(1) == 8 ? QuantDtype::int8 : QuantDtype::int4;
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)), dtype);
  const TensorView<const float> x(d->x.as<float>(), kShape, Device::cuda(0));
  const std::int64_t out_bytes = quantized_data_bytes(dtype, kShape);
  time_on_device(state, kFloatBytes + out_bytes,
                 [&] { cuda::quantize(x, scheme, d->qparams(), d->out.as<void>(), d->ws(), nullptr); });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_quantize)->ArgNames({"per_channel", "bits"})->Args({0, 8})->Args({1, 8})->Args({1, 4})
    ->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_dequantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)), QuantDtype::int8);
  const TensorView<float> out(d->x.as<float>(), kShape, Device::cuda(0));  // reads `out` as int8, writes floats over x
  time_on_device(state, kFloatBytes + kRows * kCols,
                 [&] { cuda::dequantize(d->out.as<void>(), scheme, d->qparams(), out, d->ws(), nullptr); });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_dequantize)->ArgNames({"per_channel"})->Arg(0)->Arg(1)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_gpu_fake_quantize(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const QuantScheme scheme = scheme_for(1, QuantDtype::int8);
  const TensorView<const float> x(d->x.as<float>(), kShape, Device::cuda(0));
  time_on_device(state, 2 * kFloatBytes, [&] {
    cuda::fake_quantize(x, scheme, d->qparams(), d->out.as<float>(), nullptr, d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_fake_quantize)->UseManualTime()->Unit(benchmark::kMillisecond);

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
