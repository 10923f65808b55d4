// Observer: the stateful calibration interface (observe many batches, then ask for qparams).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/quant/qparams.hpp"
#include "shrink/quant/scheme.hpp"

namespace shrink::quant {

struct ObserverOptions {
  // false: a NaN or +-inf in a batch is an error naming its index, and the batch is not counted.
  // true: such elements are skipped (a batch with no finite element still counts as seen).
  bool ignore_nonfinite = false;
};

// A batch after the checks every observer shares: contiguous host data seen around the scheme's axis.
struct ObservedBatch {
  const float* data = nullptr;
  Shape shape;
  AxisSplit split;  // [outer, channels, inner]; per-tensor schemes see [1, numel, 1]
  std::int64_t numel() const { return shape.product(); }
};

namespace detail {

// Finite range of every parameter entry of a batch (one per tensor, channel or group).
inline std::vector<cpu::FiniteRange> batch_ranges(const ObservedBatch& b, const QuantScheme& scheme) {
  switch (scheme.granularity) {
    case Granularity::per_tensor: return {cpu::finite_range_parallel(b.data, b.numel())};
    case Granularity::per_channel: {
      std::vector<cpu::FiniteRange> r(static_cast<std::size_t>(b.split.channels));
      cpu::finite_ranges_per_channel(b.data, b.split, 1, false, r.data());
      return r;
    }
    case Granularity::per_group: {
      std::vector<cpu::FiniteRange> r(static_cast<std::size_t>(b.split.outer * (b.split.channels / scheme.group_size) * b.split.inner));
      cpu::finite_ranges_per_channel(b.data, b.split, scheme.group_size, true, r.data());
      return r;
    }
  }
  return {};
}

inline std::int64_t count_nonfinite(const std::vector<cpu::FiniteRange>& ranges) {
  std::int64_t n = 0;
  for (const auto& r : ranges) n += r.nonfinite;
  return n;
}

}  // namespace detail

// Base of all calibrators. observe() may be called many times; qparams() at any point after the first.
// A failed observe() leaves the state as it was.
class Observer {
 public:
  explicit Observer(const QuantScheme& scheme, ObserverOptions options = {}) : scheme_(scheme), options_(options) {
    quant_range(scheme_);  // a scheme with a bad dtype/range combination fails here, not later
  }
  virtual ~Observer() = default;

  void observe(TensorView<const float> batch) {
    const char* fn = "shrink::quant::Observer::observe";
    require_host_view(batch, fn, "batch");
    require_nonempty(batch, fn, "batch");
    if (!supports(scheme_.granularity))
      fail(fn, "scheme.granularity", to_string(scheme_.granularity), std::string("a granularity that ") + name() + " supports");
    ObservedBatch b;
    b.shape = batch.shape();
    b.split = scheme_split(scheme_, b.shape, fn);
    if (scheme_.granularity != Granularity::per_tensor) {
      const Shape pshape = qparams_shape(scheme_, b.shape, fn);
      if (batches_ > 0 && pshape != param_shape_)
        fail(fn, "batch.shape", to_string(b.shape),
             "a shape with the same parameter layout as earlier batches (" + to_string(param_shape_) + ")");
    }
    std::vector<float> packed;
    if (batch.is_contiguous()) {
      b.data = batch.data();
    } else {
      packed = contiguous_copy(batch);
      b.data = packed.data();
    }
    accumulate(b);
    param_shape_ = qparams_shape(scheme_, b.shape, fn);
    ++batches_;
  }

  // Parameters from everything observed so far.
  QParams qparams() const {
    if (batches_ == 0)
      fail("shrink::quant::Observer::qparams", std::string(name()) + " has observed no batch: call observe() first");
    return compute_qparams();
  }

  virtual void reset() {
    batches_ = 0;
    param_shape_ = Shape{};
  }

  const QuantScheme& scheme() const { return scheme_; }
  const ObserverOptions& options() const { return options_; }
  std::int64_t batches_seen() const { return batches_; }
  virtual const char* name() const = 0;

 protected:
  // Adds one batch; must throw before changing any state.
  virtual void accumulate(const ObservedBatch& batch) = 0;
  virtual QParams compute_qparams() const = 0;
  virtual bool supports(Granularity g) const { return g != Granularity::per_group; }

  // Throws naming the first non-finite element unless options().ignore_nonfinite.
  void reject_nonfinite(const ObservedBatch& batch, std::int64_t nonfinite) const {
    if (nonfinite == 0 || options_.ignore_nonfinite) return;
    const std::int64_t at = cpu::first_nonfinite(batch.data, batch.numel());
    fail("shrink::quant::Observer::observe", ("batch[" + std::to_string(at) + "]").c_str(), batch.data[at],
         "finite values (set ObserverOptions::ignore_nonfinite to skip NaN/inf)");
  }

  const Shape& param_shape() const { return param_shape_; }

 private:
  QuantScheme scheme_;
  ObserverOptions options_;
  std::int64_t batches_ = 0;
  Shape param_shape_{};
};

}  // namespace shrink::quant
