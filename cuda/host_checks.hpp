// Host-side argument checks shared by the .cu files of shrink::cuda (private to cuda/): device pointers, device
// views, the current device and workspaces; each throws shrink::Error naming the argument before any launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::detail {

inline void require_pointer(const void* pointer, std::uintptr_t alignment, const char* fn, const char* argument) {
  if (pointer == nullptr) fail(fn, argument, "a null pointer", "a device pointer");
  if (reinterpret_cast<std::uintptr_t>(pointer) % alignment != 0)
    fail(fn, argument, "a misaligned pointer", "alignment to " + std::to_string(alignment) + " bytes");
}

// A non-empty, contiguous view of CUDA memory, aligned for its element type.
template <class T>
void require_device_view(const TensorView<T>& view, const char* fn, const char* argument) {
  if (!view.device().is_cuda()) fail(fn, argument, "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
  require_nonempty(view, fn, argument);
  require_contiguous(view, fn, argument);
  require_pointer(view.data(), alignof(std::remove_const_t<T>), fn, argument);
}

// Kernels launch on the current device, so a view must live there.
inline void require_current_device(const Device& device, const char* fn, const char* argument) {
  int current = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&current));
  if (device.index != current)
    fail(fn, argument, "a view on CUDA device " + std::to_string(device.index),
         "memory on the current device " + std::to_string(current));
}

// A 16-byte aligned workspace of at least `needed` bytes; `query` names the size query, e.g. "nm_workspace_bytes()".
inline void require_workspace(const Workspace& workspace, std::size_t needed, const std::string& query,
                              const char* fn) {
  require_pointer(workspace.data, 16, fn, "workspace.data");
  if (workspace.bytes < needed)
    fail(fn, "workspace.bytes", workspace.bytes, "at least " + query + " = " + std::to_string(needed));
}

}  // namespace shrink::cuda::detail
