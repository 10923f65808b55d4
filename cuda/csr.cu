// Host-callable CSR conversion (shrink/cuda/csr.hpp): validation, then the kernels of shrink/cuda/kernels/csr.cuh,
// instantiated for float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/csr.cuh"
#include "shrink/cuda/csr.hpp"
#include "shrink/sparse/csr.hpp"

namespace shrink::cuda {

using namespace detail;

namespace {

constexpr std::int64_t kNoCapacity = std::numeric_limits<std::int64_t>::max();

// A contiguous non-empty 2-D device view with at most INT32_MAX columns (the CPU's require_csr_source).
template <class T>
void require_dense(const TensorView<T>& dense, const char* fn, const char* argument) {
  require_device_view(dense, fn, argument);
  if (dense.rank() != 2)
    fail(fn, (std::string(argument) + ".shape").c_str(), to_string(dense.shape()), "a 2-D tensor [rows, cols]");
  sparse::require_csr_indexable(dense.size(1), 0, fn);
}

void require_mask(const std::uint64_t* mask, const char* fn) {
  if (mask != nullptr) require_pointer(mask, alignof(std::uint64_t), fn, "mask");
}

template <class T>
void require_arrays(const DeviceCsr<T>& csr, const char* fn) {
  require_pointer(csr.row_offsets, alignof(std::int32_t), fn, "csr.row_offsets");
  if (csr.capacity < 0) fail(fn, "csr.capacity", csr.capacity, "a count >= 0 of column index and value slots");
  if (csr.capacity > 0) {
    require_pointer(csr.column_indices, alignof(std::int32_t), fn, "csr.column_indices");
    require_pointer(csr.values, alignof(T), fn, "csr.values");
  }
}

void require_csr_workspace(const Workspace& workspace, std::int64_t rows, const char* fn) {
  require_workspace(workspace, csr_workspace_bytes(rows), "csr_workspace_bytes(" + std::to_string(rows) + ")", fn);
}

char* zeroed_status(const Workspace& workspace, Stream stream) {
  SHRINK_CUDA_CHECK(cudaMemsetAsync(workspace.data, 0, sizeof(int), stream));
  return static_cast<char*>(workspace.data);
}

}  // namespace

std::size_t csr_workspace_bytes(std::int64_t rows) {
  if (rows < 1) fail("shrink::cuda::csr_workspace_bytes", "rows", rows, "at least one row");
  return kernels::csr::workspace_bytes(rows);
}

std::size_t csr_to_dense_workspace_bytes() { return kStatusBytes; }

template <class T>
void csr_count(TensorView<const T> dense, const std::uint64_t* mask, std::int32_t* row_offsets, std::int64_t* nnz,
               Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::csr_count";
  require_dense(dense, fn, "dense");
  require_mask(mask, fn);
  require_pointer(row_offsets, alignof(std::int32_t), fn, "row_offsets");
  require_pointer(nnz, alignof(std::int64_t), fn, "nnz");
  require_csr_workspace(workspace, dense.size(0), fn);
  require_current_device(dense.device(), fn, "dense");

  char* ws = zeroed_status(workspace, stream);
  kernels::csr::count_and_scan(dense.data(), dense.size(0), dense.size(1), mask, kNoCapacity, row_offsets,
                               reinterpret_cast<long long*>(nnz), ws, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
void csr_fill(TensorView<const T> dense, const std::uint64_t* mask, DeviceCsr<T> csr, Workspace workspace,
              Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::csr_fill";
  require_dense(dense, fn, "dense");
  require_mask(mask, fn);
  require_arrays(csr, fn);
  require_csr_workspace(workspace, dense.size(0), fn);
  require_current_device(dense.device(), fn, "dense");

  char* ws = zeroed_status(workspace, stream);
  kernels::csr::fill(dense.data(), dense.size(0), dense.size(1), mask, csr.row_offsets, csr.capacity,
                     csr.column_indices, csr.values, ws, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
void to_csr(TensorView<const T> dense, const std::uint64_t* mask, DeviceCsr<T> csr, std::int64_t* nnz,
            Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::to_csr";
  require_dense(dense, fn, "dense");
  require_mask(mask, fn);
  require_arrays(csr, fn);
  require_pointer(nnz, alignof(std::int64_t), fn, "nnz");
  require_csr_workspace(workspace, dense.size(0), fn);
  require_current_device(dense.device(), fn, "dense");

  char* ws = zeroed_status(workspace, stream);
  kernels::csr::count_and_scan(dense.data(), dense.size(0), dense.size(1), mask, csr.capacity, csr.row_offsets,
                               reinterpret_cast<long long*>(nnz), ws, stream);
  kernels::csr::fill(dense.data(), dense.size(0), dense.size(1), mask, csr.row_offsets, csr.capacity,
                     csr.column_indices, csr.values, ws, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
void csr_to_dense(const std::int32_t* row_offsets, const std::int32_t* column_indices, const T* values,
                  std::int64_t nnz, TensorView<T> out, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::csr_to_dense";
  require_dense(out, fn, "out");
  require_pointer(row_offsets, alignof(std::int32_t), fn, "row_offsets");
  if (nnz < 0 || nnz > sparse::kMaxCsrIndex) fail(fn, "nnz", nnz, "a count in [0, INT32_MAX] (int32 offsets)");
  if (nnz > 0) {
    require_pointer(column_indices, alignof(std::int32_t), fn, "column_indices");
    require_pointer(values, alignof(T), fn, "values");
  }
  require_workspace(workspace, csr_to_dense_workspace_bytes(), "csr_to_dense_workspace_bytes()", fn);
  require_current_device(out.device(), fn, "out");

  int* status = reinterpret_cast<int*>(zeroed_status(workspace, stream));
  kernels::csr::to_dense(row_offsets, column_indices, values, nnz, out.size(0), out.size(1), out.data(), status,
                         stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_CSR(T)                                                                                 \
  template void csr_count<T>(TensorView<const T>, const std::uint64_t*, std::int32_t*, std::int64_t*, Workspace,  \
                             Stream, Synchronize);                                                                \
  template void csr_fill<T>(TensorView<const T>, const std::uint64_t*, DeviceCsr<T>, Workspace, Stream,           \
                            Synchronize);                                                                         \
  template void to_csr<T>(TensorView<const T>, const std::uint64_t*, DeviceCsr<T>, std::int64_t*, Workspace,      \
                          Stream, Synchronize);                                                                   \
  template void csr_to_dense<T>(const std::int32_t*, const std::int32_t*, const T*, std::int64_t, TensorView<T>,  \
                                Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_CSR(float)
SHRINK_INSTANTIATE_CSR(half)
SHRINK_INSTANTIATE_CSR(bfloat16)
#undef SHRINK_INSTANTIATE_CSR

}  // namespace shrink::cuda
