// Logits as rows: [..., V] views flattened to rows x V, the optional row mask, and the checks every logit loss
// shares (shapes, element types, labels), each failing with a shrink::Error before anything is written.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"

namespace shrink::distill {

// The element types a loss reads: float, half and bfloat16 (arithmetic in float).
template <class T>
inline constexpr bool is_logit_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, shrink::half> || std::is_same_v<T, shrink::bfloat16>;

// rows x cols elements, row r starting at data + r * row_stride, each row contiguous.
template <class T>
struct Rows {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;

  T* row(std::int64_t r) const { return data + r * row_stride; }
};

// The leading dimensions of a view (all but the last) as one row count and stride, or fails. Reads no element, so
// it serves views of any device (the CUDA losses check theirs with it too).
template <class T>
Rows<T> flatten_rows(const TensorView<T>& v, const char* function, const char* name) {
  if (v.rank() < 1) fail(function, (std::string(name) + ".rank").c_str(), v.rank(), "at least 1 ([..., V])");
  Rows<T> r;
  r.data = v.data();
  r.cols = v.size(v.rank() - 1);
  r.rows = v.numel() / (r.cols > 0 ? r.cols : 1);
  if (v.numel() == 0)
    fail(function, (std::string(name) + ".shape").c_str(), to_string(v.shape()), "a non-empty batch (rows >= 1, V >= 1)");
  if (r.cols > 1 && v.stride(v.rank() - 1) != 1)
    fail(function, (std::string(name) + ".strides").c_str(), to_string(v.strides()), "a contiguous last dimension");
  // The leading dimensions must step by one stride: stride(d) == stride(d + 1) * size(d + 1) over them.
  std::int64_t stride = r.cols;
  bool first = true;
  for (int d = v.rank() - 2; d >= 0; --d) {
    if (v.size(d) == 1) continue;
    if (first) {
      stride = v.stride(d);
      first = false;
    } else if (v.stride(d) != v.stride(d + 1) * v.size(d + 1)) {
      fail(function, (std::string(name) + ".strides").c_str(), to_string(v.strides()),
           "leading dimensions that flatten to rows of one stride");
    }
  }
  if (stride < r.cols && r.rows > 1)
    fail(function, (std::string(name) + ".strides").c_str(), to_string(v.strides()), "rows that do not overlap");
  r.row_stride = stride;
  return r;
}

// flatten_rows of a host view.
template <class T>
Rows<T> as_rows(const TensorView<T>& v, const char* function, const char* name) {
  if (!v.device().is_cpu()) fail(function, (std::string(name) + ".device").c_str(), "cuda", "a host view");
  return flatten_rows(v, function, name);
}

// Rows a task of a loss takes on the executor (core/executor.hpp): about 2^18 operations, some 30 a logit.
inline std::int64_t row_chunk(std::int64_t rows, std::int64_t cols) {
  return chunk_size(rows, 32.0 * static_cast<double>(cols));
}

inline std::string rows_text(std::int64_t rows, std::int64_t cols) {
  return "[" + std::to_string(rows) + " rows, " + std::to_string(cols) + "]";
}

template <class A, class B>
void require_same_rows(const Rows<A>& a, const Rows<B>& b, const char* function, const char* name_b, const char* name_a) {
  if (a.rows != b.rows || a.cols != b.cols)
    fail(function, name_b, rows_text(b.rows, b.cols), std::string("the shape of ") + name_a + " " + rows_text(a.rows, a.cols));
}

// The optional mask: nonzero keeps a row, 0 makes it absent. Empty view: every row kept.
struct RowMask {
  const std::uint8_t* keep = nullptr;

  bool kept(std::int64_t r) const { return keep == nullptr || keep[r] != 0; }
};

inline RowMask row_mask(const TensorView<const std::uint8_t>& mask, std::int64_t rows, const char* function) {
  if (mask.data() == nullptr) return {};  // a default view: no mask
  if (mask.numel() != rows)
    fail(function, "options.row_mask.shape", to_string(mask.shape()), "one entry per row (" + std::to_string(rows) + ")");
  if (!mask.is_contiguous()) fail(function, "options.row_mask.strides", to_string(mask.strides()), "a contiguous mask");
  return RowMask{mask.data()};
}

inline std::int64_t kept_rows(const RowMask& mask, std::int64_t rows) {
  if (mask.keep == nullptr) return rows;
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < rows; ++r) kept += mask.keep[r] != 0;
  return kept;
}

// The gradient view: the student's shape, written row by row. name / of: the arguments an error names.
template <class T>
Rows<T> gradient_rows(const TensorView<T>& grad, const Rows<const T>& student, const char* function,
                      const char* name = "grad_student", const char* of = "student") {
  const Rows<T> g = as_rows(grad, function, name);
  require_same_rows(student, g, function, name, of);
  return g;
}

// Student and teacher (or gradient) views of one shape: [4, V] and [2, 2, V] are not the same batch.
template <class A, class B>
void require_same_shape(const TensorView<A>& a, const TensorView<B>& b, const char* function, const char* name_b,
                        const char* name_a) {
  if (a.shape() != b.shape())
    fail(function, (std::string(name_b) + ".shape").c_str(), to_string(b.shape()),
         std::string("the shape of ") + name_a + " " + to_string(a.shape()));
}

inline void require_temperature(float t, const char* function) {
  if (!(t > 0.0f) || !std::isfinite(t)) fail(function, "options.temperature", t, "a finite temperature > 0");
}

inline void require_unit_interval(double v, const char* function, const char* name) {
  if (!(v >= 0.0 && v <= 1.0)) fail(function, name, v, "a value in [0, 1]");
}

inline void require_grad_scale(double s, const char* function) {
  if (!std::isfinite(s)) fail(function, "options.grad_scale", s, "a finite upstream gradient");
}

}  // namespace shrink::distill
