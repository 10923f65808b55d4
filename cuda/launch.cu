// check_status (shrink/cuda/launch.hpp): reads the status word of a workspace after the stream's work and names
// every device-side check that failed.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

void check_status(Workspace workspace, Stream stream, const char* function) {
  if (workspace.data == nullptr) fail(function, "workspace.data", "a null pointer", "a device pointer");
  if (reinterpret_cast<std::uintptr_t>(workspace.data) % 16 != 0)
    fail(function, "workspace.data", "a misaligned pointer", "alignment to 16 bytes");
  int status = 0;
  SHRINK_CUDA_CHECK(cudaMemcpyAsync(&status, workspace.data, sizeof(int), cudaMemcpyDeviceToHost, stream));
  SHRINK_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (status == 0) return;
  std::string what;
  const auto add = [&what](const char* text) { what += (what.empty() ? "" : "; ") + std::string(text); };
  if (status & kNonFinite)
    add("the input holds NaN or inf (expected finite values; a logit may be -inf, but not a whole row)");
  if (status & kBadScale) add("a scale is not finite and > 0");
  if (status & kBadZeroPoint) add("a zero point lies outside [qmin, qmax] of the scheme");
  if (status & kOverfullNmGroup) add("a group of the mask keeps more than n (expected an N:M mask)");
  if (status & kBadRank) add("k exceeds the candidates the current masks keep");
  if (status & kBadIndex)
    add("an index lies outside its range, out of order or repeated (expected a valid CSR; a class in [0, V) or "
        "ignore_index; a target of +1 or -1; k distinct top-k indices in [0, V))");
  if (status & kBadTailMass) add("a top-k tail mass lies outside [0, 1)");
  if (status & kCapacity) add("the output needs more elements than its capacity (or than INT32_MAX int32 offsets)");
  fail(function, "device-side check failed: " + what + "; the output is meaningless");
}

}  // namespace shrink::cuda
