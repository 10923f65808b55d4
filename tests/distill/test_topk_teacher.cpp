// Tests for shrink/distill/topk_teacher.hpp: the three divergences against a top-k teacher, against autograd.
#include <catch2/catch.hpp>

#include "support/distill_logits_golden.hpp"

using namespace shrink;

TEST_CASE("top-k teachers match autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"topk_kl"}) > 0);
  CHECK(test::check_logit_goldens({"topk_reverse_kl"}) > 0);
  CHECK(test::check_logit_goldens({"topk_jsd"}) > 0);
}
