// Every CPU matrix product on the executor: the same bytes on every executor and thread count (serial, pools of 1,
// 2, 3 and 8) at every SIMD level, the work cut in several tasks; and outputs of any strides (a column-major Eigen
// matrix, a transposed view) equal to the row-major result.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cstdint>
#include <random>
#include <vector>

#include "shrink/cpu/eigen.hpp"
#include "shrink/linear/csr.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/executors.hpp"
#include "support/random.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;
using shrink::test::require_same_bytes_on_every_executor;

namespace {

std::vector<float> values(std::int64_t count, unsigned seed) {
  return shrink::test::random_values(static_cast<std::size_t>(count), seed);
}

// w with about `keep` of its values kept (the rest zero), for CSR.
std::vector<float> sparse_values(std::int64_t count, unsigned seed, double keep) {
  std::vector<float> v = values(count, seed);
  std::mt19937 rng(seed + 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (float& x : v)
    if (u(rng) > keep) x = 0.0f;
  return v;
}

Epilogue bias_relu(const std::vector<float>& bias) {
  return Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{static_cast<std::int64_t>(bias.size())}),
                             Activation::relu);
}

// Row counts that take each kernel's paths: the streaming one (few rows), and the blocked one with rows cut.
const std::int64_t kRowCounts[] = {5, 400};

}  // namespace

TEST_CASE("float and weight-only products give the same bytes on every executor", "[cpu][linear][threads]") {
  shrink::test::SimdLevelGuard guard;
  const std::int64_t n = 600, k = 160;  // N not a multiple of a panel, nor of a block of 512
  const auto w = values(n * k, 1);
  const auto bias = values(n, 2);
  const auto wq8 =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  const auto wq4 =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::symmetric, 1, 32));
  const auto packed_f32 = cpu::pack_weight(TensorView<const float>(w.data(), Shape{n, k}));
  std::vector<half> wh(w.begin(), w.end());
  const auto packed_half = cpu::pack_weight(TensorView<const half>(wh.data(), Shape{n, k}));
  const auto packed_int8 = cpu::pack_weight(wq8);
  const auto packed_int4 = cpu::pack_weight_int4(wq4);
  for (cpu::SimdLevel level : shrink::test::supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t m : kRowCounts) {
      INFO("level " << static_cast<int>(level) << ", M = " << m);
      const auto x = values(m * k, 3);
      const TensorView<const float> xv(x.data(), Shape{m, k});
      auto run = [&](const auto& packed) {
        return [&] {
          std::vector<float> out(static_cast<std::size_t>(m * n));
          cpu::linear_weight_only(xv, packed, TensorView<float>(out.data(), Shape{m, n}), bias_relu(bias));
          return out;
        };
      };
      require_same_bytes_on_every_executor(run(packed_f32));
      require_same_bytes_on_every_executor(run(packed_half));
      require_same_bytes_on_every_executor(run(packed_int8));
      require_same_bytes_on_every_executor(run(packed_int4));
    }
  }
}

TEST_CASE("INT8 products give the same bytes on every executor", "[cpu][linear][threads]") {
  shrink::test::SimdLevelGuard guard;
  const std::int64_t n = 300, k = 300;
  const auto w = values(n * k, 4);
  const auto bias = values(n, 5);
  const auto wq =
      quant::quantize(TensorView<const float>(w.data(), Shape{n, k}),
                      quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  const auto packed = cpu::pack_int8_weight(wq);
  for (cpu::SimdLevel level : shrink::test::supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t m : kRowCounts) {
      INFO("level " << static_cast<int>(level) << ", M = " << m);
      const auto x = values(m * k, 6);
      const auto xq = cpu::quantize_rows_absmax(TensorView<const float>(x.data(), Shape{m, k}));
      require_same_bytes_on_every_executor([&] {
        std::vector<float> out(static_cast<std::size_t>(m * n));
        cpu::linear_int8(xq, packed, TensorView<float>(out.data(), Shape{m, n}), bias_relu(bias));
        return out;
      });
      require_same_bytes_on_every_executor([&] {
        std::vector<std::int32_t> acc(static_cast<std::size_t>(m * n));
        cpu::gemm_s8s8s32(xq.int8_view(), wq.int8_view(), TensorView<std::int32_t>(acc.data(), Shape{m, n}));
        return acc;
      });
    }
  }
}

TEST_CASE("sparse products (N:M, CSR) give the same bytes on every executor", "[cpu][linear][threads]") {
  shrink::test::SimdLevelGuard guard;
  const std::int64_t n = 600, k = 256;
  const auto w = values(n * k, 7);
  const auto bias = values(n, 8);
  const auto nm = sparse::compress_nm(TensorView<const float>(w.data(), Shape{n, k}), prune::NmPattern{2, 4});
  std::vector<half> wh(w.begin(), w.end());
  const auto nm_half = sparse::compress_nm(TensorView<const half>(wh.data(), Shape{n, k}), prune::NmPattern{2, 4});
  std::vector<std::int8_t> w8(static_cast<std::size_t>(n * k));
  for (std::size_t i = 0; i < w8.size(); ++i) w8[i] = static_cast<std::int8_t>(static_cast<int>(w[i] * 40.0f));
  const TensorView<const std::int8_t> w8v(w8.data(), Shape{n, k});
  const auto nm_int8 = sparse::compress_nm(w8v, prune::nm_mask(w8v, prune::NmPattern{2, 4}), prune::NmPattern{2, 4});
  const auto sparse_w = sparse_values(n * k, 9, 0.2);
  const auto csr = sparse::to_csr(TensorView<const float>(sparse_w.data(), Shape{n, k}));
  for (cpu::SimdLevel level : shrink::test::supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t m : kRowCounts) {
      INFO("level " << static_cast<int>(level) << ", M = " << m);
      const auto x = values(m * k, 10);
      const TensorView<const float> xv(x.data(), Shape{m, k});
      require_same_bytes_on_every_executor([&] {
        std::vector<float> out(static_cast<std::size_t>(m * n));
        cpu::linear_nm(xv, nm, TensorView<float>(out.data(), Shape{m, n}), bias_relu(bias));
        return out;
      });
      require_same_bytes_on_every_executor([&] {
        std::vector<float> out(static_cast<std::size_t>(m * n));
        cpu::linear_csr(xv, csr, TensorView<float>(out.data(), Shape{m, n}), bias_relu(bias));
        return out;
      });
      std::vector<half> xh(x.begin(), x.end());
      require_same_bytes_on_every_executor([&] {
        std::vector<half> out(static_cast<std::size_t>(m * n));
        cpu::linear_nm(TensorView<const half>(xh.data(), Shape{m, k}), nm_half,
                       TensorView<half>(out.data(), Shape{m, n}), bias_relu(bias));
        return out;
      });
      std::vector<std::int8_t> x8(static_cast<std::size_t>(m * k));
      for (std::size_t i = 0; i < x8.size(); ++i) x8[i] = static_cast<std::int8_t>(static_cast<int>(x[i] * 40.0f));
      const float one = 0.01f;
      require_same_bytes_on_every_executor([&] {
        std::vector<float> out(static_cast<std::size_t>(m * n));
        Epilogue e = bias_relu(bias);
        e.x_scales = TensorView<const float>(&one, Shape{1});
        e.w_scales = TensorView<const float>(&one, Shape{1});
        cpu::linear_nm_int8(TensorView<const std::int8_t>(x8.data(), Shape{m, k}), nm_int8,
                            TensorView<float>(out.data(), Shape{m, n}), e);
        return out;
      });
    }
  }
}

TEST_CASE("products write outputs of any strides: column-major and transposed views equal the row-major result",
          "[cpu][linear][threads]") {
  const std::int64_t m = 70, n = 90, k = 64;
  const auto x = values(m * k, 11);
  const auto w = values(n * k, 12);
  const auto bias = values(n, 13);
  const TensorView<const float> xv(x.data(), Shape{m, k});
  const TensorView<const float> wv(w.data(), Shape{n, k});
  const auto wq8 =
      quant::quantize(wv, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  const auto xq = cpu::quantize_rows_absmax(xv);
  const auto nm = sparse::compress_nm(wv, prune::NmPattern{2, 4});
  const auto csr = sparse::to_csr(wv);
  // Each product into a row-major output and into a column-major Eigen::MatrixXf (strides [1, M]).
  auto check = [&](const char* name, auto product) {
    INFO(name);
    std::vector<float> rows(static_cast<std::size_t>(m * n));
    product(TensorView<float>(rows.data(), Shape{m, n}));
    Eigen::MatrixXf column_major(m, n);
    product(as_view(column_major));
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) REQUIRE(column_major(i, j) == rows[static_cast<std::size_t>(i * n + j)]);
  };
  check("linear_f32", [&](TensorView<float> out) { cpu::linear_f32(xv, wv, out, bias_relu(bias)); });
  check("linear_f32_eigen", [&](TensorView<float> out) { cpu::linear_f32_eigen(xv, wv, out, bias_relu(bias)); });
  check("linear_weight_only", [&](TensorView<float> out) { cpu::linear_weight_only(xv, wq8, out, bias_relu(bias)); });
  check("linear_int8", [&](TensorView<float> out) { cpu::linear_int8(xq, wq8, out, bias_relu(bias)); });
  check("linear_int8_dynamic",
        [&](TensorView<float> out) { cpu::linear_int8_dynamic(xv, cpu::pack_int8_weight(wq8), out, bias_relu(bias)); });
  check("linear_nm", [&](TensorView<float> out) { cpu::linear_nm(xv, nm, out, bias_relu(bias)); });
  check("linear_csr", [&](TensorView<float> out) { cpu::linear_csr(xv, csr, out, bias_relu(bias)); });

  // An int32 product into a transposed view of an [N, M] buffer.
  std::vector<std::int32_t> rows(static_cast<std::size_t>(m * n)), transposed(static_cast<std::size_t>(m * n));
  cpu::gemm_s8s8s32(xq.int8_view(), wq8.int8_view(), TensorView<std::int32_t>(rows.data(), Shape{m, n}));
  cpu::gemm_s8s8s32(xq.int8_view(), wq8.int8_view(),
                    TensorView<std::int32_t>(transposed.data(), Shape{m, n}, Strides{1, m}));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      REQUIRE(transposed[static_cast<std::size_t>(j * m + i)] == rows[static_cast<std::size_t>(i * n + j)]);
}

TEST_CASE("an output whose elements share addresses is refused, naming out.strides", "[cpu][linear][threads]") {
  const std::int64_t m = 4, n = 8, k = 16;
  const auto x = values(m * k, 14);
  const auto w = values(n * k, 15);
  std::vector<float> out(64, 0.0f);
  const auto try_strides = [&](Strides strides) {
    return cpu::can_implement_linear_f32(TensorView<const float>(x.data(), Shape{m, k}),
                                         cpu::pack_weight(TensorView<const float>(w.data(), Shape{n, k})),
                                         TensorView<float>(out.data(), Shape{m, n}, strides));
  };
  REQUIRE(try_strides(Strides{8, 1}).ok);
  REQUIRE(try_strides(Strides{1, 4}).ok);  // column-major
  for (Strides bad : {Strides{0, 1}, Strides{4, 1}, Strides{1, 3}, Strides{2, 1}}) {
    const Support s = try_strides(bad);
    REQUIRE_FALSE(s.ok);
    REQUIRE(s.argument == "out.strides");
  }
}
