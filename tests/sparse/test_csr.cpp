// Tests for shrink/sparse/csr.hpp: round trips for each element type, masks, strided views and hostile structures.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/prune/apply.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/sparse/csr.hpp"
#include "support/element_types.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::sparse;
using shrink::test::convert;
using shrink::test::same_bits;

namespace {

// Random values with about `zero_fraction` of them exactly zero.
std::vector<float> sparse_values(std::size_t n, unsigned seed, double zero_fraction) {
  std::vector<float> v = test::random_values(n, seed);
  std::mt19937 rng(seed + 1000);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (float& x : v)
    if (uniform(rng) < zero_fraction) x = 0.0f;
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("to_csr then to_dense gives the tensor back", "[sparse][csr]", float, half, bfloat16, std::int8_t) {
  for (double zeros : {0.0, 0.5, 0.9, 0.99, 1.0}) {
    const std::int64_t rows = 33, cols = 70;
    const std::vector<TestType> dense =
        convert<TestType>(sparse_values(static_cast<std::size_t>(rows * cols), 4u, zeros));
    const Csr<TestType> csr = to_csr(TensorView<const TestType>(dense.data(), Shape{rows, cols}));
    INFO("zero fraction " << zeros);
    CHECK(csr.rows == rows);
    CHECK(csr.cols == cols);
    CHECK(csr.row_offsets.size() == static_cast<std::size_t>(rows + 1));
    std::int64_t nonzero = 0;
    for (const TestType& x : dense) nonzero += static_cast<float>(x) != 0.0f;
    CHECK(csr.nnz() == nonzero);
    CHECK_NOTHROW(validate_csr(csr));
    CHECK(same_bits(to_dense(csr), dense));
  }
}

TEST_CASE("to_csr reads strided views, drops -0.0, and the mask form keeps explicit zeros", "[sparse][csr]") {
  // A 3 x 4 view of every other column of a 3 x 8 buffer.
  std::vector<float> buffer = {1, 9, 0, 9, 2, 9, -0.0f, 9, 0, 9, 0, 9, 0, 9, 0, 9, 0, 9, 3, 9, 0, 9, 4, 9};
  const TensorView<const float> view(buffer.data(), Shape{3, 4}, Strides{8, 2});
  const Csr<float> csr = to_csr(view);
  CHECK(csr.row_offsets == std::vector<std::int32_t>{0, 2, 2, 4});
  CHECK(csr.column_indices == std::vector<std::int32_t>{0, 2, 1, 3});
  CHECK(csr.values == std::vector<float>{1, 2, 3, 4});

  prune::Mask mask(Shape{3, 4}, false);
  mask.set(3, true);  // the -0.0
  mask.set(4, true);  // an explicit zero
  mask.set(11, true);
  const Csr<float> masked = to_csr(view, mask);
  CHECK(masked.row_offsets == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(masked.column_indices == std::vector<std::int32_t>{3, 0, 3});
  CHECK(std::signbit(masked.values[0]));
  CHECK(masked.values[2] == 4.0f);

  std::vector<float> out(12, 5.0f);
  to_dense_into(masked, TensorView<float>(out.data(), Shape{3, 4}));
  CHECK(out == std::vector<float>{0, 0, 0, -0.0f, 0, 0, 0, 0, 0, 0, 0, 4});
  CHECK(std::signbit(out[3]));
}

TEST_CASE("to_csr under an N:M mask keeps exactly the kept elements", "[sparse][csr]") {
  const std::int64_t rows = 16, cols = 64;
  std::vector<float> w = test::random_values(static_cast<std::size_t>(rows * cols), 21u);
  const prune::Mask mask = prune::nm_mask(TensorView<const float>(w.data(), Shape{rows, cols}), prune::NmPattern{2, 4});
  const Csr<float> csr = to_csr(TensorView<const float>(w.data(), Shape{rows, cols}), mask);
  CHECK(csr.nnz() == rows * cols / 2);
  prune::apply_mask(TensorView<float>(w.data(), Shape{rows, cols}), mask);
  CHECK(to_dense(csr) == w);
}

TEST_CASE("to_csr rejects NaN/inf, wrong ranks and mask shapes, and int32 overflow", "[sparse][csr][errors]") {
  std::vector<float> w = {1, 0, 2, 0, 0, 3};
  const TensorView<const float> view(w.data(), Shape{2, 3});
  CHECK_THROWS_WITH(to_csr(TensorView<const float>(w.data(), Shape{6})), Catch::Contains("dense.shape = [6]"));
  CHECK_THROWS_WITH(to_csr(view, prune::Mask(Shape{3, 2})), Catch::Contains("mask.shape = [3, 2]"));
  w[4] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(to_csr(view), Catch::Contains("dense[4] = nan"));
  CHECK_THROWS_WITH(to_csr(view, prune::Mask(Shape{2, 3})), Catch::Contains("dense[4]"));
  std::vector<half> h = {half(1.0f), half::infinity()};
  CHECK_THROWS_WITH(to_csr(TensorView<const half>(h.data(), Shape{1, 2})), Catch::Contains("dense[1] = inf"));

  // 2^31 columns through a stride-0 view of one float: rejected before a single element is read.
  const float one = 1.0f;
  const TensorView<const float> wide(&one, Shape{1, std::int64_t{1} << 31}, Strides{0, 0});
  CHECK_THROWS_WITH(to_csr(wide), Catch::Contains("cols = 2147483648") && Catch::Contains("INT32_MAX"));
  // The count check itself, with the counts a 2^16 x 2^15 all-nonzero tensor would reach.
  CHECK_THROWS_WITH(sparse::require_csr_indexable(std::int64_t{1} << 15, std::int64_t{1} << 31, "f"),
                    Catch::Contains("nnz = 2147483648"));
  CHECK_NOTHROW(
      sparse::require_csr_indexable((std::int64_t{1} << 31) - 1, std::numeric_limits<std::int32_t>::max(), "f"));
}

TEST_CASE("to_dense rejects hostile Csr structures and writes nothing", "[sparse][csr][errors]") {
  Csr<float> good;
  good.rows = 2;
  good.cols = 3;
  good.row_offsets = {0, 2, 3};
  good.column_indices = {0, 2, 1};
  good.values = {1, 2, 3};
  CHECK(to_dense(good) == std::vector<float>{1, 0, 2, 0, 3, 0});

  auto check_rejected = [&](const Csr<float>& bad, const char* named) {
    INFO(named);
    std::vector<float> out(6, 7.0f);
    CHECK_THROWS_WITH(to_dense_into(bad, TensorView<float>(out.data(), Shape{2, 3})), Catch::Contains(named));
    CHECK(out == std::vector<float>(6, 7.0f));
    CHECK_THROWS_WITH(to_dense(bad), Catch::Contains(named));
  };
  Csr<float> bad = good;
  bad.row_offsets = {0, 2};
  check_rejected(bad, "csr.row_offsets.size() = 2");
  bad = good;
  bad.row_offsets = {1, 2, 3};
  check_rejected(bad, "csr.row_offsets[0] = 1");
  bad = good;
  bad.row_offsets = {0, 2, 4};
  check_rejected(bad, "csr.row_offsets[rows] = 4");
  bad = good;
  bad.row_offsets = {0, 4, 3};
  check_rejected(bad, "csr.row_offsets[1] = 4");
  bad = good;
  bad.column_indices = {0, 3, 1};
  check_rejected(bad, "csr.column_indices[1] = 3");
  bad = good;
  bad.column_indices = {2, 0, 1};
  check_rejected(bad, "csr.column_indices[1] = 0");
  bad = good;
  bad.column_indices = {0, 0, 1};
  check_rejected(bad, "csr.column_indices[1] = 0");
  bad = good;
  bad.column_indices = {0, 2, -1};
  check_rejected(bad, "csr.column_indices[2] = -1");
  bad = good;
  bad.column_indices = {0, 2};
  check_rejected(bad, "csr.column_indices.size() = 2");
  bad = good;
  bad.rows = -1;
  check_rejected(bad, "csr.rows = -1");
  bad = good;
  bad.cols = std::int64_t{1} << 32;
  check_rejected(bad, "cols = 4294967296");

  std::vector<float> out(6, 7.0f);
  CHECK_THROWS_WITH(to_dense_into(good, TensorView<float>(out.data(), Shape{3, 2})),
                    Catch::Contains("out.shape = [3, 2]"));
  CHECK(out == std::vector<float>(6, 7.0f));
}

TEST_CASE("to_csr: the AVX2 path equals the scalar path, with and without a mask", "[sparse][csr][simd]") {
  const cpu::SimdLevel saved = cpu::simd_level();
  for (const Shape& shape : {Shape{3, 21}, Shape{9, 64}, Shape{7, 100}}) {
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> pick(0, 3);
    std::vector<float> w(static_cast<std::size_t>(shape.product()));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = pick(rng) == 0 ? 0.0f : pick(rng) == 1 ? -0.0f : float(i) - 50.0f;
    prune::Mask mask(shape, false);
    for (std::int64_t i = 0; i < mask.size(); ++i) mask.set(i, pick(rng) != 0);
    const TensorView<const float> view(w.data(), shape);
    cpu::simd_level() = cpu::SimdLevel::sse2;
    const Csr<float> scalar = to_csr(view), scalar_masked = to_csr(view, mask);
    cpu::simd_level() = saved;
    const Csr<float> fast = to_csr(view), fast_masked = to_csr(view, mask);
    for (const auto& pair : {std::make_pair(&fast, &scalar), std::make_pair(&fast_masked, &scalar_masked)}) {
      CHECK(pair.first->row_offsets == pair.second->row_offsets);
      CHECK(pair.first->column_indices == pair.second->column_indices);
      REQUIRE(pair.first->values.size() == pair.second->values.size());
      CHECK(std::memcmp(pair.first->values.data(), pair.second->values.data(), pair.first->values.size() * 4) == 0);
    }
  }
  cpu::simd_level() = saved;
}
