// GPU distillation losses against a device-to-device copy measured in the same run: cross-entropy (loss, and loss with
// gradient) on 8192 x 131072 bfloat16 logits, the top-k (k = 64) KL with gradient on the same logits, and the feature
// losses with both gradients on 64Mi-element float features. Timed with CUDA events after warm-up (manual time);
// bandwidth counts the bytes a single pass must move (reads + writes), so a kernel that reads a row twice shows it as
// a lower ratio. On a machine without a device every benchmark reports skipped. Notes: benchmarks/notes/gpu_losses.md.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/cuda/feature_losses.hpp"
#include "shrink/cuda/topk_teacher.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 8192, kVocab = 131072, kTopK = 64;  // 1Gi logits: 2 GiB in bfloat16
constexpr std::int64_t kFeatureRows = 16384, kFeatures = 4096;     // 64Mi floats: 256 MiB a tensor
// Attention transfer: [64, 256, 64, 64] activations, the same 64Mi floats.
constexpr std::int64_t kSamples = 64, kChannels = 256, kSide = 64;
constexpr std::int64_t kLogitBytes = kRows * kVocab * 2, kFeatureBytes = kFeatureRows * kFeatures * 4;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

template <class T>
T* device_alloc(std::size_t bytes, const char* what) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), what);
  return static_cast<T*>(p);
}

// Copies one host row to every row of a device matrix.
template <class T>
void fill_rows(T* device, const std::vector<T>& row, std::int64_t rows) {
  for (std::int64_t r = 0; r < rows; ++r)
    check(cudaMemcpy(device + r * static_cast<std::int64_t>(row.size()), row.data(), row.size() * sizeof(T),
                     cudaMemcpyHostToDevice),
          "fill");
}

// Device data shared by every benchmark: random-looking non-zero inputs, outputs as large, workspaces.
struct DeviceData {
  bfloat16* logits = nullptr;
  bfloat16* grad = nullptr;
  std::int64_t* labels = nullptr;
  bfloat16* topk_logits = nullptr;
  std::int32_t* topk_indices = nullptr;
  float *student = nullptr, *teacher = nullptr, *grad_student = nullptr, *grad_teacher = nullptr;
  double* loss = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_size = 0;

  DeviceData() {
    logits = device_alloc<bfloat16>(kLogitBytes, "cudaMalloc logits");
    grad = device_alloc<bfloat16>(kLogitBytes, "cudaMalloc grad");
    std::vector<bfloat16> row(static_cast<std::size_t>(kVocab));
    for (std::int64_t j = 0; j < kVocab; ++j)  // spread over about [-8, 8]
      row[static_cast<std::size_t>(j)] = bfloat16(0.008f * static_cast<float>((j * 7919) % 2001 - 1000) + 0.004f);
    fill_rows(logits, row, kRows);
    std::vector<std::int64_t> y(static_cast<std::size_t>(kRows));
    for (std::int64_t r = 0; r < kRows; ++r) y[static_cast<std::size_t>(r)] = (r * 7919) % kVocab;
    labels = device_alloc<std::int64_t>(y.size() * sizeof(std::int64_t), "cudaMalloc labels");
    check(cudaMemcpy(labels, y.data(), y.size() * sizeof(std::int64_t), cudaMemcpyHostToDevice), "labels");
    std::vector<bfloat16> t(static_cast<std::size_t>(kRows * kTopK));
    std::vector<std::int32_t> idx(t.size());
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t c = 0; c < kTopK; ++c) {  // 2039 is odd: c * 2039 mod 2^17 are distinct
        t[static_cast<std::size_t>(r * kTopK + c)] = bfloat16(8.0f - 0.05f * static_cast<float>(c));
        idx[static_cast<std::size_t>(r * kTopK + c)] = static_cast<std::int32_t>((r * 131 + c * 2039) % kVocab);
      }
    topk_logits = device_alloc<bfloat16>(t.size() * sizeof(bfloat16), "cudaMalloc top-k logits");
    topk_indices = device_alloc<std::int32_t>(idx.size() * sizeof(std::int32_t), "cudaMalloc top-k indices");
    check(cudaMemcpy(topk_logits, t.data(), t.size() * sizeof(bfloat16), cudaMemcpyHostToDevice), "top-k logits");
    check(cudaMemcpy(topk_indices, idx.data(), idx.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice), "indices");

    student = device_alloc<float>(kFeatureBytes, "cudaMalloc student");
    teacher = device_alloc<float>(kFeatureBytes, "cudaMalloc teacher");
    grad_student = device_alloc<float>(kFeatureBytes, "cudaMalloc grad_student");
    grad_teacher = device_alloc<float>(kFeatureBytes, "cudaMalloc grad_teacher");
    std::vector<float> s(static_cast<std::size_t>(kFeatures)), u(s.size());
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      s[static_cast<std::size_t>(j)] = 0.001f * static_cast<float>((j * 7919) % 2001 - 1000) + 0.0005f;
      u[static_cast<std::size_t>(j)] = 0.001f * static_cast<float>((j * 104729) % 2001 - 1000) + 0.0005f;
    }
    fill_rows(student, s, kFeatureRows);
    fill_rows(teacher, u, kFeatureRows);
    loss = device_alloc<double>(sizeof(double), "cudaMalloc loss");
    workspace_size = std::max({cuda::cross_entropy_workspace_bytes(kRows), cuda::topk_workspace_bytes(kRows),
                               cuda::feature_loss_workspace_bytes(kFeatureRows),
                               cuda::attention_transfer_workspace_bytes(kSamples, kSide * kSide)});
    workspace = device_alloc<void>(workspace_size, "cudaMalloc workspace");
  }
  cuda::Workspace ws() const { return {workspace, workspace_size}; }
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

// Times `launch` with CUDA events around each iteration, after warm-up.
template <class Launch>
void time_on_device(benchmark::State& state, std::int64_t bytes_moved, Launch launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) launch();
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

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  time_on_device(state, 2 * kLogitBytes, [&] {
    check(cudaMemcpyAsync(d->grad, d->logits, static_cast<std::size_t>(kLogitBytes), cudaMemcpyDeviceToDevice), "copy");
  });
}
BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

TensorView<const bfloat16> logits_view(const DeviceData* d) {
  return TensorView<const bfloat16>(d->logits, Shape{kRows, kVocab}, Device::cuda(0));
}

void BM_gpu_cross_entropy(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const TensorView<const std::int64_t> y(d->labels, Shape{kRows}, Device::cuda(0));
  time_on_device(state, kLogitBytes,
                 [&] { cuda::cross_entropy(logits_view(d), y, cuda::DeviceLoss{d->loss}, d->ws(), nullptr); });
}
BENCHMARK(BM_gpu_cross_entropy)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_cross_entropy_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const TensorView<const std::int64_t> y(d->labels, Shape{kRows}, Device::cuda(0));
  const TensorView<bfloat16> g(d->grad, Shape{kRows, kVocab}, Device::cuda(0));
  time_on_device(state, 2 * kLogitBytes, [&] {
    cuda::cross_entropy_with_grad(logits_view(d), y, g, cuda::DeviceLoss{d->loss}, d->ws(), nullptr);
  });
}
BENCHMARK(BM_gpu_cross_entropy_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_topk_kl_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const distill::TopKTeacher<bfloat16, std::int32_t> teacher{
      TensorView<const bfloat16>(d->topk_logits, Shape{kRows, kTopK}, Device::cuda(0)),
      TensorView<const std::int32_t>(d->topk_indices, Shape{kRows, kTopK}, Device::cuda(0)),
      {}};
  const TensorView<bfloat16> g(d->grad, Shape{kRows, kVocab}, Device::cuda(0));
  distill::SoftTargetOptions o;
  o.temperature = 2.0f;
  const std::int64_t teacher_bytes = kRows * kTopK * (2 + 4);
  time_on_device(state, 2 * kLogitBytes + teacher_bytes, [&] {
    cuda::kl_div_with_grad(logits_view(d), teacher, g, cuda::DeviceLoss{d->loss}, d->ws(), nullptr, o);
  });
}
BENCHMARK(BM_gpu_topk_kl_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

// Feature losses with both gradients: two tensors read, two written.
void BM_gpu_mse_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const Shape shape{kFeatureRows, kFeatures};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::mse_loss_with_grad<float>(TensorView<const float>(d->student, shape, Device::cuda(0)),
                                    TensorView<const float>(d->teacher, shape, Device::cuda(0)),
                                    TensorView<float>(d->grad_student, shape, Device::cuda(0)),
                                    TensorView<float>(d->grad_teacher, shape, Device::cuda(0)),
                                    cuda::DeviceLoss{d->loss}, d->ws(), nullptr);
  });
}
BENCHMARK(BM_gpu_mse_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_cosine_embedding_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const Shape shape{kFeatureRows, kFeatures};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::cosine_embedding_loss_with_grad<float>(TensorView<const float>(d->student, shape, Device::cuda(0)),
                                                 TensorView<const float>(d->teacher, shape, Device::cuda(0)), {},
                                                 TensorView<float>(d->grad_student, shape, Device::cuda(0)),
                                                 TensorView<float>(d->grad_teacher, shape, Device::cuda(0)),
                                                 cuda::DeviceLoss{d->loss}, d->ws(), nullptr);
  });
}
BENCHMARK(BM_gpu_cosine_embedding_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

void BM_gpu_attention_transfer_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  DeviceData* d = data();
  const Shape shape{kSamples, kChannels, kSide, kSide};
  time_on_device(state, 4 * kFeatureBytes, [&] {
    cuda::attention_transfer_loss_with_grad<float>(TensorView<const float>(d->student, shape, Device::cuda(0)),
                                                   TensorView<const float>(d->teacher, shape, Device::cuda(0)),
                                                   TensorView<float>(d->grad_student, shape, Device::cuda(0)),
                                                   TensorView<float>(d->grad_teacher, shape, Device::cuda(0)),
                                                   cuda::DeviceLoss{d->loss}, d->ws(), nullptr);
  });
}
BENCHMARK(BM_gpu_attention_transfer_with_grad)->UseManualTime()->Unit(benchmark::kMillisecond);

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
