// Tests for shrink/cuda/threshold.hpp: [gpu] cases match prune::select_magnitude_threshold field for field (k from 0
// to all, with and without current masks, 16-byte and one-element loads, the result poisoned before each call) on
// random weights with ties, all-equal and two-valued tensors large enough to wrap the 16-bit block counters,
// quantized weights, every finite magnitude from 0 and subnormals up, lists longer than one launch takes, masks that
// keep nothing or one element; device-side checks for NaN/inf kept or not and for k above the candidates; [host]
// cases check the argument validation, which throws before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/threshold.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/threshold.hpp"
#include "support/element_types.hpp"

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
using shrink::test::from_float;
using shrink::test::type_name;

// T's value of the given bits (float: 32 bits; half and bfloat16: 16).
template <class T>
T from_bits(std::uint32_t bits) {
  if constexpr (std::is_same<T, float>::value) {
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  } else {
    return T::from_bits(static_cast<std::uint16_t>(bits));
  }
}

// Non-zero weights: a third from 16 magnitudes of either sign (ties across tensors and the +-x pairs), a third
// normal of very different scales (many top buckets), a third in one narrow range (one top bucket of float, so the
// low digit decides).
template <class T>
std::vector<T> random_mixed_weights(std::int64_t n, std::uint32_t seed) {
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
    v = from_float<T>(f);
    if (static_cast<float>(v) == 0.0f) v = T(0.5f);
  }
  return x;
}

// Any finite bit pattern of T, either sign: +-0, subnormals, normals up to the largest finite value.
template <class T>
std::vector<T> any_finite_weights(std::int64_t n, std::uint32_t seed) {
  constexpr std::uint32_t kLargestFinite =
      sizeof(T) == 4 ? 0x7F7FFFFFu : std::is_same<T, half>::value ? 0x7BFFu : 0x7F7Fu;
  constexpr std::uint32_t kSign = sizeof(T) == 4 ? 0x80000000u : 0x8000u;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> magnitude(0, kLargestFinite), small(0, 40), coin(0, 1);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) {
    std::uint32_t bits = rng() % 4 == 0 ? small(rng) : magnitude(rng);  // a quarter zeros and the smallest subnormals
    if (coin(rng)) bits |= kSign;
    v = from_bits<T>(bits);
  }
  return x;
}

// Quantized weights: scale * q with q = round(normal * 30) clamped to [-127, 127], so at most 255 values, the most
// common (0 and +-1) each thousands of times.
template <class T>
std::vector<T> quantized_weights(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) {
    const float q = std::max(-127.0f, std::min(127.0f, std::nearbyint(normal(rng) * 30.0f)));
    v = from_float<T>(q * 0.0078125f);
  }
  return x;
}

// n weights, each `a` with probability share_a, else `b` (bits of T), in random order.
template <class T>
std::vector<T> two_values(std::int64_t n, std::uint32_t a, std::uint32_t b, double share_a, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution pick_a(share_a);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) v = from_bits<T>(pick_a(rng) ? a : b);
  return x;
}

bool same(const MagnitudeThreshold& a, const MagnitudeThreshold& b) {
  return a.bits == b.bits && a.below == b.below && a.at == b.at && a.at_pruned == b.at_pruned &&
         a.candidates == b.candidates;
}

std::string describe_threshold(const MagnitudeThreshold& t) {
  return "bits " + std::to_string(t.bits) + " below " + std::to_string(t.below) + " at " + std::to_string(t.at) +
         " at_pruned " + std::to_string(t.at_pruned) + " candidates " + std::to_string(t.candidates);
}

// Random current masks keeping about two thirds of each tensor.
std::vector<Mask> random_masks(const std::vector<Shape>& shapes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Mask> masks;
  for (const Shape& shape : shapes) {
    Mask mask(shape, true);
    for (std::int64_t i = 0; i < mask.size(); ++i)
      if (rng() % 3 == 0) mask.prune(i);
    masks.push_back(mask);
  }
  return masks;
}

// The ranks every comparison tries: 0, 1, all, their neighbours and fractions of the candidates.
std::vector<std::int64_t> ranks_of(std::int64_t candidates) {
  std::vector<std::int64_t> ks{0, 1, 2, candidates - 1, candidates};
  for (const double fraction : {1e-4, 0.1, 0.37, 0.5, 0.9, 0.999})
    ks.push_back(static_cast<std::int64_t>(fraction * static_cast<double>(candidates) + 0.5));
  std::vector<std::int64_t> valid;
  for (const std::int64_t k : ks)
    if (k >= 0 && k <= candidates && std::find(valid.begin(), valid.end(), k) == valid.end()) valid.push_back(k);
  return valid;
}

// The GPU against the CPU on `hosts` (one tensor a shape; under `masks` unless null), every k of ranks_of, the
// result poisoned before each call and the workspace reused. offset: elements each device copy starts past a
// 256-byte boundary (0: 16-byte loads; 1: one element at a time).
template <class T>
void compare(const std::vector<std::vector<T>>& hosts, const std::vector<Shape>& shapes, const std::vector<Mask>* masks,
             std::int64_t offset, const std::string& what) {
  std::vector<TensorView<const T>> views;
  for (std::size_t s = 0; s < hosts.size(); ++s) views.emplace_back(hosts[s].data(), shapes[s]);
  std::int64_t candidates = 0;
  for (std::size_t s = 0; s < hosts.size(); ++s) candidates += masks ? (*masks)[s].count_kept() : shapes[s].product();

  std::vector<std::unique_ptr<DeviceBuffer>> device_weights, device_masks;
  std::vector<shrink::cuda::DeviceWeights<T>> weights;
  for (std::size_t s = 0; s < hosts.size(); ++s) {
    const std::size_t bytes = hosts[s].size() * sizeof(T);
    device_weights.push_back(std::make_unique<DeviceBuffer>(bytes + static_cast<std::size_t>(offset) * sizeof(T)));
    T* data = device_weights.back()->as<T>() + offset;
    CUDA_REQUIRE(cudaMemcpy(data, hosts[s].data(), bytes, cudaMemcpyHostToDevice));
    const std::uint64_t* words = nullptr;
    if (masks) {
      const Mask& m = (*masks)[s];
      device_masks.push_back(std::make_unique<DeviceBuffer>(m.words().size() * 8));
      device_masks.back()->upload(m.words().data(), device_masks.back()->bytes());
      words = device_masks.back()->as<std::uint64_t>();
    }
    weights.push_back({TensorView<const T>(data, shapes[s], Device::cuda(0)), words});
  }
  DeviceBuffer ws(shrink::cuda::threshold_workspace_bytes());
  DeviceBuffer result(sizeof(MagnitudeThreshold));

  for (const std::int64_t k : ranks_of(candidates)) {
    const MagnitudeThreshold cpu = masks ? shrink::prune::select_magnitude_threshold(views, *masks, k)
                                         : shrink::prune::select_magnitude_threshold(views, k);
    result.poison();
    shrink::cuda::select_magnitude_threshold(weights, k, result.as<MagnitudeThreshold>(), ws.workspace(), nullptr,
                                             shrink::cuda::Synchronize::yes);
    MagnitudeThreshold gpu;
    CUDA_REQUIRE(cudaMemcpy(&gpu, result.as<void>(), sizeof gpu, cudaMemcpyDeviceToHost));
    INFO(what << ": " << type_name<T>() << ", " << hosts.size() << " tensors" << (masks ? ", masked" : "")
              << ", offset " << offset << ", k " << k << "\ncpu " << describe_threshold(cpu) << "\ngpu "
              << describe_threshold(gpu));
    CHECK(same(gpu, cpu));
  }
}

template <class T>
void compare_all_ways(const std::vector<std::vector<T>>& hosts, const std::vector<Shape>& shapes, std::uint32_t seed,
                      const std::string& what) {
  const std::vector<Mask> masks = random_masks(shapes, seed);
  for (const std::int64_t offset : {0, 1}) {
    compare(hosts, shapes, nullptr, offset, what);
    compare(hosts, shapes, &masks, offset, what);
  }
}

template <class T>
std::vector<std::vector<T>> random_tensors(const std::vector<Shape>& shapes, std::uint32_t seed) {
  std::vector<std::vector<T>> hosts;
  for (std::size_t s = 0; s < shapes.size(); ++s)
    hosts.push_back(random_mixed_weights<T>(shapes[s].product(), seed + static_cast<std::uint32_t>(s)));
  return hosts;
}

template <class T>
void check_random(std::uint32_t seed) {
  for (const auto& shapes : std::vector<std::vector<Shape>>{
           {Shape{37, 45}}, {Shape{1000, 1000}}, {Shape{64, 130}, Shape{7}, Shape{3, 5, 300}}})
    compare_all_ways<T>(random_tensors<T>(shapes, seed), shapes, seed, "random weights");
}

// Bits of T for the tied cases: `top` picks the top digit's parity (the low or high 16-bit counter of a shared word),
// `low` (float only) the low digit's.
template <class T>
std::uint32_t tie_bits(bool top_odd, bool low_odd) {
  if constexpr (std::is_same<T, float>::value) return 0x3F400000u | (top_odd ? 0x10000u : 0u) | (low_odd ? 1u : 0u);
  else return (std::is_same<T, half>::value ? 0x3A00u : 0x3F40u) | (top_odd ? 1u : 0u);
}

// Heavy ties: every element equal (either parity of either digit), and two values sharing one word of the counters
// in random order, either more common; 2^20 elements give each counting block over 65536 of a value, so the 16-bit
// counters wrap.
template <class T>
void check_ties(std::uint32_t seed) {
  const std::int64_t n = (std::int64_t{1} << 20) + 3;
  const std::vector<Shape> shapes{Shape{n}};
  for (const bool top_odd : {false, true})
    for (const bool low_odd : {false, true}) {
      const std::vector<T> equal(static_cast<std::size_t>(n), from_bits<T>(tie_bits<T>(top_odd, low_odd)));
      compare<T>({equal}, shapes, nullptr, 0, "all equal");
    }
  const std::vector<Mask> masks = random_masks(shapes, seed);
  compare<T>({std::vector<T>(static_cast<std::size_t>(n), from_float<T>(-0.75f))}, shapes, &masks, 1,
             "all equal, masked, one element at a time");
  for (const double share : {0.65, 0.35}) {
    const std::vector<T> top_pair = two_values<T>(n, tie_bits<T>(false, false), tie_bits<T>(true, false), share, seed);
    compare<T>({top_pair}, shapes, nullptr, 0, "two values, adjacent top digits");
    if constexpr (std::is_same<T, float>::value) {
      const std::vector<T> low_pair = two_values<T>(n, tie_bits<T>(true, false), tie_bits<T>(true, true), share, seed);
      compare<T>({low_pair}, shapes, nullptr, 0, "two values, adjacent low digits");
    }
  }
  const std::vector<Shape> quantized_shapes{Shape{512, 1031}, Shape{300}};
  compare_all_ways<T>({quantized_weights<T>(512 * 1031, seed), quantized_weights<T>(300, seed + 1)},
                      quantized_shapes, seed, "quantized");
}

// Every finite magnitude from +-0 and the smallest subnormal to the largest finite value.
template <class T>
void check_full_range(std::uint32_t seed) {
  const std::vector<Shape> shapes{Shape{777, 1001}, Shape{13}};
  compare_all_ways<T>({any_finite_weights<T>(777 * 1001, seed), any_finite_weights<T>(13, seed + 1)}, shapes, seed,
                      "full range");
}

// More tensors than one launch takes (64), of sizes 1 to 5000, half of them tiny.
template <class T>
void check_long_list(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Shape> shapes;
  for (int s = 0; s < 70; ++s) shapes.push_back(Shape{s % 2 ? 1 + static_cast<std::int64_t>(rng() % 5000)
                                                            : 1 + static_cast<std::int64_t>(rng() % 9)});
  compare_all_ways<T>(random_tensors<T>(shapes, seed), shapes, seed, "70 tensors");
}

// Masks that keep nothing (only k = 0 is valid), one element, or everything.
template <class T>
void check_extreme_masks(std::uint32_t seed) {
  const std::vector<Shape> shapes{Shape{33, 65}, Shape{200}};
  const auto hosts = random_tensors<T>(shapes, seed);
  const std::vector<Mask> none{Mask(shapes[0], false), Mask(shapes[1], false)};
  std::vector<Mask> one = none;
  one[1].set(77, true);
  const std::vector<Mask> all{Mask(shapes[0], true), Mask(shapes[1], true)};
  const std::vector<Mask>* const cases[] = {&none, &one, &all};
  for (const std::vector<Mask>* masks : cases) compare(hosts, shapes, masks, 0, "extreme masks");
}

template <class T>
void check_all_inputs(std::uint32_t seed) {
  check_random<T>(seed);
  check_ties<T>(seed + 100);
  check_full_range<T>(seed + 200);
  check_long_list<T>(seed + 300);
  check_extreme_masks<T>(seed + 400);
}

// A NaN or inf anywhere, kept by the mask or not, flags kNonFinite; k above the masks' candidates flags kBadRank.
template <class T>
void check_device_checks() {
  std::vector<T> x = random_mixed_weights<T>(300, 3);
  DeviceBuffer x_dev(x.size() * sizeof(T));
  DeviceBuffer ws(shrink::cuda::threshold_workspace_bytes());
  DeviceBuffer result(sizeof(MagnitudeThreshold));
  const TensorView<const T> view(x_dev.as<T>(), Shape{300}, Device::cuda(0));
  Mask some(Shape{300}, true);
  some.prune(211);
  DeviceBuffer mask_dev(some.words().size() * 8);
  mask_dev.upload(some.words().data(), mask_dev.bytes());
  const std::vector<shrink::cuda::DeviceWeights<T>> masked{{view, mask_dev.as<std::uint64_t>()}};
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()}) {
    x[211] = from_float<T>(bad);
    x_dev.upload(x.data(), x_dev.bytes());
    CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(view, 10, result.as<MagnitudeThreshold>(),
                                                               ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                      Contains("NaN or inf"));
    CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(masked, 10, result.as<MagnitudeThreshold>(),
                                                               ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                      Contains("NaN or inf"));  // element 211 is not a candidate
  }

  x[211] = from_float<T>(1.0f);
  x_dev.upload(x.data(), x_dev.bytes());
  CHECK_NOTHROW(shrink::cuda::select_magnitude_threshold(masked, 299, result.as<MagnitudeThreshold>(), ws.workspace(),
                                                         nullptr, shrink::cuda::Synchronize::yes));
  const Mask none(Shape{300}, false);
  mask_dev.upload(none.words().data(), mask_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(masked, 1, result.as<MagnitudeThreshold>(),
                                                             ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                    Contains("k exceeds"));
  mask_dev.upload(some.words().data(), mask_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::select_magnitude_threshold(masked, 300, result.as<MagnitudeThreshold>(),
                                                             ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                    Contains("k exceeds"));
}

}  // namespace

TEST_CASE("cuda select_magnitude_threshold matches the CPU", "[gpu]") {
  check_all_inputs<float>(10);
  check_all_inputs<half>(20);
  check_all_inputs<bfloat16>(30);
}

TEST_CASE("cuda select_magnitude_threshold device-side checks", "[gpu]") {
  check_device_checks<float>();
  check_device_checks<half>();
  check_device_checks<bfloat16>();
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

  // Lists longer than one launch takes are checked whole before anything is enqueued.
  std::vector<shrink::cuda::DeviceWeights<float>> long_list(70, {good, nullptr});
  CHECK_THROWS_WITH(select_magnitude_threshold(long_list, 70 * 32 + 1, result, ws, nullptr), Contains("[0, 2240]"));
  long_list[69].view = TensorView<const float>(data, Shape{4, 8});
  CHECK_THROWS_WITH(select_magnitude_threshold(long_list, 1, result, ws, nullptr), Contains("weights[69]"));
  CHECK(shrink::cuda::threshold_workspace_bytes() % 16 == 0);
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: a list
// of three tensors, masked or not, aligned or not; float (two reads) and bfloat16 (one).
TEST_CASE("cuda select_magnitude_threshold sanitizer subset: float and bfloat16 over a list", "[gpu][sanitize]") {
  const std::vector<Shape> shapes{Shape{64, 130}, Shape{7}, Shape{3, 5, 300}};
  compare_all_ways<float>(random_tensors<float>(shapes, 50), shapes, 50, "sanitizer subset");
  compare_all_ways<bfloat16>(random_tensors<bfloat16>(shapes, 60), shapes, 60, "sanitizer subset");
}
