// Tests for shrink/metrics/size.hpp: quantized and dense byte counts, worked out by hand.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "shrink/metrics/size.hpp"

using namespace shrink;
using namespace shrink::metrics;
using quant::QuantDtype;
using quant::QuantScheme;
using quant::Symmetry;

TEST_CASE("int4 per-group-128 affine [4096, 4096]", "[metrics][size]") {
  const Shape shape{4096, 4096};
  const QuantizedSize size = quantized_size(shape, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 128));
  CHECK(size.elements == 16777216);
  CHECK(size.data_bytes == 8388608);       // 4096 rows * 2048 bytes (two nibbles per byte)
  CHECK(size.parameters == 131072);        // 4096 rows * 32 groups
  CHECK(size.scale_bytes == 524288);       // 131072 * 4
  CHECK(size.zero_point_bytes == 131072);  // 131072 * 1
  CHECK(size.total_bytes() == 9043968);
  CHECK(size.bits_per_element() == 4.3125);  // 4 + 32/128 + 8/128
  CHECK(dense_bytes(shape) == 67108864);
  CHECK(compression_ratio(dense_bytes(shape), size.total_bytes()) == Approx(32.0 / 4.3125));  // 7.42
  CHECK(compression_ratio(dense_bytes(shape, ScalarType::f16), size.total_bytes()) == Approx(16.0 / 4.3125));

  // The symmetric variant stores no zero points.
  const QuantizedSize symmetric = quantized_size(shape, QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 128));
  CHECK(symmetric.zero_point_bytes == 0);
  CHECK(symmetric.total_bytes() == 8912896);
  CHECK(symmetric.bits_per_element() == 4.25);
}

TEST_CASE("fractional zero points (HQQ) count 4 bytes each", "[metrics][size][fractional]") {
  const Shape shape{4096, 4096};
  QuantScheme scheme = QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 64);
  scheme.float_zero_point = true;
  const QuantizedSize size = quantized_size(shape, scheme);
  CHECK(size.parameters == 262144);         // 4096 rows * 64 groups
  CHECK(size.scale_bytes == 1048576);       // 262144 * 4
  CHECK(size.zero_point_bytes == 1048576);  // 262144 * 4 (float32)
  CHECK(size.bits_per_element() == 5.0);    // 4 + 32/64 + 32/64
  QuantScheme symmetric = scheme;
  symmetric.symmetry = Symmetry::symmetric;
  CHECK_THROWS_WITH(quantized_size(shape, symmetric), Catch::Contains("scheme.float_zero_point = true"));
}

TEST_CASE("8-bit schemes: per tensor, per channel, conv weights", "[metrics][size]") {
  // Llama MLP up-projection [11008, 4096], int8 symmetric per output channel.
  const QuantizedSize mlp = quantized_size(Shape{11008, 4096}, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
  CHECK(mlp.data_bytes == 45088768);
  CHECK(mlp.scale_bytes == 44032);
  CHECK(mlp.zero_point_bytes == 0);
  CHECK(mlp.total_bytes() == 45132800);

  // uint8 affine per tensor [3, 5]: 15 values, one scale, one zero point.
  const QuantizedSize small = quantized_size(Shape{3, 5}, QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
  CHECK(small.total_bytes() == 20);
  CHECK(small.parameters == 1);

  // Conv OIHW [64, 3, 3, 3] int8 affine per output channel: 1728 + 64 * 4 + 64.
  const QuantizedSize conv = quantized_size(Shape{64, 3, 3, 3}, QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0));
  CHECK(conv.total_bytes() == 2048);
  // Transposed conv IOHW [3, 64, 3, 3] per output channel along axis 1: same count.
  const QuantizedSize deconv = quantized_size(Shape{3, 64, 3, 3}, QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 1));
  CHECK(deconv.total_bytes() == 2048);
}

TEST_CASE("4-bit rows of odd length pad to whole bytes", "[metrics][size]") {
  // [3, 5] uint4: each row of 5 nibbles takes 3 bytes.
  const QuantizedSize size = quantized_size(Shape{3, 5}, QuantScheme::per_tensor(QuantDtype::uint4, Symmetry::affine));
  CHECK(size.data_bytes == 9);
  CHECK(size.total_bytes() == 14);  // 9 + 4 + 1
  const QuantizedSize per_row = quantized_size(Shape{3, 5}, QuantScheme::per_channel(QuantDtype::int4, Symmetry::symmetric, 0));
  CHECK(per_row.total_bytes() == 21);  // 9 + 3 * 4
}

TEST_CASE("dense formats and compression ratio", "[metrics][size]") {
  const Shape shape{10, 3};
  CHECK(dense_bytes(shape) == 120);
  CHECK(dense_bytes(shape, ScalarType::f16) == 60);
  CHECK(dense_bytes(shape, ScalarType::bf16) == 60);
  CHECK(dense_bytes(shape, ScalarType::f8_e4m3) == 30);
  CHECK(dense_bytes(shape, ScalarType::f8_e5m2) == 30);
  CHECK(dense_bytes(Shape{}) == 4);
  CHECK(compression_ratio(120, 30) == 4.0);
  CHECK(compression_ratio(0, 30) == 0.0);
  CHECK_THROWS_WITH(compression_ratio(120, 0), Catch::Contains("compressed_bytes = 0"));
  CHECK_THROWS_WITH(compression_ratio(-1, 10), Catch::Contains("original_bytes = -1"));
}

TEST_CASE("quantized_size of a QuantizedTensor checks what it holds", "[metrics][size]") {
  quant::QuantizedTensor t;
  t.shape = Shape{4, 256};
  t.scheme = QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 64);
  t.data.assign(512, 0);
  t.qparams.shape = Shape{4, 4};
  t.qparams.scale.assign(16, 0.1f);
  t.qparams.zero_point.assign(16, 8);
  const QuantizedSize size = quantized_size(t);
  CHECK(size.total_bytes() == 512 + 16 * 4 + 16);
  CHECK(size.total_bytes() == quantized_size(t.shape, t.scheme).total_bytes());

  t.data.resize(511);
  CHECK_THROWS_WITH(quantized_size(t), Catch::Contains("tensor.data.size() = 511") && Catch::Contains("512"));
  t.data.resize(512);
  t.qparams.scale.resize(4);
  CHECK_THROWS_WITH(quantized_size(t), Catch::Contains("tensor.qparams.scale.size() = 4"));
}

TEST_CASE("quantized_size rejects a scheme that does not fit the shape", "[metrics][size]") {
  CHECK_THROWS_WITH(quantized_size(Shape{4, 100}, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 128)),
                    Catch::Contains("group_size = 128"));
  CHECK_THROWS_WITH(quantized_size(Shape{4, 100}, QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 2)),
                    Catch::Contains("axis = 2"));
}
