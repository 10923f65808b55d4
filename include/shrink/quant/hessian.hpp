// The Hessian of a Linear's layer-wise reconstruction error, H = (2 / n) Σ_t x_tᵀ x_t over calibration rows x_t,
// and the observer that gathers it batch after batch (GPTQ's input, quant/gptq.hpp).
//
// For a Linear Y = X·Wᵀ and calibration inputs X [n, in], the error ‖X·Wᵀ − X·Ŵᵀ‖²_F / n has Hessian
// H = (2 / n) XᵀX with respect to each row of W (Frantar et al. 2022, "GPTQ"). The observer sums the exact products
// x_i·x_j of float inputs in double (a float product is exact in double), so the sum depends on the batches only
// through double additions (cpu/gemm_f64.hpp's product); hessian() divides once at the end. The scale 2 / n changes
// nothing in GPTQ's result except through dead-input detection (exact zeros stay zeros) and damping, which is relative
// to mean(diag H).
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/feature_batch.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/gemm_f64.hpp"
#include "shrink/cpu/nonfinite_check.hpp"

namespace shrink::quant {

// A symmetric [features, features] Hessian in double, row-major, with the number of calibration rows behind it.
struct Hessian {
  std::int64_t features = 0;
  std::int64_t samples = 0;    // calibration rows (tokens) summed into it
  std::vector<double> values;  // H[i, j] = (2 / samples) Σ_t x_t[i] x_t[j]

  double at(std::int64_t i, std::int64_t j) const { return values[static_cast<std::size_t>(i * features + j)]; }
};

// Checks a Hessian for a Linear of input width `features`: size, sample count, finite values. One Error naming
// `name` (for example "hessian") and what was expected.
inline void check_hessian(const Hessian& h, std::int64_t features, const char* fn, const std::string& name) {
  if (h.features != features)
    fail(fn, (name + ".features").c_str(), h.features, "the weight's input width " + std::to_string(features));
  if (static_cast<std::int64_t>(h.values.size()) != features * features)
    fail(fn, (name + ".values.size()").c_str(), h.values.size(),
         std::to_string(features * features) + " values ([" + std::to_string(features) + ", " +
             std::to_string(features) + "])");
  if (h.samples < 1) fail(fn, (name + ".samples").c_str(), h.samples, "at least one calibration row");
  for (std::size_t k = 0; k < h.values.size(); ++k)
    if (!std::isfinite(h.values[k]))
      fail(fn, (name + ".values[" + std::to_string(k) + "]").c_str(), h.values[k], "a finite value");
}

// Gathers Σ_t x_tᵀ x_t over activations [..., in_features] (features last), many batches. A failed observe() (wrong
// width, NaN or inf, not a host view) leaves the state as it was.
class HessianObserver {
 public:
  HessianObserver() = default;

  void observe(const TensorView<const float>& activations) {
    const std::int64_t features =
        cpu::check_feature_batch(activations, samples_ > 0 ? features_ : 0, "shrink::quant::HessianObserver::observe");

    // The batch as Xᵀ [features, rows], column-major in double (exact widening). The products go through
    // cpu/gemm_f64.hpp's C −= A·B, so the observer keeps −Σ xᵀx (exactly the negation of the sum) and hessian() flips
    // it.
    const std::int64_t rows = activations.numel() / features;
    Eigen::MatrixXd xt(features, rows);
    const std::int64_t stride = cpu::row_stride(activations.strides());
    cpu::for_each_row(activations.shape(), activations.strides(), [&](std::int64_t row, std::int64_t offset) {
      const float* v = activations.data() + offset;
      for (std::int64_t j = 0; j < features; ++j) xt(j, row) = v[j * stride];
    });

    if (samples_ == 0) sum_.setZero(features, features);
    // Lower triangle, by column blocks of fixed width (a function of the width alone, so the same sums on any
    // executor): S[j0:, j0:j1] += X[:, j0:]ᵀ X[:, j0:j1], each block one product on one thread.
    const std::int64_t block = kBlock;
    const std::int64_t blocks = (features + block - 1) / block;
    const std::ptrdiff_t ld = static_cast<std::ptrdiff_t>(features);
    parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {
        const std::int64_t j0 = b * block, width = std::min(block, features - j0), below = features - j0;
        // A(i, p) = Xᵀ(j0 + i, p), B(p, j) = X(p, j0 + j) = Xᵀ(j0 + j, p).
        cpu::gemm_f64_subtract(below, width, rows, xt.data() + j0, ld, cpu::GemmF64B{xt.data() + j0, ld, 1},
                               sum_.data() + j0 + j0 * ld, ld, cpu::GemmF64Part::lower);
      }
    });
    features_ = features;
    samples_ += rows;
  }

  // H = (2 / samples) Σ x_tᵀ x_t, full (both triangles).
  Hessian hessian() const {
    if (samples_ == 0) fail("shrink::quant::HessianObserver::hessian", "no batch observed yet: call observe() first");
    Hessian h;
    h.features = features_;
    h.samples = samples_;
    h.values.resize(static_cast<std::size_t>(features_ * features_));
    const double scale = -2.0 / static_cast<double>(samples_);  // sum_ holds −Σ xᵀx
    for (std::int64_t i = 0; i < features_; ++i)
      for (std::int64_t j = 0; j < features_; ++j)
        h.values[static_cast<std::size_t>(i * features_ + j)] = scale * (i >= j ? sum_(i, j) : sum_(j, i));
    return h;
  }

  std::int64_t features() const { return features_; }
  std::int64_t samples() const { return samples_; }
  void reset() {
    sum_.resize(0, 0);
    features_ = 0;
    samples_ = 0;
  }

 private:
  static constexpr std::int64_t kBlock = 64;
  Eigen::MatrixXd sum_;  // −Σ x_tᵀ x_t, lower triangle kept (entries above it unspecified)
  std::int64_t features_ = 0;
  std::int64_t samples_ = 0;
};

}  // namespace shrink::quant
