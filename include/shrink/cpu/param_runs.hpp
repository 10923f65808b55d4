// Walks a contiguous tensor in memory order as runs of elements that share quantization parameters, in parallel on
// the current executor (core/executor.hpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "shrink/core/axis.hpp"
#include "shrink/core/executor.hpp"

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

// One run: `length` elements from `offset`, sharing parameter `param` (uniform), or element k taking parameter
// param + k (varying).
struct ParamRun {
  std::int64_t offset = 0;
  std::int64_t length = 0;
  std::int64_t param = 0;
  bool varying = false;
};

// Every layout's runs have one length; run r of `count`, in memory order.
struct ParamRuns {
  ParamLayout layout;
  std::int64_t count = 0;
  std::int64_t length = 0;

  explicit ParamRuns(const ParamLayout& l) : layout(l) {
    const AxisSplit& s = l.split;
    const std::int64_t groups = s.channels / l.group;
    if (!l.per_outer_inner) {
      const std::int64_t run = l.group * s.inner;
      count = run == 1 ? s.outer : s.outer * groups;  // run 1: one parameter per channel along the innermost axis
      length = run == 1 ? s.channels : run;
    } else if (s.inner == 1) {
      count = s.outer * groups;
      length = l.group;
    } else {
      count = s.outer * s.channels;
      length = s.inner;
    }
  }

  ParamRun operator[](std::int64_t r) const {
    const AxisSplit& s = layout.split;
    const std::int64_t groups = s.channels / layout.group;
    if (!layout.per_outer_inner) {
      if (layout.group * s.inner == 1) return {r * s.channels, s.channels, 0, true};
      return {r * length, length, r % groups, false};
    }
    if (s.inner == 1) return {r * length, length, r, false};
    const std::int64_t o = r / s.channels, c = r % s.channels;
    return {r * length, length, (o * groups + c / layout.group) * s.inner, true};
  }
};

inline constexpr std::int64_t kParamPiece = 1 << 15;  // elements of a run handed to one task at most

// Calls uniform(offset, length, param) for runs sharing one parameter and varying(offset, length, first_param) for
// runs whose element k takes parameter first_param + k, each over disjoint elements; long runs come in pieces of at
// most kParamPiece elements. The calls run on the current executor, possibly at once; `cost` is the operations per
// element, for the chunk size. Elementwise work gives the same bytes on any executor.
template <class Uniform, class Varying>
void for_each_param_run(const ParamLayout& layout, Uniform&& uniform, Varying&& varying, double cost = 8.0) {
  const ParamRuns runs(layout);
  if (runs.count <= 0 || runs.length <= 0) return;
  const std::int64_t pieces_per_run = (runs.length + kParamPiece - 1) / kParamPiece;
  const std::int64_t pieces = runs.count * pieces_per_run;
  const double piece_cost = cost * static_cast<double>(std::min(runs.length, kParamPiece));
  parallel_for(pieces, chunk_size(pieces, piece_cost), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const ParamRun run = runs[p / pieces_per_run];
      const std::int64_t skip = p % pieces_per_run * kParamPiece;
      const std::int64_t length = std::min(kParamPiece, run.length - skip);
      if (run.varying)
        varying(run.offset + skip, length, run.param + skip);
      else
        uniform(run.offset + skip, length, run.param);
    }
  });
}

}  // namespace shrink::cpu
