// GPU global magnitude threshold (shrink/cuda/threshold.hpp) over 1B parameters, a list of 8 tensors of 128M, in
// float (4 GiB) and bfloat16 (2 GiB), unmasked and under current masks, and float with every weight equal (the worst
// case of the counting: one bucket in both passes), against one read of every byte of the same tensors measured in
// the same run (CUDA events after warm-up); without a device every row is skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/threshold.hpp"
#include "shrink/prune/threshold.hpp"
#include "support/gpu_baselines.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

constexpr int kTensors = 8;
constexpr std::int64_t kRows = 8192, kCols = 16384;  // 128M parameters a tensor, 1B in all
constexpr std::int64_t kPerTensor = kRows * kCols;
const Shape kShape{kRows, kCols};

// The 8 tensors of one type (weights about normal(0, 0.02), each tensor its own seed; Tied: every byte 0x3C, so
// every weight 0.0115) and masks for them.
template <class T, bool Tied = false>
struct Model {
  std::vector<std::unique_ptr<DeviceMemory>> tensors, masks;
  DeviceMemory workspace{cuda::threshold_workspace_bytes()};
  DeviceMemory result{sizeof(prune::MagnitudeThreshold)};
  DeviceMemory sink{sizeof(unsigned long long)};

  Model() {
    const auto type = sizeof(T) == 4 ? WeightType::f32 : WeightType::bf16;
    for (int s = 0; s < kTensors; ++s) {
      tensors.push_back(std::make_unique<DeviceMemory>(static_cast<std::size_t>(kPerTensor) * sizeof(T)));
      if (Tied) {
        check(cudaMemset(tensors.back()->template as<void>(), 0x3C, tensors.back()->bytes()), "memset");
        continue;  // no masks
      }
      fill_weights(tensors.back()->template as<void>(), kPerTensor, type, 10 + s, 0.02f);
      // Mask words from the bits of random floats: mantissa bits uniform, exponent bits mostly set, over half kept.
      masks.push_back(std::make_unique<DeviceMemory>(static_cast<std::size_t>(kPerTensor / 8)));
      fill_weights(masks.back()->template as<void>(), kPerTensor / 32, WeightType::f32, 100 + s, 1.0f);
    }
  }
  std::vector<cuda::DeviceWeights<T>> weights(bool masked) const {
    std::vector<cuda::DeviceWeights<T>> list;
    for (int s = 0; s < kTensors; ++s)
      list.push_back({TensorView<const T>(tensors[static_cast<std::size_t>(s)]->template as<T>(), kShape,
                                          Device::cuda(0)),
                      masked ? masks[static_cast<std::size_t>(s)]->template as<std::uint64_t>() : nullptr});
    return list;
  }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
};

// One read of every byte of the 8 tensors: the floor any selection pays at least once.
template <class T>
void BM_gpu_read(benchmark::State& state) {
  if (!has_device(state)) return;
  Model<T>* m = shared_data<Model<T>>();
  time_on_device(state, kTensors * kPerTensor * static_cast<std::int64_t>(sizeof(T)), [&] {
    for (const auto& t : m->tensors)
      read_all(t->template as<void>(), t->bytes(), m->sink.template as<unsigned long long>());
  });
}
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_read, float)->UseManualTime()->Unit(benchmark::kMillisecond);
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_read, bfloat16)->UseManualTime()->Unit(benchmark::kMillisecond);

// Half the candidates pruned (torch's global_unstructured with amount 0.5).
template <class T>
void BM_gpu_threshold(benchmark::State& state) {
  if (!has_device(state)) return;
  Model<T>* m = shared_data<Model<T>>();
  const bool masked = state.range(0) != 0;
  const std::vector<cuda::DeviceWeights<T>> weights = m->weights(masked);
  // Masked: k below the candidates whatever the random masks keep (a third of all parameters).
  const std::int64_t k = masked ? kTensors * kPerTensor / 3 : kTensors * kPerTensor / 2;
  time_on_device(state, kTensors * kPerTensor * static_cast<std::int64_t>(sizeof(T)), [&] {
    cuda::select_magnitude_threshold(weights, k, m->result.template as<prune::MagnitudeThreshold>(), m->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_threshold, float)->ArgName("masked")->Arg(0)->Arg(1)->UseManualTime()
    ->Unit(benchmark::kMillisecond);
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_threshold, bfloat16)->ArgName("masked")->Arg(0)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Every weight equal: pass 0 puts all of them in one bucket, pass 1 counts all of them again.
void BM_gpu_threshold_tied(benchmark::State& state) {
  if (!has_device(state)) return;
  Model<float, true>* m = shared_data<Model<float, true>>();
  const std::vector<cuda::DeviceWeights<float>> weights = m->weights(false);
  time_on_device(state, kTensors * kPerTensor * static_cast<std::int64_t>(sizeof(float)), [&] {
    cuda::select_magnitude_threshold(weights, kTensors * kPerTensor / 2,
                                     m->result.template as<prune::MagnitudeThreshold>(), m->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_threshold_tied)->UseManualTime()->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  t.push_back({"BM_gpu_threshold<float>/masked:0/manual_time", "BM_gpu_read<float>/manual_time", M::time, 3.0,
               "global threshold over 1B floats within 3x one read pass"});
  t.push_back({"BM_gpu_threshold<bfloat16>/masked:0/manual_time", "BM_gpu_read<bfloat16>/manual_time", M::time, 3.0,
               "global threshold over 1B bfloat16 within 3x one read pass"});
  t.push_back({"BM_gpu_threshold<float>/masked:1/manual_time", "BM_gpu_read<float>/manual_time", M::time, 0,
               "with current masks (their words read too): shown, no target"});
  t.push_back({"BM_gpu_threshold_tied/manual_time", "BM_gpu_read<float>/manual_time", M::time, 0,
               "every float equal (one bucket in both passes): shown, no target"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
