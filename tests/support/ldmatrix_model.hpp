// ldmatrix.sync.aligned.m8n8.x4.b16 modelled from the PTX ISA, for the [host] replays of the tensor-core kernels
// (tests/linear/test_nm_cuda.cpp, tests/linear/test_int8_layout_cuda.cpp): lanes 8q .. 8q + 7 give the row addresses
// (16 bytes each) of matrix q; lane 4g + t receives, in register q, bytes 4t .. 4t + 3 of row g of matrix q.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace shrink::test {

// The registers ldmatrix.x4 gives each lane, from the 32 lanes' byte addresses into `stage`. Also checks that every
// row is 16-aligned and inside the stage, and that the 8 rows of each matrix fall in 8 distinct 16-byte bank groups
// (a conflict-free phase).
template <class Address>
void ldmatrix_x4_model(const std::vector<unsigned char>& stage, const Address (&address)[32],
                       std::uint32_t (&r)[32][4]) {
  for (int q = 0; q < 4; ++q) {
    std::set<std::int64_t> groups;
    for (int row = 0; row < 8; ++row) {
      const auto a = static_cast<std::int64_t>(address[8 * q + row]);
      INFO("matrix " << q << " row " << row << " address " << a);
      REQUIRE(a % 16 == 0);
      REQUIRE(a + 16 <= static_cast<std::int64_t>(stage.size()));
      groups.insert(a / 16 % 8);
    }
    INFO("ldmatrix matrix " << q << ": rows at " << address[8 * q] << ", " << address[8 * q + 1] << ", ...");
    CHECK(groups.size() == 8);
    for (int lane = 0; lane < 32; ++lane)
      std::memcpy(&r[lane][q], stage.data() + address[8 * q + lane / 4] + 4 * (lane % 4), 4);
  }
}

}  // namespace shrink::test
