// Host API of the CUDA magnitude threshold selection (compiled in cuda/threshold.cu; plain C++, no CUDA headers).
//
// The same result as prune::select_magnitude_threshold (prune/threshold.hpp), field for field: the k-th smallest |w|
// among the candidates of one tensor or of a list (global pruning; list order, then row-major), how many candidates
// lie below it and at it, and how many of those at it are pruned. Candidates are every element, or those a current
// device mask keeps (prune::Mask's words). k is a count (torch's round(amount * n) is the caller's, as on the CPU).
// The device code (shrink/cuda/kernels/threshold.cuh) is a radix select over the bits of |w|, no sort: for float a histogram
// of the top 15 bits of its float bits (bit 31 is clear), then of the low 16 within the chosen bucket, two reads of
// the weights; for half and bfloat16 one histogram of their own 15 magnitude bits, one read. Every pass and bucket
// choice runs on the device, so the whole select enqueues without a host round trip.
//
// Two phases, as CUB: threshold_workspace_bytes(), then the call, which enqueues on `stream`, allocates nothing and
// writes the result to a device prune::MagnitudeThreshold. Host checks throw shrink::Error before any CUDA call;
// device checks go to the status word (kNonFinite: NaN/inf anywhere, kept or not; kBadRank: k above the candidates
// the masks keep) and are read with Synchronize::yes, which then throws naming them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/prune/threshold.hpp"

namespace shrink::cuda {

// One tensor's contiguous device weights and, optionally, the device words of its current mask (as
// prune::Mask::words(); nullptr: every element is a candidate).
template <class T>
struct DeviceWeights {
  TensorView<const T> view;
  const std::uint64_t* current = nullptr;
};

// Workspace of every call below (status word, select state, histograms: 768 KiB); independent of the sizes, the
// list's length and the device.
std::size_t threshold_workspace_bytes();

// Writes the threshold pruning exactly k candidates of `weights` (concatenated in list order) to `*result`, a device
// prune::MagnitudeThreshold. T: float, half, bfloat16. Errors on the host: an empty list, a view not on the current
// CUDA device, empty or not contiguous, k < 0, k above the element count when no masks are given, a null result.
template <class T>
void select_magnitude_threshold(const std::vector<DeviceWeights<T>>& weights, std::int64_t k,
                                prune::MagnitudeThreshold* result, Workspace workspace, Stream stream,
                                Synchronize synchronize = Synchronize::no);

template <class T>
void select_magnitude_threshold(TensorView<const T> weights, std::int64_t k, prune::MagnitudeThreshold* result,
                                Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no) {
  select_magnitude_threshold(std::vector<DeviceWeights<T>>{DeviceWeights<T>{weights, nullptr}}, k, result, workspace,
                             stream, synchronize);
}

}  // namespace shrink::cuda
