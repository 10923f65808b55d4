// Tests for shrink/linear/csr_cuda.hpp: [gpu] cases compare every path (row_dots, row_split, nnz_split, staged,
// automatic) for float, half and bfloat16 with each epilogue against a double product of the decompressed weight and
// against the CPU twin cpu::linear_csr, on random non-zero inputs, non-uniform masks (rows and columns of different
// densities), empty rows, one dense row, unaligned shapes and M = 1; each product runs twice, its output poisoned with
// a different byte each time, and must give the same bits (every element written, deterministic). Device-side index and
// bias checks; [host] cases check can_implement's reasons and the host validation, which throws before any CUDA call.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "shrink/core/epilogue.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/linear/csr.hpp"
#include "shrink/linear/csr_cuda.hpp"
#include "shrink/sparse/csr.hpp"
#include "support/activation_reference.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"

namespace {

using Catch::Matchers::Contains;
using shrink::Activation;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::cuda::LinearCsrArgs;
using shrink::cuda::LinearCsrPath;

using namespace shrink::test;

template <class T>
std::uint32_t bits_of(T v) {
  if constexpr (std::is_same<T, float>::value) {
    std::uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  } else {
    return v.to_bits();
  }
}

// How the weight's kept elements are spread.
enum class MaskKind {
  nonuniform,  // keep probability (1 - sparsity) * row factor * column factor, factors in [0.25, 1.75]
  imbalanced,  // nonuniform, plus empty rows (first, last, a run across a 16-row boundary) and one dense row
};

// A product's host operands: x [M, K] and the dense weight [N, K] (kept elements random and non-zero, in T), its CSR,
// a float bias.
template <class T>
struct CsrProblem {
  std::int64_t m = 0, n = 0, k = 0;
  std::vector<T> x, w;
  shrink::sparse::Csr<T> csr;
  std::vector<float> bias;
};

template <class T>
CsrProblem<T> make_problem(std::int64_t m, std::int64_t n, std::int64_t k, double sparsity, MaskKind kind,
                           std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0), factor(0.25, 1.75);
  CsrProblem<T> p;
  p.m = m, p.n = n, p.k = k;
  p.x.resize(static_cast<std::size_t>(m * k));
  for (T& v : p.x) {
    float f = normal(rng);
    if (std::fabs(f) < 1e-3f) f = 0.75f;
    v = from_float<T>(f);
  }
  std::vector<double> row_factor(static_cast<std::size_t>(n)), col_factor(static_cast<std::size_t>(k));
  for (double& f : row_factor) f = factor(rng);
  for (double& f : col_factor) f = factor(rng);
  p.w.assign(static_cast<std::size_t>(n * k), from_float<T>(0.0f));
  for (std::int64_t r = 0; r < n; ++r) {
    bool empty = false, dense = false;
    if (kind == MaskKind::imbalanced) {
      empty = r == 0 || r == n - 1 || (r >= 14 && r <= 17) || r % 11 == 5;
      dense = r == n / 2 && !empty;
    }
    for (std::int64_t c = 0; c < k; ++c) {
      const double keep =
          (1.0 - sparsity) * row_factor[static_cast<std::size_t>(r)] * col_factor[static_cast<std::size_t>(c)];
      if (empty || (!dense && uniform(rng) >= keep)) continue;
      float f = 0.3f * normal(rng);
      if (std::fabs(f) < 1e-3f) f = 0.3f;
      p.w[static_cast<std::size_t>(r * k + c)] = from_float<T>(f);
    }
  }
  p.csr = shrink::sparse::to_csr(TensorView<const T>(p.w.data(), Shape{n, k}));
  p.bias.resize(static_cast<std::size_t>(n));
  for (float& b : p.bias) b = normal(rng);
  return p;
}

// The double product of x and the decompressed (dense) weight, and Σ |x · w| for the error bound.
template <class T>
void dense_reference(const CsrProblem<T>& p, std::vector<double>& value, std::vector<double>& magnitude) {
  const std::vector<T> dense = shrink::sparse::to_dense(p.csr);
  REQUIRE(dense.size() == p.w.size());
  value.assign(static_cast<std::size_t>(p.m * p.n), 0.0);
  magnitude.assign(value.size(), 0.0);
  std::vector<double> wd(dense.size()), xd(p.x.size());
  for (std::size_t i = 0; i < dense.size(); ++i) wd[i] = to_float(dense[i]);
  for (std::size_t i = 0; i < p.x.size(); ++i) xd[i] = to_float(p.x[i]);
  for (std::int64_t m = 0; m < p.m; ++m)
    for (std::int64_t n = 0; n < p.n; ++n) {
      double s = 0, a = 0;
      const double* xr = &xd[static_cast<std::size_t>(m * p.k)];
      const double* wr = &wd[static_cast<std::size_t>(n * p.k)];
      for (std::int64_t k = 0; k < p.k; ++k) {
        s += xr[k] * wr[k];
        a += std::fabs(xr[k] * wr[k]);
      }
      value[static_cast<std::size_t>(m * p.n + n)] = s;
      magnitude[static_cast<std::size_t>(m * p.n + n)] = a;
    }
}

// The problem's arrays on the device, and args over them.
template <class T>
struct CsrDeviceProblem {
  DeviceBuffer x, offsets, columns, values, bias, out;

  explicit CsrDeviceProblem(const CsrProblem<T>& p)
      : x(p.x.size() * sizeof(T)),
        offsets(p.csr.row_offsets.size() * 4),
        columns(p.csr.column_indices.size() * 4),
        values(p.csr.values.size() * sizeof(T)),
        bias(p.bias.size() * 4),
        out(static_cast<std::size_t>(p.m * p.n) * sizeof(T)) {
    x.upload(p.x.data(), x.bytes());
    offsets.upload(p.csr.row_offsets.data(), offsets.bytes());
    if (columns.bytes() > 0) columns.upload(p.csr.column_indices.data(), columns.bytes());
    if (values.bytes() > 0) values.upload(p.csr.values.data(), values.bytes());
    bias.upload(p.bias.data(), bias.bytes());
  }

  LinearCsrArgs<T> args(const CsrProblem<T>& p, bool with_bias, Activation activation, LinearCsrPath path) const {
    const Device d = Device::cuda(0);
    const std::int64_t nnz = p.csr.nnz();
    LinearCsrArgs<T> a;
    a.x = TensorView<const T>(x.as<T>(), Shape{p.m, p.k}, d);
    a.row_offsets = TensorView<const std::int32_t>(offsets.as<std::int32_t>(), Shape{p.n + 1}, d);
    a.column_indices = TensorView<const std::int32_t>(nnz > 0 ? columns.as<std::int32_t>() : nullptr, Shape{nnz}, d);
    a.values = TensorView<const T>(nnz > 0 ? values.as<T>() : nullptr, Shape{nnz}, d);
    if (with_bias) a.epilogue.bias = TensorView<const float>(bias.as<float>(), Shape{p.n}, d);
    a.epilogue.activation = activation;
    a.out = TensorView<T>(out.as<T>(), Shape{p.m, p.n}, d);
    a.path = path;
    return a;
  }
};

// Runs the product with out and the workspace poisoned with `poison` bytes; returns out.
template <class T>
std::vector<T> run(const LinearCsrArgs<T>& args, DeviceBuffer& out, unsigned char poison) {
  DeviceBuffer workspace(shrink::cuda::linear_csr_workspace_bytes(args));
  CUDA_REQUIRE(cudaMemset(workspace.as<void>(), poison, workspace.bytes()));
  CUDA_REQUIRE(cudaMemset(out.as<void>(), poison, out.bytes()));
  shrink::cuda::linear_csr(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes);
  return out.download<T>(static_cast<std::size_t>(args.out.numel()));
}

// One configuration: twice on the device (bits equal despite different poisons), against the double product of the
// decompressed weight (1e-5 relative for float, 1e-2 for half and bfloat16, plus float accumulation over Σ|x·w|) and
// against the CPU twin (twice that bound).
template <class T>
void check_product(const CsrProblem<T>& p, CsrDeviceProblem<T>& device, bool with_bias, Activation activation,
                   LinearCsrPath path) {
  INFO("M " << p.m << " N " << p.n << " K " << p.k << " nnz " << p.csr.nnz() << " type size " << sizeof(T) << " path "
            << shrink::cuda::to_string(path) << " activation " << shrink::to_string(activation)
            << (with_bias ? " bias" : ""));
  const LinearCsrArgs<T> args = device.args(p, with_bias, activation, path);
  REQUIRE(shrink::cuda::can_implement_linear_csr(args).reason() == "");
  const std::vector<T> first = run(args, device.out, 0xA5);
  const std::vector<T> second = run(args, device.out, 0x5A);
  std::size_t differing = 0;
  for (std::size_t i = 0; i < first.size(); ++i) differing += bits_of(first[i]) != bits_of(second[i]);
  CHECK(differing == 0);

  std::vector<T> cpu_out(first.size());
  shrink::Epilogue e;
  if (with_bias) e.bias = TensorView<const float>(p.bias.data(), Shape{p.n});
  e.activation = activation;
  shrink::cpu::linear_csr(TensorView<const T>(p.x.data(), Shape{p.m, p.k}), p.csr,
                          TensorView<T>(cpu_out.data(), Shape{p.m, p.n}), e);

  std::vector<double> value, magnitude;
  dense_reference(p, value, magnitude);
  const double relative = std::is_same<T, float>::value ? 1e-5 : 1e-2;
  MismatchMap mismatches(p.m, p.n, 64, 16);  // tiles of 16 weight rows (the tile kernel)
  for (std::int64_t i = 0; i < p.m * p.n; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const double b = with_bias ? p.bias[static_cast<std::size_t>(i % p.n)] : 0.0;
    const double expected = activate_reference(value[at] + b, activation);
    const double bound = relative * std::fabs(expected) + 1e-5 * (magnitude[at] + std::fabs(b)) + 1e-30;
    const double got = to_float(first[at]), cpu = to_float(cpu_out[at]);
    const bool ok = std::fabs(got - expected) <= bound && std::fabs(got - cpu) <= 2 * bound;
    if (!ok) mismatches.add(i / p.n, i % p.n, got, expected);
  }
  CHECK_NO_MISMATCHES(mismatches);
}

template <class T>
std::vector<LinearCsrPath> paths_for(std::int64_t m) {
  std::vector<LinearCsrPath> paths = {LinearCsrPath::automatic, LinearCsrPath::row_split, LinearCsrPath::nnz_split,
                                      LinearCsrPath::staged};
  if (m <= shrink::cuda::kCsrRowDotsMaxM) paths.push_back(LinearCsrPath::row_dots);
  return paths;
}

template <class T>
void check_shapes_and_sparsities(std::uint32_t seed) {
  // M: 1 (x read directly), row_dots sizes, 8-byte-lane tiles (<= 64 floats, <= 128 halves), several 16-byte tiles.
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> shapes = {
      {1, 37, 45},  {2, 33, 64},   {5, 130, 333}, {16, 77, 200}, {17, 40, 129},
      {64, 33, 97}, {65, 70, 300}, {129, 50, 61}, {300, 45, 130}};
  int config = 0;
  for (auto [m, n, k] : shapes)
    for (double sparsity : {0.5, 0.7, 0.9, 0.99}) {
      const CsrProblem<T> p = make_problem<T>(m, n, k, sparsity, MaskKind::nonuniform, seed++);
      CsrDeviceProblem<T> device(p);
      for (LinearCsrPath path : paths_for<T>(m)) {
        const Activation activation = kActivations[config % 4];
        check_product(p, device, config % 3 != 0, activation, path);
        ++config;
      }
    }
}

template <class T>
void check_imbalanced(std::uint32_t seed) {
  for (std::int64_t m : {1, 7, 16, 40, 200}) {
    const CsrProblem<T> p = make_problem<T>(m, 70, 257, 0.9, MaskKind::imbalanced, seed++);
    CsrDeviceProblem<T> device(p);
    for (LinearCsrPath path : paths_for<T>(m))
      for (Activation activation : kActivations) check_product(p, device, true, activation, path);
  }
}

// Every row empty (nnz = 0, null value and index views): out = act(bias).
template <class T>
void check_empty_weight() {
  for (std::int64_t m : {1, 9, 150}) {
    const CsrProblem<T> p = make_problem<T>(m, 20, 33, 1.0, MaskKind::nonuniform, 5);
    REQUIRE(p.csr.nnz() == 0);
    CsrDeviceProblem<T> device(p);
    for (LinearCsrPath path : paths_for<T>(m)) check_product(p, device, true, Activation::silu, path);
  }
}

}  // namespace

TEST_CASE("cuda linear_csr matches the dense double product and the CPU twin: float", "[gpu]") {
  check_shapes_and_sparsities<float>(100);
  check_imbalanced<float>(200);
  check_empty_weight<float>();
}

TEST_CASE("cuda linear_csr matches the dense double product and the CPU twin: half", "[gpu]") {
  check_shapes_and_sparsities<half>(300);
  check_imbalanced<half>(400);
  check_empty_weight<half>();
}

TEST_CASE("cuda linear_csr matches the dense double product and the CPU twin: bfloat16", "[gpu]") {
  check_shapes_and_sparsities<bfloat16>(500);
  check_imbalanced<bfloat16>(600);
  check_empty_weight<bfloat16>();
}

TEST_CASE("cuda linear_csr on a layer that fills the device (many CTAs, several tiles of M)", "[gpu]") {
  const CsrProblem<float> p = make_problem<float>(1000, 700, 1024, 0.9, MaskKind::imbalanced, 700);
  CsrDeviceProblem<float> device(p);
  for (LinearCsrPath path : {LinearCsrPath::row_split, LinearCsrPath::nnz_split, LinearCsrPath::staged})
    check_product(p, device, true, Activation::gelu, path);
  const CsrProblem<half> q = make_problem<half>(16, 4096, 1000, 0.95, MaskKind::nonuniform, 701);
  CsrDeviceProblem<half> device_q(q);
  check_product(q, device_q, true, Activation::none, LinearCsrPath::row_dots);
}

TEST_CASE("cuda linear_csr flags bad CSR indices and a non-finite bias on the device", "[gpu]") {
  const CsrProblem<float> p = make_problem<float>(20, 40, 90, 0.8, MaskKind::nonuniform, 800);
  REQUIRE(p.csr.row_offsets[2] - p.csr.row_offsets[1] >= 2);
  // Each corruption, on every path; the call throws naming the check (and must not fault: memcheck runs this too).
  const auto corrupt_and_expect = [&](auto corrupt, const char* fragment) {
    CsrProblem<float> bad = p;
    corrupt(bad);
    for (std::int64_t m : {std::int64_t{1}, std::int64_t{5}, std::int64_t{20}}) {
      CsrProblem<float> shaped = bad;
      shaped.m = m;
      shaped.x.resize(static_cast<std::size_t>(m * p.k));
      CsrDeviceProblem<float> device(shaped);
      for (LinearCsrPath path : paths_for<float>(m)) {
        INFO("corruption '" << fragment << "' M " << m << " path " << shrink::cuda::to_string(path));
        const auto args = device.args(shaped, true, Activation::none, path);
        DeviceBuffer workspace(shrink::cuda::linear_csr_workspace_bytes(args));
        CHECK_THROWS_WITH(
            shrink::cuda::linear_csr(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes),
            Contains(fragment));
      }
    }
  };
  const char* index = "sparse index";
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.column_indices[3] = static_cast<std::int32_t>(p.k); }, index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.column_indices.back() = -1; }, index);
  corrupt_and_expect(
      [&](CsrProblem<float>& b) {
        const auto first = static_cast<std::size_t>(b.csr.row_offsets[1]);
        std::swap(b.csr.column_indices[first], b.csr.column_indices[first + 1]);  // unsorted
      },
      index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.row_offsets[3] = b.csr.row_offsets[4] + 1; }, index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.row_offsets[0] = 1; }, index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.row_offsets.back() -= 1; }, index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.row_offsets[7] = std::numeric_limits<std::int32_t>::max(); },
                     index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.csr.row_offsets[9] = -5; }, index);
  corrupt_and_expect([&](CsrProblem<float>& b) { b.bias[13] = std::numeric_limits<float>::infinity(); }, "NaN or inf");
}

// ---------------------------------------------------------------------------------------------------------------------
// [host]: validation before any CUDA call, with pointers that are never dereferenced.

namespace {

// Distinct, aligned, never-dereferenced addresses, one region per operand so that only the overlaps a test builds
// are seen.
void* fake_region(int region) {
  alignas(256) static unsigned char arena[8][4096];
  return arena[region];
}

struct CsrHostArgs {
  LinearCsrArgs<float> args;
  CsrHostArgs(std::int64_t m = 4, std::int64_t n = 6, std::int64_t k = 8, std::int64_t nnz = 10) {
    const Device d = Device::cuda(0);
    args.x = TensorView<const float>(static_cast<const float*>(fake_region(0)), Shape{m, k}, d);
    args.row_offsets =
        TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(1)), Shape{n + 1}, d);
    args.column_indices =
        TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(2)), Shape{nnz}, d);
    args.values = TensorView<const float>(static_cast<const float*>(fake_region(3)), Shape{nnz}, d);
    args.epilogue.bias = TensorView<const float>(static_cast<const float*>(fake_region(4)), Shape{n}, d);
    args.out = TensorView<float>(static_cast<float*>(fake_region(5)), Shape{m, n}, d);
  }
};

std::string reason(const LinearCsrArgs<float>& a) { return shrink::cuda::can_implement_linear_csr(a).reason(); }

}  // namespace

TEST_CASE("cuda linear_csr: can_implement names the argument at fault", "[host]") {
  CHECK(reason(CsrHostArgs().args) == "");
  {
    CsrHostArgs h;
    h.args.x = TensorView<const float>(static_cast<const float*>(fake_region(0)), Shape{4, 8});
    CHECK_THAT(reason(h.args), Contains("x = a view of host memory"));
  }
  {
    CsrHostArgs h;
    h.args.x = TensorView<const float>(static_cast<const float*>(fake_region(0)), Shape{32}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("x.shape = [32]"));
  }
  {
    CsrHostArgs h;
    h.args.x = TensorView<const float>(static_cast<const float*>(fake_region(0)), Shape{4, 8}, shrink::Strides{1, 4},
                                       Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("x.strides"));
  }
  {
    CsrHostArgs h;
    h.args.x = TensorView<const float>(reinterpret_cast<const float*>(static_cast<char*>(fake_region(0)) + 2),
                                       Shape{4, 8}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("x = a misaligned pointer"));
  }
  {
    CsrHostArgs h;
    h.args.row_offsets =
        TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(1)), Shape{1}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("row_offsets.shape = [1]"));
  }
  {
    CsrHostArgs h;
    h.args.values = TensorView<const float>(static_cast<const float*>(fake_region(3)), Shape{9}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("as many column indices as values (9)"));
  }
  {
    CsrHostArgs h;
    h.args.values = TensorView<const float>(static_cast<const float*>(fake_region(3)), Shape{10});
    CHECK_THAT(reason(h.args), Contains("values = a view of host memory"));
  }
  {
    CsrHostArgs h;
    h.args.epilogue.bias =
        TensorView<const float>(static_cast<const float*>(fake_region(4)), Shape{7}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("bias.shape = [7]"));
  }
  {
    CsrHostArgs h;
    h.args.epilogue.bias = TensorView<const float>(static_cast<const float*>(fake_region(4)), Shape{6});
    CHECK_THAT(reason(h.args), Contains("bias = a view of host memory"));
  }
  {
    CsrHostArgs h;
    h.args.epilogue.bias = TensorView<const float>();  // no bias
    CHECK(reason(h.args) == "");
  }
  {
    CsrHostArgs h;
    h.args.epilogue.activation = static_cast<Activation>(9);
    CHECK_THAT(reason(h.args), Contains("activation = 9"));
  }
  {
    CsrHostArgs h;
    h.args.out = TensorView<float>(static_cast<float*>(fake_region(5)), Shape{4, 5}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("out.shape = [4, 5]: expected [4, 6]"));
  }
  {
    CsrHostArgs h;
    h.args.out = TensorView<float>(static_cast<float*>(fake_region(5)), Shape{4, 6}, Device::cuda(1));
    CHECK_THAT(reason(h.args), Contains("out = a view on CUDA device 1"));
  }
  {
    CsrHostArgs h;
    h.args.out = TensorView<float>(static_cast<float*>(fake_region(0)) + 8, Shape{4, 6}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("out = memory overlapping x"));
  }
  {
    CsrHostArgs h;
    h.args.out = TensorView<float>(static_cast<float*>(fake_region(4)), Shape{4, 6}, Device::cuda(0));
    CHECK_THAT(reason(h.args), Contains("out = memory overlapping epilogue.bias"));
  }
  {
    CsrHostArgs h(17);
    h.args.path = LinearCsrPath::row_dots;
    CHECK_THAT(reason(h.args), Contains("path = row_dots with M = 17"));
    h.args.path = LinearCsrPath::nnz_split;
    CHECK(reason(h.args) == "");
  }
  {
    CsrHostArgs h(4, 6, 8, 0);  // every row empty: empty index and value views are fine, even null
    h.args.column_indices = TensorView<const std::int32_t>(nullptr, Shape{0}, Device::cuda(0));
    h.args.values = TensorView<const float>(nullptr, Shape{0}, Device::cuda(0));
    CHECK(reason(h.args) == "");
  }
}

TEST_CASE("cuda linear_csr: path choice and workspace sizes", "[host]") {
  using shrink::cuda::linear_csr_path;
  using shrink::cuda::linear_csr_workspace_bytes;
  CsrHostArgs one(1, 6, 10), sixteen(16, 6, 10), seventeen(17, 6, 10);
  CHECK(linear_csr_path(one.args) == LinearCsrPath::row_dots);
  CHECK(linear_csr_path(sixteen.args) == LinearCsrPath::row_dots);
  CHECK(linear_csr_path(seventeen.args) == LinearCsrPath::staged);  // 10 of 60 elements stored: dense enough
  seventeen.args.column_indices =
      TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(2)), Shape{2}, Device::cuda(0));
  seventeen.args.values = TensorView<const float>(static_cast<const float*>(fake_region(3)), Shape{2}, Device::cuda(0));
  CHECK(linear_csr_path(seventeen.args) == LinearCsrPath::nnz_split);         // 2 of 60: below 5%
  CHECK(linear_csr_workspace_bytes(one.args) == shrink::cuda::kStatusBytes);  // x read directly
  CHECK(linear_csr_workspace_bytes(sixteen.args) == 16 + 10 * 16 * 4);
  CHECK(linear_csr_workspace_bytes(seventeen.args) == 16 + 10 * 24 * 4);
  one.args.path = LinearCsrPath::row_split;
  CHECK(linear_csr_workspace_bytes(one.args) == 16 + 10 * 8 * 4);  // Xᵀ rows padded to 8 elements
  LinearCsrArgs<half> h;
  const Device d = Device::cuda(0);
  h.x = TensorView<const half>(static_cast<const half*>(fake_region(0)), Shape{3, 5}, d);
  h.row_offsets = TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(1)), Shape{3}, d);
  h.column_indices = TensorView<const std::int32_t>(static_cast<const std::int32_t*>(fake_region(2)), Shape{4}, d);
  h.values = TensorView<const half>(static_cast<const half*>(fake_region(3)), Shape{4}, d);
  h.out = TensorView<half>(static_cast<half*>(fake_region(5)), Shape{3, 2}, d);
  CHECK(linear_csr_workspace_bytes(h) == 16 + 80);  // K 5 · 8 padded halves · 2 bytes
  h.out = TensorView<half>(static_cast<half*>(fake_region(5)), Shape{3, 3}, d);
  CHECK_THROWS_WITH(linear_csr_workspace_bytes(h), Contains("out.shape = [3, 3]"));
}

TEST_CASE("cuda linear_csr validates its arguments on the host before any CUDA call", "[host]") {
  using shrink::cuda::linear_csr;
  const CsrHostArgs h;
  const std::size_t bytes = shrink::cuda::linear_csr_workspace_bytes(h.args);
  CHECK_THROWS_WITH(linear_csr(h.args, {fake_region(6), bytes - 4}, nullptr), Contains("workspace.bytes"));
  CHECK_THROWS_WITH(linear_csr(h.args, {nullptr, bytes}, nullptr), Contains("workspace.data = a null pointer"));
  CHECK_THROWS_WITH(linear_csr(h.args, {static_cast<char*>(fake_region(6)) + 8, bytes}, nullptr),
                    Contains("workspace.data = a misaligned pointer"));
  CHECK_THROWS_WITH(linear_csr(h.args, {fake_region(5), bytes}, nullptr),
                    Contains("workspace.data = memory overlapping out"));
  CHECK_THROWS_WITH(linear_csr(h.args, {fake_region(2), bytes}, nullptr),
                    Contains("workspace.data = memory overlapping column_indices"));
  CsrHostArgs wrong;
  wrong.args.out = TensorView<float>(static_cast<float*>(fake_region(5)), Shape{3, 6}, Device::cuda(0));
  CHECK_THROWS_WITH(linear_csr(wrong.args, {fake_region(6), bytes}, nullptr),
                    Contains("shrink::cuda::linear_csr: out.shape = [3, 6]: expected [4, 6] ([M, N])"));
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: every
// path (row_dots where M allows) on an imbalanced weight, at one M under a tile and one over.
TEST_CASE("cuda linear_csr sanitizer subset: every path at M 5 and 65", "[gpu][sanitize]") {
  for (const std::int64_t m : {5, 65}) {
    const CsrProblem<half> p =
        make_problem<half>(m, 130, 333, 0.9, MaskKind::imbalanced, static_cast<std::uint32_t>(800 + m));
    CsrDeviceProblem<half> device(p);
    for (LinearCsrPath path : paths_for<half>(m)) check_product(p, device, true, Activation::relu, path);
  }
}
