// Tests for shrink/cuda/threshold.hpp: [gpu] cases match prune::select_magnitude_threshold field for field on random
// non-zero weights with many ties (one tensor, lists, current masks, k from 0 to all), the result poisoned before
// each launch; [host] cases check the argument validation, which throws before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/threshold.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/threshold.hpp"

namespace {

using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::prune::MagnitudeThreshold;
using shrink::prune::Mask;
using Catch::Matchers::Contains;

using shrink::test::DeviceBuffer;
using shrink::test::fake_device_pointer;

// Non-zero weights: a third from 16 magnitudes of either sign (ties across tensors and the +-x pairs), a third
// normal of very different scales (several top-11-bit buckets), a third in one narrow range (one bucket, so the
// lower digits decide).
template <class T>
std::vector<T> random_weights(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> level(1, 16), kind(0, 2), coin(0, 1), scale(-20, 5);
  std::uniform_real_distribution<float> narrow(1.0f, 1.0009765625f);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) {
    float f = 0.0f;
    switch (kind(rng)) {
      case 0: f = 0.125f * static_cast<float>(level(rng)); break;
      case 1:
        do f = std::ldexp(normal(rng), scale(rng));
        while (f == 0.0f);
        break;
      default: f = narrow(rng); break;
    }
    if (coin(rng)) f = -f;
    if constexpr (std::is_same<T, float>::value) v = f;
    else v = T(f);
    if (static_cast<float>(v) == 0.0f) v = T(0.5f);
  }
  return x;
}

bool same(const MagnitudeThreshold& a, const MagnitudeThreshold& b) {
  return a.bits == b.bits && a.below == b.below && a.at == b.at && a.at_pruned == b.at_pruned &&
         a.candidates == b.candidates;
}

std::string describe(const MagnitudeThreshold& t) {
  return "bits " + std::to_string(t.bits) + " below " + std::to_string(t.below) + " at " + std::to_string(t.at) +
         " at_pruned " + std::to_string(t.at_pruned) + " candidates " + std::to_string(t.candidates);
}

// Several tensors (optionally with random current masks), every k in `ks` (as fractions of the candidates).
template <class T>
void check_against_cpu(const std::vector<Shape>& shapes, bool masked, std::uint32_t seed) {
  std::vector<std::vector<T>> hosts;
  std::vector<Mask> masks;
  std::vector<TensorView<const T>> views;
  std::mt19937 rng(seed);
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    hosts.push_back(random_weights<T>(shapes[s].product(), seed + static_cast<std::uint32_t>(s)));
    Mask mask(shapes[s], true);
    if (masked)
      for (std::int64_t i = 0; i < mask.size(); ++i)
        if (rng() % 3 == 0) mask.prune(i);
    masks.push_back(mask);
  }
  for (const auto& h : hosts) views.emplace_back(h.data(), shapes[views.size()]);
  std::int64_t candidates = 0;
  for (const Mask& m : masks) candidates += m.count_kept();

  std::vector<std::unique_ptr<DeviceBuffer>> device_weights, device_masks;
  std::vector<shrink::cuda::DeviceWeights<T>> weights;
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    device_weights.push_back(std::make_unique<DeviceBuffer>(hosts[s].size() * sizeof(T)));
    device_weights.back()->upload(hosts[s].data(), device_weights.back()->bytes());
    device_masks.push_back(std::make_unique<DeviceBuffer>(masks[s].words().size() * 8));
    device_masks.back()->upload(masks[s].words().data(), device_masks.back()->bytes());
    weights.push_back({TensorView<const T>(device_weights.back()->as<T>(), shapes[s], Device::cuda(0)),
                       masked ? device_masks.back()->as<std::uint64_t>() : nullptr});
  }
  DeviceBuffer ws(shrink::cuda::threshold_workspace_bytes());
  DeviceBuffer result(sizeof(MagnitudeThreshold));

  for (const double fraction : {0.0, 1e-4, 0.1, 0.37, 0.5, 0.9, 0.999, 1.0}) {
    const auto k = static_cast<std::int64_t>(fraction * static_cast<double>(candidates) + 0.5);
    const MagnitudeThreshold cpu = masked ? shrink::prune::select_magnitude_threshold(views, masks, k)
                                          : shrink::prune::select_magnitude_threshold(views, k);
    result.poison();
    shrink::cuda::select_magnitude_threshold(weights, k, result.as<MagnitudeThreshold>(),
                                             {ws.as<void>(), ws.bytes()}, nullptr, shrink::cuda::Synchronize::yes);
    MagnitudeThreshold gpu;
    CUDA_REQUIRE(cudaMemcpy(&gpu, result.as<void>(), sizeof gpu, cudaMemcpyDeviceToHost));
    INFO("type size " << sizeof(T) << " tensors " << shapes.size() << (masked ? " masked" : "") << " k " << k
                      << "\ncpu " << describe(cpu) << "\ngpu " << describe(gpu));
    CHECK(same(gpu, cpu));
  }
}

template <class T>
void check_all(std::uint32_t seed) {
  for (const bool masked : {false, true}) {
    check_against_cpu<T>({Shape{37, 45}}, masked, seed);
    check_against_cpu<T>({Shape{1000, 1000}}, masked, seed + 10);
    check_against_cpu<T>({Shape{64, 130}, Shape{7}, Shape{3, 5, 300}}, masked, seed + 20);
  }
}


}  // namespace

TEST_CASE("cuda select_magnitude_threshold matches the CPU", "[gpu]") {
  check_all<float>(10);
  check_all<half>(20);
  check_all<bfloat16>(30);
}

TEST_CASE("cuda select_magnitude_threshold device-side checks", "[gpu]") {
  std::vector<float> x = random_weights<float>(300, 3);
  x[211] = std::numeric_limits<float>::infinity();
  DeviceBuffer x_dev(x.size() * 4);
  x_dev.upload(x.data(), x_dev.bytes());
  DeviceBuffer ws(shrink::cuda::threshold_workspace_bytes());
  DeviceBuffer result(sizeof(MagnitudeThreshold));
  const TensorView<const float> view(x_dev.as<float>(), Shape{300}, Device::cuda(0));
  CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(view, 10, result.as<MagnitudeThreshold>(),
                                                             {ws.as<void>(), ws.bytes()}, nullptr,
                                                             shrink::cuda::Synchronize::yes),
                    Contains("NaN or inf"));

  x[211] = 1.0f;
  x_dev.upload(x.data(), x_dev.bytes());
  const Mask none(Shape{300}, false);
  DeviceBuffer mask_dev(none.words().size() * 8);
  mask_dev.upload(none.words().data(), mask_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(
                        std::vector<shrink::cuda::DeviceWeights<float>>{{view, mask_dev.as<std::uint64_t>()}}, 1,
                        result.as<MagnitudeThreshold>(), {ws.as<void>(), ws.bytes()}, nullptr,
                        shrink::cuda::Synchronize::yes),
                    Contains("k exceeds"));
}

TEST_CASE("cuda select_magnitude_threshold validates its arguments on the host", "[host]") {
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* result = static_cast<MagnitudeThreshold*>(fake_device_pointer());
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::threshold_workspace_bytes()};
  const TensorView<const float> good(data, Shape{4, 8}, Device::cuda(0));
  using shrink::cuda::select_magnitude_threshold;
  CHECK_THROWS_WITH(select_magnitude_threshold(std::vector<shrink::cuda::DeviceWeights<float>>{}, 0, result, ws, nullptr),
                    Contains("at least one tensor"));
  CHECK_THROWS_WITH(select_magnitude_threshold(TensorView<const float>(data, Shape{4, 8}), 1, result, ws, nullptr),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(select_magnitude_threshold(TensorView<const float>(data, Shape{0}, Device::cuda(0)), 0, result,
                                               ws, nullptr),
                    Contains("weights"));
  CHECK_THROWS_WITH(select_magnitude_threshold(good, -1, result, ws, nullptr), Contains("[0, 32]"));
  CHECK_THROWS_WITH(select_magnitude_threshold(good, 33, result, ws, nullptr), Contains("[0, 32]"));
  CHECK_THROWS_WITH(select_magnitude_threshold(good, 3, nullptr, ws, nullptr), Contains("result"));
  CHECK_THROWS_WITH(select_magnitude_threshold(good, 3, result, shrink::cuda::Workspace{ws.data, 64}, nullptr),
                    Contains("workspace.bytes"));
  CHECK_THROWS_WITH(
      select_magnitude_threshold(std::vector<shrink::cuda::DeviceWeights<float>>{{good, nullptr}, {good, nullptr}}, 65,
                                 result, ws, nullptr),
      Contains("[0, 64]"));
  auto* misaligned = reinterpret_cast<const std::uint64_t*>(static_cast<char*>(fake_device_pointer()) + 4);
  CHECK_THROWS_WITH(select_magnitude_threshold(
                        std::vector<shrink::cuda::DeviceWeights<float>>{{good, nullptr}, {good, misaligned}}, 1,
                        result, ws, nullptr),
                    Contains("current[1]"));
}
