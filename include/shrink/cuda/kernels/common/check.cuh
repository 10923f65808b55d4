// Checked CUDA runtime calls for nvcc-compiled code: any cudaError_t other than cudaSuccess becomes a
// shrink::Error whose message names the call, the CUDA error and where it happened.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "shrink/core/error.hpp"

namespace shrink::cuda::kernels {

// Message: "<call>: <cudaErrorName> (<description>) at <file>:<line>".
inline void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  fail(call, std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ") at " + file + ":" +
                 std::to_string(line));
}

// A launch reports configuration errors through cudaGetLastError, not a return value.
inline void check_launch(const char* kernel, const char* file, int line) {
  check(cudaGetLastError(), (std::string("launch of ") + kernel).c_str(), file, line);
}

}  // namespace shrink::cuda::kernels

// Runs a cudaError_t-returning expression and throws shrink::Error naming it if it fails.
#define SHRINK_CUDA_CHECK(call) ::shrink::cuda::kernels::check((call), #call, __FILE__, __LINE__)

// Checks the kernel launch just issued, e.g. kernel<<<grid, block>>>(...); SHRINK_CUDA_CHECK_LAUNCH(kernel);
#define SHRINK_CUDA_CHECK_LAUNCH(kernel) ::shrink::cuda::kernels::check_launch(#kernel, __FILE__, __LINE__)
