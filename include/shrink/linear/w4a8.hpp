// The W4A8 linear layer on the CPU: a per-group int4 weight (as the weight-only layer stores it) times float
// activations quantized to int8 on the fly, per row and per group of the weight's inputs, as llama.cpp's Q4_0 · Q8_0:
//
//   xq[m, k] = clamp(round(x[m, k] / sx[m, g]), −128, 127),  sx[m, g] = max_{k in g} |x[m, k]| / 127.5
//              (PyTorch's symmetric int8 formula, quant/qparams.hpp, at least FLT_EPSILON; g = k / group_size)
//   out[m, n] = act(Σ_g sx[m, g] · sw[n, g] · Σ_{k in g} xq[m, k] · (q[n, k] − z[n, g]) + bias[n])
//
// i.e. the float product of the dequantized activations and weight, the integer part of each group exact
// (cpu/gemm_int4_int8.hpp). Against the weight-only layer (float activations, linear/weight_only.hpp) it adds the
// activations' rounding (a relative error of about 1/255 of the largest |x| in each group) and multiplies 64 values
// with one integer instruction instead of converting each to float: the one-row product (decode) is bound by memory,
// not by instructions. Weights: int4 / uint4, symmetric or integer zero points, per group of a multiple of 8 inputs or
// per output channel (pack_weight_w4a8). Activations and output: float. NaN or inf in x is an error naming the first.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/gemm_int4_int8.hpp"
#include "shrink/cpu/packed_int4_dot_weight.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::cpu {

// Whether a packed int4 weight has a W4A8 form: integer zero points (not HQQ's fractional ones) and groups of a
// multiple of 8 inputs, or one group a row.
inline Support can_implement_pack_weight_w4a8(const PackedInt4Weight& w) {
  Support s = linear::detail::check_packed_weight(w);
  if (!s) return s;
  if (w.fractional())
    return Support::no("w.float_zero_points", "fractional zero points (HQQ)",
                       "integer zero points or none: the integer dot product needs q − z an integer");
  if (!int4_dot_layout_fits(w))
    return Support::no("w.group_size", std::to_string(w.group_size),
                       "a multiple of 8 inputs, or K (one group a row): blocks of 8 inputs share a group");
  return s;
}

inline PackedInt4DotWeight pack_weight_w4a8(const PackedInt4Weight& w) {
  require_supported(can_implement_pack_weight_w4a8(w), "shrink::cpu::pack_weight_w4a8");
  return pack_int4_dot_weight(w);
}

// From a QuantizedTensor as pack_weight_int4 takes it (int4 / uint4, per group along axis 1, per channel or tensor).
inline PackedInt4DotWeight pack_weight_w4a8(const quant::QuantizedTensor& w) {
  return pack_weight_w4a8(pack_weight_int4(w));
}

// Dynamic per-(row, group) quantization of float activations x [M, K] (row stride ldx, unit stride along k) into `a`,
// groups of `group_size` inputs (group_size divides K), padded with zeros to whole blocks of 8. Returns the flat index
// m · K + k of the first NaN or ±inf, or −1 when every value is finite (then `a` holds the rows).
inline std::int64_t quantize_activation_groups(const float* x, std::int64_t ldx, std::int64_t m_total,
                                               std::int64_t k_total, std::int64_t group_size, Int8ActivationGroups& a) {
  const std::int64_t groups = k_total / group_size;
  a.rows = m_total;
  a.groups = groups;
  a.padded_cols = (k_total + kDotBlockK - 1) / kDotBlockK * kDotBlockK;
  a.values.assign(static_cast<std::size_t>(m_total * a.padded_cols), std::int8_t{0});
  a.scales.resize(static_cast<std::size_t>(m_total * groups));
  a.sums.resize(a.scales.size());
  const quant::QuantScheme scheme = quant::QuantScheme::per_tensor(quant::QuantDtype::int8, quant::Symmetry::symmetric);
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(m_total), -1);
  parallel_for(m_total, chunk_size(m_total, static_cast<double>(k_total) * 4.0), [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      const float* row = x + m * ldx;
      std::int8_t* q = a.values.data() + m * a.padded_cols;
      for (std::int64_t g = 0; g < groups; ++g) {
        const float* v = row + g * group_size;
        float low = 0.0f, high = 0.0f;
        for (std::int64_t k = 0; k < group_size; ++k) {
          if (!std::isfinite(v[k])) {
            first_bad[static_cast<std::size_t>(m)] = m * k_total + g * group_size + k;
            break;
          }
          low = std::min(low, v[k]);
          high = std::max(high, v[k]);
        }
        if (first_bad[static_cast<std::size_t>(m)] >= 0) break;
        const float scale = quant::scale_zero_point_from_range(low, high, scheme).scale;
        quantize_run(v, q + g * group_size, group_size, AffineParams(scale, 0, -128, 127));
        std::int32_t sum = 0;
        for (std::int64_t k = 0; k < group_size; ++k) sum += q[g * group_size + k];
        a.scales[static_cast<std::size_t>(m * groups + g)] = scale;
        a.sums[static_cast<std::size_t>(m * groups + g)] = sum;
      }
    }
  });
  for (const std::int64_t bad : first_bad)
    if (bad >= 0) return bad;
  return -1;
}

inline Support can_implement_linear_w4a8(const TensorView<const float>& x, const PackedInt4DotWeight& w,
                                         const TensorView<float>& out, const Epilogue& epilogue = {}) {
  if (!w.consistent()) return Support::no("w", "an inconsistent PackedInt4DotWeight", "the result of pack_weight_w4a8");
  Support s = linear::detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  return linear::detail::check_no_overlap(out, w.blocks.data(), w.blocks.size(), "w");
}

// out = act(X · Wᵀ + bias), X quantized per row and group as the file comment says; out is written only after every
// check, the activations' included.
inline void linear_w4a8(TensorView<const float> x, const PackedInt4DotWeight& w, TensorView<float> out,
                        const Epilogue& epilogue = {}) {
  const char* fn = "shrink::cpu::linear_w4a8";
  require_supported(can_implement_linear_w4a8(x, w, out, epilogue), fn);
  std::vector<float> storage;
  std::int64_t ldx = 0;
  const float* xs = linear::detail::contiguous_rows(x, storage, ldx);
  thread_local Int8ActivationGroups a;
  const std::int64_t bad = quantize_activation_groups(xs, ldx, x.size(0), x.size(1), w.group_size, a);
  if (bad >= 0) {
    const std::int64_t m = bad / w.cols, k = bad % w.cols;
    fail(fn, "x", "x[" + std::to_string(m) + ", " + std::to_string(k) + "] = " + to_text(x(m, k)),
         "finite activations (they are quantized to int8 per group)");
  }
  linear::detail::RowOutput<float> staged(out);
  gemm_int4_int8(a, w, staged.rows().data(), staged.rows().stride(0), make_epilogue_op(epilogue, x.size(0), w.rows));
  staged.finish();
}

}  // namespace shrink::cpu
