// Tests for shrink/cuda/csr.hpp: [gpu] cases build the CSR of random tensors (zeros, -0.0, empty and full rows, odd
// shapes, several scan tiles) with and without masks, for float, half and bfloat16, both ways (csr_count + csr_fill,
// and to_csr with an exact, a roomy and a short capacity), and compare every array byte for byte with sparse::to_csr,
// outputs poisoned before each launch; csr_to_dense against sparse::to_dense; non-finite input and bad CSRs flagged.
// [host] cases check the argument validation, which throws before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/csr.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/sparse/csr.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"

namespace {

using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::TensorView;
using shrink::cuda::DeviceCsr;
using shrink::cuda::Synchronize;
using shrink::prune::Mask;
using Catch::Matchers::Contains;

using namespace shrink::test;

// About half zeros (a quarter of them -0.0), the rest random non-zero values; every 7th row all zero, every 11th row
// all non-zero.
template <class T>
std::vector<T> random_dense(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 7);
  std::vector<T> x(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const int k = r % 7 == 3 ? 0 : (r % 11 == 5 ? 7 : kind(rng));
      float f = 0.0f;
      if (k == 1) f = -0.0f;
      else if (k >= 4) {
        do f = normal(rng);
        while (static_cast<float>(from_float<T>(f)) == 0.0f);
      }
      x[static_cast<std::size_t>(r * cols + c)] = from_float<T>(f);
    }
  return x;
}

// Keeps about two thirds, zeros and -0.0 included, and prunes row 2 entirely.
Mask random_mask(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Mask mask(Shape{rows, cols}, true);
  for (std::int64_t i = 0; i < mask.size(); ++i)
    if (rng() % 3 == 0 || i / cols == 2) mask.prune(i);
  return mask;
}

// A download of n elements that makes no CUDA call for n = 0 (the vectors of an empty CSR hold no pointer).
template <class T>
std::vector<T> fetch(const DeviceBuffer& buffer, std::int64_t n) {
  return n > 0 ? buffer.download<T>(static_cast<std::size_t>(n)) : std::vector<T>{};
}

template <class T>
void check_conversion(std::int64_t rows, std::int64_t cols, bool masked, std::uint32_t seed) {
  INFO("type size " << sizeof(T) << " shape [" << rows << ", " << cols << "]" << (masked ? " masked" : ""));
  const Shape shape{rows, cols};
  const std::vector<T> x = random_dense<T>(rows, cols, seed);
  const Mask mask = random_mask(rows, cols, seed + 1);
  const TensorView<const T> host(x.data(), shape);
  const shrink::sparse::Csr<T> cpu = masked ? shrink::sparse::to_csr(host, mask) : shrink::sparse::to_csr(host);
  const std::int64_t nnz = cpu.nnz();

  DeviceBuffer x_dev(x.size() * sizeof(T));
  x_dev.upload(x.data(), x_dev.bytes());
  DeviceBuffer mask_dev(mask.words().size() * sizeof(std::uint64_t));
  mask_dev.upload(mask.words().data(), mask_dev.bytes());
  const std::uint64_t* words = masked ? mask_dev.as<std::uint64_t>() : nullptr;
  const TensorView<const T> view(x_dev.as<T>(), shape, Device::cuda(0));
  DeviceBuffer ws(shrink::cuda::csr_workspace_bytes(rows));
  DeviceBuffer offsets(static_cast<std::size_t>(rows + 1) * sizeof(std::int32_t));
  DeviceBuffer nnz_dev(sizeof(std::int64_t));

  {  // csr_count, then csr_fill into exactly nnz
    shrink::cuda::csr_count(view, words, offsets.as<std::int32_t>(), nnz_dev.as<std::int64_t>(), ws.workspace(),
                            nullptr, Synchronize::yes);
    CHECK(nnz_dev.download<std::int64_t>(1)[0] == nnz);
    CHECK(offsets.download<std::int32_t>(static_cast<std::size_t>(rows + 1)) == cpu.row_offsets);
    DeviceBuffer indices(static_cast<std::size_t>(nnz) * sizeof(std::int32_t));
    DeviceBuffer values(static_cast<std::size_t>(nnz) * sizeof(T));
    ws.poison();  // csr_fill needs nothing from csr_count's workspace
    shrink::cuda::csr_fill(view, words, DeviceCsr<T>{offsets.as<std::int32_t>(), indices.as<std::int32_t>(),
                                                     values.as<T>(), nnz},
                           ws.workspace(), nullptr, Synchronize::yes);
    CHECK(fetch<std::int32_t>(indices, nnz) == cpu.column_indices);
    CHECK_SAME_BITS(fetch<T>(values, nnz), cpu.values);
  }

  {  // to_csr with an exact and a roomy capacity
    for (const std::int64_t capacity : {nnz, nnz + 100}) {
      DeviceBuffer indices(static_cast<std::size_t>(capacity) * sizeof(std::int32_t));
      DeviceBuffer values(static_cast<std::size_t>(capacity) * sizeof(T));
      offsets.poison();
      nnz_dev.poison();
      shrink::cuda::to_csr(view, words, DeviceCsr<T>{offsets.as<std::int32_t>(), indices.as<std::int32_t>(),
                                                     values.as<T>(), capacity},
                           nnz_dev.as<std::int64_t>(), ws.workspace(), nullptr, Synchronize::yes);
      CHECK(nnz_dev.download<std::int64_t>(1)[0] == nnz);
      CHECK(offsets.download<std::int32_t>(static_cast<std::size_t>(rows + 1)) == cpu.row_offsets);
      CHECK(fetch<std::int32_t>(indices, nnz) == cpu.column_indices);
      CHECK_SAME_BITS(fetch<T>(values, nnz), cpu.values);
      const std::vector<std::int32_t> tail = fetch<std::int32_t>(indices, capacity);
      std::int32_t poison_word;
      std::memset(&poison_word, kPoison, sizeof poison_word);
      for (std::int64_t k = nnz; k < capacity; ++k) CHECK(tail[static_cast<std::size_t>(k)] == poison_word);
    }
  }

  {  // to_csr with a short capacity: kCapacity, offsets and nnz written, nothing else
    if (nnz > 0) {
      const std::int64_t capacity = nnz - 1;
      DeviceBuffer indices(static_cast<std::size_t>(nnz) * sizeof(std::int32_t));
      DeviceBuffer values(static_cast<std::size_t>(nnz) * sizeof(T));
      CHECK_THROWS_WITH(shrink::cuda::to_csr(view, words,
                                             DeviceCsr<T>{offsets.as<std::int32_t>(), indices.as<std::int32_t>(),
                                                          values.as<T>(), capacity},
                                             nnz_dev.as<std::int64_t>(), ws.workspace(), nullptr, Synchronize::yes),
                        Contains("capacity"));
      CHECK(nnz_dev.download<std::int64_t>(1)[0] == nnz);
      CHECK(offsets.download<std::int32_t>(static_cast<std::size_t>(rows + 1)) == cpu.row_offsets);
      CHECK(indices.still_poisoned(indices.bytes()));
      CHECK(values.still_poisoned(values.bytes()));
    }
  }

  {  // csr_to_dense gives sparse::to_dense
    DeviceBuffer indices(static_cast<std::size_t>(nnz) * sizeof(std::int32_t));
    DeviceBuffer values(static_cast<std::size_t>(nnz) * sizeof(T));
    offsets.upload(cpu.row_offsets.data(), offsets.bytes());
    if (nnz > 0) {
      indices.upload(cpu.column_indices.data(), indices.bytes());
      values.upload(cpu.values.data(), values.bytes());
    }
    DeviceBuffer out(x.size() * sizeof(T));
    DeviceBuffer dense_ws(shrink::cuda::csr_to_dense_workspace_bytes());
    shrink::cuda::csr_to_dense(offsets.as<std::int32_t>(), indices.as<std::int32_t>(), values.as<T>(), nnz,
                               TensorView<T>(out.as<T>(), shape, Device::cuda(0)), dense_ws.workspace(), nullptr,
                               Synchronize::yes);
    CHECK_SAME_BITS(out.download<T>(x.size()), shrink::sparse::to_dense(cpu));
  }
}

template <class T>
void check_all_shapes(std::uint32_t seed) {
  for (const bool masked : {false, true}) {
    check_conversion<T>(37, 45, masked, seed);
    check_conversion<T>(1, 1, masked, seed + 1);
    check_conversion<T>(1000, 1, masked, seed + 2);
    check_conversion<T>(3, 5000, masked, seed + 3);
    check_conversion<T>(513, 67, masked, seed + 4);
    check_conversion<T>(2049, 33, masked, seed + 5);  // three scan tiles, the last one row long
    check_conversion<T>(5000, 7, masked, seed + 6);
  }
}

}  // namespace

TEST_CASE("cuda CSR conversion matches sparse::to_csr byte for byte (float)", "[gpu]") { check_all_shapes<float>(10); }
TEST_CASE("cuda CSR conversion matches sparse::to_csr byte for byte (half)", "[gpu]") { check_all_shapes<half>(20); }
TEST_CASE("cuda CSR conversion matches sparse::to_csr byte for byte (bfloat16)", "[gpu]") {
  check_all_shapes<bfloat16>(30);
}

TEST_CASE("cuda CSR: every element zero, every element kept", "[gpu][sanitize]") {
  const Shape shape{40, 70};
  for (const float fill : {0.0f, -0.0f, 2.5f}) {
    const std::vector<float> x(static_cast<std::size_t>(shape.product()), fill);
    const shrink::sparse::Csr<float> cpu = shrink::sparse::to_csr(TensorView<const float>(x.data(), shape));
    DeviceBuffer x_dev(x.size() * 4), ws(shrink::cuda::csr_workspace_bytes(40)), offsets(41 * 4), nnz(8),
        indices(x.size() * 4), values(x.size() * 4);
    x_dev.upload(x.data(), x_dev.bytes());
    shrink::cuda::to_csr(TensorView<const float>(x_dev.as<float>(), shape, Device::cuda(0)), nullptr,
                         DeviceCsr<float>{offsets.as<std::int32_t>(), indices.as<std::int32_t>(), values.as<float>(),
                                          shape.product()},
                         nnz.as<std::int64_t>(), ws.workspace(), nullptr, Synchronize::yes);
    INFO("fill " << fill);
    CHECK(nnz.download<std::int64_t>(1)[0] == cpu.nnz());
    CHECK(offsets.download<std::int32_t>(41) == cpu.row_offsets);
    CHECK(fetch<std::int32_t>(indices, cpu.nnz()) == cpu.column_indices);
    CHECK_SAME_BITS(fetch<float>(values, cpu.nnz()), cpu.values);
  }
}

TEST_CASE("cuda CSR device-side checks: non-finite input, mismatched offsets, bad CSRs", "[gpu]") {
  const Shape shape{9, 13};
  std::vector<float> x = random_dense<float>(9, 13, 5);
  Mask mask(shape, true);
  mask.prune(50);
  DeviceBuffer x_dev(x.size() * 4), mask_dev(mask.words().size() * 8), ws(shrink::cuda::csr_workspace_bytes(9)),
      offsets(10 * 4), nnz(8), indices(x.size() * 4), values(x.size() * 4), out(x.size() * 4),
      dense_ws(shrink::cuda::csr_to_dense_workspace_bytes());
  mask_dev.upload(mask.words().data(), mask_dev.bytes());
  const TensorView<const float> view(x_dev.as<float>(), shape, Device::cuda(0));
  const DeviceCsr<float> csr{offsets.as<std::int32_t>(), indices.as<std::int32_t>(), values.as<float>(),
                             shape.product()};

  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    x[50] = bad;  // pruned by the mask: still an error, as on the CPU
    x_dev.upload(x.data(), x_dev.bytes());
    CHECK_THROWS_WITH(shrink::cuda::csr_count(view, mask_dev.as<std::uint64_t>(), offsets.as<std::int32_t>(),
                                              nnz.as<std::int64_t>(), ws.workspace(), nullptr, Synchronize::yes),
                      Contains("NaN or inf"));
    CHECK_THROWS_WITH(shrink::cuda::to_csr(view, nullptr, csr, nnz.as<std::int64_t>(), ws.workspace(), nullptr,
                                           Synchronize::yes),
                      Contains("NaN or inf"));
    CHECK_THROWS_WITH(shrink::cuda::csr_fill(view, mask_dev.as<std::uint64_t>(), csr, ws.workspace(), nullptr,
                                             Synchronize::yes),
                      Contains("NaN or inf"));
  }
  x[50] = 1.0f;
  x_dev.upload(x.data(), x_dev.bytes());
  const shrink::sparse::Csr<float> cpu = shrink::sparse::to_csr(TensorView<const float>(x.data(), shape));

  // Offsets of another tensor: a row's kept elements do not end at its next offset.
  std::vector<std::int32_t> shifted = cpu.row_offsets;
  for (std::size_t r = 1; r + 1 < shifted.size(); ++r) shifted[r] = shifted[r] > 0 ? shifted[r] - 1 : 0;
  offsets.upload(shifted.data(), offsets.bytes());
  CHECK_THROWS_WITH(shrink::cuda::csr_fill(view, nullptr, csr, ws.workspace(), nullptr, Synchronize::yes),
                    Contains("out of order"));
  // Offsets whose nnz exceeds the capacity: nothing written.
  indices.poison();
  offsets.upload(cpu.row_offsets.data(), offsets.bytes());
  CHECK_THROWS_WITH(shrink::cuda::csr_fill(view, nullptr,
                                           DeviceCsr<float>{offsets.as<std::int32_t>(), indices.as<std::int32_t>(),
                                                            values.as<float>(), cpu.nnz() - 1},
                                           ws.workspace(), nullptr, Synchronize::yes),
                    Contains("capacity"));
  CHECK(indices.still_poisoned(indices.bytes()));

  // csr_to_dense of bad CSRs: a column out of range, columns out of order, offsets not ending at nnz.
  const auto to_dense_of = [&](const std::vector<std::int32_t>& row_offsets, const std::vector<std::int32_t>& columns,
                               std::int64_t count) {
    offsets.upload(row_offsets.data(), row_offsets.size() * 4);
    indices.upload(columns.data(), columns.size() * 4);
    values.upload(cpu.values.data(), cpu.values.size() * 4);
    shrink::cuda::csr_to_dense(offsets.as<std::int32_t>(), indices.as<std::int32_t>(), values.as<float>(), count,
                               TensorView<float>(out.as<float>(), shape, Device::cuda(0)), dense_ws.workspace(),
                               nullptr, Synchronize::yes);
  };
  CHECK_NOTHROW(to_dense_of(cpu.row_offsets, cpu.column_indices, cpu.nnz()));
  REQUIRE(cpu.nnz() >= 2);
  std::vector<std::int32_t> columns = cpu.column_indices;
  columns[0] = 13;
  CHECK_THROWS_WITH(to_dense_of(cpu.row_offsets, columns, cpu.nnz()), Contains("out of range"));
  columns = cpu.column_indices;
  columns[0] = -1;
  CHECK_THROWS_WITH(to_dense_of(cpu.row_offsets, columns, cpu.nnz()), Contains("out of range"));
  std::int64_t row = 0;  // a row with two or more elements: swap its first two columns
  while (cpu.row_offsets[static_cast<std::size_t>(row + 1)] - cpu.row_offsets[static_cast<std::size_t>(row)] < 2) ++row;
  columns = cpu.column_indices;
  std::swap(columns[static_cast<std::size_t>(cpu.row_offsets[static_cast<std::size_t>(row)])],
            columns[static_cast<std::size_t>(cpu.row_offsets[static_cast<std::size_t>(row)]) + 1]);
  CHECK_THROWS_WITH(to_dense_of(cpu.row_offsets, columns, cpu.nnz()), Contains("out of order"));
  CHECK_THROWS_WITH(to_dense_of(cpu.row_offsets, cpu.column_indices, cpu.nnz() - 1), Contains("out of range"));
  std::vector<std::int32_t> decreasing = cpu.row_offsets;
  decreasing[4] = decreasing[5] + 1;
  CHECK_THROWS_WITH(to_dense_of(decreasing, cpu.column_indices, cpu.nnz()), Contains("out of range"));
}

TEST_CASE("cuda csr_workspace_bytes: status, gate, a count a row, a sum a tile", "[host]") {
  CHECK(shrink::cuda::csr_workspace_bytes(1) == 16 + 16 + 8 + 8);
  CHECK(shrink::cuda::csr_workspace_bytes(1024) == 16 + 16 + 1024 * 8 + 8);
  CHECK(shrink::cuda::csr_workspace_bytes(1025) == 16 + 16 + 1025 * 8 + 16);
  CHECK_THROWS_WITH(shrink::cuda::csr_workspace_bytes(0), Contains("rows"));
  CHECK(shrink::cuda::csr_to_dense_workspace_bytes() == shrink::cuda::kStatusBytes);
}

TEST_CASE("cuda csr_count, csr_fill and to_csr validate their arguments on the host", "[host]") {
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* offsets = static_cast<std::int32_t*>(fake_device_pointer());
  auto* nnz = static_cast<std::int64_t*>(fake_device_pointer());
  const Shape shape{4, 8};
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::csr_workspace_bytes(4)};
  const TensorView<const float> good(data, shape, Device::cuda(0));
  const DeviceCsr<float> csr{offsets, static_cast<std::int32_t*>(fake_device_pointer()),
                             static_cast<float*>(fake_device_pointer()), 32};
  using shrink::cuda::csr_count;
  using shrink::cuda::csr_fill;
  using shrink::cuda::to_csr;

  CHECK_THROWS_WITH(csr_count(TensorView<const float>(data, shape), nullptr, offsets, nnz, ws, nullptr),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(csr_count(TensorView<const float>(data, Shape{0, 8}, Device::cuda(0)), nullptr, offsets, nnz, ws,
                              nullptr),
                    Contains("at least one element"));
  CHECK_THROWS_WITH(csr_count(TensorView<const float>(data, Shape{2, 2, 8}, Device::cuda(0)), nullptr, offsets, nnz,
                              ws, nullptr),
                    Contains("dense.shape"));
  CHECK_THROWS_WITH(csr_count(TensorView<const float>(data, shape, shrink::Strides{1, 4}, Device::cuda(0)), nullptr,
                              offsets, nnz, ws, nullptr),
                    Contains("contiguous"));
  CHECK_THROWS_WITH(csr_count(TensorView<const float>(data, Shape{1, std::int64_t{1} << 31}, Device::cuda(0)),
                              nullptr, offsets, nnz, ws, nullptr),
                    Contains("INT32_MAX"));
  auto* misaligned_mask = reinterpret_cast<const std::uint64_t*>(static_cast<char*>(fake_device_pointer()) + 4);
  CHECK_THROWS_WITH(csr_count(good, misaligned_mask, offsets, nnz, ws, nullptr), Contains("mask"));
  CHECK_THROWS_WITH(csr_count(good, nullptr, nullptr, nnz, ws, nullptr), Contains("row_offsets"));
  CHECK_THROWS_WITH(csr_count(good, nullptr, offsets, nullptr, ws, nullptr), Contains("nnz"));
  CHECK_THROWS_WITH(csr_count(good, nullptr, offsets, nnz, shrink::cuda::Workspace{ws.data, 40}, nullptr),
                    Contains("workspace.bytes"));

  CHECK_THROWS_WITH(csr_fill(good, nullptr, DeviceCsr<float>{nullptr, csr.column_indices, csr.values, 32}, ws,
                             nullptr),
                    Contains("csr.row_offsets"));
  CHECK_THROWS_WITH(csr_fill(good, nullptr, DeviceCsr<float>{offsets, csr.column_indices, csr.values, -1}, ws,
                             nullptr),
                    Contains("csr.capacity"));
  CHECK_THROWS_WITH(csr_fill(good, nullptr, DeviceCsr<float>{offsets, nullptr, csr.values, 3}, ws, nullptr),
                    Contains("csr.column_indices"));
  CHECK_THROWS_WITH(csr_fill(good, nullptr, DeviceCsr<float>{offsets, csr.column_indices, nullptr, 3}, ws, nullptr),
                    Contains("csr.values"));
  CHECK_THROWS_WITH(csr_fill(good, misaligned_mask, csr, ws, nullptr), Contains("mask"));
  CHECK_THROWS_WITH(csr_fill(good, nullptr, csr, shrink::cuda::Workspace{ws.data, 16}, nullptr),
                    Contains("workspace.bytes"));

  CHECK_THROWS_WITH(to_csr(good, nullptr, csr, nullptr, ws, nullptr), Contains("nnz"));
  CHECK_THROWS_WITH(to_csr(good, nullptr, DeviceCsr<float>{offsets, nullptr, nullptr, -5}, nnz, ws, nullptr),
                    Contains("csr.capacity"));
  const auto* bad_half = reinterpret_cast<const half*>(static_cast<char*>(fake_device_pointer()) + 1);
  CHECK_THROWS_WITH(to_csr(TensorView<const half>(bad_half, shape, Device::cuda(0)), nullptr,
                           DeviceCsr<half>{offsets, nullptr, nullptr, 0}, nnz, ws, nullptr),
                    Contains("misaligned"));
  CHECK_THROWS_WITH(to_csr(good, nullptr, csr, nnz, shrink::cuda::Workspace{nullptr, ws.bytes}, nullptr),
                    Contains("workspace.data"));
}

TEST_CASE("cuda csr_to_dense validates its arguments on the host", "[host]") {
  auto* out = static_cast<float*>(fake_device_pointer());
  auto* offsets = static_cast<const std::int32_t*>(fake_device_pointer());
  auto* indices = static_cast<const std::int32_t*>(fake_device_pointer());
  auto* values = static_cast<const float*>(fake_device_pointer());
  const shrink::cuda::Workspace ws{fake_device_pointer(), shrink::cuda::csr_to_dense_workspace_bytes()};
  const TensorView<float> good(out, Shape{4, 8}, Device::cuda(0));
  using shrink::cuda::csr_to_dense;
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, values, 3, TensorView<float>(out, Shape{4, 8}), ws, nullptr),
                    Contains("view of host memory"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, values, 3, TensorView<float>(out, Shape{32}, Device::cuda(0)), ws,
                                 nullptr),
                    Contains("out.shape"));
  CHECK_THROWS_WITH(csr_to_dense(nullptr, indices, values, 3, good, ws, nullptr), Contains("row_offsets"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, values, -1, good, ws, nullptr), Contains("nnz"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, values, std::int64_t{1} << 31, good, ws, nullptr),
                    Contains("nnz"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, nullptr, values, 3, good, ws, nullptr), Contains("column_indices"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, static_cast<const float*>(nullptr), 3, good, ws, nullptr),
                    Contains("values"));
  CHECK_THROWS_WITH(csr_to_dense(offsets, indices, values, 3, good, shrink::cuda::Workspace{ws.data, 4}, nullptr),
                    Contains("workspace.bytes"));
}
