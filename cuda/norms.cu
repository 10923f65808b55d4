// Host-callable slice and block norms (shrink/cuda/norms.hpp): validation, then the kernels of shrink/cuda/kernels/norms.cuh,
// instantiated for float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "host_checks.hpp"
#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/norms.cuh"
#include "shrink/cuda/norms.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::cuda {

using namespace detail;

namespace {

int* zeroed_status(const Workspace& workspace, Stream stream) {
  int* status = static_cast<int*>(workspace.data);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  return status;
}

// The partial sums follow the status word.
double* partials_of(const Workspace& workspace) {
  return reinterpret_cast<double*>(static_cast<char*>(workspace.data) + kStatusBytes);
}

template <class T>
void slice_norms_for(const T* x, const std::uint64_t* current, prune::NormOrder n,
                     const kernels::norms::SlicePlan& plan, double* partials, double* out, int* status, Stream stream) {
  switch (n) {
    case prune::NormOrder::l1:
      kernels::norms::slice_norms<T, prune::NormOrder::l1>(x, current, plan, partials, out, status, stream);
      break;
    case prune::NormOrder::l2:
      kernels::norms::slice_norms<T, prune::NormOrder::l2>(x, current, plan, partials, out, status, stream);
      break;
    case prune::NormOrder::inf:
      kernels::norms::slice_norms<T, prune::NormOrder::inf>(x, current, plan, partials, out, status, stream);
      break;
  }
}

template <class T>
void block_norms_for(const T* x, const std::uint64_t* current, prune::NormOrder n,
                     const kernels::norms::BlockGrid& grid, double* out, int* status, Stream stream) {
  switch (n) {
    case prune::NormOrder::l1:
      kernels::norms::block_norms<T, prune::NormOrder::l1>(x, current, grid, out, status, stream);
      break;
    case prune::NormOrder::l2:
      kernels::norms::block_norms<T, prune::NormOrder::l2>(x, current, grid, out, status, stream);
      break;
    case prune::NormOrder::inf:
      kernels::norms::block_norms<T, prune::NormOrder::inf>(x, current, grid, out, status, stream);
      break;
  }
}

}  // namespace

std::size_t slice_norms_workspace_bytes(const Shape& shape, int dim) {
  const char* fn = "shrink::cuda::slice_norms_workspace_bytes";
  const int axis = normalize_axis(dim, shape.rank, fn, "dim");
  for (int d = 0; d < shape.rank; ++d)
    if (shape[d] < 1) fail(fn, "shape", to_string(shape), "a shape of sizes >= 1 (a non-empty tensor)");
  const kernels::norms::SlicePlan plan = kernels::norms::plan_slices(split_at_axis(shape, axis));
  return kStatusBytes + static_cast<std::size_t>(plan.partials()) * sizeof(double);
}

std::size_t block_norms_workspace_bytes() { return kStatusBytes; }

template <class T>
void slice_norms(TensorView<const T> weights, const std::uint64_t* current, prune::NormOrder n, int dim,
                 double* norms, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::slice_norms";
  require_device_view(weights, fn, "weights");
  const int axis = normalize_axis(dim, weights.rank(), fn, "dim");
  prune::require_norm_order(n, fn);
  if (current != nullptr) require_pointer(current, alignof(std::uint64_t), fn, "current");
  require_pointer(norms, alignof(double), fn, "norms");
  require_workspace(workspace, slice_norms_workspace_bytes(weights.shape(), dim),
                    "slice_norms_workspace_bytes(weights.shape(), dim)", fn);
  require_current_device(weights.device(), fn, "weights");

  const kernels::norms::SlicePlan plan = kernels::norms::plan_slices(split_at_axis(weights.shape(), axis));
  int* status = zeroed_status(workspace, stream);
  slice_norms_for(weights.data(), current, n, plan, partials_of(workspace), norms, status, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
void block_norms(TensorView<const T> weights, const std::uint64_t* current, std::int64_t block_rows,
                 std::int64_t block_cols, prune::NormOrder n, double* norms, Workspace workspace, Stream stream,
                 Synchronize synchronize) {
  const char* fn = "shrink::cuda::block_norms";
  require_device_view(weights, fn, "weights");
  prune::require_block_tiling(weights.shape(), block_rows, block_cols, fn);
  prune::require_norm_order(n, fn);
  if (current != nullptr) require_pointer(current, alignof(std::uint64_t), fn, "current");
  require_pointer(norms, alignof(double), fn, "norms");
  require_workspace(workspace, block_norms_workspace_bytes(), "block_norms_workspace_bytes()", fn);
  require_current_device(weights.device(), fn, "weights");

  kernels::norms::BlockGrid grid;
  grid.rows = weights.size(weights.rank() - 2);
  grid.cols = weights.size(weights.rank() - 1);
  grid.block_rows = block_rows;
  grid.block_cols = block_cols;
  grid.grid_rows = grid.rows / block_rows;
  grid.grid_cols = grid.cols / block_cols;
  grid.blocks = weights.numel() / (block_rows * block_cols);
  int* status = zeroed_status(workspace, stream);
  block_norms_for(weights.data(), current, n, grid, norms, status, stream);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_NORMS(T)                                                                               \
  template void slice_norms<T>(TensorView<const T>, const std::uint64_t*, prune::NormOrder, int, double*,         \
                               Workspace, Stream, Synchronize);                                                   \
  template void block_norms<T>(TensorView<const T>, const std::uint64_t*, std::int64_t, std::int64_t,             \
                               prune::NormOrder, double*, Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_NORMS(float)
SHRINK_INSTANTIATE_NORMS(half)
SHRINK_INSTANTIATE_NORMS(bfloat16)
#undef SHRINK_INSTANTIATE_NORMS

}  // namespace shrink::cuda
