// The output types of the CPU matrix products beyond float, each made from the float epilogue value v as
// core/epilogue.hpp defines it (and the CUDA kernels write it): half and bfloat16 round v to nearest even, int8
// requantizes it with epilogue.out_scale.
#pragma once

#include <cstdint>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"

namespace shrink::cpu::detail {

// out[j] = the `Out` form of the float epilogue values v[j], j < count.
template <class Out>
void store_outputs(const float* v, Out* out, std::int64_t count, const Epilogue& epilogue) {
  if constexpr (std::is_same<Out, float>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = v[j];
  } else if constexpr (std::is_same<Out, half>::value || std::is_same<Out, bfloat16>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = Out(v[j]);
  } else {
    static_assert(std::is_same<Out, std::int8_t>::value, "outputs are float, half, bfloat16 or int8");
    const float inverse = 1.0f / epilogue.out_scale;
    for (std::int64_t j = 0; j < count; ++j) out[j] = epilogue_int8(v[j], epilogue.out_scale, inverse);
  }
}

}  // namespace shrink::cpu::detail
