// Dense symmetric positive-definite factorisation in double for the calibration methods (quant/inverse_hessian.hpp):
// the lower Cholesky factor in place and the inverse of a lower-triangular matrix, both by panels whose bulk is one
// product C −= A·B (cpu/gemm_f64.hpp, AVX2/AVX-512 when the CPU has them).
//
//   Cholesky   A = L·Lᵀ, right-looking by panels of kPanel columns: L11 = chol(A11), L21 = A21·L11⁻ᵀ,
//              A22 −= L21·L21ᵀ (n³/3 multiply-adds, the last term nearly all of them)
//   inverse    X = L⁻¹ by block rows of kPanel: X[I, I] = L[I, I]⁻¹ and, for each earlier block column J,
//              X[I, J] = −L[I, I]⁻¹ · Σ_{J ≤ K < I} L[I, K] · X[K, J]   (n³/6 multiply-adds)
#pragma once

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>

#include "shrink/cpu/gemm_f64.hpp"

namespace shrink::cpu {

inline constexpr Eigen::Index kCholeskyPanel = 96;

// The lower triangle of `a` (n × n, column-major) becomes L with a = L·Lᵀ; the strict upper triangle is left
// unspecified. Returns false, `a` then unspecified, when a pivot is not positive (or not finite): not
// positive-definite.
inline bool cholesky_lower_in_place(Eigen::Ref<Eigen::MatrixXd> a) {
  const Eigen::Index n = a.rows();
  for (Eigen::Index j = 0; j < n; j += kCholeskyPanel) {
    const Eigen::Index w = std::min(kCholeskyPanel, n - j), m = n - j - w;
    auto a11 = a.block(j, j, w, w);
    Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(a11);
    if (llt.info() != Eigen::Success || !a11.diagonal().allFinite()) return false;
    if (m == 0) continue;
    auto a21 = a.block(j + w, j, m, w);
    // L21 = A21·L11⁻ᵀ, i.e. L11·L21ᵀ = A21ᵀ.
    a11.triangularView<Eigen::Lower>().transpose().solveInPlace<Eigen::OnTheRight>(a21);
    // A22 −= L21·L21ᵀ, lower triangle (by tiles: some of the upper one too, never read).
    gemm_f64_subtract(m, m, w, a21.data(), a21.outerStride(), GemmF64B{a21.data(), a21.outerStride(), 1},
                      a.data() + (j + w) + (j + w) * a.outerStride(), a.outerStride(), GemmF64Part::lower);
  }
  return true;
}

// L⁻¹ of the lower triangle of `l` (its upper triangle is not read); the result's strict upper triangle is zero.
inline Eigen::MatrixXd lower_triangular_inverse(const Eigen::Ref<const Eigen::MatrixXd>& l) {
  const Eigen::Index n = l.rows(), p = kCholeskyPanel;
  Eigen::MatrixXd x = Eigen::MatrixXd::Zero(n, n);
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
    // X[I, :I] = L[I, I]⁻¹ · (−T): the subtraction above already gave −T.
    lii.solveInPlace(row);
  }
  return x;
}

}  // namespace shrink::cpu
