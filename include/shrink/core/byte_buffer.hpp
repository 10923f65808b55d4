// ByteBuffer: the owning byte storage of quantized results, a std::vector whose resize leaves new bytes
// uninitialised (the quantizer writes every byte next, so zero-filling them first was a wasted pass).
#pragma once

#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

namespace shrink {

// std::allocator, except that value-initialising construction (resize(n), vector(n)) default-initialises:
// trivial types are left as the allocation gives them. Explicit values (resize(n, v), assign, push_back) as usual.
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };

  DefaultInitAllocator() noexcept = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}  // NOLINT: converting, as std::allocator

  // Hides std::allocator's construct, so construction with arguments falls back to placement new.
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
};

template <class T, class U>
bool operator==(const DefaultInitAllocator<T>&, const DefaultInitAllocator<U>&) noexcept {
  return true;
}
template <class T, class U>
bool operator!=(const DefaultInitAllocator<T>&, const DefaultInitAllocator<U>&) noexcept {
  return false;
}

using ByteBuffer = std::vector<std::uint8_t, DefaultInitAllocator<std::uint8_t>>;

}  // namespace shrink
