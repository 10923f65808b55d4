// Tests for shrink/distill/cross_entropy.hpp: F.cross_entropy with ignore_index and label smoothing.
#include <catch2/catch.hpp>

#include "support/distill_logits_golden.hpp"

using namespace shrink;

TEST_CASE("cross_entropy matches autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"ce"}) > 0);
}
