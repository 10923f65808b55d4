// Walks a contiguous tensor in memory order as runs of elements that share quantization parameters.
#pragma once

#include <cstdint>

#include "shrink/core/axis.hpp"

namespace shrink::cpu {

// Where parameters change, for a tensor seen as [outer, channels, inner]:
// - channel layout (per_outer_inner false): `group` consecutive channels share parameter c / group
//   (per tensor: one group of all channels; per channel: group 1);
// - group layout (per_outer_inner true): parameter (o * channels / group + c / group) * inner + i.
struct ParamLayout {
  AxisSplit split;
  std::int64_t group = 1;
  bool per_outer_inner = false;
};

// Calls uniform(offset, length, param) for runs sharing one parameter and
// varying(offset, length, first_param) for runs whose element k takes parameter first_param + k.
template <class Uniform, class Varying>
void for_each_param_run(const ParamLayout& layout, Uniform&& uniform, Varying&& varying) {
  const AxisSplit& s = layout.split;
  const std::int64_t groups = s.channels / layout.group;
  if (!layout.per_outer_inner) {
    const std::int64_t run = layout.group * s.inner;
    if (run == 1) {  // one parameter per channel along the innermost axis: rows across channels
      for (std::int64_t o = 0; o < s.outer; ++o) varying(o * s.channels, s.channels, std::int64_t{0});
      return;
    }
    for (std::int64_t o = 0; o < s.outer; ++o)
      for (std::int64_t g = 0; g < groups; ++g) uniform((o * groups + g) * run, run, g);
    return;
  }
  if (s.inner == 1) {
    for (std::int64_t o = 0; o < s.outer; ++o)
      for (std::int64_t g = 0; g < groups; ++g) uniform((o * groups + g) * layout.group, layout.group, o * groups + g);
    return;
  }
  for (std::int64_t o = 0; o < s.outer; ++o)
    for (std::int64_t c = 0; c < s.channels; ++c)
      varying((o * s.channels + c) * s.inner, s.inner, (o * groups + c / layout.group) * s.inner);
}

}  // namespace shrink::cpu
