// Host API of the CUDA N:M masks and N:M compression (compiled in cuda/nm.cu; plain C++, no CUDA headers).
//
// Same rules and bytes as the CPU's prune/nm.hpp (nm_mask) and sparse/nm_compressed.hpp (compress_nm): the device
// writes the words of prune::Mask(shape) and the values / positions / mma.sp metadata of sparse::NmCompressed, equal
// bit for bit to what the CPU returns (the device code is shrink/cuda/kernels/nm.cuh).
//
// Two phases, as CUB: ask nm_workspace_bytes(), give that much device memory (16-byte aligned) to every call. Calls
// enqueue on `stream`, allocate nothing and return at once. Inputs and outputs are contiguous row-major device memory
// on the current device; views must say so (Device::cuda(current ordinal)).
//
// Validation: pattern, shapes, pointers and workspace are checked on the host before any CUDA call (shrink::Error,
// the CPU's messages). Values on the device are checked by the kernels into the status word of the workspace: NaN/inf
// input (kNonFinite) and, for compress_nm, a mask group keeping more than n (kOverfullNmGroup). Pass
// Synchronize::yes to wait and throw shrink::Error naming a failed check; after one the output is meaningless.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/prune/nm.hpp"

namespace shrink::cuda {

// Workspace of every call below: the status word.
std::size_t nm_workspace_bytes();

// Words of the mask of `numel` elements: ceil(numel / 64) uint64, as prune::Mask::words().
std::int64_t nm_mask_words(std::int64_t numel);

// Keeps the n largest |importance| of each run of m along the last dimension (rank >= 1), ties to the lower index,
// as prune::nm_mask (NmRemainder::pad: a last partial group keeps min(n, r)). Writes nm_mask_words(numel) words to
// `mask_words` (8-byte aligned; bits past numel are 0): copy them into Mask(shape).mutable_words().
void nm_mask(TensorView<const float> importance, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder = prune::NmRemainder::error,
             Synchronize synchronize = Synchronize::no);
// Magnitude masks of 16-bit weights: the same rule on the values read as float (exact).
void nm_mask(TensorView<const half> weights, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder = prune::NmRemainder::error,
             Synchronize synchronize = Synchronize::no);
void nm_mask(TensorView<const bfloat16> weights, prune::NmPattern pattern, std::uint64_t* mask_words,
             Workspace workspace, Stream stream, prune::NmRemainder remainder = prune::NmRemainder::error,
             Synchronize synchronize = Synchronize::no);

// Device outputs of compress_nm, sized as sparse::NmCompressed<T> of a [rows, cols] tensor:
// values and positions rows * cols / m * n each; metadata nm_metadata_words<T>(rows, cols, pattern) uint32 (null
// allowed when that is 0).
template <class T>
struct DeviceNmCompressed {
  T* values = nullptr;
  std::uint8_t* positions = nullptr;
  std::uint32_t* metadata = nullptr;
};

// mma.sp metadata words of a [rows, cols] T tensor under `pattern` (sparse::MmaSpMetadataLayout), 0 when the pattern
// or type has none.
template <class T>
std::int64_t nm_metadata_words(std::int64_t rows, std::int64_t cols, prune::NmPattern pattern);

// Compresses dense [rows, cols] under a device mask of its shape (nm_mask_words(rows * cols) words, as
// prune::Mask::words()), as sparse::compress_nm: each group's n kept values in position order, filled up to n with
// zeros at the lowest unused positions; metadata for 2:4 with 16-bit and 8-bit T (padding nibbles 0x4).
// Instantiated for float, half, bfloat16, int8 and uint8.
template <class T>
void compress_nm(TensorView<const T> dense, const std::uint64_t* mask_words, prune::NmPattern pattern,
                 DeviceNmCompressed<T> out, Workspace workspace, Stream stream,
                 Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
