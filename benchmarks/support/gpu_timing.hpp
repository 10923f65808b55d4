// Timing and device memory shared by the GPU benchmarks (host-compiled): CUDA events around each iteration, owned
// device buffers, the skip on a machine without a device; with the baselines of gpu_baselines.hpp.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "shrink/cuda/device.hpp"
#include "support/gpu_baselines.hpp"

namespace shrink::bench::gpu {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Skips the benchmark (reported as an error row, not a time) on a machine without a device.
inline bool has_device(benchmark::State& state) {
  if (cuda::device_count() > 0) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

// Owned device memory, freed at the end of the process (the benchmarks keep theirs in function-local statics).
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) { check(cudaMalloc(&data_, bytes ? bytes : 1), "cudaMalloc"); }
  ~DeviceMemory() { (void)cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Times `launch` with CUDA events around each iteration, after three warm-up launches; `bytes_moved` per iteration
// gives Google Benchmark's bytes_per_second.
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

}  // namespace shrink::bench::gpu
