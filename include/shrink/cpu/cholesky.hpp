// Dense symmetric positive-definite factorisation in double for the calibration methods (quant/inverse_hessian.hpp):
// the lower Cholesky factor in place and the inverse of a lower-triangular matrix, both by panels whose bulk is one
// product C −= A·B (cpu/gemm_f64.hpp, AVX2/AVX-512 when the CPU has them).
//
//   Cholesky   A = L·Lᵀ, right-looking by panels of kCholeskyPanel columns: L11 = chol(A11),
//              L21 = A21·L11⁻ᵀ (with the panel's own small inverse), A22 −= L21·L21ᵀ (n³/3 multiply-adds, the last
//              term nearly all of them)
//   inverse    X = L⁻¹ by block rows of kCholeskyPanel: X[I, I] = L[I, I]⁻¹ and, for each earlier block column J,
//              X[I, J] = −X[I, I] · Σ_{J ≤ K < I} L[I, K] · X[K, J]   (n³/6 multiply-adds; LAPACK's trtri order)
// Every product over more than one panel goes through gemm_f64_subtract; only the panels' own factorisation and
// inverse (kCholeskyPanel³ each) are Eigen's.
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>

#include "shrink/cpu/gemm_f64.hpp"

namespace shrink::cpu {

inline constexpr Eigen::Index kCholeskyPanel = 96;

namespace cholesky_detail {

// scratch = C [rows, cols] (leading dimension ldc), and C = 0: a product then writes C from its old value.
inline void move_out(double* c, Eigen::Index ldc, Eigen::Index rows, Eigen::Index cols, Eigen::MatrixXd& scratch) {
  scratch.resize(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j)
    for (Eigen::Index i = 0; i < rows; ++i) {
      scratch(i, j) = c[i + j * ldc];
      c[i + j * ldc] = 0.0;
    }
}

}  // namespace cholesky_detail

// The lower triangle of `a` (n × n, column-major) becomes L with a = L·Lᵀ; the strict upper triangle is left
// unspecified. Returns false, `a` then unspecified, when a pivot is not positive (or not finite): not
// positive-definite.
inline bool cholesky_lower_in_place(Eigen::Ref<Eigen::MatrixXd> a) {
  const Eigen::Index n = a.rows();
  Eigen::MatrixXd minus_inverse, scratch;
  for (Eigen::Index j = 0; j < n; j += kCholeskyPanel) {
    const Eigen::Index w = std::min(kCholeskyPanel, n - j), m = n - j - w;
    auto a11 = a.block(j, j, w, w);
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(a11);
    if (llt.info() != Eigen::Success || !a11.diagonal().allFinite()) return false;
    if (m == 0) continue;
    auto a21 = a.block(j + w, j, m, w);
    // L21 = A21·L11⁻ᵀ: B(p, q) = −L11⁻¹(q, p).
    minus_inverse = -Eigen::MatrixXd::Identity(w, w);
    a11.triangularView<Eigen::Lower>().solveInPlace(minus_inverse);
    cholesky_detail::move_out(a21.data(), a21.outerStride(), m, w, scratch);
    gemm_f64_subtract(m, w, w, scratch.data(), m, GemmF64B{minus_inverse.data(), w, 1}, a21.data(), a21.outerStride());
    // A22 −= L21·L21ᵀ, lower triangle (by tiles: some of the upper one too, never read).
    gemm_f64_subtract(m, m, w, a21.data(), a21.outerStride(), GemmF64B{a21.data(), a21.outerStride(), 1},
                      a.data() + (j + w) + (j + w) * a.outerStride(), a.outerStride(), GemmF64Part::lower);
  }
  return true;
}

// L⁻¹ of the lower triangle of `l` (its upper triangle is not read); the result's strict upper triangle is zero.
inline Eigen::MatrixXd lower_triangular_inverse(const Eigen::Ref<const Eigen::MatrixXd>& l) {
  const Eigen::Index n = l.rows(), p = kCholeskyPanel;
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, n), minus_xii, scratch;
  for (Eigen::Index i = 0; i < n; i += p) {
    const Eigen::Index w = std::min(p, n - i);
    const auto lii = l.block(i, i, w, w).triangularView<Eigen::Lower>();
    auto xii = x.block(i, i, w, w);
    xii.setIdentity();
    lii.solveInPlace(xii);
    if (i == 0) continue;
    // T[:, J] = Σ_{J ≤ K < I} L[I, K]·X[K, J] for each block column J (X[K, J] is zero above the diagonal block).
    auto row = x.block(i, 0, w, i);
    for (Eigen::Index jc = 0; jc < i; jc += p) {
      const Eigen::Index wc = std::min(p, i - jc);
      gemm_f64_subtract(w, wc, i - jc, l.data() + i + jc * l.outerStride(), l.outerStride(),
                        GemmF64B{x.data() + jc + jc * x.outerStride(), 1, x.outerStride()},
                        x.data() + i + jc * x.outerStride(), x.outerStride(), GemmF64Part::all);
    }
    // X[I, :I] = X[I, I] · (−T): the subtraction above already gave −T, so C = 0 − (−X[I, I])·(−T).
    minus_xii = -xii;
    cholesky_detail::move_out(row.data(), x.outerStride(), w, i, scratch);
    gemm_f64_subtract(w, i, w, minus_xii.data(), w, GemmF64B{scratch.data(), 1, w}, row.data(), x.outerStride());
  }
  return x;
}

}  // namespace shrink::cpu
