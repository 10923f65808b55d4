// Sparse linear layers on the CPU with the weight in CSR (sparse/csr.hpp): Y[M, N] = X[M, K] · W[N, K]ᵀ for a pruned
// W, touching only its stored values; out = act(Y + bias) (core/epilogue.hpp).
//
// Kernels, chosen at run time: cpu/csr_dots.hpp with AVX-512 / AVX2 (sparse dot products for M ≤ 8, k-major chunks
// of Xᵀ above); at the scalar / SSE2 levels, Eigen's sparse × dense product over the CSR arrays, mapped without a
// copy. Their tuning and figures: benchmarks/notes/cpu_linear.md.
// The kernels compute into private storage and check the column indices as they go (in range, strictly
// increasing within a row); out is written only once the whole product has passed, and a bad index becomes the
// error sparse::validate_csr gives. NaN and inf in x or W propagate as IEEE arithmetic does, except that a NaN in
// x meets only the stored weights (a pruned weight is absent, not a multiplication by zero).
//
// Half and bfloat16: x, the stored values and out in the 16-bit type, bias float. The elements are widened to float
// (exactly), the float product above runs on the copies, and each output is act(acc + bias) rounded to nearest even
// once, at the end: the CPU twin of linear/csr_cuda.hpp, written for clarity (the copies cost O(M·K + nnz)), not tuned.
#pragma once

#include <Eigen/Core>
#include <Eigen/SparseCore>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/csr_dots.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/simd.hpp"
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

// Calls part(rows r0 .. r1 − 1 of w as a CsrRows, r0) over ranges of about equal stored values, through parallel_for;
// `columns` rows of X (or Xᵀ columns) meet each stored value. The cut never changes a row's sum.
template <class Part>
void for_each_row_part(const cpu::CsrRows& w, double columns, Part&& part) {
  const double per_row = 2.0 * columns * static_cast<double>(std::max<std::int32_t>(1, w.row_offsets[w.rows])) /
                         static_cast<double>(w.rows);
  const std::int64_t part_rows = chunk_size(w.rows, per_row);
  parallel_for(w.rows, part_rows, [&](std::int64_t r0, std::int64_t r1) {
    part(cpu::CsrRows{r1 - r0, w.cols, w.row_offsets + r0, w.column_indices, w.values}, r0);
  });
}

// cpu::linear_csr once checked, into an output whose rows are contiguous (linear_csr stages any other): float, or the
// 16-bit type of the 16-bit forms (each output rounded once, from the float epilogue value).
template <class Out>
void linear_csr_rows(TensorView<const float> x, const sparse::Csr<float>& w, TensorView<Out> out,
                     const Epilogue& epilogue) {
  const char* fn = "shrink::cpu::linear_csr";
  const std::int64_t m_total = x.size(0), n_total = w.rows, k_total = w.cols;
  const EpilogueOp op = make_epilogue_op(epilogue, m_total, n_total);
  const cpu::CsrRows rows_of_w{w.rows, w.cols, w.row_offsets.data(), w.column_indices.data(), w.values.data()};

  if (m_total <= cpu::kCsrDotRows) {
    std::vector<float> x_rows;
    std::int64_t ldx = 0;
    const float* xs = linear::detail::contiguous_rows(x, x_rows, ldx);
    std::vector<float> yt(static_cast<std::size_t>(n_total * m_total));
    std::atomic<bool> all_ok{true};
    linear::detail::for_each_row_part(rows_of_w, static_cast<double>(m_total),
                                      [&](const cpu::CsrRows& part, std::int64_t r0) {
                                        float* part_yt = yt.data() + r0 * m_total;
                                        bool ok = false;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
                                        if (cpu::use_avx512())
                                          ok = cpu::csr_dots_avx512_rows(m_total, part, xs, ldx, part_yt,
                                                                         std::make_index_sequence<cpu::kCsrDotRows>{});
                                        else
#endif
                                          ok = cpu::csr_dots(part, xs, ldx, m_total, part_yt);
                                        if (!ok) all_ok.store(false);
                                      });
    if (!all_ok.load()) sparse::validate_csr(w, fn);
    cpu::finish_transposed(op, yt.data(), m_total, m_total, n_total, 0, out);
    return;
  }

  // Xᵀ chunks [K, width]: the rows m0 .. m0 + width − 1 of X side by side, zero past M.
  int lanes = 0;
  std::int64_t max_width = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (cpu::use_avx512()) {
    lanes = 16;
    max_width = 128;
  } else if (cpu::use_avx2_fma()) {
    lanes = 8;
    max_width = 64;
  }
#endif
  if (lanes == 0) {  // Eigen: Yᵀ = W · Xᵀ with W's arrays mapped as a row-major sparse matrix
    sparse::validate_csr(w, fn);
    using SparseMap = Eigen::Map<const Eigen::SparseMatrix<float, Eigen::RowMajor, std::int32_t>>;
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    RowMajor xt(k_total, m_total);
    for (std::int64_t m = 0; m < m_total; ++m)
      for (std::int64_t k = 0; k < k_total; ++k) xt(k, m) = x(m, k);
    RowMajor yt(n_total, m_total);
    // Ranges of W's rows (maps of part of the arrays: the offsets stay absolute), each row's sum as for all of W.
    linear::detail::for_each_row_part(
        rows_of_w, static_cast<double>(m_total), [&](const cpu::CsrRows& part, std::int64_t r0) {
          const SparseMap part_w(part.rows, k_total, part.row_offsets[part.rows] - part.row_offsets[0],
                                 part.row_offsets, w.column_indices.data(), w.values.data());
          yt.middleRows(r0, part.rows).noalias() = part_w * xt;
        });
    cpu::finish_transposed(op, yt.data(), m_total, m_total, n_total, 0, out);
    return;
  }
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  // Xᵀ chunks small enough to stay in L2 while the weight rows pick their rows at random (at least one register).
  max_width = std::min(max_width, std::max<std::int64_t>(lanes, cpu::kCsrChunkBytes / (k_total * 4) / lanes * lanes));
  const std::int64_t chunks = (m_total + max_width - 1) / max_width;
  const std::int64_t rows_per_chunk = (m_total + chunks - 1) / chunks;
  const std::int64_t width = (rows_per_chunk + lanes - 1) / lanes * lanes;
  const int registers = static_cast<int>(width / lanes);
  cpu::AlignedVector<float> xt(static_cast<std::size_t>(k_total * width * chunks));
  cpu::AlignedVector<float> yt(
      static_cast<std::size_t>(n_total * width * chunks));  // every chunk kept until all passed
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const std::int64_t m0 = c * rows_per_chunk, rows = std::min(rows_per_chunk, m_total - m0);
      float* chunk_xt = xt.data() + c * k_total * width;
      std::fill(chunk_xt, chunk_xt + k_total * width, 0.0f);
      for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t k = 0; k < k_total; ++k) chunk_xt[k * width + i] = x(m0 + i, k);
    }
  });
  // Parts: a chunk of Xᵀ against a range of weight rows.
  std::atomic<bool> all_ok{true};
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c)
      linear::detail::for_each_row_part(
          rows_of_w, static_cast<double>(width), [&](const cpu::CsrRows& part, std::int64_t r0) {
            const float* chunk_xt = xt.data() + c * k_total * width;
            float* part_yt = yt.data() + c * n_total * width + r0 * width;
            const bool ok =
                lanes == 16
                    ? cpu::csr_rows_dispatch<16>(registers, part, chunk_xt, part_yt, std::make_index_sequence<8>{})
                    : cpu::csr_rows_dispatch<8>(registers, part, chunk_xt, part_yt, std::make_index_sequence<8>{});
            if (!ok) all_ok.store(false);
          });
  });
  if (!all_ok.load()) sparse::validate_csr(w, fn);
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t m0 = c * rows_per_chunk, rows = std::min(rows_per_chunk, m_total - m0);
    cpu::finish_transposed(op, yt.data() + c * n_total * width, width, rows, n_total, m0, out);
  }
#endif
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
