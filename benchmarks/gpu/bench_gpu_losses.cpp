// GPU distillation losses against a device-to-device copy measured in the same run: cross-entropy (loss, and loss with
// gradient) on 8192 x 131072 bfloat16 logits, the top-k (k = 64) KL with gradient on the same logits, and the feature
// losses with both gradients on 64Mi-element float features. Timed with CUDA events after warm-up (manual time);
// bandwidth counts the bytes a single pass must move (reads + writes), so a kernel that reads a row twice shows it as
// a lower ratio. On a machine without a device every benchmark reports skipped. Notes: benchmarks/notes/gpu_losses.md.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/cuda/feature_losses.hpp"
#include "shrink/cuda/topk_teacher.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 8192, kVocab = 131072, kTopK = 64;  // 1Gi logits: 2 GiB in bfloat16
constexpr std::int64_t kFeatureRows = 16384, kFeatures = 4096;     // 64Mi floats: 256 MiB a tensor
// Attention transfer: [64, 256, 64, 64] activations, the same 64Mi floats.
constexpr std::int64_t kSamples = 64, kChannels = 256, kSide = 64;
constexpr std::int64_t kLogitBytes = kRows * kVocab * 2, kFeatureBytes = kFeatureRows * kFeatures * 4;

// A row of the logits, spread over about [-8, 8] (every row the same).
std::vector<bfloat16> logit_row() {
  std::vector<bfloat16> row(static_cast<std::size_t>(kVocab));
  for (std::int64_t j = 0; j < kVocab; ++j)
    row[static_cast<std::size_t>(j)] = bfloat16(0.008f * static_cast<float>((j * 7919) % 2001 - 1000) + 0.004f);
  return row;
}

std::vector<std::int64_t> host_labels() {
  std::vector<std::int64_t> y(static_cast<std::size_t>(kRows));
  for (std::int64_t r = 0; r < kRows; ++r) y[static_cast<std::size_t>(r)] = (r * 7919) % kVocab;
  return y;
}

// The teacher's top k of each row: decreasing logits at distinct indices.
std::vector<bfloat16> host_topk_logits() {
  std::vector<bfloat16> t(static_cast<std::size_t>(kRows * kTopK));
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < kTopK; ++c)
      t[static_cast<std::size_t>(r * kTopK + c)] = bfloat16(8.0f - 0.05f * static_cast<float>(c));
  return t;
}
std::vector<std::int32_t> host_topk_indices() {
  std::vector<std::int32_t> idx(static_cast<std::size_t>(kRows * kTopK));
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t c = 0; c < kTopK; ++c)  // 2039 is odd: c * 2039 mod 2^17 are distinct
      idx[static_cast<std::size_t>(r * kTopK + c)] = static_cast<std::int32_t>((r * 131 + c * 2039) % kVocab);
  return idx;
}

// A row of features, non-zero, spread over about [-1, 1] by the multiplier's steps (every row the same).
std::vector<float> feature_row(std::int64_t multiplier) {
  std::vector<float> row(static_cast<std::size_t>(kFeatures));
  for (std::int64_t j = 0; j < kFeatures; ++j)
    row[static_cast<std::size_t>(j)] = 0.001f * static_cast<float>((j * multiplier) % 2001 - 1000) + 0.0005f;
  return row;
}

// Device data shared by every benchmark: random-looking non-zero inputs, outputs as large, workspaces.
struct DeviceData {
  DeviceMemory logits{static_cast<std::size_t>(kLogitBytes)}, grad{static_cast<std::size_t>(kLogitBytes)};
  DeviceMemory labels{host_labels()};
  DeviceMemory topk_logits{host_topk_logits()}, topk_indices{host_topk_indices()};
  DeviceMemory student{static_cast<std::size_t>(kFeatureBytes)}, teacher{static_cast<std::size_t>(kFeatureBytes)};
  DeviceMemory grad_student{static_cast<std::size_t>(kFeatureBytes)};
  DeviceMemory grad_teacher{static_cast<std::size_t>(kFeatureBytes)};
  DeviceMemory loss{sizeof(double)};
  DeviceMemory workspace{std::max({cuda::cross_entropy_workspace_bytes(kRows), cuda::topk_workspace_bytes(kRows),
                                   cuda::feature_loss_workspace_bytes(kFeatureRows),
                                   cuda::attention_transfer_workspace_bytes(kSamples, kSide * kSide)})};

  DeviceData() {
    logits.fill_repeating(logit_row());
    student.fill_repeating(feature_row(7919));
    teacher.fill_repeating(feature_row(104729));
  }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
  cuda::DeviceLoss device_loss() const { return cuda::DeviceLoss{loss.as<double>()}; }
  TensorView<const bfloat16> logits_view() const {
    return TensorView<const bfloat16>(logits.as<bfloat16>(), Shape{kRows, kVocab}, Device::cuda(0));
  }
  TensorView<bfloat16> grad_view() const {
    return TensorView<bfloat16>(grad.as<bfloat16>(), Shape{kRows, kVocab}, Device::cuda(0));
  }
  TensorView<const std::int64_t> labels_view() const {
    return TensorView<const std::int64_t>(labels.as<std::int64_t>(), Shape{kRows}, Device::cuda(0));
  }
};

// A feature tensor (or its gradient) seen with `shape`: any shape of the same 64Mi floats.
template <class T = const float>
TensorView<T> features(const DeviceMemory& m, const Shape& shape) {
  return TensorView<T>(m.as<float>(), shape, Device::cuda(0));
}

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_copy(state, d->grad, d->logits, static_cast<std::size_t>(kLogitBytes));
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_cross_entropy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, kLogitBytes, [&] {
    cuda::cross_entropy(d->logits_view(), d->labels_view(), d->device_loss(), d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_cross_entropy)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_cross_entropy_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  time_on_device(state, 2 * kLogitBytes, [&] {
    cuda::cross_entropy_with_grad(d->logits_view(), d->labels_view(), d->grad_view(), d->device_loss(), d->ws(),
                                  nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_cross_entropy_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_topk_kl_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const distill::TopKTeacher<bfloat16, std::int32_t> teacher{
      TensorView<const bfloat16>(d->topk_logits.as<bfloat16>(), Shape{kRows, kTopK}, Device::cuda(0)),
      TensorView<const std::int32_t>(d->topk_indices.as<std::int32_t>(), Shape{kRows, kTopK}, Device::cuda(0)),
      {}};
  distill::SoftTargetOptions o;
  o.temperature = 2.0f;
  const std::int64_t teacher_bytes = kRows * kTopK * (2 + 4);
  time_on_device(state, 2 * kLogitBytes + teacher_bytes, [&] {
    cuda::kl_div_with_grad(d->logits_view(), teacher, d->grad_view(), d->device_loss(), d->ws(), nullptr, o);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_topk_kl_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

// Feature losses with both gradients: two tensors read, two written.
void BM_gpu_mse_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const Shape shape{kFeatureRows, kFeatures};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::mse_loss_with_grad<float>(features(d->student, shape), features(d->teacher, shape),
                                    features<float>(d->grad_student, shape), features<float>(d->grad_teacher, shape),
                                    d->device_loss(), d->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_mse_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_cosine_embedding_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const Shape shape{kFeatureRows, kFeatures};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::cosine_embedding_loss_with_grad<float>(features(d->student, shape), features(d->teacher, shape), {},
                                                 features<float>(d->grad_student, shape),
                                                 features<float>(d->grad_teacher, shape), d->device_loss(), d->ws(),
                                                 nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_cosine_embedding_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_attention_transfer_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = shared_data<DeviceData>();
  const Shape shape{kSamples, kChannels, kSide, kSide};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::attention_transfer_loss_with_grad<float>(features(d->student, shape), features(d->teacher, shape),
                                                   features<float>(d->grad_student, shape),
                                                   features<float>(d->grad_teacher, shape), d->device_loss(), d->ws(),
                                                   nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_attention_transfer_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  const std::string copy = "BM_gpu_copy/manual_time";
  t.push_back({"BM_gpu_cross_entropy/manual_time", copy, M::bandwidth, 0.85,
               "one read of the logits: >= 0.85 of the copy's bandwidth"});
  t.push_back({"BM_gpu_mse_with_grad/manual_time", copy, M::bandwidth, 0.85,
               "one pass, 2 reads + 2 writes: >= 0.85 of the copy's bandwidth"});
  // Two reads of each row (the second from L2 when it is still there): shown, no target yet (notes: predictions).
  for (const char* name :
       {"BM_gpu_cross_entropy_with_grad/manual_time", "BM_gpu_topk_kl_with_grad/manual_time",
        "BM_gpu_cosine_embedding_with_grad/manual_time", "BM_gpu_attention_transfer_with_grad/manual_time"})
    t.push_back({name, copy, M::bandwidth, 0.0, "a row read twice; bytes of one pass (reads + writes)"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
