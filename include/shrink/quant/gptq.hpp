// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers"):
// a Linear weight [out, in] quantized column after column, each column's rounding error spread over the columns not
// yet quantized through the inverse Hessian of the layer's reconstruction error (quant/hessian.hpp).
//
// With H [in, in] the Hessian and W the weight, in double:
//   dead inputs   H_jj == 0  ->  H_jj = 1 and W[:, j] = 0   (an input that was always zero carries no weight)
//   act_order     columns taken in decreasing H_jj (ties: lower column first), H and W permuted alike
//   damping       H += λ I,  λ = damp_percent · mean(diag H)
//   U             the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU), computed as J·chol(J H J)⁻¹·J with J the reversal
//   for each column i, in blocks [b0, b1) of block_size columns (lazy batch updates):
//     q_i   = clamp(nearbyint(float(w_i) · (1 / s)) + zp, qmin, qmax)   (quantize_value, core/affine.hpp, as
//             quantize does: with a diagonal H, GPTQ is shrink's round-to-nearest bit for bit)
//     ŵ_i   = float(q_i − zp) · s                              (what dequantize gives back, bit for bit)
//     e_i   = (w_i − ŵ_i) / U_ii
//     W[:, i+1:b1] −= e_i · U[i, i+1:b1]                       (inside the block, at once)
//   and after each block  W[:, b1:] −= E[:, b0:b1] · U[b0:b1, b1:]
// Parameters (s, zp) are shrink's own (scale_zero_point_from_range, float32 as PyTorch) of each row's
// [min, max] over its group, rounded to float:
//   group_size 0      per output row, from the whole row of W (after dead inputs are zeroed)
//   static_groups     per row and group of original columns [g·G, (g+1)·G), from W before any update
//   otherwise         per row and group, from the group's columns when its first column comes up, after every
//                     update of earlier columns: blocks then hold whole groups (block_size is rounded down to a
//                     multiple of group_size, at least one group), so the result is that of the unblocked
//                     algorithm and does not depend on block_size beyond float order.
// Decided: group_size must divide `in` (no ragged last group; an Error otherwise). act_order with groups needs
// static_groups: a group formed in permuted order would need a column -> group index (g_idx) that QuantizedTensor
// does not carry yet; per-channel act_order needs none. Rows are independent; they run in fixed chunks of rows on
// the current executor, so the bytes do not depend on the thread count.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct GptqOptions {
  int bits = 4;                             // 2..8: int4/uint4 up to 4 bits, int8/uint8 above (scheme.bits)
  Symmetry symmetry = Symmetry::symmetric;  // symmetric: int4/int8, zp = 0; affine: uint4/uint8 with zero points
  std::int64_t group_size = 128;            // columns sharing a scale; 0: one scale per output row
  bool act_order = false;                   // columns in decreasing H_jj (with groups: needs static_groups)
  bool static_groups = false;               // group parameters from W before any update
  double damp_percent = 0.01;               // λ = damp_percent · mean(diag H), >= 0
  std::int64_t block_size = 128;            // columns per lazy batch update, >= 1
};

struct GptqResult {
  double loss = 0.0;                // ½ Σ over rows and columns (w_i − ŵ_i)² / U_ii² (the paper's Losses)
  double damping = 0.0;             // λ added to the diagonal
  std::int64_t dead_inputs = 0;     // columns with H_jj == 0
  std::vector<std::int64_t> order;  // order[k]: the column quantized k-th
};

// The storage scheme GPTQ's output uses for `options` (narrow_int_scheme, quant/scheme.hpp): int4/uint4 for 2-4 bits,
// int8/uint8 for 5-8, with scheme.bits set below the dtype's width; per_group along axis 1, or per_channel along axis
// 0.
inline QuantScheme gptq_scheme(const GptqOptions& options) {
  return narrow_int_scheme(options.bits, options.symmetry, options.group_size);
}

namespace detail {

constexpr std::int64_t kGptqRowChunk = 64;  // rows per task: a constant, so chunks do not follow the executor

inline void check_gptq_args(const TensorView<const float>& weight, const Hessian& h, const GptqOptions& o,
                            const char* fn) {
  if (o.bits < 2 || o.bits > 8) fail(fn, "options.bits", o.bits, "2..8");
  if (o.symmetry != Symmetry::symmetric && o.symmetry != Symmetry::affine)
    fail(fn, "options.symmetry", static_cast<int>(o.symmetry), "symmetric or affine");
  if (!(o.damp_percent >= 0.0) || !std::isfinite(o.damp_percent))
    fail(fn, "options.damp_percent", o.damp_percent, "a finite value >= 0");
  if (o.block_size < 1) fail(fn, "options.block_size", o.block_size, "at least 1");
  if (o.group_size < 0) fail(fn, "options.group_size", o.group_size, "0 (per output row) or a positive group size");
  require_host_view(weight, fn, "weight");
  if (weight.rank() != 2 || weight.empty())
    fail(fn, "weight.shape", to_string(weight.shape()), "a non-empty Linear weight [out, in]");
  const std::int64_t in = weight.size(1);
  if (o.group_size > 0 && in % o.group_size != 0)
    fail(fn, "options.group_size", o.group_size, "a divisor of the weight's input width " + std::to_string(in));
  if (o.act_order && o.group_size > 0 && !o.static_groups)
    fail(fn, "options.static_groups", "false",
         "true with act_order and groups (groups in permuted order need a g_idx, not supported yet)");
  require_hessian(h, in, fn);
  cpu::require_finite(weight, fn, "weight");
}

// Parameters of values [first, first + count) of a row, from their [min, max] rounded to float.
template <class Row>
AffineParams gptq_params(const Row& row, Eigen::Index first, Eigen::Index count, const QuantScheme& scheme,
                         const QuantRange& range, const char* fn) {
  const double lo = row.segment(first, count).minCoeff(), hi = row.segment(first, count).maxCoeff();
  const ScaleZeroPoint p = scale_zero_point_from_range(static_cast<float>(lo), static_cast<float>(hi), scheme, fn);
  return AffineParams(p.scale, p.zero_point, range.qmin, range.qmax);
}

// L⁻¹ of the lower triangle L of `l` (the upper one is not read), by panels of 64 columns: with L = [L11 0; L21 L22],
// X11 = L11⁻¹ and X21 = −L22⁻¹·L21·X11 (X22 = L22⁻¹ comes with the next panels): n³/3 multiply-adds, a third of solving
// L·X = I.
inline Eigen::MatrixXd lower_triangular_inverse(const Eigen::MatrixXd& l) {
  const Eigen::Index n = l.rows(), panel = 64;
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, n);
  for (Eigen::Index j = 0; j < n; j += panel) {
    const Eigen::Index w = std::min(panel, n - j), m = n - j - w;
    auto diagonal = x.block(j, j, w, w);
    diagonal.setIdentity();
    l.block(j, j, w, w).triangularView<Eigen::Lower>().solveInPlace(diagonal);
    if (m == 0) continue;
    auto below = x.block(j + w, j, m, w);
    below.noalias() = -(l.block(j + w, j, m, w) * diagonal.triangularView<Eigen::Lower>());
    l.block(j + w, j + w, m, m).triangularView<Eigen::Lower>().solveInPlace(below);
  }
  return x;
}

}  // namespace detail

// GPTQ of weight [out, in] (any strides) with the Hessian of its input; the result in original column order,
// readable by dequantize, the safetensors convention and the weight-only GEMMs. Validation comes first: every
// bad argument is one Error naming it, and `info` is written only on success.
inline QuantizedTensor gptq_quantize(TensorView<const float> weight, const Hessian& hessian, const GptqOptions& options,
                                     GptqResult* info = nullptr) {
  const char* fn = "shrink::quant::gptq_quantize";
  detail::check_gptq_args(weight, hessian, options, fn);
  const std::int64_t out = weight.size(0), in = weight.size(1);
  const Eigen::Index n = static_cast<Eigen::Index>(in);
  const QuantScheme scheme = gptq_scheme(options);
  const QuantRange range = quant_range(scheme);
  const std::int64_t group = options.group_size > 0 ? options.group_size : in;
  const std::int64_t groups = in / group;

  // H, and W [out, in] column-major in double.
  Eigen::MatrixXd h(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) h(i, j) = hessian.values[static_cast<std::size_t>(i * n + j)];
  Eigen::MatrixXd w(out, n);
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t c = 0; c < in; ++c) w(r, c) = weight(r, c);

  GptqResult result;
  for (Eigen::Index j = 0; j < n; ++j)
    if (h(j, j) == 0.0) {
      h(j, j) = 1.0;
      w.col(j).setZero();
      ++result.dead_inputs;
    }

  // Static parameters, [out, groups] row-major, from W before any update (per channel: the whole row).
  std::vector<AffineParams> params(static_cast<std::size_t>(out * groups));
  const bool static_params = options.group_size == 0 || options.static_groups;
  if (static_params)
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t g = 0; g < groups; ++g)
        params[static_cast<std::size_t>(r * groups + g)] =
            detail::gptq_params(w.row(r), g * group, group, scheme, range, fn);

  // Processing order; H and W permuted to it.
  result.order.resize(static_cast<std::size_t>(in));
  std::iota(result.order.begin(), result.order.end(), std::int64_t{0});
  if (options.act_order) {
    std::stable_sort(result.order.begin(), result.order.end(),
                     [&](std::int64_t a, std::int64_t b) { return h(a, a) > h(b, b); });
    const Eigen::MatrixXd h0 = h, w0 = w;
    for (Eigen::Index k = 0; k < n; ++k) {
      const Eigen::Index from = static_cast<Eigen::Index>(result.order[static_cast<std::size_t>(k)]);
      w.col(k) = w0.col(from);
      for (Eigen::Index l = 0; l < n; ++l)
        h(k, l) = h0(from, static_cast<Eigen::Index>(result.order[static_cast<std::size_t>(l)]));
    }
  }

  result.damping = options.damp_percent * h.diagonal().mean();
  h.diagonal().array() += result.damping;

  // U = J · chol(J H J)⁻¹ · J: upper, with UᵀU = H⁻¹. In place: H's storage holds L, then U takes one more matrix.
  h.reverseInPlace();
  const Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(h);
  if (llt.info() != Eigen::Success)
    fail(fn, "hessian", "a matrix [" + std::to_string(in) + ", " + std::to_string(in) + "]",
         "a positive-definite Hessian after damping by " + to_text(result.damping) +
             " (raise options.damp_percent or gather more calibration rows)");
  Eigen::MatrixXd u = detail::lower_triangular_inverse(h);
  u.reverseInPlace();
  h.resize(0, 0);

  // Blocks hold whole groups when group parameters come from updated weights.
  std::int64_t block = options.block_size;
  if (!static_params) block = std::max<std::int64_t>(1, block / group) * group;

  std::vector<std::int32_t> values(static_cast<std::size_t>(out * in));
  std::vector<double> row_loss(static_cast<std::size_t>(out), 0.0);
  parallel_for(out, detail::kGptqRowChunk, [&](std::int64_t r0, std::int64_t r1) {
    const Eigen::Index rows = static_cast<Eigen::Index>(r1 - r0);
    auto wc = w.middleRows(static_cast<Eigen::Index>(r0), rows);
    Eigen::MatrixXd err(rows, static_cast<Eigen::Index>(block));
    for (Eigen::Index b0 = 0; b0 < n; b0 += block) {
      const Eigen::Index b1 = std::min<Eigen::Index>(b0 + block, n);
      for (Eigen::Index i = b0; i < b1; ++i) {
        const std::int64_t column = result.order[static_cast<std::size_t>(i)];
        const std::int64_t g = column / group;
        if (!static_params && i % group == 0)
          for (Eigen::Index k = 0; k < rows; ++k)
            params[static_cast<std::size_t>((r0 + k) * groups + g)] =
                detail::gptq_params(wc.row(k), i, group, scheme, range, fn);
        const double d = u(i, i);
        for (Eigen::Index k = 0; k < rows; ++k) {
          const AffineParams& p = params[static_cast<std::size_t>((r0 + k) * groups + g)];
          const double x = wc(k, i);
          const std::int32_t q = quantize_value(static_cast<float>(x), p);
          const double e = (x - static_cast<double>(dequantize_value(q, p))) / d;
          values[static_cast<std::size_t>((r0 + k) * in + column)] = q;
          row_loss[static_cast<std::size_t>(r0 + k)] += e * e / 2.0;
          err(k, i - b0) = e;
        }
        const Eigen::Index rest = b1 - i - 1;
        if (rest > 0) wc.middleCols(i + 1, rest).noalias() -= err.col(i - b0) * u.row(i).segment(i + 1, rest);
      }
      if (b1 < n) wc.rightCols(n - b1).noalias() -= err.leftCols(b1 - b0) * u.block(b0, b1, b1 - b0, n - b1);
    }
  });

  QuantizedTensor t;
  t.shape = weight.shape();
  t.scheme = scheme;
  t.qparams.shape = qparams_shape(scheme, t.shape, fn);
  t.qparams.scale.resize(params.size());
  t.qparams.zero_point.resize(params.size());
  for (std::size_t k = 0; k < params.size(); ++k) {
    t.qparams.scale[k] = params[k].scale;
    t.qparams.zero_point[k] = params[k].zero_point;
  }
  t.data.resize(static_cast<std::size_t>(quantized_data_bytes(scheme.dtype, t.shape)));
  if (is_packed(scheme.dtype)) {
    std::vector<std::int8_t> narrow(values.size());
    for (std::size_t k = 0; k < values.size(); ++k) narrow[k] = static_cast<std::int8_t>(values[k]);  // 4-bit fits
    cpu::pack_int4_rows(narrow.data(), t.shape, t.data.data());
  } else {
    for (std::size_t k = 0; k < values.size(); ++k)
      t.data[k] = static_cast<std::uint8_t>(values[k] & 0xff);  // two's complement for int8
  }
  if (info) {
    for (double l : row_loss) result.loss += l;
    *info = std::move(result);
  }
  return t;
}

}  // namespace shrink::quant
