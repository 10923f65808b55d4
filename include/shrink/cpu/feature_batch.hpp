// The check every per-feature activation observer makes of a batch [..., in_features] (features last): a host view,
// non-empty, the width of earlier batches, every value finite. One Error naming the argument.
#pragma once

#include <cstdint>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/nonfinite_check.hpp"

namespace shrink::cpu {

// The batch's feature count; `features_seen` is the width of earlier batches, 0 before the first.
inline std::int64_t check_feature_batch(const TensorView<const float>& activations, std::int64_t features_seen,
                                        const char* fn) {
  require_host_view(activations, fn, "activations");
  if (activations.rank() < 1 || activations.empty())
    fail(fn, "activations.shape", to_string(activations.shape()),
         "rank >= 1 with at least one element, features last: [..., in_features]");
  const std::int64_t features = activations.size(activations.rank() - 1);
  if (features_seen > 0 && features != features_seen)
    fail(fn, "activations.shape", to_string(activations.shape()),
         "a last dimension of " + std::to_string(features_seen) + " features, as in earlier batches");
  require_finite(activations, fn, "activations");
  return features;
}

}  // namespace shrink::cpu
