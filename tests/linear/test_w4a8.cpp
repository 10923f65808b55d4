// The W4A8 layer (linear/w4a8.hpp): activations quantized per row and group as an independent float loop of PyTorch's
// symmetric formula does it, the product equal to the double product of the dequantized activations and weight at
// every SIMD level (the levels bit for bit alike), the same bytes on every executor, the dot layout holding the
// weight's values, and bad input refused with out untouched.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "linear/linear_reference.hpp"
#include "shrink/linear/w4a8.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/executors.hpp"

using namespace shrink;
using namespace shrink::cpu;
using shrink::test::at_each_level;
using shrink::test::kPoison;

namespace {

// x̂ = xq · sx per row and group, computed apart from the library: s = max(|x|) / 127.5 (at least FLT_EPSILON),
// xq = clamp(round-half-even(x · (1 / s)), −128, 127).
std::vector<float> dequantized_activations(const std::vector<float>& x, std::int64_t m_total, std::int64_t k_total,
                                           std::int64_t group) {
  std::vector<float> out(x.size());
  for (std::int64_t m = 0; m < m_total; ++m)
    for (std::int64_t g0 = 0; g0 < k_total; g0 += group) {
      float amax = 0.0f;
      for (std::int64_t k = g0; k < g0 + group; ++k)
        amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(m * k_total + k)]));
      const float s = std::max(amax / 127.5f, FLT_EPSILON), inv = 1.0f / s;
      for (std::int64_t k = g0; k < g0 + group; ++k) {
        const std::size_t at = static_cast<std::size_t>(m * k_total + k);
        const float q = std::min(127.0f, std::max(-128.0f, std::nearbyint(x[at] * inv)));
        out[at] = q * s;
      }
    }
  return out;
}

struct W4a8Case {
  std::int64_t m, n, k;
  quant::QuantDtype dtype;
  quant::Symmetry symmetry;
  std::int64_t group;  // 0: per output channel
};

quant::QuantizedTensor quantize_weight(const std::vector<float>& w, const W4a8Case& c) {
  const auto scheme = c.group == 0 ? quant::QuantScheme::per_channel(c.dtype, c.symmetry, 0)
                                   : quant::QuantScheme::per_group(c.dtype, c.symmetry, 1, c.group);
  return quant::quantize(TensorView<const float>(w.data(), Shape{c.n, c.k}), scheme);
}

std::vector<W4a8Case> cases() {
  using quant::QuantDtype;
  using quant::Symmetry;
  return {{1, 1, 64, QuantDtype::int4, Symmetry::symmetric, 32},
          {1, 33, 128, QuantDtype::int4, Symmetry::symmetric, 64},
          {2, 31, 320, QuantDtype::int4, Symmetry::affine, 32},
          {3, 9, 576, QuantDtype::uint4, Symmetry::affine, 64},
          {4, 16, 64, QuantDtype::uint4, Symmetry::symmetric, 64},
          {5, 70, 512, QuantDtype::int4, Symmetry::symmetric, 128},
          {13, 17, 99, QuantDtype::int4, Symmetry::affine, 0},
          {6, 40, 7, QuantDtype::int4, Symmetry::symmetric, 0},
          {9, 24, 1536, QuantDtype::int4, Symmetry::symmetric, 64},
          {1, 8, 256, QuantDtype::int4, Symmetry::affine, 256}};
}

}  // namespace

TEST_CASE("linear_w4a8 equals the double product of the per-group quantized activations and the weight",
          "[cpu][linear][w4a8]") {
  std::mt19937 rng(41);
  for (const W4a8Case& c : cases()) {
    INFO("M " << c.m << " N " << c.n << " K " << c.k << " group " << c.group << " " << quant::to_string(c.dtype) << " "
              << quant::to_string(c.symmetry));
    auto x = shrink::test::normal_values(static_cast<std::size_t>(c.m * c.k), rng);
    x[0] = 9.0f;  // an outlier: its group's scale, not the others'
    const auto w = shrink::test::normal_values(static_cast<std::size_t>(c.n * c.k), rng, 0.05f);
    const auto bias = shrink::test::normal_values(static_cast<std::size_t>(c.n), rng);
    const quant::QuantizedTensor q = quantize_weight(w, c);
    const PackedInt4DotWeight packed = pack_weight_w4a8(q);
    CHECK(packed.storage_bytes() == pack_weight_int4(q).storage_bytes());
    const std::int64_t group = c.group == 0 ? c.k : c.group;
    const auto ref = shrink::test::reference_product(dequantized_activations(x, c.m, c.k, group), quant::dequantize(q),
                                                     c.m, c.n, c.k);
    const TensorView<const float> xv(x.data(), Shape{c.m, c.k});
    for (Activation act : {Activation::none, Activation::silu}) {
      const Epilogue e = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{c.n}), act);
      std::vector<float> first;
      at_each_level([&](SimdLevel) {
        std::vector<float> out(static_cast<std::size_t>(c.m * c.n), kPoison);
        linear_w4a8(xv, packed, TensorView<float>(out.data(), Shape{c.m, c.n}), e);
        // Exact integer sums per group, one float step a group: the float bound of a K-term sum holds with room.
        shrink::test::check_against_reference(out, c.n, ref, c.m, c.n, c.k, {}, bias, act);
        if (first.empty()) first = out;
        CHECK(out == first);  // scalar and AVX2 alike, bit for bit
      });
    }
  }
}

TEST_CASE("the dot layout holds u = q + 8 and c = 8 + z of every weight value", "[cpu][linear][w4a8]") {
  std::mt19937 rng(42);
  const W4a8Case c{1, 19, 80, quant::QuantDtype::int4, quant::Symmetry::affine, 16};
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(c.n * c.k), rng);
  const quant::QuantizedTensor q = quantize_weight(w, c);
  const std::vector<float> dequantized = quant::dequantize(q);
  const PackedInt4DotWeight d = pack_weight_w4a8(q);
  REQUIRE(d.consistent());
  int mismatches = 0;
  for (std::int64_t n = 0; n < d.row_blocks() * kDotBlockRows; ++n)
    for (std::int64_t k = 0; k < d.k_blocks() * kDotBlockK; ++k) {
      const std::uint8_t byte =
          d.blocks[static_cast<std::size_t>(((n / 8) * d.k_blocks() + k / 8) * kDotBlockBytes + 4 * (n % 8) + k % 4)];
      const int u = k % 8 < 4 ? byte & 0x0F : byte >> 4;
      const std::size_t at =
          static_cast<std::size_t>(((n / 8) * d.groups() + std::min(k, c.k - 1) / c.group) * 8 + n % 8);
      if (n >= c.n || k >= c.k) {
        mismatches += u != 0;
        continue;
      }
      const float value = static_cast<float>(u - d.offsets[at]) * d.scales[at];
      mismatches += value != dequantized[static_cast<std::size_t>(n * c.k + k)];
    }
  CHECK(mismatches == 0);
}

TEST_CASE("linear_w4a8 gives the same bytes on every executor", "[cpu][linear][w4a8][threads]") {
  std::mt19937 rng(43);
  const W4a8Case c{37, 200, 576, quant::QuantDtype::int4, quant::Symmetry::symmetric, 64};
  const auto x = shrink::test::normal_values(static_cast<std::size_t>(c.m * c.k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(c.n * c.k), rng, 0.05f);
  const PackedInt4DotWeight packed = pack_weight_w4a8(quantize_weight(w, c));
  shrink::test::require_same_bytes_on_every_executor([&] {
    std::vector<float> out(static_cast<std::size_t>(c.m * c.n), kPoison);
    linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k}), packed,
                TensorView<float>(out.data(), Shape{c.m, c.n}));
    return out;
  });
}

TEST_CASE("linear_w4a8 refuses bad input and leaves out untouched", "[cpu][linear][w4a8][errors]") {
  std::mt19937 rng(44);
  const W4a8Case c{3, 16, 64, quant::QuantDtype::int4, quant::Symmetry::symmetric, 32};
  auto x = shrink::test::normal_values(static_cast<std::size_t>(c.m * c.k), rng);
  const auto w = shrink::test::normal_values(static_cast<std::size_t>(c.n * c.k), rng, 0.05f);
  const PackedInt4DotWeight packed = pack_weight_w4a8(quantize_weight(w, c));
  std::vector<float> out(static_cast<std::size_t>(c.m * c.n), kPoison);
  const TensorView<float> ov(out.data(), Shape{c.m, c.n});
  using shrink::test::require_error_mentioning;

  x[static_cast<std::size_t>(1 * c.k + 40)] = std::numeric_limits<float>::quiet_NaN();
  require_error_mentioning(
      [&] {
        linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k}), packed, ov);
      },
      "x[1, 40] = nan");
  x[static_cast<std::size_t>(1 * c.k + 40)] = std::numeric_limits<float>::infinity();
  require_error_mentioning(
      [&] {
        linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k}), packed, ov);
      },
      "finite activations");
  x[static_cast<std::size_t>(1 * c.k + 40)] = 0.5f;
  require_error_mentioning(
      [&] {
        linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k - 8}), packed, ov);
      },
      "x.shape");
  require_error_mentioning(
      [&] {
        linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k}), packed,
                    TensorView<float>(out.data(), Shape{c.m, c.n - 1}));
      },
      "out.shape");
  PackedInt4DotWeight broken = packed;
  broken.scales.pop_back();
  require_error_mentioning(
      [&] {
        linear_w4a8(TensorView<const float>(x.data(), Shape{c.m, c.k}), broken, ov);
      },
      "inconsistent PackedInt4DotWeight");
  CHECK(shrink::test::all_poison(out));

  // Weights without a W4A8 form: groups that blocks of 8 inputs do not tile, HQQ's fractional zero points.
  const quant::QuantizedTensor odd_groups =
      quant::quantize(TensorView<const float>(w.data(), Shape{c.n, 60}),
                      quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::symmetric, 1, 12));
  require_error_mentioning([&] { pack_weight_w4a8(odd_groups); }, "w.group_size");
  PackedInt4Weight fractional = pack_weight_int4(quantize_weight(w, c));
  fractional.float_zero_points.assign(fractional.scales.size(), 0.25f);
  require_error_mentioning([&] { pack_weight_w4a8(fractional); }, "fractional zero points");
}
