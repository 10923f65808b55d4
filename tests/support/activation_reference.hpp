// act(v) in double: the reference of the linear layers' activations (core/activation.hpp, the CUDA GEMMs'
// epilogues), PyTorch's definitions: ReLU, GELU with erf, SiLU; and every activation, for the tests that try each.
#pragma once

#include <cmath>

#include "shrink/core/epilogue.hpp"

namespace shrink::test {

inline double activate_reference(double v, Activation a) {
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0 ? v : 0;
    case Activation::gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::silu: return v / (1.0 + std::exp(-v));
  }
  return v;
}

inline constexpr Activation kActivations[] = {Activation::none, Activation::relu, Activation::gelu, Activation::silu};

}  // namespace shrink::test
