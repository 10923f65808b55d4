// Device discovery for shrink::cuda: device_count() and device_info(), read from the CUDA runtime.
#include <cuda_runtime_api.h>

#include <string>

#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/device.hpp"

namespace shrink::cuda {

namespace {

int device_attribute(cudaDeviceAttr attribute, const char* attribute_name, int ordinal) {
  int value = 0;
  const std::string call =
      std::string("cudaDeviceGetAttribute(&value, ") + attribute_name + ", " + std::to_string(ordinal) + ")";
  kernels::check(cudaDeviceGetAttribute(&value, attribute, ordinal), call.c_str(), __FILE__, __LINE__);
  return value;
}

}  // namespace

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  // A driver older than this runtime: a GPU that is there but cannot run shrink's code, which must not pass for a
  // machine without one (cudaDriverGetVersion gives 0 where no driver is installed).
  if (status == cudaErrorInsufficientDriver) {
    int driver = 0, runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaGetLastError();
    if (driver > 0)
      fail("shrink::cuda::device_count", "the CUDA driver", "version " + std::to_string(driver / 1000) + "." +
               std::to_string(driver % 1000 / 10),
           "a driver for CUDA " + std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10) +
               " or later (the runtime shrink was built with): update the NVIDIA driver");
  }
  // No device, no driver, or only the driver's link stub: a machine without a GPU, not a failure.
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary) {
    (void)cudaGetLastError();  // clear it so the next checked call does not report it
    return 0;
  }
  kernels::check(status, "cudaGetDeviceCount(&count)", __FILE__, __LINE__);
  return count;
}

DeviceInfo device_info(int ordinal) {
  const int count = device_count();
  if (ordinal < 0 || ordinal >= count)
    fail("shrink::cuda::device_info", "ordinal", ordinal,
         "a device ordinal in [0, " + std::to_string(count) + ") (device_count() = " + std::to_string(count) + ")");

  cudaDeviceProp properties{};
  SHRINK_CUDA_CHECK(cudaGetDeviceProperties(&properties, ordinal));

  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = properties.name;
  info.compute_capability_major = properties.major;
  info.compute_capability_minor = properties.minor;
  info.multiprocessor_count = properties.multiProcessorCount;
  info.l2_cache_bytes = properties.l2CacheSize;
  info.shared_memory_per_block_bytes = static_cast<std::int64_t>(properties.sharedMemPerBlock);
  info.shared_memory_per_block_optin_bytes = static_cast<std::int64_t>(properties.sharedMemPerBlockOptin);
  info.shared_memory_per_multiprocessor_bytes = static_cast<std::int64_t>(properties.sharedMemPerMultiprocessor);
  info.global_memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  info.memory_bus_width_bits = properties.memoryBusWidth;
  // CUDA 13 dropped memoryClockRate from cudaDeviceProp; the attribute still reports it.
  info.memory_clock_khz = device_attribute(cudaDevAttrMemoryClockRate, "cudaDevAttrMemoryClockRate", ordinal);
  info.max_threads_per_block = properties.maxThreadsPerBlock;
  info.warp_size = properties.warpSize;
  return info;
}

}  // namespace shrink::cuda
