// The cp.async stage ring of the pipelined GEMM kernels (linear_int8's mma.sync and wgmma kernels, the 2:4 kernel),
// host and device, so that a [host] test replays the kernels' own schedule (tests/linear/test_int8_layout_cuda.cpp).
//
// Tiles 0 .. Stages − 2 are loaded before the loop, one commit group each; iteration t waits until its tile's group has
// landed, passes a barrier, loads tile t + Stages − 1 into the stage tile t − 1 was read from, commits (a group, empty
// past the end, every iteration), then reads tile t.
#pragma once

#include "shrink/core/config.hpp"

namespace shrink::cuda::kernels {

template <int Stages>
struct StageRing {
  static_assert(Stages >= 2, "a pipeline needs two stages at least");
  static constexpr int kPrologueTiles = Stages - 1;
  // Groups committed before iteration t's wait: Stages − 1 + t; all but the newest Stages − 2 (tile t's included)
  // must have landed.
  static constexpr int kPendingAtWait = Stages - 2;
  SHRINK_HOST_DEVICE static constexpr int stage_of(int tile) { return tile % Stages; }
  SHRINK_HOST_DEVICE static constexpr int tile_loaded_at(int iteration) { return iteration + Stages - 1; }
};

}  // namespace shrink::cuda::kernels
