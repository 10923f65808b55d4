// CUDA realisation of prune/nm.hpp (nm_mask) and sparse/nm_compressed.hpp (compress_nm): device kernels and stream
// launchers (nvcc only; host-compiled callers use shrink/cuda/nm.hpp).
//
// Mask: element j of a group of `size` keys |x| (magnitude bits, prune::magnitude_key) is kept when its rank
// (elements beating it: larger, or equal with a lower index) is below min(n, size), the CPU's group_keep_bits
// (its partial sort for large groups orders the same way). Where m divides 64 and the last dimension, one thread
// writes one whole mask word; otherwise one thread a group or-s its bits into words zeroed first.
// Compression: one thread a group, the CPU's generic loop (kept positions, then the lowest unused ones filled with
// zero values); values are copied as bits. Metadata: one thread a word, each nibble from its group's filled
// positions, or 0x4 past rows / cols (sparse::MmaSpMetadataLayout).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/convert.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/nm.hpp"

namespace shrink::cuda::kernels {
namespace nm {

__device__ __forceinline__ std::int32_t magnitude_key(float x) {
  return static_cast<std::int32_t>(__float_as_uint(x) & 0x7FFFFFFFu);
}
constexpr std::int32_t kNonfiniteKey = 0x7F800000;

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// Keep bits of the group of `size` elements at x (size <= 64), flags NaN/inf.
template <class T>
__device__ __forceinline__ std::uint64_t group_keep_bits(const T* __restrict__ x, int size, int keep, int* status) {
  std::uint64_t bits = 0;
  bool nonfinite = false;
  for (int i = 0; i < size; ++i) {
    const std::int32_t ki = magnitude_key(to_float(x[i]));
    nonfinite |= ki >= kNonfiniteKey;
    int rank = 0;
    for (int j = 0; j < i; ++j) rank += magnitude_key(to_float(x[j])) >= ki;
    for (int j = i + 1; j < size; ++j) rank += magnitude_key(to_float(x[j])) > ki;
    bits |= static_cast<std::uint64_t>(rank < keep) << i;
  }
  if (nonfinite) atomicOr(status, kNonFinite);
  return bits;
}

// m divides 64 and the last dimension: word w covers whole groups 64w / m ...; the last word stops at numel.
template <class T>
__global__ void nm_mask_words_kernel(const T* __restrict__ x, std::int64_t numel, int n, int m,
                                     std::uint64_t* __restrict__ words, int* status) {
  const std::int64_t word_count = (numel + 63) / 64;
  for (std::int64_t w = global_thread(); w < word_count; w += grid_threads()) {
    std::uint64_t word = 0;
    for (int start = 0; start < 64 && 64 * w + start < numel; start += m)
      word |= group_keep_bits(x + 64 * w + start, m, n, status) << start;
    words[w] = word;
  }
}

// Any m and last dimension (NmRemainder::pad included): one thread a group, or-ing into zeroed words.
template <class T>
__global__ void nm_mask_groups_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t length, int n, int m,
                                      unsigned long long* __restrict__ words, int* status) {
  const std::int64_t groups_per_row = (length + m - 1) / m;
  const std::int64_t groups = rows * groups_per_row;
  for (std::int64_t g = global_thread(); g < groups; g += grid_threads()) {
    const std::int64_t row = g / groups_per_row, start = (g % groups_per_row) * m;
    const int size = static_cast<int>(length - start < m ? length - start : m);
    const int keep = n < size ? n : size;
    const std::int64_t flat = row * length + start;
    const T* group = x + flat;
    bool nonfinite = false;
    for (int i = 0; i < size; ++i) {
      const std::int32_t ki = magnitude_key(to_float(group[i]));
      nonfinite |= ki >= kNonfiniteKey;
      int rank = 0;
      for (int j = 0; j < size && rank < keep; ++j)
        rank += j < i ? magnitude_key(to_float(group[j])) >= ki : (j > i && magnitude_key(to_float(group[j])) > ki);
      if (rank < keep) atomicOr(words + ((flat + i) >> 6), 1ull << ((flat + i) & 63));
    }
    if (nonfinite) atomicOr(status, kNonFinite);
  }
}

template <class T>
__device__ __forceinline__ bool is_finite_value(T v) {
  if constexpr (sizeof(T) == 1) return true;
  else
    return isfinite(to_float(v));
}

// Values and positions, one thread a group of m; the CPU's generic fill (lowest unused positions, zero values).
template <class T>
__global__ void compress_nm_kernel(const T* __restrict__ dense, std::int64_t rows, std::int64_t cols,
                                   const std::uint64_t* __restrict__ words, int n, int m, T* __restrict__ values,
                                   std::uint8_t* __restrict__ positions, int* status) {
  const std::int64_t groups_per_row = cols / m;
  const std::int64_t groups = rows * groups_per_row;
  for (std::int64_t g = global_thread(); g < groups; g += grid_threads()) {
    const std::int64_t flat = g * m;  // row * cols + (g % groups_per_row) * m
    int kept = 0;
    bool finite = true;
    for (int j = 0; j < m; ++j) {
      kept += static_cast<int>((words[(flat + j) >> 6] >> ((flat + j) & 63)) & 1u);
      finite &= is_finite_value(dense[flat + j]);
    }
    if (!finite) atomicOr(status, kNonFinite);
    if (kept > n) atomicOr(status, kOverfullNmGroup);
    int spare = n - kept;
    std::int64_t slot = g * n;
    const std::int64_t end = slot + n;
    for (int j = 0; j < m && slot < end; ++j) {
      const bool keep = (words[(flat + j) >> 6] >> ((flat + j) & 63)) & 1u;
      if (!keep && spare <= 0) continue;
      if (!keep) --spare;
      values[slot] = keep ? dense[flat + j] : T{};  // T{}: all bits zero, as the CPU's Value{}
      positions[slot] = static_cast<std::uint8_t>(j);
      ++slot;
    }
  }
}

// mma.sp metadata of 2:4, one thread a word (sparse::MmaSpMetadataLayout, tile_k 32 or 64). A template so that the
// header may be included by several translation units.
template <int TileK>
__global__ void mma_sp_metadata_kernel(const std::uint64_t* __restrict__ words, std::int64_t rows, std::int64_t cols,
                                       std::uint32_t* __restrict__ metadata) {
  constexpr int tile_k = TileK;
  const std::int64_t padded_rows = (rows + 15) / 16 * 16;
  const std::int64_t padded_cols = (cols + tile_k - 1) / tile_k * tile_k;
  const std::int64_t word_count = padded_rows * padded_cols / 32;
  const std::int64_t words_per_tile = 16 * tile_k / 32;
  const std::int64_t tiles_per_row = padded_cols / tile_k;
  const int spans = tile_k / 16;
  for (std::int64_t w = global_thread(); w < word_count; w += grid_threads()) {
    const std::int64_t tile = w / words_per_tile;
    const int within = static_cast<int>(w % words_per_tile);
    const std::int64_t row0 = tile / tiles_per_row * 16 + within / spans;
    const std::int64_t col0 = tile % tiles_per_row * tile_k + within % spans * 16;
    std::uint32_t word = 0;
    for (int half_index = 0; half_index < 2; ++half_index) {
      const std::int64_t r = row0 + 8 * half_index;
      for (int j = 0; j < 4; ++j) {
        const std::int64_t c = col0 + 4 * j;
        std::uint32_t nibble = 0x4u;
        if (r < rows && c < cols) {
          const std::int64_t flat = r * cols + c;
          std::uint32_t chosen = static_cast<std::uint32_t>((words[flat >> 6] >> (flat & 63)) & 0xFu);
          for (int p = 0; p < 4 && __popc(chosen) < 2; ++p) chosen |= 1u << p;
          const int first = __ffs(static_cast<int>(chosen)) - 1;
          const int second = __ffs(static_cast<int>(chosen & (chosen - 1))) - 1;
          nibble = static_cast<std::uint32_t>(first) | static_cast<std::uint32_t>(second) << 2;
        }
        word |= nibble << (16 * half_index + 4 * j);
      }
    }
    metadata[w] = word;
  }
}


constexpr int kThreads = 256;

// Launchers: arguments validated, `status` zeroed; each enqueues on `stream` and neither allocates nor synchronises.
template <class T>
void mask(const T* x, std::int64_t rows, std::int64_t length, int n, int m, std::uint64_t* words, int* status,
          cudaStream_t stream) {
  const std::int64_t numel = rows * length;
  if (64 % m == 0 && length % m == 0) {
    const std::int64_t word_count = (numel + 63) / 64;
    nm_mask_words_kernel<T><<<grid_blocks(word_count, kThreads), kThreads, 0, stream>>>(x, numel, n, m, words, status);
    SHRINK_CUDA_CHECK_LAUNCH(nm_mask_words_kernel);
  } else {
    SHRINK_CUDA_CHECK(cudaMemsetAsync(words, 0, static_cast<std::size_t>((numel + 63) / 64) * 8, stream));
    const std::int64_t groups = rows * ((length + m - 1) / m);
    nm_mask_groups_kernel<T><<<grid_blocks(groups, kThreads), kThreads, 0, stream>>>(
        x, rows, length, n, m, reinterpret_cast<unsigned long long*>(words), status);
    SHRINK_CUDA_CHECK_LAUNCH(nm_mask_groups_kernel);
  }
}

template <class T>
void compress(const T* dense, std::int64_t rows, std::int64_t cols, const std::uint64_t* words, int n, int m,
              T* values, std::uint8_t* positions, std::uint32_t* metadata, int tile_k, int* status,
              cudaStream_t stream) {
  const std::int64_t groups = rows * (cols / m);
  compress_nm_kernel<T><<<grid_blocks(groups, kThreads), kThreads, 0, stream>>>(dense, rows, cols, words, n, m, values,
                                                                                positions, status);
  SHRINK_CUDA_CHECK_LAUNCH(compress_nm_kernel);
  if (metadata != nullptr) {
    const std::int64_t word_count =
        (rows + 15) / 16 * 16 * ((cols + tile_k - 1) / tile_k * tile_k) / 32;
    const unsigned blocks = grid_blocks(word_count, kThreads);
    if (tile_k == 32) mma_sp_metadata_kernel<32><<<blocks, kThreads, 0, stream>>>(words, rows, cols, metadata);
    else mma_sp_metadata_kernel<64><<<blocks, kThreads, 0, stream>>>(words, rows, cols, metadata);
    SHRINK_CUDA_CHECK_LAUNCH(mma_sp_metadata_kernel);
  }
}

}  // namespace nm
}  // namespace shrink::cuda::kernels
