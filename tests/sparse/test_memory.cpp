// Tests for shrink/sparse/memory.hpp: byte counts of CSR, N:M compressed and masked dense storage.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/metrics/size.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/memory.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::sparse;
using prune::NmPattern;

TEST_CASE("csr_bytes and nm_compressed_bytes count what the structs hold", "[sparse][memory]") {
  const std::int64_t rows = 20, cols = 48;
  const std::vector<float> w = test::random_values(static_cast<std::size_t>(rows * cols), 1u);
  const TensorView<const float> view(w.data(), Shape{rows, cols});
  const prune::Mask mask = prune::nm_mask(view, NmPattern{2, 4});
  const Csr<float> csr = to_csr(view, mask);
  CHECK(csr_bytes(rows, csr.nnz(), ScalarType::f32) ==
        static_cast<std::int64_t>(4 * (csr.row_offsets.size() + csr.column_indices.size() + csr.values.size())));

  std::vector<half> h;
  for (float x : w) h.push_back(half(x));
  const NmCompressed<half> c = compress_nm(TensorView<const half>(h.data(), Shape{rows, cols}), mask, NmPattern{2, 4});
  CHECK(nm_compressed_bytes(rows, cols, NmPattern{2, 4}, ScalarType::f16) ==
        static_cast<std::int64_t>(2 * c.values.size() + 4 * c.metadata.size()));
  // 32 x 64 padded half metadata: 64 words = 256 bytes; values 20 * 24 * 2 = 960 bytes.
  CHECK(nm_compressed_bytes(rows, cols, NmPattern{2, 4}, ScalarType::f16) == 960 + 256);
  // float values: one position byte a value instead of mma.sp words.
  CHECK(nm_compressed_bytes(rows, cols, NmPattern{2, 4}, ScalarType::f32) == 20 * 24 * 5);
  CHECK(nm_compressed_bytes(16, 64, NmPattern{2, 4}, ScalarType::i8) == 16 * 32 + 16 * 64 / 8);
  CHECK(nm_compressed_bytes(2, 16, NmPattern{4, 8}, ScalarType::f16) == 2 * 8 * 3);
  CHECK(csr_bytes(3, 5, ScalarType::i4) == 4 * 4 + 5 * 4 + 3);

  CHECK_THROWS_WITH(nm_compressed_bytes(2, 10, NmPattern{2, 4}, ScalarType::f16), Catch::Contains("cols = 10"));
  CHECK_THROWS_WITH(nm_compressed_bytes(2, 8, NmPattern{4, 4}, ScalarType::f16), Catch::Contains("pattern = 4:4"));
  CHECK_THROWS_WITH(csr_bytes(-1, 0, ScalarType::f32), Catch::Contains("rows = -1"));
}

TEST_CASE("storage_comparison puts every format beside dense", "[sparse][memory]") {
  const std::int64_t rows = 64, cols = 64;
  const std::vector<float> w = test::random_values(static_cast<std::size_t>(rows * cols), 2u);
  const prune::Mask mask = prune::nm_mask(TensorView<const float>(w.data(), Shape{rows, cols}), NmPattern{2, 4});
  const StorageComparison s = storage_comparison(mask, ScalarType::f16);
  CHECK(s.elements == 4096);
  CHECK(s.kept == 2048);
  CHECK(s.dense == metrics::dense_bytes(Shape{rows, cols}, ScalarType::f16));
  CHECK(s.mask == 4096 / 8);
  CHECK(s.dense_with_mask == 8192 + 512);
  CHECK(s.csr == 65 * 4 + 2048 * 6);
  CHECK(s.nm_applicable);
  CHECK(s.nm_compressed == 4096 + 4096 / 8);  // 2:4 half: 9/16 of dense
  CHECK(s.ratio_to_dense(s.nm_compressed) == Approx(8192.0 / 4608.0));

  const StorageComparison dense_mask = storage_comparison(prune::Mask(Shape{rows, cols}), ScalarType::f32);
  CHECK_FALSE(dense_mask.nm_applicable);
  CHECK(dense_mask.nm_compressed == 0);
  CHECK_THROWS_WITH(storage_comparison(prune::Mask(Shape{4}), ScalarType::f32), Catch::Contains("mask.shape = [4]"));
}
