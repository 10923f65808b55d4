// Timing and device memory shared by the GPU benchmarks (host-compiled): CUDA events around each iteration, owned
// device buffers and the data a program's benchmarks share, the skip on a machine without a device, the timed copy
// baseline; the baselines' kernels are in gpu_baselines.hpp.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "shrink/cuda/device.hpp"
#include "support/gpu_baselines.hpp"

namespace shrink::bench::gpu {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// Skips the benchmark (reported as an error row, not a time) on a machine without a device, or whose device 0 is
// older than `min_compute_capability` (10 * major + minor; 0: any).
inline bool has_device(benchmark::State& state, int min_compute_capability = 0) {
  if (cuda::device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return false;
  }
  if (min_compute_capability > 0 && cuda::device_info(0).compute_capability() < min_compute_capability) {
    const std::string why = "compute capability below " + std::to_string(min_compute_capability / 10) + "." +
                            std::to_string(min_compute_capability % 10);
    state.SkipWithError(why.c_str());
    return false;
  }
  return true;
}

// Owned device memory, freed at the end of the process (the benchmarks keep theirs in function-local statics).
class DeviceMemory {
 public:
  explicit DeviceMemory(std::size_t bytes) : bytes_(bytes) { check(cudaMalloc(&data_, bytes ? bytes : 1), "cudaMalloc"); }
  // A device copy of `host`.
  template <class T>
  explicit DeviceMemory(const std::vector<T>& host) : DeviceMemory(host.size() * sizeof(T)) {
    upload(host);
  }
  ~DeviceMemory() { (void)cudaFree(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }

  // Copies `host` to the start of this memory, which must hold it.
  template <class T>
  void upload(const std::vector<T>& host) {
    const std::size_t bytes = host.size() * sizeof(T);
    if (bytes > bytes_)
      throw std::runtime_error("upload of " + std::to_string(bytes) + " bytes into " + std::to_string(bytes_));
    if (bytes > 0) check(cudaMemcpy(data_, host.data(), bytes, cudaMemcpyHostToDevice), "upload");
  }
  // Fills this memory with copies of `pattern` end to end (the last one cut short): one host buffer, any size.
  template <class T>
  void fill_repeating(const std::vector<T>& pattern) {
    const std::size_t step = pattern.size() * sizeof(T);
    for (std::size_t at = 0; step > 0 && at < bytes_; at += step)
      check(cudaMemcpy(static_cast<char*>(data_) + at, pattern.data(), std::min(step, bytes_ - at),
                       cudaMemcpyHostToDevice),
            "fill");
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// The one Data of the program, which its benchmarks share: built on first use, kept for the process (the driver tears
// its device memory down at exit).
template <class Data>
Data* shared_data() {
  static Data* data = new Data();
  return data;
}

// The timing loop under every GPU benchmark: 3 x `calls` warm-up calls, then per iteration `before()` outside the
// timed region (an L2 flush, say) and `calls` calls of launch(i) between two CUDA events, reported as the time of one
// call (i counts every call from the first warm-up one: rotating buffers). Returns the reported seconds, summed.
template <class Launch, class Before>
double time_calls_on_device(benchmark::State& state, int calls, Launch launch, Before before) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  int call = 0;
  for (int i = 0; i < 3 * calls; ++i) launch(call++);
  check(cudaDeviceSynchronize(), "warm-up");
  double total = 0;
  for (auto _ : state) {
    before();
    check(cudaEventRecord(start), "record");
    for (int i = 0; i < calls; ++i) launch(call++);
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "synchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    const double seconds = ms / 1e3 / calls;
    state.SetIterationTime(seconds);
    total += seconds;
  }
  check(cudaGetLastError(), "launches");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return total;
}

template <class Launch>
double time_calls_on_device(benchmark::State& state, int calls, Launch launch) {
  return time_calls_on_device(state, calls, launch, [] {});
}

// The common case: one launch() an iteration, `bytes_moved` per launch giving Google Benchmark's bytes_per_second.
template <class Launch>
void time_on_device(benchmark::State& state, std::int64_t bytes_moved, Launch launch) {
  time_calls_on_device(state, 1, [&](int) { launch(); });
  state.SetBytesProcessed(state.iterations() * bytes_moved);
}

// The copy baseline: `bytes` from `from` to `to` an iteration, bandwidth counting the bytes read and written.
inline void time_copy(benchmark::State& state, const DeviceMemory& to, const DeviceMemory& from, std::size_t bytes) {
  time_on_device(state, 2 * static_cast<std::int64_t>(bytes), [&] { copy_all(to.as<void>(), from.as<void>(), bytes); });
}

}  // namespace shrink::bench::gpu
