// shrink::cuda::self_test: a kernel writes a known pattern on the device and the host checks every element.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/device.hpp"

namespace shrink::cuda {

namespace {

constexpr std::uint32_t pattern_seed = 0x5EED1234u;

// Knuth's multiplicative hash: distinct for every index below 2^32, and never the 0xFFFFFFFF poison for the
// indices the self test uses with this seed.
SHRINK_HOST_DEVICE inline std::uint32_t pattern_value(std::uint32_t index, std::uint32_t seed) {
  return (index * 2654435761u) ^ seed;
}

__global__ void write_pattern(std::uint32_t* out, std::uint32_t count, std::uint32_t seed) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) out[i] = pattern_value(i, seed);
}

// Restores the caller's current device, whatever happens in between.
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() { SHRINK_CUDA_CHECK(cudaGetDevice(&previous_)); }
  ~CurrentDeviceGuard() { (void)cudaSetDevice(previous_); }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Device memory released on every path out of self_test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) { SHRINK_CUDA_CHECK(cudaMalloc(&data_, bytes)); }
  ~DeviceBuffer() { (void)cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
};

}  // namespace

void self_test(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    fail("shrink::cuda::self_test", "ordinal", ordinal,
         "a device ordinal in [0, " + std::to_string(count) + ") (device_count() = " + std::to_string(count) + ")");

  CurrentDeviceGuard guard;
  SHRINK_CUDA_CHECK(cudaSetDevice(ordinal));
  int multiprocessors = 0;
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, ordinal));

  // 4 MiB: more elements than threads launched, so the grid-stride loop runs several rounds on every SM.
  constexpr std::uint32_t element_count = 1u << 20;
  constexpr std::size_t bytes = element_count * sizeof(std::uint32_t);
  DeviceBuffer buffer(bytes);
  auto* device_values = static_cast<std::uint32_t*>(buffer.data());
  SHRINK_CUDA_CHECK(cudaMemset(device_values, 0xFF, bytes));  // poison: a skipped element stays 0xFFFFFFFF

  constexpr int threads_per_block = 256;
  const int blocks = std::max(1, std::min(4 * multiprocessors, static_cast<int>(element_count / threads_per_block)));
  write_pattern<<<blocks, threads_per_block>>>(device_values, element_count, pattern_seed);
  SHRINK_CUDA_CHECK_LAUNCH(write_pattern);

  std::vector<std::uint32_t> host_values(element_count);
  // A blocking copy: it also reports any fault the kernel hit while running.
  SHRINK_CUDA_CHECK(cudaMemcpy(host_values.data(), device_values, bytes, cudaMemcpyDeviceToHost));
  for (std::uint32_t i = 0; i < element_count; ++i) {
    const std::uint32_t expected = pattern_value(i, pattern_seed);
    if (host_values[i] != expected) {
      const std::string argument = "element " + std::to_string(i) + " on device " + std::to_string(ordinal);
      fail("shrink::cuda::self_test", argument.c_str(), host_values[i],
           "the pattern value " + std::to_string(expected) + " written by the kernel");
    }
  }
}

}  // namespace shrink::cuda
