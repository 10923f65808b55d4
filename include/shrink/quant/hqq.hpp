// HQQ (Badri & Shaji 2023, "Half-Quadratic Quantization of Large Machine Learning Models"): calibration-free
// quantization of a Linear weight [out, in], each group's scale and zero point chosen to minimise an lp "norm"
// (p < 1) of its reconstruction error by half-quadratic splitting, from the weights alone.
//
// The paper's problem for one group of values w, with Q(w) = clamp(round(w / s + z)) and Q⁻¹(q) = s·(q − z):
//   min over z, W_e of  φ(W_e) + β/2 ‖W_e − (w − Q⁻¹(Q(w)))‖²,   φ(x) = Σ |x_i|^p,
// solved from the min/max parameters by alternating, with the scale s fixed:
//   (1) W_e = shrink_p(w − ŵ, β),  shrink_p(x, β) = sign(x)·max(|x| − |x|^(p−1) / β, 0)   (ŵ = Q⁻¹(Q(w)))
//   (2) z   = mean(q − (w − W_e) / s)        the minimiser of ‖s·(q − z) − (w − W_e)‖² with q = Q(w) held
//   (3) β  ← κ·β
// stopping when the error stops decreasing. The defaults are those of the paper's implementation: p = 0.7, β = 10,
// κ = 1.01, 20 iterations.
//
// Two forms (HqqOptions::fractional_zero_point):
// - fractional (the default, the paper's): z is a float, kept unrounded (scheme.float_zero_point, QParams::
//   float_zero_point), and the dequantized value is (float(q) − z)·s (core/affine.hpp's FractionalAffineParams). Read
//   by quant::dequantize / quantize, cpu::pack_weight_int4 / linear_weight_only and the model-file convention (an F32
//   `_zero_point`, io/quant_record.hpp); refused by every consumer of integer zero points (quant::validate_qparams:
//   the int8 layers, the CUDA paths, fake_quantize; the compressed-tensors export).
// - integer (fractional_zero_point = false): shrink's integer zero points (qparams.hpp: real = s·(q − zp), zp in
//   [qmin, qmax]), read by every consumer. With an integer zp the values s·(q − zp) = s·clamp(round(w / s), qmin − zp,
//   qmax − zp) are multiples of s whatever zp is: moving zp only moves the clamp window, so step (2) alone, rounded,
//   gives back round-to-nearest. Decided: step (2) solves the same quadratic subproblem for both parameters, in closed
//   form and in integers, by one pass of coordinate descent:
//     (2a) zp = clamp(nearbyint(mean(q − t / s)), qmin, qmax),  t = w − W_e: the exact integer minimiser, as the
//          quadratic is G·s²·(zp − z*)² + const in zp (nearest integer to z*, clamped: it is convex)
//     (2b) s  = float(Σ (q − zp)·t / Σ (q − zp)²): the least-squares scale given q and the new zp, kept when the
//          denominator is > 0 and the result is finite and >= FLT_EPSILON (optimize_scale; when false, (2a) alone)
//   Measured in docs/quantization.md: below the fractional form's weight error at 2-3 bits, above it at 4, and on
//   SmolLM2-135M at 4 bits worse than round-to-nearest in perplexity where the fractional form is better.
//
// As implemented, per group (G values of one row, or the whole row when group_size is 0), independently:
//   s, zp   = scale_zero_point_from_range(min, max) of the group (affine, float32): round-to-nearest's parameters;
//             z = float(zp) (fractional form)
//   then for step 0, 1, ..., iterations:
//     q = quantize_value(w, params), ŵ = dequantize_value(q, params)   core/affine.hpp's formulas in float32:
//             integer:    q = clamp(nearbyint(w·(1/s)) + zp),           ŵ = float(q − zp)·s
//             fractional: q = clamp(nearbyint(float(w·(1/s)) + z)),     ŵ = float(float(q) − z)·s
//     d = w − ŵ,  a = |d|^(p−1) (0 where d = 0),  φ = Σ |d|·a           (double, in column order)
//     step > 0 and φ not below the best: stop (that step's parameters are dropped); else they are the best
//     step < iterations: W_e = sign(d)·max(|d| − a / β, 0), t = w − W_e, then
//             fractional: z = float(mean(q − t / s))    (the sum in double, in column order; rounded once to float)
//             integer:    (2a), (2b)
//           β ← κ·β
// so the result is never worse in φ than its step 0 (round-to-nearest's parameters; in the fractional form
// float(w·(1/s)) + z is one more rounding than round-to-nearest's, which can move a value lying within an ulp of a
// tie). The integers stored are quantize_value(w, best parameters). The fractional z is not clamped: a group whose
// minimum is > 0 starts at zp = qmin and may move below it (measured on SmolLM2-135M in docs/quantization.md). φ, the
// shrinkage, the means and sums are in double; q and ŵ in float by the library's own formulas (core/affine.hpp). HQQ
// is not scale-invariant: scaling W by c acts as β·c^(2−p) (with β = 10, p = 0.7, residuals below β^(−1/(2−p)) ≈
// 0.17 are not shrunk at all).
// Decided as GPTQ: group_size must divide `in` (an Error otherwise). Rows run in fixed chunks on the current
// executor and every group is independent: the bytes do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/quant/block_grid.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct HqqOptions {
  int bits = 4;                  // 2..8: uint4 up to 4 bits, uint8 above (scheme.bits below the dtype's width)
  std::int64_t group_size = 64;  // columns sharing a scale and zero point, a divisor of in; 0: one per output row
  double lp_norm = 0.7;          // p of φ = Σ |w − ŵ|^p, in (0, 1]
  double beta = 10.0;            // β of the first shrinkage, > 0
  double kappa = 1.01;           // β ← κ·β after each step, > 0
  int iterations = 20;           // parameter updates at most per group, >= 1
  // true: the paper's form, a fractional zero point (a float, scheme.float_zero_point) with min/max's scale kept;
  // false: an integer zero point, for consumers that read only integer zero points (see above).
  bool fractional_zero_point = true;
  bool optimize_scale = true;  // integer form only: (2b), the least-squares scale; false: the zero point alone
};

struct HqqResult {
  double initial_error = 0.0;        // Σ over groups of φ at step 0 (min/max parameters, in the form's formula)
  double final_error = 0.0;          // Σ over groups of φ with the parameters kept (<= initial_error)
  int iterations_run = 0;            // the most updates a group evaluated (<= options.iterations)
  std::int64_t groups = 0;           // groups quantized (out · in / group)
  std::int64_t groups_improved = 0;  // groups whose parameters differ from round-to-nearest's
};

// The storage scheme of HQQ's output: affine uint4 for 2-4 bits, uint8 for 5-8, with scheme.bits set below the
// dtype's width; per_group along axis 1, or per_channel along axis 0 when group_size is 0; float_zero_point as
// options.fractional_zero_point.
inline QuantScheme hqq_scheme(const HqqOptions& options) {
  const QuantDtype dtype = options.bits <= 4 ? QuantDtype::uint4 : QuantDtype::uint8;
  QuantScheme s = options.group_size > 0 ? QuantScheme::per_group(dtype, Symmetry::affine, 1, options.group_size)
                                         : QuantScheme::per_channel(dtype, Symmetry::affine, 0);
  s.bits = options.bits == bit_width(dtype) ? 0 : options.bits;
  s.float_zero_point = options.fractional_zero_point;
  return s;
}

namespace detail {

constexpr std::int64_t kHqqRowChunk = 16;  // rows per task: a constant, so chunks do not follow the executor

inline void check_hqq_args(const TensorView<const float>& weight, const HqqOptions& o, const char* fn) {
  if (o.bits < 2 || o.bits > 8) fail(fn, "options.bits", o.bits, "2..8");
  if (o.group_size < 0) fail(fn, "options.group_size", o.group_size, "0 (per output row) or a positive group size");
  if (!(o.lp_norm > 0.0 && o.lp_norm <= 1.0)) fail(fn, "options.lp_norm", o.lp_norm, "p in (0, 1]");
  if (!(o.beta > 0.0) || !std::isfinite(o.beta)) fail(fn, "options.beta", o.beta, "a finite value > 0");
  if (!(o.kappa > 0.0) || !std::isfinite(o.kappa)) fail(fn, "options.kappa", o.kappa, "a finite value > 0");
  if (o.iterations < 1) fail(fn, "options.iterations", o.iterations, "at least 1");
  require_host_view(weight, fn, "weight");
  if (weight.rank() != 2 || weight.empty())
    fail(fn, "weight.shape", to_string(weight.shape()), "a non-empty Linear weight [out, in]");
  const std::int64_t in = weight.size(1);
  if (o.group_size > 0 && in % o.group_size != 0)
    fail(fn, "options.group_size", o.group_size, "a divisor of the weight's input width " + std::to_string(in));
  cpu::require_finite(weight, fn, "weight");
}

struct HqqGroup {
  float scale = 1.0f;
  float zero_point = 0.0f;  // the integer form's holds an integer
  double initial_error = 0.0;
  double final_error = 0.0;
  int updates = 0;    // updates evaluated
  bool kept = false;  // an update was kept: the parameters differ from round-to-nearest's
};

// The element formula of each form: core/affine.hpp's, integer or fractional zero point.
template <class Params>
Params hqq_params(float scale, float zero_point, const QuantRange& range) {
  if constexpr (std::is_same<Params, AffineParams>::value)
    return AffineParams(scale, static_cast<std::int32_t>(zero_point), range.qmin, range.qmax);
  else
    return FractionalAffineParams(scale, zero_point, range.qmin, range.qmax);
}

// Step (1) of the file comment for parameters `params`: q[i] = the code of w[i], t[i] = w[i] − W_e[i]; returns φ.
template <class Params>
double hqq_residuals(const float* w, std::int64_t n, const Params& params, double pm1, double beta, double* q,
                     double* t) {
  double error = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int32_t qi = quantize_value(w[i], params);
    const double d = static_cast<double>(w[i]) - static_cast<double>(dequantize_value(qi, params));
    const double a = d == 0.0 ? 0.0 : std::pow(std::fabs(d), pm1);
    error += std::fabs(d) * a;
    const double shrunk = std::fabs(d) - a / beta;  // (1): W_e = sign(d)·max(|d| − a/β, 0)
    t[i] = static_cast<double>(w[i]) - (shrunk > 0.0 ? std::copysign(shrunk, d) : 0.0);
    q[i] = qi;
  }
  return error;
}

// HQQ of the n values w (see the header comment), Params: AffineParams (the integer form) or FractionalAffineParams
// (the paper's); q, t: n scratch values each.
template <class Params>
HqqGroup hqq_group(const float* w, std::int64_t n, const QuantScheme& scheme, const QuantRange& range,
                   const HqqOptions& o, double* q, double* t, const char* fn) {
  constexpr bool fractional = std::is_same<Params, FractionalAffineParams>::value;
  const auto [lo, hi] = std::minmax_element(w, w + n);
  const ScaleZeroPoint p0 = scale_zero_point_from_range(*lo, *hi, scheme, fn);
  const double pm1 = o.lp_norm - 1.0;
  HqqGroup best;
  float s = p0.scale;
  float z = static_cast<float>(p0.zero_point);
  double beta = o.beta;
  for (int step = 0;; ++step) {
    const Params params = hqq_params<Params>(s, z, range);
    const double error = hqq_residuals(w, n, params, pm1, beta, q, t);
    if (step == 0) {
      best.initial_error = error;
    } else {
      best.updates = step;
      if (!(error < best.final_error)) break;
      best.kept = true;
    }
    best.final_error = error;
    best.scale = s;
    best.zero_point = z;
    if (step == o.iterations) break;

    // (2) the zero point minimising ‖s·(q − z) − t‖²: mean(q − t / s), rounded once to float (fractional) or to the
    // nearest integer inside [qmin, qmax] (the integer form's (2a)).
    const double sd = s;
    double zsum = 0.0;
    for (std::int64_t i = 0; i < n; ++i) zsum += q[i] - t[i] / sd;
    const double mean = zsum / static_cast<double>(n);
    if constexpr (fractional) {
      z = static_cast<float>(mean);
    } else {
      z = static_cast<float>(std::min<double>(std::max<double>(std::nearbyint(mean), range.qmin), range.qmax));
      // (2b) the least-squares scale given q and zp.
      if (o.optimize_scale) {
        double num = 0.0, den = 0.0;
        for (std::int64_t i = 0; i < n; ++i) {
          const double c = q[i] - static_cast<double>(z);
          num += c * t[i];
          den += c * c;
        }
        if (den > 0.0) {
          const float candidate = static_cast<float>(num / den);
          if (std::isfinite(candidate) && candidate >= FLT_EPSILON) s = candidate;
        }
      }
    }
    beta *= o.kappa;
  }
  return best;
}

// HQQ of one block of n values w on a block grid (see the header comment): the loop above from the parameters
// `start`, step (2) on the grid's free parameter, stored as the format stores it by store(d, m) -> GridParams (legacy:
// d and m rounded to fp16; K: the nearest block code on the super-block's scale), stopping where it cannot be stored
// (a non-finite d) or no longer lowers the error; the best parameters into *kept.
template <class Store>
HqqGroup hqq_grid_group(const float* w, std::int64_t n, const BlockGrid& grid, GridParams start, const HqqOptions& o,
                        double* q, double* t, GridParams* kept, Store&& store) {
  GridParams params = start;
  const double pm1 = o.lp_norm - 1.0;
  HqqGroup best;
  double beta = o.beta;
  for (int step = 0;; ++step) {
    const double error = hqq_residuals(w, n, params, pm1, beta, q, t);
    if (step == 0) {
      best.initial_error = error;
    } else {
      best.updates = step;
      if (!(error < best.final_error)) break;
      best.kept = true;
    }
    best.final_error = error;
    *kept = params;
    if (step == o.iterations) break;
    double m = params.m, d = params.d;
    if (grid.has_minimum) {  // (2) m = mean(t − d·q), the paper's zero-point step (m = −z·d)
      double sum = 0.0;
      for (std::int64_t i = 0; i < n; ++i) sum += t[i] - d * q[i];
      m = sum / static_cast<double>(n);
    } else {  // (2) d = Σ q·t / Σ q², the least-squares scale given q
      double num = 0.0, den = 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        num += q[i] * t[i];
        den += q[i] * q[i];
      }
      if (den > 0.0) d = num / den;
    }
    const GridParams next = store(d, m);
    if (!std::isfinite(next.d) || !std::isfinite(next.m)) break;  // beyond fp16: the step cannot be stored
    params = next;
    beta *= o.kappa;
  }
  return best;
}

// The rows of hqq_quantize in one form: every group's integers into `values`, its result into `results`.
template <class Params>
void hqq_rows(const TensorView<const float>& weight, const QuantScheme& scheme, const HqqOptions& options,
              std::vector<std::int32_t>& values, std::vector<HqqGroup>& results, const char* fn) {
  const std::int64_t out = weight.size(0), in = weight.size(1);
  const QuantRange range = quant_range(scheme);
  const std::int64_t group = options.group_size > 0 ? options.group_size : in;
  const std::int64_t groups = in / group;
  parallel_for(out, kHqqRowChunk, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> row(static_cast<std::size_t>(in));
    std::vector<double> q(static_cast<std::size_t>(group)), t(static_cast<std::size_t>(group));
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t c = 0; c < in; ++c) row[static_cast<std::size_t>(c)] = weight(r, c);
      for (std::int64_t g = 0; g < groups; ++g) {
        const float* w = row.data() + g * group;
        const HqqGroup h = hqq_group<Params>(w, group, scheme, range, options, q.data(), t.data(), fn);
        const Params params = hqq_params<Params>(h.scale, h.zero_point, range);
        for (std::int64_t i = 0; i < group; ++i)
          values[static_cast<std::size_t>(r * in + g * group + i)] = quantize_value(w[i], params);
        results[static_cast<std::size_t>(r * groups + g)] = h;
      }
    }
  });
}

// The QuantizedTensor of the groups' integers and parameters.
template <class Params>
QuantizedTensor hqq_tensor(const Shape& shape, const QuantScheme& scheme, const std::vector<std::int32_t>& values,
                           const std::vector<HqqGroup>& results, const char* fn) {
  const QuantRange range = quant_range(scheme);
  std::vector<Params> params;
  params.reserve(results.size());
  for (const HqqGroup& h : results) params.push_back(hqq_params<Params>(h.scale, h.zero_point, range));
  return make_quantized_tensor(shape, scheme, values, params, fn);
}

// The result of every group's HQQ, summed in row-major group order (the sums do not follow the executor).
inline HqqResult hqq_summary(const std::vector<HqqGroup>& results) {
  HqqResult result;
  result.groups = static_cast<std::int64_t>(results.size());
  for (const HqqGroup& h : results) {
    result.initial_error += h.initial_error;
    result.final_error += h.final_error;
    result.iterations_run = std::max(result.iterations_run, h.updates);
    result.groups_improved += h.kept ? 1 : 0;
  }
  return result;
}

}  // namespace detail

// HQQ of weight [out, in] (any strides): a QuantizedTensor that dequantize, the safetensors convention and the CPU
// weight-only GEMMs read (and, in the integer form, every consumer: the CUDA paths, compressed-tensors). Validation
// comes first: every bad argument is one Error naming it, and `info` is written only on success.
inline QuantizedTensor hqq_quantize(TensorView<const float> weight, const HqqOptions& options,
                                    HqqResult* info = nullptr) {
  const char* fn = "shrink::quant::hqq_quantize";
  detail::check_hqq_args(weight, options, fn);
  const QuantScheme scheme = hqq_scheme(options);
  const std::int64_t out = weight.size(0), in = weight.size(1);
  const std::int64_t groups = options.group_size > 0 ? in / options.group_size : 1;
  std::vector<std::int32_t> values(static_cast<std::size_t>(out * in));
  std::vector<detail::HqqGroup> results(static_cast<std::size_t>(out * groups));
  QuantizedTensor t;
  if (options.fractional_zero_point) {
    detail::hqq_rows<FractionalAffineParams>(weight, scheme, options, values, results, fn);
    t = detail::hqq_tensor<FractionalAffineParams>(weight.shape(), scheme, values, results, fn);
  } else {
    detail::hqq_rows<AffineParams>(weight, scheme, options, values, results, fn);
    t = detail::hqq_tensor<AffineParams>(weight.shape(), scheme, values, results, fn);
  }
  if (info) *info = detail::hqq_summary(results);
  return t;
}

// HQQ onto one of llama.cpp's block grids (quant/block_grid.hpp), calibration-free: each block of each row starts
// from llama.cpp's parameters (legacy: grid_params_from_range; K formats: k_super_params with llama.cpp's weights, the
// super-block's d and dmin then fixed) and runs the loop of the header comment with step (2) on what the format lets
// vary: with a minimum (Q4_1, Q5_1, Q4_K, Q5_K) m = mean(t − d·q), the paper's zero-point step; symmetric (Q4_0, Q5_0,
// Q8_0, Q6_K) d = Σ q·t / Σ q², the least-squares scale given the codes; stored in fp16 (legacy) or as the nearest
// block code in range (K). options.bits, group_size, fractional_zero_point and optimize_scale are not read (the format
// fixes them). The input width must be a multiple of 32 (256 in the K formats); rows run in fixed chunks, so the bytes
// do not depend on the thread count.
inline BlockQuantized hqq_quantize_blocks(TensorView<const float> weight, BlockFormat format, const HqqOptions& options,
                                          HqqResult* info = nullptr) {
  const char* fn = "shrink::quant::hqq_quantize_blocks";
  const BlockGrid grid = block_grid(format);
  const std::int64_t unit = grid_row_unit(grid);
  HqqOptions o = options;
  o.bits = 4;
  o.group_size = unit;
  if (weight.rank() == 2) require_grid_width(grid, weight.size(1), fn, "weight's input width");
  detail::check_hqq_args(weight, o, fn);
  const std::int64_t out = weight.size(0), in = weight.size(1), blocks = in / grid.block;
  std::vector<std::int32_t> codes(static_cast<std::size_t>(out * in));
  std::vector<GridParams> params(static_cast<std::size_t>(out * blocks));
  std::vector<detail::HqqGroup> results(static_cast<std::size_t>(out * blocks));
  parallel_for(out, detail::kHqqRowChunk, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> row(static_cast<std::size_t>(in));
    double q[kSuperBlock], t[kSuperBlock], x[kSuperBlock], a[kSuperBlock];
    GridParams start[kSuperBlock / 16];
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t c = 0; c < in; ++c) row[static_cast<std::size_t>(c)] = weight(r, c);
      for (std::int64_t c0 = 0; c0 < in; c0 += unit) {
        const float* w = row.data() + c0;
        if (grid.super_block > 0) {
          for (std::int64_t j = 0; j < unit; ++j) x[j] = w[j];
          k_reference_weights(grid, x, a);
          k_super_params(grid, x, a, start, fn);
        } else {
          const auto [lo, hi] = std::minmax_element(w, w + unit);
          start[0] = grid_params_from_range(grid, *lo, *hi, fn);
        }
        for (std::int64_t b = 0; b < unit / grid.block; ++b) {
          const GridParams& s = start[b];
          auto store = [&](double d, double m) {
            if (grid.super_block == 0)
              return GridParams(grid, round_to_fp16(static_cast<float>(d)), round_to_fp16(static_cast<float>(m)));
            if (grid.has_minimum)
              return k_block_params(grid, s.super_d, s.super_dmin, s.scale_code,
                                    k_nearest_code(-m, s.super_dmin, 0, 63));
            return k_block_params(grid, s.super_d, s.super_dmin,
                                  k_nearest_code(d, s.super_d, grid.scale_code_min, grid.scale_code_max), 0);
          };
          const std::int64_t first = c0 + b * grid.block;
          const auto k = static_cast<std::size_t>(r * blocks + first / grid.block);
          results[k] = detail::hqq_grid_group(row.data() + first, grid.block, grid, s, o, q, t, &params[k], store);
          for (std::int64_t i = 0; i < grid.block; ++i)
            codes[static_cast<std::size_t>(r * in + first + i)] =
                quantize_value(row[static_cast<std::size_t>(first + i)], params[k]);
        }
      }
    }
  });
  if (info) *info = detail::hqq_summary(results);
  return make_block_quantized(format, out, in, codes, params);
}

}  // namespace shrink::quant
