// Float linear layers on the CPU, the reference the other precisions are measured against:
// Y[M, N] = X[M, K] · W[N, K]ᵀ, out = act(Y + bias) (core/epilogue.hpp).
//
// linear_f32        the panel kernels of cpu/gemm_panel.hpp (AVX-512 or AVX2 with FMA chosen at run time) over a
//                   weight packed once by pack_weight; the fastest float product here whatever the compiler flags.
// linear_f32_eigen  Eigen's own product, as the translation unit was compiled: with the default x86-64 flags
//                   (no -march) Eigen uses SSE2 only, several times slower than linear_f32 on an AVX-512 machine.
#pragma once

#include <Eigen/Core>

#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/cpu/eigen.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/linear/check.hpp"
#include "shrink/linear/weight_only.hpp"

namespace shrink::cpu {

inline Support can_implement_linear_f32(const TensorView<const float>& x, const PackedWeight<float>& w,
                                        const TensorView<float>& out, const Epilogue& epilogue = {}) {
  return can_implement_linear_weight_only(x, w, out, epilogue);
}

inline void linear_f32(TensorView<const float> x, const PackedWeight<float>& w, TensorView<float> out,
                       const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_f32(x, w, out, epilogue), "shrink::cpu::linear_f32");
  linear_weight_only(x, w, out, epilogue);
}

// Packs w [N, K] on every call; pack it once with pack_weight for repeated use.
inline void linear_f32(TensorView<const float> x, TensorView<const float> w, TensorView<float> out,
                       const Epilogue& epilogue = {}) {
  linear_f32(x, pack_weight(w), out, epilogue);
}

inline Support can_implement_linear_f32_eigen(const TensorView<const float>& x, const TensorView<const float>& w,
                                              const TensorView<float>& out, const Epilogue& epilogue = {}) {
  Support s = linear::detail::check_matrix(w, "w");
  if (!s) return s;
  s = linear::detail::check_linear_operands(x, w.size(1), w.size(0), out, epilogue);
  if (!s) return s;
  if (views_overlap(w, out)) return Support::no("out", "memory overlapping w", "a separate output");
  return s;
}

// out = act(x · wᵀ + bias) by Eigen's GEMM (x [M, K], w [N, K], out [M, N]: any strides). Eigen's product runs on
// the thread Eigen was built to use (one without OpenMP), not on shrink's executor.
inline void linear_f32_eigen(TensorView<const float> x, TensorView<const float> w, TensorView<float> out,
                             const Epilogue& epilogue = {}) {
  require_supported(can_implement_linear_f32_eigen(x, w, out, epilogue), "shrink::cpu::linear_f32_eigen");
  // Rows with unit inner stride map as plain row-major matrices, which Eigen's GEMM and GEMV take directly (a map
  // with a run-time inner stride falls back to slower coefficient-wise products).
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstRows = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
  const bool unit_inner = (x.stride(1) == 1 || x.size(1) == 1) && (w.stride(1) == 1 || w.size(1) == 1) &&
                          (out.stride(1) == 1 || out.size(1) == 1);
  auto row_stride = [](const auto& v) { return Eigen::OuterStride<>(v.size(0) == 1 ? v.size(1) : v.stride(0)); };
  if (unit_inner) {
    Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> y(out.data(), out.size(0), out.size(1), row_stride(out));
    y.noalias() = ConstRows(x.data(), x.size(0), x.size(1), row_stride(x)) *
                  ConstRows(w.data(), w.size(0), w.size(1), row_stride(w)).transpose();
  } else {
    auto y = as_eigen(out);
    y.noalias() = as_eigen(x) * as_eigen(w).transpose();
  }
  const EpilogueOp op = make_epilogue_op(epilogue, out.size(0), out.size(1));
  if (op.bias == nullptr && op.activation == Activation::none) return;  // the product as Eigen gives it
  if (out.stride(1) == 1 || out.size(1) == 1) {
    for (std::int64_t m = 0; m < out.size(0); ++m)
      cpu::finish_run(op, &out(m, 0), op.x_scale(m), 0, out.size(1), &out(m, 0));
    return;
  }
  for (std::int64_t m = 0; m < out.size(0); ++m)  // strided rows: one element at a time
    for (std::int64_t n = 0; n < out.size(1); ++n) cpu::finish_run(op, &out(m, n), op.x_scale(m), n, 1, &out(m, n));
}

}  // namespace shrink::cpu
