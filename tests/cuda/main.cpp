// Catch2 runner for the CUDA tests. With --gpu as first argument it exits with SHRINK_TEST_SKIP_EXIT_CODE when the
// machine has no CUDA device, which CTest (SKIP_RETURN_CODE) reports as skipped rather than passed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "shrink/cuda/device.hpp"

int main(int argc, char* argv[]) {
  std::vector<char*> arguments(argv, argv + argc);
  if (arguments.size() > 1 && std::strcmp(arguments[1], "--gpu") == 0) {
    arguments.erase(arguments.begin() + 1);
    if (shrink::cuda::device_count() == 0) {
      std::printf("no CUDA device: skipping the tests that need one\n");
      return SHRINK_TEST_SKIP_EXIT_CODE;
    }
  }
  return Catch::Session().run(static_cast<int>(arguments.size()), arguments.data());
}
