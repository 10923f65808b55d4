// A host-compiled program linking the installed shrink::cuda: lists the CUDA devices (none is fine).
#include <cstdio>

#include "shrink/cuda/device.hpp"

int main() {
  const int count = shrink::cuda::device_count();
  std::printf("shrink cuda consumer: %d CUDA device(s)\n", count);
  for (int ordinal = 0; ordinal < count; ++ordinal)
    std::printf("  %d: %s\n", ordinal, shrink::cuda::describe(shrink::cuda::device_info(ordinal)).c_str());
  return 0;
}
