// The next token from a row of logits z [vocab]:
//   greedy (temperature 0): argmax_j z_j, the lowest id among equal maxima;
//   sampled: p_j = softmax(z / temperature) over the candidates, which are, in this order,
//     top-k: the k largest logits (all when k = 0; ties broken by the lower id),
//     top-p: the smallest prefix of the candidates sorted by p (descending, ties by id) whose probabilities sum to
//            at least top_p (at least one token),
//   renormalised over what is left, then drawn with u uniform in [0, 1): the first candidate whose cumulative
//   probability exceeds u · total.
// u comes from std::mt19937_64 (the standard fixes its sequence) as the top 53 bits of one draw times 2^-53, so a
// seed gives the same tokens with every standard library. Sums are in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"

namespace llm {

struct SamplingOptions {
  float temperature = 0.0f;  // 0: greedy
  std::int64_t top_k = 0;    // 0: no limit
  float top_p = 1.0f;        // 1: no limit
  std::uint64_t seed = 0;
};

inline void check_sampling(const SamplingOptions& o) {
  const char* fn = "llm::check_sampling";
  if (!(o.temperature >= 0.0f) || !std::isfinite(o.temperature))
    shrink::fail(fn, "temperature", o.temperature, "a finite temperature >= 0 (0: greedy)");
  if (o.top_k < 0) shrink::fail(fn, "top_k", o.top_k, "a count >= 0 (0: no limit)");
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) shrink::fail(fn, "top_p", o.top_p, "a probability in (0, 1]");
}

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& o) : options_(o), random_(o.seed) { check_sampling(o); }

  std::int32_t next(const float* logits, std::int64_t vocab) {
    const char* fn = "llm::Sampler::next";
    if (vocab < 1) shrink::fail(fn, "vocab", vocab, "at least one logit");
    for (std::int64_t j = 0; j < vocab; ++j)
      if (std::isnan(logits[j])) shrink::fail(fn, ("logits[" + std::to_string(j) + "]").c_str(), "NaN", "a number");
    if (options_.temperature == 0.0f) return greedy(logits, vocab);

    // Candidates by logit, descending (ties: lower id first); top-k keeps a prefix.
    order_.resize(static_cast<std::size_t>(vocab));
    std::iota(order_.begin(), order_.end(), 0);
    const auto before = [&](std::int32_t a, std::int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    };
    const std::int64_t k = options_.top_k == 0 ? vocab : std::min(options_.top_k, vocab);
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), before);
    order_.resize(static_cast<std::size_t>(k));

    // p_j ∝ exp((z_j − z_max) / T), in double.
    const double top = logits[order_.front()];
    weights_.resize(order_.size());
    double total = 0.0;
    for (std::size_t i = 0; i < order_.size(); ++i) {
      weights_[i] =
          std::exp((static_cast<double>(logits[order_[i]]) - top) / static_cast<double>(options_.temperature));
      total += weights_[i];
    }
    // Top-p: the candidates are already in descending probability (a monotone function of the logit).
    std::size_t kept = order_.size();
    if (options_.top_p < 1.0f) {
      double cumulative = 0.0;
      for (std::size_t i = 0; i < order_.size(); ++i) {
        cumulative += weights_[i];
        if (cumulative >= static_cast<double>(options_.top_p) * total) {
          kept = i + 1;
          break;
        }
      }
    }
    double kept_total = 0.0;
    for (std::size_t i = 0; i < kept; ++i) kept_total += weights_[i];
    const double u = static_cast<double>(random_() >> 11) * 0x1.0p-53;
    double cumulative = 0.0;
    for (std::size_t i = 0; i < kept; ++i) {
      cumulative += weights_[i];
      if (cumulative > u * kept_total) return order_[i];
    }
    return order_[kept - 1];
  }

  static std::int32_t greedy(const float* logits, std::int64_t vocab) {
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < vocab; ++j)
      if (logits[j] > logits[best]) best = j;
    return static_cast<std::int32_t>(best);
  }

 private:
  SamplingOptions options_;
  std::mt19937_64 random_;
  std::vector<std::int32_t> order_;
  std::vector<double> weights_;
};

}  // namespace llm
