// Tests for shrink/cuda/calibration.hpp: [gpu] cases match the CPU's observers and bin rules bit for bit on random
// non-zero inputs, outputs poisoned before each launch; [host] cases check the argument validation, which throws
// before any CUDA call and so needs no device.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/histogram.hpp"
#include "shrink/cuda/calibration.hpp"
#include "shrink/quant/observers/entropy.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/observers/percentile.hpp"
#include "shrink/quant/scheme.hpp"
#include "support/element_types.hpp"
#include "support/random.hpp"
#include "support/mismatch_map.hpp"

namespace {

using shrink::Device;
using shrink::Shape;
using shrink::TensorView;
using shrink::cuda::Accumulate;
using shrink::cuda::NonFinite;
using shrink::cuda::Synchronize;
using shrink::quant::QuantDtype;
using shrink::quant::QuantScheme;
using shrink::quant::Symmetry;
using Catch::Matchers::Contains;

using shrink::test::DeviceBuffer;
using shrink::test::fake_device_floats;
using shrink::test::kFakeWorkspace;
using shrink::test::random_nonzero_normal;
using shrink::test::same_bits;

// A device copy of host floats, as a CUDA view of `shape`.
struct DeviceTensor {
  DeviceBuffer buffer;
  Shape shape;
  DeviceTensor(const std::vector<float>& x, const Shape& s) : buffer(x.size() * sizeof(float)), shape(s) {
    buffer.upload(x.data(), buffer.bytes());
  }
  TensorView<const float> view() const { return TensorView<const float>(buffer.as<float>(), shape, Device::cuda(0)); }
};

constexpr int kPerTensor = 1000;  // "axis" of a per-tensor call in the helpers below

QuantScheme scheme_for(int axis) {
  return axis == kPerTensor ? QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine)
                            : QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, axis);
}

std::int64_t entries_for(const Shape& shape, int axis) {
  if (axis == kPerTensor) return 1;
  return shape.values[axis < 0 ? axis + shape.rank : axis];
}

// The GPU's min/max of one batch into (min_dev, max_dev).
void gpu_minmax(const DeviceTensor& x, int axis, const DeviceBuffer& min_dev, const DeviceBuffer& max_dev,
                const DeviceBuffer& ws, Accumulate accumulate, NonFinite nonfinite) {
  if (axis == kPerTensor)
    shrink::cuda::minmax_per_tensor(x.view(), min_dev.as<float>(), max_dev.as<float>(), ws.workspace(), nullptr,
                                    accumulate, nonfinite, Synchronize::yes);
  else
    shrink::cuda::minmax_per_channel(x.view(), axis, min_dev.as<float>(), max_dev.as<float>(), ws.workspace(),
                                     nullptr, accumulate, nonfinite, Synchronize::yes);
}

// Host-side fakes: pointers that are never dereferenced (validation throws first).
std::int64_t* fake_device_counts() { return reinterpret_cast<std::int64_t*>(std::uintptr_t{0x20000}); }

}  // namespace

TEST_CASE("cuda calibration_workspace_bytes: a status word and two keys per entry", "[host]") {
  CHECK(shrink::cuda::calibration_workspace_bytes(1) == 16 + 8);
  CHECK(shrink::cuda::calibration_workspace_bytes(64) == 16 + 64 * 8);
  CHECK_THROWS_WITH(shrink::cuda::calibration_workspace_bytes(0),
                    Contains("shrink::cuda::calibration_workspace_bytes: entries = 0"));
}

TEST_CASE("cuda minmax rejects bad arguments on the host before any CUDA call", "[host]") {
  using shrink::cuda::minmax_per_channel;
  using shrink::cuda::minmax_per_tensor;
  const Shape shape{6, 8};
  const TensorView<const float> x(fake_device_floats(), shape, Device::cuda(0));
  float* out = fake_device_floats();

  CHECK_THROWS_WITH(minmax_per_tensor(TensorView<const float>(fake_device_floats(), shape), out, out, kFakeWorkspace,
                                      nullptr),
                    Contains("shrink::cuda::minmax_per_tensor: x = a view of host memory"));
  CHECK_THROWS_WITH(minmax_per_tensor(TensorView<const float>(fake_device_floats(), Shape{0, 8}, Device::cuda(0)), out,
                                      out, kFakeWorkspace, nullptr),
                    Contains("x = an empty tensor"));
  CHECK_THROWS_WITH(minmax_per_tensor(TensorView<const float>(fake_device_floats(), shape, shrink::Strides{1, 6},
                                                              Device::cuda(0)),
                                      out, out, kFakeWorkspace, nullptr),
                    Contains("x = a strided view"));
  CHECK_THROWS_WITH(minmax_per_tensor(x, nullptr, out, kFakeWorkspace, nullptr), Contains("min = a null pointer"));
  CHECK_THROWS_WITH(minmax_per_tensor(x, out, reinterpret_cast<float*>(std::uintptr_t{0x10001}), kFakeWorkspace,
                                      nullptr),
                    Contains("max = a misaligned pointer"));
  CHECK_THROWS_WITH(minmax_per_tensor(x, out, out, shrink::cuda::Workspace{kFakeWorkspace.data, 16}, nullptr),
                    Contains("workspace.bytes = 16"));
  CHECK_THROWS_WITH(minmax_per_tensor(x, out, out, shrink::cuda::Workspace{nullptr, 1 << 20}, nullptr),
                    Contains("workspace.data = a null pointer"));
  CHECK_THROWS_WITH(minmax_per_channel(x, 2, out, out, kFakeWorkspace, nullptr),
                    Contains("shrink::cuda::minmax_per_channel: axis = 2"));
  CHECK_THROWS_WITH(minmax_per_channel(x, 1, out, out, shrink::cuda::Workspace{kFakeWorkspace.data, 16 + 6 * 8},
                                       nullptr),
                    Contains("at least calibration_workspace_bytes(8) = 80"));
}

TEST_CASE("cuda moving_average_update and histogram reject bad arguments on the host", "[host]") {
  float* p = fake_device_floats();
  CHECK_THROWS_WITH(shrink::cuda::moving_average_update(p, p, 4, 0.0f, p, p, nullptr),
                    Contains("shrink::cuda::moving_average_update: averaging_constant = 0"));
  CHECK_THROWS_WITH(shrink::cuda::moving_average_update(p, p, 0, 0.5f, p, p, nullptr), Contains("entries = 0"));
  CHECK_THROWS_WITH(shrink::cuda::moving_average_update(p, nullptr, 4, 0.5f, p, p, nullptr),
                    Contains("batch_max = a null pointer"));

  const TensorView<const float> x(fake_device_floats(), Shape{6, 8}, Device::cuda(0));
  using shrink::cuda::histogram;
  CHECK_THROWS_WITH(histogram(x, shrink::cuda::HistcBins{0.0f, 1.0f, 0}, fake_device_counts(), kFakeWorkspace, nullptr),
                    Contains("shrink::cuda::histogram: binning.bins = 0"));
  CHECK_THROWS_WITH(histogram(x, shrink::cuda::HistcBins{2.0f, 1.0f, 2048}, fake_device_counts(), kFakeWorkspace,
                              nullptr),
                    Contains("finite lo <= hi"));
  CHECK_THROWS_WITH(histogram(x, shrink::cuda::HistcBins{0.0f, std::numeric_limits<float>::infinity(), 2048},
                              fake_device_counts(), kFakeWorkspace, nullptr),
                    Contains("finite lo <= hi"));
  CHECK_THROWS_WITH(histogram(x, shrink::cuda::MagnitudeBins{0.0, 2048}, fake_device_counts(), kFakeWorkspace, nullptr),
                    Contains("binning.inv_width = 0"));
  CHECK_THROWS_WITH(histogram(x, shrink::cuda::MagnitudeBins{1.0, 2048}, nullptr, kFakeWorkspace, nullptr),
                    Contains("counts = a null pointer"));
  CHECK_THROWS_WITH(histogram(TensorView<const float>(fake_device_floats(), Shape{6, 8}),
                              shrink::cuda::MagnitudeBins{1.0, 2048}, fake_device_counts(), kFakeWorkspace, nullptr),
                    Contains("x = a view of host memory"));
}

TEST_CASE("cuda minmax equals MinMaxObserver per tensor and per channel, over several batches", "[gpu]") {
  const Shape shape = GENERATE(Shape{5, 7, 33}, Shape{3, 300, 17}, Shape{1 << 20}, Shape{129, 1031});
  const int axis = GENERATE(kPerTensor, 0, 1, -1);
  if (axis != kPerTensor && (axis >= shape.rank || axis < -shape.rank)) return;
  INFO("shape " << shrink::to_string(shape) << " axis " << axis);
  const std::int64_t n = shape.product(), entries = entries_for(shape, axis);

  shrink::quant::MinMaxObserver observer(scheme_for(axis));
  DeviceBuffer min_dev(entries * sizeof(float)), max_dev(entries * sizeof(float));
  DeviceBuffer ws(shrink::cuda::calibration_workspace_bytes(entries));
  for (std::uint32_t batch = 0; batch < 3; ++batch) {
    const std::vector<float> x = random_nonzero_normal(n, 17 + batch, 0.3f * batch, 1.0f + batch);
    observer.observe(TensorView<const float>(x.data(), shape));
    const DeviceTensor x_dev(x, shape);
    if (batch == 0) {
      min_dev.poison();
      max_dev.poison();
    }
    gpu_minmax(x_dev, axis, min_dev, max_dev, ws, batch == 0 ? Accumulate::no : Accumulate::yes, NonFinite::reject);
    CHECK_SAME_BITS(min_dev.download<float>(entries), observer.min_values());
    CHECK_SAME_BITS(max_dev.download<float>(entries), observer.max_values());
  }
}

TEST_CASE("cuda minmax: non-finite input flags kNonFinite, or is skipped as the observer's ignore_nonfinite",
          "[gpu][sanitize]") {
  const Shape shape{4, 6, 40};
  const std::int64_t n = shape.product();
  std::vector<float> x = random_nonzero_normal(n, 5);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[500] = std::numeric_limits<float>::infinity();
  x[777] = -std::numeric_limits<float>::infinity();
  for (std::int64_t o = 0; o < 4; ++o)  // channel 2 along axis 1 holds no finite value
    for (std::int64_t i = 0; i < 40; ++i) x[static_cast<std::size_t>((o * 6 + 2) * 40 + i)] = std::nanf("");
  const DeviceTensor x_dev(x, shape);

  for (const int axis : {kPerTensor, 1, 2}) {
    INFO("axis " << axis);
    const std::int64_t entries = entries_for(shape, axis);
    DeviceBuffer min_dev(entries * sizeof(float)), max_dev(entries * sizeof(float));
    DeviceBuffer ws(shrink::cuda::calibration_workspace_bytes(entries));
    CHECK_THROWS_WITH(gpu_minmax(x_dev, axis, min_dev, max_dev, ws, Accumulate::no, NonFinite::reject),
                      Contains("shrink::cuda::minmax_per_") && Contains("holds NaN or inf"));

    shrink::quant::ObserverOptions options;
    options.ignore_nonfinite = true;
    shrink::quant::MinMaxObserver observer(scheme_for(axis), options);
    observer.observe(TensorView<const float>(x.data(), shape));
    min_dev.poison();
    max_dev.poison();
    gpu_minmax(x_dev, axis, min_dev, max_dev, ws, Accumulate::no, NonFinite::ignore);
    CHECK_SAME_BITS(min_dev.download<float>(entries), observer.min_values());
    CHECK_SAME_BITS(max_dev.download<float>(entries), observer.max_values());
  }
}

TEST_CASE("cuda moving_average_update equals MovingAverageMinMaxObserver", "[gpu]") {
  const Shape shape{16, 257};
  const int axis = GENERATE(kPerTensor, 0);
  const std::int64_t n = shape.product(), entries = entries_for(shape, axis);
  const float c = 0.37f;
  shrink::quant::MovingAverageMinMaxObserver observer(scheme_for(axis), c);
  DeviceBuffer batch_min(entries * sizeof(float)), batch_max(entries * sizeof(float));
  DeviceBuffer run_min(entries * sizeof(float)), run_max(entries * sizeof(float));
  DeviceBuffer ws(shrink::cuda::calibration_workspace_bytes(entries));
  const std::vector<float> inf(static_cast<std::size_t>(entries), std::numeric_limits<float>::infinity());
  const std::vector<float> minus_inf(static_cast<std::size_t>(entries), -std::numeric_limits<float>::infinity());
  run_min.upload(inf.data(), run_min.bytes());
  run_max.upload(minus_inf.data(), run_max.bytes());
  for (std::uint32_t batch = 0; batch < 4; ++batch) {
    const std::vector<float> x = random_nonzero_normal(n, 90 + batch, 0.5f * batch - 0.7f, 1.0f + 0.5f * batch);
    observer.observe(TensorView<const float>(x.data(), shape));
    const DeviceTensor x_dev(x, shape);
    gpu_minmax(x_dev, axis, batch_min, batch_max, ws, Accumulate::no, NonFinite::reject);
    shrink::cuda::moving_average_update(batch_min.as<float>(), batch_max.as<float>(), entries, c, run_min.as<float>(),
                                        run_max.as<float>(), nullptr);
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CHECK_SAME_BITS(run_min.download<float>(entries), observer.min_values());
    CHECK_SAME_BITS(run_max.download<float>(entries), observer.max_values());
  }
}

TEST_CASE("cuda histogram counts equal the CPU's bin rules", "[gpu]") {
  const std::int64_t n = GENERATE(std::int64_t{1000}, std::int64_t{1001}, std::int64_t{3} << 20);  // 1001: a tail
  const std::int32_t bins = GENERATE(2048, 20000);
  INFO("n " << n << " bins " << bins);
  std::vector<float> x = random_nonzero_normal(n, 123);
  x[7] = std::numeric_limits<float>::quiet_NaN();  // skipped by both rules (and flagged unless ignored)
  const Shape shape{n};
  const DeviceTensor x_dev(x, shape);
  DeviceBuffer counts_dev(static_cast<std::size_t>(bins) * sizeof(std::int64_t));
  DeviceBuffer ws(shrink::cuda::calibration_workspace_bytes(1));

  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  double max_abs = 0.0;
  for (const float v : x)
    if (std::isfinite(v)) {
      lo = std::fmin(lo, v);
      hi = std::fmax(hi, v);
      max_abs = std::fmax(max_abs, std::fabs(static_cast<double>(v)));
    }

  SECTION("torch.histc over a range narrower than the data (values outside are skipped)") {
    const shrink::cpu::HistcBinning cpu_bins{lo * 0.8f, hi * 0.9f, bins};
    std::vector<std::int64_t> expected(static_cast<std::size_t>(bins), 0);
    shrink::cpu::count_bins(cpu_bins, x.data(), n, expected.data());
    shrink::cuda::histogram(x_dev.view(), shrink::cuda::HistcBins{cpu_bins.lo, cpu_bins.hi, bins},
                            counts_dev.as<std::int64_t>(), ws.workspace(), nullptr, Accumulate::no, NonFinite::ignore,
                            Synchronize::yes);
    CHECK(counts_dev.download<std::int64_t>(static_cast<std::size_t>(bins)) == expected);
    // Accumulate: a second pass doubles every count.
    shrink::cuda::histogram(x_dev.view(), shrink::cuda::HistcBins{cpu_bins.lo, cpu_bins.hi, bins},
                            counts_dev.as<std::int64_t>(), ws.workspace(), nullptr, Accumulate::yes,
                            NonFinite::ignore, Synchronize::yes);
    for (auto& c : expected) c *= 2;
    CHECK(counts_dev.download<std::int64_t>(static_cast<std::size_t>(bins)) == expected);
    // The NaN is flagged when not ignored.
    CHECK_THROWS(shrink::cuda::histogram(x_dev.view(), shrink::cuda::HistcBins{cpu_bins.lo, cpu_bins.hi, bins},
                                         counts_dev.as<std::int64_t>(), ws.workspace(), nullptr, Accumulate::no,
                                         NonFinite::reject, Synchronize::yes));
  }
  SECTION("magnitude bins, float and double products, fed to the entropy and percentile searches") {
    for (const double scale : {1.0, 1e-40}) {
      std::vector<float> xs(x);
      for (float& v : xs) v = static_cast<float>(v * scale);
      const DeviceTensor xs_dev(xs, shape);
      const shrink::cpu::MagnitudeBinning cpu_bins{static_cast<double>(bins) / (max_abs * scale), bins};
      INFO("scale " << scale << " in_float " << cpu_bins.in_float());
      std::vector<std::int64_t> expected(static_cast<std::size_t>(bins), 0);
      shrink::cpu::count_bins(cpu_bins, xs.data(), n, expected.data());
      counts_dev.poison();
      shrink::cuda::histogram(xs_dev.view(), shrink::cuda::MagnitudeBins{cpu_bins.inv_width, bins},
                              counts_dev.as<std::int64_t>(), ws.workspace(), nullptr, Accumulate::no,
                              NonFinite::ignore, Synchronize::yes);
      const std::vector<std::int64_t> got = counts_dev.download<std::int64_t>(static_cast<std::size_t>(bins));
      CHECK(got == expected);
      CHECK(shrink::quant::percentile_bin(got, 99.9) == shrink::quant::percentile_bin(expected, 99.9));
    }
  }
}
