// Host-callable magnitude threshold selection (shrink/cuda/threshold.hpp): validation, then the radix-select passes
// of shrink/cuda/kernels/threshold.cuh (one launch a pass for every kListCapacity tensors of the list), instantiated for
// float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/threshold.cuh"
#include "shrink/cuda/threshold.hpp"

namespace shrink::cuda {

using namespace detail;

namespace {

// The tensors [begin, begin + kListCapacity) of the list as one launch's parameters; `elements` gets their sum.
template <class T>
kernels::threshold::TensorList<T> tensor_list(const std::vector<DeviceWeights<T>>& weights, std::size_t begin,
                                              std::int64_t& elements) {
  kernels::threshold::TensorList<T> list{};
  elements = 0;
  for (std::size_t s = begin; s < weights.size() && list.count < kernels::threshold::kListCapacity; ++s) {
    const TensorView<const T>& v = weights[s].view;
    const bool vectorised = kernels::aligned_to(v.data(), 16);
    list.entry[list.count++] = {v.data(), v.numel(), vectorised ? v.numel() / kernels::threshold::kLanes<T> : 0,
                                weights[s].current};
    elements += v.numel();
  }
  return list;
}

// One pass over every list (the bucket choice follows once all of them are counted).
template <class T, int Pass>
void count_pass(const std::vector<kernels::threshold::TensorList<T>>& lists,
                const kernels::threshold::CountLaunch& launch, const kernels::threshold::SelectState* state,
                unsigned long long* histogram, int* status, cudaStream_t stream) {
  for (const kernels::threshold::TensorList<T>& list : lists)
    kernels::threshold::count<T, Pass>(list, launch, state, histogram, status, stream);
}

}  // namespace

std::size_t threshold_workspace_bytes() { return kernels::threshold::kWorkspaceBytes; }

template <class T>
void select_magnitude_threshold(const std::vector<DeviceWeights<T>>& weights, std::int64_t k,
                                prune::MagnitudeThreshold* result, Workspace workspace, Stream stream,
                                Synchronize synchronize) {
  const char* fn = "shrink::cuda::select_magnitude_threshold";
  if (weights.empty()) fail(fn, "weights", "an empty list", "at least one tensor");
  std::int64_t elements = 0;
  bool masked = false;
  for (std::size_t s = 0; s < weights.size(); ++s) {
    const std::string name = weights.size() > 1 ? "weights[" + std::to_string(s) + "]" : "weights";
    const TensorView<const T>& v = weights[s].view;
    if (!v.device().is_cuda())
      fail(fn, name.c_str(), "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
    require_nonempty(v, fn, name.c_str());
    require_contiguous(v, fn, name.c_str());
    require_pointer(v.data(), alignof(T), fn, name.c_str());
    if (weights[s].current != nullptr) {
      masked = true;
      require_pointer(weights[s].current, alignof(std::uint64_t), fn,
                      (weights.size() > 1 ? "current[" + std::to_string(s) + "]" : std::string("current")).c_str());
    }
    elements += v.numel();
  }
  if (k < 0 || (!masked && k > elements))
    fail(fn, "k", k, "a count in [0, " + std::to_string(elements) + "], the candidates");
  require_pointer(result, alignof(prune::MagnitudeThreshold), fn, "result");
  require_pointer(workspace.data, 16, fn, "workspace.data");
  if (workspace.bytes < threshold_workspace_bytes())
    fail(fn, "workspace.bytes", workspace.bytes,
         "at least threshold_workspace_bytes() = " + std::to_string(threshold_workspace_bytes()));
  int current_device = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&current_device));
  for (std::size_t s = 0; s < weights.size(); ++s)
    if (weights[s].view.device().index != current_device)
      fail(fn, weights.size() > 1 ? ("weights[" + std::to_string(s) + "]").c_str() : "weights",
           "a view on CUDA device " + std::to_string(weights[s].view.device().index),
           "memory on the current device " + std::to_string(current_device));

  // The launches' lists, and their configurations (no stream work) for the largest.
  std::vector<kernels::threshold::TensorList<T>> lists;
  std::int64_t most = 0;
  for (std::size_t begin = 0; begin < weights.size(); begin += kernels::threshold::kListCapacity) {
    std::int64_t elements = 0;
    lists.push_back(tensor_list(weights, begin, elements));
    most = elements > most ? elements : most;
  }
  constexpr bool kTwoDigits = kernels::threshold::KeyOf<T>::digits == 2;
  const kernels::threshold::CountLaunch high = kernels::threshold::count_launch<T, 0>(most, fn);
  kernels::threshold::CountLaunch low;
  if constexpr (kTwoDigits) low = kernels::threshold::count_launch<T, 1>(most, fn);

  char* base = static_cast<char*>(workspace.data);
  int* status = reinterpret_cast<int*>(base);
  auto* state = reinterpret_cast<kernels::threshold::SelectState*>(base + kernels::threshold::kStateOffset);
  auto* high_histogram = reinterpret_cast<unsigned long long*>(base + kernels::threshold::kHistogramOffset[0]);
  auto* low_histogram = reinterpret_cast<unsigned long long*>(base + kernels::threshold::kHistogramOffset[1]);
  // Status, state and the histograms the passes use.
  SHRINK_CUDA_CHECK(cudaMemsetAsync(
      workspace.data, 0, kTwoDigits ? kernels::threshold::kWorkspaceBytes : kernels::threshold::kHistogramOffset[1],
      stream));
  count_pass<T, 0>(lists, high, state, high_histogram, status, stream);
  kernels::threshold::choose_bucket<T, 0>(high_histogram, state, k, result, status, stream);
  if constexpr (kTwoDigits) {
    count_pass<T, 1>(lists, low, state, low_histogram, status, stream);
    kernels::threshold::choose_bucket<T, 1>(low_histogram, state, k, result, status, stream);
  }

  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template void select_magnitude_threshold<float>(const std::vector<DeviceWeights<float>>&, std::int64_t,
                                                prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);
template void select_magnitude_threshold<half>(const std::vector<DeviceWeights<half>>&, std::int64_t,
                                               prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);
template void select_magnitude_threshold<bfloat16>(const std::vector<DeviceWeights<bfloat16>>&, std::int64_t,
                                                   prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);

}  // namespace shrink::cuda
