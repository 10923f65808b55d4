// Bytes of each sparse storage format, comparable with metrics::dense_bytes: CSR, N:M compressed, and a bit mask.
//
// CSR          (rows + 1) int32 row offsets + nnz int32 column indices + nnz values.
// N:M          rows * cols / m * n values + the metadata: for 2:4 with 8- or 16-bit values the mma.sp words
//              (4 bits a group, padded to 16-row tiles, sparse/nm_compressed.hpp); otherwise one position byte a value.
//              NmCompressed::positions is a CPU convenience and not counted when mma.sp metadata is present.
// bit mask     dense values + prune::Mask::bytes() (one bit an element, whole 64-bit words): the masked dense form.
// Sizes of 4-bit values are rounded up to whole bytes.
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/metrics/size.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace shrink::sparse {

inline constexpr std::int64_t kCsrIndexBytes = 4;  // int32 offsets and column indices

namespace detail {

inline std::int64_t value_bytes(std::int64_t count, ScalarType type) { return (count * element_bits(type) + 7) / 8; }

}  // namespace detail

// Bytes of a CSR tensor with `rows` rows and `nnz` stored values of `type`.
inline std::int64_t csr_bytes(std::int64_t rows, std::int64_t nnz, ScalarType type) {
  const char* fn = "shrink::sparse::csr_bytes";
  if (rows < 0) fail(fn, "rows", rows, "a count >= 0");
  if (nnz < 0) fail(fn, "nnz", nnz, "a count >= 0");
  return (rows + 1) * kCsrIndexBytes + nnz * kCsrIndexBytes + detail::value_bytes(nnz, type);
}

// True when N:M compression of `type` carries mma.sp metadata words rather than position bytes.
inline bool nm_uses_mma_sp_metadata(prune::NmPattern pattern, ScalarType type) {
  return pattern.n == 2 && pattern.m == 4 && (element_bits(type) == 16 || element_bits(type) == 8);
}

// Bytes of the metadata alone (mma.sp words, or one position byte a kept value).
inline std::int64_t nm_metadata_bytes(std::int64_t rows, std::int64_t cols, prune::NmPattern pattern, ScalarType type) {
  if (nm_uses_mma_sp_metadata(pattern, type))
    return MmaSpMetadataLayout{rows, cols, element_bits(type) == 16 ? 32 : 64}.word_count() * 4;
  return rows * (cols / pattern.m) * pattern.n;
}

// Bytes of an N:M compressed [rows, cols] tensor of `type`: values + metadata (see the file comment).
inline std::int64_t nm_compressed_bytes(std::int64_t rows, std::int64_t cols, prune::NmPattern pattern,
                                        ScalarType type) {
  const char* fn = "shrink::sparse::nm_compressed_bytes";
  prune::require_nm_pattern(pattern, fn);
  if (rows < 0) fail(fn, "rows", rows, "a count >= 0");
  if (cols < 0 || cols % pattern.m != 0)
    fail(fn, "cols", cols, "a count >= 0 divisible by m = " + std::to_string(pattern.m));
  return detail::value_bytes(rows * (cols / pattern.m) * pattern.n, type) +
         nm_metadata_bytes(rows, cols, pattern, type);
}

// Every format's bytes for one 2-D mask and value type; nm_compressed is 0 when nm_applicable is false.
struct StorageComparison {
  std::int64_t elements = 0;
  std::int64_t kept = 0;
  std::int64_t dense = 0;            // metrics::dense_bytes(shape, type)
  std::int64_t dense_with_mask = 0;  // dense + the bit mask
  std::int64_t mask = 0;             // prune::Mask::bytes()
  std::int64_t csr = 0;              // csr_bytes(rows, kept, type)
  bool nm_applicable = false;        // cols % m == 0 and the mask is N:M
  std::int64_t nm_compressed = 0;    // nm_compressed_bytes(rows, cols, pattern, type)

  // dense / format, the compression ratio of a format (1.0 = no saving).
  double ratio_to_dense(std::int64_t format_bytes) const {
    return format_bytes > 0 ? static_cast<double>(dense) / static_cast<double>(format_bytes) : 0.0;
  }
};

inline StorageComparison storage_comparison(const prune::Mask& mask, ScalarType type,
                                            prune::NmPattern pattern = prune::NmPattern{2, 4}) {
  const char* fn = "shrink::sparse::storage_comparison";
  prune::require_nm_pattern(pattern, fn);
  if (mask.shape().rank != 2) fail(fn, "mask.shape", to_string(mask.shape()), "a 2-D mask [rows, cols]");
  const std::int64_t rows = mask.shape()[0], cols = mask.shape()[1];
  StorageComparison s;
  s.elements = mask.size();
  s.kept = mask.count_kept();
  s.dense = metrics::dense_bytes(mask.shape(), type);
  s.mask = mask.bytes();
  s.dense_with_mask = s.dense + s.mask;
  s.csr = csr_bytes(rows, s.kept, type);
  s.nm_applicable = cols % pattern.m == 0 && prune::is_nm_sparse(mask, pattern);
  if (s.nm_applicable) s.nm_compressed = nm_compressed_bytes(rows, cols, pattern, type);
  return s;
}

}  // namespace shrink::sparse
