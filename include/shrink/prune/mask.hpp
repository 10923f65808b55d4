// Pruning masks: one bit an element of a tensor, packed into 64-bit words, and how to combine them.
//
// Layout: element i (its row-major flat index over shape()) is bit (i % 64) of words()[i / 64];
// 1 keeps the element, 0 prunes it. Bits past size() in the last word are always 0, so two masks of
// one shape compare equal exactly when they keep the same elements. A mask of n elements holds
// ceil(n / 64) words: n / 8 bytes, a 32nd of the float weights it masks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"

namespace shrink::prune {

class Mask {
 public:
  Mask() = default;

  // Every element kept (keep = true) or every element pruned.
  explicit Mask(const Shape& shape, bool keep = true) : shape_(shape), size_(checked_size(shape, "shrink::prune::Mask")) {
    words_.assign(static_cast<std::size_t>((size_ + 63) / 64), keep ? ~std::uint64_t{0} : 0);
    clear_tail();
  }

  // From a byte mask: keep[i] != 0 keeps element i (row-major over shape).
  static Mask from_bytes(const Shape& shape, const std::uint8_t* keep) {
    Mask mask(shape, false);
    if (mask.size_ > 0 && keep == nullptr)
      fail("shrink::prune::Mask::from_bytes", "keep", "a null pointer",
           "a pointer to " + std::to_string(mask.size_) + " bytes");
    for (std::int64_t i = 0; i < mask.size_; ++i)
      if (keep[i]) mask.words_[static_cast<std::size_t>(i >> 6)] |= std::uint64_t{1} << (i & 63);
    return mask;
  }

  // One byte an element, 1 for kept and 0 for pruned (the layout of a torch bool or uint8 mask).
  std::vector<std::uint8_t> to_bytes() const {
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size_));
    for (std::int64_t i = 0; i < size_; ++i) bytes[static_cast<std::size_t>(i)] = kept(i) ? 1 : 0;
    return bytes;
  }

  const Shape& shape() const { return shape_; }
  std::int64_t size() const { return size_; }
  bool kept(std::int64_t i) const { return (words_[static_cast<std::size_t>(i >> 6)] >> (i & 63)) & 1u; }
  void set(std::int64_t i, bool keep) {
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    std::uint64_t& word = words_[static_cast<std::size_t>(i >> 6)];
    word = keep ? (word | bit) : (word & ~bit);
  }
  void prune(std::int64_t i) { words_[static_cast<std::size_t>(i >> 6)] &= ~(std::uint64_t{1} << (i & 63)); }

  std::int64_t count_kept() const {
    std::int64_t n = 0;
    for (std::uint64_t w : words_) n += __builtin_popcountll(w);
    return n;
  }
  std::int64_t count_pruned() const { return size_ - count_kept(); }
  // Fraction of elements pruned; 0 for a mask of no elements.
  double sparsity() const { return size_ ? static_cast<double>(count_pruned()) / static_cast<double>(size_) : 0.0; }

  const std::vector<std::uint64_t>& words() const { return words_; }
  std::vector<std::uint64_t>& mutable_words() { return words_; }  // keep the bits past size() zero
  std::int64_t bytes() const { return static_cast<std::int64_t>(words_.size() * sizeof(std::uint64_t)); }

  friend bool operator==(const Mask& a, const Mask& b) { return a.shape_ == b.shape_ && a.words_ == b.words_; }
  friend bool operator!=(const Mask& a, const Mask& b) { return !(a == b); }

  // Zeroes the bits past size() in the last word (after a caller wrote whole words).
  void clear_tail() {
    if (size_ % 64) words_.back() &= (std::uint64_t{1} << (size_ % 64)) - 1;
  }

 private:
  static std::int64_t checked_size(const Shape& shape, const char* function) {
    for (int d = 0; d < shape.rank; ++d)
      if (shape[d] < 0) fail(function, "shape", to_string(shape), "non-negative sizes");
    return shape.product();
  }

  Shape shape_{};
  std::int64_t size_ = 0;
  std::vector<std::uint64_t> words_;
};

namespace detail {

inline void require_same_shape(const Mask& a, const Mask& b, const char* function) {
  if (a.shape() != b.shape())
    fail(function, "b.shape", to_string(b.shape()), "the shape of a, " + to_string(a.shape()));
}

}  // namespace detail

// Kept where both keep: pruning by a and then by b.
inline Mask mask_and(const Mask& a, const Mask& b) {
  detail::require_same_shape(a, b, "shrink::prune::mask_and");
  Mask out = a;
  for (std::size_t w = 0; w < out.words().size(); ++w) out.mutable_words()[w] &= b.words()[w];
  return out;
}

// Kept where either keeps.
inline Mask mask_or(const Mask& a, const Mask& b) {
  detail::require_same_shape(a, b, "shrink::prune::mask_or");
  Mask out = a;
  for (std::size_t w = 0; w < out.words().size(); ++w) out.mutable_words()[w] |= b.words()[w];
  return out;
}

// Kept where a prunes.
inline Mask mask_not(const Mask& a) {
  Mask out = a;
  for (std::uint64_t& w : out.mutable_words()) w = ~w;
  if (!out.mutable_words().empty()) out.clear_tail();
  return out;
}

}  // namespace shrink::prune
