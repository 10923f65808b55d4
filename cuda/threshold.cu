// Host-callable magnitude threshold selection (shrink/cuda/threshold.hpp): validation, then the radix-select passes
// of shrink/cuda/threshold.cuh over every tensor of the list, instantiated for float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/check.cuh"
#include "shrink/cuda/threshold.cuh"
#include "shrink/cuda/threshold.hpp"

namespace shrink::cuda {

using namespace host_checks;

namespace {


template <int Pass, class T>
void run_pass(const std::vector<DeviceWeights<T>>& weights, radix::SelectState* state, unsigned long long* histograms,
              int* status, cudaStream_t stream) {
  for (const auto& w : weights)
    radix::histogram<Pass>(w.view.data(), w.view.numel(), w.current, state, histograms, status, stream);
}

}  // namespace

std::size_t threshold_workspace_bytes() { return radix::kWorkspaceBytes; }

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

  char* base = static_cast<char*>(workspace.data);
  int* status = reinterpret_cast<int*>(base);
  auto* state = reinterpret_cast<radix::SelectState*>(base + radix::kStateOffset);
  auto* histograms = reinterpret_cast<unsigned long long*>(base + radix::kHistogramBytesOffset);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(workspace.data, 0, radix::kWorkspaceBytes, stream));
  run_pass<0>(weights, state, histograms, status, stream);
  radix::choose_bucket<0>(histograms, state, k, result, status, stream);
  run_pass<1>(weights, state, histograms, status, stream);
  radix::choose_bucket<1>(histograms, state, k, result, status, stream);
  run_pass<2>(weights, state, histograms, status, stream);
  radix::choose_bucket<2>(histograms, state, k, result, status, stream);

  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template void select_magnitude_threshold<float>(const std::vector<DeviceWeights<float>>&, std::int64_t,
                                                prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);
template void select_magnitude_threshold<half>(const std::vector<DeviceWeights<half>>&, std::int64_t,
                                               prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);
template void select_magnitude_threshold<bfloat16>(const std::vector<DeviceWeights<bfloat16>>&, std::int64_t,
                                                   prune::MagnitudeThreshold*, Workspace, Stream, Synchronize);

}  // namespace shrink::cuda
