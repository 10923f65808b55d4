// Names the tensor in an error raised while working on it: "tensor \"fc1.weight\": <the library's message>".
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "shrink/core/error.hpp"

namespace shrink::cli {

template <class Work>
auto in_tensor_context(const std::string& name, Work&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const UsageError& e) {
    throw UsageError("tensor \"" + name + "\": " + e.what());
  } catch (const shrink::Error& e) {
    throw shrink::Error("tensor \"" + name + "\": " + e.what());
  }
}

// Throws shrink::Error naming the first element of `values` (of `shape`) that is NaN or infinite: a checkpoint with
// such values is damaged, and no scale or threshold computed from it would mean anything.
inline void require_finite(const std::vector<float>& values, const std::vector<std::int64_t>& shape) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (std::isfinite(values[i])) continue;
    std::string index;
    std::int64_t rest = static_cast<std::int64_t>(i);
    for (std::size_t d = shape.size(); d-- > 0;) {
      index = std::to_string(rest % shape[d]) + (index.empty() ? "" : ", ") + index;
      rest /= shape[d];
    }
    throw shrink::Error("element [" + index + "] is " +
                        (std::isnan(values[i]) ? "nan"
                         : values[i] > 0       ? "inf"
                                               : "-inf") +
                        ": expected finite values (repair the tensor, or leave it out with --exclude)");
  }
}

}  // namespace shrink::cli
