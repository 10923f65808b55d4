// GPU calibration statistics (shrink/cuda/calibration.hpp) on 256M floats: per-tensor and per-channel min/max, the
// moving-average observer step, torch.histc and |x| histograms of 2048 bins, each against a read of every byte and a
// device-to-device copy measured in the same run (CUDA events after warm-up); without a device every row is skipped.
// The calibration API takes float only, so there is no 16-bit case here.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

#include "shrink/core/view.hpp"
#include "shrink/cuda/calibration.hpp"
#include "support/gpu_baselines.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 16384, kCols = 16384;  // 256M floats, 1 GiB: far past any L2
constexpr std::int64_t kBytes = kRows * kCols * 4;
constexpr std::int32_t kBins = 2048;
const Shape kShape{kRows, kCols};

// Values about normal(0, 1), one copy for every benchmark.
struct DeviceData {
  DeviceMemory x{static_cast<std::size_t>(kBytes)};
  DeviceMemory out{static_cast<std::size_t>(kBytes)};
  DeviceMemory min{kRows * sizeof(float)}, max{kRows * sizeof(float)};
  DeviceMemory running_min{kRows * sizeof(float)}, running_max{kRows * sizeof(float)};
  DeviceMemory counts{kBins * sizeof(std::int64_t)};
  DeviceMemory sink{sizeof(unsigned long long)};
  DeviceMemory workspace{cuda::calibration_workspace_bytes(kRows)};

  DeviceData() { fill_weights(x.as<void>(), kRows * kCols, WeightType::f32, 1, 1.0f); }
  TensorView<const float> view() const { return TensorView<const float>(x.as<float>(), kShape, Device::cuda(0)); }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
};

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_copy(state, d->out, d->x, static_cast<std::size_t>(kBytes));
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_read(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kBytes, [&] {
    read_all(d->x.as<void>(), static_cast<std::size_t>(kBytes), d->sink.as<unsigned long long>());
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_read)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_minmax_per_tensor(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kBytes, [&] {
    cuda::minmax_per_tensor(d->view(), d->min.as<float>(), d->max.as<float>(), d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_minmax_per_tensor)->UseManualTime()->Unit(benchmark::kMillisecond);

// axis 0: output channels (16384 contiguous runs); axis 1: the last axis (channels interleaved element by element).
void BM_gpu_minmax_per_channel(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const int axis = static_cast<int>(state.range(0));
  time_on_device(state, kBytes, [&] {
    cuda::minmax_per_channel(d->view(), axis, d->min.as<float>(), d->max.as<float>(), d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_minmax_per_channel)->ArgName("axis")->Arg(0)->Arg(1)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// MovingAverageMinMaxObserver's step per channel: the batch's ranges, then the running update.
void BM_gpu_moving_average_step(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kBytes, [&] {
    cuda::minmax_per_channel(d->view(), 0, d->min.as<float>(), d->max.as<float>(), d->ws(), nullptr);
    cuda::moving_average_update(d->min.as<float>(), d->max.as<float>(), kRows, 0.01f, d->running_min.as<float>(),
                                d->running_max.as<float>(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_moving_average_step)->UseManualTime()->Unit(benchmark::kMillisecond);

// torch.histc over the data's range, 2048 bins (most values in the middle bins: the contended case).
void BM_gpu_histc(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kBytes, [&] {
    cuda::histogram(d->view(), cuda::HistcBins{-6.0f, 6.0f, kBins}, d->counts.as<std::int64_t>(), d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_histc)->UseManualTime()->Unit(benchmark::kMillisecond);

// |x| in 2048 bins up to max|x| (Entropy / Percentile observers): half-normal, most values in the low bins.
void BM_gpu_magnitude_histogram(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kBytes, [&] {
    cuda::histogram(d->view(), cuda::MagnitudeBins{kBins / 6.0, kBins}, d->counts.as<std::int64_t>(), d->ws(),
                    nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_magnitude_histogram)->UseManualTime()->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  t.push_back({"BM_gpu_read/manual_time", "BM_gpu_copy/manual_time", M::bandwidth, 0.90,
               "the read baseline reaches ~0.90 of the copy's bandwidth (bytes read vs read + written)"});
  for (const char* name : {"BM_gpu_minmax_per_tensor", "BM_gpu_minmax_per_channel/axis:0",
                           "BM_gpu_minmax_per_channel/axis:1", "BM_gpu_moving_average_step", "BM_gpu_histc",
                           "BM_gpu_magnitude_histogram"})
    t.push_back({std::string(name) + "/manual_time", "BM_gpu_read/manual_time", M::bandwidth, 0.80,
                 "GPU calibration statistics >= 0.80 of the read bandwidth"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
