// Which bytes a view spans, and whether two spans share any: the "a separate output" checks of every operation.
#pragma once

#include <cstdint>
#include <utility>

#include "shrink/core/view.hpp"

namespace shrink {

// Bytes [first, second) of memory, by address.
using ByteSpan = std::pair<std::uintptr_t, std::uintptr_t>;

// The bytes a view spans: from its first element to one past its last (empty for no elements).
template <class T>
ByteSpan byte_span(const TensorView<T>& v) {
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  if (v.numel() == 0) return {begin, begin};
  std::int64_t last = 0;
  for (int d = 0; d < v.rank(); ++d) last += (v.size(d) - 1) * v.stride(d);
  return {begin, begin + static_cast<std::uintptr_t>(last + 1) * sizeof(T)};
}

// `count` elements from `data`.
template <class T>
ByteSpan byte_span(const T* data, std::int64_t count) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  return {begin, begin + static_cast<std::uintptr_t>(count > 0 ? count : 0) * sizeof(T)};
}

inline bool spans_overlap(ByteSpan a, ByteSpan b) { return a.first < b.second && b.first < a.second; }

template <class T, class U>
bool views_overlap(const TensorView<T>& a, const TensorView<U>& b) {
  return spans_overlap(byte_span(a), byte_span(b));
}

}  // namespace shrink
