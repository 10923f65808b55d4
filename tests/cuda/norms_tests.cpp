// Tests for shrink/cuda/norms.hpp: [gpu] cases compare slice and block norms with prune/norm.hpp on random non-zero
// weights (float, half, bfloat16 widened to float for the CPU), every dim of odd shapes that take both layouts of the
// work, with and without masks (whole slices pruned too), norms poisoned before each launch: inf and small blocks
// exactly, l1 / l2 within the bound the header derives; the same call twice gives the same bits. [host] cases check
// the argument validation, which throws before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/axis.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/norms.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/norm.hpp"
#include "support/element_types.hpp"

namespace {

using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::prune::Mask;
using shrink::prune::NormOrder;
using Catch::Matchers::Contains;

using namespace shrink::test;

// Non-zero weights over several scales and both signs (representable in T, so the CPU sees the GPU's values).
template <class T>
std::vector<T> random_scaled_weights(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-6, 3);
  std::vector<T> x(static_cast<std::size_t>(n));
  for (T& v : x) {
    float f = 0.0f;
    do f = std::ldexp(normal(rng), scale(rng));
    while (f == 0.0f);
    if constexpr (std::is_same<T, float>::value) v = f;
    else v = T(f);
    if (to_float(v) == 0.0f) v = T(0.5f);
  }
  return x;
}

template <class T>
std::vector<float> widened(const std::vector<T>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = to_float(x[i]);
  return out;
}

// A random mask pruning about a third of the elements, and every element of slice `pruned_slice` along `axis`.
Mask random_mask(const Shape& shape, int axis, std::int64_t pruned_slice, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Mask mask(shape, true);
  for (std::int64_t i = 0; i < mask.size(); ++i)
    if (rng() % 3 == 0) mask.prune(i);
  const shrink::AxisSplit split = shrink::split_at_axis(shape, axis);
  for (std::int64_t o = 0; o < split.outer; ++o)
    for (std::int64_t i = 0; i < split.inner; ++i) mask.prune((o * split.channels + pruned_slice) * split.inner + i);
  return mask;
}

// |gpu - cpu| within twice gamma(terms - 1) of cpu (both sums of non-negative terms), at least 1e-12 relative; inf and
// exact paths compare equal.
void check_norms(const std::vector<double>& gpu, const std::vector<double>& cpu, std::int64_t terms, bool exact) {
  REQUIRE(gpu.size() == cpu.size());
  const double u = std::ldexp(1.0, -53);
  const double tolerance = exact ? 0.0 : std::max(1e-12, 2.0 * static_cast<double>(terms - 1) * u * 1.0001);
  for (std::size_t c = 0; c < cpu.size(); ++c) {
    INFO("entry " << c << " cpu " << cpu[c] << " gpu " << gpu[c] << " tolerance " << tolerance);
    if (exact) {
      CHECK(std::memcmp(&gpu[c], &cpu[c], sizeof(double)) == 0);
    } else {
      CHECK(std::fabs(gpu[c] - cpu[c]) <= tolerance * cpu[c]);
    }
  }
}

template <class T>
void check_slices(const Shape& shape, std::uint32_t seed) {
  const std::vector<T> x = random_scaled_weights<T>(shape.product(), seed);
  const std::vector<float> xf = widened(x);
  const TensorView<const float> host(xf.data(), shape);
  DeviceBuffer x_dev(x.size() * sizeof(T));
  x_dev.upload(x.data(), x_dev.bytes());
  const TensorView<const T> view(x_dev.as<T>(), shape, Device::cuda(0));

  for (int axis = 0; axis < shape.rank; ++axis) {
    const std::int64_t slices = shape[axis];
    const std::int64_t terms = shape.product() / slices;
    const Mask mask = random_mask(shape, axis, slices / 2, seed + static_cast<std::uint32_t>(axis));
    DeviceBuffer mask_dev(mask.words().size() * sizeof(std::uint64_t));
    mask_dev.upload(mask.words().data(), mask_dev.bytes());
    DeviceBuffer ws(shrink::cuda::slice_norms_workspace_bytes(shape, axis));
    DeviceBuffer norms(static_cast<std::size_t>(slices) * sizeof(double));
    for (const bool masked : {false, true})
      for (const NormOrder n : {NormOrder::l1, NormOrder::l2, NormOrder::inf}) {
        INFO("type size " << sizeof(T) << " shape " << shrink::to_string(shape) << " dim " << axis << " norm "
                          << shrink::prune::norm_name(n) << (masked ? " masked" : ""));
        const std::vector<double> cpu = shrink::prune::masked_slice_norms(host, n, axis, masked ? &mask : nullptr);
        norms.poison();
        // A negative dim names the same slices.
        const int dim = axis % 2 ? axis - shape.rank : axis;
        shrink::cuda::slice_norms(view, masked ? mask_dev.as<std::uint64_t>() : nullptr, n, dim,
                                  norms.as<double>(), ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
        const std::vector<double> gpu = norms.download<double>(static_cast<std::size_t>(slices));
        check_norms(gpu, cpu, terms, n == NormOrder::inf);
        if (masked) CHECK(gpu[static_cast<std::size_t>(slices / 2)] == 0.0);

        norms.poison();  // the same order every run: the same bits
        shrink::cuda::slice_norms(view, masked ? mask_dev.as<std::uint64_t>() : nullptr, n, dim,
                                  norms.as<double>(), ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
        const std::vector<double> again = norms.download<double>(static_cast<std::size_t>(slices));
        CHECK(std::memcmp(again.data(), gpu.data(), gpu.size() * sizeof(double)) == 0);
      }
  }
}

// The CPU has no masked block norms: the masked weights (pruned elements zeroed) give the same sums.
template <class T>
void check_blocks(const Shape& shape, std::int64_t block_rows, std::int64_t block_cols, std::uint32_t seed) {
  const std::vector<T> x = random_scaled_weights<T>(shape.product(), seed);
  const std::vector<float> xf = widened(x);
  DeviceBuffer x_dev(x.size() * sizeof(T));
  x_dev.upload(x.data(), x_dev.bytes());
  const TensorView<const T> view(x_dev.as<T>(), shape, Device::cuda(0));
  const Mask mask = random_mask(shape, 0, 0, seed + 1);
  std::vector<float> masked_xf = xf;
  for (std::int64_t i = 0; i < mask.size(); ++i)
    if (!mask.kept(i)) masked_xf[static_cast<std::size_t>(i)] = 0.0f;
  DeviceBuffer mask_dev(mask.words().size() * sizeof(std::uint64_t));
  mask_dev.upload(mask.words().data(), mask_dev.bytes());
  const std::int64_t blocks = shape.product() / (block_rows * block_cols);
  DeviceBuffer ws(shrink::cuda::block_norms_workspace_bytes());
  DeviceBuffer norms(static_cast<std::size_t>(blocks) * sizeof(double));
  const bool exact_sums = block_rows * block_cols < shrink::cuda::kExactBlockElements;

  for (const bool masked : {false, true})
    for (const NormOrder n : {NormOrder::l1, NormOrder::l2, NormOrder::inf}) {
      INFO("type size " << sizeof(T) << " shape " << shrink::to_string(shape) << " blocks " << block_rows << "x"
                        << block_cols << " norm " << shrink::prune::norm_name(n) << (masked ? " masked" : ""));
      const TensorView<const float> host(masked ? masked_xf.data() : xf.data(), shape);
      const std::vector<double> cpu = shrink::prune::block_norms(host, block_rows, block_cols, n);
      norms.poison();
      shrink::cuda::block_norms(view, masked ? mask_dev.as<std::uint64_t>() : nullptr, block_rows, block_cols, n,
                                norms.as<double>(), ws.workspace(), nullptr, shrink::cuda::Synchronize::yes);
      const std::vector<double> gpu = norms.download<double>(static_cast<std::size_t>(blocks));
      check_norms(gpu, cpu, block_rows * block_cols, exact_sums || n == NormOrder::inf);
    }
}

template <class T>
void check_all_slices(std::uint32_t seed) {
  check_slices<T>(Shape{37, 45}, seed);          // columns layout both ways
  check_slices<T>(Shape{300, 1000}, seed + 1);   // dim 0: runs of 1000 (segments); dim 1: columns
  check_slices<T>(Shape{5, 7, 3, 3}, seed + 2);  // conv weights: every dim
  check_slices<T>(Shape{3, 20000}, seed + 3);    // runs longer than a piece: several pieces a slice
  check_slices<T>(Shape{1000, 5, 256}, seed + 4);  // dim 1: groups of whole runs, the last one partial
  check_slices<T>(Shape{1001}, seed + 5);        // one element a slice
  check_slices<T>(Shape{70000, 3}, seed + 6);    // dim 1: thousands of row groups
  check_slices<T>(Shape{257, 130}, seed + 7);    // dim 0: one slice a tile of 130 columns
}

template <class T>
void check_all_blocks(std::uint32_t seed) {
  check_blocks<T>(Shape{8, 12}, 1, 4, seed);
  check_blocks<T>(Shape{8, 12}, 4, 4, seed + 1);
  check_blocks<T>(Shape{9, 15}, 3, 5, seed + 2);
  check_blocks<T>(Shape{7, 5}, 1, 1, seed + 3);
  check_blocks<T>(Shape{3, 16, 20}, 4, 5, seed + 4);   // stacked matrices
  check_blocks<T>(Shape{15, 255}, 1, 255, seed + 5);   // one element short of the warp path
  check_blocks<T>(Shape{64, 64}, 16, 16, seed + 6);    // warp path, 256 elements
  check_blocks<T>(Shape{2, 64, 128}, 32, 64, seed + 7);
  check_blocks<T>(Shape{2, 48, 40}, 16, 20, seed + 8);  // rows of 20: lanes wrap across rows
  check_blocks<T>(Shape{512, 3}, 256, 1, seed + 9);     // one column a block
}

}  // namespace

TEST_CASE("cuda slice_norms match prune::slice_norms along every dim, masked or not", "[gpu]") {
  check_all_slices<float>(100);
  check_all_slices<half>(200);
  check_all_slices<bfloat16>(300);
}

TEST_CASE("cuda block_norms match prune::block_norms, masked or not", "[gpu]") {
  check_all_blocks<float>(400);
  check_all_blocks<half>(500);
  check_all_blocks<bfloat16>(600);
}

TEST_CASE("cuda slice_norms and block_norms flag NaN and inf, pruned or not", "[gpu][sanitize]") {
  const Shape shape{6, 40};
  std::vector<float> x = random_scaled_weights<float>(shape.product(), 7);
  Mask mask(shape, true);
  mask.prune(77);
  DeviceBuffer x_dev(x.size() * 4), mask_dev(mask.words().size() * 8), norms(6 * 60 * 8);
  mask_dev.upload(mask.words().data(), mask_dev.bytes());
  DeviceBuffer ws(std::max(shrink::cuda::slice_norms_workspace_bytes(shape, 0),
                           shrink::cuda::slice_norms_workspace_bytes(shape, 1)));
  const TensorView<const float> view(x_dev.as<float>(), shape, Device::cuda(0));
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    x[77] = bad;  // pruned by the mask: still an error, as on the CPU
    x_dev.upload(x.data(), x_dev.bytes());
    for (const int dim : {0, 1})
      CHECK_THROWS_WITH(shrink::cuda::slice_norms(view, mask_dev.as<std::uint64_t>(), NormOrder::l2, dim,
                                                  norms.as<double>(), ws.workspace(), nullptr,
                                                  shrink::cuda::Synchronize::yes),
                        Contains("NaN or inf"));
    CHECK_THROWS_WITH(shrink::cuda::block_norms(view, mask_dev.as<std::uint64_t>(), 2, 4, NormOrder::l1,
                                                norms.as<double>(), ws.workspace(), nullptr,
                                                shrink::cuda::Synchronize::yes),
                      Contains("NaN or inf"));
    CHECK_THROWS_WITH(shrink::cuda::block_norms(view, nullptr, 6, 40, NormOrder::inf, norms.as<double>(),
                                                ws.workspace(), nullptr, shrink::cuda::Synchronize::yes),
                      Contains("NaN or inf"));
  }
  x[77] = 1.0f;  // and a clean call afterwards passes (the status word is cleared by each call)
  x_dev.upload(x.data(), x_dev.bytes());
  CHECK_NOTHROW(shrink::cuda::slice_norms(view, nullptr, NormOrder::l1, 0, norms.as<double>(), ws.workspace(),
                                          nullptr, shrink::cuda::Synchronize::yes));
}

TEST_CASE("cuda slice_norms_workspace_bytes: the status word and the partial sums", "[host]") {
  using shrink::cuda::slice_norms_workspace_bytes;
  CHECK(slice_norms_workspace_bytes(Shape{4096, 4096}, 0) >= shrink::cuda::kStatusBytes + 4096 * sizeof(double));
  CHECK(slice_norms_workspace_bytes(Shape{4096, 4096}, -1) >= shrink::cuda::kStatusBytes + 4096 * sizeof(double));
  CHECK(slice_norms_workspace_bytes(Shape{7}, 0) == shrink::cuda::kStatusBytes + 7 * sizeof(double));
  CHECK_THROWS_WITH(slice_norms_workspace_bytes(Shape{4, 5}, 2), Contains("dim"));
  CHECK_THROWS_WITH(slice_norms_workspace_bytes(Shape{4, 0}, 0), Contains("non-empty"));
  CHECK(shrink::cuda::block_norms_workspace_bytes() == shrink::cuda::kStatusBytes);
}

TEST_CASE("cuda slice_norms validates its arguments on the host", "[host]") {
  using shrink::cuda::slice_norms;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* out = static_cast<double*>(fake_device_pointer());
  const Shape shape{4, 8};
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::slice_norms_workspace_bytes(shape, 0)};
  const TensorView<const float> good(data, shape, Device::cuda(0));
  CHECK_THROWS_WITH(slice_norms(TensorView<const float>(data, shape), nullptr, NormOrder::l2, 0, out, ws, nullptr),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(slice_norms(TensorView<const float>(data, Shape{0, 8}, Device::cuda(0)), nullptr, NormOrder::l2,
                                0, out, ws, nullptr),
                    Contains("at least one element"));
  CHECK_THROWS_WITH(slice_norms(TensorView<const float>(data, shape, shrink::Strides{1, 4}, Device::cuda(0)), nullptr,
                                NormOrder::l2, 0, out, ws, nullptr),
                    Contains("contiguous"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, NormOrder::l2, 2, out, ws, nullptr), Contains("dim"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, NormOrder::l2, -3, out, ws, nullptr), Contains("dim"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, static_cast<NormOrder>(7), 0, out, ws, nullptr), Contains("n = 7"));
  auto* misaligned_mask = reinterpret_cast<const std::uint64_t*>(static_cast<char*>(fake_device_pointer()) + 4);
  CHECK_THROWS_WITH(slice_norms(good, misaligned_mask, NormOrder::l2, 0, out, ws, nullptr), Contains("current"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, NormOrder::l2, 0, nullptr, ws, nullptr), Contains("norms"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, NormOrder::l2, 0, out, shrink::cuda::Workspace{ws.data, 16},
                                nullptr),
                    Contains("workspace.bytes"));
  CHECK_THROWS_WITH(slice_norms(good, nullptr, NormOrder::l2, 0, out, shrink::cuda::Workspace{nullptr, ws.bytes},
                                nullptr),
                    Contains("workspace.data"));
  const auto* bad_half = reinterpret_cast<const half*>(static_cast<char*>(fake_device_pointer()) + 1);
  CHECK_THROWS_WITH(slice_norms(TensorView<const half>(bad_half, shape, Device::cuda(0)), nullptr, NormOrder::l2, 0,
                                out, ws, nullptr),
                    Contains("misaligned"));
}

TEST_CASE("cuda block_norms validates its arguments on the host", "[host]") {
  using shrink::cuda::block_norms;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* out = static_cast<double*>(fake_device_pointer());
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::block_norms_workspace_bytes()};
  const TensorView<const float> good(data, Shape{4, 8}, Device::cuda(0));
  CHECK_THROWS_WITH(block_norms(TensorView<const float>(data, Shape{4, 8}), nullptr, 2, 2, NormOrder::l2, out, ws,
                                nullptr),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(block_norms(TensorView<const float>(data, Shape{32}, Device::cuda(0)), nullptr, 2, 2,
                                NormOrder::l2, out, ws, nullptr),
                    Contains("weights.shape"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 0, 2, NormOrder::l2, out, ws, nullptr), Contains("block_rows"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 2, -1, NormOrder::l2, out, ws, nullptr), Contains("block_cols"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 3, 2, NormOrder::l2, out, ws, nullptr), Contains("divisor"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 2, 3, NormOrder::l2, out, ws, nullptr), Contains("block_cols"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 2, 2, static_cast<NormOrder>(-1), out, ws, nullptr), Contains("n = "));
  auto* misaligned_mask = reinterpret_cast<const std::uint64_t*>(static_cast<char*>(fake_device_pointer()) + 2);
  CHECK_THROWS_WITH(block_norms(good, misaligned_mask, 2, 2, NormOrder::l2, out, ws, nullptr), Contains("current"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 2, 2, NormOrder::l2, nullptr, ws, nullptr), Contains("norms"));
  CHECK_THROWS_WITH(block_norms(good, nullptr, 2, 2, NormOrder::l2, out, shrink::cuda::Workspace{ws.data, 8}, nullptr),
                    Contains("workspace.bytes"));
}
