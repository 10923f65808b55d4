// A host-compiled program linking the installed shrink::cuda through its umbrella header: lists the CUDA devices
// (none is fine) and asks a few workspace sizes, which need no device, so that the link covers the compiled layer.
#include <cstdio>

#include "shrink/cuda.hpp"

int main() {
  const int count = shrink::cuda::device_count();
  std::printf("shrink cuda consumer: %d CUDA device(s)\n", count);
  for (int ordinal = 0; ordinal < count; ++ordinal)
    std::printf("  %d: %s\n", ordinal, shrink::cuda::describe(shrink::cuda::device_info(ordinal)).c_str());
  std::printf("workspace bytes: threshold %zu, soft target (8 rows) %zu, int8 epilogue %zu\n",
              shrink::cuda::threshold_workspace_bytes(), shrink::cuda::soft_target_workspace_bytes(8),
              shrink::cuda::int8_epilogue_workspace_bytes());
  return 0;
}
