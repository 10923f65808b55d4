// SmoothQuant (Xiao et al. 2023): per-input-channel factors that move activation outliers into the weights.
//
// For a Linear layer y = x W^T with weight W [out, in] and activations X [tokens, in], input channel j gets
//   s_j = max(a_j, f)^alpha / max(w_j, f)^(1 - alpha)      f = magnitude_floor; in double, stored as float
//   a_j = max over tokens of every calibration batch |X[t, j]|,   w_j = max over output rows |W[o, j]|
// and the layer is rewritten as (X diag(1/s)) (W diag(s))^T = X W^T:
//   weight side      W[:, j] *= s_j                           (apply_smoothing)
//   activation side  X[..., j] /= s_j                         (apply_inverse_smoothing), or folded into the
//                    preceding norm: gamma_j /= s_j, beta_j /= s_j (fold_smoothing_into_norm), or into the
//                    preceding Linear whose output j is input j: W_prev[j, :] /= s_j, b_j /= s_j
//                    (fold_smoothing_into_linear)
// alpha in [0, 1] sets how much of the difficulty moves to the weights (0.5 in the paper).
// Zero maxima: both maxima are raised to f (1e-5 by default, the reference code's clamp) before the
// powers, so a channel that is all zero in X or in W still gets a finite s_j > 0. (The reference code clamps
// w_j and then s_j itself to 1e-5, leaving a_j unclamped; the two rules differ only when a_j < f.)
// Several Linear layers reading one input (q, k, v) share s: take w_j over all of them (weight_channel_absmax
// of a list).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nonfinite_check.hpp"

namespace shrink::quant {

inline constexpr float kSmoothingMagnitudeFloor = 1e-5f;

// Running per-channel max |x| of activations [..., in] (the last dimension is the channel) over many batches.
// A failed observe() leaves the state as it was.
class ActivationChannelAbsMax {
 public:
  ActivationChannelAbsMax() = default;

  void observe(TensorView<const float> batch) {
    const char* fn = "shrink::quant::ActivationChannelAbsMax::observe";
    require_host_view(batch, fn, "batch");
    if (batch.rank() < 1 || batch.empty())
      fail(fn, "batch.shape", to_string(batch.shape()), "rank >= 1 with at least one element, channels last");
    const std::int64_t channels = batch.size(batch.rank() - 1);
    if (batches_ > 0 && channels != channels_)
      fail(fn, "batch.shape", to_string(batch.shape()),
           "a last dimension of " + std::to_string(channels_) + " channels, as in earlier batches");
    const std::int64_t stride = cpu::row_stride(batch.strides());
    std::vector<float> batch_max(static_cast<std::size_t>(channels), 0.0f);
    bool nonfinite = false;
    cpu::for_each_row(batch.shape(), batch.strides(), [&](std::int64_t, std::int64_t offset) {
      const float* row = batch.data() + offset;
      for (std::int64_t j = 0; j < channels; ++j) {
        const float magnitude = std::fabs(row[j * stride]);
        nonfinite |= !(magnitude <= FLT_MAX);
        batch_max[static_cast<std::size_t>(j)] = std::max(batch_max[static_cast<std::size_t>(j)], magnitude);
      }
    });
    if (nonfinite) cpu::require_finite(batch, fn, "batch");
    if (batches_ == 0) {
      absmax_ = std::move(batch_max);
    } else {
      for (std::size_t j = 0; j < absmax_.size(); ++j) absmax_[j] = std::max(absmax_[j], batch_max[j]);
    }
    channels_ = channels;
    ++batches_;
  }

  // max |x| per channel over every batch observed.
  const std::vector<float>& absmax() const {
    if (batches_ == 0)
      fail("shrink::quant::ActivationChannelAbsMax::absmax", "no batch observed yet: call observe() first");
    return absmax_;
  }

  std::int64_t channels() const { return channels_; }
  std::int64_t batches_seen() const { return batches_; }
  void reset() {
    absmax_.clear();
    channels_ = 0;
    batches_ = 0;
  }

 private:
  std::vector<float> absmax_;
  std::int64_t channels_ = 0;
  std::int64_t batches_ = 0;
};

namespace detail {

inline void require_weight_matrix(const TensorView<const float>& weight, const char* function, const char* argument) {
  require_host_view(weight, function, argument);
  if (weight.rank() != 2 || weight.empty())
    fail(function, (std::string(argument) + ".shape").c_str(), to_string(weight.shape()),
         "a non-empty Linear weight [out, in]");
}

// Raises every channel's max to the column max of `weight` (already checked, finite).
inline void merge_column_absmax(const TensorView<const float>& weight, std::vector<float>& absmax) {
  const std::int64_t stride = cpu::row_stride(weight.strides());
  cpu::for_each_row(weight.shape(), weight.strides(), [&](std::int64_t, std::int64_t offset) {
    const float* row = weight.data() + offset;
    for (std::size_t j = 0; j < absmax.size(); ++j)
      absmax[j] = std::max(absmax[j], std::fabs(row[static_cast<std::int64_t>(j) * stride]));
  });
}

inline void require_scales(const std::vector<float>& scales, std::int64_t channels, const char* function) {
  if (static_cast<std::int64_t>(scales.size()) != channels)
    fail(function, "scales.size()", scales.size(), std::to_string(channels) + " smoothing factors, one per input channel");
  for (std::size_t j = 0; j < scales.size(); ++j)
    if (!std::isfinite(scales[j]) || !(scales[j] > 0.0f))
      fail(function, ("scales[" + std::to_string(j) + "]").c_str(), scales[j], "a finite smoothing factor > 0");
}

inline void require_channel_maxima(const std::vector<float>& maxima, const char* function, const char* argument) {
  for (std::size_t j = 0; j < maxima.size(); ++j)
    if (!std::isfinite(maxima[j]) || !(maxima[j] >= 0.0f))
      fail(function, (std::string(argument) + "[" + std::to_string(j) + "]").c_str(), maxima[j],
           "a finite channel maximum >= 0");
}

// Multiplies (or divides) element [..., j] of a host view by factors[j] in place.
template <bool divide>
void scale_last_dimension(const std::vector<float>& factors, const TensorView<float>& x) {
  const std::int64_t stride = cpu::row_stride(x.strides());
  cpu::for_each_row(x.shape(), x.strides(), [&](std::int64_t, std::int64_t offset) {
    float* row = x.data() + offset;
    for (std::size_t j = 0; j < factors.size(); ++j) {
      float& v = row[static_cast<std::int64_t>(j) * stride];
      v = divide ? v / factors[j] : v * factors[j];
    }
  });
}

// Divides row j of a host matrix [rows, cols] by factors[j] in place.
inline void scale_rows(const std::vector<float>& factors, const TensorView<float>& w) {
  const std::int64_t stride = cpu::row_stride(w.strides());
  cpu::for_each_row(w.shape(), w.strides(), [&](std::int64_t row, std::int64_t offset) {
    float* v = w.data() + offset;
    const float s = factors[static_cast<std::size_t>(row)];
    for (std::int64_t i = 0; i < w.size(1); ++i) v[i * stride] /= s;
  });
}

}  // namespace detail

// w_j = max over output rows |W[o, j]| of a Linear weight [out, in] (any strides), one per input channel.
inline std::vector<float> weight_channel_absmax(TensorView<const float> weight) {
  const char* fn = "shrink::quant::weight_channel_absmax";
  detail::require_weight_matrix(weight, fn, "weight");
  cpu::require_finite(weight, fn, "weight");
  std::vector<float> absmax(static_cast<std::size_t>(weight.size(1)), 0.0f);
  detail::merge_column_absmax(weight, absmax);
  return absmax;
}

// w_j over several Linear weights that read the same input (e.g. q, k and v projections): all [*, in].
inline std::vector<float> weight_channel_absmax(const std::vector<TensorView<const float>>& weights) {
  const char* fn = "shrink::quant::weight_channel_absmax";
  if (weights.empty()) fail(fn, "weights.size()", 0, "at least one weight");
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const std::string argument = "weights[" + std::to_string(k) + "]";
    detail::require_weight_matrix(weights[k], fn, argument.c_str());
    if (weights[k].size(1) != weights[0].size(1))
      fail(fn, (argument + ".shape").c_str(), to_string(weights[k].shape()),
           std::to_string(weights[0].size(1)) + " input channels, as weights[0]");
    cpu::require_finite(weights[k], fn, argument.c_str());
  }
  std::vector<float> absmax(static_cast<std::size_t>(weights[0].size(1)), 0.0f);
  for (const auto& w : weights) detail::merge_column_absmax(w, absmax);
  return absmax;
}

// s_j from per-channel maxima (see the top of this file). alpha in [0, 1]; magnitude_floor finite and > 0.
inline std::vector<float> smoothing_scales(const std::vector<float>& activation_absmax,
                                           const std::vector<float>& weight_absmax, float alpha = 0.5f,
                                           float magnitude_floor = kSmoothingMagnitudeFloor) {
  const char* fn = "shrink::quant::smoothing_scales";
  if (!(alpha >= 0.0f && alpha <= 1.0f)) fail(fn, "alpha", alpha, "a migration strength in [0, 1]");
  if (!std::isfinite(magnitude_floor) || !(magnitude_floor > 0.0f))
    fail(fn, "magnitude_floor", magnitude_floor, "a finite floor > 0");
  if (activation_absmax.empty()) fail(fn, "activation_absmax.size()", 0, "at least one channel");
  if (weight_absmax.size() != activation_absmax.size())
    fail(fn, "weight_absmax.size()", weight_absmax.size(),
         "one maximum per input channel (" + std::to_string(activation_absmax.size()) + ")");
  detail::require_channel_maxima(activation_absmax, fn, "activation_absmax");
  detail::require_channel_maxima(weight_absmax, fn, "weight_absmax");
  std::vector<float> scales(activation_absmax.size());
  for (std::size_t j = 0; j < scales.size(); ++j) {
    const double a = std::max(activation_absmax[j], magnitude_floor);
    const double w = std::max(weight_absmax[j], magnitude_floor);
    const float s = static_cast<float>(std::pow(a, static_cast<double>(alpha)) / std::pow(w, 1.0 - alpha));
    if (!std::isfinite(s) || !(s >= FLT_MIN))
      fail(fn, ("scales[" + std::to_string(j) + "]").c_str(), s,
           "a factor that is a normal float (activation max " + shrink::to_text(activation_absmax[j]) +
               ", weight max " + shrink::to_text(weight_absmax[j]) + ")");
    scales[j] = s;
  }
  return scales;
}

// s_j for one Linear layer from its calibrated activations and its weight [out, in].
inline std::vector<float> smoothing_scales(const ActivationChannelAbsMax& activations, TensorView<const float> weight,
                                           float alpha = 0.5f, float magnitude_floor = kSmoothingMagnitudeFloor) {
  return smoothing_scales(activations.absmax(), weight_channel_absmax(weight), alpha, magnitude_floor);
}

// W[:, j] *= s_j in place, for a Linear weight [out, in] of any strides.
inline void apply_smoothing(const std::vector<float>& scales, TensorView<float> weight) {
  const char* fn = "shrink::quant::apply_smoothing";
  detail::require_weight_matrix(weight, fn, "weight");
  detail::require_scales(scales, weight.size(1), fn);
  cpu::require_finite(weight, fn, "weight");
  detail::scale_last_dimension<false>(scales, weight);
}

// X[..., j] /= s_j in place, for activations [..., in] of any strides (when no norm precedes the layer).
inline void apply_inverse_smoothing(const std::vector<float>& scales, TensorView<float> activations) {
  const char* fn = "shrink::quant::apply_inverse_smoothing";
  require_host_view(activations, fn, "activations");
  if (activations.rank() < 1 || activations.empty())
    fail(fn, "activations.shape", to_string(activations.shape()), "rank >= 1 with at least one element, channels last");
  detail::require_scales(scales, activations.size(activations.rank() - 1), fn);
  cpu::require_finite(activations, fn, "activations");
  detail::scale_last_dimension<true>(scales, activations);
}

// gamma_j /= s_j and beta_j /= s_j in place, so a LayerNorm (gamma, beta both [in]) emits X diag(1/s).
inline void fold_smoothing_into_norm(const std::vector<float>& scales, TensorView<float> gamma, TensorView<float> beta) {
  const char* fn = "shrink::quant::fold_smoothing_into_norm";
  require_host_view(gamma, fn, "gamma");
  require_host_view(beta, fn, "beta");
  if (gamma.rank() != 1 || gamma.empty())
    fail(fn, "gamma.shape", to_string(gamma.shape()), "a non-empty vector [in]");
  if (beta.shape() != gamma.shape())
    fail(fn, "beta.shape", to_string(beta.shape()), "gamma's shape " + to_string(gamma.shape()));
  detail::require_scales(scales, gamma.size(0), fn);
  cpu::require_finite(gamma, fn, "gamma");
  cpu::require_finite(beta, fn, "beta");
  detail::scale_last_dimension<true>(scales, gamma);
  detail::scale_last_dimension<true>(scales, beta);
}

// gamma_j /= s_j for a norm without a shift (RMSNorm).
inline void fold_smoothing_into_norm(const std::vector<float>& scales, TensorView<float> gamma) {
  const char* fn = "shrink::quant::fold_smoothing_into_norm";
  require_host_view(gamma, fn, "gamma");
  if (gamma.rank() != 1 || gamma.empty())
    fail(fn, "gamma.shape", to_string(gamma.shape()), "a non-empty vector [in]");
  detail::require_scales(scales, gamma.size(0), fn);
  cpu::require_finite(gamma, fn, "gamma");
  detail::scale_last_dimension<true>(scales, gamma);
}

// W_prev[j, :] /= s_j (and bias_j /= s_j) in place, so a preceding Linear W_prev [in, k] (any strides) emits
// X diag(1/s): its output j is the smoothed layer's input j. Also where an elementwise product follows it (SwiGLU's
// up projection before down).
inline void fold_smoothing_into_linear(const std::vector<float>& scales, TensorView<float> weight,
                                       TensorView<float> bias) {
  const char* fn = "shrink::quant::fold_smoothing_into_linear";
  detail::require_weight_matrix(weight, fn, "weight");
  detail::require_scales(scales, weight.size(0), fn);
  require_host_view(bias, fn, "bias");
  if (bias.rank() != 1 || bias.size(0) != weight.size(0))
    fail(fn, "bias.shape", to_string(bias.shape()),
         "[" + std::to_string(weight.size(0)) + "], one per output row of the weight");
  cpu::require_finite(weight, fn, "weight");
  cpu::require_finite(bias, fn, "bias");
  detail::scale_rows(scales, weight);
  detail::scale_last_dimension<true>(scales, bias);
}

// W_prev[j, :] /= s_j for a preceding Linear without a bias.
inline void fold_smoothing_into_linear(const std::vector<float>& scales, TensorView<float> weight) {
  const char* fn = "shrink::quant::fold_smoothing_into_linear";
  detail::require_weight_matrix(weight, fn, "weight");
  detail::require_scales(scales, weight.size(0), fn);
  cpu::require_finite(weight, fn, "weight");
  detail::scale_rows(scales, weight);
}

}  // namespace shrink::quant
