// Tests for shrink/distill/distillation_loss.hpp: alpha * KD + (1 - alpha) * CE.
#include <catch2/catch.hpp>

#include "support/distill_logits_golden.hpp"

using namespace shrink;

TEST_CASE("distillation_loss matches autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"combined"}) > 0);
  CHECK(test::check_logit_goldens({"topk_combined"}) > 0);
}
