// SIMD levels in tests: the levels this CPU can run, and a guard that restores the level a test changed.
#pragma once

#include <vector>

#include "shrink/cpu/simd.hpp"

namespace shrink::test {

struct SimdLevelGuard {
  cpu::SimdLevel saved = cpu::simd_level();
  ~SimdLevelGuard() { cpu::simd_level() = saved; }
};

// Every level up to the CPU's own, scalar first.
inline std::vector<cpu::SimdLevel> supported_levels() {
  std::vector<cpu::SimdLevel> out;
  for (cpu::SimdLevel l : {cpu::SimdLevel::scalar, cpu::SimdLevel::sse2, cpu::SimdLevel::avx2, cpu::SimdLevel::avx512})
    if (l <= cpu::detect_simd_level()) out.push_back(l);
  return out;
}

}  // namespace shrink::test
