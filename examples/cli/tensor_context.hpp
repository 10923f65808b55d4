// Names the tensor in an error raised while working on it: "tensor \"fc1.weight\": <the library's message>".
#pragma once

#include <string>

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

}  // namespace shrink::cli
