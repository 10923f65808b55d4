// Tests for shrink/prune/threshold.hpp: the radix select against a sort, over every k kind and awkward values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/prune/threshold.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;

namespace {

std::uint32_t key_of(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits & 0x7FFFFFFFu;
}

// The threshold by sorting the candidates' magnitude bits: the k-th smallest, with counts below and at it.
MagnitudeThreshold sorted_threshold(const std::vector<float>& values, const std::vector<std::uint8_t>& keep,
                                    std::int64_t k) {
  std::vector<std::uint32_t> keys;
  for (std::size_t i = 0; i < values.size(); ++i)
    if (keep.empty() || keep[i]) keys.push_back(key_of(values[i]));
  std::sort(keys.begin(), keys.end());
  MagnitudeThreshold t;
  t.candidates = static_cast<std::int64_t>(keys.size());
  if (k == 0) return t;
  t.bits = keys[static_cast<std::size_t>(k - 1)];
  t.below = std::lower_bound(keys.begin(), keys.end(), t.bits) - keys.begin();
  t.at = std::upper_bound(keys.begin(), keys.end(), t.bits) - keys.begin() - t.below;
  t.at_pruned = k - t.below;
  return t;
}

void check_same(const MagnitudeThreshold& got, const MagnitudeThreshold& want) {
  CHECK(got.bits == want.bits);
  CHECK(got.below == want.below);
  CHECK(got.at == want.at);
  CHECK(got.at_pruned == want.at_pruned);
  CHECK(got.candidates == want.candidates);
}

// Values with many ties, zeros of both signs, subnormals and numbers sharing their top 16 bits.
std::vector<float> awkward_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> v = test::random_values(n, seed);
  for (std::size_t i = 0; i < n; ++i) {
    switch (rng() % 8) {
      case 0: v[i] = (rng() & 1) ? 0.0f : -0.0f; break;
      case 1: v[i] = std::numeric_limits<float>::denorm_min() * static_cast<float>(1 + rng() % 5); break;
      case 2: v[i] = ((rng() & 1) ? 1.0f : -1.0f) * (0.5f + static_cast<float>(rng() % 4) * 0x1p-22f); break;
      case 3: v[i] = 0.25f * static_cast<float>(static_cast<int>(rng() % 9) - 4); break;
      default: break;
    }
  }
  return v;
}

}  // namespace

TEST_CASE("select_magnitude_threshold equals a sort over many k, including 0 and n", "[prune][threshold]") {
  for (std::size_t n : {1u, 2u, 7u, 64u, 65u, 1000u, 4099u}) {
    const std::vector<float> v = awkward_values(n, static_cast<unsigned>(n));
    std::vector<std::int64_t> ks{0, static_cast<std::int64_t>(n), 1, static_cast<std::int64_t>(n) - 1};
    std::mt19937 rng(3);
    for (int r = 0; r < 20; ++r) ks.push_back(static_cast<std::int64_t>(rng() % (n + 1)));
    for (std::int64_t k : ks) {
      INFO("n = " << n << ", k = " << k);
      const MagnitudeThreshold t = select_magnitude_threshold(make_view(v), k);
      check_same(t, sorted_threshold(v, {}, k));
      CHECK(t.pruned() == k);
    }
  }
}

TEST_CASE("select_magnitude_threshold gives the same result on every SIMD level", "[prune][threshold]") {
  const std::vector<float> v = awkward_values(10000, 11);
  const cpu::SimdLevel saved = cpu::simd_level();
  for (std::int64_t k : {0, 1, 17, 5000, 9999, 10000}) {
    const MagnitudeThreshold best = select_magnitude_threshold(make_view(v), k);
    cpu::simd_level() = cpu::SimdLevel::scalar;
    const MagnitudeThreshold scalar = select_magnitude_threshold(make_view(v), k);
    cpu::simd_level() = saved;
    check_same(best, scalar);
  }
}

TEST_CASE("select_magnitude_threshold orders +0 = -0 < subnormals < normals", "[prune][threshold]") {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const std::vector<float> v{-0.0f, 3 * tiny, 0.0f, -tiny, 1e-30f, -2 * tiny, 0.0f};
  MagnitudeThreshold t = select_magnitude_threshold(make_view(v), 2);
  CHECK(t.bits == 0);
  CHECK(t.below == 0);
  CHECK(t.at == 3);  // -0, +0, +0
  CHECK(t.at_pruned == 2);
  t = select_magnitude_threshold(make_view(v), 4);
  CHECK(t.value() == tiny);
  CHECK(t.below == 3);
  t = select_magnitude_threshold(make_view(v), 6);
  CHECK(t.value() == 3 * tiny);
  t = select_magnitude_threshold(make_view(v), 7);
  CHECK(t.value() == 1e-30f);
}

TEST_CASE("select_magnitude_threshold over a list counts every tensor, strided ones too", "[prune][threshold]") {
  const std::vector<float> a = awkward_values(300, 1), storage = awkward_values(6 * 10, 2), c = awkward_values(77, 3);
  const TensorView<const float> strided(storage.data(), Shape{6, 5}, Strides{10, 2});
  std::vector<float> all(a);
  for (std::int64_t r = 0; r < 6; ++r)
    for (std::int64_t j = 0; j < 5; ++j) all.push_back(strided(r, j));
  all.insert(all.end(), c.begin(), c.end());
  for (std::int64_t k : {0, 1, 100, 203, 406, 407}) {
    INFO("k = " << k);
    check_same(select_magnitude_threshold(std::vector<TensorView<const float>>{make_view(a), strided, make_view(c)}, k),
               sorted_threshold(all, {}, k));
  }
}

TEST_CASE("select_magnitude_threshold among the elements current masks keep", "[prune][threshold]") {
  const std::vector<float> a = awkward_values(700, 5), b = awkward_values(130, 6);
  std::mt19937 rng(9);
  std::vector<std::uint8_t> keep_a(a.size()), keep_b(b.size());
  for (auto& k : keep_a) k = rng() % 3 != 0;
  for (auto& k : keep_b) k = rng() % 2;
  const std::vector<Mask> current{Mask::from_bytes(Shape{700}, keep_a.data()),
                                  Mask::from_bytes(Shape{130}, keep_b.data())};
  std::vector<float> all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::vector<std::uint8_t> keep(keep_a);
  keep.insert(keep.end(), keep_b.begin(), keep_b.end());
  const std::int64_t kept = current[0].count_kept() + current[1].count_kept();
  for (std::int64_t k : {std::int64_t{0}, std::int64_t{1}, kept / 3, kept - 1, kept}) {
    INFO("k = " << k);
    check_same(select_magnitude_threshold(std::vector<TensorView<const float>>{make_view(a), make_view(b)}, current, k),
               sorted_threshold(all, keep, k));
  }
  CHECK_THROWS_WITH(
      select_magnitude_threshold(std::vector<TensorView<const float>>{make_view(a), make_view(b)}, current, kept + 1),
      Catch::Contains("k = " + std::to_string(kept + 1)));
}

TEST_CASE("select_magnitude_threshold on half and bfloat16 ranks their exact float values", "[prune][threshold]") {
  const std::vector<float> v = awkward_values(500, 8);
  std::vector<half> h;
  std::vector<bfloat16> b;
  std::vector<float> hf, bf;
  for (float x : v) {
    h.push_back(half(x));
    hf.push_back(h.back().to_float());
    b.push_back(bfloat16(x));
    bf.push_back(b.back().to_float());
  }
  for (std::int64_t k : {0, 1, 250, 499, 500}) {
    check_same(select_magnitude_threshold(make_view(h), k), sorted_threshold(hf, {}, k));
    check_same(select_magnitude_threshold(make_view(b), k), sorted_threshold(bf, {}, k));
  }
}

TEST_CASE("select_magnitude_threshold refuses NaN, inf, empty tensors and k out of range", "[prune][threshold]") {
  std::vector<float> v = test::random_values(200, 4);
  v[137] = std::numeric_limits<float>::infinity();
  v[150] = std::nanf("");
  CHECK_THROWS_WITH(select_magnitude_threshold(make_view(v), 3),
                    Catch::Contains("select_magnitude_threshold") && Catch::Contains("weights[137] = inf"));
  const std::vector<float> fine = test::random_values(10, 5);
  CHECK_THROWS_WITH(select_magnitude_threshold(std::vector<TensorView<const float>>{make_view(fine), make_view(v)}, 0),
                    Catch::Contains("weights[1][137] = inf"));
  const std::vector<float> none;
  CHECK_THROWS_WITH(select_magnitude_threshold(make_view(none), 0),
                    Catch::Contains("weights") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(select_magnitude_threshold(make_view(fine), 11), Catch::Contains("k = 11"));
  CHECK_THROWS_WITH(select_magnitude_threshold(make_view(fine), -1), Catch::Contains("k = -1"));
  CHECK_THROWS_WITH(select_magnitude_threshold(std::vector<TensorView<const float>>{}, 0), Catch::Contains("weights"));
  CHECK_THROWS_WITH(select_magnitude_threshold(std::vector<TensorView<const float>>{make_view(fine)},
                                               std::vector<Mask>{Mask(Shape{2, 5})}, 1),
                    Catch::Contains("current.shape = [2, 5]"));
}
