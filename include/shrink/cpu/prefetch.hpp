// Software prefetch into L2 of a byte range, spread over the steps of a loop: the kernels ask for the next weight
// block while they compute on the current one, so each fresh block does not start with a wait on memory.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SSE__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace shrink::cpu {

inline constexpr std::size_t kCacheLine = 64;

// Prefetches the part `step` of `steps` equal parts of [begin, begin + bytes) into L2 (a hint; no fault on any
// address, so a range past the end of an array is harmless).
inline void prefetch_part_l2(const void* begin, std::size_t bytes, std::int64_t step, std::int64_t steps) {
#if defined(__SSE__) || defined(_M_X64)
  if (begin == nullptr || steps <= 0) return;
  const std::size_t lines = (bytes + kCacheLine - 1) / kCacheLine;
  const std::size_t per_step = (lines + static_cast<std::size_t>(steps) - 1) / static_cast<std::size_t>(steps);
  const std::size_t first = static_cast<std::size_t>(step) * per_step;
  const char* base = static_cast<const char*>(begin);
  for (std::size_t l = first; l < first + per_step && l < lines; ++l) _mm_prefetch(base + l * kCacheLine, _MM_HINT_T1);
#else
  (void)begin, (void)bytes, (void)step, (void)steps;
#endif
}

}  // namespace shrink::cpu
