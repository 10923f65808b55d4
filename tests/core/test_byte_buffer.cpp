#include <catch2/catch.hpp>

#include <cstdint>
#include <utility>
#include <vector>

#include "shrink/core/byte_buffer.hpp"

using shrink::ByteBuffer;

// GCC 12 warns (-Wstringop-overflow) about its own vectorised copy loop when a vector with a custom allocator has
// a size known at compile time, as these small literals do; the copies are correct (ASan checks them). Popped at the
// end, so that the next file of a unity build keeps the warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

TEST_CASE("ByteBuffer keeps explicit values; growing keeps the old bytes", "[core][byte_buffer]") {
  ByteBuffer b{1, 2, 3};
  b.resize(5);  // the two new bytes are unspecified
  CHECK(b[0] == 1);
  CHECK(b[1] == 2);
  CHECK(b[2] == 3);
  b.resize(8, 0xAB);  // an explicit fill value is written
  for (std::size_t i = 5; i < 8; ++i) CHECK(b[i] == 0xAB);
  b.assign(4, 7);
  CHECK(b == ByteBuffer{7, 7, 7, 7});
  b.push_back(9);
  CHECK(b.size() == 5);
  CHECK(b.back() == 9);
}

TEST_CASE("ByteBuffer copies, moves and converts like a vector", "[core][byte_buffer]") {
  const ByteBuffer a{5, 6, 7};
  ByteBuffer copy = a;
  CHECK(copy == a);
  const ByteBuffer moved = std::move(copy);
  CHECK(moved == a);
  const std::vector<std::uint8_t> plain(a.begin(), a.end());
  CHECK(plain == std::vector<std::uint8_t>{5, 6, 7});
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
