// Tests for shrink/distill/cosine_embedding.hpp: torch goldens, hand examples of both targets and the hinge,
// half/bfloat16, grad_scale and accumulate, layouts and masks, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shrink/distill/cosine_embedding.hpp"
#include "support/element_types.hpp"
#include "support/distill_checks.hpp"
#include "support/golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::distill;

namespace {

constexpr float kCosinePoison = -3.5f;
using test::all_equal_to;
using test::as_doubles;
using test::check_close;
using test::kDistillReductions;
using test::starts_with;
using test::within_rounding;

CosineEmbeddingOptions cosine_options_with(Reduction r, double margin) {
  CosineEmbeddingOptions options;
  options.reduction = r;
  options.margin = margin;
  return options;
}

}  // namespace

TEST_CASE("cosine_embedding_loss equals torch's F.cosine_embedding_loss: values, per-row values, both gradients",
          "[distill][cosine][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/distill_features.golden")) {
    if (!starts_with(c.name, "cosine/")) continue;
    const Shape shape(c.ints("shape"));
    const std::vector<float> s = c.floats("student");
    const std::vector<float> t = c.floats("teacher");
    std::vector<std::int8_t> target;
    TensorView<const std::int8_t> target_view;
    if (c.has("target")) {
      target.assign(c.ints("target").begin(), c.ints("target").end());
      target_view = TensorView<const std::int8_t>(target.data(), Shape{static_cast<std::int64_t>(target.size())});
    }
    std::vector<std::uint8_t> mask;
    CosineEmbeddingOptions options;
    options.margin = c.doubles("margin")[0];
    if (c.has("mask")) {
      mask.assign(c.ints("mask").begin(), c.ints("mask").end());
      options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape(c.ints("mask_shape")));
    }
    for (Reduction r : kDistillReductions) {
      const std::string name = to_string(r);
      INFO(c.name << " " << name);
      options.reduction = r;
      std::vector<float> gs(s.size(), kCosinePoison), gt(t.size(), kCosinePoison);
      const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
      const Loss loss =
          cosine_embedding_loss_with_grad(student, teacher, target_view, TensorView<float>(gs.data(), shape),
                                          TensorView<float>(gt.data(), shape), options);
      test::check_feature_golden(c, r, loss, gs, gt);
      CHECK(cosine_embedding_loss(student, teacher, target_view, options).value == loss.value);
    }
    ++checked;
  }
  CHECK(checked == 4);
}

TEST_CASE("cosine_embedding_loss on hand examples: both targets, the hinge and its margin", "[distill][cosine]") {
  // Row 0: parallel; row 1: orthogonal; row 2: opposite.
  const std::vector<float> s{1, 0, 0, 1, 2, 0};
  const std::vector<float> t{2, 0, 1, 0, -1, 0};
  const TensorView<const float> student(s.data(), Shape{3, 2}), teacher(t.data(), Shape{3, 2});
  const std::vector<std::int8_t> similar{1, 1, 1}, dissimilar{-1, -1, -1};
  const TensorView<const std::int8_t> plus(similar.data(), Shape{3}), minus(dissimilar.data(), Shape{3});

  const Loss all_plus = cosine_embedding_loss(student, teacher, plus, cosine_options_with(Reduction::none, 0.0));
  REQUIRE(all_plus.per_row.size() == 3);
  CHECK(all_plus.per_row[0] == Approx(0.0).margin(1e-11));  // 1 - cos, cos = 1 but for the 1e-12 terms
  CHECK(all_plus.per_row[1] == Approx(1.0));
  CHECK(all_plus.per_row[2] == Approx(2.0));
  CHECK(cosine_embedding_loss(student, teacher, {}, cosine_options_with(Reduction::none, 0.0)).per_row ==
        all_plus.per_row);

  // y = -1: max(0, cos - margin).
  const Loss hinge = cosine_embedding_loss(student, teacher, minus, cosine_options_with(Reduction::none, -0.5));
  CHECK(hinge.per_row[0] == Approx(1.5));
  CHECK(hinge.per_row[1] == Approx(0.5));
  CHECK(hinge.per_row[2] == 0.0);
  CHECK(cosine_embedding_loss(student, teacher, minus, cosine_options_with(Reduction::mean, -0.5)).value ==
        Approx(2.0 / 3.0));
  CHECK(cosine_embedding_loss(student, teacher, minus, cosine_options_with(Reduction::batchmean, -0.5)).value ==
        Approx(2.0 / 3.0));
  CHECK(cosine_embedding_loss(student, teacher, minus, cosine_options_with(Reduction::sum, -0.5)).value == Approx(2.0));

  // Below the margin the y = -1 row has no gradient; above it, d cos / d s for orthogonal unit rows is t / |t|.
  std::vector<float> gs(6, kCosinePoison), gt(6, kCosinePoison);
  cosine_embedding_loss_with_grad(student, teacher, minus, make_view(gs, Shape{3, 2}), make_view(gt, Shape{3, 2}),
                                  cosine_options_with(Reduction::sum, -0.5));
  CHECK(gs[0] == Approx(0.0).margin(1e-6));  // parallel: cos is at its maximum
  CHECK(gs[2] == Approx(1.0));
  CHECK(gs[3] == Approx(0.0).margin(1e-12));
  CHECK(gt[2] == Approx(0.0).margin(1e-12));
  CHECK(gt[3] == Approx(1.0));
  CHECK((gs[4] == 0.0f && gs[5] == 0.0f && gt[4] == 0.0f && gt[5] == 0.0f));  // opposite: below the margin
  // A 1-D view is one row (torch's 1-D form).
  CHECK(cosine_embedding_loss(TensorView<const float>(s.data() + 2, Shape{2}),
                              TensorView<const float>(t.data() + 2, Shape{2}))
            .value == Approx(1.0));
}

TEMPLATE_TEST_CASE("cosine_embedding_loss in half and bfloat16 agrees with float on the same values",
                   "[distill][cosine][types]", half, bfloat16) {
  const Shape shape{2, 5, 16};
  const std::vector<TestType> s = test::convert<TestType>(test::random_values(160, 51));
  std::vector<float> t_raw = test::random_values(160, 52);
  for (std::size_t i = 0; i < 160; ++i) t_raw[i] += (i / 16 % 3 == 0 ? 1.0f : -0.5f) * static_cast<float>(s[i]);
  const std::vector<TestType> t = test::convert<TestType>(t_raw);
  std::vector<float> s_float, t_float;
  for (std::size_t i = 0; i < s.size(); ++i) {
    s_float.push_back(static_cast<float>(s[i]));
    t_float.push_back(static_cast<float>(t[i]));
  }
  const std::vector<std::int8_t> target{1, -1, -1, 1, -1, 1, 1, -1, -1, -1};
  const TensorView<const std::int8_t> y(target.data(), Shape{2, 5});
  const std::vector<std::uint8_t> mask{1, 1, 1, 0, 1, 1, 0, 1, 1, 1};
  CosineEmbeddingOptions options;
  options.margin = -0.1;
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{10});
  for (Reduction r : kDistillReductions) {
    INFO(to_string(r));
    options.reduction = r;
    std::vector<TestType> gs(160, TestType(kCosinePoison)), gt(160, TestType(kCosinePoison));
    std::vector<float> gs_float(160), gt_float(160);
    const Loss low = cosine_embedding_loss_with_grad(
        TensorView<const TestType>(s.data(), shape), TensorView<const TestType>(t.data(), shape), y,
        TensorView<TestType>(gs.data(), shape), TensorView<TestType>(gt.data(), shape), options);
    const Loss full = cosine_embedding_loss_with_grad(
        TensorView<const float>(s_float.data(), shape), TensorView<const float>(t_float.data(), shape), y,
        TensorView<float>(gs_float.data(), shape), TensorView<float>(gt_float.data(), shape), options);
    CHECK(low.value == Approx(full.value).epsilon(1e-12));
    for (std::size_t i = 0; i < gs.size(); ++i) {
      INFO("element " << i);
      CHECK(within_rounding<TestType>(static_cast<float>(gs[i]), gs_float[i]));
      CHECK(within_rounding<TestType>(static_cast<float>(gt[i]), gt_float[i]));
    }
  }
}

TEST_CASE("cosine_embedding_loss_with_grad: grad_scale multiplies, accumulate adds, masked rows",
          "[distill][cosine][grad]") {
  const Shape shape{5, 7};
  const std::vector<float> s = test::random_values(35, 61);
  const std::vector<float> t = test::random_values(35, 62);
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  const std::vector<std::int8_t> target{1, -1, 1, -1, 1};
  const TensorView<const std::int8_t> y(target.data(), Shape{5});
  const std::vector<std::uint8_t> mask{1, 1, 0, 1, 1};
  CosineEmbeddingOptions options;
  options.margin = -1.0;  // every y = -1 row is on the sloped side of the hinge
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{5});

  std::vector<float> gs(35, kCosinePoison), gt(35, kCosinePoison);
  const Loss base =
      cosine_embedding_loss_with_grad(student, teacher, y, make_view(gs, shape), make_view(gt, shape), options);
  for (int j = 14; j < 21; ++j) CHECK((gs[j] == 0.0f && gt[j] == 0.0f));
  for (int j = 7; j < 14; ++j) CHECK(gs[j] != 0.0f);

  options.grad_scale = 0.125;
  std::vector<float> scaled_s(35), scaled_t(35);
  CHECK(cosine_embedding_loss_with_grad(student, teacher, y, make_view(scaled_s, shape), make_view(scaled_t, shape),
                                        options)
            .value == base.value);
  for (std::size_t i = 0; i < 35; ++i) {
    CHECK(scaled_s[i] == 0.125f * gs[i]);  // a power of two scales exactly
    CHECK(scaled_t[i] == 0.125f * gt[i]);
  }

  options.grad_scale = 1.0;
  options.accumulate = true;
  const std::vector<float> start = test::random_values(35, 63);
  std::vector<float> acc_s = start, acc_t = start;
  cosine_embedding_loss_with_grad(student, teacher, y, make_view(acc_s, shape), make_view(acc_t, shape), options);
  for (std::size_t i = 0; i < 35; ++i) {
    CHECK(acc_s[i] == Approx(start[i] + gs[i]).epsilon(1e-6).margin(1e-7));
    CHECK(acc_t[i] == Approx(start[i] + gt[i]).epsilon(1e-6).margin(1e-7));
  }
  for (int j = 14; j < 21; ++j) CHECK((acc_s[j] == start[j] && acc_t[j] == start[j]));
}

TEST_CASE("cosine_embedding_loss: strided rows, target and mask shapes, one gradient", "[distill][cosine][layout]") {
  const std::int64_t b = 2, l = 2, d = 6;
  const Shape shape{b, l, d};
  const std::vector<float> s = test::random_values(24, 71);
  const std::vector<float> t = test::random_values(24, 72);
  const std::vector<std::int8_t> target{-1, 1, 1, -1};
  const std::vector<std::uint8_t> mask{1, 0, 1, 1};
  CosineEmbeddingOptions options = cosine_options_with(Reduction::none, -0.25);
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
  std::vector<float> gs(24), gt(24);
  const Loss reference = cosine_embedding_loss_with_grad(make_view(s, shape), make_view(t, shape),
                                                         TensorView<const std::int8_t>(target.data(), Shape{b, l}),
                                                         make_view(gs, shape), make_view(gt, shape), options);
  CHECK(reference.per_row[1] == 0.0);

  // Teacher rows padded to 10 elements (row stride 10), targets and mask in the [rows] form: the same results.
  std::vector<float> t_padded(b * l * 10, 1e30f), gt_padded(b * l * 10, kCosinePoison);
  for (std::int64_t r = 0; r < b * l; ++r)
    for (std::int64_t j = 0; j < d; ++j) t_padded[r * 10 + j] = t[r * d + j];
  const Strides padded{l * 10, 10, 1};
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b * l});
  const Loss strided =
      cosine_embedding_loss_with_grad(make_view(s, shape), TensorView<const float>(t_padded.data(), shape, padded),
                                      TensorView<const std::int8_t>(target.data(), Shape{b * l}), TensorView<float>{},
                                      TensorView<float>(gt_padded.data(), shape, padded), options);
  CHECK(strided.per_row == reference.per_row);
  for (std::int64_t r = 0; r < b * l; ++r) {
    for (std::int64_t j = 0; j < d; ++j) CHECK(gt_padded[r * 10 + j] == gt[r * d + j]);
    for (std::int64_t j = d; j < 10; ++j) CHECK(gt_padded[r * 10 + j] == kCosinePoison);
  }
}

TEST_CASE("cosine_embedding_loss_with_grad refuses bad input and writes nothing", "[distill][cosine][bad-input]") {
  std::vector<float> s = test::random_values(24, 81);
  std::vector<float> t = test::random_values(24, 82);
  std::vector<float> gs(24, kCosinePoison), gt(24, kCosinePoison);
  const Shape shape{2, 3, 4};
  std::vector<std::int8_t> target{1, -1, 1, 1, -1, -1};
  const std::vector<std::uint8_t> mask(6, 1);
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  const TensorView<float> grad_student(gs.data(), shape), grad_teacher(gt.data(), shape);
  const TensorView<const std::int8_t> y(target.data(), Shape{2, 3});
  auto run = [&](TensorView<const float> a, TensorView<const float> b, TensorView<const std::int8_t> labels,
                 TensorView<float> ga, TensorView<float> gb, const CosineEmbeddingOptions& options) {
    return cosine_embedding_loss_with_grad(a, b, labels, ga, gb, options);
  };
  const CosineEmbeddingOptions defaults;
  const std::string fn = "shrink::distill::cosine_embedding_loss_with_grad: ";

  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{6, 4}), y, grad_student, grad_teacher, defaults),
      Catch::Contains(fn + "teacher.shape = [6, 4]"));
  CHECK_THROWS_WITH(
      run(TensorView<const float>(s.data(), Shape{2, 0, 4}), TensorView<const float>(t.data(), Shape{2, 0, 4}), {},
          TensorView<float>{}, TensorView<float>{}, defaults),
      Catch::Contains("student.shape = [2, 0, 4]"));
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), shape, Strides{12, 4, 2}), teacher, y, grad_student,
                        grad_teacher, defaults),
                    Catch::Contains("student.strides = [12, 4, 2]"));
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, TensorView<float>(gt.data(), Shape{2, 12}), defaults),
                    Catch::Contains("grad_teacher.shape = [2, 12]"));

  // Target: shape, layout, values.
  CHECK_THROWS_WITH(run(student, teacher, TensorView<const std::int8_t>(target.data(), Shape{3, 2}), grad_student,
                        grad_teacher, defaults),
                    Catch::Contains(fn + "target.shape = [3, 2]") && Catch::Contains("[2, 3] or [6]"));
  CHECK_THROWS_WITH(run(student, teacher, TensorView<const std::int8_t>(target.data(), Shape{6}, Strides{0}),
                        grad_student, grad_teacher, defaults),
                    Catch::Contains("target = a strided view"));
  target[4] = 0;
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, defaults),
                    Catch::Contains(fn + "target[4] = 0: expected +1 or -1"));
  target[4] = 2;
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, defaults), Catch::Contains("target[4] = 2"));
  target[4] = -1;

  // Margin, mask, options.
  for (double margin : {1.5, -1.01, std::numeric_limits<double>::quiet_NaN()}) {
    CosineEmbeddingOptions bad;
    bad.margin = margin;
    CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, bad),
                      Catch::Contains(fn + "options.margin") && Catch::Contains("[-1, 1]"));
  }
  CosineEmbeddingOptions bad;
  bad.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{5});
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, bad),
                    Catch::Contains("options.row_mask.shape = [5]"));
  bad.row_mask = {};
  bad.grad_scale = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, bad),
                    Catch::Contains("options.grad_scale = inf"));

  // Non-finite inputs.
  t[0] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(run(student, teacher, y, grad_student, grad_teacher, defaults),
                    Catch::Contains("teacher[0] = nan"));
  t[0] = 1.0f;
  s[11] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(cosine_embedding_loss(student, teacher, y),
                    Catch::Contains("shrink::distill::cosine_embedding_loss: student[11] = inf"));
  std::vector<bfloat16> s_bf16 = test::convert<bfloat16>(s), gs_bf16(24, bfloat16(kCosinePoison));
  CHECK_THROWS_WITH(
      cosine_embedding_loss_with_grad(TensorView<const bfloat16>(s_bf16.data(), shape),
                                      TensorView<const bfloat16>(s_bf16.data(), shape), y,
                                      TensorView<bfloat16>(gs_bf16.data(), shape), TensorView<bfloat16>{}),
      Catch::Contains("student[11] = inf"));
  CHECK(all_equal_to(gs_bf16, kCosinePoison));
  CHECK(all_equal_to(gs, kCosinePoison));
  CHECK(all_equal_to(gt, kCosinePoison));
}
