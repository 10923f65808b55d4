// Non-owning tensor views: a pointer, sizes, strides (in elements) and the device the memory lives on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/core/error.hpp"

namespace shrink {

enum class DeviceKind : std::int8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // CUDA ordinal; 0 for the host

  static constexpr Device host() { return Device{DeviceKind::cpu, 0}; }
  static constexpr Device cuda(int ordinal = 0) { return Device{DeviceKind::cuda, ordinal}; }
  constexpr bool is_cpu() const { return kind == DeviceKind::cpu; }
  constexpr bool is_cuda() const { return kind == DeviceKind::cuda; }
};

inline constexpr int kMaxRank = 8;

// A small fixed-capacity list of extents (sizes or strides), usable in device code.
struct Extents {
  int rank = 0;
  std::int64_t values[kMaxRank] = {};

  Extents() = default;
  Extents(std::initializer_list<std::int64_t> list) {
    if (list.size() > static_cast<std::size_t>(kMaxRank))
      fail("shrink::Extents", "rank", list.size(), "at most " + std::to_string(kMaxRank));
    for (std::int64_t v : list) values[rank++] = v;
  }
  explicit Extents(const std::vector<std::int64_t>& list) {
    if (list.size() > static_cast<std::size_t>(kMaxRank))
      fail("shrink::Extents", "rank", list.size(), "at most " + std::to_string(kMaxRank));
    for (std::int64_t v : list) values[rank++] = v;
  }
  SHRINK_HOST_DEVICE std::int64_t operator[](int d) const { return values[d]; }
  SHRINK_HOST_DEVICE std::int64_t& operator[](int d) { return values[d]; }
  // Product of the extents; 1 for rank 0 (a scalar).
  SHRINK_HOST_DEVICE std::int64_t product() const {
    std::int64_t p = 1;
    for (int d = 0; d < rank; ++d) p *= values[d];
    return p;
  }
  std::vector<std::int64_t> to_vector() const { return {values, values + rank}; }
  friend bool operator==(const Extents& a, const Extents& b) {
    if (a.rank != b.rank) return false;
    for (int d = 0; d < a.rank; ++d)
      if (a.values[d] != b.values[d]) return false;
    return true;
  }
  friend bool operator!=(const Extents& a, const Extents& b) { return !(a == b); }
};

using Shape = Extents;
using Strides = Extents;

// "[2, 3, 4]", for error messages.
inline std::string to_string(const Extents& e) {
  std::string s = "[";
  for (int d = 0; d < e.rank; ++d) s += (d ? ", " : "") + std::to_string(e.values[d]);
  return s + "]";
}

// Row-major (C order) strides for a shape.
inline Strides contiguous_strides(const Shape& shape) {
  Strides strides;
  strides.rank = shape.rank;
  std::int64_t step = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides.values[d] = step;
    step *= shape.values[d];
  }
  return strides;
}

// A view of T elements; T may be const. Copy it freely: it owns nothing.
template <class T>
class TensorView {
 public:
  using element_type = T;

  TensorView() = default;
  // Contiguous row-major view.
  TensorView(T* data, const Shape& shape, Device device = Device::host())
      : data_(data), shape_(shape), strides_(contiguous_strides(shape)), device_(device) {
    check_sizes();
  }
  // Strided view; strides count elements, not bytes.
  TensorView(T* data, const Shape& shape, const Strides& strides, Device device = Device::host())
      : data_(data), shape_(shape), strides_(strides), device_(device) {
    check_sizes();
    if (strides.rank != shape.rank)
      fail("shrink::TensorView", "strides", to_string(strides),
           "as many strides as dimensions (" + std::to_string(shape.rank) + ")");
    for (int d = 0; d < shape.rank; ++d)
      if (strides.values[d] < 0)
        fail("shrink::TensorView", "strides", to_string(strides), "non-negative strides");
  }
  // 1-D contiguous view of n elements.
  TensorView(T* data, std::int64_t n, Device device = Device::host())
      : TensorView(data, Shape{n}, device) {}

  // A view of T converts to a view of const T.
  template <class U, class = std::enable_if_t<std::is_same<const U, T>::value>>
  TensorView(const TensorView<U>& other)  // NOLINT(google-explicit-constructor)
      : data_(other.data()), shape_(other.shape()), strides_(other.strides()), device_(other.device()) {}

  SHRINK_HOST_DEVICE T* data() const { return data_; }
  SHRINK_HOST_DEVICE int rank() const { return shape_.rank; }
  SHRINK_HOST_DEVICE std::int64_t size(int d) const { return shape_.values[d]; }
  SHRINK_HOST_DEVICE std::int64_t stride(int d) const { return strides_.values[d]; }
  SHRINK_HOST_DEVICE const Shape& shape() const { return shape_; }
  SHRINK_HOST_DEVICE const Strides& strides() const { return strides_; }
  SHRINK_HOST_DEVICE std::int64_t numel() const { return shape_.product(); }
  SHRINK_HOST_DEVICE bool empty() const { return numel() == 0; }
  Device device() const { return device_; }

  // True when elements are laid out densely in row-major order (size-1 dimensions ignored).
  SHRINK_HOST_DEVICE bool is_contiguous() const {
    std::int64_t step = 1;
    for (int d = shape_.rank - 1; d >= 0; --d) {
      if (shape_.values[d] != 1 && strides_.values[d] != step) return false;
      step *= shape_.values[d];
    }
    return true;
  }

  // Offset in elements of a multi-index.
  template <class... Index>
  SHRINK_HOST_DEVICE std::int64_t offset(Index... index) const {
    const std::int64_t idx[] = {static_cast<std::int64_t>(index)...};
    std::int64_t off = 0;
    for (int d = 0; d < static_cast<int>(sizeof...(Index)); ++d) off += idx[d] * strides_.values[d];
    return off;
  }
  template <class... Index>
  SHRINK_HOST_DEVICE T& operator()(Index... index) const {
    return data_[offset(index...)];
  }

 private:
  void check_sizes() const {
    for (int d = 0; d < shape_.rank; ++d)
      if (shape_.values[d] < 0)
        fail("shrink::TensorView", "shape", to_string(shape_), "non-negative sizes");
  }

  T* data_ = nullptr;
  Shape shape_{};
  Strides strides_{};
  Device device_{};
};

template <class T>
TensorView<T> make_view(std::vector<T>& v) {
  return TensorView<T>(v.data(), static_cast<std::int64_t>(v.size()));
}
template <class T>
TensorView<const T> make_view(const std::vector<T>& v) {
  return TensorView<const T>(v.data(), static_cast<std::int64_t>(v.size()));
}
template <class T>
TensorView<T> make_view(std::vector<T>& v, const Shape& shape) {
  if (shape.product() != static_cast<std::int64_t>(v.size()))
    fail("shrink::make_view", "shape", to_string(shape),
         "as many elements as the vector holds (" + std::to_string(v.size()) + ")");
  return TensorView<T>(v.data(), shape);
}
template <class T>
TensorView<const T> make_view(const std::vector<T>& v, const Shape& shape) {
  if (shape.product() != static_cast<std::int64_t>(v.size()))
    fail("shrink::make_view", "shape", to_string(shape),
         "as many elements as the vector holds (" + std::to_string(v.size()) + ")");
  return TensorView<const T>(v.data(), shape);
}

// Row-major copy of a host view's elements (for algorithms that need contiguous input).
template <class T>
std::vector<std::remove_const_t<T>> contiguous_copy(const TensorView<T>& v) {
  std::vector<std::remove_const_t<T>> out(static_cast<std::size_t>(v.numel()));
  std::int64_t index[kMaxRank] = {};
  for (std::size_t k = 0; k < out.size(); ++k) {
    std::int64_t off = 0;
    for (int d = 0; d < v.rank(); ++d) off += index[d] * v.stride(d);
    out[k] = v.data()[off];
    for (int d = v.rank() - 1; d >= 0; --d) {  // odometer step over the multi-index
      if (++index[d] < v.size(d)) break;
      index[d] = 0;
    }
  }
  return out;
}

// Host-side checks shared by every CPU entry point: memory on the host, a pointer when there are
// elements, aligned for T.
template <class T>
void require_host_view(const TensorView<T>& view, const char* function, const char* argument) {
  if (!view.device().is_cpu())
    fail(function, argument, "a CUDA view", "a view of host memory");
  if (view.numel() > 0 && view.data() == nullptr)
    fail(function, argument, "a null pointer", "a pointer to " + std::to_string(view.numel()) + " elements");
  if (reinterpret_cast<std::uintptr_t>(view.data()) % alignof(std::remove_const_t<T>) != 0)
    fail(function, argument, "a misaligned pointer",
         "alignment to " + std::to_string(alignof(std::remove_const_t<T>)) + " bytes");
}

template <class T>
void require_nonempty(const TensorView<T>& view, const char* function, const char* argument) {
  if (view.empty())
    fail(function, argument, "an empty tensor of shape " + to_string(view.shape()), "at least one element");
}

template <class T>
void require_contiguous(const TensorView<T>& view, const char* function, const char* argument) {
  if (!view.is_contiguous())
    fail(function, argument, "a strided view with strides " + to_string(view.strides()), "a contiguous row-major view");
}

}  // namespace shrink
