// The activation of every matrix-product epilogue, one formula for the host and the device:
//   none v;  ReLU max(v, 0);  GELU 0.5 · v · (1 + erf(v / √2)) (PyTorch's default, erf);  SiLU v / (1 + exp(−v))
// Each operation rounds on its own, in this order: no product here feeds an addition, so no compiler can fuse one
// into an FMA, and the device code spells its roundings out (__fmul_rn ...) besides. The host and the device agree
// bit for bit for none and ReLU; GELU and SiLU differ by CUDA's erff / expf against the C library's (a few ulps).
#pragma once

#include <cmath>
#include <cstdint>

#include "shrink/core/config.hpp"

namespace shrink {

enum class Activation : std::uint8_t { none, relu, gelu, silu };

inline const char* to_string(Activation a) {
  switch (a) {
    case Activation::none: return "none";
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::silu: return "silu";
  }
  return "?";
}

// Whether `a` is one of the four (an enum read from a file or cast from an integer may not be).
inline bool is_known(Activation a) {
  return a == Activation::none || a == Activation::relu || a == Activation::gelu || a == Activation::silu;
}

SHRINK_HOST_DEVICE SHRINK_FORCE_INLINE float activate(float v, Activation a) {
#if defined(__CUDA_ARCH__)
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0.0f ? v : 0.0f;
    case Activation::gelu:
      return __fmul_rn(__fmul_rn(0.5f, v), __fadd_rn(1.0f, erff(__fmul_rn(v, 0.70710678118654752f))));
    case Activation::silu: return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v)));
  }
#else
  switch (a) {
    case Activation::none: return v;
    case Activation::relu: return v > 0.0f ? v : 0.0f;
    case Activation::gelu: return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
    case Activation::silu: return v / (1.0f + std::exp(-v));
  }
#endif
  return v;
}

}  // namespace shrink
