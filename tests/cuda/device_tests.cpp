// Tests for shrink/cuda/device.hpp and the compiled shrink::cuda library: [host] ones run on any machine,
// [gpu] ones need a device (run through main.cpp's --gpu, which reports "skipped" without one).
#include <catch2/catch.hpp>

#include <string>

#include "shrink/core/error.hpp"
#include "shrink/cuda/device.hpp"

using shrink::cuda::DeviceInfo;

TEST_CASE("device_count never fails, and gives 0 without a device or driver", "[host]") {
  int count = -1;
  REQUIRE_NOTHROW(count = shrink::cuda::device_count());
  CHECK(count >= 0);
}

TEST_CASE("device_info and self_test reject ordinals outside [0, device_count())", "[host]") {
  const int count = shrink::cuda::device_count();
  for (const int ordinal : {-1, count, count + 7}) {
    CHECK_THROWS_WITH(shrink::cuda::device_info(ordinal),
                      Catch::Matchers::Contains("shrink::cuda::device_info: ordinal = " + std::to_string(ordinal)) &&
                          Catch::Matchers::Contains("expected a device ordinal in [0, " + std::to_string(count) + ")"));
    CHECK_THROWS_AS(shrink::cuda::self_test(ordinal), shrink::Error);
  }
}

TEST_CASE("DeviceInfo derives compute capability and peak bandwidth from its fields", "[host]") {
  DeviceInfo info;
  info.name = "test device";
  info.compute_capability_major = 9;
  info.compute_capability_minor = 0;
  info.multiprocessor_count = 132;
  info.l2_cache_bytes = 50 << 20;
  info.global_memory_bytes = 80LL << 30;
  info.memory_bus_width_bits = 5120;
  info.memory_clock_khz = 2619000;
  CHECK(info.compute_capability() == 90);
  // 2 * (5120 / 8) bytes * 2.619e9 Hz
  CHECK(info.peak_memory_bandwidth_bytes_per_second() == Approx(3352.32e9));
  CHECK(shrink::cuda::describe(info) == "test device (sm_90, 132 SMs, 50 MiB L2, 80 GiB, 3352 GB/s)");
}

TEST_CASE("device_info reads plausible properties of every device", "[gpu]") {
  const int count = shrink::cuda::device_count();
  REQUIRE(count > 0);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    const DeviceInfo info = shrink::cuda::device_info(ordinal);
    INFO(shrink::cuda::describe(info));
    CHECK(info.ordinal == ordinal);
    CHECK_FALSE(info.name.empty());
    CHECK(info.compute_capability_major >= 1);
    CHECK(info.multiprocessor_count > 0);
    CHECK(info.l2_cache_bytes > 0);
    CHECK(info.shared_memory_per_block_bytes > 0);
    CHECK(info.shared_memory_per_block_optin_bytes >= info.shared_memory_per_block_bytes);
    CHECK(info.shared_memory_per_multiprocessor_bytes >= info.shared_memory_per_block_optin_bytes);
    CHECK(info.global_memory_bytes > 0);
    CHECK(info.memory_bus_width_bits > 0);
    CHECK(info.memory_clock_khz > 0);
    CHECK(info.peak_memory_bandwidth_bytes_per_second() > 1e10);
    CHECK(info.max_threads_per_block >= 1024);
    CHECK(info.warp_size == 32);
  }
}

TEST_CASE("self_test runs the library's kernel correctly on every device", "[gpu][sanitize]") {
  const int count = shrink::cuda::device_count();
  REQUIRE(count > 0);
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    INFO("device " << ordinal);
    CHECK_NOTHROW(shrink::cuda::self_test(ordinal));
  }
}
