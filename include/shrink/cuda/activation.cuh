// act(v) in device code, as cpu::Activation defines it (ReLU, GELU with erf, SiLU) in CUDA's float math, for the
// epilogues of the weight-only GEMM and the CSR SpMM. The INT8 GEMM's epilogue has its own, which rounds each
// operation as its CPU twin does (gemm_int8_epilogue.cuh).
#pragma once

#include <cuda_runtime.h>

#include "shrink/cpu/linear_epilogue.hpp"

namespace shrink::cuda {

__device__ __forceinline__ float activate(float v, cpu::Activation a) {
  switch (a) {
    case cpu::Activation::none: return v;
    case cpu::Activation::relu: return v > 0.0f ? v : 0.0f;
    case cpu::Activation::gelu: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case cpu::Activation::silu: return v / (1.0f + expf(-v));
  }
  return v;
}

}  // namespace shrink::cuda
