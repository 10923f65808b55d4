// What the feature losses (feature_mse, cosine_embedding, attention_transfer) share: their options, [..., D]
// views seen as rows of D, the optional per-row views (row mask, target), element loads and the gradient write.
//
// Layout rule (as for logits): the last dimension is contiguous (stride 1) and the leading dimensions collapse into
// one row stride, so row r starts at r * row_stride; rows are numbered row-major over the leading dimensions.
// Element types: float, shrink::half, shrink::bfloat16; values are read as float, products and sums taken in
// double (a product of two floats is exact there), and each gradient is rounded once to the element type.
// Gradient views must not overlap each other or the inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {

// Named apart from other distill headers' detail helpers, which may be included beside these.
namespace feature_detail {

template <class T>
inline constexpr bool is_element_type =
    std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value;

template <class T>
inline float load(T value) {
  if constexpr (std::is_same<T, float>::value) {
    return value;
  } else {
    return value.to_float();
  }
}

// An optional view is absent when it holds no memory: TensorView{} (or a null view of no elements).
template <class T>
bool absent(const TensorView<T>& view) {
  return view.data() == nullptr && (view.rank() == 0 || view.numel() == 0);
}

// out = g (or out + g when accumulating), rounded once from double to float, then to T.
template <class T>
inline void write_gradient(T& out, double g, bool accumulate) {
  const double value = accumulate ? static_cast<double>(load(out)) + g : g;
  if constexpr (std::is_same<T, float>::value) {
    out = static_cast<float>(value);
  } else {
    out = T(static_cast<float>(value));
  }
}

// An absent row's gradient: overwritten with 0, or left alone when accumulating. grad may be null (not wanted).
template <class T>
void clear_row(T* grad, std::int64_t length, bool accumulate) {
  if (grad == nullptr || accumulate) return;
  for (std::int64_t j = 0; j < length; ++j) write_gradient(grad[j], 0.0, false);
}

// A [..., D] view as rows of D.
struct Rows {
  std::int64_t count = 0;   // rows: the product of the leading dims (1 for a 1-D view)
  std::int64_t length = 0;  // D, the last dim
  std::int64_t stride = 0;  // elements from the start of one row to the next
};

inline std::string field(const char* argument, const char* what) { return std::string(argument) + "." + what; }

// Rows of a host view of rank >= 1; fails unless the last dim is contiguous and the leading dims collapse.
template <class T>
Rows feature_rows(const TensorView<T>& v, const char* function, const char* argument) {
  Rows rows;
  const int last = v.rank() - 1;
  rows.length = v.size(last);
  rows.count = 1;
  for (int d = 0; d < last; ++d) rows.count *= v.size(d);
  if (rows.length > 1 && v.stride(last) != 1)
    fail(function, field(argument, "strides").c_str(), to_string(v.strides()),
         "a contiguous last dimension (stride 1)");
  rows.stride = rows.length;
  std::int64_t next = -1;  // the stride the next outer dim of size > 1 must have
  for (int d = last - 1; d >= 0; --d) {
    if (v.size(d) == 1) continue;
    if (next < 0) {
      rows.stride = v.stride(d);
    } else if (v.stride(d) != next) {
      fail(function, field(argument, "strides").c_str(), to_string(v.strides()),
           "leading dimensions that collapse into one row stride (stride[d] = stride[d + 1] * size[d + 1])");
    }
    next = v.stride(d) * v.size(d);
  }
  return rows;
}

// Throws "<function>: <argument>[i] = <value>: expected finite values" for the first NaN or +-inf (row-major i).
template <class T>
void require_finite_elements(const TensorView<const T>& v, const char* function, const char* argument) {
  if constexpr (std::is_same<T, float>::value) {
    cpu::require_finite(v, function, argument);
  } else {
    const std::int64_t length = cpu::row_length(v.shape());
    const std::int64_t stride = cpu::row_stride(v.strides());
    cpu::for_each_row(v.shape(), v.strides(), [&](std::int64_t row, std::int64_t offset) {
      for (std::int64_t i = 0; i < length; ++i) {
        const T x = v.data()[offset + i * stride];
        if (!x.is_finite())
          fail(function, (std::string(argument) + "[" + std::to_string(row * length + i) + "]").c_str(), load(x),
               "finite values (the index is row-major)");
      }
    });
  }
}

// A gradient view, when given: on the host, of the shape of its input, laid out as rows.
template <class T>
void check_gradient_view(const TensorView<T>& grad, const Shape& input_shape, const char* function,
                         const char* argument, const char* input) {
  require_host_view(grad, function, argument);
  if (grad.shape() != input_shape)
    fail(function, field(argument, "shape").c_str(), to_string(grad.shape()),
         std::string("the shape of ") + input + ", " + to_string(input_shape) + " (or TensorView{} for none)");
}

// An optional per-row view (row mask, target), when given: on the host, contiguous, of shape `leading` (the
// input's leading dims) or [rows].
template <class U>
void check_per_row_view(const TensorView<const U>& v, const Shape& leading, std::int64_t rows, const char* function,
                        const char* argument) {
  require_host_view(v, function, argument);
  const Shape flat{rows};
  if (v.shape() != leading && v.shape() != flat)
    fail(function, field(argument, "shape").c_str(), to_string(v.shape()),
         "one value per row: " + (leading == flat ? "" : to_string(leading) + " or ") + to_string(flat));
  require_contiguous(v, function, argument);
}

inline void check_options(const FeatureLossOptions& options, const char* function) {
  const auto r = options.reduction;
  if (r != Reduction::none && r != Reduction::sum && r != Reduction::mean && r != Reduction::batchmean)
    fail(function, "options.reduction", static_cast<int>(r), "none, sum, mean or batchmean");
  if (!std::isfinite(options.grad_scale))
    fail(function, "options.grad_scale", options.grad_scale, "a finite upstream gradient");
}

// Which rows count: all of them without a mask.
struct RowMask {
  const std::uint8_t* bytes = nullptr;
  bool kept(std::int64_t row) const { return bytes == nullptr || bytes[row] != 0; }
  std::int64_t kept_count(std::int64_t rows) const {
    std::int64_t n = 0;
    for (std::int64_t r = 0; r < rows; ++r) n += kept(r) ? 1 : 0;
    return n;
  }
};

// Student and teacher [..., D] of one shape, the gradients wanted and the options, checked together.
struct FeaturePair {
  Rows student, teacher;
  Rows grad_student, grad_teacher;  // count 0 when not wanted
  RowMask mask;
};

// Every check of the [..., D] feature losses but the loss's own (target, margin); grad_* may be null.
template <class T>
FeaturePair check_feature_pair(const TensorView<const T>& student, const TensorView<const T>& teacher,
                               const TensorView<T>* grad_student, const TensorView<T>* grad_teacher,
                               const FeatureLossOptions& options, const char* function) {
  static_assert(is_element_type<T>, "feature losses take float, shrink::half or shrink::bfloat16 elements");
  require_host_view(student, function, "student");
  require_host_view(teacher, function, "teacher");
  if (student.rank() < 1)
    fail(function, "student.shape", to_string(student.shape()), "rank >= 1, features last: [..., D]");
  if (teacher.shape() != student.shape())
    fail(function, "teacher.shape", to_string(teacher.shape()), "the shape of student, " + to_string(student.shape()));
  FeaturePair pair;
  pair.student = feature_rows(student, function, "student");
  pair.teacher = feature_rows(teacher, function, "teacher");
  if (pair.student.count == 0 || pair.student.length == 0)
    fail(function, "student.shape", to_string(student.shape()), "at least one row of at least one feature");

  Shape leading = student.shape();
  leading.rank -= 1;
  if (grad_student != nullptr) {
    check_gradient_view(*grad_student, student.shape(), function, "grad_student", "student");
    pair.grad_student = feature_rows(*grad_student, function, "grad_student");
  }
  if (grad_teacher != nullptr) {
    check_gradient_view(*grad_teacher, teacher.shape(), function, "grad_teacher", "teacher");
    pair.grad_teacher = feature_rows(*grad_teacher, function, "grad_teacher");
  }
  if (!absent(options.row_mask)) {
    check_per_row_view(options.row_mask, leading, pair.student.count, function, "options.row_mask");
    pair.mask.bytes = options.row_mask.data();
  }
  check_options(options, function);
  require_finite_elements(student, function, "student");
  require_finite_elements(teacher, function, "teacher");
  return pair;
}

// Calls body(r, s, t, gs, gt) for every kept row r of a checked pair, with pointers to its student and teacher
// values and its gradient rows (null when not wanted); a masked-out row's gradients are cleared (or, accumulating,
// left alone) instead. Rows in chunks on the current executor (core/executor.hpp), each row's work its own.
template <class T, class Body>
void for_each_feature_row(const FeaturePair& pair, const TensorView<const T>& student,
                          const TensorView<const T>& teacher, const TensorView<T>* grad_student,
                          const TensorView<T>* grad_teacher, bool accumulate, Body&& body) {
  const std::int64_t rows = pair.student.count, d = pair.student.length;
  parallel_for(rows, chunk_size(rows, 8.0 * static_cast<double>(d)), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* s = student.data() + r * pair.student.stride;
      const T* t = teacher.data() + r * pair.teacher.stride;
      T* gs = grad_student ? grad_student->data() + r * pair.grad_student.stride : nullptr;
      T* gt = grad_teacher ? grad_teacher->data() + r * pair.grad_teacher.stride : nullptr;
      if (!pair.mask.kept(r)) {
        clear_row(gs, d, accumulate);
        clear_row(gt, d, accumulate);
        continue;
      }
      body(r, s, t, gs, gt);
    }
  });
}

// The gradient views a *_with_grad call was given, as pointers (null = not wanted).
template <class T>
const TensorView<T>* wanted(const TensorView<T>& grad) {
  return absent(grad) ? nullptr : &grad;
}

}  // namespace feature_detail
}  // namespace shrink::distill
