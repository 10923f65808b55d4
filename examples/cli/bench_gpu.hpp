// The GPU rows of `shrink bench`: the names of the GPU precisions (known to every build, so that --precisions and
// --help are the same everywhere) and the interface of the backend that times them on device 0. The backend is
// bench_gpu.cpp, compiled into the command only when it is built with the CUDA layer (SHRINK_CLI_HAS_CUDA).
//
//   gpu-fp16-cublas       float16 weights and activations, cuBLAS (cublasGemmEx, fp32 accumulation, tensor cores):
//                         the GPU baseline, which the other GPU rows' speedups are measured against
//   gpu-int8-w8a8         int8 weights per output channel; half activations quantized per token on the device,
//                         inside the time (shrink::cuda::linear_int8_dynamic), half out
//   gpu-int8-weight-only  W8A16: int8 weights per output channel, half activations and output
//                         (shrink::cuda::linear_weight_only; M <= 64 only)
//   gpu-int4-weight-only  W4A16: int4 weights per group of 128 along K, half activations and output
//                         (shrink::cuda::linear_weight_only; M <= 64 only)
//   gpu-csr-90%           magnitude pruning of 90% of the weights, CSR with half values and int32 indices, half
//                         activations and output (shrink::cuda::linear_csr)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_report.hpp"

namespace shrink::cli {

inline constexpr const char* kGpuBaseline = "gpu-fp16-cublas";

// The GPU precisions, in the order rows are shown; the first is the baseline and always runs with the others.
// A new GPU precision joins here and in prepare_gpu_rows (bench_gpu.cpp): next is "gpu-2:4-sparse", the 2:4
// structured-sparse GEMM of shrink/linear/nm_cuda.hpp.
inline const std::vector<std::string>& gpu_precision_names() {
  static const std::vector<std::string> names = {kGpuBaseline, "gpu-int8-w8a8", "gpu-int8-weight-only",
                                                 "gpu-int4-weight-only", "gpu-csr-90%"};
  return names;
}

// Times the GPU precisions of one weight shape at a time on one device.
class GpuBench {
 public:
  virtual ~GpuBench() = default;

  // One line on the device (shrink::cuda::describe) and one on how the rows are timed, for the report. The rows
  // carry the device's name (shrink::cuda::device_info) as their device.
  virtual std::string description() const = 0;
  virtual std::string timing() const = 0;

  // Quantizes, prunes and uploads the selected precisions of the float weight w [N, K] (names from
  // gpu_precision_names(), the baseline first), replacing those of the previous shape.
  virtual void prepare_shape(const std::vector<float>& w, std::int64_t n, std::int64_t k,
                             const std::vector<std::string>& selected) = 0;

  // Times every prepared precision on the activations x [M, K] and measures its error against `reference`
  // [M, N], the CPU fp32 output on the same data. One result per precision, in order: timed, or with not_run
  // saying why the kernel cannot take this shape. `announce` is called with each row's name before it runs.
  virtual std::vector<BenchResult> run_batch(const std::vector<float>& x, std::int64_t m,
                                             const std::vector<float>& reference, double min_time,
                                             const std::function<void(const std::string&)>& announce) = 0;
};

// Defined in bench_gpu.cpp, in builds with CUDA only (callers check SHRINK_CLI_HAS_CUDA):
// why device 0 cannot run the GPU rows ("no CUDA device found", ...), or empty when it can;
std::string gpu_unavailable_reason();
// the backend on device 0, once gpu_unavailable_reason() is empty (throws when the device fails its self-test).
std::unique_ptr<GpuBench> open_gpu_bench();

}  // namespace shrink::cli
