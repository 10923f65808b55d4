// Wanda (Sun et al. 2023, "A Simple and Effective Pruning Approach for Large Language Models"): pruning by
// weight magnitude times input activation norm, compared within each output row.
//
// For a Linear weight W [out, in] and calibration activations X [tokens, in]:
//   score S[i, j] = |W[i, j]| * ||X[:, j]||_2        (in float: the product of two floats, rounded once)
// and each output row i prunes its amount.of(in) lowest scores (a count applies to every row); equal scores
// prune the higher column first (amount.hpp). In N:M form (wanda_nm_mask) each run of M scores along the row
// keeps its N highest. ActivationNormObserver gathers ||X[:, j]||_2 over many batches.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/feature_batch.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/prune/amount.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/prune/norm.hpp"

namespace shrink::prune {

// Per-input-feature L2 norm of activations [..., in_features] (the last dim is the feature) over every batch:
// norms()[j] = sqrt(sum over all tokens of every batch of x[t, j]^2), summed in double token after token.
// A failed observe() leaves the state as it was.
class ActivationNormObserver {
 public:
  ActivationNormObserver() = default;

  void observe(const TensorView<const float>& activations) {
    const std::int64_t features = cpu::check_feature_batch(activations, batches_ > 0 ? features_ : 0,
                                                           "shrink::prune::ActivationNormObserver::observe");

    if (batches_ == 0) sum_of_squares_.assign(static_cast<std::size_t>(features), 0.0);
    const std::int64_t stride = cpu::row_stride(activations.strides());
    cpu::for_each_row(activations.shape(), activations.strides(), [&](std::int64_t, std::int64_t offset) {
      const float* x = activations.data() + offset;
      for (std::int64_t j = 0; j < features; ++j) {
        const double v = x[j * stride];
        sum_of_squares_[static_cast<std::size_t>(j)] += v * v;  // v * v is exact in double
      }
    });
    features_ = features;
    tokens_ += activations.numel() / features;
    ++batches_;
  }

  // sqrt(sum of squares) per feature, rounded to float.
  std::vector<float> norms() const {
    if (batches_ == 0)
      fail("shrink::prune::ActivationNormObserver::norms", "no batch observed yet: call observe() first");
    std::vector<float> out(sum_of_squares_.size());
    for (std::size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(std::sqrt(sum_of_squares_[j]));
    return out;
  }

  const std::vector<double>& sum_of_squares() const { return sum_of_squares_; }
  std::int64_t features() const { return features_; }
  std::int64_t tokens_seen() const { return tokens_; }
  std::int64_t batches_seen() const { return batches_; }
  void reset() {
    sum_of_squares_.clear();
    features_ = 0;
    tokens_ = 0;
    batches_ = 0;
  }

 private:
  std::vector<double> sum_of_squares_;
  std::int64_t features_ = 0;
  std::int64_t tokens_ = 0;
  std::int64_t batches_ = 0;
};

namespace detail {

// weights: host, [out, in], non-empty, finite; input_norms: in_features finite values >= 0.
inline void check_wanda_inputs(const TensorView<const float>& weights, const std::vector<float>& input_norms,
                               const char* function) {
  require_host_view(weights, function, "weights");
  if (weights.rank() != 2 || weights.empty())
    fail(function, "weights.shape", to_string(weights.shape()), "a non-empty Linear weight [out, in]");
  const std::int64_t in = weights.size(1);
  if (static_cast<std::int64_t>(input_norms.size()) != in)
    fail(function, "input_norms.size", input_norms.size(),
         "one norm per input feature, weights.shape[1] = " + std::to_string(in));
  for (std::size_t j = 0; j < input_norms.size(); ++j)
    if (!(input_norms[j] >= 0.0f && std::isfinite(input_norms[j])))
      fail(function, ("input_norms[" + std::to_string(j) + "]").c_str(), input_norms[j], "a finite norm >= 0");
  cpu::require_finite(weights, function, "weights");
}

// S[i, j] = |W[i, j]| * norms[j] into `scores` [out * in], row-major; inputs already checked.
inline void wanda_scores_unchecked(const TensorView<const float>& weights, const std::vector<float>& input_norms,
                                   float* scores) {
  const std::int64_t in = weights.size(1);
  const std::int64_t stride = cpu::row_stride(weights.strides());
  cpu::for_each_row(weights.shape(), weights.strides(), [&](std::int64_t row, std::int64_t offset) {
    const float* w = weights.data() + offset;
    float* s = scores + row * in;
    for (std::int64_t j = 0; j < in; ++j) s[j] = std::fabs(w[j * stride]) * input_norms[static_cast<std::size_t>(j)];
  });
}

}  // namespace detail

// Wanda scores [out * in], row-major: S[i, j] = |W[i, j]| * input_norms[j].
inline std::vector<float> wanda_scores(const TensorView<const float>& weights, const std::vector<float>& input_norms) {
  detail::check_wanda_inputs(weights, input_norms, "shrink::prune::wanda_scores");
  std::vector<float> scores(static_cast<std::size_t>(weights.numel()));
  detail::wanda_scores_unchecked(weights, input_norms, scores.data());
  return scores;
}

// Prunes, in every output row, the amount.of(in_features) weights with the lowest Wanda score.
inline Mask wanda_mask(const TensorView<const float>& weights, const std::vector<float>& input_norms, Amount amount) {
  const char* fn = "shrink::prune::wanda_mask";
  detail::check_wanda_inputs(weights, input_norms, fn);
  const std::int64_t out = weights.size(0);
  const std::int64_t in = weights.size(1);
  const std::int64_t k = amount.of(in, fn);

  std::vector<float> scores(static_cast<std::size_t>(weights.numel()));
  detail::wanda_scores_unchecked(weights, input_norms, scores.data());
  Mask mask(weights.shape());
  for (std::int64_t row = 0; row < out; ++row)
    for (std::int64_t j : lowest_k(scores.data() + row * in, in, k)) mask.prune(row * in + j);
  return mask;
}

// Keeps, in every run of pattern.m weights along each output row, the pattern.n with the highest Wanda score
// (nm_mask over the scores, its remainder rule and ties included).
inline Mask wanda_nm_mask(const TensorView<const float>& weights, const std::vector<float>& input_norms,
                          NmPattern pattern, NmRemainder remainder = NmRemainder::error) {
  detail::check_wanda_inputs(weights, input_norms, "shrink::prune::wanda_nm_mask");
  std::vector<float> scores(static_cast<std::size_t>(weights.numel()));
  detail::wanda_scores_unchecked(weights, input_norms, scores.data());
  return nm_mask(TensorView<const float>(scores.data(), weights.shape()), pattern, remainder);
}

}  // namespace shrink::prune
