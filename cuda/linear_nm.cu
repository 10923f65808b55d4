// Host-callable 2:4 sparse GEMM (shrink/linear/nm_cuda.hpp): validation, the choice of block tile, the launch of
// shrink/cuda/kernels/linear_nm.cuh; instantiated for half -> half/float, bfloat16 -> bfloat16/float and int8 ->
// float/half/bfloat16/int8.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "host_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/linear_nm.cuh"
#include "shrink/linear/nm_cuda.hpp"

namespace shrink::cuda {

namespace {

// automatic: decode-sized M gets the 32x16 tile; otherwise the 128x128 tile when its blocks fill every SM once,
// else the 64x64 tile (more, smaller blocks for mid-sized M).
LinearNmPath choose_path(LinearNmPath requested, std::int64_t m, std::int64_t n) {
  if (requested != LinearNmPath::automatic) return requested;
  if (m <= 16) return LinearNmPath::mma_sp_32x16;
  int device = 0, multiprocessors = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  return kernels::linear_nm::grid_size<kernels::linear_nm::Tile128x128>(m, n) >= multiprocessors
             ? LinearNmPath::mma_sp_128x128
             : LinearNmPath::mma_sp_64x64;
}

}  // namespace

template <class T, class Out>
std::size_t linear_nm_workspace_bytes(const LinearNmArgs<T, Out>&) {
  return kStatusBytes;
}

template <class T, class Out>
void linear_nm(const LinearNmArgs<T, Out>& args, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::linear_nm";
  require_supported(can_implement_linear_nm(args), fn);
  const std::int64_t m = args.x.size(0), n = args.w.rows, k = args.x.size(1);
  // The smallest tile has the most blocks; a 1-D grid holds 2^31 - 1.
  if (kernels::linear_nm::grid_size<kernels::linear_nm::Tile32x16>(m, n) > std::numeric_limits<std::int32_t>::max())
    fail(fn, "x.shape", to_string(args.x.shape()),
         "M, N with at most 2^31 - 1 blocks of 32 x 16 outputs (N = " + std::to_string(n) + ")");
  detail::require_workspace(workspace, linear_nm_workspace_bytes(args), "linear_nm_workspace_bytes()", fn);
  detail::require_current_device(args.x.device(), fn, "x");

  // int8: the metadata mapping SHRINK_NM_INT8_METADATA names (throws on a value it does not know), read per call
  // so that one process can try both; 16-bit values have one mapping.
  const kernels::linear_nm::Int8Metadata int8_metadata = std::is_same_v<T, std::int8_t>
                                                             ? kernels::linear_nm::int8_metadata_from_environment()
                                                             : kernels::linear_nm::Int8Metadata::row_per_lane;
  int* status = static_cast<int*>(workspace.data);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  const kernels::linear_nm::Params<T, Out> p{
      args.x.data(), args.w.values, args.w.metadata, make_epilogue_op(args.epilogue, m, n), args.out.data(), m, n, k,
      status,        int8_metadata};
  switch (choose_path(args.path, m, n)) {
    case LinearNmPath::mma_sp_32x16:
      kernels::linear_nm::launch<T, Out, kernels::linear_nm::Tile32x16>(p, stream);
      break;
    case LinearNmPath::mma_sp_64x64:
      kernels::linear_nm::launch<T, Out, kernels::linear_nm::Tile64x64>(p, stream);
      break;
    default: kernels::linear_nm::launch<T, Out, kernels::linear_nm::Tile128x128>(p, stream); break;
  }
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_GEMM_SPARSE24(T, Out)                                       \
  template std::size_t linear_nm_workspace_bytes<T, Out>(const LinearNmArgs<T, Out>&); \
  template void linear_nm<T, Out>(const LinearNmArgs<T, Out>&, Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_GEMM_SPARSE24(half, half)
SHRINK_INSTANTIATE_GEMM_SPARSE24(half, float)
SHRINK_INSTANTIATE_GEMM_SPARSE24(bfloat16, bfloat16)
SHRINK_INSTANTIATE_GEMM_SPARSE24(bfloat16, float)
SHRINK_INSTANTIATE_GEMM_SPARSE24(std::int8_t, float)
SHRINK_INSTANTIATE_GEMM_SPARSE24(std::int8_t, half)
SHRINK_INSTANTIATE_GEMM_SPARSE24(std::int8_t, bfloat16)
SHRINK_INSTANTIATE_GEMM_SPARSE24(std::int8_t, std::int8_t)
#undef SHRINK_INSTANTIATE_GEMM_SPARSE24

}  // namespace shrink::cuda
