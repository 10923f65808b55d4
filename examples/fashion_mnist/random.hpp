// Seeded randomness that draws the same numbers on every platform: uniforms, normals and shuffles from mt19937_64
// (std::normal_distribution and std::shuffle differ between standard libraries, so they are not used).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace fmnist {

// The uses of the one user seed; each draws from its own stream.
enum class SeedStream : std::uint64_t {
  split,
  teacher_init,
  teacher_batches,
  finetune_batches,
  student_init,
  student_batches
};

// An independent seed for each use (splitmix64 of seed + stream), so the split, each model's initialisation and
// each batch order share no draws.
inline std::uint64_t derive_seed(std::uint64_t seed, SeedStream stream) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(stream) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, 1) from the top 53 bits of one draw.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // Uniform integer in [0, n), n > 0: draws below 2^64 mod n are rejected so that no residue is favoured.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t reject_below = (0 - n) % n;
    std::uint64_t r = engine_();
    while (r < reject_below) r = engine_();
    return r % n;
  }

  // Standard normal by Box-Muller: sqrt(-2 ln u1) * cos(2 pi u2), u1 in (0, 1].
  double normal() {
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

  // Fisher-Yates.
  template <class T>
  void shuffle(std::vector<T>& values) {
    for (std::size_t i = values.size(); i > 1; --i) std::swap(values[i - 1], values[below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace fmnist
