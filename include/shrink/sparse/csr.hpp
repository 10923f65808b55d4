// Compressed sparse row (CSR) storage of a 2-D tensor with 32-bit indices, the layout cuSPARSE and
// torch.sparse_csr_tensor use: row_offsets[r] .. row_offsets[r + 1] index row r's column indices and values.
//
// to_csr(dense) keeps the elements that compare unequal to zero: -0.0 compares equal to 0 and is dropped, so a round
// trip turns it into +0.0 (to_csr(dense, mask) keeps a masked -0.0 bit for bit). NaN and +-inf weights are bad input
// for the floating types (float, double, half, bfloat16): an error names the first one's row-major index.
// Indices are int32: more than INT32_MAX columns or kept elements is an error (cuSPARSE's CUSPARSE_INDEX_32I).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/csr_scan.hpp"
#include "shrink/cpu/huge_pages.hpp"
#include "shrink/prune/mask.hpp"

namespace shrink::sparse {

template <class T>
struct Csr {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<std::int32_t> row_offsets;     // rows + 1 entries: 0, then the running count of kept elements
  std::vector<std::int32_t> column_indices;  // nnz entries, strictly increasing within a row
  std::vector<T> values;                     // nnz entries, beside their column indices

  std::int64_t nnz() const { return static_cast<std::int64_t>(values.size()); }
};

inline constexpr std::int64_t kMaxCsrIndex = std::numeric_limits<std::int32_t>::max();

// Counts and sizes that int32 indices can hold; called before anything is allocated for them.
inline void require_csr_indexable(std::int64_t cols, std::int64_t nnz, const char* function) {
  if (cols > kMaxCsrIndex)
    fail(function, "cols", cols, "at most INT32_MAX = " + std::to_string(kMaxCsrIndex) + " columns (int32 indices)");
  if (nnz > kMaxCsrIndex)
    fail(function, "nnz", nnz,
         "at most INT32_MAX = " + std::to_string(kMaxCsrIndex) + " kept elements (int32 offsets)");
}

// Nonzero test that treats -0.0 as zero: floats compare, 16-bit floats test their magnitude bits.
template <class T>
bool is_nonzero(T v) {
  if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16>::value) {
    return (v.to_bits() & 0x7FFFu) != 0;
  } else {
    return v != T{};
  }
}

namespace detail {

template <class T>
constexpr bool is_float_like() {
  return std::is_floating_point<T>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;
}

template <class T>
bool is_finite_value(T v) {
  if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16>::value) {
    return v.is_finite();
  } else if constexpr (std::is_floating_point<T>::value) {
    return std::isfinite(v);
  } else {
    return true;
  }
}

// True when no element of a row is NaN or +-inf: the largest magnitude bit pattern stays below the infinity code
// (a max over integers, which compilers vectorise; std::isfinite in a loop they do not).
template <class T>
bool row_is_finite(const T* row, std::int64_t length, std::int64_t stride) {
  if constexpr (std::is_same<T, float>::value) {
    std::uint32_t largest = 0;
    for (std::int64_t c = 0; c < length; ++c) {
      std::uint32_t bits;
      std::memcpy(&bits, row + c * stride, sizeof bits);
      largest = std::max(largest, bits & 0x7FFFFFFFu);
    }
    return largest < 0x7F800000u;
  } else if constexpr (std::is_same<T, half>::value || std::is_same<T, bfloat16>::value) {
    const unsigned infinity = std::is_same<T, half>::value ? 0x7C00u : 0x7F80u;
    unsigned largest = 0;
    for (std::int64_t c = 0; c < length; ++c) largest = std::max(largest, row[c * stride].to_bits() & 0x7FFFu);
    return largest < infinity;
  } else if constexpr (std::is_floating_point<T>::value) {
    bool finite = true;
    for (std::int64_t c = 0; c < length; ++c) finite &= std::isfinite(row[c * stride]);
    return finite;
  } else {
    return true;
  }
}

template <class T>
[[noreturn]] void fail_nonfinite(const TensorView<const T>& dense, std::int64_t row, std::int64_t col,
                                 const char* function) {
  const std::string argument = "dense[" + std::to_string(row * dense.size(1) + col) + "]";
  fail(function, argument.c_str(), static_cast<double>(static_cast<float>(dense(row, col))),
       "finite values (the index is row-major)");
}

template <class T>
void require_csr_source(const TensorView<const T>& dense, const char* function) {
  require_host_view(dense, function, "dense");
  if (dense.rank() != 2) fail(function, "dense.shape", to_string(dense.shape()), "a 2-D tensor [rows, cols]");
  require_csr_indexable(dense.size(1), 0, function);
}

// Slack past the last kept element that the fill may write into (the AVX2 left-pack stores 8 lanes at a time).
inline constexpr std::size_t kCsrFillSlack = 8;

// Builds the CSR from a per-element keep test, in blocks of rows: a counting pass (which also checks the values)
// brings the block into cache, then a filling pass reads it again from there. The arrays are reserved for the
// count extrapolated from the rows seen so far, so a uniformly sparse tensor allocates them about once.
// mask_words, when not null, is the mask that `keep` reads (the AVX2 path reads it 8 bits at a time).
template <class T, class Keep>
Csr<T> build_csr(const TensorView<const T>& dense, Keep&& keep, const std::uint64_t* mask_words, const char* function) {
  Csr<T> csr;
  csr.rows = dense.size(0);
  csr.cols = dense.size(1);
  csr.row_offsets.assign(static_cast<std::size_t>(csr.rows + 1), 0);
  const std::int64_t cols = csr.cols;
  const std::int64_t col_stride = dense.stride(1);
  const std::int64_t row_bytes = std::max<std::int64_t>(1, cols * static_cast<std::int64_t>(sizeof(T)));
  const std::int64_t block_rows = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / row_bytes);  // ~256 KB
  const bool vector_rows = cpu::csr_vector_rows<T>(col_stride);
  const std::int64_t vector_cols = vector_rows ? cols / 8 * 8 : 0;  // the rest of each row goes through `keep`
  std::int64_t nnz = 0;
  for (std::int64_t r0 = 0; r0 < csr.rows; r0 += block_rows) {
    const std::int64_t r1 = std::min(csr.rows, r0 + block_rows);
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* row = dense.data() + r * dense.stride(0);
      bool finite = true;
      std::int64_t count = cpu::count_row_vector(vector_rows, row, cols, mask_words, r * cols, finite);
      if (col_stride == 1) {
        for (std::int64_t c = vector_cols; c < cols; ++c)
          count += static_cast<std::int64_t>(keep(row[c], r * cols + c));
      } else {
        for (std::int64_t c = 0; c < cols; ++c)
          count += static_cast<std::int64_t>(keep(row[c * col_stride], r * cols + c));
      }
      finite = finite && row_is_finite(row + vector_cols * col_stride, cols - vector_cols, col_stride);
      if (!finite)
        for (std::int64_t c = 0; c < cols; ++c)
          if (!is_finite_value(row[c * col_stride])) fail_nonfinite(dense, r, c, function);
      nnz += count;
      require_csr_indexable(cols, nnz, function);
      csr.row_offsets[static_cast<std::size_t>(r + 1)] = static_cast<std::int32_t>(nnz);
    }
    const auto before = static_cast<std::size_t>(csr.row_offsets[static_cast<std::size_t>(r0)]);
    const auto after = static_cast<std::size_t>(nnz);
    if (after + kCsrFillSlack > csr.values.capacity()) {
      const double projected = static_cast<double>(nnz) * static_cast<double>(csr.rows) / static_cast<double>(r1);
      const std::size_t grown = std::max(after + kCsrFillSlack, static_cast<std::size_t>(projected * 1.0625) + 64);
      csr.values.reserve(std::max(grown, csr.values.capacity() + csr.values.capacity() / 2));
      csr.column_indices.reserve(csr.values.capacity());
      cpu::advise_huge_pages(csr.values);
      cpu::advise_huge_pages(csr.column_indices);
    }
    csr.values.resize(after + kCsrFillSlack);
    csr.column_indices.resize(after + kCsrFillSlack);
    T* SHRINK_RESTRICT values = csr.values.data() + before;
    std::int32_t* SHRINK_RESTRICT indices = csr.column_indices.data() + before;
    std::size_t k = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* row = dense.data() + r * dense.stride(0);
      k += cpu::fill_row_vector(vector_rows, row, cols, mask_words, r * cols, values + k, indices + k);
      for (std::int64_t c = vector_cols; c < cols; ++c) {
        const T v = row[c * col_stride];
        values[k] = v;  // branch-free append: always write, advance only past kept elements
        indices[k] = static_cast<std::int32_t>(c);
        k += static_cast<std::size_t>(keep(v, r * cols + c));
      }
    }
  }
  csr.values.resize(static_cast<std::size_t>(nnz));
  csr.column_indices.resize(static_cast<std::size_t>(nnz));
  return csr;
}

}  // namespace detail

// CSR of the elements of a 2-D tensor (any strides) that are not zero; see the file comment for -0.0 and NaN.
template <class T>
Csr<std::remove_const_t<T>> to_csr(const TensorView<T>& dense) {
  using Value = std::remove_const_t<T>;
  const char* fn = "shrink::sparse::to_csr";
  const TensorView<const Value> view = dense;
  detail::require_csr_source(view, fn);
  return detail::build_csr(
      view, [](Value v, std::int64_t) { return is_nonzero(v); }, nullptr, fn);
}

// CSR of exactly the elements the mask keeps, explicit zeros included; the mask's shape must equal dense's.
template <class T>
Csr<std::remove_const_t<T>> to_csr(const TensorView<T>& dense, const prune::Mask& mask) {
  using Value = std::remove_const_t<T>;
  const char* fn = "shrink::sparse::to_csr";
  const TensorView<const Value> view = dense;
  detail::require_csr_source(view, fn);
  if (mask.shape() != view.shape())
    fail(fn, "mask.shape", to_string(mask.shape()), "the shape of dense, " + to_string(view.shape()));
  const std::uint64_t* words = mask.words().data();
  return detail::build_csr(
      view, [words](Value, std::int64_t flat) { return ((words[flat >> 6] >> (flat & 63)) & 1u) != 0; }, words, fn);
}

// Checks a Csr that may come from a file: sizes, offsets (start at 0, non-decreasing, end at nnz) and column
// indices (in [0, cols), strictly increasing within a row). The message names the first bad field.
template <class T>
void validate_csr(const Csr<T>& csr, const char* function = "shrink::sparse::validate_csr") {
  if (csr.rows < 0) fail(function, "csr.rows", csr.rows, "a count >= 0");
  if (csr.cols < 0) fail(function, "csr.cols", csr.cols, "a count >= 0");
  require_csr_indexable(csr.cols, csr.nnz(), function);
  if (static_cast<std::int64_t>(csr.row_offsets.size()) != csr.rows + 1)
    fail(function, "csr.row_offsets.size()", csr.row_offsets.size(), "rows + 1 = " + std::to_string(csr.rows + 1));
  if (csr.column_indices.size() != csr.values.size())
    fail(function, "csr.column_indices.size()", csr.column_indices.size(),
         "as many column indices as values (" + std::to_string(csr.values.size()) + ")");
  if (csr.row_offsets.front() != 0) fail(function, "csr.row_offsets[0]", csr.row_offsets.front(), "0");
  if (csr.row_offsets.back() != csr.nnz())
    fail(function, "csr.row_offsets[rows]", csr.row_offsets.back(), "nnz = " + std::to_string(csr.nnz()));
  for (std::int64_t r = 0; r < csr.rows; ++r) {
    const std::int32_t begin = csr.row_offsets[static_cast<std::size_t>(r)];
    const std::int32_t end = csr.row_offsets[static_cast<std::size_t>(r + 1)];
    if (end < begin || end > csr.nnz())
      fail(function, ("csr.row_offsets[" + std::to_string(r + 1) + "]").c_str(), end,
           "a non-decreasing offset in [" + std::to_string(begin) + ", " + std::to_string(csr.nnz()) + "]");
    for (std::int32_t k = begin; k < end; ++k) {
      const std::int32_t c = csr.column_indices[static_cast<std::size_t>(k)];
      const std::int32_t lowest = k == begin ? 0 : csr.column_indices[static_cast<std::size_t>(k - 1)] + 1;
      if (c < lowest || c >= csr.cols)
        fail(function, ("csr.column_indices[" + std::to_string(k) + "]").c_str(), c,
             "a column in [" + std::to_string(lowest) + ", " + std::to_string(csr.cols) + ") for row " +
                 std::to_string(r) + " (in range, strictly increasing)");
    }
  }
}

// Writes the dense [rows, cols] tensor into `out` (any strides): zeros, then the stored values. The Csr and out's
// shape are checked first; nothing is written on error.
template <class T>
void to_dense_into(const Csr<T>& csr, const TensorView<T>& out) {
  const char* fn = "shrink::sparse::to_dense_into";
  validate_csr(csr, fn);
  require_host_view(out, fn, "out");
  if (out.shape() != Shape{csr.rows, csr.cols})
    fail(fn, "out.shape", to_string(out.shape()), "the Csr's shape " + to_string(Shape{csr.rows, csr.cols}));
  for (std::int64_t r = 0; r < csr.rows; ++r) {
    T* row = out.data() + r * out.stride(0);
    for (std::int64_t c = 0; c < csr.cols; ++c) row[c * out.stride(1)] = T{};
    for (std::int32_t k = csr.row_offsets[static_cast<std::size_t>(r)];
         k < csr.row_offsets[static_cast<std::size_t>(r + 1)]; ++k)
      row[csr.column_indices[static_cast<std::size_t>(k)] * out.stride(1)] = csr.values[static_cast<std::size_t>(k)];
  }
}

// The dense tensor, row-major [rows, cols], after the same checks.
template <class T>
std::vector<T> to_dense(const Csr<T>& csr) {
  validate_csr(csr, "shrink::sparse::to_dense");
  std::vector<T> dense(static_cast<std::size_t>(csr.rows * csr.cols), T{});
  to_dense_into(csr, TensorView<T>(dense.data(), Shape{csr.rows, csr.cols}));
  return dense;
}

}  // namespace shrink::sparse
