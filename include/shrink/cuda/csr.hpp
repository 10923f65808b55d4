// Host API of the CUDA CSR conversion (compiled in cuda/csr.cu; plain C++, no CUDA headers).
//
// The arrays of sparse::to_csr (sparse/csr.hpp) built on the device, byte for byte: int32 row offsets (rows + 1, from
// 0), int32 column indices increasing within a row, values copied as bits. Kept: the elements that are not zero
// (-0.0 is zero and dropped; 16-bit types test their magnitude bits), or, given a mask (the device words of a
// prune::Mask of dense's shape), exactly the elements it keeps, explicit zeros and -0.0 included. csr_to_dense is
// sparse::to_dense_into: zeros, then the stored values. Device code: shrink/cuda/kernels/csr.cuh.
//
// The caller does not know nnz in advance; two ways:
//   (a) csr_count writes the row offsets and nnz (int64) to device memory; read nnz (an 8-byte copy, which waits for
//       the stream), allocate nnz column indices and values, then csr_fill with those row offsets.
//   (b) to_csr enqueues everything at once into arrays of a guessed `capacity`. When nnz exceeds it, kCapacity is
//       flagged and the column indices and values are left untouched, while the row offsets and nnz are valid: allocate
//       nnz and call csr_fill with them.
// More than INT32_MAX kept elements (int32 offsets, as the CPU's kMaxCsrIndex) also flags kCapacity; nnz stays exact.
//
// Device-side checks (status word, read with Synchronize::yes or check_status): NaN or +-inf anywhere in dense, kept or
// not, flags kNonFinite (the CPU throws naming the first; the arrays are then meaningless); csr_fill given row offsets
// that do not match dense and the mask flags kBadIndex (or kCapacity past the capacity) and never writes out of
// bounds; csr_to_dense checks the CSR as sparse::validate_csr does (offsets from 0 to nnz, non-decreasing; columns in
// range and increasing in a row), flags kBadIndex and writes only in-range positions.
//
// Two phases, as CUB: csr_workspace_bytes(rows) for csr_count, csr_fill and to_csr (status word, row counts, tile
// sums), csr_to_dense_workspace_bytes() for csr_to_dense. Calls enqueue on `stream`, allocate nothing, return at once.
// Host checks (shrink::Error before any CUDA call): a contiguous non-empty 2-D view on the current device with at most
// INT32_MAX columns, aligned non-null pointers (column indices and values may be null when capacity is 0), capacity
// >= 0, nnz in [0, INT32_MAX], the workspace. T: float, half, bfloat16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

// Device arrays of a CSR being built: row_offsets holds rows + 1 int32; column_indices and values `capacity` each.
template <class T>
struct DeviceCsr {
  std::int32_t* row_offsets = nullptr;
  std::int32_t* column_indices = nullptr;
  T* values = nullptr;
  std::int64_t capacity = 0;
};

// Workspace of csr_count, csr_fill and to_csr over `rows` rows (rows >= 1).
std::size_t csr_workspace_bytes(std::int64_t rows);

// Writes row_offsets[0..rows] and *nnz (device int64) for the elements of dense [rows, cols] that are kept (nonzero,
// or set in `mask`, nullable).
template <class T>
void csr_count(TensorView<const T> dense, const std::uint64_t* mask, std::int32_t* row_offsets, std::int64_t* nnz,
               Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// Writes the column indices and values at csr.row_offsets (as csr_count wrote them for this dense and mask); nothing
// when the offsets' nnz exceeds csr.capacity (kCapacity).
template <class T>
void csr_fill(TensorView<const T> dense, const std::uint64_t* mask, DeviceCsr<T> csr, Workspace workspace,
              Stream stream, Synchronize synchronize = Synchronize::no);

// csr_count then csr_fill, enqueued at once; *nnz (device int64) as csr_count. When nnz > csr.capacity: kCapacity,
// row offsets and nnz written, column indices and values untouched.
template <class T>
void to_csr(TensorView<const T> dense, const std::uint64_t* mask, DeviceCsr<T> csr, std::int64_t* nnz,
            Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// Workspace of csr_to_dense: the status word.
std::size_t csr_to_dense_workspace_bytes();

// out [rows, cols] = zeros, then values[k] at (r, column_indices[k]) for k in [row_offsets[r], row_offsets[r + 1]).
// nnz: the entries of column_indices and values (row_offsets[rows] must equal it).
template <class T>
void csr_to_dense(const std::int32_t* row_offsets, const std::int32_t* column_indices, const T* values,
                  std::int64_t nnz, TensorView<T> out, Workspace workspace, Stream stream,
                  Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
