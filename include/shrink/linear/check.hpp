// The checks every CPU matrix product shares (linear/*.hpp): host operands, the output, overlaps (the epilogue's is
// core/epilogue_check.hpp's, for both backends); each answers with a Support naming the argument at fault, its value
// and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/core/epilogue_check.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"

namespace shrink::linear::detail {

// The common checks of a 2-D host operand; `name` is the argument's name in messages.
template <class T>
Support check_matrix(const TensorView<T>& v, const char* name) {
  if (!v.device().is_cpu()) return Support::no(name, "a CUDA view", "a view of host memory");
  if (v.rank() != 2) return Support::no(std::string(name) + ".shape", to_string(v.shape()), "a 2-D tensor");
  if (v.empty()) return Support::no(std::string(name) + ".shape", to_string(v.shape()), "at least one element");
  if (v.data() == nullptr) return Support::no(name, "a null pointer", "a pointer to the elements");
  if (reinterpret_cast<std::uintptr_t>(v.data()) % alignof(std::remove_const_t<T>) != 0)
    return Support::no(name, "a misaligned pointer",
                       "alignment to " + std::to_string(alignof(std::remove_const_t<T>)) + " bytes");
  return Support::yes();
}

// Activations x (float, or half / bfloat16 for the weight-only layers): a host [M, K] view of any strides.
template <class X>
Support check_activations(const TensorView<const X>& x, std::int64_t k) {
  Support s = check_matrix(x, "x");
  if (!s) return s;
  if (x.size(1) != k)
    return Support::no("x.shape", to_string(x.shape()),
                       "[M, " + std::to_string(k) + "]: K equal to the weight's input size");
  return s;
}

// Whether every element of a 2-D view has its own address: with the dimensions ordered by stride, each stride steps
// past the whole extent of the smaller one (a dimension of size 1 steps nowhere).
template <class T>
bool elements_distinct(const TensorView<T>& v) {
  std::int64_t small_size = v.size(0), small_stride = v.stride(0), big_size = v.size(1), big_stride = v.stride(1);
  if (small_stride > big_stride) {
    std::swap(small_size, big_size);
    std::swap(small_stride, big_stride);
  }
  if (small_size > 1 && small_stride == 0) return false;
  return big_size == 1 || small_size == 1 ? (big_size == 1 || big_stride > 0) : big_stride >= small_size * small_stride;
}

// The output: a host [M, N] view (float, or a CPU twin's half, bfloat16 or int8) of any strides whose elements are
// distinct; row-major rows (stride 1 along N) are written in place, others through RowOutput.
template <class T>
Support check_output(const TensorView<T>& out, std::int64_t m, std::int64_t n) {
  Support s = check_matrix(out, "out");
  if (!s) return s;
  if (out.size(0) != m || out.size(1) != n)
    return Support::no("out.shape", to_string(out.shape()), to_string(Shape{m, n}) + " ([M, N])");
  if (!elements_distinct(out))
    return Support::no("out.strides", to_string(out.strides()), "strides that give every element its own address");
  return s;
}

// The output as the kernels write it, rows of unit stride: out itself when its rows are contiguous (any row stride),
// else a row-major [M, N] buffer that finish() copies into out (a column-major Eigen matrix, a transposed view).
template <class T>
class RowOutput {
 public:
  explicit RowOutput(const TensorView<T>& out) : out_(out), rows_(out) {
    if (out.size(1) == 1 || out.stride(1) == 1) return;
    buffer_.resize(static_cast<std::size_t>(out.size(0) * out.size(1)));
    rows_ = TensorView<T>(buffer_.data(), out.shape());
  }
  TensorView<T>& rows() { return rows_; }
  void finish() {
    if (buffer_.empty()) return;
    const std::int64_t n = out_.size(1);
    for (std::int64_t i = 0; i < out_.size(0); ++i)
      for (std::int64_t j = 0; j < n; ++j) out_(i, j) = buffer_[static_cast<std::size_t>(i * n + j)];
  }

 private:
  TensorView<T> out_;
  TensorView<T> rows_;
  std::vector<std::remove_const_t<T>> buffer_;
};

// The checks every float-activation linear layer shares: x [M, K], out [M, N], the epilogue, x apart from out.
template <class X, class Y>
Support check_linear_operands(const TensorView<const X>& x, std::int64_t k, std::int64_t n, const TensorView<Y>& out,
                              const Epilogue& epilogue) {
  Support s = check_activations(x, k);
  if (!s) return s;
  s = check_output(out, x.size(0), n);
  if (!s) return s;
  s = check_epilogue(epilogue, epilogue_rules<Y>(x.size(0), n, Device::host()), out);
  if (!s) return s;
  if (views_overlap(x, out)) return Support::no("out", "memory overlapping x", "a separate output");
  return s;
}

// out must not share memory with an input of `bytes` bytes at `data`.
template <class T>
Support check_no_overlap(const TensorView<T>& out, const void* data, std::size_t bytes, const char* input_name) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  if (bytes > 0 && spans_overlap(byte_span(out), {begin, begin + bytes}))
    return Support::no("out", std::string("memory overlapping ") + input_name, "a separate output");
  return Support::yes();
}

// Row-contiguous activations: x itself, or a row-major copy kept in `storage`; ldx is the row stride.
inline const float* contiguous_rows(const TensorView<const float>& x, std::vector<float>& storage, std::int64_t& ldx) {
  if (x.stride(1) == 1 || x.size(1) == 1) {
    ldx = x.stride(0);
    return x.data();
  }
  storage = contiguous_copy(x);
  ldx = x.size(1);
  return storage.data();
}

}  // namespace shrink::linear::detail
