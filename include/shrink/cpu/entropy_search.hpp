// The CPU kernels of the entropy calibrator (quant/observers/entropy.hpp): KL(P || Q) of every candidate threshold
// over a magnitude histogram, with the tables computed once and the lanes summed in the order the file comment of
// entropy.hpp gives (four thresholds at a time with AVX2, the same bits).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "shrink/core/no_contract.hpp"
#include "shrink/cpu/simd.hpp"

namespace shrink::cpu {

// What the entropy search needs of a histogram, computed once: the counts with h[0] replaced, their
// prefix sums, prefix counts of nonzero bins, h and log(h) as doubles, and log Q of each quantized bin
// [begin, begin + length) met so far (the same bins recur across candidates; NaN = not yet computed).
struct EntropyTables {
  std::vector<std::int64_t> h, prefix, nonzero_prefix;
  std::vector<double> weight, log_h, log_q;
  std::vector<double> log_q_cache;  // [begin * (longest + 1) + length], when small enough to keep
  std::int64_t longest = 0;
  std::int64_t levels;
  int level_shift = -1;  // log2(levels) when levels is a power of two: shifts instead of divisions

  EntropyTables(const std::vector<std::int64_t>& counts, std::int64_t quantized_bins)
      : h(counts), levels(quantized_bins) {
    if ((levels & (levels - 1)) == 0)
      while ((std::int64_t{1} << ++level_shift) < levels) continue;
    const std::size_t n = h.size();
    if (n >= 2) h[0] = h[1];
    prefix.assign(n + 1, 0);
    nonzero_prefix.assign(n + 1, 0);
    weight.assign(n, 0.0);
    log_h.assign(n, 0.0);
    log_q.assign(n, 0.0);
    for (std::size_t j = 0; j < n; ++j) {
      prefix[j + 1] = prefix[j] + h[j];
      nonzero_prefix[j + 1] = nonzero_prefix[j] + (h[j] > 0 ? 1 : 0);
      weight[j] = static_cast<double>(h[j]);
      if (h[j] > 0) log_h[j] = std::log(weight[j]);
    }
    longest = static_cast<std::int64_t>(n) / levels + 1;
    constexpr std::int64_t kMostCached = std::int64_t{1} << 22;
    if (static_cast<std::int64_t>(n) * (longest + 1) <= kMostCached)
      log_q_cache.assign(n * static_cast<std::size_t>(longest + 1), std::numeric_limits<double>::quiet_NaN());
  }

  // log(mass / nonzero) of source bins [begin, end), 0 when they are all empty.
  double quantized_log(std::int64_t begin, std::int64_t end) {
    double* cached =
        log_q_cache.empty() ? nullptr : &log_q_cache[static_cast<std::size_t>(begin * (longest + 1) + (end - begin))];
    if (cached != nullptr && !std::isnan(*cached)) return *cached;
    const std::int64_t nonzero =
        nonzero_prefix[static_cast<std::size_t>(end)] - nonzero_prefix[static_cast<std::size_t>(begin)];
    const std::int64_t mass = prefix[static_cast<std::size_t>(end)] - prefix[static_cast<std::size_t>(begin)];
    const double value = nonzero > 0 ? std::log(static_cast<double>(mass) / static_cast<double>(nonzero)) : 0.0;
    if (cached != nullptr) *cached = value;
    return value;
  }
};

// First source bin of quantized bin k at threshold i: ceil(k * i / levels), the first j with
// floor(j * levels / i) == k; a shift when levels == 2^shift (shift >= 0).
inline std::int64_t first_source_bin(std::int64_t k, std::int64_t i, std::int64_t levels, int shift) {
  const std::int64_t a = k * i + levels - 1;
  return shift >= 0 ? a >> shift : a / levels;
}

// Writes log Q_j for j < i: each quantized bin's log(mass / nonzero source bins), over its source bins.
inline void fill_quantized_logs(EntropyTables& t, std::int64_t i, double* log_q) {
  std::int64_t end = 0;
  for (std::int64_t k = 0; k < t.levels; ++k) {
    const std::int64_t begin = end;
    end = std::min(i, first_source_bin(k + 1, i, t.levels, t.level_shift));
    if (begin >= end) continue;
    std::fill(log_q + begin, log_q + end, t.quantized_log(begin, end));
  }
}

// False when threshold i has divergence +inf: nothing below i, or P has mass (outliers) where Q has none.
inline bool finite_divergence(const EntropyTables& t, std::int64_t i) {
  const std::int64_t n = static_cast<std::int64_t>(t.h.size());
  const std::int64_t kept = t.prefix[static_cast<std::size_t>(i)];
  const std::int64_t outliers = t.prefix[static_cast<std::size_t>(n)] - kept;
  return kept > 0 && !(t.h[static_cast<std::size_t>(i - 1)] == 0 && outliers > 0);
}

// KL(P || Q) for threshold i (finite_divergence(t, i) holds), its lanes summed up to `start` already:
//   term_j = P_j * (log P_j - log Q_j) (0 where P_j = 0), KL = sum(term) / sum(P) + log(sum(Q) / sum(P)),
// term j added to lane j mod 4 in order of j, the lanes added in order at the end.
SHRINK_NO_CONTRACT inline double finish_divergence(const EntropyTables& t, std::int64_t i, const double* log_q,
                                                   double lane[4], std::int64_t start) {
  SHRINK_NO_CONTRACT_BODY
  const std::int64_t n = static_cast<std::int64_t>(t.h.size());
  const std::int64_t kept = t.prefix[static_cast<std::size_t>(i)];
  const std::int64_t outliers = t.prefix[static_cast<std::size_t>(n)] - kept;
  const double* weight = t.weight.data();
  const double* log_h = t.log_h.data();
  const std::int64_t before_last = i - 1;
  std::int64_t j = start;
  for (; j + 4 <= before_last; j += 4)
    for (int l = 0; l < 4; ++l) lane[l] = lane[l] + weight[j + l] * (log_h[j + l] - log_q[j + l]);
  for (; j < before_last; ++j) lane[j & 3] = lane[j & 3] + weight[j] * (log_h[j] - log_q[j]);
  const double p_last = static_cast<double>(t.h[static_cast<std::size_t>(before_last)] + outliers);
  const double last_term = p_last > 0.0 ? p_last * (std::log(p_last) - log_q[before_last]) : 0.0;
  lane[before_last & 3] = lane[before_last & 3] + last_term;
  const double sum = ((lane[0] + lane[1]) + lane[2]) + lane[3];
  const double total = static_cast<double>(t.prefix[static_cast<std::size_t>(n)]);
  return sum / total + std::log(static_cast<double>(kept) / total);
}

// KL(P || Q) for threshold i; +inf where P has mass that Q lacks or nothing lies below i.
inline double entropy_divergence(EntropyTables& t, std::int64_t i) {
  if (!finite_divergence(t, i)) return std::numeric_limits<double>::infinity();
  fill_quantized_logs(t, i, t.log_q.data());
  double lane[4] = {0.0, 0.0, 0.0, 0.0};
  return finish_divergence(t, i, t.log_q.data(), lane, 0);
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// fill_quantized_logs with each run of up to 16 equal logs written as four 4-double stores; a store past a
// run's end is overwritten by the next run, so log_q needs 16 doubles of room past i.
SHRINK_TARGET_AVX2 inline void fill_quantized_logs_avx2(EntropyTables& t, std::int64_t i, double* log_q) {
  std::int64_t end = 0;
  for (std::int64_t k = 0; k < t.levels; ++k) {
    const std::int64_t begin = end;
    end = std::min(i, first_source_bin(k + 1, i, t.levels, t.level_shift));
    if (begin >= end) continue;
    const __m256d v = _mm256_set1_pd(t.quantized_log(begin, end));
    for (std::int64_t j = begin; j < end; j += 16) {
      _mm256_storeu_pd(log_q + j, v);
      _mm256_storeu_pd(log_q + j + 4, v);
      _mm256_storeu_pd(log_q + j + 8, v);
      _mm256_storeu_pd(log_q + j + 12, v);
    }
  }
}

// The four lanes of four thresholds' sums over j < count (a multiple of 4) at once: the same operations in
// the same order as finish_divergence, so the same bits, but four independent chains of additions instead
// of one, which the adds' latency otherwise bounds. lanes[c] receives threshold c's four lanes.
SHRINK_TARGET_AVX2 inline void divergence_lanes4_avx2(const EntropyTables& t, const double* const log_q[4],
                                                      std::int64_t count, double lanes[4][4]) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  const double* weight = t.weight.data();
  const double* log_h = t.log_h.data();
  for (std::int64_t j = 0; j < count; j += 4) {
    const __m256d w = _mm256_loadu_pd(weight + j), lh = _mm256_loadu_pd(log_h + j);
    acc0 = _mm256_add_pd(acc0, _mm256_mul_pd(w, _mm256_sub_pd(lh, _mm256_loadu_pd(log_q[0] + j))));
    acc1 = _mm256_add_pd(acc1, _mm256_mul_pd(w, _mm256_sub_pd(lh, _mm256_loadu_pd(log_q[1] + j))));
    acc2 = _mm256_add_pd(acc2, _mm256_mul_pd(w, _mm256_sub_pd(lh, _mm256_loadu_pd(log_q[2] + j))));
    acc3 = _mm256_add_pd(acc3, _mm256_mul_pd(w, _mm256_sub_pd(lh, _mm256_loadu_pd(log_q[3] + j))));
  }
  _mm256_storeu_pd(lanes[0], acc0);
  _mm256_storeu_pd(lanes[1], acc1);
  _mm256_storeu_pd(lanes[2], acc2);
  _mm256_storeu_pd(lanes[3], acc3);
}
#endif

// Divergences of thresholds [first, last] into divergence[i].
inline void entropy_divergences(EntropyTables& t, std::int64_t first, std::int64_t last, double* divergence) {
  std::int64_t i = first;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (cpu::use_avx2()) {
    const std::size_t n = t.h.size() + 16;  // room for fill_quantized_logs_avx2's last stores
    std::vector<double> logs(4 * n);
    for (; i + 3 <= last; i += 4) {
      const double* log_q[4];
      bool finite = true;
      for (int c = 0; c < 4; ++c) {
        log_q[c] = logs.data() + static_cast<std::size_t>(c) * n;
        finite = finite && finite_divergence(t, i + c);
      }
      if (!finite) {  // rare: one at a time
        for (int c = 0; c < 4; ++c) divergence[i + c] = entropy_divergence(t, i + c);
        continue;
      }
      for (int c = 0; c < 4; ++c) fill_quantized_logs_avx2(t, i + c, logs.data() + static_cast<std::size_t>(c) * n);
      double lanes[4][4];
      const std::int64_t common = (i - 1) / 4 * 4;  // whole groups of four below every threshold's last bin
      divergence_lanes4_avx2(t, log_q, common, lanes);
      for (int c = 0; c < 4; ++c) divergence[i + c] = finish_divergence(t, i + c, log_q[c], lanes[c], common);
    }
  }
#endif
  for (; i <= last; ++i) divergence[i] = entropy_divergence(t, i);
}

}  // namespace shrink::cpu
