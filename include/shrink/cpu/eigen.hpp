// Eigen interop: Eigen matrices, arrays, maps and refs as shrink views, and views as Eigen maps.
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"

namespace shrink {
namespace detail {

template <class Derived>
constexpr bool has_direct_access() {
  return (Eigen::internal::traits<Derived>::Flags & Eigen::DirectAccessBit) != 0;
}

// Compile-time vectors become 1-D views; everything else is [rows, cols] whatever its storage order.
template <class T, class Derived>
TensorView<T> eigen_view(T* data, const Eigen::DenseBase<Derived>& m) {
  static_assert(has_direct_access<Derived>(), "shrink::as_view needs an Eigen object with direct memory access "
                                              "(a Matrix, Array, Map, Ref or Block), not an expression");
  const auto& d = m.derived();
  if (Derived::IsVectorAtCompileTime)
    return TensorView<T>(data, Shape{static_cast<std::int64_t>(d.size())}, Strides{static_cast<std::int64_t>(d.innerStride())});
  const std::int64_t inner = d.innerStride(), outer = d.outerStride();
  const Strides strides = Derived::IsRowMajor ? Strides{outer, inner} : Strides{inner, outer};
  return TensorView<T>(data, Shape{static_cast<std::int64_t>(d.rows()), static_cast<std::int64_t>(d.cols())}, strides);
}

}  // namespace detail

// A view of an Eigen object's memory: [rows, cols] (row- or column-major strides) or [size] for vectors.
template <class Derived>
TensorView<typename Derived::Scalar> as_view(Eigen::DenseBase<Derived>& m) {
  return detail::eigen_view<typename Derived::Scalar>(m.derived().data(), m);
}
template <class Derived>
TensorView<const typename Derived::Scalar> as_view(const Eigen::DenseBase<Derived>& m) {
  return detail::eigen_view<const typename Derived::Scalar>(m.derived().data(), m);
}

template <class T>
using EigenMatrixMap = Eigen::Map<Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
                                  Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;
template <class T>
using EigenConstMatrixMap =
    Eigen::Map<const Eigen::Matrix<std::remove_const_t<T>, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>,
               Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

// A 2-D host view as an Eigen map (writable when T is not const), keeping its strides.
template <class T>
std::conditional_t<std::is_const<T>::value, EigenConstMatrixMap<T>, EigenMatrixMap<T>> as_eigen(const TensorView<T>& v) {
  const char* fn = "shrink::as_eigen";
  require_host_view(v, fn, "view");
  if (v.rank() != 2) fail(fn, "view.rank()", v.rank(), "a 2-D view");
  using Map = std::conditional_t<std::is_const<T>::value, EigenConstMatrixMap<T>, EigenMatrixMap<T>>;
  return Map(v.data(), v.size(0), v.size(1), Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>(v.stride(0), v.stride(1)));
}

}  // namespace shrink
