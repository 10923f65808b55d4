// Tests for shrink/distill/feature_mse.hpp: torch goldens, a hand example, half/bfloat16, grad_scale and
// accumulate, layouts and masks, bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "shrink/distill/feature_mse.hpp"
#include "support/element_types.hpp"
#include "support/distill_checks.hpp"
#include "support/golden.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::distill;

namespace {

constexpr float kMsePoison = 7.25f;
using test::all_equal_to;
using test::as_doubles;
using test::check_close;
using test::kDistillReductions;
using test::starts_with;
using test::within_rounding;

}  // namespace

TEST_CASE("mse_loss equals torch's F.mse_loss: values, per-row values, both gradients", "[distill][mse][golden]") {
  int checked = 0;
  for (const test::GoldenCase& c : test::load_golden("golden/distill_features.golden")) {
    if (!starts_with(c.name, "mse/")) continue;
    const Shape shape(c.ints("shape"));
    const std::vector<float> s = c.floats("student");
    const std::vector<float> t = c.floats("teacher");
    std::vector<std::uint8_t> mask;
    FeatureLossOptions options;
    if (c.has("mask")) {
      mask.assign(c.ints("mask").begin(), c.ints("mask").end());
      options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape(c.ints("mask_shape")));
    }
    for (Reduction r : kDistillReductions) {
      const std::string name = to_string(r);
      INFO(c.name << " " << name);
      options.reduction = r;
      std::vector<float> gs(s.size(), kMsePoison), gt(t.size(), kMsePoison);
      const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
      const Loss loss = mse_loss_with_grad(student, teacher, TensorView<float>(gs.data(), shape),
                                           TensorView<float>(gt.data(), shape), options);
      test::check_feature_golden(c, r, loss, gs, gt);
      CHECK(mse_loss(student, teacher, options).value == loss.value);
    }
    ++checked;
  }
  CHECK(checked == 3);
}

TEST_CASE("mse_loss on a hand example, every reduction", "[distill][mse]") {
  const std::vector<float> s{1, 2, 3, 4};
  const std::vector<float> t{0, 0, 1, 1};
  const TensorView<const float> student(s.data(), Shape{2, 2}), teacher(t.data(), Shape{2, 2});
  FeatureLossOptions options;
  options.reduction = Reduction::none;
  const Loss none = mse_loss(student, teacher, options);
  CHECK(none.per_row == std::vector<double>{5, 13});  // 1 + 4, 4 + 9
  CHECK(none.value == 18);
  options.reduction = Reduction::sum;
  CHECK(mse_loss(student, teacher, options).value == 18);
  options.reduction = Reduction::batchmean;
  CHECK(mse_loss(student, teacher, options).value == 9);
  options.reduction = Reduction::mean;
  std::vector<float> gs(4), gt(4);
  CHECK(mse_loss_with_grad(student, teacher, make_view(gs, Shape{2, 2}), make_view(gt, Shape{2, 2}), options).value ==
        4.5);
  CHECK(gs == std::vector<float>{0.5f, 1.0f, 1.0f, 1.5f});  // 2 (s - t) / 4
  CHECK(gt == std::vector<float>{-0.5f, -1.0f, -1.0f, -1.5f});
  // A 1-D view is one row.
  CHECK(mse_loss(TensorView<const float>(s.data(), Shape{4}), TensorView<const float>(t.data(), Shape{4}), options)
            .value == 4.5);
}

TEMPLATE_TEST_CASE("mse_loss in half and bfloat16 agrees with float on the same values", "[distill][mse][types]", half,
                   bfloat16) {
  const Shape shape{3, 4, 9};
  const std::vector<TestType> s = test::convert<TestType>(test::random_values(108, 11));
  const std::vector<TestType> t = test::convert<TestType>(test::random_values(108, 12));
  std::vector<float> s_float, t_float;
  for (std::size_t i = 0; i < s.size(); ++i) {
    s_float.push_back(static_cast<float>(s[i]));
    t_float.push_back(static_cast<float>(t[i]));
  }
  const std::vector<std::uint8_t> mask{1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0};
  FeatureLossOptions options;
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{3, 4});
  for (Reduction r : kDistillReductions) {
    INFO(to_string(r));
    options.reduction = r;
    std::vector<TestType> gs(108, TestType(kMsePoison)), gt(108, TestType(kMsePoison));
    std::vector<float> gs_float(108), gt_float(108);
    const Loss low =
        mse_loss_with_grad(TensorView<const TestType>(s.data(), shape), TensorView<const TestType>(t.data(), shape),
                           TensorView<TestType>(gs.data(), shape), TensorView<TestType>(gt.data(), shape), options);
    const Loss full = mse_loss_with_grad(
        TensorView<const float>(s_float.data(), shape), TensorView<const float>(t_float.data(), shape),
        TensorView<float>(gs_float.data(), shape), TensorView<float>(gt_float.data(), shape), options);
    CHECK(low.value == Approx(full.value).epsilon(1e-12));
    CHECK(low.per_row.size() == full.per_row.size());
    CHECK(mse_loss(TensorView<const TestType>(s.data(), shape), TensorView<const TestType>(t.data(), shape), options)
              .value == low.value);
    for (std::size_t i = 0; i < gs.size(); ++i) {
      INFO("element " << i);
      CHECK(within_rounding<TestType>(static_cast<float>(gs[i]), gs_float[i]));
      CHECK(within_rounding<TestType>(static_cast<float>(gt[i]), gt_float[i]));
    }
  }
}

TEST_CASE("mse_loss_with_grad: grad_scale multiplies, accumulate adds, masked rows", "[distill][mse][grad]") {
  const Shape shape{4, 6};
  const std::vector<float> s = test::random_values(24, 21);
  const std::vector<float> t = test::random_values(24, 22);
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  const std::vector<std::uint8_t> mask{1, 0, 1, 1};
  FeatureLossOptions options;
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{4});

  std::vector<float> gs(24, kMsePoison), gt(24, kMsePoison);
  const Loss base = mse_loss_with_grad(student, teacher, make_view(gs, shape), make_view(gt, shape), options);
  CHECK(base.value == Approx(mse_loss(student, teacher, options).value));
  for (int j = 6; j < 12; ++j) CHECK((gs[j] == 0.0f && gt[j] == 0.0f));  // the masked row is overwritten with 0

  options.grad_scale = -2.5;
  std::vector<float> scaled_s(24), scaled_t(24);
  const Loss scaled =
      mse_loss_with_grad(student, teacher, make_view(scaled_s, shape), make_view(scaled_t, shape), options);
  CHECK(scaled.value == base.value);  // grad_scale leaves the loss alone
  for (std::size_t i = 0; i < 24; ++i) {
    CHECK(scaled_s[i] == Approx(-2.5 * gs[i]).epsilon(1e-6));
    CHECK(scaled_t[i] == Approx(-2.5 * gt[i]).epsilon(1e-6));
  }

  options.grad_scale = 1.0;
  options.accumulate = true;
  const std::vector<float> start = test::random_values(24, 23);
  std::vector<float> acc_s = start, acc_t = start;
  mse_loss_with_grad(student, teacher, make_view(acc_s, shape), make_view(acc_t, shape), options);
  for (std::size_t i = 0; i < 24; ++i) {
    CHECK(acc_s[i] == Approx(start[i] + gs[i]).epsilon(1e-6).margin(1e-7));
    CHECK(acc_t[i] == Approx(start[i] + gt[i]).epsilon(1e-6).margin(1e-7));
  }
  for (int j = 6; j < 12; ++j) CHECK((acc_s[j] == start[j] && acc_t[j] == start[j]));  // masked: untouched

  // Accumulating into half rounds start + gradient once.
  std::vector<half> acc_half = test::convert<half>(start);
  const std::vector<half> s_half = test::convert<half>(s), t_half = test::convert<half>(t);
  std::vector<float> g_ref(24);
  options.accumulate = false;
  std::vector<float> s_rounded, t_rounded;
  for (std::size_t i = 0; i < 24; ++i) {
    s_rounded.push_back(static_cast<float>(s_half[i]));
    t_rounded.push_back(static_cast<float>(t_half[i]));
  }
  mse_loss_with_grad(make_view(std::as_const(s_rounded), shape), make_view(std::as_const(t_rounded), shape),
                     make_view(g_ref, shape), TensorView<float>{}, options);
  options.accumulate = true;
  mse_loss_with_grad(TensorView<const half>(s_half.data(), shape), TensorView<const half>(t_half.data(), shape),
                     TensorView<half>(acc_half.data(), shape), TensorView<half>{}, options);
  for (std::size_t i = 0; i < 24; ++i)
    CHECK(within_rounding<half>(static_cast<float>(acc_half[i]), static_cast<float>(half(start[i])) + g_ref[i]));
}

TEST_CASE("mse_loss: strided rows, both mask shapes, one gradient or none", "[distill][mse][layout]") {
  const std::int64_t b = 2, l = 3, d = 5;
  const std::vector<float> s = test::random_values(b * l * d, 31);
  const std::vector<float> t = test::random_values(b * l * d, 32);
  const Shape shape{b, l, d};
  const std::vector<std::uint8_t> mask{1, 1, 0, 1, 0, 1};
  FeatureLossOptions options;
  options.reduction = Reduction::none;
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
  std::vector<float> gs(30), gt(30);
  const Loss reference =
      mse_loss_with_grad(make_view(s, shape), make_view(t, shape), make_view(gs, shape), make_view(gt, shape), options);

  // Rows padded to 8 elements (row stride 8): same per-row losses and gradients.
  std::vector<float> s_padded(b * l * 8, 99.0f), t_padded(b * l * 8, -99.0f), gs_padded(b * l * 8, kMsePoison);
  for (std::int64_t r = 0; r < b * l; ++r)
    for (std::int64_t j = 0; j < d; ++j) {
      s_padded[r * 8 + j] = s[r * d + j];
      t_padded[r * 8 + j] = t[r * d + j];
    }
  const Strides padded{l * 8, 8, 1};
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b * l});  // the [rows] form
  const Loss strided = mse_loss_with_grad(
      TensorView<const float>(s_padded.data(), shape, padded), TensorView<const float>(t_padded.data(), shape, padded),
      TensorView<float>(gs_padded.data(), shape, padded), TensorView<float>{}, options);
  CHECK(strided.per_row == reference.per_row);
  for (std::int64_t r = 0; r < b * l; ++r) {
    for (std::int64_t j = 0; j < d; ++j) CHECK(gs_padded[r * 8 + j] == gs[r * d + j]);
    for (std::int64_t j = d; j < 8; ++j) CHECK(gs_padded[r * 8 + j] == kMsePoison);  // padding untouched
  }

  // Only the teacher's gradient; then neither (mse_loss_with_grad<T> names T when it cannot be deduced).
  std::vector<float> gt_only(30, kMsePoison);
  mse_loss_with_grad(make_view(s, shape), make_view(t, shape), TensorView<float>{}, make_view(gt_only, shape), options);
  CHECK(gt_only == gt);
  CHECK(mse_loss_with_grad<float>(make_view(s, shape), make_view(t, shape), {}, {}, options).per_row ==
        reference.per_row);
}

TEST_CASE("mse_loss with every row masked: sum 0, mean NaN, zero gradients", "[distill][mse]") {
  const std::vector<float> s{1, 2, 3, 4}, t{0, 1, 0, 1};
  const std::vector<std::uint8_t> mask{0, 0};
  FeatureLossOptions options;
  options.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{2});
  std::vector<float> gs(4, kMsePoison), gt(4, kMsePoison);
  options.reduction = Reduction::sum;
  CHECK(mse_loss_with_grad(make_view(s, Shape{2, 2}), make_view(t, Shape{2, 2}), make_view(gs, Shape{2, 2}),
                           make_view(gt, Shape{2, 2}), options)
            .value == 0.0);
  CHECK(gs == std::vector<float>(4, 0.0f));
  CHECK(gt == std::vector<float>(4, 0.0f));
  options.reduction = Reduction::mean;
  CHECK(std::isnan(mse_loss(make_view(s, Shape{2, 2}), make_view(t, Shape{2, 2}), options).value));
  options.reduction = Reduction::none;
  CHECK(mse_loss(make_view(s, Shape{2, 2}), make_view(t, Shape{2, 2}), options).per_row == std::vector<double>{0, 0});
}

TEST_CASE("mse_loss_with_grad refuses bad input and writes nothing", "[distill][mse][bad-input]") {
  std::vector<float> s = test::random_values(24, 41);
  std::vector<float> t = test::random_values(24, 42);
  std::vector<float> gs(24, kMsePoison), gt(24, kMsePoison);
  const Shape shape{2, 3, 4};
  std::vector<std::uint8_t> mask(6, 1);
  auto run = [&](TensorView<const float> student, TensorView<const float> teacher, TensorView<float> grad_student,
                 TensorView<float> grad_teacher, const FeatureLossOptions& options) {
    return mse_loss_with_grad(student, teacher, grad_student, grad_teacher, options);
  };
  const TensorView<const float> student(s.data(), shape), teacher(t.data(), shape);
  const TensorView<float> grad_student(gs.data(), shape), grad_teacher(gt.data(), shape);
  const FeatureLossOptions defaults;
  const std::string fn = "shrink::distill::mse_loss_with_grad";

  CHECK_THROWS_WITH(
      run(student, TensorView<const float>(t.data(), Shape{2, 4, 3}), grad_student, grad_teacher, defaults),
      Catch::Contains(fn) && Catch::Contains("teacher.shape = [2, 4, 3]") && Catch::Contains("[2, 3, 4]"));
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{0, 4}), TensorView<const float>(t.data(), Shape{0, 4}),
                        TensorView<float>(gs.data(), Shape{0, 4}), TensorView<float>(gt.data(), Shape{0, 4}), defaults),
                    Catch::Contains("student.shape = [0, 4]") && Catch::Contains("at least one row"));
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{3, 0}), TensorView<const float>(t.data(), Shape{3, 0}),
                        TensorView<float>(gs.data(), Shape{3, 0}), TensorView<float>(gt.data(), Shape{3, 0}), defaults),
                    Catch::Contains("student.shape = [3, 0]"));
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{}), TensorView<const float>(t.data(), Shape{}),
                        TensorView<float>(gs.data(), Shape{}), TensorView<float>(gt.data(), Shape{}), defaults),
                    Catch::Contains("student.shape = []") && Catch::Contains("rank >= 1"));
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{6, 4}, Device::cuda()), teacher, grad_student,
                        grad_teacher, defaults),
                    Catch::Contains("student = a CUDA view"));

  // Layouts: a strided last dim, leading dims that do not collapse into one row stride.
  CHECK_THROWS_WITH(run(TensorView<const float>(s.data(), Shape{2, 3, 4}, Strides{12, 1, 3}), teacher, grad_student,
                        grad_teacher, defaults),
                    Catch::Contains("student.strides = [12, 1, 3]") && Catch::Contains("contiguous last dimension"));
  CHECK_THROWS_WITH(run(student, TensorView<const float>(t.data(), Shape{2, 3, 4}, Strides{13, 4, 1}), grad_student,
                        grad_teacher, defaults),
                    Catch::Contains("teacher.strides = [13, 4, 1]") && Catch::Contains("one row stride"));

  // Gradient views.
  CHECK_THROWS_WITH(run(student, teacher, TensorView<float>(gs.data(), Shape{6, 4}), grad_teacher, defaults),
                    Catch::Contains("grad_student.shape = [6, 4]") && Catch::Contains("the shape of student"));
  CHECK_THROWS_WITH(run(student, teacher, grad_student, TensorView<float>(gt.data(), Shape{2, 3, 3}), defaults),
                    Catch::Contains("grad_teacher.shape = [2, 3, 3]"));
  CHECK_THROWS_WITH(
      run(student, teacher, grad_student, TensorView<float>(gt.data(), Shape{2, 3, 4}, Strides{1, 2, 6}), defaults),
      Catch::Contains("grad_teacher.strides = [1, 2, 6]"));
  CHECK_THROWS_WITH(run(student, teacher, TensorView<float>(gs.data(), shape, Device::cuda()), grad_teacher, defaults),
                    Catch::Contains("grad_student = a CUDA view"));
  CHECK_THROWS_WITH(run(student, teacher, TensorView<float>(nullptr, shape), grad_teacher, defaults),
                    Catch::Contains("grad_student = a null pointer"));

  // Mask and options.
  FeatureLossOptions bad;
  bad.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{2, 2});
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad),
                    Catch::Contains("options.row_mask.shape = [2, 2]") && Catch::Contains("[2, 3] or [6]"));
  bad.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{2, 3}, Strides{1, 2});
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad),
                    Catch::Contains("options.row_mask = a strided view"));
  bad.row_mask = {};
  bad.grad_scale = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad),
                    Catch::Contains("options.grad_scale = nan"));
  bad.grad_scale = 1.0;
  bad.reduction = static_cast<Reduction>(9);
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, bad), Catch::Contains("options.reduction = 9"));

  // Non-finite inputs.
  s[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, defaults), Catch::Contains("student[5] = nan"));
  s[5] = 0.0f;
  t[23] = -std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(run(student, teacher, grad_student, grad_teacher, defaults), Catch::Contains("teacher[23] = -inf"));
  t[23] = 0.0f;

  CHECK(all_equal_to(gs, kMsePoison));
  CHECK(all_equal_to(gt, kMsePoison));

  // half: NaN and inf are found in the 16-bit types too, and nothing is written.
  std::vector<half> s_half = test::convert<half>(s), t_half = test::convert<half>(t);
  std::vector<half> gs_half(24, half(kMsePoison));
  s_half[17] = half::infinity();
  CHECK_THROWS_WITH(
      mse_loss_with_grad(TensorView<const half>(s_half.data(), shape), TensorView<const half>(t_half.data(), shape),
                         TensorView<half>(gs_half.data(), shape), TensorView<half>{}),
      Catch::Contains("student[17] = inf"));
  std::vector<bfloat16> t_bf16 = test::convert<bfloat16>(t);
  t_bf16[2] = bfloat16::quiet_nan();
  CHECK_THROWS_WITH(
      mse_loss(TensorView<const bfloat16>(t_bf16.data(), shape), TensorView<const bfloat16>(t_bf16.data(), shape)),
      Catch::Contains("shrink::distill::mse_loss:") && Catch::Contains("student[2] = nan"));
  CHECK(all_equal_to(gs_half, kMsePoison));
}
