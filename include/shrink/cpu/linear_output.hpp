// The output types of the CPU INT8 linear layer beyond float, each made from the float epilogue value v
// (cpu/linear_epilogue.hpp), as the CUDA W8A8 GEMM writes them (cuda/gemm_int8.hpp):
//
//   half, bfloat16   v rounded to nearest, ties to even (core/half.hpp)
//   int8             q = clamp(nearbyint(v · (1.0f / output_scale)), −128, 127): quant/quantize.hpp's symmetric int8
//                    quantize (inv_scale in float, round half to even; NaN lands on −128 as there)
#pragma once

#include <cstdint>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "shrink/cpu/linear_epilogue.hpp"
#include "shrink/cpu/quantize.hpp"

namespace shrink::cpu::detail {

// out[j] = the `Out` form of the float epilogue values v[j], j < count.
template <class Out>
void store_outputs(const float* v, Out* out, std::int64_t count, const LinearEpilogue& epilogue) {
  if constexpr (std::is_same<Out, float>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = v[j];
  } else if constexpr (std::is_same<Out, half>::value || std::is_same<Out, bfloat16>::value) {
    for (std::int64_t j = 0; j < count; ++j) out[j] = Out(v[j]);
  } else {
    static_assert(std::is_same<Out, std::int8_t>::value, "outputs are float, half, bfloat16 or int8");
    const AffineParams p(epilogue.output_scale, 0, -128, 127);
    for (std::int64_t j = 0; j < count; ++j) out[j] = static_cast<std::int8_t>(quantize_value(v[j], p));
  }
}

}  // namespace shrink::cpu::detail
