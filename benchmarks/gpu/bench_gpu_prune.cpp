// GPU structured-pruning norms (shrink/cuda/norms.hpp) and CSR conversion (shrink/cuda/csr.hpp) on a 16384 x 16384
// weight (256M parameters: 1 GiB in float, 512 MiB in bfloat16), against a read of every byte and a device-to-device
// copy measured in the same run (CUDA events after warm-up); without a device every row is skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/csr.hpp"
#include "shrink/cuda/norms.hpp"
#include "shrink/prune/norm.hpp"
#include "support/gpu_baselines.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 16384, kCols = 16384;
constexpr std::int64_t kElements = kRows * kCols;
const Shape kShape{kRows, kCols};

// Dense weights (about normal(0, 0.02)) of one type, a mask for them, the norms and the workspace.
template <class T>
struct Weights {
  DeviceMemory x{static_cast<std::size_t>(kElements) * sizeof(T)};
  DeviceMemory mask{static_cast<std::size_t>(kElements / 8)};
  DeviceMemory norms{static_cast<std::size_t>(kElements / 16) * sizeof(double)};  // the most: 4x4 blocks
  DeviceMemory workspace{std::max({cuda::slice_norms_workspace_bytes(kShape, 0),
                                   cuda::slice_norms_workspace_bytes(kShape, 1), cuda::block_norms_workspace_bytes()})};
  DeviceMemory sink{sizeof(unsigned long long)};

  Weights() {
    fill_weights(x.as<void>(), kElements, sizeof(T) == 4 ? WeightType::f32 : WeightType::bf16, 3, 0.02f);
    fill_weights(mask.as<void>(), kElements / 32, WeightType::f32, 4, 1.0f);  // random bits
  }
  TensorView<const T> view() const { return TensorView<const T>(x.as<T>(), kShape, Device::cuda(0)); }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
};

// A float weight with half its elements zero (the input of the CSR conversion), its CSR arrays and nnz.
struct Sparse {
  DeviceMemory x{static_cast<std::size_t>(kElements) * 4};
  DeviceMemory dense_out{static_cast<std::size_t>(kElements) * 4};
  DeviceMemory offsets{static_cast<std::size_t>(kRows + 1) * 4};
  DeviceMemory indices{static_cast<std::size_t>(kElements) * 4};
  DeviceMemory values{static_cast<std::size_t>(kElements) * 4};
  DeviceMemory nnz_device{sizeof(std::int64_t)};
  DeviceMemory workspace{cuda::csr_workspace_bytes(kRows)};
  DeviceMemory dense_workspace{cuda::csr_to_dense_workspace_bytes()};
  std::int64_t nnz = 0;

  Sparse() {
    fill_weights(x.as<void>(), kElements, WeightType::f32, 5, 0.02f, 0.5);
    cuda::csr_count(view(), nullptr, offsets.as<std::int32_t>(), nnz_device.as<std::int64_t>(), ws(), nullptr,
                    cuda::Synchronize::yes);
    check(cudaMemcpy(&nnz, nnz_device.as<void>(), sizeof nnz, cudaMemcpyDeviceToHost), "nnz");
  }
  TensorView<const float> view() const { return TensorView<const float>(x.as<float>(), kShape, Device::cuda(0)); }
  cuda::Workspace ws() const { return {workspace.as<void>(), workspace.bytes()}; }
  cuda::DeviceCsr<float> csr() const {
    return {offsets.as<std::int32_t>(), indices.as<std::int32_t>(), values.as<float>(), kElements};
  }
};

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  Weights<float>* w = shared_data<Weights<float>>();
  Sparse* s = shared_data<Sparse>();
  time_copy(state, s->dense_out, w->x, static_cast<std::size_t>(kElements) * 4);
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_copy)->UseManualTime()->Unit(benchmark::kMillisecond);

template <class T>
void BM_gpu_read(benchmark::State& state) {
  if (!has_device(state)) return;
  Weights<T>* w = shared_data<Weights<T>>();
  time_on_device(state, kElements * static_cast<std::int64_t>(sizeof(T)), [&] {
    read_all(w->x.template as<void>(), w->x.bytes(), w->sink.template as<unsigned long long>());
  });
}
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_read, float)->UseManualTime()->Unit(benchmark::kMillisecond);
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_read, bfloat16)->UseManualTime()->Unit(benchmark::kMillisecond);

// L2 norms of rows (dim 0: output channels, runs of 16384) or columns (dim 1: input channels, the columns layout);
// masked: the mask's words are read too.
template <class T>
void BM_gpu_slice_norms(benchmark::State& state) {
  if (!has_device(state)) return;
  Weights<T>* w = shared_data<Weights<T>>();
  const int dim = static_cast<int>(state.range(0));
  const bool masked = state.range(1) != 0;
  const std::uint64_t* mask = masked ? w->mask.template as<std::uint64_t>() : nullptr;
  time_on_device(state, kElements * static_cast<std::int64_t>(sizeof(T)) + (masked ? kElements / 8 : 0), [&] {
    cuda::slice_norms(w->view(), mask, prune::NormOrder::l2, dim, w->norms.template as<double>(), w->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_slice_norms, float)->ArgNames({"dim", "masked"})->Args({0, 0})->Args({1, 0})
    ->Args({0, 1})->UseManualTime()->Unit(benchmark::kMillisecond);
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_slice_norms, bfloat16)->ArgNames({"dim", "masked"})->Args({0, 0})->Args({1, 0})
    ->UseManualTime()->Unit(benchmark::kMillisecond);

// L2 norms of square blocks: 4 (one thread a block, exact) and 32 (one warp a block).
template <class T>
void BM_gpu_block_norms(benchmark::State& state) {
  if (!has_device(state)) return;
  Weights<T>* w = shared_data<Weights<T>>();
  const std::int64_t side = state.range(0);
  time_on_device(state, kElements * static_cast<std::int64_t>(sizeof(T)), [&] {
    cuda::block_norms(w->view(), nullptr, side, side, prune::NormOrder::l2, w->norms.template as<double>(), w->ws(),
                      nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK_TEMPLATE(BM_gpu_block_norms, float)->ArgName("block")->Arg(4)->Arg(32)->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Row offsets and nnz of a half-zero weight: one read.
void BM_gpu_csr_count(benchmark::State& state) {
  if (!has_device(state)) return;
  Sparse* s = shared_data<Sparse>();
  time_on_device(state, kElements * 4, [&] {
    cuda::csr_count(s->view(), nullptr, s->offsets.as<std::int32_t>(), s->nnz_device.as<std::int64_t>(), s->ws(),
                    nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_csr_count)->UseManualTime()->Unit(benchmark::kMillisecond);

// The whole conversion in one call (count, scan, fill: the input is read twice); bytes: the input once and the
// column indices and values written.
void BM_gpu_to_csr(benchmark::State& state) {
  if (!has_device(state)) return;
  Sparse* s = shared_data<Sparse>();
  time_on_device(state, kElements * 4 + s->nnz * 8, [&] {
    cuda::to_csr(s->view(), nullptr, s->csr(), s->nnz_device.as<std::int64_t>(), s->ws(), nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_to_csr)->UseManualTime()->Unit(benchmark::kMillisecond);

// Back to dense (zeros, then the values scattered); bytes: the CSR read and the dense written.
void BM_gpu_csr_to_dense(benchmark::State& state) {
  if (!has_device(state)) return;
  Sparse* s = shared_data<Sparse>();
  cuda::to_csr(s->view(), nullptr, s->csr(), s->nnz_device.as<std::int64_t>(), s->ws(), nullptr,
               cuda::Synchronize::yes);
  time_on_device(state, s->nnz * 8 + kElements * 4, [&] {
    cuda::csr_to_dense(s->offsets.as<std::int32_t>(), s->indices.as<std::int32_t>(), s->values.as<float>(), s->nnz,
                       TensorView<float>(s->dense_out.as<float>(), kShape, Device::cuda(0)),
                       {s->dense_workspace.as<void>(), s->dense_workspace.bytes()}, nullptr);
  });
}
SHRINK_GUARDED_BENCHMARK(BM_gpu_csr_to_dense)->UseManualTime()->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  const std::string read_f32 = "BM_gpu_read<float>/manual_time", read_bf16 = "BM_gpu_read<bfloat16>/manual_time";
  for (const char* name : {"BM_gpu_slice_norms<float>/dim:0/masked:0", "BM_gpu_slice_norms<float>/dim:1/masked:0",
                           "BM_gpu_slice_norms<float>/dim:0/masked:1", "BM_gpu_block_norms<float>/block:4",
                           "BM_gpu_block_norms<float>/block:32"})
    t.push_back({std::string(name) + "/manual_time", read_f32, M::bandwidth, 0.80,
                 "norms >= 0.80 of the read bandwidth (this task's target)"});
  for (const char* name : {"BM_gpu_slice_norms<bfloat16>/dim:0/masked:0", "BM_gpu_slice_norms<bfloat16>/dim:1/masked:0"})
    t.push_back({std::string(name) + "/manual_time", read_bf16, M::bandwidth, 0.80,
                 "norms >= 0.80 of the read bandwidth (this task's target)"});
  t.push_back({"BM_gpu_csr_count/manual_time", read_f32, M::bandwidth, 0.80,
               "CSR count (one read) >= 0.80 of the read bandwidth"});
  t.push_back({"BM_gpu_to_csr/manual_time", read_f32, M::bandwidth, 0.50,
               "one-call CSR, input + output bytes, >= 0.50 of the read bandwidth (it reads the input twice)"});
  t.push_back({"BM_gpu_csr_to_dense/manual_time", "BM_gpu_copy/manual_time", M::bandwidth, 0.50,
               "CSR to dense, CSR + dense bytes, >= 0.50 of the copy bandwidth (zeros, then a scatter)"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
