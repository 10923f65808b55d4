// N:M sparse linear layers on the CPU (2:4 above all) with the weight in sparse/nm_compressed.hpp's format, read as
// it is (values + positions): Y[M, N] = X[M, K] · W[N, K]ᵀ, out = act(Y + bias) (core/epilogue.hpp).
//
// The kernels and their choice by SIMD level and shape live in cpu/nm_product.hpp (sparse dot products for few rows,
// kept values times rows of Xᵀ or dense panels expanded from W for more).
// Positions are checked (in range, increasing within each group) before anything is written. NaN and inf propagate
// as IEEE arithmetic does, except that a NaN in x meets only the kept weights.
// At the end of the file: half / bfloat16 operands (float accumulation) and int8 operands (exact int32 sums, scaled
// epilogue, float / half / bfloat16 / requantized int8 outputs), the CPU twins of linear/nm_cuda.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/no_contract.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/nm_product.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace shrink::linear::detail {

template <class T>
Support check_nm_structure(const sparse::NmCompressed<T>& w) {
  const prune::NmPattern pattern = w.pattern;
  if (pattern.n < 1 || pattern.m <= pattern.n || pattern.m > prune::kMaxNmGroup)
    return Support::no("w.pattern", prune::to_string(pattern), "1 ≤ n < m ≤ 256");
  if (w.rows <= 0 || w.cols <= 0 || w.cols % pattern.m != 0)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}),
                       "N, K ≥ 1 with K divisible by m = " + std::to_string(pattern.m));
  const std::int64_t count = w.rows * w.kept_per_row();
  if (static_cast<std::int64_t>(w.values.size()) != count)
    return Support::no("w.values.size()", std::to_string(w.values.size()),
                       "rows · cols / m · n = " + std::to_string(count));
  if (static_cast<std::int64_t>(w.positions.size()) != count)
    return Support::no("w.positions.size()", std::to_string(w.positions.size()),
                       "rows · cols / m · n = " + std::to_string(count));
  return Support::yes();
}

// Every group's positions in [0, m) and strictly increasing (O(values); the small-M kernels check as they read).
// A branch-free pass first (vectorised by the compiler for 2:4), then the search for the first bad one.
template <class T>
Support check_nm_positions(const sparse::NmCompressed<T>& w) {
  const int n = w.pattern.n;
  const std::int64_t groups = static_cast<std::int64_t>(w.positions.size()) / n;
  if (n == 2) {
    const std::uint8_t* p = w.positions.data();
    const auto m = static_cast<std::uint8_t>(w.pattern.m);
    unsigned bad = 0;
    for (std::int64_t g = 0; g < groups; ++g)
      bad |= static_cast<unsigned>(p[2 * g] >= p[2 * g + 1]) | static_cast<unsigned>(p[2 * g + 1] >= m);
    if (bad == 0) return Support::yes();
  }
  for (std::int64_t g = 0; g < groups; ++g)
    for (int j = 0; j < n; ++j) {
      const int p = w.positions[static_cast<std::size_t>(g * n + j)];
      const int lowest = j == 0 ? 0 : w.positions[static_cast<std::size_t>(g * n + j - 1)] + 1;
      if (p < lowest || p >= w.pattern.m)
        return Support::no("w.positions[" + std::to_string(g * n + j) + "]", std::to_string(p),
                           "a position in [" + std::to_string(lowest) + ", " + std::to_string(w.pattern.m) +
                               ") (in range, strictly increasing within a group)");
    }
  return Support::yes();
}

template <class T>
struct TypeIdentity {
  using type = T;
};
template <class T>
using NonDeduced = typename TypeIdentity<T>::type;

template <class T>
constexpr bool is_float16_type() {
  return std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
}

// out apart from the compressed weight's arrays.
template <class Out, class T>
Support check_out_apart_from_weight(const TensorView<Out>& out, const sparse::NmCompressed<T>& w) {
  const auto span = byte_span(out);
  const auto values = reinterpret_cast<std::uintptr_t>(w.values.data());
  const auto positions = reinterpret_cast<std::uintptr_t>(w.positions.data());
  if (!w.values.empty() && spans_overlap(span, {values, values + w.values.size() * sizeof(T)}))
    return Support::no("out", "memory overlapping w.values", "a separate output");
  if (!w.positions.empty() && spans_overlap(span, {positions, positions + w.positions.size()}))
    return Support::no("out", "memory overlapping w.positions", "a separate output");
  return Support::yes();
}

// cpu::linear_nm once checked, into an output whose rows are contiguous (linear_nm stages any other).
inline void linear_nm_rows(TensorView<const float> x, const sparse::NmCompressed<float>& w, TensorView<float> out,
                           const Epilogue& epilogue) {
  const EpilogueOp op = make_epilogue_op(epilogue, x.size(0), w.rows);
  std::vector<float> x_rows;
  std::int64_t ldx = 0;
  const float* xs = linear::detail::contiguous_rows(x, x_rows, ldx);
  const cpu::NmRows rows{w.rows,           w.cols,          w.pattern.n,       w.pattern.m,
                         w.kept_per_row(), w.values.data(), w.positions.data()};
  if (!cpu::nm_product(xs, ldx, x.size(0), rows, out, op, [&] { return bool(check_nm_positions(w)); }))
    require_supported(check_nm_positions(w), "shrink::cpu::linear_nm");
}

}  // namespace shrink::linear::detail

namespace shrink::cpu {

inline Support can_implement_linear_nm(const TensorView<const float>& x, const sparse::NmCompressed<float>& w,
                                       const TensorView<float>& out, const Epilogue& epilogue = {}) {
  Support s = linear::detail::check_nm_structure(w);
  if (!s) return s;
  s = linear::detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  s = linear::detail::check_no_overlap(out, w.values.data(), w.values.size() * sizeof(float), "w.values");
  if (!s) return s;
  return linear::detail::check_no_overlap(out, w.positions.data(), w.positions.size(), "w.positions");
}

// out[m, n] = act(Σ_{kept k of row n} x[m, k] · w[n, k] + bias[n]); x [M, K] any strides, w N:M compressed [N, K].
inline void linear_nm(TensorView<const float> x, const sparse::NmCompressed<float>& w, TensorView<float> out,
                      const Epilogue& epilogue = {}) {
  const char* fn = "shrink::cpu::linear_nm";
  require_supported(can_implement_linear_nm(x, w, out, epilogue), fn);
  linear::detail::RowOutput<float> staged(out);
  linear::detail::linear_nm_rows(x, w, staged.rows(), epilogue);
  staged.finish();
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_nm(TensorView<const float> x, const sparse::NmCompressed<float>& w, const float* bias,
                      TensorView<float> out, Activation activation = Activation::none) {
  Epilogue e;
  if (bias != nullptr) e.bias = TensorView<const float>(bias, Shape{w.rows});
  e.activation = activation;
  linear_nm(x, w, out, e);
}

// ---------------------------------------------------------------------------------------------------------------
// The CPU twins of the GPU 2:4 kernels (linear/nm_cuda.hpp), any n:m: the same formulas in the same order.
//
//   16-bit   linear_nm(x, w, out) with half or bfloat16 x and w: both widened to float exactly, the float kernels
//            above (float accumulation), then out rounded to nearest even (out half/bfloat16) or kept (out float).
//   int8     linear_nm_int8: exact int32 sums over the kept products, then
//              out[m, n] = act(float(acc) · (sx[m] · sw[n]) + bias[n])     each operation rounded on its own
//            into float, half or bfloat16 (round to nearest even), or int8:
//              q = clamp(round_half_even(v · (1 / out_scale)), -128, 127)   (a NaN gives -128)
//            sx = epilogue.x_scales: [M] (per token) or [1]; sw = epilogue.w_scales: [N] (per output channel) or [1];
//            symmetric (no zero points).

// Whether linear_nm can run 16-bit operands (T half or bfloat16; Out T or float), and if not, why.
template <class T, class Out, std::enable_if_t<linear::detail::is_float16_type<T>(), int> = 0>
Support can_implement_linear_nm(const TensorView<const linear::detail::NonDeduced<T>>& x,
                                const sparse::NmCompressed<T>& w, const TensorView<Out>& out,
                                const Epilogue& epilogue = {}) {
  if (!std::is_same_v<Out, T> && !std::is_same_v<Out, float>)
    return Support::no("out", std::string("a view of ") + element_type_name<Out>(),
                       std::string("a view of ") + element_type_name<T>() + " or float");
  Support s = linear::detail::check_nm_structure(w);
  if (!s) return s;
  s = linear::detail::check_matrix(x, "x");
  if (!s) return s;
  if (x.size(1) != w.cols)
    return Support::no("x.shape", to_string(x.shape()),
                       "[M, " + std::to_string(w.cols) + "]: K equal to the weight's input size");
  s = linear::detail::check_output(out, x.size(0), w.rows);
  if (!s) return s;
  s = check_epilogue(epilogue, epilogue_rules<Out>(x.size(0), w.rows, Device::host()), out);
  if (!s) return s;
  if (views_overlap(x, out)) return Support::no("out", "memory overlapping x", "a separate output");
  return linear::detail::check_out_apart_from_weight(out, w);
}

// out[m, n] = act(Σ_{kept k of row n} x[m, k] · w[n, k] + bias[n]) for half or bfloat16 x and w, accumulated in
// float; out T (rounded to nearest even) or float. The twin of cuda::linear_nm for 16-bit operands.
template <class T, class Out, std::enable_if_t<linear::detail::is_float16_type<T>(), int> = 0>
void linear_nm(TensorView<const linear::detail::NonDeduced<T>> x, const sparse::NmCompressed<T>& w, TensorView<Out> out,
               const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_nm(x, w, out, epilogue), "shrink::cpu::linear_nm");
  const std::int64_t m_total = x.size(0), k_total = x.size(1), n_total = w.rows;
  std::vector<float> xf(static_cast<std::size_t>(m_total * k_total));  // widening is exact
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t k = 0; k < k_total; ++k)
      xf[static_cast<std::size_t>(m * k_total + k)] = static_cast<float>(x(m, k));
  sparse::NmCompressed<float> wf;
  wf.rows = w.rows;
  wf.cols = w.cols;
  wf.pattern = w.pattern;
  wf.values.resize(w.values.size());
  for (std::size_t i = 0; i < w.values.size(); ++i) wf.values[i] = static_cast<float>(w.values[i]);
  wf.positions = w.positions;
  std::vector<float> y(static_cast<std::size_t>(m_total * n_total));
  linear_nm(TensorView<const float>(xf.data(), Shape{m_total, k_total}), wf,
            TensorView<float>(y.data(), Shape{m_total, n_total}), epilogue);
  cpu::convert_rows(make_epilogue_op(epilogue, m_total, n_total), y.data(), n_total, out);
}

// Whether linear_nm_int8 can run (Out float, half, bfloat16 or int8), and if not, why. The scales are the
// epilogue's: x_scales [M] or [1], w_scales [N] or [1], finite and > 0.
template <class Out>
Support can_implement_linear_nm_int8(const TensorView<const std::int8_t>& x, const sparse::NmCompressed<std::int8_t>& w,
                                     const TensorView<Out>& out, const Epilogue& epilogue) {
  if (!std::is_same_v<Out, float> && !std::is_same_v<Out, half> && !std::is_same_v<Out, bfloat16> &&
      !std::is_same_v<Out, std::int8_t>)
    return Support::no("out", std::string("a view of ") + element_type_name<Out>(),
                       "a view of float, half, bfloat16 or int8");
  Support s = linear::detail::check_nm_structure(w);
  if (!s) return s;
  // Each product is at most 128 · 128 in magnitude; the kept ones of a row must sum inside int32.
  const std::int64_t max_kept = std::numeric_limits<std::int32_t>::max() / (128 * 128);
  if (w.kept_per_row() > max_kept)
    return Support::no("w.shape", to_string(Shape{w.rows, w.cols}),
                       "at most " + std::to_string(max_kept) + " kept values a row (K / m · n; int32 sums)");
  s = linear::detail::check_matrix(x, "x");
  if (!s) return s;
  if (x.size(1) != w.cols)
    return Support::no("x.shape", to_string(x.shape()),
                       "[M, " + std::to_string(w.cols) + "]: K equal to the weight's input size");
  s = linear::detail::check_output(out, x.size(0), w.rows);
  if (!s) return s;
  s = check_epilogue(epilogue, epilogue_rules<Out>(x.size(0), w.rows, Device::host(), EpilogueScales::required), out);
  if (!s) return s;
  if (views_overlap(x, out)) return Support::no("out", "memory overlapping x", "a separate output");
  return linear::detail::check_out_apart_from_weight(out, w);
}

// out[m, n] = act(sx[m] · sw[n] · Σ_{kept k of row n} x[m, k] · w[n, k] + bias[n]) with int8 x and w, the sum exact
// in int32; see above for the output types (int8 with epilogue.out_scale). The twin of cuda::linear_nm for int8
// operands. A weight row at a time is expanded to dense int16, then dotted with 32 rows of x at a time (which stay in
// cache).
template <class Out>
void linear_nm_int8(TensorView<const std::int8_t> x, const sparse::NmCompressed<std::int8_t>& w, TensorView<Out> out,
                    const Epilogue& epilogue) {
  const char* fn = "shrink::cpu::linear_nm_int8";
  require_supported(can_implement_linear_nm_int8(x, w, out, epilogue), fn);
  require_supported(linear::detail::check_nm_positions(w), fn);
  const std::int64_t m_total = x.size(0), k_total = x.size(1), n_total = w.rows;
  std::vector<std::int8_t> x_rows;
  const std::int8_t* xs = x.data();
  std::int64_t ldx = x.stride(0);
  if (x.stride(1) != 1 && k_total > 1) {
    x_rows = contiguous_copy(x);
    xs = x_rows.data();
    ldx = k_total;
  }
  const EpilogueOp op = make_epilogue_op(epilogue, m_total, n_total);
  const int n_keep = w.pattern.n, group = w.pattern.m;
  const std::int64_t groups = w.cols / group;
  constexpr std::int64_t kRowsPerPass = 32;
  // Parts of whole weight rows on the current executor (exact sums: the same bits on any executor).
  const std::int64_t part_rows = chunk_size(n_total, 2.0 * static_cast<double>(m_total * k_total));
  parallel_for(n_total, part_rows, [&](std::int64_t n_begin, std::int64_t n_end) {
    std::vector<std::int16_t> dense(static_cast<std::size_t>(k_total));
    for (std::int64_t m0 = 0; m0 < m_total; m0 += kRowsPerPass) {
      const std::int64_t m1 = std::min(m_total, m0 + kRowsPerPass);
      for (std::int64_t n = n_begin; n < n_end; ++n) {
        std::fill(dense.begin(), dense.end(), std::int16_t{0});
        const std::int8_t* values = w.values.data() + n * w.kept_per_row();
        const std::uint8_t* positions = w.positions.data() + n * w.kept_per_row();
        for (std::int64_t g = 0; g < groups; ++g)
          for (int j = 0; j < n_keep; ++j)
            dense[static_cast<std::size_t>(g * group + positions[g * n_keep + j])] = values[g * n_keep + j];
        for (std::int64_t m = m0; m < m1; ++m) {
          const std::int8_t* row = xs + m * ldx;
          std::int32_t acc = 0;
          for (std::int64_t k = 0; k < k_total; ++k)
            acc += static_cast<std::int32_t>(row[k]) * static_cast<std::int32_t>(dense[static_cast<std::size_t>(k)]);
          cpu::finish_run(op, &acc, op.x_scale(m), n, 1, &out(m, n));
        }
      }
    }
  });
}

}  // namespace shrink::cpu
