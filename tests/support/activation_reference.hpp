// act(v) in double: the reference of the linear layers' activations (cpu/linear_epilogue.hpp, the CUDA GEMMs'
// epilogues), PyTorch's definitions: ReLU, GELU with erf, SiLU.
#pragma once

#include <cmath>

#include "shrink/cpu/linear_epilogue.hpp"

namespace shrink::test {

inline double activate_reference(double v, cpu::Activation a) {
  switch (a) {
    case cpu::Activation::none: return v;
    case cpu::Activation::relu: return v > 0 ? v : 0;
    case cpu::Activation::gelu: return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case cpu::Activation::silu: return v / (1.0 + std::exp(-v));
  }
  return v;
}

}  // namespace shrink::test
