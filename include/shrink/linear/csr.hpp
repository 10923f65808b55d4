// Sparse linear layers on the CPU with the weight in CSR (sparse/csr.hpp): Y[M, N] = X[M, K] · W[N, K]ᵀ for a pruned
// W, touching only its stored values; out = act(Y + bias) (core/epilogue.hpp).
//
// The kernels and their choice by SIMD level and shape live in cpu/csr_product.hpp (sparse dot products for few
// rows, stored values times rows of Xᵀ for more, Eigen's sparse product at the scalar levels).
// The kernels compute into private storage and check the column indices as they go (in range, strictly
// increasing within a row); out is written only once the whole product has passed, and a bad index becomes the
// error sparse::validate_csr gives. NaN and inf in x or W propagate as IEEE arithmetic does, except that a NaN in
// x meets only the stored weights (a pruned weight is absent, not a multiplication by zero).
//
// Half and bfloat16: x, the stored values and out in the 16-bit type, bias float. The elements are widened to float
// (exactly), the float product above runs on the copies, and each output is act(acc + bias) rounded to nearest even
// once, at the end: the CPU twin of linear/csr_cuda.hpp, written for clarity (the copies cost O(M·K + nnz)), not tuned.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/csr_product.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/sparse/csr.hpp"

namespace shrink::linear::detail {

// The structure a product relies on to stay inside its arrays: sizes and row offsets (O(N)); the column
// indices are checked by the kernels as they read them.
template <class T>
Support check_csr_structure(const sparse::Csr<T>& w) {
  if (w.rows <= 0 || w.cols <= 0)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}), "a weight [N, K] with N, K ≥ 1");
  if (w.cols > sparse::kMaxCsrIndex || w.nnz() > sparse::kMaxCsrIndex)
    return Support::no("w.nnz()", std::to_string(w.nnz()), "int32 indices (at most INT32_MAX columns and values)");
  if (static_cast<std::int64_t>(w.row_offsets.size()) != w.rows + 1)
    return Support::no("w.row_offsets.size()", std::to_string(w.row_offsets.size()),
                       "rows + 1 = " + std::to_string(w.rows + 1));
  if (w.column_indices.size() != w.values.size())
    return Support::no("w.column_indices.size()", std::to_string(w.column_indices.size()),
                       "as many column indices as values (" + std::to_string(w.values.size()) + ")");
  if (w.row_offsets.front() != 0) return Support::no("w.row_offsets[0]", std::to_string(w.row_offsets.front()), "0");
  for (std::int64_t r = 0; r < w.rows; ++r) {
    const std::int32_t begin = w.row_offsets[static_cast<std::size_t>(r)],
                       end = w.row_offsets[static_cast<std::size_t>(r + 1)];
    if (end < begin || end > w.nnz())
      return Support::no("w.row_offsets[" + std::to_string(r + 1) + "]", std::to_string(end),
                         "a non-decreasing offset in [" + std::to_string(begin) + ", " + std::to_string(w.nnz()) + "]");
  }
  if (w.row_offsets.back() != w.nnz())
    return Support::no("w.row_offsets[rows]", std::to_string(w.row_offsets.back()), "nnz = " + std::to_string(w.nnz()));
  return Support::yes();
}

// cpu::linear_csr once checked, into an output whose rows are contiguous (linear_csr stages any other): float, or the
// 16-bit type of the 16-bit forms (each output rounded once, from the float epilogue value).
template <class Out>
void linear_csr_rows(TensorView<const float> x, const sparse::Csr<float>& w, TensorView<Out> out,
                     const Epilogue& epilogue) {
  const EpilogueOp op = make_epilogue_op(epilogue, x.size(0), w.rows);
  std::vector<float> x_rows;
  std::int64_t ldx = 0;
  const float* xs = linear::detail::contiguous_rows(x, x_rows, ldx);
  const cpu::CsrRows rows{w.rows, w.cols, w.row_offsets.data(), w.column_indices.data(), w.values.data()};
  auto indices_valid = [&] {
    sparse::validate_csr(w, "shrink::cpu::linear_csr");  // throws, naming the first bad index
    return true;
  };
  if (!cpu::csr_product(xs, ldx, x.size(0), rows, out, op, indices_valid)) indices_valid();
}

// out must not share memory with an input of `bytes` bytes at `data` (out of any element type).
template <class T>
Support check_apart(const TensorView<T>& out, const void* data, std::size_t bytes, const std::string& input) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  if (bytes > 0 && spans_overlap(byte_span(out), {begin, begin + bytes}))
    return Support::no("out", "memory overlapping " + input, "a separate output");
  return Support::yes();
}

// can_implement of the 16-bit forms: the float form's checks, with x and out of the 16-bit type T.
template <class T>
Support check_linear_csr_16(const TensorView<const T>& x, const sparse::Csr<T>& w, const TensorView<T>& out,
                            const Epilogue& epilogue) {
  Support s = check_csr_structure(w);
  if (!s) return s;
  s = check_matrix(x, "x");
  if (!s) return s;
  if (x.size(1) != w.cols)
    return Support::no("x.shape", to_string(x.shape()),
                       "[M, " + std::to_string(w.cols) + "]: K equal to the weight's input size");
  s = check_output(out, x.size(0), w.rows);
  if (!s) return s;
  s = check_epilogue(epilogue, epilogue_rules<T>(x.size(0), w.rows, Device::host()), out);
  if (!s) return s;
  if (views_overlap(x, out)) return Support::no("out", "memory overlapping x", "a separate output");
  s = check_apart(out, w.values.data(), w.values.size() * sizeof(T), "w.values");
  if (!s) return s;
  s = check_apart(out, w.column_indices.data(), w.column_indices.size() * 4, "w.column_indices");
  if (!s) return s;
  return check_apart(out, w.row_offsets.data(), w.row_offsets.size() * 4, "w.row_offsets");
}

// The 16-bit product: x and the values widened to float copies, then the float kernels, which check the column indices
// before anything reaches out, writing out = round_to_nearest_even(act(acc + bias)).
template <class T>
void linear_csr_16(const TensorView<const T>& x, const sparse::Csr<T>& w, const TensorView<T>& out,
                   const Epilogue& epilogue) {
  require_supported(check_linear_csr_16(x, w, out, epilogue), "shrink::cpu::linear_csr");
  const std::int64_t m_total = x.size(0), k_total = w.cols;
  std::vector<float> xf(static_cast<std::size_t>(m_total * k_total));
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t k = 0; k < k_total; ++k) xf[static_cast<std::size_t>(m * k_total + k)] = x(m, k).to_float();
  sparse::Csr<float> wf;
  wf.rows = w.rows;
  wf.cols = w.cols;
  wf.row_offsets = w.row_offsets;
  wf.column_indices = w.column_indices;
  wf.values.resize(w.values.size());
  for (std::size_t i = 0; i < w.values.size(); ++i) wf.values[i] = w.values[i].to_float();
  RowOutput<T> staged(out);
  linear_csr_rows(TensorView<const float>(xf.data(), Shape{m_total, k_total}), wf, staged.rows(), epilogue);
  staged.finish();
}

}  // namespace shrink::linear::detail

namespace shrink::cpu {

inline Support can_implement_linear_csr(const TensorView<const float>& x, const sparse::Csr<float>& w,
                                        const TensorView<float>& out, const Epilogue& epilogue = {}) {
  Support s = linear::detail::check_csr_structure(w);
  if (!s) return s;
  s = linear::detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  s = linear::detail::check_no_overlap(out, w.values.data(), w.values.size() * sizeof(float), "w.values");
  if (!s) return s;
  s = linear::detail::check_no_overlap(out, w.column_indices.data(), w.column_indices.size() * 4, "w.column_indices");
  if (!s) return s;
  return linear::detail::check_no_overlap(out, w.row_offsets.data(), w.row_offsets.size() * 4, "w.row_offsets");
}

// out[m, n] = act(Σ_{stored k of row n} x[m, k] · w[n, k] + bias[n]); x [M, K] any strides, w a CSR [N, K].
inline void linear_csr(TensorView<const float> x, const sparse::Csr<float>& w, TensorView<float> out,
                       const Epilogue& epilogue = {}) {
  const char* fn = "shrink::cpu::linear_csr";
  require_supported(can_implement_linear_csr(x, w, out, epilogue), fn);
  linear::detail::RowOutput<float> staged(out);
  linear::detail::linear_csr_rows(x, w, staged.rows(), epilogue);
  staged.finish();
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_csr(TensorView<const float> x, const sparse::Csr<float>& w, const float* bias, TensorView<float> out,
                       Activation activation = Activation::none) {
  Epilogue e;
  if (bias != nullptr) e.bias = TensorView<const float>(bias, Shape{w.rows});
  e.activation = activation;
  linear_csr(x, w, out, e);
}

// Half and bfloat16 activations and weights (float accumulation, float bias, 16-bit output rounded to nearest even).
inline Support can_implement_linear_csr(const TensorView<const half>& x, const sparse::Csr<half>& w,
                                        const TensorView<half>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_linear_csr_16(x, w, out, epilogue);
}
inline Support can_implement_linear_csr(const TensorView<const bfloat16>& x, const sparse::Csr<bfloat16>& w,
                                        const TensorView<bfloat16>& out, const Epilogue& epilogue = {}) {
  return linear::detail::check_linear_csr_16(x, w, out, epilogue);
}

// out[m, n] = half(act(Σ_{stored k of row n} float(x[m, k]) · float(w[n, k]) + bias[n])), rounded to nearest even.
inline void linear_csr(TensorView<const half> x, const sparse::Csr<half>& w, TensorView<half> out,
                       const Epilogue& epilogue = {}) {
  linear::detail::linear_csr_16(x, w, out, epilogue);
}
inline void linear_csr(TensorView<const bfloat16> x, const sparse::Csr<bfloat16>& w, TensorView<bfloat16> out,
                       const Epilogue& epilogue = {}) {
  linear::detail::linear_csr_16(x, w, out, epilogue);
}

}  // namespace shrink::cpu
