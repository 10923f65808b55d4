// The GPU rows of `shrink bench` on CUDA device 0 (compiled only when the command is built with the CUDA layer):
// each GPU precision's weight prepared on the host as the CPU rows prepare theirs, uploaded in enough copies that
// consecutive products read it from DRAM rather than L2, checked once (output poisoned first, every device-side check
// read, output downloaded and compared with the CPU fp32 output), then timed with CUDA events.
//
// Timing: a sample is kLaunchesPerSample back-to-back products between two CUDA events, product i reading copy
// i % copies of the weight (the activations stay in L2, as the output of a previous layer would). Before each sample
// a memset of a buffer several times L2 keeps the device busy while the host enqueues the products, so the host's
// launch costs stay out of the time. After kWarmupLaunches products, samples are taken until min_time has passed (at
// least kMinSamples, at most kMaxSamples): seconds = the median sample / kLaunchesPerSample, wall_seconds = the best.
#include "bench_gpu.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "benchmarks/gpu/cublas_baseline.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/linear/csr_cuda.hpp"
#include "shrink/linear/int8_cuda.hpp"
#include "shrink/linear/weight_only_cuda.hpp"
#include "shrink/metrics/size.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/memory.hpp"

namespace shrink::cli {
namespace {

using Half = shrink::half;  // cuda_fp16.h (through cuBLAS) declares a global `half` too

constexpr int kDevice = 0;
constexpr int kWarmupLaunches = 5;
constexpr int kLaunchesPerSample = 10;
constexpr std::size_t kMinSamples = 5;
constexpr std::size_t kMaxSamples = 200;
constexpr std::int64_t kCopiesSpanL2 = 4;  // the copies of a weight span 4 x L2 at least
constexpr std::int64_t kMaxCopies = 64;
constexpr std::size_t kMinFillerBytes = std::size_t{256} << 20;  // the memset before each sample: >= 80 us on HBM3
constexpr std::size_t kAlignment = 256;                          // of each array in a weight's copy
constexpr std::int64_t kInt4GroupSize = 128;
constexpr double kCsrSparsity = 0.9;  // as the CPU csr-90% row

void check(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(status));
}

std::size_t round_up(std::size_t bytes, std::size_t multiple) { return (bytes + multiple - 1) / multiple * multiple; }

// Device memory owned by the command (cudaMalloc, cudaFree); moves, never copies.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) {
    if (bytes > 0) check(cudaMalloc(&data_, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  }
  ~DeviceMemory() {
    if (data_ != nullptr) (void)cudaFree(data_);
  }
  DeviceMemory(DeviceMemory&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A weight as the device stores it (values, scales, indices: host arrays laid out one after another, each on a
// 256-byte boundary), uploaded `copies` times, `stride` bytes apart. Product i reads copy i % copies.
class WeightCopies {
 public:
  // Adds a host array to the layout; returns its offset inside each copy.
  std::size_t add(const void* data, std::size_t bytes) {
    const std::size_t offset = round_up(staging_.size(), kAlignment);
    staging_.resize(offset + bytes);
    if (bytes > 0) std::memcpy(staging_.data() + offset, data, bytes);
    return offset;
  }

  // Uploads as many copies as span kCopiesSpanL2 times `l2_bytes` (at least one, at most kMaxCopies).
  void upload(std::int64_t l2_bytes, cudaStream_t stream) {
    stride_ = round_up(std::max<std::size_t>(staging_.size(), 1), kAlignment);
    const auto span = static_cast<std::size_t>(kCopiesSpanL2 * std::max<std::int64_t>(l2_bytes, 0));
    copies_ = std::clamp<std::int64_t>(static_cast<std::int64_t>((span + stride_ - 1) / stride_), 1, kMaxCopies);
    memory_ = DeviceMemory(stride_ * static_cast<std::size_t>(copies_));
    auto* base = memory_.as<std::uint8_t>();
    check(cudaMemcpyAsync(base, staging_.data(), staging_.size(), cudaMemcpyHostToDevice, stream), "upload a weight");
    for (std::int64_t c = 1; c < copies_; ++c)
      check(cudaMemcpyAsync(base + static_cast<std::size_t>(c) * stride_, base, staging_.size(),
                            cudaMemcpyDeviceToDevice, stream),
            "copy a weight");
    check(cudaStreamSynchronize(stream), "upload a weight");
    staging_ = {};
  }

  const std::uint8_t* copy(std::int64_t i) const {
    return memory_.as<const std::uint8_t>() + static_cast<std::size_t>(i % copies_) * stride_;
  }

 private:
  std::vector<std::uint8_t> staging_;
  DeviceMemory memory_;
  std::size_t stride_ = 0;
  std::int64_t copies_ = 1;
};

template <class T>
const T* at(const std::uint8_t* copy, std::size_t offset) {
  return reinterpret_cast<const T*>(copy + offset);
}

// The device buffers of one batch of activations, shared by every row.
struct Batch {
  std::int64_t m = 0, n = 0, k = 0;
  DeviceMemory x;    // [M, K] half: the activations
  DeviceMemory out;  // [M, N] half: every row's output

  TensorView<const Half> x_view() const { return {x.as<const Half>(), Shape{m, k}, Device::cuda(kDevice)}; }
  TensorView<Half> out_view() const { return {out.as<Half>(), Shape{m, n}, Device::cuda(kDevice)}; }
};

// One GPU precision of one weight shape. The three calls take the batch and one copy of the weight.
struct GpuRow {
  std::string name;
  std::string stored;
  std::int64_t weight_bytes = 0;
  std::string unavailable;  // why the weight could not be prepared in this format; then the calls are unset
  WeightCopies weight;
  std::function<std::string(const Batch&, const std::uint8_t*)> cannot_run;  // why not this batch; empty: it can
  std::function<std::size_t(const Batch&, const std::uint8_t*)> workspace_bytes;
  std::function<void(const Batch&, const std::uint8_t*, cuda::Workspace, cuda::Synchronize)> launch;
};

struct GpuTiming {
  double median = NAN, best = NAN;  // seconds per product
  std::int64_t launches = 0;        // products timed
};

class CudaGpuBench final : public GpuBench {
 public:
  CudaGpuBench() : info_(cuda::device_info(kDevice)) {
    check(cudaSetDevice(kDevice), "cudaSetDevice(0)");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    cublas_ = std::make_unique<bench_gpu::Cublas>();
    filler_ = DeviceMemory(std::max(kMinFillerBytes, static_cast<std::size_t>(kCopiesSpanL2 * info_.l2_cache_bytes)));
  }
  ~CudaGpuBench() override {
    (void)cudaStreamSynchronize(stream_);
    rows_.clear();
    cublas_.reset();
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(stop_);
    (void)cudaStreamDestroy(stream_);
  }
  CudaGpuBench(const CudaGpuBench&) = delete;
  CudaGpuBench& operator=(const CudaGpuBench&) = delete;

  std::string description() const override { return cuda::describe(info_); }
  std::string timing() const override {
    return "gpu time = median over samples of " + std::to_string(kLaunchesPerSample) +
           " back-to-back products timed with CUDA events, each reading another copy of the weight (from DRAM, "
           "not L2)";
  }

  void prepare_shape(const std::vector<float>& w, std::int64_t n, std::int64_t k,
                     const std::vector<std::string>& selected) override;

  std::vector<BenchResult> run_batch(const std::vector<float>& x, std::int64_t m, const std::vector<float>& reference,
                                     double min_time, const std::function<void(const std::string&)>& announce) override;

 private:
  GpuRow& add_row(const std::string& name, std::string stored, std::int64_t weight_bytes) {
    GpuRow row;
    row.name = name;
    row.stored = std::move(stored);
    row.weight_bytes = weight_bytes;
    rows_.push_back(std::move(row));
    return rows_.back();
  }
  void add_cublas_row(const std::vector<float>& w);
  void add_w8a8_row(const quant::QuantizedTensor& q);
  void add_weight_only_row(const std::string& name, std::string stored, const quant::QuantizedTensor& q);
  void add_csr_row(const TensorView<const float>& w);

  Batch make_batch(const std::vector<float>& x, std::int64_t m);
  cuda::Workspace workspace_of(std::size_t bytes);
  std::vector<float> download_output(const Batch& b);
  GpuTiming time_row(const GpuRow& row, const Batch& b, cuda::Workspace workspace, double min_time);

  cuda::DeviceInfo info_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unique_ptr<bench_gpu::Cublas> cublas_;
  DeviceMemory filler_;
  DeviceMemory workspace_;
  std::vector<GpuRow> rows_;
  std::int64_t n_ = 0, k_ = 0;
};

// ---- Preparing the weights of one shape -----------------------------------------------------------------------

void CudaGpuBench::prepare_shape(const std::vector<float>& w, std::int64_t n, std::int64_t k,
                                 const std::vector<std::string>& selected) {
  check(cudaStreamSynchronize(stream_), "the previous shape's products");
  rows_.clear();
  n_ = n;
  k_ = k;
  const TensorView<const float> view(w.data(), Shape{n, k});
  auto wanted = [&](const char* name) { return std::find(selected.begin(), selected.end(), name) != selected.end(); };
  // In gpu_precision_names() order; a new precision (gpu-2:4-sparse) adds its block here.
  if (wanted(kGpuBaseline)) add_cublas_row(w);
  if (wanted("gpu-int8-w8a8") || wanted("gpu-int8-weight-only")) {
    // The CPU int8 rows' quantization: symmetric, one scale per output channel.
    const quant::QuantizedTensor q =
        quant::quantize(view, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
    if (wanted("gpu-int8-w8a8")) add_w8a8_row(q);
    if (wanted("gpu-int8-weight-only"))
      add_weight_only_row("gpu-int8-weight-only", "int8 per channel, half activations (W8A16)", q);
  }
  if (wanted("gpu-int4-weight-only")) {
    const std::string name = "gpu-int4-weight-only", stored = "int4 per group of 128, half activations (W4A16)";
    if (k % kInt4GroupSize != 0) {
      add_row(name, stored, 0).unavailable = "K = " + std::to_string(k) + " is not a multiple of the group size 128";
    } else {
      add_weight_only_row(
          name, stored,
          quant::quantize(view, quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::symmetric, 1,
                                                              kInt4GroupSize)));
    }
  }
  if (wanted("gpu-csr-90%")) add_csr_row(view);
}

void CudaGpuBench::add_cublas_row(const std::vector<float>& w) {
  std::vector<Half> w16(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) w16[i] = Half(w[i]);
  GpuRow& row = add_row(kGpuBaseline, "float16, cuBLAS GEMM (tensor cores)",
                        metrics::dense_bytes(Shape{n_, k_}, ScalarType::f16));
  const std::size_t values = row.weight.add(w16.data(), w16.size() * sizeof(Half));
  row.weight.upload(info_.l2_cache_bytes, stream_);
  row.cannot_run = [](const Batch&, const std::uint8_t*) { return std::string(); };
  row.workspace_bytes = [](const Batch&, const std::uint8_t*) { return std::size_t{0}; };
  row.launch = [this, values](const Batch& b, const std::uint8_t* copy, cuda::Workspace, cuda::Synchronize) {
    cublas_->gemm_f16(b.x.data(), copy + values, b.out.data(), static_cast<int>(b.m), static_cast<int>(b.n),
                      static_cast<int>(b.k), stream_);
  };
}

void CudaGpuBench::add_w8a8_row(const quant::QuantizedTensor& q) {
  GpuRow& row = add_row("gpu-int8-w8a8", "int8 per channel; activations int8 per token",
                        metrics::quantized_size(q).total_bytes());
  const std::size_t values = row.weight.add(q.data.data(), q.data.size());
  const std::size_t scales = row.weight.add(q.qparams.scale.data(), q.qparams.scale.size() * sizeof(float));
  row.weight.upload(info_.l2_cache_bytes, stream_);
  const Device device = Device::cuda(kDevice);
  // The activations are quantized per token inside the timed product (linear_int8_dynamic), as on the CPU.
  const auto args = [values, scales, device](const Batch& b, const std::uint8_t* copy) {
    cuda::LinearInt8DynamicArgs a;
    a.x = b.x_view();
    a.w.values = TensorView<const std::int8_t>(at<std::int8_t>(copy, values), Shape{b.n, b.k}, device);
    a.w.scales = TensorView<const float>(at<float>(copy, scales), Shape{b.n}, device);
    a.out = b.out_view();
    return a;
  };
  row.cannot_run = [args](const Batch& b, const std::uint8_t* copy) {
    return cuda::can_implement_linear_int8_dynamic(args(b, copy)).reason();
  };
  row.workspace_bytes = [args](const Batch& b, const std::uint8_t* copy) {
    return cuda::linear_int8_dynamic_workspace_bytes(args(b, copy));
  };
  row.launch = [this, args](const Batch& b, const std::uint8_t* copy, cuda::Workspace workspace,
                            cuda::Synchronize synchronize) {
    cuda::linear_int8_dynamic(args(b, copy), workspace, stream_, synchronize);
  };
}

void CudaGpuBench::add_weight_only_row(const std::string& name, std::string stored, const quant::QuantizedTensor& q) {
  GpuRow& row = add_row(name, std::move(stored), metrics::quantized_size(q).total_bytes());
  const bool int4 = q.scheme.dtype == quant::QuantDtype::int4;
  const std::int64_t group_size = q.scheme.group_size;
  const std::size_t values = row.weight.add(q.data.data(), q.data.size());
  const std::size_t scales = row.weight.add(q.qparams.scale.data(), q.qparams.scale.size() * sizeof(float));
  row.weight.upload(info_.l2_cache_bytes, stream_);
  const Device device = Device::cuda(kDevice);
  const auto args = [int4, group_size, values, scales, device](const Batch& b, const std::uint8_t* copy) {
    cuda::LinearWeightOnlyArgs<Half> a;
    a.x = b.x_view();
    a.w = int4 ? cuda::WeightOnlyWeight::int4(
                     TensorView<const std::uint8_t>(at<std::uint8_t>(copy, values), Shape{b.n, b.k / 2}, device),
                     TensorView<const float>(at<float>(copy, scales), Shape{b.n, b.k / group_size}, device), group_size)
               : cuda::WeightOnlyWeight::int8(
                     TensorView<const std::int8_t>(at<std::int8_t>(copy, values), Shape{b.n, b.k}, device),
                     TensorView<const float>(at<float>(copy, scales), Shape{b.n}, device));
    a.out = b.out_view();
    return a;
  };
  row.cannot_run = [args](const Batch& b, const std::uint8_t* copy) {
    if (b.m > cuda::kWeightOnlyMaxRows) return "M > " + std::to_string(cuda::kWeightOnlyMaxRows);
    return cuda::can_implement_linear_weight_only(args(b, copy)).reason();
  };
  row.workspace_bytes = [args](const Batch& b, const std::uint8_t* copy) {
    return cuda::linear_weight_only_workspace_bytes(args(b, copy));
  };
  row.launch = [this, args](const Batch& b, const std::uint8_t* copy, cuda::Workspace workspace,
                            cuda::Synchronize synchronize) {
    cuda::linear_weight_only(args(b, copy), workspace, stream_, synchronize);
  };
}

void CudaGpuBench::add_csr_row(const TensorView<const float>& w) {
  // The CPU csr-90% row's pruning: the 90% of the weights smallest in magnitude.
  const sparse::Csr<float> csr =
      sparse::to_csr(w, prune::l1_unstructured_mask(w, prune::Amount::fraction(kCsrSparsity)));
  std::vector<Half> values16(csr.values.size());
  for (std::size_t i = 0; i < csr.values.size(); ++i) values16[i] = Half(csr.values[i]);
  GpuRow& row =
      add_row("gpu-csr-90%", "90% pruned, CSR half + int32 indices", sparse::csr_bytes(n_, csr.nnz(), ScalarType::f16));
  const std::int64_t nnz = csr.nnz();
  const std::size_t offsets = row.weight.add(csr.row_offsets.data(), csr.row_offsets.size() * sizeof(std::int32_t));
  const std::size_t columns =
      row.weight.add(csr.column_indices.data(), csr.column_indices.size() * sizeof(std::int32_t));
  const std::size_t values = row.weight.add(values16.data(), values16.size() * sizeof(Half));
  row.weight.upload(info_.l2_cache_bytes, stream_);
  const Device device = Device::cuda(kDevice);
  const auto args = [nnz, offsets, columns, values, device](const Batch& b, const std::uint8_t* copy) {
    cuda::LinearCsrArgs<Half> a;
    a.x = b.x_view();
    a.row_offsets = TensorView<const std::int32_t>(at<std::int32_t>(copy, offsets), Shape{b.n + 1}, device);
    a.column_indices = TensorView<const std::int32_t>(at<std::int32_t>(copy, columns), Shape{nnz}, device);
    a.values = TensorView<const Half>(at<Half>(copy, values), Shape{nnz}, device);
    a.out = b.out_view();
    return a;
  };
  row.cannot_run = [args](const Batch& b, const std::uint8_t* copy) {
    return cuda::can_implement_linear_csr(args(b, copy)).reason();
  };
  row.workspace_bytes = [args](const Batch& b, const std::uint8_t* copy) {
    return cuda::linear_csr_workspace_bytes(args(b, copy));
  };
  row.launch = [this, args](const Batch& b, const std::uint8_t* copy, cuda::Workspace workspace,
                            cuda::Synchronize synchronize) {
    cuda::linear_csr(args(b, copy), workspace, stream_, synchronize);
  };
}

// ---- Running one batch ----------------------------------------------------------------------------------------

Batch CudaGpuBench::make_batch(const std::vector<float>& x, std::int64_t m) {
  Batch b;
  b.m = m;
  b.n = n_;
  b.k = k_;
  std::vector<Half> x16(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x16[i] = Half(x[i]);
  const auto count = [](std::int64_t a, std::int64_t c) { return static_cast<std::size_t>(a * c); };
  b.x = DeviceMemory(count(m, k_) * sizeof(Half));
  b.out = DeviceMemory(count(m, n_) * sizeof(Half));
  check(cudaMemcpyAsync(b.x.data(), x16.data(), b.x.bytes(), cudaMemcpyHostToDevice, stream_), "upload x");
  check(cudaStreamSynchronize(stream_), "upload x");
  return b;
}

cuda::Workspace CudaGpuBench::workspace_of(std::size_t bytes) {
  bytes = std::max(bytes, cuda::kStatusBytes);
  if (workspace_.bytes() < bytes) {
    check(cudaStreamSynchronize(stream_), "the products using the workspace");
    workspace_ = DeviceMemory();  // frees the old one first
    workspace_ = DeviceMemory(bytes);
  }
  return cuda::Workspace{workspace_.data(), workspace_.bytes()};
}

std::vector<float> CudaGpuBench::download_output(const Batch& b) {
  std::vector<Half> y16(static_cast<std::size_t>(b.m * b.n));
  check(cudaMemcpyAsync(y16.data(), b.out.data(), b.out.bytes(), cudaMemcpyDeviceToHost, stream_), "download y");
  check(cudaStreamSynchronize(stream_), "download y");
  std::vector<float> y(y16.size());
  for (std::size_t i = 0; i < y16.size(); ++i) y[i] = y16[i].to_float();
  return y;
}

GpuTiming CudaGpuBench::time_row(const GpuRow& row, const Batch& b, cuda::Workspace workspace, double min_time) {
  std::int64_t launch = 0;
  const auto product = [&] { row.launch(b, row.weight.copy(launch++), workspace, cuda::Synchronize::no); };
  for (int i = 0; i < kWarmupLaunches; ++i) product();
  check(cudaStreamSynchronize(stream_), row.name + ": warm-up");
  std::vector<double> samples;
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count(); };
  while (samples.size() < kMinSamples || (elapsed() < min_time && samples.size() < kMaxSamples)) {
    // The device works through the memset while the host enqueues the products (it also evicts L2).
    check(cudaMemsetAsync(filler_.data(), static_cast<int>(samples.size() & 0xFF), filler_.bytes(), stream_),
          "memset before a sample");
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    for (int i = 0; i < kLaunchesPerSample; ++i) product();
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    check(cudaEventSynchronize(stop_), row.name + ": a timed sample");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    samples.push_back(1e-3 * static_cast<double>(ms) / kLaunchesPerSample);
  }
  check(cudaGetLastError(), row.name + ": the timed products");
  std::sort(samples.begin(), samples.end());
  GpuTiming t;
  const std::size_t half = samples.size() / 2;
  t.median = samples.size() % 2 == 1 ? samples[half] : 0.5 * (samples[half - 1] + samples[half]);
  t.best = samples.front();
  t.launches = static_cast<std::int64_t>(samples.size()) * kLaunchesPerSample;
  return t;
}

std::vector<BenchResult> CudaGpuBench::run_batch(const std::vector<float>& x, std::int64_t m,
                                                 const std::vector<float>& reference, double min_time,
                                                 const std::function<void(const std::string&)>& announce) {
  const Batch b = make_batch(x, m);
  std::vector<BenchResult> results;
  double baseline_seconds = NAN;
  for (const GpuRow& row : rows_) {
    announce(row.name);
    BenchResult r;
    r.device = info_.name;
    r.precision = row.name;
    r.stored = row.stored;
    r.n = n_;
    r.k = k_;
    r.m = m;
    r.baseline = kGpuBaseline;
    r.weight_bytes = row.weight_bytes;
    r.not_run = row.unavailable.empty() ? row.cannot_run(b, row.weight.copy(0)) : row.unavailable;
    if (!r.not_run.empty()) {
      results.push_back(r);
      continue;
    }
    const cuda::Workspace workspace = workspace_of(row.workspace_bytes(b, row.weight.copy(0)));

    // One checked product: the output poisoned first (all-ones bytes: half NaN), every device-side check read.
    check(cudaMemsetAsync(b.out.data(), 0xFF, b.out.bytes(), stream_), "poison the output");
    row.launch(b, row.weight.copy(0), workspace, cuda::Synchronize::yes);
    check(cudaStreamSynchronize(stream_), row.name + ": the checked product");
    check(cudaGetLastError(), row.name + ": the checked product");
    const std::int64_t nonfinite = measure_error(r, reference, download_output(b));
    if (nonfinite > 0)
      std::fprintf(stderr, "shrink bench: warning: %s %lldx%lld M=%lld: %lld of %lld outputs are NaN or inf\n",
                   row.name.c_str(), static_cast<long long>(n_), static_cast<long long>(k_), static_cast<long long>(m),
                   static_cast<long long>(nonfinite), static_cast<long long>(m * n_));

    const GpuTiming t = time_row(row, b, workspace, min_time);
    r.seconds = t.median;
    r.wall_seconds = t.best;
    r.repetitions = t.launches;
    if (row.name == kGpuBaseline) baseline_seconds = t.median;
    r.speedup = baseline_seconds / t.median;
    results.push_back(r);
  }
  return results;
}

}  // namespace

std::string gpu_unavailable_reason() {
  try {
    if (cuda::device_count() == 0) return "no CUDA device found";
    const cuda::DeviceInfo info = cuda::device_info(kDevice);
    if (info.compute_capability() < 80)
      return "device 0, " + info.name + ", is sm_" + std::to_string(info.compute_capability()) +
             ": the GPU rows need sm_80 or later";
    return {};
  } catch (const std::exception& e) {
    return std::string("CUDA failed: ") + e.what();
  }
}

std::unique_ptr<GpuBench> open_gpu_bench() {
  cuda::self_test(kDevice);  // the library's machine code runs on this device, or a clear error now
  return std::make_unique<CudaGpuBench>();
}

}  // namespace shrink::cli
