// Tests for shrink/cpu/histogram.hpp: BinCounter's 16-bit lanes never overflow, whatever the run lengths.
#include <catch2/catch.hpp>

#include <cstdint>
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
