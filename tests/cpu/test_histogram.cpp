// Tests for shrink/cpu/histogram.hpp: BinCounter's 16-bit lanes never overflow, whatever the run lengths.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "shrink/cpu/histogram.hpp"

using namespace shrink::cpu;

TEST_CASE("BinCounter counts past 65535 in one bin, in long runs and in many short ones", "[cpu][histogram]") {
  const HistcBinning binning{0.0f, 8.0f, 8};
  std::vector<float> constant(1'500'000, 5.5f);  // every element in bin 5
  BinCounter counter(8);
  counter.add(binning, constant.data(), static_cast<std::int64_t>(constant.size()));
  std::vector<std::int64_t> counts(8, 0);
  counter.flush_into(counts.data(), 8);
  CHECK(counts[5] == 1'500'000);

  // Runs of 1 to 3 elements: their tails would all land in lane 0 without the round robin.
  BinCounter short_runs(8);
  std::int64_t total = 0;
  for (std::int64_t i = 0; total + 3 <= 300'000; ++i) {
    const std::int64_t len = 1 + i % 3;
    short_runs.add(binning, constant.data(), len);
    total += len;
  }
  std::vector<std::int64_t> short_counts(8, 0);
  short_runs.flush_into(short_counts.data(), 8);
  CHECK(short_counts[5] == total);
  CHECK(short_counts[0] == 0);
}

TEST_CASE("torch.histc binning is the same at every SIMD level, bin edges included", "[cpu][histogram][simd]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const HistcBinning binnings[] = {{-3.1f, 2.7f, 2048}, {-1e-3f, 5e-4f, 2048}, {0.0f, 1.0f, 10}, {-7.0f, 9.0f, 16384}};
  for (const HistcBinning& b : binnings) {
    std::vector<float> x(200'000);
    for (std::size_t i = 0; i < x.size(); ++i) {
      // Half the values sit exactly on or next to bin edges, where a reciprocal would truncate differently.
      const float edge = b.lo + (b.hi - b.lo) * static_cast<float>(i % b.bins) / static_cast<float>(b.bins);
      x[i] = i % 2 ? edge : normal(rng) * (b.hi - b.lo) / 3.0f;
      if (i % 4 == 1) x[i] = std::nextafter(edge, -INFINITY);
      if (i % 8 == 3) x[i] = std::nextafter(edge, INFINITY);
    }
    x[7] = b.hi;
    x[9] = NAN;
    std::vector<std::int32_t> reference(x.size()), fast(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) reference[i] = bin_index(b, x[i]);
    bin_indices(b, x.data(), static_cast<std::int64_t>(x.size()), fast.data());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < x.size(); ++i) mismatches += reference[i] != fast[i];
    CHECK(mismatches == 0);
  }
}

TEST_CASE("BinCounter's counts equal one bin_index per element, for any run length and bin count",
          "[cpu][histogram][simd]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(70'001);
  for (float& v : x) v = normal(rng);
  x[3] = NAN;
  x[40] = INFINITY;
  x[41] = -50.0f;  // outside the histc range below
  const std::int64_t lengths[] = {0, 1, 31, 32, 33, 1000, 70'001};
  auto check = [&](const auto& binning, std::int32_t bins) {
    for (const std::int64_t n : lengths) {
      std::vector<std::int64_t> expected(static_cast<std::size_t>(bins), 0), counts(expected.size(), 0);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int32_t j = bin_index(binning, x[static_cast<std::size_t>(i)]);
        if (j < bins) ++expected[static_cast<std::size_t>(j)];
      }
      BinCounter counter(bins);
      counter.add(binning, x.data(), n);
      counter.flush_into(counts.data(), bins);
      CHECK(counts == expected);
    }
  };
  for (const std::int32_t bins : {2048, 100, 4096}) {  // 2048 takes the compile-time stride
    check(HistcBinning{-4.0f, 4.0f, bins}, bins);
    check(MagnitudeBinning{bins / 4.0, bins}, bins);
    check(MagnitudeBinning{bins * 1e36, bins}, bins);  // product in double
  }
}

TEST_CASE("BinCounter counts the same without the range or finiteness check when the data keeps the promise",
          "[cpu][histogram][simd]") {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(70'001);
  for (float& v : x) v = std::fmin(std::fmax(normal(rng), -4.0f), 4.0f);
  x[5] = -4.0f;  // both histc edges
  x[6] = 4.0f;
  // 32 and 64 element steps of the vector loop, with and without a tail after them.
  const std::int64_t lengths[] = {0, 31, 32, 64, 96, 97, 1000, 70'001};
  auto check = [&](auto binning, std::int32_t bins) {
    for (const std::int64_t n : lengths) {
      std::vector<std::int64_t> checked(static_cast<std::size_t>(bins), 0), unchecked(checked.size(), 0);
      BinCounter with_check(bins);
      with_check.add(binning, x.data(), n);
      with_check.flush_into(checked.data(), bins);
      auto promised = binning;
      if constexpr (std::is_same_v<decltype(binning), HistcBinning>)
        promised.all_inside = true;
      else
        promised.all_finite = true;
      BinCounter without_check(bins);
      without_check.add(promised, x.data(), n);
      without_check.flush_into(unchecked.data(), bins);
      CHECK(unchecked == checked);
      std::int64_t total = 0;
      for (const std::int64_t c : unchecked) total += c;
      CHECK(total == n);
    }
  };
  for (const std::int32_t bins : {2048, 100}) {
    check(HistcBinning{-4.0f, 4.0f, bins}, bins);
    check(MagnitudeBinning{bins / 4.0, bins}, bins);
  }
}
