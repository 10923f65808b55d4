// Host-callable N:M masks and compression (shrink/cuda/nm.hpp): validation, then the launchers of shrink/cuda/kernels/nm.cuh,
// explicitly instantiated here for float, half, bfloat16 (masks) and int8 / uint8 too (compression).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/nm.cuh"
#include "shrink/cuda/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace shrink::cuda {

using namespace detail;

namespace {



void require_workspace(const Workspace& workspace, const char* fn) {
  detail::require_workspace(workspace, nm_workspace_bytes(), "nm_workspace_bytes()", fn);
}


int* zeroed_status(const Workspace& workspace, Stream stream) {
  int* status = static_cast<int*>(workspace.data);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  return status;
}

// Synchronize::yes: waits for the stream and names the failed device-side checks.
void finish(const Workspace& workspace, Stream stream, Synchronize synchronize, const char* fn) {
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class T>
void nm_mask_impl(const TensorView<const T>& x, prune::NmPattern pattern, std::uint64_t* mask_words,
                  const Workspace& workspace, Stream stream, prune::NmRemainder remainder, Synchronize synchronize) {
  const char* fn = "shrink::cuda::nm_mask";
  prune::require_nm_pattern(pattern, fn);
  if (x.rank() < 1) fail(fn, "importance", "a scalar", "a tensor of rank >= 1 (groups run along the last dimension)");
  require_device_view(x, fn, "importance");
  const std::int64_t length = x.size(x.rank() - 1);
  if (length % pattern.m != 0 && remainder == prune::NmRemainder::error)
    fail(fn, "importance.shape", to_string(x.shape()),
         "a last dimension divisible by m = " + std::to_string(pattern.m) + " (or NmRemainder::pad)");
  require_pointer(mask_words, alignof(std::uint64_t), fn, "mask_words");
  require_workspace(workspace, fn);
  require_current_device(x.device(), fn, "importance");

  int* status = zeroed_status(workspace, stream);
  kernels::nm::mask(x.data(), x.numel() / length, length, pattern.n, pattern.m, mask_words, status, stream);
  finish(workspace, stream, synchronize, fn);
}

}  // namespace

std::size_t nm_workspace_bytes() { return kStatusBytes; }

std::int64_t nm_mask_words(std::int64_t numel) { return numel < 0 ? 0 : (numel + 63) / 64; }

void nm_mask(TensorView<const float> importance, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder, Synchronize synchronize) {
  nm_mask_impl(importance, pattern, mask_words, workspace, stream, remainder, synchronize);
}
void nm_mask(TensorView<const half> weights, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder, Synchronize synchronize) {
  nm_mask_impl(weights, pattern, mask_words, workspace, stream, remainder, synchronize);
}
void nm_mask(TensorView<const bfloat16> weights, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder, Synchronize synchronize) {
  nm_mask_impl(weights, pattern, mask_words, workspace, stream, remainder, synchronize);
}

template <class T>
std::int64_t nm_metadata_words(std::int64_t rows, std::int64_t cols, prune::NmPattern pattern) {
  if constexpr (sizeof(T) == 2 || sizeof(T) == 1) {
    if (sparse::has_mma_sp_metadata<T>(pattern)) return sparse::mma_sp_metadata_layout<T>(rows, cols).word_count();
  }
  return 0;
}

template <class T>
void compress_nm(TensorView<const T> dense, const std::uint64_t* mask_words, prune::NmPattern pattern,
                 DeviceNmCompressed<T> out, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::compress_nm";
  prune::require_nm_pattern(pattern, fn);
  if (dense.rank() != 2) fail(fn, "dense.shape", to_string(dense.shape()), "a 2-D tensor [rows, cols]");
  require_device_view(dense, fn, "dense");
  const std::int64_t rows = dense.size(0), cols = dense.size(1);
  if (cols % pattern.m != 0)
    fail(fn, "dense.shape", to_string(dense.shape()), "a column count divisible by m = " + std::to_string(pattern.m));
  require_pointer(mask_words, alignof(std::uint64_t), fn, "mask_words");
  require_pointer(out.values, alignof(T), fn, "out.values");
  require_pointer(out.positions, 1, fn, "out.positions");
  const std::int64_t metadata_words = nm_metadata_words<T>(rows, cols, pattern);
  if (metadata_words > 0) require_pointer(out.metadata, alignof(std::uint32_t), fn, "out.metadata");
  require_workspace(workspace, fn);
  require_current_device(dense.device(), fn, "dense");

  int* status = zeroed_status(workspace, stream);
  const int tile_k = sizeof(T) == 2 ? 32 : 64;
  kernels::nm::compress(dense.data(), rows, cols, mask_words, pattern.n, pattern.m, out.values, out.positions,
                        metadata_words > 0 ? out.metadata : nullptr, tile_k, status, stream);
  finish(workspace, stream, synchronize, fn);
}

#define SHRINK_INSTANTIATE_NM(T)                                                                                    \
  template std::int64_t nm_metadata_words<T>(std::int64_t, std::int64_t, prune::NmPattern);                         \
  template void compress_nm<T>(TensorView<const T>, const std::uint64_t*, prune::NmPattern, DeviceNmCompressed<T>, \
                               Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_NM(float)
SHRINK_INSTANTIATE_NM(half)
SHRINK_INSTANTIATE_NM(bfloat16)
SHRINK_INSTANTIATE_NM(std::int8_t)
SHRINK_INSTANTIATE_NM(std::uint8_t)
#undef SHRINK_INSTANTIATE_NM

}  // namespace shrink::cuda
