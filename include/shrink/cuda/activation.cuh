// act(v) in device code, as cpu::Activation defines it (ReLU, GELU with erf, SiLU), for every GPU epilogue. Each
// operation is rounded on its own (no contraction into FMAs), in the CPU's order, so ReLU and none are bit for bit the
// CPU's and GELU / SiLU differ only by CUDA's erff / expf against glibc's (a few ulps).
#pragma once

#include <cuda_runtime.h>

#include "shrink/cpu/linear_epilogue.hpp"

namespace shrink::cuda {

__device__ __forceinline__ float activate(float v, cpu::Activation a) {
  switch (a) {
    case cpu::Activation::none: return v;
    case cpu::Activation::relu: return v > 0.0f ? v : 0.0f;
    case cpu::Activation::gelu:
      return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, 0.70710678118654752f))));
    case cpu::Activation::silu: return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
  }
  return v;
}

}  // namespace shrink::cuda
