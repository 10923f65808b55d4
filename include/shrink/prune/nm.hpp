// N:M semi-structured masks: keep the n largest |importance| of every run of m consecutive elements along the last
// dimension (the input / reduction dimension of a [out, in] Linear weight), as 2:4 sparse tensor cores need.
//
// Matches torch.ao WeightNormSparsifier(sparse_block_shape=(1, m), zeros_per_block=m - n, sparsity_level=1.0), which
// ranks by w * w: the same order as |w| except where w * w underflows to 0 or overflows to inf (|w| < 1e-19 or
// > 1.8e19), where torch sees ties that shrink does not.
// Ties follow prune/amount.hpp: among equal |importance| in a group the lower index is kept.
// Groups start at index 0 of each row. A last dimension not divisible by m is an error, unless NmRemainder::pad:
// the last partial group of r < m elements is then read as padded with zeros that are pruned first, so it keeps its
// min(n, r) largest. (torch pads with NaN, which its topk ranks largest, so it prunes the real elements first; shrink
// does not follow it there.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/for_each_row.hpp"
#include "shrink/cpu/nm_keep.hpp"
#include "shrink/cpu/nonfinite_check.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/prune/mask.hpp"

namespace shrink::prune {

// Keep n of every m consecutive elements; valid when 1 <= n < m <= 256 (2:4, 1:4, 4:8, ...).
struct NmPattern {
  int n = 2;
  int m = 4;

  friend bool operator==(NmPattern a, NmPattern b) { return a.n == b.n && a.m == b.m; }
  friend bool operator!=(NmPattern a, NmPattern b) { return !(a == b); }
};

inline std::string to_string(NmPattern pattern) { return std::to_string(pattern.n) + ":" + std::to_string(pattern.m); }

// What to do with a last dimension that is not a multiple of m.
enum class NmRemainder : std::uint8_t {
  error,  // throw shrink::Error
  pad,    // the last partial group keeps its min(n, r) largest of r elements
};

inline constexpr int kMaxNmGroup = 256;  // positions within a group fit one byte

inline void require_nm_pattern(NmPattern pattern, const char* function) {
  if (pattern.m < 2 || pattern.m > kMaxNmGroup)
    fail(function, "pattern", to_string(pattern), "a group size m in [2, " + std::to_string(kMaxNmGroup) + "]");
  if (pattern.n < 1 || pattern.n >= pattern.m)
    fail(function, "pattern", to_string(pattern), "1 <= n < m (keep n of every m)");
}

// |x| as ordered int32 keys: finite floats compare as their magnitudes; NaN and inf are >= kNonfiniteKey.
inline constexpr std::int32_t kNonfiniteKey = 0x7F800000;
inline std::int32_t magnitude_key(float x) { return shrink::magnitude_bits(shrink::float_to_bits(x)); }

namespace detail {

// Any layout and group size: row by row, group by group.
inline std::int32_t nm_mask_rows(const TensorView<const float>& importance, NmPattern pattern, Mask& mask) {
  const std::int64_t length = cpu::row_length(importance.shape());
  const std::int64_t stride = cpu::row_stride(importance.strides());
  std::uint64_t* words = mask.mutable_words().data();
  std::vector<std::int32_t> key(static_cast<std::size_t>(pattern.m));
  std::vector<int> order(static_cast<std::size_t>(pattern.m));
  std::int32_t largest = 0;
  cpu::for_each_row(importance.shape(), importance.strides(), [&](std::int64_t row, std::int64_t offset) {
    const float* x = importance.data() + offset;
    for (std::int64_t start = 0; start < length; start += pattern.m) {
      const int size = static_cast<int>(std::min<std::int64_t>(pattern.m, length - start));
      for (int j = 0; j < size; ++j) {
        key[static_cast<std::size_t>(j)] = magnitude_key(x[(start + j) * stride]);
        largest = std::max(largest, key[static_cast<std::size_t>(j)]);
      }
      const int keep = std::min(pattern.n, size);  // a partial group (NmRemainder::pad) keeps min(n, r)
      const std::int64_t flat = row * length + start;
      if (size <= 16) {
        const std::uint64_t bits = cpu::group_keep_bits(key.data(), size, keep);
        for (int j = 0; j < size; ++j)
          if ((bits >> j) & 1u) words[(flat + j) >> 6] |= std::uint64_t{1} << ((flat + j) & 63);
      } else {
        cpu::group_keep_list(key.data(), size, keep, order.data());
        for (int k = 0; k < keep; ++k) {
          const std::int64_t at = flat + order[static_cast<std::size_t>(k)];
          words[at >> 6] |= std::uint64_t{1} << (at & 63);
        }
      }
    }
  });
  return largest;
}

}  // namespace detail

// Keeps the n largest |importance| of each run of m consecutive elements along the last dimension (rank >= 1, any
// strides). Pass the weights themselves for magnitude pruning; Wanda passes its (non-negative) scores.
// Errors: an invalid pattern, an empty tensor, a last dimension not divisible by m (unless NmRemainder::pad), and
// NaN/inf importance (the message names the first bad row-major index).
inline Mask nm_mask(const TensorView<const float>& importance, NmPattern pattern,
                    NmRemainder remainder = NmRemainder::error) {
  const char* fn = "shrink::prune::nm_mask";
  require_nm_pattern(pattern, fn);
  require_host_view(importance, fn, "importance");
  if (importance.rank() < 1)
    fail(fn, "importance", "a scalar", "a tensor of rank >= 1 (groups run along the last dimension)");
  require_nonempty(importance, fn, "importance");
  const std::int64_t length = importance.size(importance.rank() - 1);
  if (length % pattern.m != 0 && remainder == NmRemainder::error)
    fail(fn, "importance.shape", to_string(importance.shape()),
         "a last dimension divisible by m = " + std::to_string(pattern.m) + " (or NmRemainder::pad)");

  Mask mask(importance.shape(), false);
  std::int32_t largest = 0;
  const std::int64_t whole_words = importance.numel() / 64;
  if (pattern.m == 4 && length % 4 == 0 && importance.is_contiguous()) {
    largest = cpu::nm4_mask_words(importance.data(), whole_words, pattern.n, mask.mutable_words().data());
    const std::int64_t done = whole_words * 64;
    if (done < importance.numel()) {  // the last, partial word: whole groups, read as one row
      const std::int64_t rest = importance.numel() - done;
      Mask tail(Shape{rest}, false);
      largest = std::max(
          largest, detail::nm_mask_rows(TensorView<const float>(importance.data() + done, Shape{rest}), pattern, tail));
      mask.mutable_words().back() = tail.words().front();
    }
  } else {
    largest = detail::nm_mask_rows(importance, pattern, mask);
  }
  if (largest >= kNonfiniteKey) cpu::require_finite(importance, fn, "importance");
  return mask;
}

namespace detail {

// Float importance from other element types, for the weight overloads below.
template <class T>
Mask nm_mask_via_float(const TensorView<const T>& weights, NmPattern pattern, NmRemainder remainder) {
  const char* fn = "shrink::prune::nm_mask";
  require_host_view(weights, fn, "importance");
  std::vector<float> importance(static_cast<std::size_t>(weights.numel()));
  const std::vector<T> values = contiguous_copy(weights);
  for (std::size_t i = 0; i < values.size(); ++i) importance[i] = static_cast<float>(values[i]);
  return nm_mask(TensorView<const float>(importance.data(), weights.shape()), pattern, remainder);
}

}  // namespace detail

// Magnitude N:M masks of 16-bit and int8 weights: the same rule on the values read as float (exact).
inline Mask nm_mask(const TensorView<const half>& weights, NmPattern pattern,
                    NmRemainder remainder = NmRemainder::error) {
  return detail::nm_mask_via_float(weights, pattern, remainder);
}
inline Mask nm_mask(const TensorView<const bfloat16>& weights, NmPattern pattern,
                    NmRemainder remainder = NmRemainder::error) {
  return detail::nm_mask_via_float(weights, pattern, remainder);
}
inline Mask nm_mask(const TensorView<const std::int8_t>& weights, NmPattern pattern,
                    NmRemainder remainder = NmRemainder::error) {
  return detail::nm_mask_via_float(weights, pattern, remainder);
}

// True when every group of m consecutive elements along the last dimension keeps at most n (a last partial group
// counts as a group). The mask must have rank >= 1.
inline bool is_nm_sparse(const Mask& mask, NmPattern pattern) {
  const char* fn = "shrink::prune::is_nm_sparse";
  require_nm_pattern(pattern, fn);
  if (mask.shape().rank < 1) fail(fn, "mask", "a scalar mask", "a mask of rank >= 1");
  const std::int64_t length = mask.shape()[mask.shape().rank - 1];
  if (length == 0 || mask.size() == 0) return true;
  const std::vector<std::uint64_t>& words = mask.words();
  if (length % pattern.m == 0 && 64 % pattern.m == 0) {  // groups tile every word: count bits per field
    const std::uint64_t field = pattern.m == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << pattern.m) - 1;
    for (std::uint64_t w : words)
      for (int shift = 0; shift < 64; shift += pattern.m)
        if (__builtin_popcountll((w >> shift) & field) > pattern.n) return false;
    return true;
  }
  const std::int64_t rows = mask.size() / length;
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t start = 0; start < length; start += pattern.m) {
      const std::int64_t end = std::min<std::int64_t>(length, start + pattern.m);
      int kept = 0;
      for (std::int64_t i = row * length + start; i < row * length + end; ++i) kept += mask.kept(i);
      if (kept > pattern.n) return false;
    }
  return true;
}

}  // namespace shrink::prune
