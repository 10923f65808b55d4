// x86 SIMD levels: SSE2 always on x86-64, AVX2 (and, for a few hot loops, AVX-512) chosen at run time when the
// CPU has them.
#pragma once

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define SHRINK_CPU_SSE2 1
#define SHRINK_CPU_AVX2_DISPATCH 1
// Compiles one function for AVX2 whatever the translation unit's flags; called only after cpu_has_avx2().
#define SHRINK_TARGET_AVX2 __attribute__((target("avx2")))
#define SHRINK_TARGET_AVX2_F16C __attribute__((target("avx2,f16c")))
#define SHRINK_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#define SHRINK_TARGET_AVX2_FMA_F16C __attribute__((target("avx2,fma,f16c")))
// AVX-512 Foundation (16 float lanes, mask registers, vscalefps), for the loops that have such a path.
#define SHRINK_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#elif defined(_M_X64)
#include <emmintrin.h>
#define SHRINK_CPU_SSE2 1
#endif

#include <algorithm>
#include <cstdlib>
#include <string>

namespace shrink::cpu {

// Ordered: a level implies the ones below it.
enum class SimdLevel { scalar, sse2, avx2, avx512 };

inline SimdLevel detect_simd_level() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (!__builtin_cpu_supports("avx2")) return SimdLevel::sse2;
  // libgcc's answer for avx512f includes the OS saving the zmm and mask registers (XCR0).
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma") ? SimdLevel::avx512 : SimdLevel::avx2;
#elif defined(SHRINK_CPU_SSE2)
  return SimdLevel::sse2;
#else
  return SimdLevel::scalar;
#endif
}

// The level asked for by name ("scalar", "sse2", "avx2", "avx512"; the environment variable SHRINK_SIMD), never above
// `best`, the CPU's; `best` itself when the name is absent or unknown.
inline SimdLevel requested_simd_level(const char* name, SimdLevel best) {
  if (name == nullptr) return best;
  const std::string text(name);
  const SimdLevel asked = text == "scalar" ? SimdLevel::scalar
                          : text == "sse2" ? SimdLevel::sse2
                          : text == "avx2" ? SimdLevel::avx2
                                           : SimdLevel::avx512;
  return text == "scalar" || text == "sse2" || text == "avx2" || text == "avx512" ? std::min(asked, best) : best;
}

// The level the loops use: the CPU's best, or the lower one SHRINK_SIMD names (to measure an AVX-512 machine's AVX2
// paths, say). Tests lower it to check every path gives the same results; raising it above what the CPU supports is
// not allowed.
inline SimdLevel& simd_level() {
  static SimdLevel level = requested_simd_level(std::getenv("SHRINK_SIMD"), detect_simd_level());
  return level;
}

inline bool use_avx2() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  return simd_level() >= SimdLevel::avx2;
#else
  return false;
#endif
}

inline bool use_avx512() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  return simd_level() >= SimdLevel::avx512;
#else
  return false;
#endif
}

inline bool use_sse2() { return simd_level() != SimdLevel::scalar; }

// Half-precision conversion instructions (every AVX2 CPU has them in practice, but ask): CPUID leaf 1,
// ECX bit 29 (asked directly because clang's __builtin_cpu_supports does not know "f16c").
inline bool use_avx2_f16c() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  static const bool has_f16c = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return use_avx2() && has_f16c;
#else
  return false;
#endif
}

// Fused multiply-add (AVX2 CPUs have it in practice, but ask): the exp/log kernels of vector_math.hpp round once
// per step and need it to match their scalar twins bit for bit.
inline bool use_avx2_fma() {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  static const bool has_fma = __builtin_cpu_supports("fma");
  return use_avx2() && has_fma;
#else
  return false;
#endif
}

}  // namespace shrink::cpu
