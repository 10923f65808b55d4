// The factor that GPTQ (quant/gptq.hpp) and SparseGPT walk column by column: the upper Cholesky factor of the damped
// inverse Hessian, in the order the columns are processed (Frantar et al. 2022, "GPTQ"; Frantar & Alistarh 2023,
// "SparseGPT"). It depends on the Hessian alone, so Linears that share an input (q, k, v; gate, up) share it.
//
// With H [in, in] the Hessian of a Linear's input (quant/hessian.hpp), in double:
//   dead inputs   H_jj == 0  ->  H_jj = 1   (the method zeroes that column of W: an input always zero carries nothing)
//   order         0, 1, …, in − 1; or, with act_order, decreasing H_jj (ties: lower column first); P H Pᵀ
//   damping       λ = damp_percent · mean(diag H),  H += λ I
//   U             upper with UᵀU = H⁻¹, computed as J·chol(J H J)⁻¹·J (J the reversal): L = chol(J H J) in H's own
//                 storage (cpu/cholesky.hpp), then its inverse; two [in, in] matrices live at the peak
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/cpu/cholesky.hpp"
#include "shrink/quant/hessian.hpp"

namespace shrink::quant {

struct InverseHessianOptions {
  double damp_percent = 0.01;  // λ = damp_percent · mean(diag H), >= 0
  bool act_order = false;      // columns in decreasing H_jj
};

struct InverseHessianFactor {
  InverseHessianOptions options;    // what it was made with
  std::int64_t features = 0;        // in
  std::vector<std::int64_t> order;  // order[k]: the original column processed k-th
  std::vector<std::int64_t> dead;   // original columns with H_jj == 0, increasing
  double damping = 0.0;             // λ added to the diagonal
  Eigen::MatrixXd upper;            // U [in, in], rows and columns in processing order (upper triangle)
};

// The factor of `hessian` (checked first: see check_hessian; features from the Hessian itself). An Error when H is
// not positive-definite after damping.
inline InverseHessianFactor inverse_hessian_factor(const Hessian& hessian, const InverseHessianOptions& options,
                                                   const char* fn = "shrink::quant::inverse_hessian_factor") {
  if (!(options.damp_percent >= 0.0) || !std::isfinite(options.damp_percent))
    fail(fn, "options.damp_percent", options.damp_percent, "a finite value >= 0");
  if (hessian.features < 1) fail(fn, "hessian.features", hessian.features, "at least 1");
  check_hessian(hessian, hessian.features, fn, "hessian");  // quant/hessian.hpp
  const Eigen::Index n = static_cast<Eigen::Index>(hessian.features);

  InverseHessianFactor f;
  f.options = options;
  f.features = hessian.features;
  std::vector<double> diagonal(static_cast<std::size_t>(n));
  for (Eigen::Index j = 0; j < n; ++j) {
    diagonal[static_cast<std::size_t>(j)] = hessian.at(j, j);
    if (diagonal[static_cast<std::size_t>(j)] == 0.0) {
      diagonal[static_cast<std::size_t>(j)] = 1.0;
      f.dead.push_back(j);
    }
  }
  f.order.resize(static_cast<std::size_t>(n));
  std::iota(f.order.begin(), f.order.end(), std::int64_t{0});
  if (options.act_order)
    std::stable_sort(f.order.begin(), f.order.end(), [&](std::int64_t a, std::int64_t b) {
      return diagonal[static_cast<std::size_t>(a)] > diagonal[static_cast<std::size_t>(b)];
    });
  double mean = 0.0;
  for (double d : diagonal) mean += d;
  mean /= static_cast<double>(n);
  f.damping = options.damp_percent * mean;

  // J·P H Pᵀ·J + λ I straight into place: element (r, c) is H[order[n−1−r], order[n−1−c]] (lower triangle read).
  Eigen::MatrixXd& a = f.upper;
  a.resize(n, n);
  for (Eigen::Index c = 0; c < n; ++c) {
    const std::int64_t oc = f.order[static_cast<std::size_t>(n - 1 - c)];
    for (Eigen::Index r = c; r < n; ++r) {
      const std::int64_t orow = f.order[static_cast<std::size_t>(n - 1 - r)];
      a(r, c) = r == c ? diagonal[static_cast<std::size_t>(oc)] + f.damping : hessian.at(orow, oc);
    }
  }
  if (!cpu::cholesky_lower_in_place(a))
    fail(fn, "hessian", "a matrix [" + std::to_string(n) + ", " + std::to_string(n) + "]",
         "a positive-definite Hessian after damping by " + to_text(f.damping) +
             " (raise options.damp_percent or gather more calibration rows)");
  a = cpu::lower_triangular_inverse(a);
  a.reverseInPlace();  // J·L⁻¹·J: upper
  return f;
}

}  // namespace shrink::quant
