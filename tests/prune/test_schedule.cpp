// Tests for shrink/prune/schedule.hpp: Zhu & Gupta's cubic schedule against hand-computed values.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "shrink/prune/iterative.hpp"
#include "shrink/prune/schedule.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::prune;

TEST_CASE("GradualSchedule follows s_f + (s_i - s_f)(1 - k/n)^3, held between pruning steps", "[prune][schedule]") {
  const GradualSchedule s{0.0, 0.8, 100, 200, 25};  // n = 4
  CHECK(s.intervals() == 4);
  CHECK(s.sparsity_at(-5) == 0.0);
  CHECK(s.sparsity_at(99) == 0.0);
  CHECK(s.sparsity_at(100) == 0.0);
  CHECK(s.sparsity_at(124) == 0.0);
  CHECK(s.sparsity_at(125) == Approx(0.4625).epsilon(1e-15));  // 0.8 - 0.8 * 0.75^3
  CHECK(s.sparsity_at(149) == Approx(0.4625).epsilon(1e-15));
  CHECK(s.sparsity_at(150) == Approx(0.7).epsilon(1e-15));     // 0.8 - 0.8 * 0.5^3
  CHECK(s.sparsity_at(175) == Approx(0.7875).epsilon(1e-15));  // 0.8 - 0.8 * 0.25^3
  CHECK(s.sparsity_at(199) == Approx(0.7875).epsilon(1e-15));
  CHECK(s.sparsity_at(200) == 0.8);
  CHECK(s.sparsity_at(1000000) == 0.8);
  CHECK_FALSE(s.is_pruning_step(99));
  CHECK(s.is_pruning_step(100));
  CHECK_FALSE(s.is_pruning_step(101));
  CHECK(s.is_pruning_step(175));
  CHECK(s.is_pruning_step(200));
  CHECK_FALSE(s.is_pruning_step(225));

  const GradualSchedule from_initial{0.1, 0.9, 0, 10, 5};  // n = 2
  CHECK(from_initial.sparsity_at(-1) == 0.0);              // not pruning yet: dense, not s_i
  CHECK(from_initial.sparsity_at(0) == Approx(0.1).epsilon(1e-15));
  CHECK(from_initial.sparsity_at(7) == Approx(0.8).epsilon(1e-15));  // 0.9 - 0.8 * 0.5^3
  CHECK(from_initial.sparsity_at(10) == 0.9);
}

TEST_CASE("GradualSchedule never lowers the sparsity, and drives prune_to_sparsity", "[prune][schedule]") {
  const GradualSchedule s{0.05, 0.9, 10, 130, 4};
  const std::vector<float> w = test::random_values(5000, 3);
  Mask mask(Shape{50, 100});
  double last = 0.0;
  for (std::int64_t step = 0; step <= 140; ++step) {
    const double target = s.sparsity_at(step);
    CHECK(target >= last);
    if (!s.is_pruning_step(step)) {
      CHECK(target == last);
      continue;
    }
    const Mask next = prune_to_sparsity(make_view(w, Shape{50, 100}), target, mask);
    CHECK(mask_and(next, mask) == next);
    CHECK(next.count_pruned() == static_cast<std::int64_t>(std::nearbyint(target * 5000)));
    mask = next;
    last = target;
  }
  CHECK(mask.count_pruned() == 4500);
}

TEST_CASE("GradualSchedule validates its fields and names the bad one", "[prune][schedule][errors]") {
  CHECK_THROWS_WITH((GradualSchedule{-0.1, 0.5, 0, 10, 1}.sparsity_at(3)), Catch::Contains("initial_sparsity = -0.1"));
  CHECK_THROWS_WITH((GradualSchedule{0.0, 1.0, 0, 10, 1}.sparsity_at(3)), Catch::Contains("final_sparsity = 1"));
  CHECK_THROWS_WITH((GradualSchedule{0.6, 0.5, 0, 10, 1}.validate()), Catch::Contains("final_sparsity = 0.5"));
  CHECK_THROWS_WITH((GradualSchedule{0.0, 0.5, 10, 10, 1}.is_pruning_step(10)), Catch::Contains("end_step = 10"));
  CHECK_THROWS_WITH((GradualSchedule{0.0, 0.5, 0, 10, 0}.validate()), Catch::Contains("frequency = 0"));
  CHECK_THROWS_WITH((GradualSchedule{0.0, 0.5, 0, 10, 3}.validate()),
                    Catch::Contains("frequency = 3") && Catch::Contains("divisor"));
  CHECK_NOTHROW((GradualSchedule{0.0, 0.0, 0, 1, 1}.validate()));
}
