// GPTQ (Frantar et al. 2022, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained Transformers"):
// a Linear weight [out, in] quantized column after column, each column's rounding error spread over the columns not
// yet quantized through the inverse Hessian of the layer's reconstruction error (quant/hessian.hpp).
//
// With U the upper Cholesky factor of the damped inverse Hessian in processing order (quant/inverse_hessian.hpp:
// dead inputs, act_order, damping) and W the weight in double, its dead columns zeroed and its columns permuted alike:
//   for each column i, in blocks [b0, b1) of block_size columns (lazy batch updates):
//     q_i   = clamp(nearbyint(float(w_i) · (1 / s)) + zp, qmin, qmax)   (quantize_value, core/affine.hpp, as
//             quantize does: with a diagonal H, GPTQ is shrink's round-to-nearest bit for bit)
//     ŵ_i   = float(q_i − zp) · s                              (what dequantize gives back, bit for bit)
//     e_i   = (w_i − ŵ_i) / U_ii
//     W[:, i+1:b1] −= e_i · U[i, i+1:b1]                       (inside the block: rank-1 inside runs of kColumnRun
//                                                               columns, then one product per run)
//   and after each block  W[:, b1:] −= E[:, b0:b1] · U[b0:b1, b1:]   (the walk of quant/column_walk.hpp, which
//                                                               SparseGPT shares)
// Parameters (s, zp) are shrink's own (scale_zero_point_from_range, float32 as PyTorch) of each row's
// [min, max] over its group, rounded to float:
//   group_size 0      per output row, from the whole row of W (after dead inputs are zeroed)
//   static_groups     per row and group of original columns [g·G, (g+1)·G), from W before any update
//   otherwise         per row and group of G consecutive processed columns, from them when the first comes up,
//                     after every update of earlier columns: groups are the walk's spans (blocks hold whole
//                     groups: block_size is rounded down to a multiple of group_size, at least one group), so the
//                     result is that of the unblocked algorithm and does not depend on block_size beyond float order.
// On one of llama.cpp's block grids (gptq_quantize_blocks, quant/block_grid.hpp) the groups are the format's blocks
// of 32 and a group's parameters are its d (and m): by grid_params_search over the group's values weighted by GPTQ's
// own column weights 1/U_jj² (options.block_scale_search, the default), or grid_params_from_range of the same [min,
// max]; q and ŵ follow GridParams' formulas, so every ŵ is a value the format holds.
// Decided: group_size must divide `in` (no ragged last group; an Error otherwise). act_order with groups formed in
// processing order (no static_groups) is AutoGPTQ's "desc_act" with a g_idx: original column c belongs to group
// g_idx[c] = position(c) / G, groups that are not runs of original columns. QuantizedTensor's groups are runs, so
// that form asks for options.permuted_output: the tensor's columns are then in processing order (column k is
// original column order[k]; y = Ŵ_perm · x[order]), which every consumer reads unchanged as the weight of the
// permuted input; GptqResult gives order and g_idx. Rows are independent; they run in fixed chunks of rows on the
// current executor, so the bytes do not depend on the thread count.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/quant/block_grid.hpp"
#include "shrink/quant/column_walk.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/inverse_hessian.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct GptqOptions {
  int bits = 4;                             // 2..8: int4/uint4 up to 4 bits, int8/uint8 above (scheme.bits)
  Symmetry symmetry = Symmetry::symmetric;  // symmetric: int4/int8, zp = 0; affine: uint4/uint8 with zero points
  std::int64_t group_size = 128;            // columns sharing a scale; 0: one scale per output row
  bool act_order = false;                   // columns in decreasing H_jj
  bool static_groups = false;               // groups of original columns, parameters from W before any update
  bool permuted_output = false;             // the result's columns in processing order (act_order's g_idx form)
  double damp_percent = 0.01;               // λ = damp_percent · mean(diag H), >= 0
  std::int64_t block_size = 128;            // columns per lazy batch update, >= 1
  // gptq_quantize_blocks: each block's d (and m) by grid_params_search weighted by GPTQ's column weights 1/U_jj²;
  // false: grid_params_from_range (llama.cpp's rule)
  bool block_scale_search = true;
};

struct GptqResult {
  double loss = 0.0;                // ½ Σ over rows and columns (w_i − ŵ_i)² / U_ii² (the paper's Losses)
  double damping = 0.0;             // λ added to the diagonal
  std::int64_t dead_inputs = 0;     // columns with H_jj == 0
  std::vector<std::int64_t> order;  // order[k]: the original column quantized k-th
  std::vector<std::int32_t> g_idx;  // g_idx[c]: the group of original column c (empty per channel)
  bool permuted_output = false;     // the tensor's column k is original column order[k]
};

// The storage scheme GPTQ's output uses for `options` (narrow_int_scheme, quant/scheme.hpp): int4/uint4 for 2-4 bits,
// int8/uint8 for 5-8, with scheme.bits set below the dtype's width; per_group along axis 1, or per_channel along axis
// 0.
inline QuantScheme gptq_scheme(const GptqOptions& options) {
  return narrow_int_scheme(options.bits, options.symmetry, options.group_size);
}

// The factor options GPTQ's options imply (the factor of one Hessian serves every Linear that reads that input).
inline InverseHessianOptions inverse_hessian_options(const GptqOptions& options) {
  InverseHessianOptions o;
  o.damp_percent = options.damp_percent;
  o.act_order = options.act_order;
  return o;
}

// The parameters GPTQ gives values [first, first + count) of a row (any Eigen vector expression): shrink's own
// scale_zero_point_from_range of their [min, max] rounded to float, for `scheme` and its `range`.
template <class Row>
AffineParams gptq_range_params(const Row& row, Eigen::Index first, Eigen::Index count, const QuantScheme& scheme,
                               const QuantRange& range, const char* fn) {
  const double lo = row.segment(first, count).minCoeff(), hi = row.segment(first, count).maxCoeff();
  const ScaleZeroPoint p = scale_zero_point_from_range(static_cast<float>(lo), static_cast<float>(hi), scheme, fn);
  return AffineParams(p.scale, p.zero_point, range.qmin, range.qmax);
}

namespace detail {

inline void check_gptq_args(const TensorView<const float>& weight, const GptqOptions& o, const char* fn) {
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
  if (o.act_order && o.group_size > 0 && !o.static_groups && !o.permuted_output)
    fail(fn, "options.permuted_output", "false",
         "true with act_order and groups in processing order (their g_idx form: the tensor's columns in "
         "processing order), or options.static_groups = true");
  if (o.permuted_output && (!o.act_order || o.static_groups))
    fail(fn, "options.permuted_output", "true", "false without act_order or with static_groups");
  cpu::require_finite(weight, fn, "weight");
}

inline void check_gptq_factor(const InverseHessianFactor& f, const GptqOptions& o, std::int64_t in, const char* fn) {
  if (f.features != in) fail(fn, "factor.features", f.features, "the weight's input width " + std::to_string(in));
  if (f.upper.rows() != in || f.upper.cols() != in || static_cast<std::int64_t>(f.order.size()) != in)
    fail(fn, "factor", "an incomplete factor", "one made by inverse_hessian_factor");
  if (f.options.act_order != o.act_order)
    fail(fn, "factor.options.act_order", f.options.act_order ? "true" : "false", "equal to options.act_order");
  if (f.options.damp_percent != o.damp_percent)
    fail(fn, "factor.options.damp_percent", f.options.damp_percent,
         "equal to options.damp_percent (" + to_text(o.damp_percent) + ")");
}

}  // namespace detail

namespace detail {

// The walk's output: each value's integer (original column order, or processing order when permuted) and each row's
// and group's parameters [out, groups].
template <class Params>
struct GptqWalk {
  std::vector<std::int32_t> values;
  std::vector<Params> params;
  std::vector<double> row_loss;
};

// The walk of the file comment with `group` columns per group, each cut into parts of `part` columns (part divides
// group; part = group but in the K formats, whose super-block's blocks are chosen together), and the parameters of a
// group's parts given by group_params(const double* values, const double* weights, count, Params* parts), with each
// column's weight in GPTQ's loss 1/U_jj²; Params has quantize_value / dequantize_value (core/affine.hpp's
// AffineParams, quant/block_grid.hpp's GridParams). Arguments already checked.
template <class Params, class GroupParams>
GptqWalk<Params> gptq_walk(const TensorView<const float>& weight, const InverseHessianFactor& factor,
                           const GptqOptions& options, std::int64_t group, std::int64_t part,
                           GroupParams&& group_params) {
  const std::int64_t out = weight.size(0), in = weight.size(1);
  const Eigen::Index n = static_cast<Eigen::Index>(in);
  const std::int64_t groups = in / group, parts = in / part, parts_per_group = group / part;
  const Eigen::MatrixXd& u = factor.upper;
  const std::vector<std::int64_t>& order = factor.order;
  // 1/U_jj² of each column, in processing order and in original order.
  std::vector<double> weight_processing(static_cast<std::size_t>(in)), weight_original(static_cast<std::size_t>(in));
  for (Eigen::Index k = 0; k < n; ++k) {
    const double w = 1.0 / (u(k, k) * u(k, k));
    weight_processing[static_cast<std::size_t>(k)] = w;
    weight_original[static_cast<std::size_t>(order[static_cast<std::size_t>(k)])] = w;
  }
  // The parameters of the parts of values [first, first + count) of a row (any Eigen vector expression) with their
  // weights, into out.
  auto segment_params = [&](const auto& row, Eigen::Index first, Eigen::Index count, const double* weights,
                            Params* parts_out) {
    thread_local std::vector<double> values;  // one buffer per worker, not one allocation per row and group
    values.resize(static_cast<std::size_t>(count));
    for (Eigen::Index j = 0; j < count; ++j) values[static_cast<std::size_t>(j)] = row(first + j);
    group_params(values.data(), weights + first, static_cast<std::int64_t>(count), parts_out);
  };

  // W [out, in] column-major in double, dead columns zeroed.
  Eigen::MatrixXd w0(out, n);
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t c = 0; c < in; ++c) w0(r, c) = weight(r, c);
  for (std::int64_t j : factor.dead) w0.col(static_cast<Eigen::Index>(j)).setZero();

  // Static parameters, [out, parts] row-major, from W before any update (per channel: the whole row).
  GptqWalk<Params> result;
  result.params.resize(static_cast<std::size_t>(out * parts));
  const bool static_params = options.group_size == 0 || options.static_groups;
  if (static_params)
    for (std::int64_t r = 0; r < out; ++r)
      for (std::int64_t g = 0; g < groups; ++g)
        segment_params(w0.row(r), g * group, group, weight_original.data(),
                       result.params.data() + r * parts + g * parts_per_group);

  // W in processing order.
  Eigen::MatrixXd w(out, n);
  for (Eigen::Index k = 0; k < n; ++k) w.col(k) = w0.col(static_cast<Eigen::Index>(order[static_cast<std::size_t>(k)]));
  w0.resize(0, 0);

  // Group parameters from updated weights read a whole group when its first column comes up.
  const std::vector<std::int64_t> spans =
      static_params ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{group};
  const bool permuted = options.permuted_output;
  result.values.resize(static_cast<std::size_t>(out * in));
  result.row_loss.assign(static_cast<std::size_t>(out), 0.0);
  walk_columns(w, u, options.block_size, spans, [&](const ColumnWalkRows& rows, Eigen::Index i, double* e) {
    const std::int64_t r0 = rows.first;
    const std::int64_t column = order[static_cast<std::size_t>(i)];
    const std::int64_t g = options.static_groups ? column / part : i / part;  // the column's part
    const std::int64_t stored = permuted ? i : column;
    if (!static_params && i % group == 0)
      for (Eigen::Index k = 0; k < rows.count; ++k)
        segment_params(
            Eigen::Map<const Eigen::VectorXd, 0, Eigen::InnerStride<>>(rows.w + k, n, Eigen::InnerStride<>(rows.ld)), i,
            group, weight_processing.data(), result.params.data() + (r0 + k) * parts + g);
    const double d = u(i, i);
    const double* wi = rows.column(i);
    for (Eigen::Index k = 0; k < rows.count; ++k) {
      const Params& p = result.params[static_cast<std::size_t>((r0 + k) * parts + g)];
      const double x = wi[k];
      const std::int32_t q = quantize_value(static_cast<float>(x), p);
      e[k] = (x - static_cast<double>(dequantize_value(q, p))) / d;
      result.values[static_cast<std::size_t>((r0 + k) * in + stored)] = q;
      result.row_loss[static_cast<std::size_t>(r0 + k)] += e[k] * e[k] / 2.0;
    }
  });
  return result;
}

// GptqResult of a finished walk.
inline GptqResult gptq_result(const std::vector<double>& row_loss, const InverseHessianFactor& factor,
                              const GptqOptions& options, std::int64_t group, std::int64_t in) {
  // group: the walk's (the whole row when options.group_size is 0)
  GptqResult result;
  for (double l : row_loss) result.loss += l;
  result.damping = factor.damping;
  result.dead_inputs = static_cast<std::int64_t>(factor.dead.size());
  result.order = factor.order;
  result.permuted_output = options.permuted_output;
  if (options.group_size > 0) {
    result.g_idx.resize(static_cast<std::size_t>(in));
    for (std::int64_t k = 0; k < in; ++k) {
      const std::int64_t column = factor.order[static_cast<std::size_t>(k)];
      result.g_idx[static_cast<std::size_t>(column)] =
          static_cast<std::int32_t>(options.static_groups ? column / group : k / group);
    }
  }
  return result;
}

}  // namespace detail

// GPTQ of weight [out, in] (any strides) with a factor of its input's Hessian made with inverse_hessian_options(
// options); the result in original column order (or processing order with options.permuted_output), readable by
// dequantize, the safetensors convention and the weight-only GEMMs. Validation comes first: every bad argument is
// one Error naming it, and `info` is written only on success.
inline QuantizedTensor gptq_quantize(TensorView<const float> weight, const InverseHessianFactor& factor,
                                     const GptqOptions& options, GptqResult* info = nullptr) {
  const char* fn = "shrink::quant::gptq_quantize";
  detail::check_gptq_args(weight, options, fn);
  const std::int64_t in = weight.size(1);
  detail::check_gptq_factor(factor, options, in, fn);
  const QuantScheme scheme = gptq_scheme(options);
  const QuantRange range = quant_range(scheme);
  const std::int64_t group = options.group_size > 0 ? options.group_size : in;
  detail::GptqWalk<AffineParams> walk =
      detail::gptq_walk<AffineParams>(weight, factor, options, group, group,
                                      [&](const double* v, const double*, std::int64_t count, AffineParams* out) {
                                        const auto [lo, hi] = std::minmax_element(v, v + count);
                                        const ScaleZeroPoint p = scale_zero_point_from_range(
                                            static_cast<float>(*lo), static_cast<float>(*hi), scheme, fn);
                                        *out = AffineParams(p.scale, p.zero_point, range.qmin, range.qmax);
                                      });
  QuantizedTensor t = make_quantized_tensor(weight.shape(), scheme, walk.values, walk.params, fn);
  if (info) *info = detail::gptq_result(walk.row_loss, factor, options, group, in);
  return t;
}

// GPTQ onto one of llama.cpp's block grids (quant/block_grid.hpp): groups are the format's blocks of original columns
// (32; in the K formats the super-blocks of 256, whose blocks' parameters are chosen together by k_super_params when
// the walk reaches the super-block), each block's d (and m) chosen from its values, weighted by 1/U_jj² where
// options.block_scale_search (legacy formats: grid_params_search, else grid_params_from_range; K formats: else
// llama.cpp's weights, k_reference_weights), so every value GPTQ settles on is one the format holds. options.bits,
// symmetry and group_size are not read (the format fixes them); with act_order the groups are static
// (options.static_groups must be true: a block is a run of original columns), and permuted_output is refused. The
// input width must be a multiple of 32 (256 in the K formats).
inline BlockQuantized gptq_quantize_blocks(TensorView<const float> weight, const InverseHessianFactor& factor,
                                           BlockFormat format, const GptqOptions& options, GptqResult* info = nullptr) {
  const char* fn = "shrink::quant::gptq_quantize_blocks";
  const BlockGrid grid = block_grid(format);
  const std::int64_t unit = grid_row_unit(grid);
  GptqOptions o = options;
  o.bits = 4;
  o.symmetry = Symmetry::symmetric;
  o.group_size = unit;
  if (options.permuted_output)
    fail(fn, "options.permuted_output", "true", "false: a block of a GGUF format is a run of original columns");
  if (options.act_order && !options.static_groups)
    fail(fn, "options.static_groups", "false",
         "true with act_order: a block of a GGUF format is a run of original columns");
  if (weight.rank() == 2) require_grid_width(grid, weight.size(1), fn, "weight's input width");
  detail::check_gptq_args(weight, o, fn);
  const std::int64_t in = weight.size(1);
  detail::check_gptq_factor(factor, o, in, fn);
  detail::GptqWalk<GridParams> walk = detail::gptq_walk<GridParams>(
      weight, factor, o, unit, grid.block, [&](const double* v, const double* a, std::int64_t count, GridParams* out) {
        if (grid.super_block > 0) {
          if (o.block_scale_search) return k_super_params(grid, v, a, out, fn);
          double reference[kSuperBlock];
          k_reference_weights(grid, v, reference);
          return k_super_params(grid, v, reference, out, fn);
        }
        if (o.block_scale_search) {
          *out = grid_params_search(grid, v, a, count, fn);
          return;
        }
        const auto [lo, hi] = std::minmax_element(v, v + count);
        *out = grid_params_from_range(grid, static_cast<float>(*lo), static_cast<float>(*hi), fn);
      });
  BlockQuantized t = make_block_quantized(format, weight.size(0), in, walk.values, walk.params);
  if (info) *info = detail::gptq_result(walk.row_loss, factor, o, grid.block, in);
  return t;
}

// GPTQ with the Hessian itself: its factor (inverse_hessian_factor) made first; the arguments are all checked before.
inline QuantizedTensor gptq_quantize(TensorView<const float> weight, const Hessian& hessian, const GptqOptions& options,
                                     GptqResult* info = nullptr) {
  const char* fn = "shrink::quant::gptq_quantize";
  detail::check_gptq_args(weight, options, fn);
  check_hessian(hessian, weight.size(1), fn, "hessian");
  return gptq_quantize(weight, inverse_hessian_factor(hessian, inverse_hessian_options(options), fn), options, info);
}

}  // namespace shrink::quant
