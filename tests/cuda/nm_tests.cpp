// Tests for shrink/cuda/nm.hpp: [gpu] cases match the CPU's prune::nm_mask and sparse::compress_nm word for word and
// byte for byte on random non-zero inputs with ties, outputs poisoned before each launch; [host] cases check the
// argument validation, which throws before any CUDA call and so needs no device.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/nm.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"

namespace {

using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::prune::Mask;
using shrink::prune::NmPattern;
using shrink::prune::NmRemainder;
using Catch::Matchers::Contains;

using shrink::test::DeviceBuffer;
using shrink::test::fake_device_pointer;
using shrink::test::from_float;
using shrink::test::same_bits;

// Non-zero values, half of them from 8 magnitudes of either sign (ties within groups, +x against -x), the rest
// normal; integer types get small non-zero integers (many ties).
template <class T>
std::vector<T> random_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.1f, 1.5f);
  std::uniform_int_distribution<int> level(1, 8), coin(0, 1);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) {
    float f;
    if (std::is_integral<T>::value) {
      f = static_cast<float>(level(rng) * (coin(rng) ? 1 : -1) * (std::is_signed<T>::value ? 1 : 1));
      if (!std::is_signed<T>::value) f = f < 0 ? -f + 100.0f : f;
    } else if (coin(rng)) {
      f = 0.25f * static_cast<float>(level(rng)) * (coin(rng) ? 1.0f : -1.0f);
    } else {
      do f = normal(rng);
      while (f == 0.0f);
    }
    v = from_float<T>(f);
  }
  return x;
}

template <class T>
void check_mask(const Shape& shape, NmPattern pattern, NmRemainder remainder, std::uint32_t seed) {
  INFO("pattern " << shrink::prune::to_string(pattern) << " shape " << shrink::to_string(shape) << " type size "
                  << sizeof(T));
  const std::vector<T> x = random_values<T>(shape.product(), seed);
  const Mask cpu = shrink::prune::nm_mask(TensorView<const T>(x.data(), shape), pattern, remainder);

  DeviceBuffer x_dev(x.size() * sizeof(T));
  x_dev.upload(x.data(), x_dev.bytes());
  const std::int64_t word_count = shrink::cuda::nm_mask_words(shape.product());
  REQUIRE(word_count == static_cast<std::int64_t>(cpu.words().size()));
  DeviceBuffer words_dev(static_cast<std::size_t>(word_count) * 8);
  DeviceBuffer ws(shrink::cuda::nm_workspace_bytes());
  shrink::cuda::nm_mask(TensorView<const T>(x_dev.as<T>(), shape, Device::cuda(0)), pattern,
                        words_dev.as<std::uint64_t>(), ws.workspace(), nullptr, remainder,
                        shrink::cuda::Synchronize::yes);
  CHECK(words_dev.download<std::uint64_t>(static_cast<std::size_t>(word_count)) == cpu.words());
}

// A mask keeping at most n of each group (some keep fewer: the zero fill), random.
Mask random_nm_mask(const Shape& shape, NmPattern pattern, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Mask mask(shape, false);
  const std::int64_t groups = shape.product() / pattern.m;
  std::vector<int> order(static_cast<std::size_t>(pattern.m));
  for (std::int64_t g = 0; g < groups; ++g) {
    for (int j = 0; j < pattern.m; ++j) order[static_cast<std::size_t>(j)] = j;
    std::shuffle(order.begin(), order.end(), rng);
    const int kept = std::uniform_int_distribution<int>(0, pattern.n)(rng);
    for (int k = 0; k < kept; ++k) mask.set(g * pattern.m + order[static_cast<std::size_t>(k)], true);
  }
  return mask;
}

template <class T>
void check_compress(std::int64_t rows, std::int64_t cols, NmPattern pattern, bool random_mask, std::uint32_t seed) {
  INFO("pattern " << shrink::prune::to_string(pattern) << " " << rows << " x " << cols << " type size " << sizeof(T)
                  << (random_mask ? " random mask" : " magnitude mask"));
  const Shape shape{rows, cols};
  const std::vector<T> x = random_values<T>(rows * cols, seed);
  const TensorView<const T> x_host(x.data(), shape);
  Mask mask = random_nm_mask(shape, pattern, seed + 1);
  if (!random_mask) {
    std::vector<float> importance(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) importance[i] = static_cast<float>(x[i]);
    mask = shrink::prune::nm_mask(TensorView<const float>(importance.data(), shape), pattern);
  }
  const shrink::sparse::NmCompressed<T> cpu = shrink::sparse::compress_nm(x_host, mask, pattern);

  DeviceBuffer x_dev(x.size() * sizeof(T));
  x_dev.upload(x.data(), x_dev.bytes());
  DeviceBuffer words_dev(mask.words().size() * 8);
  words_dev.upload(mask.words().data(), words_dev.bytes());
  DeviceBuffer values_dev(cpu.values.size() * sizeof(T));
  DeviceBuffer positions_dev(cpu.positions.size());
  const std::int64_t metadata_words = shrink::cuda::nm_metadata_words<T>(rows, cols, pattern);
  REQUIRE(metadata_words == static_cast<std::int64_t>(cpu.metadata.size()));
  DeviceBuffer metadata_dev(static_cast<std::size_t>(metadata_words) * 4);
  DeviceBuffer ws(shrink::cuda::nm_workspace_bytes());
  shrink::cuda::DeviceNmCompressed<T> out{values_dev.as<T>(), positions_dev.as<std::uint8_t>(),
                                          metadata_words > 0 ? metadata_dev.as<std::uint32_t>() : nullptr};
  shrink::cuda::compress_nm(TensorView<const T>(x_dev.as<T>(), shape, Device::cuda(0)),
                            words_dev.as<std::uint64_t>(), pattern, out, ws.workspace(), nullptr,
                            shrink::cuda::Synchronize::yes);
  CHECK_SAME_BITS(values_dev.download<T>(cpu.values.size()), cpu.values);
  CHECK(positions_dev.download<std::uint8_t>(cpu.positions.size()) == cpu.positions);
  CHECK(metadata_dev.download<std::uint32_t>(cpu.metadata.size()) == cpu.metadata);
}

template <class T>
void check_compress_all(std::uint32_t seed) {
  for (const bool random_mask : {false, true}) {
    check_compress<T>(37, 44, NmPattern{2, 4}, random_mask, seed);
    check_compress<T>(16, 64, NmPattern{2, 4}, random_mask, seed + 10);
    check_compress<T>(33, 200, NmPattern{2, 4}, random_mask, seed + 20);
    check_compress<T>(300, 512, NmPattern{2, 4}, random_mask, seed + 30);
    check_compress<T>(9, 24, NmPattern{1, 4}, random_mask, seed + 40);
    check_compress<T>(21, 48, NmPattern{4, 8}, random_mask, seed + 50);
    check_compress<T>(7, 30, NmPattern{3, 6}, random_mask, seed + 60);
  }
}

template <class T>
void check_mask_all(std::uint32_t seed) {
  check_mask<T>(Shape{37, 44}, NmPattern{2, 4}, NmRemainder::error, seed);
  check_mask<T>(Shape{3, 5, 64}, NmPattern{2, 4}, NmRemainder::error, seed + 1);
  check_mask<T>(Shape{257, 1024}, NmPattern{2, 4}, NmRemainder::error, seed + 2);
  check_mask<T>(Shape{13, 36}, NmPattern{1, 4}, NmRemainder::error, seed + 3);
  check_mask<T>(Shape{13, 40}, NmPattern{4, 8}, NmRemainder::error, seed + 4);
  check_mask<T>(Shape{11, 96}, NmPattern{5, 32}, NmRemainder::error, seed + 5);
  check_mask<T>(Shape{10, 42}, NmPattern{3, 6}, NmRemainder::error, seed + 6);
  check_mask<T>(Shape{9, 45}, NmPattern{2, 4}, NmRemainder::pad, seed + 7);
  check_mask<T>(Shape{4, 300}, NmPattern{60, 128}, NmRemainder::pad, seed + 8);
  check_mask<T>(Shape{5, 256}, NmPattern{17, 256}, NmRemainder::error, seed + 9);
  check_mask<T>(Shape{130}, NmPattern{2, 4}, NmRemainder::pad, seed + 10);
}


}  // namespace

TEST_CASE("cuda nm_mask matches the CPU word for word", "[gpu]") {
  check_mask_all<float>(100);
  check_mask_all<half>(200);
  check_mask_all<bfloat16>(300);
}

TEST_CASE("cuda compress_nm matches the CPU byte for byte", "[gpu]") {
  check_compress_all<float>(1000);
  check_compress_all<half>(2000);
  check_compress_all<bfloat16>(3000);
  check_compress_all<std::int8_t>(4000);
  check_compress_all<std::uint8_t>(5000);
}

TEST_CASE("cuda nm device-side checks: NaN input, overfull mask", "[gpu][sanitize]") {
  const Shape shape{8, 16};
  std::vector<float> x = random_values<float>(shape.product(), 7);
  x[37] = std::numeric_limits<float>::quiet_NaN();
  DeviceBuffer x_dev(x.size() * 4);
  x_dev.upload(x.data(), x_dev.bytes());
  DeviceBuffer words_dev(2 * 8);
  DeviceBuffer ws(shrink::cuda::nm_workspace_bytes());
  const TensorView<const float> view(x_dev.as<float>(), shape, Device::cuda(0));
  CHECK_THROWS_WITH(shrink::cuda::nm_mask(view, NmPattern{2, 4}, words_dev.as<std::uint64_t>(), ws.workspace(),
                                          nullptr, NmRemainder::error, shrink::cuda::Synchronize::yes),
                    Contains("NaN or inf"));

  x[37] = 1.0f;
  x_dev.upload(x.data(), x_dev.bytes());
  const Mask full(shape, true);
  words_dev.upload(full.words().data(), words_dev.bytes());
  DeviceBuffer values_dev(64 * 4), positions_dev(64);
  CHECK_THROWS_WITH(shrink::cuda::compress_nm(view, words_dev.as<std::uint64_t>(), NmPattern{2, 4},
                                              shrink::cuda::DeviceNmCompressed<float>{values_dev.as<float>(),
                                                                                      positions_dev.as<std::uint8_t>()},
                                              ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                    Contains("keeps more than n"));
}

TEST_CASE("cuda nm_mask validates its arguments on the host", "[host]") {
  float* data = static_cast<float*>(fake_device_pointer());
  auto* words = static_cast<std::uint64_t*>(fake_device_pointer());
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::nm_workspace_bytes()};
  const TensorView<const float> good(data, Shape{4, 8}, Device::cuda(0));
  auto call = [&](const TensorView<const float>& v, NmPattern p, std::uint64_t* w, shrink::cuda::Workspace s,
                  NmRemainder r = NmRemainder::error) { shrink::cuda::nm_mask(v, p, w, s, nullptr, r); };
  CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{4, 8}), NmPattern{2, 4}, words, ws),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(call(good, NmPattern{4, 4}, words, ws), Contains("1 <= n < m"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 1}, words, ws), Contains("group size m"));
  CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{4, 6}, Device::cuda(0)), NmPattern{2, 4}, words, ws),
                    Contains("divisible by m = 4"));
  CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{0, 8}, Device::cuda(0)), NmPattern{2, 4}, words, ws),
                    Contains("importance"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, nullptr, ws), Contains("mask_words"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, words, shrink::cuda::Workspace{ws.data, 4}), Contains("workspace.bytes"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, words, shrink::cuda::Workspace{nullptr, 16}),
                    Contains("workspace.data"));
  CHECK(shrink::cuda::nm_mask_words(130) == 3);
}

TEST_CASE("cuda compress_nm validates its arguments on the host", "[host]") {
  auto* data = static_cast<half*>(fake_device_pointer());
  auto* words = static_cast<std::uint64_t*>(fake_device_pointer());
  auto* positions = static_cast<std::uint8_t*>(fake_device_pointer());
  auto* metadata = static_cast<std::uint32_t*>(fake_device_pointer());
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::nm_workspace_bytes()};
  const shrink::cuda::DeviceNmCompressed<half> out{data, positions, metadata};
  auto call = [&](const TensorView<const half>& v, NmPattern p, shrink::cuda::DeviceNmCompressed<half> o) {
    shrink::cuda::compress_nm(v, words, p, o, ws, nullptr);
  };
  const TensorView<const half> good(data, Shape{4, 8}, Device::cuda(0));
  CHECK_THROWS_WITH(call(TensorView<const half>(data, Shape{32}, Device::cuda(0)), NmPattern{2, 4}, out),
                    Contains("a 2-D tensor"));
  CHECK_THROWS_WITH(call(TensorView<const half>(data, Shape{4, 6}, Device::cuda(0)), NmPattern{2, 4}, out),
                    Contains("divisible by m = 4"));
  CHECK_THROWS_WITH(call(TensorView<const half>(data, Shape{4, 8}), NmPattern{2, 4}, out),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(call(good, NmPattern{0, 4}, out), Contains("1 <= n < m"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, {nullptr, positions, metadata}), Contains("out.values"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, {data, nullptr, metadata}), Contains("out.positions"));
  CHECK_THROWS_WITH(call(good, NmPattern{2, 4}, {data, positions, nullptr}), Contains("out.metadata"));
  CHECK_THROWS_WITH(shrink::cuda::compress_nm(good, nullptr, NmPattern{2, 4}, out, ws, nullptr),
                    Contains("mask_words"));

  CHECK(shrink::cuda::nm_metadata_words<half>(37, 44, NmPattern{2, 4}) ==
        shrink::sparse::mma_sp_metadata_layout<half>(37, 44).word_count());
  CHECK(shrink::cuda::nm_metadata_words<std::int8_t>(37, 44, NmPattern{2, 4}) == 48 * 64 / 32);
  CHECK(shrink::cuda::nm_metadata_words<float>(37, 44, NmPattern{2, 4}) == 0);
  CHECK(shrink::cuda::nm_metadata_words<half>(37, 48, NmPattern{4, 8}) == 0);
}
