// MinMaxObserver and MovingAverageMinMaxObserver (PyTorch's, per tensor, per channel or per group).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/quant/observer.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {
namespace detail {

// An entry that never saw a finite value has min > max.
inline void require_all_seen(const std::vector<float>& mins, const std::vector<float>& maxs, const char* observer) {
  for (std::size_t i = 0; i < mins.size(); ++i)
    if (mins[i] > maxs[i])
      fail("shrink::quant::Observer::qparams",
           std::string(observer) + ": parameter entry " + std::to_string(i) + " has seen no finite value");
}

}  // namespace detail

// Base of the observers that keep one [min, max] per parameter entry; subclasses say how a batch's range updates it.
class RangeObserver : public Observer {
 public:
  const std::vector<float>& min_values() const { return mins_; }
  const std::vector<float>& max_values() const { return maxs_; }

  void reset() override {
    Observer::reset();
    mins_.clear();
    maxs_.clear();
  }

 protected:
  using Observer::Observer;

  bool supports(Granularity) const override { return true; }

  // Folds the finite range of entry i of a batch (min > max when it had no finite value) into min_i, max_i;
  // an entry that has seen no finite value yet has min > max.
  virtual void update(float& min, float& max, const cpu::FiniteRange& batch) = 0;

  void accumulate(const ObservedBatch& batch) override {
    const std::vector<cpu::FiniteRange> ranges = detail::batch_ranges(batch, scheme());
    reject_nonfinite(batch, detail::count_nonfinite(ranges));
    if (mins_.empty()) {
      mins_.assign(ranges.size(), std::numeric_limits<float>::infinity());
      maxs_.assign(ranges.size(), -std::numeric_limits<float>::infinity());
    }
    for (std::size_t i = 0; i < ranges.size(); ++i) update(mins_[i], maxs_[i], ranges[i]);
  }

  QParams compute_qparams() const override {
    detail::require_all_seen(mins_, maxs_, name());
    return qparams_from_ranges(mins_, maxs_, scheme(), param_shape(), "shrink::quant::Observer::qparams");
  }

 private:
  std::vector<float> mins_, maxs_;
};

// Running minimum and maximum of everything observed: s, zp = scale_zero_point_from_range(min, max).
class MinMaxObserver : public RangeObserver {
 public:
  explicit MinMaxObserver(const QuantScheme& scheme, ObserverOptions options = {}) : RangeObserver(scheme, options) {}
  const char* name() const override { return "MinMaxObserver"; }

 protected:
  void update(float& min, float& max, const cpu::FiniteRange& batch) override {
    min = std::fmin(min, batch.min);
    max = std::fmax(max, batch.max);
  }
};

// Exponential moving average of each batch's min and max (PyTorch's MovingAverage[PerChannel]MinMaxObserver):
// the first batch sets them, then min += c * (batch_min - min) and likewise for max, in float32.
class MovingAverageMinMaxObserver : public RangeObserver {
 public:
  explicit MovingAverageMinMaxObserver(const QuantScheme& scheme, float averaging_constant = 0.01f,
                                       ObserverOptions options = {})
      : RangeObserver(scheme, options), averaging_constant_(averaging_constant) {
    if (!(averaging_constant > 0.0f && averaging_constant <= 1.0f))
      fail("shrink::quant::MovingAverageMinMaxObserver", "averaging_constant", averaging_constant, "a value in (0, 1]");
  }

  const char* name() const override { return "MovingAverageMinMaxObserver"; }
  float averaging_constant() const { return averaging_constant_; }

 protected:
  void update(float& min, float& max, const cpu::FiniteRange& batch) override {
    if (batch.min > batch.max) return;  // no finite value in this entry of the batch
    if (min > max) {                     // first finite data for this entry
      min = batch.min;
      max = batch.max;
      return;
    }
    const float min_step = averaging_constant_ * (batch.min - min);  // two roundings, as PyTorch's tensor ops
    const float max_step = averaging_constant_ * (batch.max - max);
    min = min + min_step;
    max = max + max_step;
  }

 private:
  float averaging_constant_;
};

// One-shot parameters from the min and max of x (per tensor, channel or group as the scheme says).
inline QParams minmax_qparams(TensorView<const float> x, const QuantScheme& scheme) {
  MinMaxObserver observer(scheme);
  observer.observe(x);
  return observer.qparams();
}

}  // namespace shrink::quant
