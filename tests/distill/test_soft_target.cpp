// Tests for shrink/distill/soft_target.hpp: kl_div, reverse_kl_div and jensen_shannon against PyTorch autograd.
#include <catch2/catch.hpp>

#include "support/distill_logits_golden.hpp"

using namespace shrink;

TEST_CASE("kl_div, reverse_kl_div and jensen_shannon match autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"kl"}) > 0);
  CHECK(test::check_logit_goldens({"reverse_kl"}) > 0);
  CHECK(test::check_logit_goldens({"jsd"}) > 0);
}
