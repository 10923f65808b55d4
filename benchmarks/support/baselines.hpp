// Baselines and byte accounting shared by the benchmark programs.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace shrink::bench {

// Bytes each iteration moves, for Google Benchmark's bytes_per_second.
inline void set_bytes(benchmark::State& state, std::int64_t bytes_per_iteration) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes_per_iteration);
}

// memcpy of `source` into a buffer reused across iterations; bytes counted read + written.
inline void run_memcpy_baseline(benchmark::State& state, const std::vector<float>& source) {
  std::vector<float> destination(source.size());
  for (auto _ : state) {
    std::memcpy(destination.data(), source.data(), source.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2 * static_cast<std::int64_t>(source.size() * sizeof(float)));
}

}  // namespace shrink::bench
