// Host-callable calibration statistics (shrink/cuda/calibration.hpp): validation, then the kernels of
// shrink/cuda/kernels/calibration.cuh.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cuda/kernels/calibration.cuh"
#include "shrink/cuda/calibration.hpp"
#include "host_checks.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"

namespace shrink::cuda {

using namespace detail;
namespace {

constexpr int kThreads = 256;
constexpr std::int32_t kMaxBins = std::int32_t{1} << 24;
constexpr std::int32_t kMaxSharedBins = 12288;  // 48 KB of 32-bit counters: the default shared-memory limit
constexpr std::int64_t kColumnInner = 32;  // runs shorter than a warp take minmax_columns_kernel (coalesced columns)



void require_workspace(const Workspace& workspace, std::int64_t entries, const char* fn) {
  detail::require_workspace(workspace, calibration_workspace_bytes(entries),
                            "calibration_workspace_bytes(" + std::to_string(entries) + ")", fn);
}


int* status_word(const Workspace& workspace) { return static_cast<int*>(workspace.data); }

// Blocks of a 1-D grid-stride loop: at least one.
unsigned blocks_for(std::int64_t work) { return kernels::grid_blocks(work, kThreads); }

void minmax(TensorView<const float> x, const AxisSplit& split, float* min, float* max, Workspace workspace,
            Stream stream, Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize, const char* fn) {
  const std::int64_t entries = split.channels;
  require_pointer(min, alignof(float), fn, "min");
  require_pointer(max, alignof(float), fn, "max");
  require_workspace(workspace, entries, fn);
  require_current_device(x.device(), fn, "x");

  int* status = status_word(workspace);
  int* keys_min = reinterpret_cast<int*>(static_cast<char*>(workspace.data) + kStatusBytes);
  int* keys_max = keys_min + entries;
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  kernels::calibration::init_keys_kernel<<<blocks_for(entries), kThreads, 0, stream>>>(
      min, max, entries, accumulate == Accumulate::yes, keys_min, keys_max);
  SHRINK_CUDA_CHECK_LAUNCH(init_keys_kernel);

  const bool reject = nonfinite == NonFinite::reject;
  const std::int64_t target = static_cast<std::int64_t>(blocks_for(x.numel()));
  if (split.inner < kColumnInner) {
    // Short runs: threads across the columns of [outer, channels * inner], row groups on grid y.
    const std::int64_t length = split.channels * split.inner;
    const std::int64_t tiles = (length + kThreads - 1) / kThreads;
    const std::int64_t most_groups = split.outer < 65535 ? split.outer : 65535;
    std::int64_t groups = (target + tiles - 1) / tiles;
    groups = groups < 1 ? 1 : (groups > most_groups ? most_groups : groups);
    const std::int64_t rows_per_group = (split.outer + groups - 1) / groups;
    groups = (split.outer + rows_per_group - 1) / rows_per_group;
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(groups));
    kernels::calibration::minmax_columns_kernel<<<grid, kThreads, 0, stream>>>(
        x.data(), split.outer, length, split.inner, rows_per_group, reject, keys_min, keys_max, status);
    SHRINK_CUDA_CHECK_LAUNCH(minmax_columns_kernel);
  } else {
    // Enough blocks to fill the device, split between channels (grid y) and slices of a channel (grid x); float4
    // loads when every run starts 16-byte aligned.
    const bool vectors = split.inner % 4 == 0 && kernels::aligned_to(x.data(), 16);
    const std::int64_t per_channel = split.outer * split.inner / (vectors ? 4 : 1);
    const std::int64_t y = entries < 65535 ? entries : 65535;
    std::int64_t bx = (target + y - 1) / y;
    const std::int64_t needed_x = (per_channel + kThreads - 1) / kThreads;
    if (bx > needed_x) bx = needed_x;
    if (bx < 1) bx = 1;
    const dim3 grid(static_cast<unsigned>(bx), static_cast<unsigned>(y));
    const auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, stream>>>(x.data(), split.outer, split.channels, split.inner, reject, keys_min,
                                            keys_max, status);
    };
    const bool one_run = split.outer == 1;
    if (vectors && one_run)
      launch(kernels::calibration::minmax_kernel<4, true>);
    else if (vectors)
      launch(kernels::calibration::minmax_kernel<4, false>);
    else if (one_run)
      launch(kernels::calibration::minmax_kernel<1, true>);
    else
      launch(kernels::calibration::minmax_kernel<1, false>);
    SHRINK_CUDA_CHECK_LAUNCH(minmax_kernel);
  }
  kernels::calibration::finish_keys_kernel<<<blocks_for(entries), kThreads, 0, stream>>>(keys_min, keys_max, entries,
                                                                                         min, max);
  SHRINK_CUDA_CHECK_LAUNCH(finish_keys_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

template <class Rule>
void count(TensorView<const float> x, const Rule& rule, std::int64_t* counts, Workspace workspace, Stream stream,
           Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize, const char* fn) {
  require_current_device(x.device(), fn, "x");
  int* status = status_word(workspace);
  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  if (accumulate == Accumulate::no)
    SHRINK_CUDA_CHECK(cudaMemsetAsync(counts, 0, static_cast<std::size_t>(rule.bins) * sizeof(std::int64_t), stream));
  const std::int64_t n = x.numel();
  const unsigned blocks = blocks_for(n);
  auto* out = reinterpret_cast<unsigned long long*>(counts);  // two's complement: adding counts is the same
  const bool reject = nonfinite == NonFinite::reject;
  // A block's 32-bit counters hold at most the elements it visits: per thread ceil(n / (blocks * threads)) one at a
  // time, or with float4 loads at most 4 more (a partial step) plus one of the tail.
  const bool fits = rule.bins <= kMaxSharedBins &&
                    (n / (static_cast<std::int64_t>(blocks) * kThreads) + 6) * kThreads < (std::int64_t{1} << 32);
  const bool vectors = kernels::aligned_to(x.data(), 16);
  const std::size_t shared = fits ? static_cast<std::size_t>(rule.bins) * sizeof(unsigned int) : 0;
  if (fits && vectors)
    kernels::calibration::histogram_kernel<Rule, true, true>
        <<<blocks, kThreads, shared, stream>>>(x.data(), n, rule, reject, out, status);
  else if (fits)
    kernels::calibration::histogram_kernel<Rule, true, false>
        <<<blocks, kThreads, shared, stream>>>(x.data(), n, rule, reject, out, status);
  else if (vectors)
    kernels::calibration::histogram_kernel<Rule, false, true>
        <<<blocks, kThreads, 0, stream>>>(x.data(), n, rule, reject, out, status);
  else
    kernels::calibration::histogram_kernel<Rule, false, false>
        <<<blocks, kThreads, 0, stream>>>(x.data(), n, rule, reject, out, status);
  SHRINK_CUDA_CHECK_LAUNCH(histogram_kernel);
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

void require_histogram_args(TensorView<const float> x, std::int32_t bins, const std::int64_t* counts,
                            const Workspace& workspace, const char* fn) {
  require_device_view(x, fn, "x");
  if (bins < 1 || bins > kMaxBins) fail(fn, "binning.bins", bins, "a bin count in [1, 16777216]");
  require_pointer(counts, alignof(std::int64_t), fn, "counts");
  require_workspace(workspace, 1, fn);
}

}  // namespace

std::size_t calibration_workspace_bytes(std::int64_t entries) {
  if (entries < 1)
    fail("shrink::cuda::calibration_workspace_bytes", "entries", entries, "at least one entry");
  return kStatusBytes + 2 * static_cast<std::size_t>(entries) * sizeof(int);
}

void minmax_per_tensor(TensorView<const float> x, float* min, float* max, Workspace workspace, Stream stream,
                       Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize) {
  const char* fn = "shrink::cuda::minmax_per_tensor";
  require_device_view(x, fn, "x");
  AxisSplit split;
  split.inner = x.numel();
  minmax(x, split, min, max, workspace, stream, accumulate, nonfinite, synchronize, fn);
}

void minmax_per_channel(TensorView<const float> x, int axis, float* min, float* max, Workspace workspace,
                        Stream stream, Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize) {
  const char* fn = "shrink::cuda::minmax_per_channel";
  require_device_view(x, fn, "x");
  const int a = normalize_axis(axis, x.shape().rank, fn);
  minmax(x, split_at_axis(x.shape(), a), min, max, workspace, stream, accumulate, nonfinite, synchronize, fn);
}

void moving_average_update(const float* batch_min, const float* batch_max, std::int64_t entries,
                           float averaging_constant, float* running_min, float* running_max, Stream stream) {
  const char* fn = "shrink::cuda::moving_average_update";
  if (entries < 1) fail(fn, "entries", entries, "at least one entry");
  if (!(averaging_constant > 0.0f && averaging_constant <= 1.0f))
    fail(fn, "averaging_constant", averaging_constant, "a value in (0, 1]");
  require_pointer(batch_min, alignof(float), fn, "batch_min");
  require_pointer(batch_max, alignof(float), fn, "batch_max");
  require_pointer(running_min, alignof(float), fn, "running_min");
  require_pointer(running_max, alignof(float), fn, "running_max");
  kernels::calibration::moving_average_kernel<<<blocks_for(entries), kThreads, 0, stream>>>(
      batch_min, batch_max, entries, averaging_constant, running_min, running_max);
  SHRINK_CUDA_CHECK_LAUNCH(moving_average_kernel);
}

void histogram(TensorView<const float> x, HistcBins binning, std::int64_t* counts, Workspace workspace, Stream stream,
               Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize) {
  const char* fn = "shrink::cuda::histogram";
  require_histogram_args(x, binning.bins, counts, workspace, fn);
  if (!std::isfinite(binning.lo) || !std::isfinite(binning.hi) || !(binning.lo <= binning.hi))
    fail(fn, "binning", "[" + std::to_string(binning.lo) + ", " + std::to_string(binning.hi) + "]",
         "finite lo <= hi");
  kernels::calibration::HistcRule rule;
  rule.lo = binning.lo;
  rule.hi = binning.hi;
  rule.range = binning.hi - binning.lo;
  rule.scale = static_cast<float>(binning.bins);
  rule.last = static_cast<float>(binning.bins - 1);
  rule.bins = binning.bins;
  count(x, rule, counts, workspace, stream, accumulate, nonfinite, synchronize, fn);
}

void histogram(TensorView<const float> x, MagnitudeBins binning, std::int64_t* counts, Workspace workspace,
               Stream stream, Accumulate accumulate, NonFinite nonfinite, Synchronize synchronize) {
  const char* fn = "shrink::cuda::histogram";
  require_histogram_args(x, binning.bins, counts, workspace, fn);
  if (!(binning.inv_width > 0.0) || !std::isfinite(binning.inv_width))
    fail(fn, "binning.inv_width", binning.inv_width, "a finite value > 0");
  kernels::calibration::MagnitudeRule rule;
  rule.inv_width = binning.inv_width;
  rule.last_double = static_cast<double>(binning.bins - 1);
  rule.inv_width_float = static_cast<float>(binning.inv_width);
  rule.last = static_cast<float>(binning.bins - 1);
  rule.in_float = binning.inv_width >= 0x1p-120 && binning.inv_width <= 0x1p120;
  rule.bins = binning.bins;
  count(x, rule, counts, workspace, stream, accumulate, nonfinite, synchronize, fn);
}

}  // namespace shrink::cuda
