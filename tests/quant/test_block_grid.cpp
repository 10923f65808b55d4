// Tests for shrink/quant/block_grid.hpp and the methods onto its grids (gptq_quantize_blocks, hqq_quantize_blocks,
// awq_quantize_blocks): the parameters llama.cpp's rule gives, the element formulas, nearest codes, each method's
// relation to the grid's round-to-nearest, and bad input.
#include <catch2/catch.hpp>

#include <Eigen/Core>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/block_grid.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/hqq.hpp"
#include "support/executors.hpp"

using namespace shrink;
using namespace shrink::quant;

namespace {

const BlockFormat kGridFormats[] = {BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q5_0,
                                    BlockFormat::q5_1, BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k};

const BlockFormat kLegacyFormats[] = {BlockFormat::q8_0, BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q5_0,
                                      BlockFormat::q5_1};

bool holds_in_fp16(float v) { return half_bits_to_float(float_to_half_bits(v)) == v; }

// Rows of weights whose blocks span very different magnitudes (as real layers' do), with an outlier now and then.
std::vector<float> grid_test_weight(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const float block_scale = std::ldexp(0.05f, static_cast<int>((r * 7 + c / 32) % 5) - 2);
      float v = block_scale * normal(rng);
      if ((r * cols + c) % 97 == 3) v *= 8.0f;
      w[static_cast<std::size_t>(r * cols + c)] = v;
    }
  return w;
}

// Correlated calibration rows X [n, in] with a few salient channels, and their Hessian H = (2/n) XᵀX.
std::vector<float> grid_test_x(std::int64_t n, std::int64_t in, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t k = in / 4;
  std::vector<float> a(static_cast<std::size_t>(k * in)), x(static_cast<std::size_t>(n * in));
  for (float& v : a) v = normal(rng) / std::sqrt(static_cast<float>(k));
  for (std::int64_t t = 0; t < n; ++t) {
    std::vector<float> z(static_cast<std::size_t>(k));
    for (float& v : z) v = normal(rng);
    for (std::int64_t j = 0; j < in; ++j) {
      float s = 0.1f * normal(rng);
      for (std::int64_t l = 0; l < k; ++l)
        s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * in + j)];
      if (j % 37 == 5) s = 20.0f * s + 3.0f;
      x[static_cast<std::size_t>(t * in + j)] = s;
    }
  }
  return x;
}

Hessian grid_test_hessian(const std::vector<float>& x, std::int64_t in) {
  HessianObserver o;
  o.observe(TensorView<const float>(x.data(), Shape{static_cast<std::int64_t>(x.size()) / in, in}));
  return o.hessian();
}

// Σ over rows of (w − ŵ)ᵀ H (w − ŵ) / 2: the layer's output error through H, in double; ŵ divided by s when given.
double grid_output_error(const std::vector<float>& w, const std::vector<float>& w_hat, const Hessian& h,
                         std::int64_t in, const std::vector<float>& s = {}) {
  const std::int64_t rows = static_cast<std::int64_t>(w.size()) / in;
  Eigen::MatrixXd d(rows, in), hm(in, in);
  for (std::int64_t i = 0; i < in; ++i)
    for (std::int64_t j = 0; j < in; ++j) hm(i, j) = h.values[static_cast<std::size_t>(i * in + j)];
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < in; ++j) {
      const auto k = static_cast<std::size_t>(r * in + j);
      d(r, j) = static_cast<double>(w[k]) -
                static_cast<double>(w_hat[k]) / (s.empty() ? 1.0 : static_cast<double>(s[static_cast<std::size_t>(j)]));
    }
  return (d * hm).cwiseProduct(d).sum() / 2.0;
}

// Every code inside the format's range, m = 0 without a minimum; every d and m a value fp16 holds (legacy) or the
// super-block's fp16 d and dmin times block codes in range (K).
void check_on_grid(const BlockQuantized& t) {
  const BlockGrid grid = block_grid(t.format);
  REQUIRE(static_cast<std::int64_t>(t.codes.size()) == t.rows * t.cols);
  REQUIRE(static_cast<std::int64_t>(t.scales.size()) == t.rows * t.cols / grid.block);
  REQUIRE(static_cast<std::int64_t>(t.supers.size()) == (grid.super_block > 0 ? t.rows * t.cols / 256 : 0));
  for (std::int8_t q : t.codes) {
    CHECK(q >= grid.qmin);
    CHECK(q <= grid.qmax);
  }
  for (std::size_t k = 0; k < t.scales.size(); ++k) {
    const BlockScale& s = t.scales[k];
    if (!grid.has_minimum) CHECK(s.m == 0.0f);
    if (grid.super_block == 0) {
      CHECK(holds_in_fp16(s.d));
      CHECK(holds_in_fp16(s.m));
      continue;
    }
    const SuperBlockScale& u = t.supers[k / static_cast<std::size_t>(256 / grid.block)];
    CHECK(holds_in_fp16(u.d));
    CHECK(holds_in_fp16(u.dmin));
    CHECK(s.scale_code >= grid.scale_code_min);
    CHECK(s.scale_code <= grid.scale_code_max);
    CHECK(s.min_code >= 0);
    CHECK(s.min_code <= 63);
    const GridParams p = k_block_params(grid, u.d, u.dmin, s.scale_code, s.min_code);
    CHECK(s.d == p.d);
    CHECK(s.m == p.m);
  }
}

}  // namespace

TEST_CASE("block grids: llama.cpp's parameters from a range, the element formulas", "[quant][grid]") {
  SECTION("Q4_0: the value of largest magnitude lands on -8, d takes its sign") {
    const BlockGrid g = block_grid(BlockFormat::q4_0);
    CHECK((g.qmin == -8 && g.qmax == 7 && !g.has_minimum));
    GridParams p = grid_params_from_range(g, -1.0f, 0.5f);
    CHECK(p.d == 0.125f);
    CHECK(quantize_value(-1.0f, p) == -8);
    CHECK(quantize_value(0.5f, p) == 4);
    CHECK(dequantize_value(-8, p) == -1.0f);
    p = grid_params_from_range(g, -0.5f, 1.0f);
    CHECK(p.d == -0.125f);
    CHECK(quantize_value(1.0f, p) == -8);
    CHECK(dequantize_value(-8, p) == 1.0f);
    CHECK(quantize_value(-0.5f, p) == 4);
    CHECK(quantize_value(-2.0f, p) == 7);  // beyond the grid: clamped
  }
  SECTION("Q8_0: d = max|x| / 127 in fp16") {
    const GridParams p = grid_params_from_range(block_grid(BlockFormat::q8_0), -2.54f, 1.0f);
    CHECK(p.d == half_bits_to_float(float_to_half_bits(2.54f / 127.0f)));
    CHECK(quantize_value(-2.54f, p) == -127);
    CHECK(quantize_value(0.0f, p) == 0);
  }
  SECTION("Q4_1 and Q5_1: d = (hi - lo) / (levels - 1), m = lo, both in fp16; x' = d·q + m") {
    const GridParams p = grid_params_from_range(block_grid(BlockFormat::q4_1), -1.0f, 2.0f);
    CHECK(p.d == half_bits_to_float(float_to_half_bits(0.2f)));
    CHECK(p.m == -1.0f);
    CHECK(quantize_value(-1.0f, p) == 0);
    CHECK(quantize_value(2.0f, p) == 15);
    CHECK(quantize_value(5.0f, p) == 15);
    CHECK(dequantize_value(5, p) == static_cast<float>(5.0f * p.d) + p.m);
    const GridParams p5 = grid_params_from_range(block_grid(BlockFormat::q5_1), 0.25f, 0.25f + 31.0f / 64.0f);
    CHECK(p5.d == 1.0f / 64.0f);
    CHECK(quantize_value(0.5f, p5) == 16);
    CHECK(dequantize_value(16, p5) == 0.5f);
  }
  SECTION("an all-zero block: d = 0, every code 0, every value 0") {
    for (BlockFormat f : kLegacyFormats) {
      const GridParams p = grid_params_from_range(block_grid(f), 0.0f, 0.0f);
      CHECK(p.d == 0.0f);
      CHECK(quantize_value(0.0f, p) == 0);
      CHECK(dequantize_value(0, p) == 0.0f);
    }
  }
  SECTION("a block beyond fp16's range, or a bad range, is an Error") {
    CHECK_THROWS_WITH(grid_params_from_range(block_grid(BlockFormat::q4_0), -1e6f, 0.0f),
                      Catch::Contains("block scale d") && Catch::Contains("65504"));
    CHECK_THROWS_WITH(grid_params_from_range(block_grid(BlockFormat::q4_1), -1e5f, 0.0f),
                      Catch::Contains("block minimum m"));
    CHECK_THROWS_WITH(grid_params_from_range(block_grid(BlockFormat::q8_0), 1.0f, 0.0f), Catch::Contains("lo <= hi"));
    CHECK_THROWS_WITH(grid_params_from_range(block_grid(BlockFormat::q8_0), NAN, 0.0f), Catch::Contains("finite"));
    CHECK_THROWS_WITH(grid_params_from_range(block_grid(BlockFormat::q4_k), 0.0f, 1.0f),
                      Catch::Contains("Q4_K") && Catch::Contains("k_super_params"));
  }
}

TEST_CASE("grid_params_search: never worse in its weighted error than the range rule, often better", "[quant][grid]") {
  std::mt19937 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 4.0);
  for (BlockFormat f : kLegacyFormats) {
    INFO(block_format_name(f));
    const BlockGrid grid = block_grid(f);
    int better = 0;
    for (int trial = 0; trial < 200; ++trial) {
      double x[kGridBlock], a[kGridBlock];
      for (std::int64_t j = 0; j < kGridBlock; ++j) {
        x[j] = static_cast<float>(0.02 * normal(rng) * (j % 11 == 0 ? 4.0 : 1.0));  // values a float holds
        a[j] = uniform(rng);
      }
      double lo = x[0], hi = x[0];
      for (double v : x) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
      const GridParams range = grid_params_from_range(grid, static_cast<float>(lo), static_cast<float>(hi));
      const GridParams found = grid_params_search(grid, x, a, kGridBlock);
      CHECK(holds_in_fp16(found.d));
      CHECK(holds_in_fp16(found.m));
      const double e_range = grid_weighted_error(range, x, a, kGridBlock);
      const double e_found = grid_weighted_error(found, x, a, kGridBlock);
      CHECK(e_found <= e_range);
      better += e_found < e_range;
    }
    WARN(block_format_name(f) << ": the search beat the range rule in " << better << " of 200 blocks");
    CHECK(better > 100);
  }
  // All equal: the range rule's block, untouched.
  std::vector<double> same(kGridBlock, 0.5), ones(kGridBlock, 1.0);
  CHECK(grid_params_search(block_grid(BlockFormat::q4_0), same.data(), ones.data(), kGridBlock).d == -0.0625f);
}

TEST_CASE("K formats: a super-block's parameters, block codes on its fp16 scales", "[quant][grid]") {
  SECTION("the grids") {
    const BlockGrid q4k = block_grid(BlockFormat::q4_k), q5k = block_grid(BlockFormat::q5_k);
    const BlockGrid q6k = block_grid(BlockFormat::q6_k);
    CHECK((q4k.qmin == 0 && q4k.qmax == 15 && q4k.has_minimum && q4k.block == 32 && q4k.super_block == 256));
    CHECK((q5k.qmin == 0 && q5k.qmax == 31 && q5k.has_minimum && q5k.block == 32 && q5k.scale_code_max == 63));
    CHECK((q6k.qmin == -32 && q6k.qmax == 31 && !q6k.has_minimum && q6k.block == 16));
    CHECK((q6k.scale_code_min == -128 && q6k.scale_code_max == 127));
    // d_b = d·sc, m_b = −(dmin·mc), exact in float.
    const GridParams p = k_block_params(q4k, 0.0078125f, 0.001953125f, 37, 5);
    CHECK(p.d == 0.0078125f * 37.0f);
    CHECK(p.m == -0.009765625f);
    CHECK(dequantize_value(15, p) == static_cast<float>(15.0f * p.d) + p.m);
  }
  SECTION("a tensor already on a K grid comes back unchanged from round-to-nearest") {
    // Each block spans its whole code range (codes 0 and 15, or −32), the largest block scale takes the largest code
    // (63, or −128) and the largest minimum 63: the fits, the super-block scales and the codes are found exactly.
    std::mt19937 rng(41);
    for (BlockFormat f : {BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k}) {
      INFO(block_format_name(f));
      const BlockGrid grid = block_grid(f);
      const std::int64_t blocks = 256 / grid.block;
      const float d = 0.0009765625f, dmin = grid.has_minimum ? 0.00048828125f : 0.0f;
      std::uniform_int_distribution<int> code(grid.qmin, grid.qmax), sc(grid.has_minimum ? 1 : -100, 60);
      std::vector<float> x(512);
      for (int row = 0; row < 2; ++row)
        for (std::int64_t b = 0; b < blocks; ++b) {
          const int s = b == 3 ? (grid.has_minimum ? 63 : -128) : sc(rng);
          const int mc = grid.has_minimum ? (b == 5 ? 63 : static_cast<int>(b) * 7) : 0;
          const GridParams p = k_block_params(grid, d, dmin, s, mc);
          for (std::int64_t j = 0; j < grid.block; ++j) {
            const int q = j == 0 ? grid.qmin : j == 1 && grid.has_minimum ? grid.qmax : code(rng);
            x[static_cast<std::size_t>(row * 256 + b * grid.block + j)] = dequantize_value(q, p);
          }
        }
      const BlockQuantized t = grid_round_to_nearest(f, x.data(), 2, 256);
      check_on_grid(t);
      CHECK(dequantize(t) == x);
      CHECK(t.supers[0].d == d);
      CHECK(t.supers[1].dmin == dmin);
    }
  }
  SECTION("round-to-nearest: Q4_K below Q4_1's error, Q5_K below Q5_1's, Q6_K below Q5_0's") {
    const std::vector<float> w = grid_test_weight(16, 512, 43);
    auto squared_error = [&](BlockFormat f) {
      const std::vector<float> back = dequantize(grid_round_to_nearest(f, w.data(), 16, 512));
      double e = 0.0;
      for (std::size_t k = 0; k < w.size(); ++k) e += (static_cast<double>(w[k]) - back[k]) * (w[k] - back[k]);
      return e;
    };
    const double q4k = squared_error(BlockFormat::q4_k), q4_1 = squared_error(BlockFormat::q4_1);
    const double q5k = squared_error(BlockFormat::q5_k), q5_1 = squared_error(BlockFormat::q5_1);
    const double q6k = squared_error(BlockFormat::q6_k), q5_0 = squared_error(BlockFormat::q5_0);
    WARN("squared error Q4_K / Q4_1 = " << q4k / q4_1 << ", Q5_K / Q5_1 = " << q5k / q5_1
                                        << ", Q6_K / Q5_0 = " << q6k / q5_0);
    CHECK(q4k < q4_1);
    CHECK(q5k < q5_1);
    CHECK(q6k < q5_0);
  }
  SECTION("k_super_params: each block's codes no worse than the nearest pair on the stored grid") {
    std::mt19937 rng(47);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.1, 2.0);
    for (BlockFormat f : {BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k}) {
      const BlockGrid grid = block_grid(f);
      double x[256], a[256];
      for (int j = 0; j < 256; ++j) {
        x[j] = static_cast<float>(0.01 * normal(rng) * (1 + j / 64));
        a[j] = uniform(rng);
      }
      GridParams p[16];
      k_super_params(grid, x, a, p);
      for (std::int64_t b = 0; b < 256 / grid.block; ++b) {
        const BlockFit fit = block_fit_search(grid, x + b * grid.block, a + b * grid.block, grid.block);
        const int sc = static_cast<int>(std::nearbyint(fit.d / p[b].super_d));
        const int mc = grid.has_minimum && p[b].super_dmin != 0.0f
                           ? static_cast<int>(std::nearbyint(-fit.m / p[b].super_dmin))
                           : 0;
        const GridParams nearest = k_block_params(grid, p[b].super_d, p[b].super_dmin,
                                                  std::min(std::max(sc, grid.scale_code_min), grid.scale_code_max),
                                                  std::min(std::max(mc, 0), 63));
        CHECK(grid_weighted_error(p[b], x + b * grid.block, a + b * grid.block, grid.block) <=
              grid_weighted_error(nearest, x + b * grid.block, a + b * grid.block, grid.block));
      }
    }
    double huge[256];
    for (double& v : huge) v = 1e8;  // d = 1e8 / 15 / 63 > 65504
    double ones[256];
    for (double& v : ones) v = 1.0;
    GridParams p[16];
    CHECK_THROWS_WITH(k_super_params(block_grid(BlockFormat::q4_k), huge, ones, p),
                      Catch::Contains("super-block scale d") && Catch::Contains("65504"));
  }
}

TEST_CASE("grid_round_to_nearest: every code is the nearest value on its block's stored grid", "[quant][grid]") {
  const std::int64_t rows = 6, cols = 256;
  const std::vector<float> w = grid_test_weight(rows, cols, 3);
  for (BlockFormat f : kGridFormats) {
    INFO(block_format_name(f));
    const BlockQuantized t = grid_round_to_nearest(f, w.data(), rows, cols);
    check_on_grid(t);
    const BlockGrid grid = block_grid(f);
    const std::vector<float> x = dequantize(t);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto k = static_cast<std::size_t>(r * cols + c);
        const BlockScale& s = t.scales[static_cast<std::size_t>((r * cols + c) / grid.block)];
        const GridParams p(grid, s.d, s.m);
        CHECK(x[k] == dequantize_value(t.codes[k], p));
        double best = INFINITY;
        for (int q = grid.qmin; q <= grid.qmax; ++q)
          best = std::fmin(best, std::fabs(static_cast<double>(w[k]) - dequantize_value(q, p)));
        // Nearest up to the rounding of (x − m)·(1/d) itself: a fraction of an ulp of the value.
        CHECK(std::fabs(static_cast<double>(w[k]) - x[k]) <= best + 1e-6 * std::fabs(static_cast<double>(s.d)));
      }
  }
  CHECK_THROWS_WITH(grid_round_to_nearest(BlockFormat::q4_0, w.data(), 1, 48), Catch::Contains("multiple of 32"));
  CHECK_THROWS_WITH(grid_round_to_nearest(BlockFormat::q4_k, w.data(), 1, 128),
                    Catch::Contains("multiple of 256") && Catch::Contains("Q4_K"));
  std::vector<float> bad(w.begin(), w.begin() + 64);
  bad[40] = NAN;
  CHECK_THROWS_WITH(grid_round_to_nearest(BlockFormat::q4_0, bad.data(), 1, 64), Catch::Contains("row 0, column 40"));
}

TEST_CASE("gptq_quantize_blocks: round-to-nearest with a diagonal Hessian, below it with a real one", "[quant][grid]") {
  const std::int64_t out = 16, in = 256;
  const std::vector<float> w = grid_test_weight(out, in, 11);
  const TensorView<const float> wv(w.data(), Shape{out, in});
  Hessian diagonal;
  diagonal.features = in;
  diagonal.samples = 100;
  diagonal.values.assign(static_cast<std::size_t>(in * in), 0.0);
  for (std::int64_t j = 0; j < in; ++j)
    diagonal.values[static_cast<std::size_t>(j * in + j)] = 0.5 + 0.1 * static_cast<double>(j);
  const Hessian h = grid_test_hessian(grid_test_x(512, in, 5), in);
  for (BlockFormat f : kGridFormats) {
    INFO(block_format_name(f));
    GptqOptions o;
    o.block_scale_search = false;  // llama.cpp's range rule: with a diagonal Hessian, GPTQ is the grid's RTN
    const BlockQuantized rtn = grid_round_to_nearest(f, w.data(), out, in);
    const BlockQuantized g0 =
        gptq_quantize_blocks(wv, inverse_hessian_factor(diagonal, inverse_hessian_options(o)), f, o);
    CHECK(g0.codes == rtn.codes);
    for (std::size_t k = 0; k < rtn.scales.size(); ++k) {
      CHECK(g0.scales[k].d == rtn.scales[k].d);
      CHECK(g0.scales[k].m == rtn.scales[k].m);
    }
    // With the scale search and a diagonal Hessian, each block's weighted error is at most the range rule's.
    o.block_scale_search = true;
    const BlockQuantized g1 =
        gptq_quantize_blocks(wv, inverse_hessian_factor(diagonal, inverse_hessian_options(o)), f, o);
    CHECK(grid_output_error(w, dequantize(g1), diagonal, in) <= grid_output_error(w, dequantize(rtn), diagonal, in));
    o.block_scale_search = false;
    GptqResult info;
    const BlockQuantized g =
        gptq_quantize_blocks(wv, inverse_hessian_factor(h, inverse_hessian_options(o)), f, o, &info);
    check_on_grid(g);
    CHECK(info.g_idx.size() == static_cast<std::size_t>(in));
    CHECK(info.g_idx[40] == 40 / block_grid(f).block);
    const double e_rtn = grid_output_error(w, dequantize(rtn), h, in);
    const double e_gptq = grid_output_error(w, dequantize(g), h, in);
    o.act_order = true;
    o.static_groups = true;
    const BlockQuantized ga = gptq_quantize_blocks(wv, inverse_hessian_factor(h, inverse_hessian_options(o)), f, o);
    check_on_grid(ga);
    const double e_act = grid_output_error(w, dequantize(ga), h, in);
    o.block_scale_search = true;
    const BlockQuantized gs = gptq_quantize_blocks(wv, inverse_hessian_factor(h, inverse_hessian_options(o)), f, o);
    check_on_grid(gs);
    const double e_search = grid_output_error(w, dequantize(gs), h, in);
    WARN(block_format_name(f) << ": output error GPTQ / RTN = " << e_gptq / e_rtn << ", with act_order "
                              << e_act / e_rtn << ", and the scale search " << e_search / e_rtn);
    CHECK(e_search < 0.8 * e_rtn);
    CHECK(e_gptq < 0.8 * e_rtn);
    CHECK(e_act < 0.8 * e_rtn);
  }
  SECTION("bad input") {
    GptqOptions o;
    const InverseHessianFactor factor = inverse_hessian_factor(h, inverse_hessian_options(o));
    o.permuted_output = true;
    CHECK_THROWS_WITH(gptq_quantize_blocks(wv, factor, BlockFormat::q4_0, o),
                      Catch::Contains("options.permuted_output"));
    o.permuted_output = false;
    o.act_order = true;
    CHECK_THROWS_WITH(
        gptq_quantize_blocks(wv, inverse_hessian_factor(h, inverse_hessian_options(o)), BlockFormat::q4_0, o),
        Catch::Contains("options.static_groups"));
    const std::vector<float> narrow(static_cast<std::size_t>(out * 48), 0.5f);
    GptqOptions plain;
    Hessian h48 = diagonal;
    h48.features = 48;
    h48.values.assign(48 * 48, 0.0);
    for (std::size_t j = 0; j < 48; ++j) h48.values[j * 48 + j] = 1.0;
    CHECK_THROWS_WITH(
        gptq_quantize_blocks(TensorView<const float>(narrow.data(), Shape{out, 48}),
                             inverse_hessian_factor(h48, inverse_hessian_options(plain)), BlockFormat::q4_0, plain),
        Catch::Contains("input width = 48") && Catch::Contains("multiple of 32 (the blocks of Q4_0)"));
    CHECK_THROWS_WITH(gptq_quantize_blocks(wv, factor, BlockFormat::q4_k, o),
                      Catch::Contains("options.static_groups"));  // argument errors keep their order
    GptqOptions k;
    const Hessian h32 = grid_test_hessian(grid_test_x(64, 32 * 9, 5), 32 * 9);
    const std::vector<float> w288(static_cast<std::size_t>(out * 288), 0.25f);
    CHECK_THROWS_WITH(
        gptq_quantize_blocks(TensorView<const float>(w288.data(), Shape{out, 288}),
                             inverse_hessian_factor(h32, inverse_hessian_options(k)), BlockFormat::q6_k, k),
        Catch::Contains("input width = 288") && Catch::Contains("multiple of 256 (the super-blocks of Q6_K)"));
  }
}

TEST_CASE("hqq_quantize_blocks: never worse in its error than the grid's round-to-nearest", "[quant][grid]") {
  const std::int64_t out = 24, in = 256;
  const std::vector<float> w = grid_test_weight(out, in, 19);
  const TensorView<const float> wv(w.data(), Shape{out, in});
  for (BlockFormat f : kGridFormats) {
    INFO(block_format_name(f));
    HqqResult info;
    const BlockQuantized t = hqq_quantize_blocks(wv, f, HqqOptions{}, &info);
    check_on_grid(t);
    CHECK(info.groups == out * in / block_grid(f).block);
    CHECK(info.final_error <= info.initial_error);
    // φ (p = 0.7) of the result against that of round-to-nearest, recomputed here: the result's is no larger.
    const BlockQuantized rtn = grid_round_to_nearest(f, w.data(), out, in);
    const std::vector<float> a = dequantize(t), b = dequantize(rtn);
    double phi = 0.0, phi_rtn = 0.0;
    for (std::size_t k = 0; k < w.size(); ++k) {
      phi += std::pow(std::fabs(static_cast<double>(w[k]) - a[k]), 0.7);
      phi_rtn += std::pow(std::fabs(static_cast<double>(w[k]) - b[k]), 0.7);
    }
    CHECK(phi == Approx(info.final_error).epsilon(1e-9));
    CHECK(phi_rtn == Approx(info.initial_error).epsilon(1e-9));
    WARN(block_format_name(f) << ": HQQ's phi / RTN's = " << phi / phi_rtn << ", " << info.groups_improved << " of "
                              << info.groups << " blocks moved");
    // The K formats' round-to-nearest already refines each block's codes on the stored grid: HQQ seldom moves one.
    if (block_grid(f).super_block == 0) CHECK(info.groups_improved > 0);
    test::require_same_bytes_on_every_executor([&] { return hqq_quantize_blocks(wv, f, HqqOptions{}).codes; });
  }
  const std::vector<float> narrow(48, 0.5f);
  CHECK_THROWS_WITH(
      hqq_quantize_blocks(TensorView<const float>(narrow.data(), Shape{1, 48}), BlockFormat::q4_1, HqqOptions{}),
      Catch::Contains("input width = 48") && Catch::Contains("multiple of 32 (the blocks of Q4_1)"));
  const std::vector<float> w288(288, 0.5f);
  CHECK_THROWS_WITH(
      hqq_quantize_blocks(TensorView<const float>(w288.data(), Shape{1, 288}), BlockFormat::q5_k, HqqOptions{}),
      Catch::Contains("multiple of 256 (the super-blocks of Q5_K)"));
}

TEST_CASE("AWQ onto a block grid: the search scores the grid's rounding, and stores what it scored", "[quant][grid]") {
  const std::int64_t out = 32, in = 256;
  const std::vector<float> w = grid_test_weight(out, in, 23);
  const TensorView<const float> wv(w.data(), Shape{out, in});
  const std::vector<float> x = grid_test_x(1024, in, 29);
  const Hessian h = grid_test_hessian(x, in);
  ActivationMeanAbsObserver a;
  a.observe(TensorView<const float>(x.data(), Shape{1024, in}));
  for (BlockFormat f :
       {BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::q8_0, BlockFormat::q4_k, BlockFormat::q6_k}) {
    INFO(block_format_name(f));
    AwqOptions o;
    o.block_format = f;
    o.group_size = 48;  // not read with a block format
    const std::vector<float> ones(static_cast<std::size_t>(in), 1.0f);
    const BlockQuantized plain = awq_quantize_blocks(wv, ones, o);
    const BlockQuantized rtn = grid_round_to_nearest(f, w.data(), out, in);
    CHECK(plain.codes == rtn.codes);
    const AwqResult r = awq_search({wv}, h, a.mean_abs(), o);
    CHECK(r.losses[0] == r.rtn_loss);
    CHECK(r.loss <= r.rtn_loss);
    const BlockQuantized t = awq_quantize_blocks(wv, r.scales, o);
    check_on_grid(t);
    // The search's loss is Σ tr(ΔW H ΔWᵀ) / (2·out): the stored blocks, divided by s, give it back.
    CHECK(grid_output_error(w, dequantize(t), h, in, r.scales) / static_cast<double>(out) ==
          Approx(r.loss).epsilon(1e-9));
    const std::vector<float> clip = awq_clip_search(wv, h, r.scales, o);
    CHECK(clip.size() == static_cast<std::size_t>(out * in / grid_row_unit(block_grid(f))));
    const BlockQuantized clipped = awq_quantize_blocks(wv, r.scales, o, clip);
    check_on_grid(clipped);
    const double e_clip = grid_output_error(w, dequantize(clipped), h, in, r.scales);
    const double e_rtn = grid_output_error(w, dequantize(rtn), h, in);
    WARN(block_format_name(f) << ": output error AWQ / RTN = " << r.loss / r.rtn_loss << ", with clipping "
                              << e_clip / e_rtn);
    CHECK(e_clip <= grid_output_error(w, dequantize(t), h, in, r.scales) * (1.0 + 1e-12));
  }
  AwqOptions o;
  o.block_format = BlockFormat::q4_0;
  const std::vector<float> ones(static_cast<std::size_t>(in), 1.0f);
  CHECK_THROWS_WITH(awq_quantize(wv, ones, o), Catch::Contains("awq_quantize_blocks"));
  o.block_format.reset();
  CHECK_THROWS_WITH(awq_quantize_blocks(wv, ones, o), Catch::Contains("options.block_format"));
  o.block_format = BlockFormat::q4_0;
  const std::vector<float> narrow(48, 0.5f);
  CHECK_THROWS_WITH(
      awq_quantize_blocks(TensorView<const float>(narrow.data(), Shape{1, 48}), std::vector<float>(48, 1.0f), o),
      Catch::Contains("multiple of 32"));
}
