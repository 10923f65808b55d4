// Tests for shrink/cpu/eigen.hpp: Eigen objects as views and views as Eigen maps.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include "shrink/cpu/eigen.hpp"
#include "shrink/quant/quantize.hpp"

using namespace shrink;

TEST_CASE("column-major and row-major matrices keep their logical [rows, cols] indexing", "[cpu][eigen]") {
  Eigen::MatrixXf col(3, 4);
  Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row(3, 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) col(i, j) = row(i, j) = static_cast<float>(10 * i + j);
  const TensorView<float> c = as_view(col), r = as_view(row);
  CHECK(c.shape() == Shape{3, 4});
  CHECK(r.shape() == Shape{3, 4});
  CHECK(c.strides() == Strides{1, 3});
  CHECK(r.strides() == Strides{4, 1});
  CHECK(r.is_contiguous());
  CHECK_FALSE(c.is_contiguous());
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      CHECK(c(i, j) == col(i, j));
      CHECK(r(i, j) == row(i, j));
    }
  c(2, 3) = -1.0f;
  CHECK(col(2, 3) == -1.0f);
}

TEST_CASE("blocks, maps and vectors convert with their strides", "[cpu][eigen]") {
  Eigen::MatrixXf m = Eigen::MatrixXf::Random(6, 5);
  const auto block = m.block(1, 2, 3, 2);
  const TensorView<const float> b = as_view(block);
  CHECK(b.shape() == Shape{3, 2});
  CHECK(b(2, 1) == m(3, 3));
  Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(5, 0.0f, 4.0f);
  CHECK(as_view(v).shape() == Shape{5});
  const auto row = m.row(2);  // a strided vector
  const TensorView<const float> rv = as_view(row);
  CHECK(rv.shape() == Shape{5});
  CHECK(rv.stride(0) == 6);
  CHECK(rv(4) == m(2, 4));
  float raw[6] = {1, 2, 3, 4, 5, 6};
  Eigen::Map<Eigen::Matrix<float, 2, 3, Eigen::RowMajor>> map(raw);
  CHECK(as_view(map).strides() == Strides{3, 1});
}

TEST_CASE("views come back as Eigen maps, and quantization sees an Eigen matrix as its logical shape", "[cpu][eigen]") {
  Eigen::MatrixXf w = Eigen::MatrixXf::Random(8, 16);  // column-major [out, in]
  auto map = as_eigen(as_view(w));
  CHECK(map.rows() == 8);
  CHECK(map.cols() == 16);
  CHECK(map(5, 7) == w(5, 7));
  const auto q = quant::quantize(as_view(static_cast<const Eigen::MatrixXf&>(w)),
                                 quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  REQUIRE(q.qparams.scale.size() == 8);  // one scale per output row
  CHECK(q.qparams.scale[3] == Approx(w.row(3).cwiseAbs().maxCoeff() / 127.5f));
  float data[4] = {};
  CHECK_THROWS_WITH(as_eigen(TensorView<float>(data, Shape{4})), Catch::Contains("2-D"));
}
