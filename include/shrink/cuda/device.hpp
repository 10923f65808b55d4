// Host API of the compiled shrink::cuda library: which CUDA devices exist and what their kernels can count on.
// Plain C++ (no CUDA headers), so code built by a host compiler can call it and link shrink::cuda.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

namespace shrink::cuda {

// The properties of one device that kernel configuration and bandwidth targets depend on.
struct DeviceInfo {
  int ordinal = -1;
  std::string name;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessor_count = 0;
  std::int64_t l2_cache_bytes = 0;
  std::int64_t shared_memory_per_block_bytes = 0;        // usable without opting in (48 KiB on sm_80/sm_90)
  std::int64_t shared_memory_per_block_optin_bytes = 0;  // after cudaFuncSetAttribute(MaxDynamicSharedMemorySize)
  std::int64_t shared_memory_per_multiprocessor_bytes = 0;
  std::int64_t global_memory_bytes = 0;
  int memory_bus_width_bits = 0;
  std::int64_t memory_clock_khz = 0;  // peak memory clock
  int max_threads_per_block = 0;
  int warp_size = 0;

  // 10 * major + minor, as in sm_80 or sm_90.
  int compute_capability() const { return 10 * compute_capability_major + compute_capability_minor; }

  // Theoretical DRAM bandwidth: 2 transfers per clock (double data rate) * bus width in bytes * memory clock.
  double peak_memory_bandwidth_bytes_per_second() const {
    return 2.0 * (memory_bus_width_bits / 8.0) * (static_cast<double>(memory_clock_khz) * 1000.0);
  }
};

// One line for logs and benchmark headers, e.g. "NVIDIA H100 (sm_90, 132 SMs, 50 MiB L2, 79 GiB, 3352 GB/s)".
inline std::string describe(const DeviceInfo& info) {
  std::ostringstream out;
  out << info.name << " (sm_" << info.compute_capability() << ", " << info.multiprocessor_count << " SMs, "
      << (info.l2_cache_bytes >> 20) << " MiB L2, " << (info.global_memory_bytes >> 30) << " GiB, "
      << static_cast<std::int64_t>(info.peak_memory_bandwidth_bytes_per_second() / 1e9) << " GB/s)";
  return out.str();
}

// Number of CUDA devices; 0 (not an error) when there is no device or no driver. A driver older than the CUDA
// runtime shrink was built with (a GPU that cannot run it) and other CUDA failures throw shrink::Error.
int device_count();

// Properties of device `ordinal`, read from cudaGetDeviceProperties and cudaDeviceGetAttribute.
// Throws shrink::Error when ordinal is outside [0, device_count()) or a CUDA call fails.
DeviceInfo device_info(int ordinal);

// Launches a kernel on device `ordinal` that writes a known pattern over a poisoned buffer and checks every
// element on the host: proves that the library's machine code runs on that device. Throws shrink::Error naming
// the first wrong element, or the failing CUDA call. Leaves the caller's current device unchanged.
void self_test(int ordinal);

}  // namespace shrink::cuda
