// SparseGPT (Frantar & Alistarh 2023, "SparseGPT: Massive Language Models Can Be Accurately Pruned in One-Shot"): a
// Linear weight [out, in] pruned column after column, each pruned weight's error spread over the columns not yet
// processed through the inverse Hessian of the layer's reconstruction error (quant/hessian.hpp), the mask chosen
// block by block from the weights as updated so far; optionally the kept weights quantized as GPTQ does.
//
// With U the upper Cholesky factor of the damped inverse Hessian (quant/inverse_hessian.hpp: dead inputs, damping;
// columns in their own order), so that U_cc² = [(H_{c:, c:})⁻¹]_cc, and W the weight in double with its dead columns
// zeroed, for each column i (the walk of quant/column_walk.hpp, which GPTQ shares: lazy blocks, runs of 16 columns):
//   mask, when i starts a span, per output row r, from W as updated so far:
//     saliency   s_rc = w_rc² / U_cc²                        (OBS's error of removing w_rc alone, the paper's
//                                                            w² / [H⁻¹]²_cc read from the Cholesky factor's diagonal)
//     unstructured  at i = k·B_s: prune the round(p · L) lowest s_rc of c in [i, i + L), L = min(B_s, in − i)
//                   (round half to even, as prune/amount.hpp; B_s = mask_block_size, p = sparsity)
//     N:M           at i = k·m: prune the m − n lowest s_rc of c in [i, i + m), keeping n
//     ties          among equal s_rc the higher column is pruned first, the lower kept (prune/amount.hpp, nm_mask)
//   column i:
//     ŵ_ri  = 0 where pruned; where kept, w_ri, or with joint quantization float(q − zp) · s for
//             q = quantize_value(float(w_ri), s, zp)            (GPTQ's rounding, quant/gptq.hpp)
//     e_ri  = (w_ri − ŵ_ri) / U_ii
//     W[:, i+1:] −= e_i · U[i, i+1:]                            (lazily: inside runs, after runs, after blocks)
// Joint quantization (options.quantize) takes GPTQ's parameters: (s, zp) = scale_zero_point_from_range of each row's
// [min, max] rounded to float, per row from the whole row of W before any update (group_size 0), or per row and
// group of group_size columns from the updated weights when the group's first column comes up; a pruned weight is
// q = zp (ŵ = 0 exactly). Mask blocks (B_s), N:M runs (m) and dynamic groups are the walk's spans: each is read
// whole with every earlier update applied, so the result is that of the unblocked algorithm and does not depend on
// block_size beyond float order (block_size is rounded down to a multiple of their least common multiple).
// Decided:
//   - The sparsity is per row within each mask block: every row prunes round(p · L) of each block's L columns, so
//     every row ends with the same count (the paper's Algorithm 1 selects within each block; its public code ranks
//     the whole block, all rows together, under one threshold). Rows stay independent: they run in fixed chunks on
//     the current executor without waiting on each other, and the bytes do not depend on the thread count.
//   - N:M keeps exactly n of every m along the input dimension (m must divide in): the mask feeds
//     sparse::compress_nm and linear_nm unchanged. mask_block_size is not used then.
//   - Group parameters with joint quantization see the group's weights pruned or not (N:M runs inside a group are
//     chosen after it starts); pruned weights are then exactly 0, which every range holds.
//   - Columns in their natural order (no act_order): masks and N:M runs are along the original input dimension.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/quant/column_walk.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/inverse_hessian.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::prune {

struct SparseGptOptions {
  double sparsity = 0.5;               // unstructured: the fraction pruned of each row's mask block, in [0, 1)
  std::optional<NmPattern> pattern;    // set: N:M, keep n of every m along the input (sparsity not used)
  std::int64_t mask_block_size = 128;  // B_s: columns whose mask is chosen at once (unstructured), >= 1
  std::int64_t block_size = 128;       // columns per lazy batch update, >= 1
  double damp_percent = 0.01;          // λ = damp_percent · mean(diag H), >= 0
  // Joint quantization of the kept weights, as GPTQ (quant/gptq.hpp): bits 2..8 (int4/uint4 up to 4 bits, int8/uint8
  // above), symmetric (zp = 0) or affine (zero points), group_size columns sharing a scale (a divisor of in; 0: one
  // scale per output row).
  bool quantize = false;
  int bits = 4;
  quant::Symmetry symmetry = quant::Symmetry::symmetric;
  std::int64_t group_size = 128;
};

struct SparseGptResult {
  std::vector<float> weight;  // Ŵ [out, in] row-major: 0 where pruned; kept: the updated weight rounded to float,
                              // or with quantization dequantize(quantized) (bit for bit)
  Mask mask;                  // [out, in]: 1 keeps
  std::optional<quant::QuantizedTensor> quantized;  // with options.quantize: Ŵ's integers, pruned ones q = zp
  double loss = 0.0;             // ½ Σ over rows and columns (w_i − ŵ_i)² / U_ii² (the paper's Losses)
  double damping = 0.0;          // λ added to the diagonal
  std::int64_t dead_inputs = 0;  // columns with H_jj == 0 (pruned first: their weights are zero)
};

// The factor options SparseGPT's options imply (one factor serves every Linear that reads the same input, and GPTQ
// with the same damping and no act_order).
inline quant::InverseHessianOptions inverse_hessian_options(const SparseGptOptions& options) {
  quant::InverseHessianOptions o;
  o.damp_percent = options.damp_percent;
  return o;
}

// The quantization options SparseGPT's joint quantization implies (its scheme: quant::gptq_scheme of them).
inline quant::GptqOptions sparsegpt_quant_options(const SparseGptOptions& options) {
  quant::GptqOptions o;
  o.bits = options.bits;
  o.symmetry = options.symmetry;
  o.group_size = options.group_size;
  o.damp_percent = options.damp_percent;
  o.block_size = options.block_size;
  return o;
}

namespace detail {

inline void check_sparsegpt_args(const TensorView<const float>& weight, const SparseGptOptions& o, const char* fn) {
  if (!(o.sparsity >= 0.0 && o.sparsity < 1.0)) fail(fn, "options.sparsity", o.sparsity, "a fraction in [0, 1)");
  if (o.pattern && (o.pattern->m < 2 || o.pattern->m > kMaxNmGroup || o.pattern->n < 1 || o.pattern->n >= o.pattern->m))
    fail(fn, "options.pattern", to_string(*o.pattern),
         "1 <= n < m <= " + std::to_string(kMaxNmGroup) + " (keep n of every m)");
  if (o.mask_block_size < 1) fail(fn, "options.mask_block_size", o.mask_block_size, "at least 1");
  if (o.block_size < 1) fail(fn, "options.block_size", o.block_size, "at least 1");
  if (!(o.damp_percent >= 0.0) || !std::isfinite(o.damp_percent))
    fail(fn, "options.damp_percent", o.damp_percent, "a finite value >= 0");
  if (o.quantize) {
    if (o.bits < 2 || o.bits > 8) fail(fn, "options.bits", o.bits, "2..8");
    if (o.symmetry != quant::Symmetry::symmetric && o.symmetry != quant::Symmetry::affine)
      fail(fn, "options.symmetry", static_cast<int>(o.symmetry), "symmetric or affine");
    if (o.group_size < 0) fail(fn, "options.group_size", o.group_size, "0 (per output row) or a positive group size");
  }
  require_host_view(weight, fn, "weight");
  if (weight.rank() != 2 || weight.empty())
    fail(fn, "weight.shape", to_string(weight.shape()), "a non-empty Linear weight [out, in]");
  const std::int64_t in = weight.size(1);
  if (o.pattern && in % o.pattern->m != 0)
    fail(fn, "options.pattern", to_string(*o.pattern),
         "m dividing the weight's input width " + std::to_string(in) + " (whole runs of m along each row)");
  if (o.quantize && o.group_size > 0 && in % o.group_size != 0)
    fail(fn, "options.group_size", o.group_size, "a divisor of the weight's input width " + std::to_string(in));
  cpu::require_finite(weight, fn, "weight");
}

inline void check_sparsegpt_factor(const quant::InverseHessianFactor& f, const SparseGptOptions& o, std::int64_t in,
                                   const char* fn) {
  if (f.features != in) fail(fn, "factor.features", f.features, "the weight's input width " + std::to_string(in));
  if (f.upper.rows() != in || f.upper.cols() != in || static_cast<std::int64_t>(f.order.size()) != in)
    fail(fn, "factor", "an incomplete factor", "one made by inverse_hessian_factor");
  if (f.options.act_order) fail(fn, "factor.options.act_order", "true", "false (SparseGPT keeps the column order)");
  if (f.options.damp_percent != o.damp_percent)
    fail(fn, "factor.options.damp_percent", f.options.damp_percent,
         "equal to options.damp_percent (" + to_text(o.damp_percent) + ")");
}

// The k-th lowest (from 0) of a[0, n), k < n, reordering a: quickselect with branch-free partitions (compares of
// random saliencies are branches no predictor guesses) around a median of three.
inline double kth_lowest(double* a, std::int64_t n, std::int64_t k) {
  std::int64_t lo = 0, hi = n;
  while (hi - lo > 8) {
    const double x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
    const double pivot = std::max(std::min(x, y), std::min(std::max(x, y), z));
    std::int64_t below = lo;  // a[lo, below) < pivot <= a[below, j)
    for (std::int64_t j = lo; j < hi; ++j) {
      const double v = a[j];
      a[j] = a[below];
      a[below] = v;
      below += v < pivot;
    }
    if (k < below) {
      hi = below;  // the pivot is not below itself: progress
      continue;
    }
    std::int64_t equal = below;  // a[below, equal) == pivot: at least the pivot
    for (std::int64_t j = below; j < hi; ++j) {
      const double v = a[j];
      a[j] = a[equal];
      a[equal] = v;
      equal += v == pivot;
    }
    if (k < equal) return pivot;
    lo = equal;
  }
  std::sort(a + lo, a + hi);
  return a[k];
}

// Prunes (keep[c] = 0) the `count` lowest of saliency[0, width): ascending, and among equal values the higher index
// first (prune/amount.hpp's rule). `scratch` holds width doubles.
inline void prune_lowest(const double* saliency, std::int64_t width, std::int64_t count, double* scratch,
                         std::uint8_t* keep) {
  if (count <= 0) return;
  if (width <= 16) {  // N:M runs: each element's rank in that order, without a sort
    for (std::int64_t j = 0; j < width; ++j) {
      std::int64_t rank = 0;
      for (std::int64_t l = 0; l < width; ++l)
        rank += (saliency[l] < saliency[j]) | ((saliency[l] == saliency[j]) & (l > j));
      keep[j] = static_cast<std::uint8_t>(keep[j] & (rank >= count));
    }
    return;
  }
  // The count-th lowest value t: every value below it is pruned, then values equal to t from the highest index down.
  std::copy(saliency, saliency + width, scratch);
  const double t = kth_lowest(scratch, width, count - 1);
  std::int64_t left = count;
  for (std::int64_t j = 0; j < width; ++j) {
    const bool below = saliency[j] < t;
    keep[j] = static_cast<std::uint8_t>(keep[j] & !below);
    left -= below;
  }
  for (std::int64_t j = width - 1; j >= 0 && left > 0; --j)
    if (saliency[j] == t) {
      keep[j] = 0;
      --left;
    }
}

}  // namespace detail

// SparseGPT of weight [out, in] (any strides) with a factor of its input's Hessian made with inverse_hessian_options(
// options). Validation comes first: every bad argument is one Error naming it, before any work.
inline SparseGptResult sparsegpt_prune(TensorView<const float> weight, const quant::InverseHessianFactor& factor,
                                       const SparseGptOptions& options) {
  const char* fn = "shrink::prune::sparsegpt_prune";
  detail::check_sparsegpt_args(weight, options, fn);
  const std::int64_t out = weight.size(0), in = weight.size(1);
  detail::check_sparsegpt_factor(factor, options, in, fn);
  const Eigen::Index n = static_cast<Eigen::Index>(in);
  const Eigen::MatrixXd& u = factor.upper;

  // W [out, in] column-major in double, dead columns zeroed.
  Eigen::MatrixXd w(out, n);
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t c = 0; c < in; ++c) w(r, c) = weight(r, c);
  for (std::int64_t j : factor.dead) w.col(static_cast<Eigen::Index>(j)).setZero();

  // Joint quantization: GPTQ's scheme and parameters, [out, groups] row-major; per row from W before any update.
  const bool quantize = options.quantize;
  const quant::QuantScheme scheme = quant::gptq_scheme(sparsegpt_quant_options(options));
  const quant::QuantRange range = quant::quant_range(scheme);
  const std::int64_t group = quantize && options.group_size > 0 ? options.group_size : in;
  const std::int64_t groups = in / group;
  const bool static_params = !quantize || options.group_size == 0;
  std::vector<AffineParams> params(quantize ? static_cast<std::size_t>(out * groups) : 0);
  if (quantize && static_params)
    for (std::int64_t r = 0; r < out; ++r)
      params[static_cast<std::size_t>(r)] = quant::gptq_range_params(w.row(r), 0, n, scheme, range, fn);

  // The spans read whole: mask blocks or N:M runs, and groups whose parameters come from updated weights.
  const std::int64_t span = options.pattern ? options.pattern->m : options.mask_block_size;
  std::vector<std::int64_t> spans{span};
  if (!static_params) spans.push_back(group);
  std::vector<double> denominator(static_cast<std::size_t>(n));  // U_cc²
  for (Eigen::Index c = 0; c < n; ++c) denominator[static_cast<std::size_t>(c)] = u(c, c) * u(c, c);

  std::vector<std::uint8_t> keep(static_cast<std::size_t>(out * in), 1);
  std::vector<float> w_hat(static_cast<std::size_t>(out * in));
  std::vector<std::int32_t> values(quantize ? static_cast<std::size_t>(out * in) : 0);
  std::vector<double> row_loss(static_cast<std::size_t>(out), 0.0);
  quant::walk_columns(
      w, u, options.block_size, spans, [&](const quant::ColumnWalkRows& rows, Eigen::Index i, double* e) {
        const std::int64_t r0 = rows.first;
        if (i % span == 0) {  // the mask of columns [i, i + width), every row of the chunk
          const std::int64_t width = std::min<std::int64_t>(span, in - i);
          const std::int64_t count =
              options.pattern
                  ? options.pattern->m - options.pattern->n
                  : static_cast<std::int64_t>(std::nearbyint(options.sparsity * static_cast<double>(width)));
          // Saliencies column by column (W's own order), then each row's read from them.
          std::vector<double> saliency(static_cast<std::size_t>(width * rows.count)),
              row(static_cast<std::size_t>(width)), scratch(static_cast<std::size_t>(width));
          for (std::int64_t c = 0; c < width; ++c) {
            const double* x = rows.column(i + c);
            const double den = denominator[static_cast<std::size_t>(i + c)];
            double* s = saliency.data() + c * rows.count;
            for (Eigen::Index k = 0; k < rows.count; ++k) s[k] = x[k] * x[k] / den;
          }
          for (Eigen::Index k = 0; k < rows.count; ++k) {
            for (std::int64_t c = 0; c < width; ++c)
              row[static_cast<std::size_t>(c)] = saliency[static_cast<std::size_t>(c * rows.count + k)];
            detail::prune_lowest(row.data(), width, count, scratch.data(), keep.data() + (r0 + k) * in + i);
          }
        }
        const std::int64_t g = i / group;
        if (!static_params && i % group == 0)
          for (Eigen::Index k = 0; k < rows.count; ++k)
            params[static_cast<std::size_t>((r0 + k) * groups + g)] =
                quant::gptq_range_params(Eigen::Map<const Eigen::VectorXd, 0, Eigen::InnerStride<>>(
                                             rows.w + k, n, Eigen::InnerStride<>(rows.ld)),
                                         i, group, scheme, range, fn);
        const double d = u(i, i);
        const double* wi = rows.column(i);
        for (Eigen::Index k = 0; k < rows.count; ++k) {
          const std::size_t at = static_cast<std::size_t>((r0 + k) * in + i);
          const double x = wi[k];
          const bool kept = keep[at] != 0;
          double x_hat = kept ? x : 0.0;
          if (quantize) {
            const AffineParams& p = params[static_cast<std::size_t>((r0 + k) * groups + g)];
            const std::int32_t q = quantize_value(kept ? static_cast<float>(x) : 0.0f, p);  // pruned: q = zp
            values[at] = q;
            w_hat[at] = dequantize_value(q, p);
            x_hat = static_cast<double>(w_hat[at]);
          } else {
            w_hat[at] = static_cast<float>(x_hat);
          }
          e[k] = (x - x_hat) / d;
          row_loss[static_cast<std::size_t>(r0 + k)] += e[k] * e[k] / 2.0;
        }
      });

  SparseGptResult result;
  result.mask = Mask(weight.shape(), false);
  std::uint64_t* words = result.mask.mutable_words().data();
  for (std::size_t k = 0; k < keep.size(); ++k) words[k >> 6] |= std::uint64_t{keep[k]} << (k & 63);
  if (quantize) result.quantized = quant::make_quantized_tensor(weight.shape(), scheme, values, params, fn);
  result.weight = std::move(w_hat);
  for (double l : row_loss) result.loss += l;
  result.damping = factor.damping;
  result.dead_inputs = static_cast<std::int64_t>(factor.dead.size());
  return result;
}

// SparseGPT with the Hessian itself: its factor (quant::inverse_hessian_factor) made first; the arguments are all
// checked before.
inline SparseGptResult sparsegpt_prune(TensorView<const float> weight, const quant::Hessian& hessian,
                                       const SparseGptOptions& options) {
  const char* fn = "shrink::prune::sparsegpt_prune";
  detail::check_sparsegpt_args(weight, options, fn);
  quant::check_hessian(hessian, weight.size(1), fn, "hessian");
  return sparsegpt_prune(weight, quant::inverse_hessian_factor(hessian, inverse_hessian_options(options), fn), options);
}

}  // namespace shrink::prune
