// Tests for shrink/distill/attention_transfer.hpp: torch goldens (loss, gradients, maps), hand examples,
// half/bfloat16, grad_scale and accumulate, strided layouts, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "shrink/distill/attention_transfer.hpp"
#include "support/element_types.hpp"
#include "support/distill_checks.hpp"
#include "support/golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::distill;

namespace {

constexpr float kAttentionPoison = 11.5f;
using test::all_equal_to;
using test::as_doubles;
using test::check_close;
using test::kDistillReductions;
using test::starts_with;
using test::within_rounding;

FeatureLossOptions feature_options_with(Reduction r) {
  FeatureLossOptions options;
  options.reduction = r;
  return options;
}

}  // namespace

TEST_CASE("attention_transfer_loss equals the torch reference: values, per-sample values, both gradients",
          "[distill][attention][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/distill_features.golden")) {
    if (!starts_with(c.name, "attention/")) continue;
    const Shape s_shape(c.ints("student_shape")), t_shape(c.ints("teacher_shape"));
    const std::vector<float> s = c.floats("student");
    const std::vector<float> t = c.floats("teacher");
    std::vector<std::uint8_t> mask;
    FeatureLossOptions options;
    if (c.has("mask")) {
      mask.assign(c.ints("mask").begin(), c.ints("mask").end());
      options.row_mask = make_view(std::as_const(mask));
    }
    const TensorView<const float> student(s.data(), s_shape), teacher(t.data(), t_shape);
    for (Reduction r : kDistillReductions) {
      const std::string name = to_string(r);
      INFO(c.name << " " << name);
      options.reduction = r;
      std::vector<float> gs(s.size(), kAttentionPoison), gt(t.size(), kAttentionPoison);
      const Loss loss = attention_transfer_loss_with_grad(student, teacher, TensorView<float>(gs.data(), s_shape),
                                                          TensorView<float>(gt.data(), t_shape), options);
      test::check_feature_golden(c, r, loss, gs, gt);
      CHECK(attention_transfer_loss(student, teacher, options).value == loss.value);
    }
    INFO(c.name);
    check_close(as_doubles(attention_map(student)), c.doubles("map_student"), "map_student");
    // The [B, spatial...] form of the output view.
    Shape map_shape = t_shape;
    for (int d = 1; d + 1 < map_shape.rank; ++d) map_shape[d] = map_shape[d + 1];
    map_shape.rank -= 1;
    std::vector<float> map_t(static_cast<std::size_t>(map_shape.product()), kAttentionPoison);
    attention_map(teacher, TensorView<float>(map_t.data(), map_shape));
    check_close(as_doubles(map_t), c.doubles("map_teacher"), "map_teacher");
    ++checked;
  }
  CHECK(checked == 3);
}

TEST_CASE("attention transfer on hand examples: channel counts, scale, a zero sample", "[distill][attention]") {
  // One sample, positions [1, 2]. Student: one channel (1, 1), map (1, 1) / sqrt 2; teacher (1, 0), map (1, 0).
  const std::vector<float> s{1, 1};
  const std::vector<float> t{1, 0};
  const TensorView<const float> student(s.data(), Shape{1, 1, 1, 2}), teacher(t.data(), Shape{1, 1, 1, 2});
  const double expected = 2.0 - std::sqrt(2.0);  // (1/sqrt2 - 1)^2 + 1/2
  CHECK(attention_transfer_loss(student, teacher, feature_options_with(Reduction::sum)).value == Approx(expected));
  CHECK(attention_transfer_loss(student, teacher, feature_options_with(Reduction::mean)).value == Approx(expected / 2));
  CHECK(attention_transfer_loss(student, teacher, feature_options_with(Reduction::batchmean)).value ==
        Approx(expected));
  CHECK(attention_map(student) ==
        std::vector<float>{static_cast<float>(1 / std::sqrt(2.0)), static_cast<float>(1 / std::sqrt(2.0))});

  // The teacher's map ignores how many channels carry it and how large they are: three channels of 3 * (1, 0).
  const std::vector<float> t3{3, 0, -3, 0, 3, 0};
  const TensorView<const float> teacher3(t3.data(), Shape{1, 3, 1, 2});
  CHECK(attention_map(teacher3) == std::vector<float>{1, 0});
  CHECK(attention_transfer_loss(student, teacher3, feature_options_with(Reduction::sum)).value == Approx(expected));

  // A zero student sample: map 0 (norm clamped to 1e-12), loss = |teacher map|^2 = 1, gradient 0.
  const std::vector<float> zeros(4, 0.0f);
  const TensorView<const float> zero_student(zeros.data(), Shape{1, 2, 2});
  const TensorView<const float> teacher_1d(t3.data(), Shape{1, 3, 2});
  std::vector<float> gs(4, kAttentionPoison), gt(6, kAttentionPoison);
  CHECK(attention_transfer_loss_with_grad(zero_student, teacher_1d, TensorView<float>(gs.data(), Shape{1, 2, 2}),
                                          TensorView<float>(gt.data(), Shape{1, 3, 2}),
                                          feature_options_with(Reduction::sum))
            .value == Approx(1.0));
  CHECK(attention_map(zero_student) == std::vector<float>{0, 0});
  CHECK(gs == std::vector<float>(4, 0.0f));
  for (float g : gt) CHECK(std::isfinite(g));
}

TEMPLATE_TEST_CASE("attention transfer in half and bfloat16 agrees with float on the same values",
                   "[distill][attention][types]", half, bfloat16) {
  const Shape s_shape{3, 4, 3, 5}, t_shape{3, 6, 3, 5};
  const std::vector<TestType> s = test::convert<TestType>(test::random_values(180, 91));
  const std::vector<TestType> t = test::convert<TestType>(test::random_values(270, 92, 2.0f));
  std::vector<float> s_float, t_float;
  for (const TestType& x : s) s_float.push_back(static_cast<float>(x));
  for (const TestType& x : t) t_float.push_back(static_cast<float>(x));
  const std::vector<std::uint8_t> mask{1, 0, 1};
  FeatureLossOptions options;
  options.row_mask = make_view(mask);
  for (Reduction r : kDistillReductions) {
    INFO(to_string(r));
    options.reduction = r;
    std::vector<TestType> gs(180, TestType(kAttentionPoison)), gt(270, TestType(kAttentionPoison));
    std::vector<float> gs_float(180), gt_float(270);
    const Loss low = attention_transfer_loss_with_grad(
        TensorView<const TestType>(s.data(), s_shape), TensorView<const TestType>(t.data(), t_shape),
        TensorView<TestType>(gs.data(), s_shape), TensorView<TestType>(gt.data(), t_shape), options);
    const Loss full = attention_transfer_loss_with_grad(
        TensorView<const float>(s_float.data(), s_shape), TensorView<const float>(t_float.data(), t_shape),
        TensorView<float>(gs_float.data(), s_shape), TensorView<float>(gt_float.data(), t_shape), options);
    CHECK(low.value == Approx(full.value).epsilon(1e-12));
    for (std::size_t i = 0; i < gs.size(); ++i)
      CHECK(within_rounding<TestType>(static_cast<float>(gs[i]), gs_float[i]));
    for (std::size_t i = 0; i < gt.size(); ++i)
      CHECK(within_rounding<TestType>(static_cast<float>(gt[i]), gt_float[i]));
  }
  const std::vector<float> map_low = attention_map(TensorView<const TestType>(s.data(), s_shape));
  const std::vector<float> map_full = attention_map(TensorView<const float>(s_float.data(), s_shape));
  CHECK(map_low == map_full);  // the same float values, the same double sums
}

TEST_CASE("attention_transfer_loss_with_grad: grad_scale multiplies, accumulate adds, masked samples",
          "[distill][attention][grad]") {
  const Shape s_shape{3, 2, 4}, t_shape{3, 5, 4};
  const std::vector<float> s = test::random_values(24, 101);
  const std::vector<float> t = test::random_values(60, 102);
  const TensorView<const float> student(s.data(), s_shape), teacher(t.data(), t_shape);
  const std::vector<std::uint8_t> mask{0, 1, 1};
  FeatureLossOptions options;
  options.row_mask = make_view(mask);
  std::vector<float> gs(24, kAttentionPoison), gt(60, kAttentionPoison);
  const Loss base =
      attention_transfer_loss_with_grad(student, teacher, make_view(gs, s_shape), make_view(gt, t_shape), options);
  for (int j = 0; j < 8; ++j) CHECK(gs[j] == 0.0f);
  for (int j = 0; j < 20; ++j) CHECK(gt[j] == 0.0f);

  options.grad_scale = 4.0;
  std::vector<float> scaled_s(24), scaled_t(60);
  CHECK(attention_transfer_loss_with_grad(student, teacher, make_view(scaled_s, s_shape), make_view(scaled_t, t_shape),
                                          options)
            .value == base.value);
  for (std::size_t i = 0; i < 24; ++i) CHECK(scaled_s[i] == 4.0f * gs[i]);
  for (std::size_t i = 0; i < 60; ++i) CHECK(scaled_t[i] == 4.0f * gt[i]);

  options.grad_scale = 1.0;
  options.accumulate = true;
  std::vector<float> acc_s(24, 1.0f), acc_t(60, -1.0f);
  attention_transfer_loss_with_grad(student, teacher, make_view(acc_s, s_shape), make_view(acc_t, t_shape), options);
  for (std::size_t i = 0; i < 24; ++i) CHECK(acc_s[i] == Approx(1.0 + gs[i]).epsilon(1e-6));
  for (std::size_t i = 0; i < 60; ++i) CHECK(acc_t[i] == Approx(-1.0 + gt[i]).epsilon(1e-6));
  for (int j = 0; j < 8; ++j) CHECK(acc_s[j] == 1.0f);  // the masked sample is untouched

  // Every sample masked: mean of nothing is NaN, sum is 0, gradients 0.
  const std::vector<std::uint8_t> none_kept{0, 0, 0};
  options = feature_options_with(Reduction::mean);
  options.row_mask = make_view(none_kept);
  CHECK(std::isnan(attention_transfer_loss(student, teacher, options).value));
  options.reduction = Reduction::sum;
  CHECK(
      attention_transfer_loss_with_grad(student, teacher, make_view(gs, s_shape), TensorView<float>{}, options).value ==
      0.0);
  CHECK(gs == std::vector<float>(24, 0.0f));
}

TEST_CASE("attention transfer on strided views: a channel slice, a [C, B, H, W] buffer",
          "[distill][attention][layout]") {
  const std::int64_t b = 2, c = 3, h = 2, w = 3, p = h * w;
  const Shape shape{b, c, h, w};
  const std::vector<float> s = test::random_values(b * c * p, 111);
  const std::vector<float> t = test::random_values(b * 4 * p, 112);
  const TensorView<const float> teacher(t.data(), Shape{b, 4, h, w});
  std::vector<float> gs(s.size()), gt(t.size());
  const Loss reference =
      attention_transfer_loss_with_grad(make_view(s, shape), teacher, make_view(gs, shape),
                                        make_view(gt, Shape{b, 4, h, w}), feature_options_with(Reduction::none));

  // The student as channels 1..3 of a 5-channel tensor.
  std::vector<float> wide(b * 5 * p, 1e3f), g_wide(b * 5 * p, kAttentionPoison);
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t k = 0; k < c * p; ++k) wide[(i * 5 + 1) * p + k] = s[i * c * p + k];
  const Strides slice{5 * p, p, w, 1};
  const Loss sliced = attention_transfer_loss_with_grad(TensorView<const float>(wide.data() + p, shape, slice), teacher,
                                                        TensorView<float>(g_wide.data() + p, shape, slice),
                                                        TensorView<float>{}, feature_options_with(Reduction::none));
  CHECK(sliced.per_row == reference.per_row);
  for (std::int64_t i = 0; i < b; ++i) {
    for (std::int64_t k = 0; k < p; ++k) CHECK(g_wide[(i * 5) * p + k] == kAttentionPoison);
    for (std::int64_t k = 0; k < c * p; ++k) CHECK(g_wide[(i * 5 + 1) * p + k] == gs[i * c * p + k]);
    for (std::int64_t k = 0; k < p; ++k) CHECK(g_wide[(i * 5 + 4) * p + k] == kAttentionPoison);
  }

  // The student stored channel-major, [C, B, H, W], viewed as [B, C, H, W].
  std::vector<float> cbp(s.size());
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t k = 0; k < c; ++k)
      for (std::int64_t q = 0; q < p; ++q) cbp[(k * b + i) * p + q] = s[(i * c + k) * p + q];
  CHECK(attention_transfer_loss(TensorView<const float>(cbp.data(), shape, Strides{p, b * p, w, 1}), teacher,
                                feature_options_with(Reduction::none))
            .per_row == reference.per_row);
}

TEST_CASE("attention transfer refuses bad input and writes nothing", "[distill][attention][bad-input]") {
  const Shape s_shape{2, 3, 4, 4}, t_shape{2, 5, 4, 4};
  std::vector<float> s = test::random_values(96, 121);
  std::vector<float> t = test::random_values(160, 122);
  std::vector<float> gs(96, kAttentionPoison), gt(160, kAttentionPoison);
  const TensorView<const float> student(s.data(), s_shape), teacher(t.data(), t_shape);
  const TensorView<float> grad_student(gs.data(), s_shape), grad_teacher(gt.data(), t_shape);
  const std::vector<std::uint8_t> mask{1, 1, 1};
  auto run = [&](TensorView<const float> a, TensorView<const float> b, TensorView<float> ga, TensorView<float> gb,
                 const FeatureLossOptions& options) {
    return attention_transfer_loss_with_grad(a, b, ga, gb, options);
  };
  const FeatureLossOptions defaults;
  const std::string fn = "shrink::distill::attention_transfer_loss_with_grad: ";

  // Shapes: rank, samples, spatial dims, empty.
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{2, 48}), teacher, grad_student, grad_teacher, defaults),
                    Catch::Contains(fn + "student.shape = [2, 48]") && Catch::Contains("[B, C, spatial...]"));
  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{1, 10, 4, 4}), grad_student, grad_teacher, defaults),
      Catch::Contains(fn + "teacher.shape = [1, 10, 4, 4]") && Catch::Contains("[2, C, 4, 4]"));
  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{2, 5, 2, 8}), grad_student, grad_teacher, defaults),
      Catch::Contains("teacher.shape = [2, 5, 2, 8]"));
  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{2, 5, 16}), grad_student, grad_teacher, defaults),
      Catch::Contains("teacher.shape = [2, 5, 16]"));
  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{2, 0, 4, 4}), grad_student, grad_teacher, defaults),
      Catch::Contains("teacher.shape = [2, 0, 4, 4]") && Catch::Contains("at least one sample"));
  CHECK_THROWS_WITH(
      run(TensorView<const float>(s.data(), Shape{0, 3, 4, 4}), TensorView<const float>(t.data(), Shape{0, 5, 4, 4}),
          TensorView<float>{}, TensorView<float>{}, defaults),
      Catch::Contains("student.shape = [0, 3, 4, 4]"));
  CHECK_THROWS_WITH(
      run(TensorView<const float>(s.data(), s_shape, Device::cuda()), teacher, grad_student, grad_teacher, defaults),
      Catch::Contains("student = a CUDA view"));

  // Layouts: spatial dims must be contiguous.
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), s_shape, Strides{48, 16, 1, 4}), teacher, grad_student,
                        grad_teacher, defaults),
                    Catch::Contains("student.strides = [48, 16, 1, 4]") && Catch::Contains("contiguous spatial"));
  CHECK_THROWS_WITH(
      run(student, teacher, grad_student, TensorView<float>(gt.data(), t_shape, Strides{80, 16, 5, 1}), defaults),
      Catch::Contains("grad_teacher.strides = [80, 16, 5, 1]"));

  // Gradient views: each of its own input's shape.
  CHECK_THROWS_WITH(run(student, teacher, grad_student, TensorView<float>(gt.data(), s_shape), defaults),
                    Catch::Contains(fn + "grad_teacher.shape = [2, 3, 4, 4]") && Catch::Contains("[2, 5, 4, 4]"));
  CHECK_THROWS_WITH(run(student, teacher, TensorView<float>(gs.data(), Shape{2, 3, 16}), grad_teacher, defaults),
                    Catch::Contains("grad_student.shape = [2, 3, 16]"));

  // Mask: one byte per sample.
  FeatureLossOptions bad;
  bad.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{3});
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad),
                    Catch::Contains(fn + "options.row_mask.shape = [3]") && Catch::Contains("[2]"));
  bad.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{2, 1});
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad),
                    Catch::Contains("options.row_mask.shape = [2, 1]"));
  bad.row_mask = {};
  bad.reduction = static_cast<Reduction>(-1);
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad), Catch::Contains("options.reduction = -1"));

  // Non-finite values.
  s[40] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, defaults), Catch::Contains("student[40] = inf"));
  s[40] = 0.0f;
  t[159] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, defaults), Catch::Contains("teacher[159] = nan"));
  CHECK(all_equal_to(gs, kAttentionPoison));
  CHECK(all_equal_to(gt, kAttentionPoison));

  // attention_map: the same checks on x, and the output's shape.
  std::vector<float> map(32, kAttentionPoison);
  CHECK_THROWS_WITH(attention_map(teacher, TensorView<float>(map.data(), Shape{2, 16})),
                    Catch::Contains("shrink::distill::attention_map: x[159] = nan"));
  CHECK_THROWS_WITH(attention_map(student, TensorView<float>(map.data(), Shape{32})),
                    Catch::Contains("out.shape = [32]") && Catch::Contains("[2, 16] or [2, 4, 4]"));
  CHECK_THROWS_WITH(attention_map(student, TensorView<float>(map.data(), Shape{2, 16}, Strides{1, 2})),
                    Catch::Contains("out = a strided view"));
  CHECK_THROWS_WITH(attention_map(TensorView<const float>(s.data(), Shape{6, 16})),
                    Catch::Contains("x.shape = [6, 16]"));
  CHECK(all_equal_to(map, kAttentionPoison));
}
