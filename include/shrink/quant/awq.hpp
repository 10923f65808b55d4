// AWQ (Lin et al. 2023, "AWQ: Activation-aware Weight Quantization for LLM Compression and Acceleration"): per-input-
// channel factors s for the Linears that read one input x (q, k, v after the attention norm; gate, up after the MLP
// norm; or one Linear), found by a grid search on the layer output error, so that the channels with large activations
// lose less to round-to-nearest. W·diag(s) is quantized; 1/s folds into whatever produces x (smoothquant.hpp's fold
// functions), so the float model computes the same function.
//
// With calibration rows X [n, in] of x and the Linears' weights W_k [out_k, in]:
//   s_x[j]      = mean over rows |X[t, j]|                                        (ActivationMeanAbsObserver)
//   s_w[j]      = mean over the rows o of every W_k of |W_k[o, j]| / max |W_k[o, group of j]|   (duo_scaling only)
//   for α = i / grid, i = 0 .. grid − 1, in double:
//     r_j       = max(s_x[j], f)^α                       (the paper's form)
//               = max(s_x[j], f)^α / max(s_w[j], f)^(1−α)   (duo_scaling, AutoAWQ's variant)
//     s_j       = float(r_j / sqrt(max_l r_l · min_l r_l))   (centred on 1 geometrically, as the reference code does:
//                                                             round-to-nearest per group is blind to one common factor)
//     W'_k      = Q(W_k·diag(s))·diag(s)⁻¹                  (W_k[o, j]·s_j in float; Q = quantize() then dequantize():
//                                                             per row and group, parameters from the group's [min,
//                                                             max], quantize_value / dequantize_value of
//                                                             core/affine.hpp)
//     loss(α)   = Σ_k mean over rows and outputs of (X·W_kᵀ − X·W'_kᵀ)²
//               = Σ_k tr(ΔW_k H ΔW_kᵀ) / (2·out_k)      with ΔW_k = W_k − W'_k in double, H = (2/n) XᵀX (hessian.hpp)
//   With options.block_format, Q is the block grid's round-to-nearest instead (quant/block_grid.hpp's
//   grid_round_to_nearest: blocks of 32 with d and m from the block's range in fp16, or a K format's super-blocks of
//   256), and awq_quantize_blocks stores W·diag(s) on that grid.
//   the α of least loss wins (ties: the lower α). α = 0 gives s = 1 in the paper's form: plain round-to-nearest, so
//   AWQ's loss is never above RTN's there. The loss through H costs out·in² per grid point instead of n·in·out, and
//   lets a caller stream calibration batches through two observers without keeping X.
// Weight clipping (awq_clip_search, optional, per Linear, after the scale search): for each row and group of W·diag(s)
// and i = 0 .. clip_steps − 1, the group is clamped to ±m_i, m_i = float(max|w_g|) · float(1 − i / clip_grid),
// quantized with parameters from the clamped range, and scored by the group's share of the output error δ·H_gg·δᵀ (δ =
// W[o, g] − Ŵ[o, g]/s_g); the m_i of least error (ties: the lower i, i = 0 is no clip) is kept. This is the reference
// implementation's auto_clip (n_grid 20, max_shrink 0.5), scored on H instead of a token subsample. Decided: f =
// magnitude_floor (1e-5, SmoothQuant's) raises s_x and s_w before the powers, so a channel whose activations were
// always zero gets a finite s > 0 (its weight column shrinks, harmlessly: it only ever meets zeros). A grid point whose
// scaled weight overflows float has loss +inf. Work runs on the current executor in chunks fixed by the problem's size
// (grid points, row chunks), each output written by one chunk: the same bytes on any thread count.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/feature_batch.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/gemm_f64.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/quant/block_grid.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"
#include "shrink/quant/smoothquant.hpp"

namespace shrink::quant {

struct AwqOptions {
  int bits = 4;                          // 2..8: int4/uint4 up to 4 bits, int8/uint8 above (scheme.bits)
  Symmetry symmetry = Symmetry::affine;  // affine: uint4/uint8 with zero points (AWQ's); symmetric: int4/int8
  std::int64_t group_size = 64;          // columns sharing a scale, a divisor of in; 0: one per output row
  int grid = 20;                         // α ∈ {0, 1/grid, …, (grid − 1)/grid}, grid >= 1
  bool duo_scaling = false;              // s = s_x^α / s_w^(1−α) instead of the paper's s = s_x^α
  float magnitude_floor = kSmoothingMagnitudeFloor;  // f: s_x and s_w raised to it before the powers
  std::int64_t max_rows = 0;  // X overloads: rows used, ⌊t·n/max_rows⌋ for t < max_rows; 0: all
  int clip_grid = 20;         // awq_clip_search: m_i = max|w| · (1 − i / clip_grid)
  int clip_steps = 10;        //   for i = 0 .. clip_steps − 1, 1 <= clip_steps <= clip_grid
  // Onto one of llama.cpp's block grids (quant/block_grid.hpp, awq_quantize_blocks): Q = grid_round_to_nearest, groups
  // of 32 (a K format's super-blocks of 256); bits, symmetry and group_size are then the format's (not read).
  std::optional<BlockFormat> block_format;
};

struct AwqResult {
  std::vector<float> scales;     // s [in]: W·diag(s) is quantized (awq_quantize); 1/s folds before the layer
  double alpha = 0.0;            // the α chosen, i / grid
  std::int64_t alpha_index = 0;  // its i
  double loss = 0.0;             // losses[alpha_index]
  std::vector<double> losses;    // per grid point i: Σ_k mean over rows, outputs of (X·W_kᵀ − X·W'_kᵀ)²
  double rtn_loss = 0.0;         // the same with s = 1: round-to-nearest of the weights as they are
  std::vector<float> activation_mean_abs;  // s_x [in] the search used
  std::vector<float> weight_magnitude;     // s_w [in] (duo_scaling), else empty
};

// The storage scheme of AWQ's weights (narrow_int_scheme): 2-4 bits in int4/uint4, 5-8 in int8/uint8, per group along
// axis 1 (or per output row).
inline QuantScheme awq_scheme(const AwqOptions& options) {
  return narrow_int_scheme(options.bits, options.symmetry, options.group_size);
}

// Per-channel mean |x| of activations [..., in] (features last) over every batch: mean_abs()[j] = Σ_t |x_t[j]| / n,
// summed in double row after row. Its state (sum_abs, samples) or its result (a float vector [in]) is what a caller
// keeps per Linear input between calibration and the search. A failed observe() leaves the state as it was.
class ActivationMeanAbsObserver {
 public:
  ActivationMeanAbsObserver() = default;

  void observe(const TensorView<const float>& activations) {
    const std::int64_t features = cpu::check_feature_batch(activations, samples_ > 0 ? features_ : 0,
                                                           "shrink::quant::ActivationMeanAbsObserver::observe");

    if (samples_ == 0) sum_abs_.assign(static_cast<std::size_t>(features), 0.0);
    const std::int64_t stride = cpu::row_stride(activations.strides());
    cpu::for_each_row(activations.shape(), activations.strides(), [&](std::int64_t, std::int64_t offset) {
      const float* x = activations.data() + offset;
      for (std::int64_t j = 0; j < features; ++j) sum_abs_[static_cast<std::size_t>(j)] += std::fabs(x[j * stride]);
    });
    features_ = features;
    samples_ += activations.numel() / features;
  }

  // s_x[j] = Σ_t |x_t[j]| / n, rounded to float.
  std::vector<float> mean_abs() const {
    if (samples_ == 0)
      fail("shrink::quant::ActivationMeanAbsObserver::mean_abs", "no batch observed yet: call observe() first");
    std::vector<float> out(sum_abs_.size());
    for (std::size_t j = 0; j < out.size(); ++j)
      out[j] = static_cast<float>(sum_abs_[j] / static_cast<double>(samples_));
    return out;
  }

  const std::vector<double>& sum_abs() const { return sum_abs_; }
  std::int64_t features() const { return features_; }
  std::int64_t samples() const { return samples_; }  // rows (tokens) observed
  void reset() {
    sum_abs_.clear();
    features_ = 0;
    samples_ = 0;
  }

 private:
  std::vector<double> sum_abs_;
  std::int64_t features_ = 0;
  std::int64_t samples_ = 0;
};

namespace detail {

constexpr std::int64_t kAwqRowChunk = 64;    // weight rows per clip-search task: a constant, not the executor's
constexpr std::int64_t kAwqLossChunk = 256;  // weight rows per rank update of the loss

inline void check_awq_options(const AwqOptions& o, const char* fn) {
  if (o.bits < 2 || o.bits > 8) fail(fn, "options.bits", o.bits, "2..8");
  if (o.symmetry != Symmetry::symmetric && o.symmetry != Symmetry::affine)
    fail(fn, "options.symmetry", static_cast<int>(o.symmetry), "symmetric or affine");
  if (o.group_size < 0) fail(fn, "options.group_size", o.group_size, "0 (per output row) or a positive group size");
  if (o.grid < 1) fail(fn, "options.grid", o.grid, "at least 1 grid point");
  if (!std::isfinite(o.magnitude_floor) || !(o.magnitude_floor > 0.0f))
    fail(fn, "options.magnitude_floor", o.magnitude_floor, "a finite floor > 0");
  if (o.max_rows < 0) fail(fn, "options.max_rows", o.max_rows, "0 (every row) or a positive row count");
  if (o.clip_grid < 1) fail(fn, "options.clip_grid", o.clip_grid, "at least 1");
  if (o.clip_steps < 1 || o.clip_steps > o.clip_grid)
    fail(fn, "options.clip_steps", o.clip_steps, "1.." + std::to_string(o.clip_grid) + " (options.clip_grid)");
}

// One weight [out, in] of a host view, finite, whose `in` the group size divides; returns `in`.
inline std::int64_t check_awq_weight(const TensorView<const float>& w, const AwqOptions& o, const char* fn,
                                     const std::string& argument) {
  require_host_view(w, fn, argument.c_str());
  if (w.rank() != 2 || w.empty())
    fail(fn, (argument + ".shape").c_str(), to_string(w.shape()), "a non-empty Linear weight [out, in]");
  const std::int64_t in = w.size(1);
  if (o.block_format && in % grid_row_unit(block_grid(*o.block_format)) != 0)
    fail(fn, (argument + ".shape").c_str(), to_string(w.shape()),
         "an input width that is a multiple of " + std::to_string(grid_row_unit(block_grid(*o.block_format))) +
             " (the blocks of " + block_format_name(*o.block_format) + ")");
  if (!o.block_format && o.group_size > 0 && in % o.group_size != 0)
    fail(fn, "options.group_size", o.group_size, "a divisor of the weight's input width " + std::to_string(in));
  cpu::require_finite(w, fn, argument.c_str());
  return in;
}

// The Linears of one group: at least one, all of one input width; returns it.
inline std::int64_t check_awq_weights(const std::vector<TensorView<const float>>& weights, const AwqOptions& o,
                                      const char* fn) {
  if (weights.empty()) fail(fn, "weights.size()", 0, "at least one Linear weight [out, in]");
  std::int64_t in = 0;
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const std::string argument = "weights[" + std::to_string(k) + "]";
    const TensorView<const float>& w = weights[k];
    if (k > 0 && w.rank() == 2 && !w.empty() && w.size(1) != in)
      fail(fn, (argument + ".shape").c_str(), to_string(w.shape()),
           std::to_string(in) + " input channels, as weights[0] (the Linears of a group read one input)");
    const std::int64_t width = check_awq_weight(w, o, fn, argument);
    if (k == 0) in = width;
  }
  return in;
}

inline void check_activation_mean_abs(const std::vector<float>& a, std::int64_t in, const char* fn) {
  if (static_cast<std::int64_t>(a.size()) != in)
    fail(fn, "activation_mean_abs.size()", a.size(), "one mean |x| per input channel (" + std::to_string(in) + ")");
  for (std::size_t j = 0; j < a.size(); ++j)
    if (!std::isfinite(a[j]) || !(a[j] >= 0.0f))
      fail(fn, ("activation_mean_abs[" + std::to_string(j) + "]").c_str(), a[j], "a finite mean |x| >= 0");
}

// Calibration rows x [..., in]: host, at least one row, the weights' width, finite.
inline void check_awq_x(const TensorView<const float>& x, std::int64_t in, const char* fn) {
  require_host_view(x, fn, "x");
  if (x.rank() < 1 || x.empty())
    fail(fn, "x.shape", to_string(x.shape()), "at least one calibration row [n, " + std::to_string(in) + "]");
  if (x.size(x.rank() - 1) != in)
    fail(fn, "x.shape", to_string(x.shape()),
         "rows of the weights' input width " + std::to_string(in) + ", features last");
  cpu::require_finite(x, fn, "x");
}

// The observers' view of the rows the options select: all rows, or ⌊t·n/m⌋ for t < m copied into `storage`.
inline TensorView<const float> awq_rows(const TensorView<const float>& x, const AwqOptions& o,
                                        std::vector<float>& storage) {
  const std::int64_t in = x.size(x.rank() - 1), n = x.numel() / in;
  if (o.max_rows == 0 || o.max_rows >= n) return x;
  const std::int64_t m = o.max_rows;
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(n));
  cpu::for_each_row(x.shape(), x.strides(),
                    [&](std::int64_t row, std::int64_t offset) { offsets[static_cast<std::size_t>(row)] = offset; });
  const std::int64_t stride = cpu::row_stride(x.strides());
  storage.resize(static_cast<std::size_t>(m * in));
  for (std::int64_t t = 0; t < m; ++t) {
    const float* row = x.data() + offsets[static_cast<std::size_t>(t * n / m)];
    for (std::int64_t j = 0; j < in; ++j) storage[static_cast<std::size_t>(t * in + j)] = row[j * stride];
  }
  return TensorView<const float>(storage.data(), Shape{m, in});
}

// The per-group round-to-nearest AWQ scores and stores: the scheme's (quantize() then dequantize()) or, with
// options.block_format, the block grid's (grid_round_to_nearest's parameters, GridParams' formulas).
struct GroupRounding {
  QuantScheme scheme;
  QuantRange range;
  std::optional<BlockGrid> grid;
};

inline GroupRounding group_rounding(const AwqOptions& o) {
  GroupRounding r;
  if (o.block_format) {
    r.grid = block_grid(*o.block_format);
  } else {
    r.scheme = narrow_int_scheme(o.bits, o.symmetry, o.group_size);
    r.range = quant_range(r.scheme);
  }
  return r;
}

// The options with the block format's group (32; a K format's super-block, 256) in group_size when it has one.
inline AwqOptions resolved(const AwqOptions& o) {
  AwqOptions r = o;
  if (o.block_format) r.group_size = grid_row_unit(block_grid(*o.block_format));
  return r;
}

// Round-to-nearest of values v[0, in) as `rounding` does it for one row of groups of `group` values, each group's
// parameters from its [min, max] clamped to [−clip[g], clip[g]] when `clip` is given (the group's values clamped alike
// before quantizing). False when a value is not finite (nothing sensible to quantize).
inline bool fake_quantize_row(const float* v, std::int64_t in, std::int64_t group, const GroupRounding& rounding,
                              const float* clip, float* out, const char* fn) {
  for (std::int64_t g0 = 0; g0 < in; g0 += group) {
    float lo = v[g0], hi = v[g0];
    for (std::int64_t j = g0; j < g0 + group; ++j) {
      if (!std::isfinite(v[j])) return false;
      lo = std::min(lo, v[j]);
      hi = std::max(hi, v[j]);
    }
    const float m = clip ? clip[g0 / group] : 0.0f;
    if (clip) {
      lo = std::min(std::max(lo, -m), m);
      hi = std::min(std::max(hi, -m), m);
    }
    auto round_group = [&](const auto& params) {
      for (std::int64_t j = g0; j < g0 + group; ++j) {
        const float w = clip ? std::min(std::max(v[j], -m), m) : v[j];
        out[j] = dequantize_value(quantize_value(w, params), params);
      }
    };
    if (rounding.grid && rounding.grid->super_block > 0) {  // group: one super-block, its blocks chosen together
      const BlockGrid& grid = *rounding.grid;
      double x[kSuperBlock], a[kSuperBlock];
      GridParams blocks[kSuperBlock / 16];
      for (std::int64_t j = 0; j < group; ++j) x[j] = clip ? std::min(std::max(v[g0 + j], -m), m) : v[g0 + j];
      k_reference_weights(grid, x, a);
      k_super_params(grid, x, a, blocks, fn);
      for (std::int64_t j = 0; j < group; ++j) {
        const GridParams& p = blocks[j / grid.block];
        out[g0 + j] = dequantize_value(quantize_value(static_cast<float>(x[j]), p), p);
      }
    } else if (rounding.grid) {
      round_group(grid_params_from_range(*rounding.grid, lo, hi, fn));
    } else {
      const ScaleZeroPoint p = scale_zero_point_from_range(lo, hi, rounding.scheme, fn);
      round_group(AffineParams(p.scale, p.zero_point, rounding.range.qmin, rounding.range.qmax));
    }
  }
  return true;
}

// s_w (see the top of this file) of checked weights, rounded to float.
inline std::vector<float> weight_magnitude_unchecked(const std::vector<TensorView<const float>>& weights,
                                                     std::int64_t group) {
  const std::int64_t in = weights[0].size(1);
  std::vector<double> sum(static_cast<std::size_t>(in), 0.0);
  std::int64_t rows = 0;
  for (const TensorView<const float>& w : weights) {
    const std::int64_t stride = cpu::row_stride(w.strides());
    cpu::for_each_row(w.shape(), w.strides(), [&](std::int64_t, std::int64_t offset) {
      const float* v = w.data() + offset;
      for (std::int64_t g0 = 0; g0 < in; g0 += group) {
        float amax = 0.0f;
        for (std::int64_t j = g0; j < g0 + group; ++j) amax = std::max(amax, std::fabs(v[j * stride]));
        if (amax == 0.0f) continue;  // an all-zero group adds 0
        for (std::int64_t j = g0; j < g0 + group; ++j)
          sum[static_cast<std::size_t>(j)] += static_cast<double>(std::fabs(v[j * stride])) / amax;
      }
    });
    rows += w.size(0);
  }
  std::vector<float> out(sum.size());
  for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(sum[j] / static_cast<double>(rows));
  return out;
}

inline Eigen::MatrixXd hessian_matrix(const Hessian& h) {
  const Eigen::Index n = static_cast<Eigen::Index>(h.features);
  Eigen::MatrixXd m(n, n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < n; ++j) m(i, j) = h.values[static_cast<std::size_t>(i * n + j)];
  return m;
}

// Σ_k tr(ΔW_k H ΔW_kᵀ) / (2·out_k) for W'_k = Q(W_k·diag(s))·diag(s)⁻¹, as ⟨H, G⟩ / 2 with G = Σ_k ΔW_kᵀΔW_k / out_k
// (a product over the lower triangle on cpu/gemm_f64.hpp, about in²·out/2 multiply-adds: half of ΔW·H); +inf when a
// scaled weight is not finite.
inline double awq_group_loss(const std::vector<TensorView<const float>>& weights, const std::vector<float>& s,
                             const Eigen::MatrixXd& h, const GroupRounding& rounding, std::int64_t group,
                             const char* fn) {
  const std::int64_t in = static_cast<std::int64_t>(s.size());
  std::vector<float> scaled(static_cast<std::size_t>(in)), w_hat(static_cast<std::size_t>(in));
  Eigen::MatrixXd d(in, kAwqLossChunk);  // ΔWᵀ, a chunk of rows at a time
  Eigen::MatrixXd g = Eigen::MatrixXd::Zero(in, in);
  Eigen::MatrixXd minus_gk(in, in);  // −ΔW_kᵀΔW_k of one weight, lower triangle (cpu/gemm_f64.hpp subtracts)
  const std::ptrdiff_t ld = static_cast<std::ptrdiff_t>(in);
  for (const TensorView<const float>& w : weights) {
    const std::int64_t out = w.size(0), stride = w.stride(1);
    minus_gk.setZero();
    for (std::int64_t r0 = 0; r0 < out; r0 += kAwqLossChunk) {
      const std::int64_t rows = std::min(kAwqLossChunk, out - r0);
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* v = w.data() + (r0 + r) * w.stride(0);
        for (std::int64_t j = 0; j < in; ++j)
          scaled[static_cast<std::size_t>(j)] = v[j * stride] * s[static_cast<std::size_t>(j)];
        if (!fake_quantize_row(scaled.data(), in, group, rounding, nullptr, w_hat.data(), fn))
          return std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < in; ++j)
          d(j, r) = static_cast<double>(v[j * stride]) -
                    static_cast<double>(w_hat[static_cast<std::size_t>(j)]) / s[static_cast<std::size_t>(j)];
      }
      cpu::gemm_f64_subtract(ld, ld, rows, d.data(), ld, cpu::GemmF64B{d.data(), ld, 1}, minus_gk.data(), ld,
                             cpu::GemmF64Part::lower);
    }
    g.triangularView<Eigen::Lower>() -= minus_gk / static_cast<double>(out);
  }
  // ⟨H, G⟩ over the lower triangle: the diagonal once, the rest twice.
  double total = 0.0;
  for (Eigen::Index j = 0; j < in; ++j) {
    double column = 0.5 * h(j, j) * g(j, j);
    for (Eigen::Index i = j + 1; i < in; ++i) column += h(i, j) * g(i, j);
    total += column;
  }
  return std::isfinite(total) ? total : std::numeric_limits<double>::infinity();
}

}  // namespace detail

// s_w[j] = mean over the rows o of every weight of |W[o, j]| / max |W[o, group of j]| (0 for an all-zero group), the
// weight magnitude of duo scaling; weights [out_k, in] of one input width, group_size 0: the whole row.
inline std::vector<float> awq_weight_magnitude(const std::vector<TensorView<const float>>& weights,
                                               std::int64_t group_size) {
  const char* fn = "shrink::quant::awq_weight_magnitude";
  AwqOptions o;
  o.group_size = group_size;
  detail::check_awq_options(o, fn);
  const std::int64_t in = detail::check_awq_weights(weights, o, fn);
  return detail::weight_magnitude_unchecked(weights, group_size > 0 ? group_size : in);
}

// AWQ's s for one α (see the top of this file): weight_magnitude empty for the paper's s_x^α, else duo scaling.
inline std::vector<float> awq_scales(const std::vector<float>& activation_mean_abs,
                                     const std::vector<float>& weight_magnitude, double alpha,
                                     float magnitude_floor = kSmoothingMagnitudeFloor) {
  const char* fn = "shrink::quant::awq_scales";
  if (!(alpha >= 0.0 && alpha <= 1.0)) fail(fn, "alpha", alpha, "a value in [0, 1]");
  if (!std::isfinite(magnitude_floor) || !(magnitude_floor > 0.0f))
    fail(fn, "magnitude_floor", magnitude_floor, "a finite floor > 0");
  if (activation_mean_abs.empty()) fail(fn, "activation_mean_abs.size()", 0, "at least one channel");
  const std::int64_t in = static_cast<std::int64_t>(activation_mean_abs.size());
  detail::check_activation_mean_abs(activation_mean_abs, in, fn);
  const bool duo = !weight_magnitude.empty();
  if (duo && weight_magnitude.size() != activation_mean_abs.size())
    fail(fn, "weight_magnitude.size()", weight_magnitude.size(),
         "0 (the paper's s_x^alpha) or one value per input channel (" + std::to_string(in) + ")");
  for (std::size_t j = 0; j < weight_magnitude.size(); ++j)
    if (!std::isfinite(weight_magnitude[j]) || !(weight_magnitude[j] >= 0.0f))
      fail(fn, ("weight_magnitude[" + std::to_string(j) + "]").c_str(), weight_magnitude[j], "a finite value >= 0");
  const double f = magnitude_floor;
  std::vector<double> r(activation_mean_abs.size());
  for (std::size_t j = 0; j < r.size(); ++j) {
    r[j] = std::pow(std::max(static_cast<double>(activation_mean_abs[j]), f), alpha);
    if (duo) r[j] /= std::pow(std::max(static_cast<double>(weight_magnitude[j]), f), 1.0 - alpha);
  }
  const double centre = std::sqrt(*std::max_element(r.begin(), r.end()) * *std::min_element(r.begin(), r.end()));
  std::vector<float> s(r.size());
  for (std::size_t j = 0; j < s.size(); ++j) {
    s[j] = static_cast<float>(r[j] / centre);
    if (!std::isfinite(s[j]) || !(s[j] >= FLT_MIN))
      fail(fn, ("scales[" + std::to_string(j) + "]").c_str(), s[j],
           "a factor that is a normal float (mean |x| " + to_text(activation_mean_abs[j]) + " against the other " +
               "channels' spans more than float can hold)");
  }
  return s;
}

// The grid search from a Hessian H = (2/n) XᵀX of the group's input (HessianObserver) and s_x
// (ActivationMeanAbsObserver::mean_abs) of the same rows. Every bad argument is one Error naming it.
inline AwqResult awq_search(const std::vector<TensorView<const float>>& weights, const Hessian& hessian,
                            const std::vector<float>& activation_mean_abs, const AwqOptions& awq_options) {
  const char* fn = "shrink::quant::awq_search";
  const AwqOptions options = detail::resolved(awq_options);
  detail::check_awq_options(options, fn);
  const std::int64_t in = detail::check_awq_weights(weights, options, fn);
  check_hessian(hessian, in, fn, "hessian");
  detail::check_activation_mean_abs(activation_mean_abs, in, fn);
  const detail::GroupRounding rounding = detail::group_rounding(options);
  const std::int64_t group = options.group_size > 0 ? options.group_size : in;

  AwqResult result;
  result.activation_mean_abs = activation_mean_abs;
  if (options.duo_scaling) result.weight_magnitude = detail::weight_magnitude_unchecked(weights, group);
  // Every candidate's s first (cheap, and the only step that can fail on extreme magnitudes); the last is RTN's.
  const std::int64_t grid = options.grid;
  std::vector<std::vector<float>> candidates(static_cast<std::size_t>(grid + 1));
  for (std::int64_t i = 0; i < grid; ++i)
    candidates[static_cast<std::size_t>(i)] =
        awq_scales(activation_mean_abs, result.weight_magnitude, static_cast<double>(i) / static_cast<double>(grid),
                   options.magnitude_floor);
  candidates[static_cast<std::size_t>(grid)].assign(static_cast<std::size_t>(in), 1.0f);

  const Eigen::MatrixXd h = detail::hessian_matrix(hessian);
  // In the paper's form α = 0 is s = 1 already; duo scaling needs RTN as one more candidate.
  const std::int64_t tasks = options.duo_scaling ? grid + 1 : grid;
  std::vector<double> losses(static_cast<std::size_t>(grid + 1));
  parallel_for(tasks, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t)
      losses[static_cast<std::size_t>(t)] =
          detail::awq_group_loss(weights, candidates[static_cast<std::size_t>(t)], h, rounding, group, fn);
  });
  result.rtn_loss = options.duo_scaling ? losses[static_cast<std::size_t>(grid)] : losses[0];
  losses.resize(static_cast<std::size_t>(grid));

  std::int64_t best = 0;
  for (std::int64_t i = 1; i < grid; ++i)
    if (losses[static_cast<std::size_t>(i)] < losses[static_cast<std::size_t>(best)]) best = i;
  result.alpha_index = best;
  result.alpha = static_cast<double>(best) / static_cast<double>(grid);
  result.loss = losses[static_cast<std::size_t>(best)];
  result.losses = std::move(losses);
  result.scales = std::move(candidates[static_cast<std::size_t>(best)]);
  return result;
}

// The grid search from calibration rows x [..., in] (features last) of the group's input; options.max_rows caps the
// rows used (evenly spread). Equal to the Hessian form on HessianObserver and ActivationMeanAbsObserver of those rows.
inline AwqResult awq_search(const std::vector<TensorView<const float>>& weights, TensorView<const float> x,
                            const AwqOptions& options) {
  const char* fn = "shrink::quant::awq_search";
  detail::check_awq_options(options, fn);
  const std::int64_t in = detail::check_awq_weights(weights, options, fn);
  detail::check_awq_x(x, in, fn);
  std::vector<float> storage;
  const TensorView<const float> rows = detail::awq_rows(x, options, storage);
  HessianObserver h;
  h.observe(rows);
  ActivationMeanAbsObserver a;
  a.observe(rows);
  return awq_search(weights, h.hessian(), a.mean_abs(), options);
}

// The clip search for one Linear weight [out, in] of the group, with the search's scales and the Hessian of its input
// (see the top of this file). Returns the clip bounds m [out, groups] (row-major; groups = in / group_size, 1 per row
// when group_size is 0) for awq_quantize.
inline std::vector<float> awq_clip_search(TensorView<const float> weight, const Hessian& hessian,
                                          const std::vector<float>& scales, const AwqOptions& awq_options) {
  const char* fn = "shrink::quant::awq_clip_search";
  const AwqOptions options = detail::resolved(awq_options);
  detail::check_awq_options(options, fn);
  const std::int64_t in = detail::check_awq_weight(weight, options, fn, "weight");
  detail::require_scales(scales, in, fn);
  check_hessian(hessian, in, fn, "hessian");
  const detail::GroupRounding rounding = detail::group_rounding(options);
  const std::int64_t out = weight.size(0), group = options.group_size > 0 ? options.group_size : in;
  const std::int64_t groups = in / group, steps = options.clip_steps;
  const Eigen::MatrixXd h = detail::hessian_matrix(hessian);
  std::vector<float> ratio(static_cast<std::size_t>(steps));
  for (std::int64_t i = 0; i < steps; ++i)
    ratio[static_cast<std::size_t>(i)] =
        static_cast<float>(1.0 - static_cast<double>(i) / static_cast<double>(options.clip_grid));

  std::vector<float> clip(static_cast<std::size_t>(out * groups));
  parallel_for(out, detail::kAwqRowChunk, [&](std::int64_t r0, std::int64_t r1) {
    const Eigen::Index g = static_cast<Eigen::Index>(group);
    std::vector<float> scaled(static_cast<std::size_t>(group)), w_hat(static_cast<std::size_t>(group));
    Eigen::MatrixXd d((r1 - r0) * steps, g), p((r1 - r0) * steps, g);
    std::vector<float> bound(static_cast<std::size_t>((r1 - r0) * steps));
    for (std::int64_t gi = 0; gi < groups; ++gi) {
      const std::int64_t c0 = gi * group;
      for (std::int64_t r = r0; r < r1; ++r) {
        const float* v = weight.data() + r * weight.stride(0) + c0 * weight.stride(1);
        float amax = 0.0f;
        for (std::int64_t j = 0; j < group; ++j) {
          scaled[static_cast<std::size_t>(j)] = v[j * weight.stride(1)] * scales[static_cast<std::size_t>(c0 + j)];
          amax = std::max(amax, std::fabs(scaled[static_cast<std::size_t>(j)]));
        }
        for (std::int64_t i = 0; i < steps; ++i) {
          const std::int64_t k = (r - r0) * steps + i;
          const float m = amax * ratio[static_cast<std::size_t>(i)];
          bound[static_cast<std::size_t>(k)] = m;
          if (!detail::fake_quantize_row(scaled.data(), group, group, rounding, &m, w_hat.data(), fn))
            fail(fn, "scales", "factors",
                 "a scaled weight W[o, j]·s_j that is finite in float (row " + std::to_string(r) + " overflowed)");
          for (std::int64_t j = 0; j < group; ++j)
            d(k, j) =
                static_cast<double>(v[j * weight.stride(1)]) -
                static_cast<double>(w_hat[static_cast<std::size_t>(j)]) / scales[static_cast<std::size_t>(c0 + j)];
        }
      }
      p.noalias() = d * h.block(c0, c0, g, g);
      const Eigen::VectorXd err = p.cwiseProduct(d).rowwise().sum();
      for (std::int64_t r = r0; r < r1; ++r) {
        std::int64_t best = 0;
        for (std::int64_t i = 1; i < steps; ++i)
          if (err((r - r0) * steps + i) < err((r - r0) * steps + best)) best = i;
        clip[static_cast<std::size_t>(r * groups + gi)] = bound[static_cast<std::size_t>((r - r0) * steps + best)];
      }
    }
  });
  return clip;
}

// The clip search from calibration rows x [..., in] of the Linear's input (options.max_rows as in awq_search).
inline std::vector<float> awq_clip_search(TensorView<const float> weight, TensorView<const float> x,
                                          const std::vector<float>& scales, const AwqOptions& options) {
  const char* fn = "shrink::quant::awq_clip_search";
  detail::check_awq_options(options, fn);
  const std::int64_t in = detail::check_awq_weight(weight, options, fn, "weight");
  detail::require_scales(scales, in, fn);
  detail::check_awq_x(x, in, fn);
  std::vector<float> storage;
  HessianObserver h;
  h.observe(detail::awq_rows(x, options, storage));
  return awq_clip_search(weight, h.hessian(), scales, options);
}

namespace detail {

// W·diag(s) [out, in] row-major, each group clamped to ±clip_max[o, g] when clip_max is given; every argument checked.
inline std::vector<float> awq_scaled_weight(const TensorView<const float>& weight, const std::vector<float>& scales,
                                            const AwqOptions& options, const std::vector<float>& clip_max,
                                            const char* fn) {
  check_awq_options(options, fn);
  const std::int64_t in = check_awq_weight(weight, options, fn, "weight");
  require_scales(scales, in, fn);
  const std::int64_t out = weight.size(0), group = options.group_size > 0 ? options.group_size : in;
  const std::int64_t groups = in / group;
  if (!clip_max.empty() && static_cast<std::int64_t>(clip_max.size()) != out * groups)
    fail(fn, "clip_max.size()", clip_max.size(),
         "0 (no clipping) or one bound per output row and group (" + std::to_string(out * groups) + ")");
  for (std::size_t k = 0; k < clip_max.size(); ++k)
    if (!std::isfinite(clip_max[k]) || !(clip_max[k] >= 0.0f))
      fail(fn, ("clip_max[" + std::to_string(k) + "]").c_str(), clip_max[k], "a finite bound >= 0");
  std::vector<float> scaled(static_cast<std::size_t>(out * in));
  for (std::int64_t r = 0; r < out; ++r)
    for (std::int64_t j = 0; j < in; ++j) {
      float v = weight(r, j) * scales[static_cast<std::size_t>(j)];
      if (!clip_max.empty()) {
        const float m = clip_max[static_cast<std::size_t>(r * groups + j / group)];
        v = std::min(std::max(v, -m), m);
      }
      if (!std::isfinite(v))
        fail(fn, ("scales[" + std::to_string(j) + "]").c_str(), scales[static_cast<std::size_t>(j)],
             "a factor that keeps W[" + std::to_string(r) + ", " + std::to_string(j) + "]·s_j finite in float");
      scaled[static_cast<std::size_t>(r * in + j)] = v;
    }
  return scaled;
}

}  // namespace detail

// quantize(W·diag(s), awq_scheme(options)): round-to-nearest per group of the scaled weight [out, in], each group first
// clamped to ±clip_max[o, g] when clip_max (from awq_clip_search, [out, groups]) is given. Dequantized values divided
// by s_j (or s folded before the layer, smoothquant.hpp) give W'. options.block_format is refused here
// (awq_quantize_blocks writes the grid).
inline QuantizedTensor awq_quantize(TensorView<const float> weight, const std::vector<float>& scales,
                                    const AwqOptions& options, const std::vector<float>& clip_max = {}) {
  const char* fn = "shrink::quant::awq_quantize";
  if (options.block_format)
    fail(fn, "options.block_format", block_format_name(*options.block_format),
         "none (awq_quantize_blocks quantizes onto a block grid)");
  const std::vector<float> scaled = detail::awq_scaled_weight(weight, scales, options, clip_max, fn);
  return quantize(TensorView<const float>(scaled.data(), weight.shape()), awq_scheme(options));
}

// grid_round_to_nearest(W·diag(s)) onto options.block_format (required), each block first clamped to ±clip_max[o, b]
// when clip_max (awq_clip_search with the same options, [out, in / 32], or [out, in / 256] in a K format) is given.
inline BlockQuantized awq_quantize_blocks(TensorView<const float> weight, const std::vector<float>& scales,
                                          const AwqOptions& awq_options, const std::vector<float>& clip_max = {}) {
  const char* fn = "shrink::quant::awq_quantize_blocks";
  if (!awq_options.block_format) fail(fn, "options.block_format", "none", "a block format (quant/block_grid.hpp)");
  const AwqOptions options = detail::resolved(awq_options);
  const std::vector<float> scaled = detail::awq_scaled_weight(weight, scales, options, clip_max, fn);
  return grid_round_to_nearest(*options.block_format, scaled.data(), weight.size(0), weight.size(1));
}

}  // namespace shrink::quant
