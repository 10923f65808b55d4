// Tests for tests/support/mismatch_map.hpp, the report every [gpu] test gives when a device result differs: it must
// name the first differing indices and show a wrong mapping by its pattern.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "support/mismatch_map.hpp"

using Catch::Matchers::Contains;

TEST_CASE("mismatch map: first indices, counts by row and column mod 16, tiles and k steps", "[host]") {
  shrink::test::MismatchMap map(64, 32, 16, 8);
  CHECK(map.count() == 0);
  CHECK(shrink::test::mismatch_report(map).empty());
  // A wrong fragment row: row 3 of every 16-row block, in column tile 1 only, from k step 2.
  for (std::int64_t r = 3; r < 64; r += 16)
    for (std::int64_t c = 8; c < 16; ++c) map.add(r, c, 1.5, 2.0, 2);
  CHECK(map.count() == 32);
  const std::string report = map.report();
  CHECK_THAT(report, Contains("32 of 2048 elements differ (64 x 32, tiles 16 x 8)"));
  CHECK_THAT(report, Contains("(3, 8) k step 2: got 1.5, want 2"));
  CHECK_THAT(report, Contains("by row % 16:    0 0 0 32 0 0 0 0 0 0 0 0 0 0 0 0"));
  CHECK_THAT(report, Contains("by column % 16: 0 0 0 0 0 0 0 0 4 4 4 4 4 4 4 4"));
  CHECK_THAT(report, Contains("(0,1):8 (1,1):8 (2,1):8 (3,1):8 of 4 x 4"));
  CHECK_THAT(report, Contains("by k step: 2:32"));
}

TEST_CASE("bits mismatch report: equal bits pass, sizes and differing elements are named", "[host]") {
  const std::vector<float> want{1.0f, 2.0f, -0.0f, 4.0f, 5.0f, 6.0f};
  CHECK(shrink::test::bits_mismatch_report(want, want).empty());
  CHECK(shrink::test::bits_mismatch_report(std::vector<float>{1.0f}, want) == "got 1 elements, want 6");
  std::vector<float> got = want;
  got[2] = 0.0f;  // +0 against -0: equal values, different bits
  got[4] = 7.0f;
  CHECK_THAT(shrink::test::bits_mismatch_report(got, want), Contains("2 of 6 elements differ (1 x 6"));
  const std::string as_matrix = shrink::test::bits_mismatch_report(got, want, 3, 2, 2);
  CHECK_THAT(as_matrix, Contains("2 of 6 elements differ (2 x 3, tiles 2 x 2)"));
  CHECK_THAT(as_matrix, Contains("(0, 2): got 0, want -0"));
  CHECK_THAT(as_matrix, Contains("(1, 1): got 7, want 5"));
}
