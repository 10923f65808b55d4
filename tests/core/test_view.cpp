// Tests for shrink/core/view.hpp and shrink/core/axis.hpp.
#include <catch2/catch.hpp>

#include <vector>

#include "shrink/core/axis.hpp"
#include "shrink/core/view.hpp"

using namespace shrink;

TEST_CASE("contiguous view reports shape, strides and numel", "[core][view]") {
  std::vector<float> data(24);
  TensorView<float> v(data.data(), Shape{2, 3, 4});
  CHECK(v.rank() == 3);
  CHECK(v.numel() == 24);
  CHECK(v.stride(0) == 12);
  CHECK(v.stride(1) == 4);
  CHECK(v.stride(2) == 1);
  CHECK(v.is_contiguous());
  v(1, 2, 3) = 5.0f;
  CHECK(data[23] == 5.0f);
  TensorView<const float> c = v;
  CHECK(c(1, 2, 3) == 5.0f);
}

TEST_CASE("strided view and contiguous copy", "[core][view]") {
  std::vector<int> data{0, 1, 2, 3, 4, 5};  // 2x3 row-major; its transpose is 3x2 with strides {1, 3}
  TensorView<const int> t(data.data(), Shape{3, 2}, Strides{1, 3});
  CHECK_FALSE(t.is_contiguous());
  CHECK(contiguous_copy(t) == std::vector<int>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("view construction rejects bad shapes and strides", "[core][view]") {
  float x = 0;
  CHECK_THROWS_AS(TensorView<float>(&x, Shape{-1}), Error);
  CHECK_THROWS_AS(TensorView<float>(&x, Shape{1}, Strides{1, 1}), Error);
  CHECK_THROWS_AS(TensorView<float>(&x, Shape{1}, Strides{-1}), Error);
  CHECK_THROWS_AS(Shape({1, 1, 1, 1, 1, 1, 1, 1, 1}), Error);
}

TEST_CASE("host view checks name the argument", "[core][view]") {
  TensorView<const float> null_view(nullptr, Shape{4});
  CHECK_THROWS_WITH(require_host_view(null_view, "f", "x"), Catch::Contains("x") && Catch::Contains("null"));
  alignas(8) unsigned char bytes[16] = {};
  TensorView<const float> misaligned(reinterpret_cast<const float*>(bytes + 1), Shape{2});
  CHECK_THROWS_WITH(require_host_view(misaligned, "f", "x"), Catch::Contains("misaligned"));
  TensorView<const float> on_gpu(reinterpret_cast<const float*>(bytes), Shape{2}, Device::cuda(0));
  CHECK_THROWS_AS(require_host_view(on_gpu, "f", "x"), Error);
}

TEST_CASE("axis normalisation and split", "[core][axis]") {
  CHECK(normalize_axis(-1, 4, "f") == 3);
  CHECK(normalize_axis(0, 1, "f") == 0);
  CHECK_THROWS_WITH(normalize_axis(4, 4, "f"), Catch::Contains("axis = 4") && Catch::Contains("[-4, 4)"));
  CHECK_THROWS_AS(normalize_axis(0, 0, "f"), Error);
  const AxisSplit s = split_at_axis(Shape{2, 3, 4, 5}, 1);
  CHECK(s.outer == 2);
  CHECK(s.channels == 3);
  CHECK(s.inner == 20);
}
