// Tests for shrink/linear/nm_cuda.hpp. [gpu] cases run every block tile on random inputs and random non-uniform
// 2:4 masks (all six kept pairs, groups keeping fewer, a weight row pruned whole, a zero row of x), unaligned M and N,
// M = 1, outputs poisoned, and compare with the CPU twin (cpu::linear_nm / cpu::linear_nm_int8) and with an FP64
// dense product over the decompressed weight (int8 accumulators exactly); device-side checks of scales and bias.
// [host] cases check can_implement's reasons and the host checks, which throw before any CUDA call, and replay the
// kernel's index arithmetic on the host with ldmatrix and mma.sp modelled from the PTX ISA.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/kernels/linear_nm_layout.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/nm_cuda.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/activation_reference.hpp"
#include "support/ldmatrix_model.hpp"
#include "support/mismatch_map.hpp"

namespace {

using Catch::Matchers::Contains;
using shrink::Activation;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::cuda::LinearNmArgs;
using shrink::cuda::LinearNmPath;
using shrink::prune::NmPattern;
using shrink::test::activate_reference;
using shrink::test::DeviceBuffer;
using shrink::test::fake_device_pointer;
using shrink::test::kActivations;
using shrink::test::MismatchMap;

constexpr NmPattern k24{2, 4};

template <class T>
std::vector<T> random_operand(std::size_t count, std::mt19937& rng) {
  std::vector<T> v(count);
  if constexpr (std::is_same_v<T, std::int8_t>) {
    std::uniform_int_distribution<int> value(-128, 127);
    for (T& q : v) q = static_cast<T>(value(rng));
  } else {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (T& f : v) f = T(normal(rng));
  }
  return v;
}

template <class V>
double as_double(V v) {
  if constexpr (std::is_same_v<V, half> || std::is_same_v<V, bfloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}

// A random 2:4 mask: each group keeps a random subset of at most 2 (so all six pairs, single kept values and empty
// groups appear); weight row 1 keeps nothing at all.
shrink::prune::Mask random_24_mask(std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  shrink::prune::Mask mask(Shape{rows, cols}, false);
  int order[4] = {0, 1, 2, 3};
  std::uniform_int_distribution<int> kept(0, 2);
  for (std::int64_t g = 0; g < rows * cols / 4; ++g) {
    if (g / (cols / 4) == 1) continue;
    std::shuffle(order, order + 4, rng);
    const int count = kept(rng) == 0 ? 1 : 2;  // mostly pairs; some single values; empty groups below
    for (int j = 0; j < count; ++j) mask.set(g * 4 + order[j], true);
    if (g % 13 == 5) mask.set(g * 4 + order[0], false);
  }
  return mask;
}

// The distinct kept pairs (position nibbles) of a 2:4 compressed weight.
template <class T>
std::set<int> pairs_present(const shrink::sparse::NmCompressed<T>& w) {
  std::set<int> pairs;
  for (std::size_t i = 0; i + 1 < w.positions.size(); i += 2) pairs.insert(w.positions[i] | w.positions[i + 1] << 2);
  return pairs;
}

// One shape's operands on the host and the device, with the FP64 reference product over the decompressed weight.
template <class T>
struct NmProblem {
  std::int64_t m, n, k;
  std::vector<T> x;
  shrink::sparse::NmCompressed<T> w;
  std::vector<double> product;    // Σ_k x · w in double
  std::vector<double> magnitude;  // Σ_k |x · w|
  std::vector<float> x_scales, w_scales, bias;
  DeviceBuffer x_dev, values_dev, metadata_dev, x_scales_dev, w_scales_dev, bias_dev;

  NmProblem(std::int64_t m_, std::int64_t n_, std::int64_t k_, std::mt19937& rng)
      : m(m_),
        n(n_),
        k(k_),
        x(random_operand<T>(static_cast<std::size_t>(m * k), rng)),
        x_dev(static_cast<std::size_t>(m * k) * sizeof(T)),
        values_dev(static_cast<std::size_t>(n * k / 2) * sizeof(T)),
        metadata_dev(static_cast<std::size_t>((n + 15) / 16 * 16 * k / 32) * 4),
        x_scales_dev(static_cast<std::size_t>(m) * 4),
        w_scales_dev(static_cast<std::size_t>(n) * 4),
        bias_dev(static_cast<std::size_t>(n) * 4) {
    if (m > 1) std::fill(x.begin(), x.begin() + k, T{});  // a zero row of x
    const std::vector<T> dense = random_operand<T>(static_cast<std::size_t>(n * k), rng);
    w = shrink::sparse::compress_nm(TensorView<const T>(dense.data(), Shape{n, k}), random_24_mask(n, k, rng), k24);
    const std::vector<T> pruned = shrink::sparse::decompress_nm(w);  // positions read from the metadata
    product.resize(static_cast<std::size_t>(m * n));
    magnitude.resize(product.size());
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double s = 0, a = 0;
        for (std::int64_t c = 0; c < k; ++c) {
          const double p = as_double(x[static_cast<std::size_t>(i * k + c)]) *
                           as_double(pruned[static_cast<std::size_t>(j * k + c)]);
          s += p;
          a += std::fabs(p);
        }
        product[static_cast<std::size_t>(i * n + j)] = s;
        magnitude[static_cast<std::size_t>(i * n + j)] = a;
      }
    std::uniform_real_distribution<float> scale(0.002f, 0.02f);
    for (std::int64_t i = 0; i < m; ++i) x_scales.push_back(scale(rng));
    for (std::int64_t j = 0; j < n; ++j) w_scales.push_back(scale(rng));
    std::normal_distribution<float> normal(0.0f, std::is_same_v<T, std::int8_t> ? 0.5f : 2.0f);
    for (std::int64_t j = 0; j < n; ++j) bias.push_back(normal(rng));
    x_dev.upload(x.data(), x_dev.bytes());
    values_dev.upload(w.values.data(), values_dev.bytes());
    REQUIRE(w.metadata.size() * 4 == metadata_dev.bytes());
    metadata_dev.upload(w.metadata.data(), metadata_dev.bytes());
    x_scales_dev.upload(x_scales.data(), x_scales_dev.bytes());
    w_scales_dev.upload(w_scales.data(), w_scales_dev.bytes());
    bias_dev.upload(bias.data(), bias_dev.bytes());
  }
};

// The epilogue a case asks for; device_args and twin_output build the shrink::Epilogue of its views from it.
struct EpilogueCase {
  Activation activation = Activation::none;
  bool bias = false;
  bool per_tensor_scales = false;
  float out_scale = 1.0f;
};

template <class T, class Out>
LinearNmArgs<T, Out> device_args(const NmProblem<T>& p, const EpilogueCase& e, Out* out, LinearNmPath path) {
  LinearNmArgs<T, Out> a;
  a.x = TensorView<const T>(p.x_dev.template as<T>(), Shape{p.m, p.k}, Device::cuda(0));
  a.w = {p.values_dev.template as<T>(), p.metadata_dev.template as<std::uint32_t>(), p.n, p.k, k24, Device::cuda(0)};
  if constexpr (std::is_same_v<T, std::int8_t>) {
    a.epilogue.x_scales = TensorView<const float>(p.x_scales_dev.template as<float>(),
                                                  Shape{e.per_tensor_scales ? 1 : p.m}, Device::cuda(0));
    a.epilogue.w_scales = TensorView<const float>(p.w_scales_dev.template as<float>(),
                                                  Shape{e.per_tensor_scales ? 1 : p.n}, Device::cuda(0));
  }
  if (e.bias) a.epilogue.bias = TensorView<const float>(p.bias_dev.template as<float>(), Shape{p.n}, Device::cuda(0));
  a.epilogue.activation = e.activation;
  a.epilogue.out_scale = e.out_scale;
  a.out = TensorView<Out>(out, Shape{p.m, p.n}, Device::cuda(0));
  a.path = path;
  return a;
}

// The CPU twin's output for the same arguments.
template <class T, class Out>
std::vector<Out> twin_output(const NmProblem<T>& p, const EpilogueCase& e) {
  std::vector<Out> out(static_cast<std::size_t>(p.m * p.n));
  shrink::Epilogue epilogue;
  if (e.bias) epilogue.bias = TensorView<const float>(p.bias.data(), Shape{p.n});
  epilogue.activation = e.activation;
  const TensorView<Out> out_view(out.data(), Shape{p.m, p.n});
  if constexpr (std::is_same_v<T, std::int8_t>) {
    epilogue.x_scales = TensorView<const float>(p.x_scales.data(), Shape{e.per_tensor_scales ? 1 : p.m});
    epilogue.w_scales = TensorView<const float>(p.w_scales.data(), Shape{e.per_tensor_scales ? 1 : p.n});
    epilogue.out_scale = e.out_scale;
    shrink::cpu::linear_nm_int8(TensorView<const T>(p.x.data(), Shape{p.m, p.k}), p.w, out_view, epilogue);
  } else {
    shrink::cpu::linear_nm(TensorView<const T>(p.x.data(), Shape{p.m, p.k}), p.w, out_view, epilogue);
  }
  return out;
}

// Relative size of one rounding of the output type (0 for float, whose rounding the sum bound covers).
template <class Out>
double output_rounding() {
  if constexpr (std::is_same_v<Out, half>)
    return std::ldexp(1.0, -10);
  else if constexpr (std::is_same_v<Out, bfloat16>)
    return std::ldexp(1.0, -7);
  else
    return 0.0;
}

// The output tile (X rows x W rows) one CTA computes on a path, for the mismatch map; `automatic` picks by shape, so
// its map counts by 64 x 64.
struct NmOutputTile {
  std::int64_t rows, cols;
};
NmOutputTile nm_output_tile(LinearNmPath path) {
  using namespace shrink::cuda::kernels::linear_nm;
  switch (path) {
    case LinearNmPath::mma_sp_32x16: return {Tile32x16::kBlockX, Tile32x16::kBlockW};
    case LinearNmPath::mma_sp_128x128: return {Tile128x128::kBlockX, Tile128x128::kBlockW};
    default: return {Tile64x64::kBlockX, Tile64x64::kBlockW};
  }
}

template <class T, class Out>
void check_against_references(const NmProblem<T>& p, const EpilogueCase& e, LinearNmPath path) {
  INFO("M " << p.m << " N " << p.n << " K " << p.k << " path " << shrink::cuda::to_string(path) << " activation "
            << shrink::to_string(e.activation) << (e.bias ? " bias" : "")
            << (e.per_tensor_scales ? " per-tensor scales" : ""));
  DeviceBuffer out_dev(static_cast<std::size_t>(p.m * p.n) * sizeof(Out));  // poisoned
  const auto args = device_args<T, Out>(p, e, out_dev.as<Out>(), path);
  REQUIRE(shrink::cuda::can_implement_linear_nm(args).reason() == "");
  DeviceBuffer ws(shrink::cuda::linear_nm_workspace_bytes(args));
  shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
  const std::vector<Out> got = out_dev.download<Out>(static_cast<std::size_t>(p.m * p.n));
  // Again over another poison (all ones: NaN for the float types, -1 for int8): an element the kernel skips cannot
  // match both times.
  CUDA_REQUIRE(cudaMemset(out_dev.as<void>(), 0xFF, out_dev.bytes()));
  shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
  const std::vector<Out> again = out_dev.download<Out>(static_cast<std::size_t>(p.m * p.n));
  CHECK(std::memcmp(got.data(), again.data(), got.size() * sizeof(Out)) == 0);
  const std::vector<Out> twin = twin_output<T, Out>(p, e);

  constexpr bool kInt8 = std::is_same_v<T, std::int8_t>;
  // Relative to the terms: float sums of K products (tensor cores: a few roundings per k-step; the CPU: K of them)
  // for 16-bit, a few float roundings of the epilogue for int8; then the output type's rounding.
  const double sum_error = kInt8 ? 1e-6 : std::ldexp(1.0, -12);
  const double activation_error = e.activation == Activation::gelu || e.activation == Activation::silu ? 1e-6 : 0.0;
  const NmOutputTile tile = nm_output_tile(path);
  MismatchMap mismatches(p.m, p.n, tile.rows, tile.cols);
  for (std::int64_t i = 0; i < p.m; ++i)
    for (std::int64_t j = 0; j < p.n; ++j) {
      const std::size_t at = static_cast<std::size_t>(i * p.n + j);
      const double s = kInt8 ? double{p.x_scales[e.per_tensor_scales ? 0 : static_cast<std::size_t>(i)]} *
                                   p.w_scales[e.per_tensor_scales ? 0 : static_cast<std::size_t>(j)]
                             : 1.0;
      const double b = e.bias ? p.bias[static_cast<std::size_t>(j)] : 0.0;
      const double v = activate_reference(p.product[at] * s + b, e.activation);
      const double g = as_double(got[at]), c = as_double(twin[at]);
      bool ok;
      if constexpr (std::is_same_v<Out, std::int8_t>) {
        const double q = std::min(127.0, std::max(-128.0, std::nearbyint(v / e.out_scale)));
        ok = std::fabs(g - q) <= 1.0 && std::fabs(g - c) <= (activation_error > 0 ? 1.0 : 0.0);
      } else {
        const double scale_of_terms = p.magnitude[at] * s + std::fabs(b);
        const double reference_bound = sum_error * (std::fabs(v) + scale_of_terms) +
                                       (output_rounding<Out>() + activation_error) * std::fabs(v) + 1e-30;
        ok = std::fabs(g - v) <= reference_bound;
        // The twin: for int8 the same float operations, bit for bit unless gelu / silu (erf / exp differ in an ulp,
        // which 1 + erf(v) can magnify); otherwise two summation orders, each within the reference bound.
        ok = ok && (kInt8 && activation_error == 0 ? std::memcmp(&got[at], &twin[at], sizeof(Out)) == 0
                                                   : std::fabs(g - c) <= 2 * reference_bound);
      }
      if (!ok) mismatches.add(i, j, g, v);
    }
  CHECK_NO_MISMATCHES(mismatches);
}

const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& shapes() {
  // M = 1, unaligned M and N, K with an odd count of k-steps (a half-empty last stage), 16-row tiles cut by N.
  static const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> s = {
      {1, 64, 128}, {1, 37, 192}, {16, 128, 256}, {33, 200, 192}, {130, 70, 512}, {257, 129, 1024}, {3, 40, 2112}};
  return s;
}

const LinearNmPath kNmPaths[] = {LinearNmPath::automatic, LinearNmPath::mma_sp_32x16, LinearNmPath::mma_sp_64x64,
                                 LinearNmPath::mma_sp_128x128};

// Every shape through every tile, cycling through activations, bias and scale granularity.
template <class T, class... Outs>
void check_type(std::uint32_t seed) {
  std::mt19937 rng(seed);
  int variant = 0;
  for (auto [m, n, k] : shapes()) {
    NmProblem<T> p(m, n, k, rng);
    if (n * k / 4 >= 1000) CHECK(pairs_present(p.w).size() == 6);
    for (LinearNmPath path : kNmPaths) {
      EpilogueCase e;
      e.activation = kActivations[variant % 4];
      e.bias = variant % 3 != 0;
      e.per_tensor_scales = variant % 5 == 0;
      e.out_scale = 0.02f;
      ++variant;
      (check_against_references<T, Outs>(p, e, path), ...);
    }
  }
}

}  // namespace

TEST_CASE("cuda linear_nm half matches the CPU twin and an FP64 dense product", "[gpu]") {
  check_type<half, half, float>(700);
}

TEST_CASE("cuda linear_nm bfloat16 matches the CPU twin and an FP64 dense product", "[gpu]") {
  check_type<bfloat16, bfloat16, float>(701);
}

TEST_CASE("cuda linear_nm int8 matches the CPU twin and an FP64 dense product", "[gpu]") {
  check_type<std::int8_t, float, half, bfloat16, std::int8_t>(702);
}

namespace {

// The exact int32 sums on the float output (unit scales, |sum| < 2^24) for x of random values (x all -128 would give
// the same sum wherever the metadata put the kept values), then with one-hot rows of x: row i keeps one value, at
// column k_i = 37 i mod K, so output (i, j) is x[i, k_i] · w[j, k_i] alone (or 0 where the mask dropped it) and a
// metadata, fragment or stage mapping that fetches the wrong column shows in the map by k step (one mma's columns).
template <class T>
void check_exact_products(std::int64_t m, std::int64_t n, std::int64_t k, bool one_hot, std::mt19937& rng) {
  NmProblem<T> p(m, n, k, rng);
  std::vector<std::int64_t> column(static_cast<std::size_t>(m), -1);
  if (one_hot)
    for (std::int64_t i = 0; i < m; ++i) {
      const std::size_t at = static_cast<std::size_t>(i * k + 37 * i % k);
      const T kept = as_double(p.x[at]) == 0 ? T(1) : p.x[at];
      std::fill(p.x.begin() + i * k, p.x.begin() + (i + 1) * k, T{});
      p.x[at] = kept;
      column[static_cast<std::size_t>(i)] = 37 * i % k;
    }
  p.x_dev.upload(p.x.data(), p.x_dev.bytes());
  const std::vector<float> one(1, 1.0f);
  p.x_scales_dev.upload(one.data(), 4);
  p.w_scales_dev.upload(one.data(), 4);
  const std::vector<T> pruned = shrink::sparse::decompress_nm(p.w);
  // 16-bit values: products of halves and their sums here are exact in double and, for one-hot rows, in float.
  std::vector<double> exact(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t c = 0; c < k; ++c)
        exact[static_cast<std::size_t>(i * n + j)] += as_double(p.x[static_cast<std::size_t>(i * k + c)]) *
                                                      as_double(pruned[static_cast<std::size_t>(j * k + c)]);
  constexpr int kTileK = shrink::cuda::kernels::linear_nm::Operand<T>::kTileK;
  for (LinearNmPath path : kNmPaths) {
    INFO(shrink::test::type_name<T>() << " M " << m << " N " << n << " K " << k << " path "
                                      << shrink::cuda::to_string(path) << (one_hot ? " one-hot rows" : " random x"));
    DeviceBuffer out_dev(static_cast<std::size_t>(m * n) * 4);
    EpilogueCase e;
    e.per_tensor_scales = true;
    const auto args = device_args<T, float>(p, e, out_dev.as<float>(), path);
    DeviceBuffer ws(shrink::cuda::linear_nm_workspace_bytes(args));
    shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
    const std::vector<float> got = out_dev.download<float>(static_cast<std::size_t>(m * n));
    const NmOutputTile tile = nm_output_tile(path);
    MismatchMap mismatches(m, n, tile.rows, tile.cols);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const double want = exact[static_cast<std::size_t>(i * n + j)];
        const float g = got[static_cast<std::size_t>(i * n + j)];
        // Random 16-bit x: float sums round; one-hot rows and int8 (|sum| < 2^24) are exact.
        const bool ok = std::fabs(want) >= 16777216.0 ? true
                        : std::is_same_v<T, std::int8_t> || one_hot
                            ? g == static_cast<float>(want)
                            : std::fabs(g - want) <= 1e-5 * (1 + std::fabs(want));
        if (!ok) mismatches.add(i, j, g, want, one_hot ? column[static_cast<std::size_t>(i)] / kTileK : -1);
      }
    CHECK_NO_MISMATCHES(mismatches);
  }
}

}  // namespace

TEST_CASE("cuda linear_nm int8 accumulators are exact on random x", "[gpu]") {
  std::mt19937 rng(703);
  for (auto [m, n, k] : shapes()) check_exact_products<std::int8_t>(m, n, k, false, rng);
}

TEST_CASE("cuda linear_nm one-hot rows of x place every kept value (int8 and half)", "[gpu]") {
  std::mt19937 rng(706);
  for (auto [m, n, k] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t>{64, 128, 256}, {33, 200, 192}, {130, 70, 512}}) {
    check_exact_products<std::int8_t>(m, n, k, true, rng);
    check_exact_products<half>(m, n, k, true, rng);
  }
}

TEST_CASE("cuda linear_nm device-side checks: bad scales, non-finite bias", "[gpu]") {
  std::mt19937 rng(704);
  NmProblem<std::int8_t> p(5, 24, 128, rng);
  DeviceBuffer out_dev(static_cast<std::size_t>(p.m * p.n) * 4);
  EpilogueCase e;
  e.bias = true;
  const auto args = device_args<std::int8_t, float>(p, e, out_dev.as<float>(), LinearNmPath::automatic);
  DeviceBuffer ws(shrink::cuda::linear_nm_workspace_bytes(args));
  std::vector<float> scales = p.w_scales;
  scales[7] = -1.0f;
  p.w_scales_dev.upload(scales.data(), p.w_scales_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                    Contains("scale is not finite"));
  p.w_scales_dev.upload(p.w_scales.data(), p.w_scales_dev.bytes());
  std::vector<float> bias = p.bias;
  bias[3] = std::numeric_limits<float>::infinity();
  p.bias_dev.upload(bias.data(), p.bias_dev.bytes());
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                    Contains("NaN or inf"));
  p.bias_dev.upload(p.bias.data(), p.bias_dev.bytes());
  CHECK_NOTHROW(shrink::cuda::linear_nm(args, ws.workspace(), nullptr, shrink::cuda::Synchronize::yes));
}

namespace {

// ---------------------------------------------------------------------------------------------------------------
// The kernel replayed on the host: its copies, ldmatrix addresses, metadata slots and accumulator placement
// (shrink/cuda/kernels/linear_nm_layout.hpp, the functions the kernel calls), with ldmatrix and mma.sp modelled from
// the PTX ISA's rules, written out here independently of the layout header:
//   ldmatrix.x4: lanes 8q .. 8q + 7 give the row addresses of matrix q; lane 4g + t receives, in register q, bytes
//                4t .. 4t + 3 of row g of matrix q.
//   mma.sp A (16-bit): register r of lane 4g + t holds compressed columns 8 (r / 2) + 2t, +1 of row g + 8 (r % 2);
//          (int8): compressed columns 16 (r / 2) + 4t .. +3 of row g + 8 (r % 2).
//   mma.sp B (16-bit): register r holds dense rows 8r + 2t, +1 of column g; (int8): rows 16r + 4t .. +3.
//   metadata: the nibble of group j (4 dense columns) of row i has the first kept position in bits [1:0], the second
//             in [3:2], first < second; it lies in the register of lane
//               16-bit (selector 0): 4 (i % 8) + j / 4, bits 16 (i / 8) + 4 (j % 4)
//               int8:                4 (i % 8) + 2 (j / 8) + i / 8, bits 16 (j / 4 % 2) + 4 (j % 4)
//             (int8: the mapping Triton's dot_sparse measured on sm_89, see cuda/kernels/linear_nm_layout.hpp).
//   D: row g + 8 (r / 2), column 2t + r % 2 in accumulator r of lane 4g + t.

namespace layout = shrink::cuda::kernels::linear_nm;

template <class T>
double element(const unsigned char* bytes) {
  T v;
  std::memcpy(&v, bytes, sizeof v);
  return as_double(v);
}

// D (16 x 8) of one mma.sp from the 32 lanes' registers, by the rules above.
template <class T>
void model_mma_sp(const std::uint32_t (&a)[32][4], const std::uint32_t (&b)[32][4], const std::uint32_t (&e)[32],
                  double (&d)[16][8]) {
  constexpr int kPerRegister = 4 / static_cast<int>(sizeof(T));  // values in a 32-bit register
  constexpr int kTileK = std::is_same_v<T, std::int8_t> ? 64 : 32;
  double compressed[16][32] = {}, dense_b[64][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const unsigned char* ab = reinterpret_cast<const unsigned char*>(&a[lane][r]);
      const unsigned char* bb = reinterpret_cast<const unsigned char*>(&b[lane][r]);
      for (int v = 0; v < kPerRegister; ++v) {
        compressed[g + 8 * (r % 2)][(kTileK / 4) * (r / 2) + kPerRegister * t + v] = element<T>(ab + v * sizeof(T));
        dense_b[(kTileK / 4) * r + kPerRegister * t + v][g] = element<T>(bb + v * sizeof(T));
      }
    }
  }
  for (int i = 0; i < 16; ++i) {
    double row[64] = {};
    for (int j = 0; j < kTileK / 4; ++j) {
      const std::uint32_t nibble =
          std::is_same_v<T, std::int8_t>
              ? (e[4 * (i % 8) + 2 * (j / 8) + i / 8] >> (16 * (j / 4 % 2) + 4 * (j % 4))) & 0xFu
              : (e[4 * (i % 8) + j / 4] >> (16 * (i / 8) + 4 * (j % 4))) & 0xFu;
      const int first = static_cast<int>(nibble & 3u), second = static_cast<int>(nibble >> 2);
      REQUIRE(first < second);  // mma.sp::ordered_metadata
      row[4 * j + first] = compressed[i][2 * j];
      row[4 * j + second] = compressed[i][2 * j + 1];
    }
    for (int c = 0; c < 8; ++c) {
      double sum = 0;
      for (int kk = 0; kk < kTileK; ++kk) sum += row[kk] * dense_b[kk][c];
      d[i][c] = sum;
    }
  }
}

// Runs every block of the kernel with tile Config; returns out[m, n] (NaN where nothing was written) and checks that
// each output is written once, each stage byte filled once, each valid copy inside its source array.
template <class T, class Config>
std::vector<double> replay_kernel(const std::vector<T>& x, const shrink::sparse::NmCompressed<T>& w, std::int64_t m,
                                  std::int64_t n, std::int64_t k) {
  const auto* x_bytes = reinterpret_cast<const unsigned char*>(x.data());
  const auto* values = reinterpret_cast<const unsigned char*>(w.values.data());
  const auto* metadata = reinterpret_cast<const unsigned char*>(w.metadata.data());
  const std::int64_t sizes[3] = {static_cast<std::int64_t>(w.values.size() * sizeof(T)),
                                 static_cast<std::int64_t>(x.size() * sizeof(T)),
                                 static_cast<std::int64_t>(w.metadata.size() * 4)};
  std::vector<double> out(static_cast<std::size_t>(m * n), std::numeric_limits<double>::quiet_NaN());
  std::vector<int> writes(out.size(), 0);
  const std::int64_t tiles_w = (n + Config::kBlockW - 1) / Config::kBlockW;
  const std::int64_t tiles_x = (m + Config::kBlockX - 1) / Config::kBlockX;
  REQUIRE(layout::grid_size<Config>(m, n) == tiles_w * tiles_x);
  std::set<std::pair<std::int64_t, std::int64_t>> tiles_seen;
  std::vector<unsigned char> stage(static_cast<std::size_t>(Config::template stage_bytes<T>()));
  for (std::int64_t block = 0; block < tiles_w * tiles_x; ++block) {
    const layout::BlockTiles tiles = layout::block_tiles(block, tiles_w, tiles_x);
    REQUIRE((tiles.w >= 0 && tiles.w < tiles_w && tiles.x >= 0 && tiles.x < tiles_x));
    tiles_seen.insert({tiles.w, tiles.x});
    layout::CopyShape shape;
    shape.m = m;
    shape.n = n;
    shape.m0 = tiles.x * Config::kBlockX;
    shape.n0 = tiles.w * Config::kBlockW;
    shape.k_steps = static_cast<int>(k / layout::Operand<T>::kTileK);
    shape.row_bytes_w = k / 2 * static_cast<std::int64_t>(sizeof(T));
    shape.row_bytes_x = k * static_cast<std::int64_t>(sizeof(T));
    std::vector<double> acc(static_cast<std::size_t>(Config::kWarps * Config::kMmaW * Config::kMmaX * 32 * 4), 0.0);
    for (int s = 0; s < (shape.k_steps + 1) / 2; ++s) {
      std::fill(stage.begin(), stage.end(), static_cast<unsigned char>(0xCD));  // a stale buffer
      std::vector<int> filled(stage.size(), 0);
      auto copy = [&](const layout::StageCopy& c, const unsigned char* source, std::int64_t source_bytes,
                      bool metadata_padding) {
        REQUIRE(
            (c.destination >= 0 && c.destination % 16 == 0 && c.destination + 16 <= static_cast<int>(stage.size())));
        for (int i = 0; i < 16; ++i) ++filled[static_cast<std::size_t>(c.destination + i)];
        if (c.valid) {
          REQUIRE((c.source >= 0 && c.source % 16 == 0 && c.source + 16 <= source_bytes));
          std::memcpy(stage.data() + c.destination, source + c.source, 16);
        } else {
          std::memset(stage.data() + c.destination, metadata_padding ? 0x44 : 0, 16);
        }
      };
      for (int c = 0; c < Config::kBlockW * 4; ++c) copy(layout::w_copy<Config>(c, s, shape), values, sizes[0], false);
      for (int c = 0; c < Config::kBlockX * 8; ++c) copy(layout::x_copy<Config>(c, s, shape), x_bytes, sizes[1], false);
      for (int c = 0; c < Config::kRowTiles * layout::metadata_copies_per_tile<T>(); ++c)
        copy(layout::metadata_copy<Config, T>(c, s, shape), metadata, sizes[2], true);
      CHECK(std::count(filled.begin(), filled.end(), 1) == static_cast<std::ptrdiff_t>(filled.size()));
      for (int warp = 0; warp < Config::kWarps; ++warp) {
        const int warp_w = warp % Config::kWarpsW, warp_x = warp / Config::kWarpsW;
        for (int h = 0; h < 2 && 2 * s + h < shape.k_steps; ++h) {
          std::uint32_t a[Config::kMmaW][32][4], e[Config::kMmaW][32], b[Config::kMmaX][32][4];
          for (int i = 0; i < Config::kMmaW; ++i) {
            const int first_row = warp_w * Config::kWarpW + i * 16;
            int address[32];
            for (int lane = 0; lane < 32; ++lane) {
              address[lane] =
                  layout::w_chunk_offset(first_row + layout::a_lane_row(lane), layout::a_lane_chunk(h, lane));
              std::uint32_t step_words[32];
              std::memcpy(
                  step_words,
                  stage.data() + Config::kOffsetMetadata + 4 * layout::metadata_step_offset<T>(first_row / 16, h),
                  4 * layout::Operand<T>::kMetadataWords);
              e[i][lane] = layout::Operand<T>::metadata_register(step_words, lane);
            }
            shrink::test::ldmatrix_x4_model(stage, address, a[i]);
          }
          for (int j = 0; j < Config::kMmaX; ++j) {
            const int first_row = warp_x * Config::kWarpX + j * 8;
            int address[32];
            for (int lane = 0; lane < 32; ++lane)
              address[lane] = Config::kOffsetX + layout::x_chunk_offset(first_row + layout::b_lane_row(lane),
                                                                        layout::b_lane_chunk(h, lane));
            shrink::test::ldmatrix_x4_model(stage, address, b[j]);
          }
          for (int i = 0; i < Config::kMmaW; ++i)
            for (int j = 0; j < Config::kMmaX; ++j) {
              double d[16][8];
              model_mma_sp<T>(a[i], b[j], e[i], d);
              for (int lane = 0; lane < 32; ++lane)
                for (int r = 0; r < 4; ++r)
                  acc[static_cast<std::size_t>((((warp * Config::kMmaW + i) * Config::kMmaX + j) * 32 + lane) * 4 +
                                               r)] +=
                      d[layout::accumulator_w_row(lane, r)][layout::accumulator_x_row(lane, r)];
            }
        }
      }
    }
    for (int warp = 0; warp < Config::kWarps; ++warp) {
      const int warp_w = warp % Config::kWarpsW, warp_x = warp / Config::kWarpsW;
      for (int i = 0; i < Config::kMmaW; ++i)
        for (int j = 0; j < Config::kMmaX; ++j)
          for (int lane = 0; lane < 32; ++lane)
            for (int r = 0; r < 4; ++r) {
              const std::int64_t row_n =
                  shape.n0 + warp_w * Config::kWarpW + i * 16 + layout::accumulator_w_row(lane, r);
              const std::int64_t row_m =
                  shape.m0 + warp_x * Config::kWarpX + j * 8 + layout::accumulator_x_row(lane, r);
              if (row_n >= n || row_m >= m) continue;
              const std::size_t at = static_cast<std::size_t>(row_m * n + row_n);
              out[at] =
                  acc[static_cast<std::size_t>((((warp * Config::kMmaW + i) * Config::kMmaX + j) * 32 + lane) * 4 + r)];
              ++writes[at];
            }
    }
  }
  CHECK(tiles_seen.size() == static_cast<std::size_t>(tiles_w * tiles_x));
  CHECK(std::count(writes.begin(), writes.end(), 1) == static_cast<std::ptrdiff_t>(writes.size()));
  return out;
}

template <class T, class Config>
void check_replay(std::int64_t m, std::int64_t n, std::int64_t k, std::uint32_t seed) {
  INFO("type size " << sizeof(T) << " tile " << Config::kBlockW << "x" << Config::kBlockX << " M " << m << " N " << n
                    << " K " << k);
  std::mt19937 rng(seed);
  const std::vector<T> x = random_operand<T>(static_cast<std::size_t>(m * k), rng);
  const std::vector<T> dense = random_operand<T>(static_cast<std::size_t>(n * k), rng);
  const auto w =
      shrink::sparse::compress_nm(TensorView<const T>(dense.data(), Shape{n, k}), random_24_mask(n, k, rng), k24);
  const std::vector<T> pruned = shrink::sparse::decompress_nm(w);
  const std::vector<double> got = replay_kernel<T, Config>(x, w, m, n, k);
  int bad = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double expected = 0, scale = 0;
      for (std::int64_t c = 0; c < k; ++c) {
        const double p =
            as_double(x[static_cast<std::size_t>(i * k + c)]) * as_double(pruned[static_cast<std::size_t>(j * k + c)]);
        expected += p;
        scale += std::fabs(p);
      }
      const double g = got[static_cast<std::size_t>(i * n + j)];
      if (!(std::fabs(g - expected) <= 1e-12 * scale) && bad++ < 5) {
        INFO("m " << i << " n " << j << " replayed " << g << " expected " << expected);
        CHECK(false);
      }
    }
  CHECK(bad == 0);
}

template <class T>
void check_replay_all_tiles(std::uint32_t seed) {
  const std::int64_t k = std::is_same_v<T, std::int8_t> ? 192 : 96;  // an odd count of k-steps: a half-empty stage
  for (auto [m, n] : std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 37}, {33, 200}, {130, 70}, {17, 16}}) {
    check_replay<T, layout::Tile32x16>(m, n, k, seed);
    check_replay<T, layout::Tile64x64>(m, n, k, seed + 1);
    check_replay<T, layout::Tile128x128>(m, n, k, seed + 2);
  }
  check_replay<T, layout::Tile64x64>(70, 48, 4 * k, seed + 3);
}

}  // namespace

TEST_CASE("cuda linear_nm kernel arithmetic, replayed on the host with the PTX fragment rules, gives X · Wᵀ",
          "[host]") {
  check_replay_all_tiles<half>(800);
  check_replay_all_tiles<bfloat16>(810);
  check_replay_all_tiles<std::int8_t>(820);
}

namespace {

// Arguments that pass every host check, over fake device pointers: x [8, 64] half, W [24, 64], out [8, 24].
struct FakeArgs {
  LinearNmArgs<half, half> half_args;
  LinearNmArgs<std::int8_t, std::int8_t> int8_args;
  unsigned char* base = static_cast<unsigned char*>(fake_device_pointer());

  FakeArgs() {
    // Distinct ranges inside the 256-byte fake buffer would overlap; the checks only compare addresses, so give each
    // operand its own (never dereferenced) address range far apart.
    auto at = [&](std::uintptr_t offset) {
      return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(base) + offset);
    };
    half_args.x = TensorView<const half>(static_cast<const half*>(at(0)), Shape{8, 64}, Device::cuda(0));
    half_args.w = {static_cast<const half*>(at(1 << 16)),
                   static_cast<const std::uint32_t*>(at(2 << 16)),
                   24,
                   64,
                   k24,
                   Device::cuda(0)};
    half_args.out = TensorView<half>(static_cast<half*>(at(3 << 16)), Shape{8, 24}, Device::cuda(0));
    int8_args.x = TensorView<const std::int8_t>(static_cast<const std::int8_t*>(at(0)), Shape{8, 64}, Device::cuda(0));
    int8_args.w = {static_cast<const std::int8_t*>(at(1 << 16)),
                   static_cast<const std::uint32_t*>(at(2 << 16)),
                   24,
                   64,
                   k24,
                   Device::cuda(0)};
    int8_args.epilogue.x_scales =
        TensorView<const float>(static_cast<const float*>(at(4 << 16)), Shape{8}, Device::cuda(0));
    int8_args.epilogue.w_scales =
        TensorView<const float>(static_cast<const float*>(at(5 << 16)), Shape{1}, Device::cuda(0));
    int8_args.epilogue.bias =
        TensorView<const float>(static_cast<const float*>(at(6 << 16)), Shape{24}, Device::cuda(0));
    int8_args.out = TensorView<std::int8_t>(static_cast<std::int8_t*>(at(3 << 16)), Shape{8, 24}, Device::cuda(0));
    int8_args.epilogue.out_scale = 0.5f;
  }
};

template <class T, class Out>
std::string reason(const LinearNmArgs<T, Out>& a) {
  return shrink::cuda::can_implement_linear_nm(a).reason();
}

}  // namespace

TEST_CASE("cuda linear_nm can_implement names the argument and the reason", "[host]") {
  const FakeArgs fake;
  CHECK(reason(fake.half_args) == "");
  CHECK(reason(fake.int8_args) == "");
  CHECK((shrink::cuda::is_linear_nm_type_pair<half, float>() &&
         !shrink::cuda::is_linear_nm_type_pair<half, bfloat16>() &&
         !shrink::cuda::is_linear_nm_type_pair<float, float>() &&
         shrink::cuda::is_linear_nm_type_pair<std::int8_t, std::int8_t>()));
  {
    LinearNmArgs<half, std::int8_t> a;
    CHECK_THAT(reason(a), Contains("half -> int8") && Contains("half -> half or float"));
  }
  auto h = [&](auto change) {
    auto a = fake.half_args;
    change(a);
    return reason(a);
  };
  auto q = [&](auto change) {
    auto a = fake.int8_args;
    change(a);
    return reason(a);
  };
  using H = LinearNmArgs<half, half>;
  using Q = LinearNmArgs<std::int8_t, std::int8_t>;
  CHECK_THAT(h([](H& a) { a.path = static_cast<LinearNmPath>(9); }), Contains("path"));
  CHECK_THAT(h([](H& a) { a.x = TensorView<const half>(a.x.data(), a.x.shape()); }),
             Contains("x = a view of host memory"));
  CHECK_THAT(h([](H& a) {
               a.x = TensorView<const half>(a.x.data(), Shape{8, 64, 1}, Device::cuda(0));
             }),
             Contains("a 2-D tensor"));
  CHECK_THAT(h([](H& a) {
               a.x = TensorView<const half>(a.x.data(), Shape{0, 64}, Device::cuda(0));
             }),
             Contains("at least one element"));
  CHECK_THAT(h([](H& a) {
               a.x = TensorView<const half>(a.x.data(), Shape{8, 64}, shrink::Strides{1, 8}, Device::cuda(0));
             }),
             Contains("x.strides"));
  CHECK_THAT(h([](H& a) {
               a.x = TensorView<const half>(a.x.data() + 1, Shape{8, 64}, Device::cuda(0));
             }),
             Contains("x = a misaligned pointer: expected alignment to 16 bytes"));
  CHECK_THAT(h([](H& a) { a.w.pattern = NmPattern{1, 4}; }), Contains("w.pattern = 1:4"));
  CHECK_THAT(h([](H& a) { a.w.rows = 0; }), Contains("w.rows"));
  CHECK_THAT(h([](H& a) { a.w.cols = 128; }), Contains("w.cols = 128"));
  CHECK_THAT(h([](H& a) {
               a.x = TensorView<const half>(a.x.data(), Shape{8, 48}, Device::cuda(0));
               a.w.cols = 48;
             }),
             Contains("K a multiple of 32"));
  CHECK_THAT(q([](Q& a) {
               a.x = TensorView<const std::int8_t>(a.x.data(), Shape{8, 96}, Device::cuda(0));
               a.w.cols = 96;
             }),
             Contains("K a multiple of 64"));
  CHECK_THAT(q([](Q& a) {
               a.x = TensorView<const std::int8_t>(
                   a.x.data(), Shape{1, (shrink::cuda::kLinearNmMaxInt8K / 64 + 1) * 64}, Device::cuda(0));
               a.w.cols = a.x.size(1);
               a.out = TensorView<std::int8_t>(a.out.data(), Shape{1, 24}, Device::cuda(0));
               a.epilogue.x_scales = TensorView<const float>(a.epilogue.x_scales.data(), Shape{1}, Device::cuda(0));
             }),
             Contains("int32 accumulators"));
  CHECK_THAT(h([](H& a) { a.w.device = Device::host(); }), Contains("w.device"));
  CHECK_THAT(h([](H& a) { a.w.device = Device::cuda(1); }), Contains("w.device = CUDA 1"));
  CHECK_THAT(h([](H& a) { a.w.values = nullptr; }), Contains("w.values = a null pointer"));
  CHECK_THAT(h([](H& a) { a.w.values += 1; }), Contains("w.values = a misaligned pointer"));
  CHECK_THAT(h([](H& a) { a.w.metadata = nullptr; }), Contains("w.metadata = a null pointer"));
  CHECK_THAT(h([](H& a) { a.w.metadata += 1; }), Contains("w.metadata = a misaligned pointer"));
  CHECK_THAT(h([](H& a) {
               a.out = TensorView<half>(a.out.data(), Shape{8, 25}, Device::cuda(0));
             }),
             Contains("out.shape"));
  CHECK_THAT(h([](H& a) { a.out = TensorView<half>(a.out.data(), Shape{8, 24}); }), Contains("out = a view of host"));
  CHECK_THAT(h([](H& a) {
               a.out = TensorView<half>(a.out.data(), Shape{8, 24}, Device::cuda(2));
             }),
             Contains("out = a view on CUDA device 2"));
  CHECK_THAT(h([](H& a) {
               a.epilogue.x_scales =
                   TensorView<const float>(static_cast<const float*>(fake_device_pointer()), Shape{8}, Device::cuda(0));
             }),
             Contains("x_scales.shape") && Contains("int8 operands"));
  CHECK_THAT(q([](Q& a) { a.epilogue.x_scales = {}; }), Contains("x_scales"));
  CHECK_THAT(q([](Q& a) {
               a.epilogue.x_scales = TensorView<const float>(a.epilogue.x_scales.data(), Shape{7}, Device::cuda(0));
             }),
             Contains("x_scales.shape = [7]: expected [8] or [1] (per token, or per tensor)"));
  CHECK_THAT(q([](Q& a) {
               a.epilogue.w_scales = TensorView<const float>(a.epilogue.w_scales.data(), Shape{23}, Device::cuda(0));
             }),
             Contains("w_scales.shape = [23]"));
  CHECK_THAT(
      q([](Q& a) { a.epilogue.bias = TensorView<const float>(a.epilogue.bias.data(), Shape{23}, Device::cuda(0)); }),
      Contains("bias.shape"));
  CHECK_THAT(q([](Q& a) { a.epilogue.bias = TensorView<const float>(a.epilogue.bias.data(), Shape{24}); }),
             Contains("bias = a view of host"));
  CHECK_THAT(q([](Q& a) { a.epilogue.activation = static_cast<Activation>(7); }), Contains("activation"));
  CHECK_THAT(q([](Q& a) { a.epilogue.out_scale = 0.0f; }), Contains("out_scale"));
  CHECK_THAT(q([](Q& a) { a.epilogue.out_scale = std::numeric_limits<float>::quiet_NaN(); }), Contains("out_scale"));
  CHECK_THAT(h([](H& a) {
               a.out = TensorView<half>(const_cast<half*>(a.x.data()) + 64, Shape{8, 24}, Device::cuda(0));
             }),
             Contains("out = memory overlapping x"));
  CHECK_THAT(
      q([](Q& a) {
        a.out = TensorView<std::int8_t>(const_cast<std::int8_t*>(a.w.values) + 10, Shape{8, 24}, Device::cuda(0));
      }),
      Contains("overlapping w.values"));
  CHECK_THAT(q([](Q& a) {
               a.out =
                   TensorView<std::int8_t>(reinterpret_cast<std::int8_t*>(const_cast<float*>(a.epilogue.bias.data())),
                                           Shape{8, 24}, Device::cuda(0));
             }),
             Contains("overlapping epilogue.bias"));
}

TEST_CASE("cuda linear_nm throws its checks before any CUDA call", "[host]") {
  const FakeArgs fake;
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::linear_nm_workspace_bytes(fake.half_args)};
  CHECK(ws.bytes == shrink::cuda::kStatusBytes);
  auto bad = fake.half_args;
  bad.w.rows = 25;
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(bad, ws, nullptr), Contains("shrink::cuda::linear_nm: out.shape"));
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(fake.half_args, shrink::cuda::Workspace{ws.data, 8}, nullptr),
                    Contains("workspace.bytes"));
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(fake.int8_args, shrink::cuda::Workspace{nullptr, 16}, nullptr),
                    Contains("workspace.data"));
  auto bad_q = fake.int8_args;
  bad_q.epilogue.out_scale = -1.0f;
  CHECK_THROWS_WITH(shrink::cuda::linear_nm(bad_q, ws, nullptr), Contains("out_scale"));
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: every
// block tile once for half and for int8, on a few CTAs.
TEST_CASE("cuda linear_nm sanitizer subset: every tile, half and int8", "[gpu][sanitize]") {
  std::mt19937 rng(705);
  const NmProblem<half> h(33, 200, 192, rng);
  const NmProblem<std::int8_t> q(130, 70, 512, rng);
  EpilogueCase e;
  e.activation = Activation::relu;
  e.bias = true;
  e.out_scale = 0.02f;
  for (LinearNmPath path : kNmPaths) {
    check_against_references<half, half>(h, e, path);
    check_against_references<std::int8_t, std::int8_t>(q, e, path);
  }
}
