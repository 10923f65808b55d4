// Device memory for the [gpu] tests: owned, poisoned with 0xA5 at birth (and on request) so a kernel that skips an
// output element cannot pass by leaving a value that looks right; device copies of host vectors; the fake device
// addresses of the [host] tests.
#pragma once

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "shrink/cuda/launch.hpp"

#define CUDA_REQUIRE(call) REQUIRE((call) == cudaSuccess)

namespace shrink::test {

constexpr unsigned char kPoison = 0xA5;

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    CUDA_REQUIRE(cudaMalloc(&data_, bytes == 0 ? 1 : bytes));
    poison();
  }
  ~DeviceBuffer() { (void)cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T>
  T* as() const { return static_cast<T*>(data_); }
  std::size_t bytes() const { return bytes_; }
  shrink::cuda::Workspace workspace() const { return {data_, bytes_}; }
  void poison() { CUDA_REQUIRE(cudaMemset(data_, kPoison, bytes_)); }
  void upload(const void* host, std::size_t bytes) { CUDA_REQUIRE(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice)); }
  template <class T>
  std::vector<T> download(std::size_t count) const {
    std::vector<T> host(count);
    CUDA_REQUIRE(cudaMemcpy(host.data(), data_, count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // Every one of the first `bytes` still holds kPoison: nothing was written there.
  bool still_poisoned(std::size_t bytes) const {
    for (unsigned char b : download<unsigned char>(bytes))
      if (b != kPoison) return false;
    return true;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A device copy of `host` (one poisoned byte when it is empty).
template <class T>
std::unique_ptr<DeviceBuffer> to_device(const std::vector<T>& host) {
  auto buffer = std::make_unique<DeviceBuffer>(host.empty() ? 1 : host.size() * sizeof(T));
  if (!host.empty()) buffer->upload(host.data(), host.size() * sizeof(T));
  return buffer;
}

// A pointer the host-side checks accept (aligned, not null) for tests that expect them to throw before any launch;
// never dereferenced.
inline void* fake_device_pointer() {
  alignas(64) static unsigned char storage[256];
  return storage;
}

// Fixed addresses the host-side checks accept and never dereference, apart from one another: floats at 0x10000,
// bytes at 0x20000 and a 1 MiB workspace at 0x40000 (a test that wants a misaligned pointer adds to them).
inline float* fake_device_floats() { return reinterpret_cast<float*>(std::uintptr_t{0x10000}); }
inline std::uint8_t* fake_device_bytes() { return reinterpret_cast<std::uint8_t*>(std::uintptr_t{0x20000}); }
inline const shrink::cuda::Workspace kFakeWorkspace{reinterpret_cast<void*>(std::uintptr_t{0x40000}), 1 << 20};

}  // namespace shrink::test
