// Wall time for the report's build, training and stage columns.
#pragma once

#include <chrono>

namespace fmnist {

using Clock = std::chrono::steady_clock;

// Seconds elapsed since `start`.
inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace fmnist
