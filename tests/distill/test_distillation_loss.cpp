// Tests for shrink/distill/distillation_loss.hpp: alpha * KD + (1 - alpha) * CE, against autograd, against its two
// parts computed apart (full and top-k teachers), every SIMD level and element type, gradient options, layouts and
// bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/distill/distillation_loss.hpp"
#include "support/distill_checks.hpp"
#include "support/distill_logits_golden.hpp"
#include "support/logit_losses.hpp"
#include "support/random.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;

TEST_CASE("distillation_loss matches autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"combined"}) > 0);
  CHECK(test::check_logit_goldens({"topk_combined"}) > 0);
}

namespace {

using namespace shrink::test;  // the helpers of support/distill_checks.hpp, logit_losses.hpp and simd_levels.hpp

using namespace shrink::distill;

// Student, full teacher and its top-k form, labels (every fourth row ignore_index), in element type T.
template <class T>
struct Batch {
  std::int64_t rows, n, k;
  std::vector<T> s, t, topk;
  std::vector<std::int64_t> idx, labels;
  std::vector<float> tail;

  Batch(std::int64_t rows_, std::int64_t n_, std::int64_t k_, unsigned seed, float scale = 2.0f)
      : rows(rows_), n(n_), k(k_) {
    const std::vector<float> sf = test::random_values(static_cast<std::size_t>(rows * n), seed, scale);
    const std::vector<float> tf = test::random_values(sf.size(), seed + 1u, scale);
    for (float x : sf) s.push_back(T(x));
    for (float x : tf) t.push_back(T(x));
    for (std::int64_t r = 0; r < rows; ++r) {
      // The top-k: every (n / k)-th entry of the row from a row-dependent start (distinct, any order).
      for (std::int64_t c = 0; c < k; ++c) {
        const std::int64_t j = (r + c * (n / k)) % n;
        idx.push_back(j);
        topk.push_back(t[static_cast<std::size_t>(r * n + j)]);
      }
      tail.push_back(k < n ? 0.2f : 0.0f);
      labels.push_back(r % 4 == 3 ? -100 : (r * 7 + 3) % n);
    }
  }
  Shape shape() const { return Shape{rows, n}; }
  TensorView<const T> student() const { return TensorView<const T>(s.data(), shape()); }
  TensorView<const T> teacher() const { return TensorView<const T>(t.data(), shape()); }
  TensorView<const std::int64_t> label_view() const { return TensorView<const std::int64_t>(labels.data(), Shape{rows}); }
  TopKTeacher<T, std::int64_t> topk_teacher() const {
    TopKTeacher<T, std::int64_t> tk;
    tk.logits = TensorView<const T>(topk.data(), Shape{rows, k});
    tk.indices = TensorView<const std::int64_t>(idx.data(), Shape{rows, k});
    tk.tail_mass = TensorView<const float>(tail.data(), Shape{rows});
    return tk;
  }
};

template <class T, class Teacher>
LossAndGrad<T> combined(const Batch<T>& b, const Teacher& teacher, const DistillationOptions& o) {
  LossAndGrad<T> r;
  r.grad.assign(b.s.size(), T(kLogitPoison));
  r.loss = distillation_loss_with_grad(b.student(), teacher, b.label_view(), TensorView<T>(r.grad.data(), b.shape()), o);
  return r;
}

// The options distillation_loss gives its two parts.
inline SoftTargetOptions kd_part_options(const DistillationOptions& o) {
  SoftTargetOptions ko;
  ko.temperature = o.temperature;
  ko.reduction = o.kd_reduction;
  ko.grad_scale = o.grad_scale * o.alpha;
  ko.row_mask = o.row_mask;
  return ko;
}

inline CrossEntropyOptions ce_part_options(const DistillationOptions& o) {
  CrossEntropyOptions co;
  co.ignore_index = o.ignore_index;
  co.label_smoothing = o.label_smoothing;
  co.reduction = o.ce_reduction;
  co.grad_scale = o.grad_scale * (1.0 - o.alpha);
  co.row_mask = o.row_mask;
  return co;
}

// |KD gradient| + |CE gradient| of each element (grad_scale 1). With half or bfloat16 logits the KD part is
// written in T and the CE part added to it in T: two roundings, so the combined gradient is within an ulp of T
// of these sizes, not of the (possibly much smaller) sum.
template <class T, class Teacher>
std::vector<double> part_sizes(const Batch<T>& b, const Teacher& teacher, DistillationOptions o) {
  o.grad_scale = 1.0;
  o.accumulate = false;
  std::vector<T> gk(b.s.size(), T(0.0f)), gc(b.s.size(), T(0.0f));
  if (o.alpha > 0.0f) kl_div_with_grad(b.student(), teacher, TensorView<T>(gk.data(), b.shape()), kd_part_options(o));
  if (o.alpha < 1.0f)
    cross_entropy_with_grad(b.student(), b.label_view(), TensorView<T>(gc.data(), b.shape()), ce_part_options(o));
  std::vector<double> out;
  for (std::size_t i = 0; i < gk.size(); ++i) out.push_back(std::fabs(to_d(gk[i])) + std::fabs(to_d(gc[i])));
  return out;
}

// The two parts computed apart with the options distillation_loss gives them.
template <class T, class Teacher>
void check_against_parts(const Batch<T>& b, const Teacher& teacher, const DistillationOptions& o) {
  const double alpha = o.alpha;
  const SoftTargetOptions ko = kd_part_options(o);
  const CrossEntropyOptions co = ce_part_options(o);
  std::vector<T> gk(b.s.size(), T(kLogitPoison)), gc(b.s.size(), T(kLogitPoison));
  const Loss kd = kl_div_with_grad(b.student(), teacher, TensorView<T>(gk.data(), b.shape()), ko);
  const Loss ce = cross_entropy_with_grad(b.student(), b.label_view(), TensorView<T>(gc.data(), b.shape()), co);
  const LossAndGrad<T> got = combined(b, teacher, o);
  const double want = (alpha > 0.0 ? alpha * kd.value : 0.0) + (alpha < 1.0 ? (1.0 - alpha) * ce.value : 0.0);
  CHECK(close_rel(got.loss.value, want, 1e-12));
  if (o.kd_reduction == Reduction::none) {
    REQUIRE(got.loss.per_row.size() == static_cast<std::size_t>(b.rows));
    for (std::size_t r = 0; r < got.loss.per_row.size(); ++r)
      CHECK(close_rel(got.loss.per_row[r], alpha * kd.per_row[r] + (1.0 - alpha) * ce.per_row[r], 1e-12));
  } else {
    CHECK(got.loss.per_row.empty());
  }
  // KD writes, CE adds: one rounding to T more than the parts.
  const double u = std::is_same<T, float>::value ? 0x1p-23 : 2.0 * unit_roundoff<T>();
  const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
  for (std::size_t i = 0; i < gk.size(); ++i) {
    const double part_k = alpha > 0.0 ? to_d(gk[i]) : 0.0, part_c = alpha < 1.0 ? to_d(gc[i]) : 0.0;
    const double tol = u * (std::fabs(part_k) + std::fabs(part_c)) + sub;
    if (!(std::fabs(to_d(got.grad[i]) - (part_k + part_c)) <= tol)) {
      FAIL_CHECK("grad[" << i << "] = " << to_d(got.grad[i]) << ", parts " << part_k << " + " << part_c);
      break;
    }
  }
  // The loss alone gives the same value.
  CHECK(distillation_loss(b.student(), teacher, b.label_view(), o).value == got.loss.value);
}

}  // namespace

TEST_CASE("distillation_loss = alpha kl_div + (1 - alpha) cross_entropy, full and top-k teachers",
          "[distill][combined]") {
  const Batch<float> b(8, 29, 5, 17);
  const std::vector<std::uint8_t> mask{1, 1, 0, 1, 1, 1, 1, 0};
  const Reduction pairs[][2] = {{Reduction::batchmean, Reduction::mean},
                                {Reduction::sum, Reduction::sum},
                                {Reduction::mean, Reduction::batchmean},
                                {Reduction::none, Reduction::none}};
  for (float alpha : {0.0f, 0.3f, 1.0f}) {
    for (const auto& red : pairs) {
      for (bool masked : {false, true}) {
        INFO("alpha " << alpha << ", kd " << to_string(red[0]) << ", ce " << to_string(red[1]) << ", mask " << masked);
        DistillationOptions o;
        o.alpha = alpha;
        o.temperature = 2.0f;
        o.kd_reduction = red[0];
        o.ce_reduction = red[1];
        o.label_smoothing = 0.1f;
        o.grad_scale = 1.5;
        if (masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b.rows});
        check_against_parts(b, b.teacher(), o);
        check_against_parts(b, b.topk_teacher(), o);
      }
    }
  }
}

TEST_CASE("distillation_loss refuses bad input, names the argument and writes nothing", "[distill][combined][bad-input]") {
  const std::int64_t rows = 4, n = 21, k = 3;
  Batch<float> b(rows, n, k, 5);
  std::vector<float> grad(b.s.size(), kLogitPoison);
  const TensorView<float> g(grad.data(), b.shape());
  for (bool topk : {false, true}) {
    for (bool with_grad : {true, false}) {
      INFO((topk ? "top-k teacher" : "full teacher") << ", with_grad " << with_grad);
      auto run_with = [&](const TensorView<const float>& s, const TensorView<const float>& t,
                          const TensorView<const std::int64_t>& y, const DistillationOptions& o) {
        if (topk) {
          return with_grad ? distillation_loss_with_grad(s, b.topk_teacher(), y, g, o)
                           : distillation_loss(s, b.topk_teacher(), y, o);
        }
        return with_grad ? distillation_loss_with_grad(s, t, y, g, o) : distillation_loss(s, t, y, o);
      };
      auto run = [&](const DistillationOptions& o) { return run_with(b.student(), b.teacher(), b.label_view(), o); };
      // Options: alpha, the two reductions, temperature, label_smoothing, grad_scale, the mask.
      for (float alpha : {-0.1f, 1.1f, kNaN}) {
        DistillationOptions o;
        o.alpha = alpha;
        check_refused([&] { return run(o); }, "options.alpha", grad);
      }
      {
        DistillationOptions o;
        o.kd_reduction = Reduction::none;  // ce_reduction stays mean
        check_refused([&] { return run(o); },
                      "options.kd_reduction = none: expected none for both parts or for neither (ce_reduction is mean)",
                      grad);
        o.kd_reduction = Reduction::batchmean;
        o.ce_reduction = Reduction::none;
        check_refused([&] { return run(o); }, "options.kd_reduction = batchmean", grad);
      }
      for (float t : {0.0f, -1.0f, kNaN, kInf}) {
        DistillationOptions o;
        o.temperature = t;
        check_refused([&] { return run(o); }, "options.temperature", grad);
      }
      for (float eps : {-0.5f, 1.5f, kNaN}) {
        DistillationOptions o;
        o.label_smoothing = eps;
        check_refused([&] { return run(o); }, "options.label_smoothing", grad);
      }
      {
        DistillationOptions o;
        o.grad_scale = static_cast<double>(kNaN);
        check_refused([&] { return run(o); }, "options.grad_scale", grad);
        std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows + 2), 1);
        o = DistillationOptions{};
        o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows + 2});
        check_refused([&] { return run(o); }, "options.row_mask.shape = [6]", grad);
      }
      const DistillationOptions defaults;
      // Labels: out of range in a kept row (fine in a masked one), the wrong count; int32 labels too.
      b.labels[1] = n;
      check_refused([&] { return run(defaults); }, "labels = label 21 at row 1", grad);
      {
        std::vector<std::int32_t> y32(b.labels.begin(), b.labels.end());
        check_refused([&] {
          const TensorView<const std::int32_t> y(y32.data(), Shape{rows});
          return with_grad ? distillation_loss_with_grad(b.student(), b.teacher(), y, g, defaults)
                           : distillation_loss(b.student(), b.teacher(), y, defaults);
        }, "labels = label 21 at row 1", grad);
        std::vector<std::uint8_t> mask{1, 0, 1, 1};
        DistillationOptions o;
        o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
        CHECK_NOTHROW(run(o));
        std::fill(grad.begin(), grad.end(), kLogitPoison);
      }
      b.labels[1] = 2;
      check_refused([&] { return run_with(b.student(), b.teacher(), TensorView<const std::int64_t>(b.labels.data(), Shape{rows - 1}),
                                          defaults); },
                    "labels.shape = [3]", grad);
      // Shapes of the student and teacher; empty batches.
      if (!topk) {
        check_refused([&] { return run_with(b.student(), TensorView<const float>(b.t.data(), Shape{rows, n - 1}), b.label_view(),
                                            defaults); },
                      "teacher.shape = [4, 20]: expected the shape of student [4, 21]", grad);
        check_refused([&] { return run_with(b.student(), TensorView<const float>(b.t.data(), Shape{rows - 1, n}), b.label_view(),
                                            defaults); },
                      "teacher.shape = [3, 21]", grad);
      }
      check_refused([&] { return run_with(TensorView<const float>(b.s.data(), Shape{0, n}), TensorView<const float>(b.t.data(), Shape{0, n}),
                                          TensorView<const std::int64_t>(b.labels.data(), Shape{0}), defaults); },
                    "student.shape", grad);
      check_refused([&] { return run_with(TensorView<const float>(b.s.data(), Shape{rows, n / 2}, Strides{n, 2}),
                                          TensorView<const float>(b.t.data(), Shape{rows, n / 2}), b.label_view(), defaults); },
                    "student.strides", grad);
      // Values: NaN in the student (the last row), NaN / +inf in the teacher, a student row of -inf.
      b.s[static_cast<std::size_t>(rows * n - 1)] = kNaN;
      check_refused([&] { return run(defaults); }, "student = NaN in row 3", grad);
      {
        // With a mask, validation still comes first: the masked row is not zeroed before the NaN is found.
        std::vector<std::uint8_t> mask{1, 0, 1, 1};
        DistillationOptions o;
        o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
        for (float alpha : {0.5f, 1.0f}) {
          o.alpha = alpha;
          check_refused([&] { return run(o); }, "student = NaN in row 3", grad);
        }
        // alpha = 0 is cross-entropy alone: row 3 is labelled ignore_index, so its NaN is never read; a NaN in a
        // row cross-entropy uses is refused.
        o.alpha = 0.0f;
        CHECK_NOTHROW(run(o));
        std::fill(grad.begin(), grad.end(), kLogitPoison);
        b.s[static_cast<std::size_t>(2 * n + 4)] = kNaN;
        check_refused([&] { return run(o); }, "student = NaN in row 2", grad);
        b.s[static_cast<std::size_t>(2 * n + 4)] = 0.25f;
      }
      b.s[static_cast<std::size_t>(rows * n - 1)] = 0.25f;
      b.t[static_cast<std::size_t>(n + 1)] = kNaN;
      b.topk[static_cast<std::size_t>(k + 1)] = kNaN;
      check_refused([&] { return run(defaults); }, topk ? "teacher.logits = NaN in row 1" : "teacher = NaN in row 1", grad);
      b.t[static_cast<std::size_t>(n + 1)] = kInf;
      b.topk[static_cast<std::size_t>(k + 1)] = kInf;
      check_refused([&] { return run(defaults); }, "+inf in row 1", grad);
      b.t[static_cast<std::size_t>(n + 1)] = 0.5f;
      b.topk[static_cast<std::size_t>(k + 1)] = 0.5f;
      const std::vector<float> saved = b.s;
      std::fill(b.s.begin() + 2 * n, b.s.begin() + 3 * n, -kInf);
      check_refused([&] { return run(defaults); }, "student = row 2 all -inf", grad);
      b.s = saved;
      // The top-k teacher's own checks, reached through distillation_loss.
      if (topk) {
        const std::int64_t saved_index = b.idx[4];
        b.idx[4] = n;
        check_refused([&] { return run(defaults); }, "teacher.indices = index 21 in row 1", grad);
        b.idx[4] = b.idx[5];
        check_refused([&] { return run(defaults); }, "teacher.indices = a repeated index in row 1", grad);
        b.idx[4] = saved_index;
        b.tail[3] = 1.0f;
        check_refused([&] { return run(defaults); }, "teacher.tail_mass = row 3", grad);
        b.tail[3] = 0.2f;
      }
    }
  }
  // The gradient view.
  std::vector<float> wide(static_cast<std::size_t>((rows + 1) * (n + 1)), kLogitPoison);
  check_refused([&] { return distillation_loss_with_grad(b.student(), b.teacher(), b.label_view(),
                                                         TensorView<float>(wide.data(), Shape{rows, n + 1})); },
                "grad_student = [4 rows, 22]: expected the shape of student [4 rows, 21]", wide);
  check_refused([&] { return distillation_loss_with_grad(b.student(), b.topk_teacher(), b.label_view(),
                                                         TensorView<float>(wide.data(), Shape{rows + 1, n})); },
                "grad_student = [5 rows, 21]", wide);
}

TEST_CASE("every SIMD level gives the same distillation_loss (float, half, bfloat16)", "[distill][combined][simd]") {
  SimdLevelGuard guard;
  for (std::int64_t n : {1, 7, 1023, 1024, 1025, 3000}) {
    auto each_type = [&](auto tag) {
      using T = decltype(tag);
      const Batch<T> b(4, n, std::min<std::int64_t>(n, 8), 90 + static_cast<unsigned>(n), 2.5f);
      DistillationOptions o;
      o.alpha = 0.6f;
      o.temperature = 1.7f;
      o.kd_reduction = Reduction::none;
      o.ce_reduction = Reduction::none;
      o.label_smoothing = 0.05f;
      for (bool topk : {false, true}) {
        auto run = [&] { return topk ? combined(b, b.topk_teacher(), o) : combined(b, b.teacher(), o); };
        cpu::simd_level() = cpu::SimdLevel::scalar;
        const LossAndGrad<T> base = run();
        for (cpu::SimdLevel level : supported_levels()) {
          INFO("V = " << n << ", top-k " << topk << ", level " << static_cast<int>(level) << ", element size " << sizeof(T));
          cpu::simd_level() = level;
          const LossAndGrad<T> r = run();
          check_same_across_levels(r.loss, r.grad, base.loss, base.grad);
        }
      }
    };
    each_type(float{});
    each_type(half{});
    each_type(bfloat16{});
  }
}

TEMPLATE_TEST_CASE("half and bfloat16 distillation_loss equals float on the same rounded values", "[distill][combined][types]",
                   half, bfloat16) {
  using T = TestType;
  const Batch<T> low(6, 40, 6, 31, 3.0f);
  Batch<float> full(6, 40, 6, 31, 3.0f);
  for (std::size_t i = 0; i < full.s.size(); ++i) {
    full.s[i] = static_cast<float>(low.s[i]);
    full.t[i] = static_cast<float>(low.t[i]);
  }
  for (std::size_t i = 0; i < full.topk.size(); ++i) full.topk[i] = static_cast<float>(low.topk[i]);
  for (bool topk : {false, true}) {
    INFO("top-k " << topk);
    DistillationOptions o;
    o.alpha = 0.4f;
    o.temperature = 2.0f;
    const LossAndGrad<T> a = topk ? combined(low, low.topk_teacher(), o) : combined(low, low.teacher(), o);
    const LossAndGrad<float> f = topk ? combined(full, full.topk_teacher(), o) : combined(full, full.teacher(), o);
    CHECK(close_rel(a.loss.value, f.loss.value, 1e-5));
    // Two roundings to T (see part_sizes): half an ulp of the KD part, then half an ulp of the sum.
    const std::vector<double> sizes = topk ? part_sizes(low, low.topk_teacher(), o) : part_sizes(low, low.teacher(), o);
    const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
    const double big = largest(f.grad);
    for (std::size_t i = 0; i < a.grad.size(); ++i) {
      const double tol = 1e-6 * big + 2.0 * unit_roundoff<T>() * sizes[i] + sub;
      if (!(std::fabs(to_d(a.grad[i]) - f.grad[i]) <= tol)) {
        FAIL_CHECK("grad[" << i << "] = " << to_d(a.grad[i]) << ", float " << f.grad[i] << " (allowed " << tol << ")");
        break;
      }
    }
  }
}

TEMPLATE_TEST_CASE("distillation_loss gradients: grad_scale multiplies, accumulate adds, masked rows",
                   "[distill][combined][grad]", float, half, bfloat16) {
  using T = TestType;
  const Batch<T> b(8, 26, 4, 71);
  const std::vector<std::uint8_t> mask{1, 0, 1, 1, 1, 0, 1, 1};
  const double u = std::is_same<T, float>::value ? 0x1p-23 : 2.0 * unit_roundoff<T>();
  const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
  for (bool topk : {false, true}) {
    for (float alpha : {0.0f, 0.5f, 1.0f}) {
      INFO("top-k " << topk << ", alpha " << alpha);
      DistillationOptions o;
      o.alpha = alpha;
      o.temperature = 1.5f;
      o.label_smoothing = 0.1f;
      auto run = [&](const DistillationOptions& opt) {
        return topk ? combined(b, b.topk_teacher(), opt) : combined(b, b.teacher(), opt);
      };
      auto run_into = [&](std::vector<T>& g, const DistillationOptions& opt) {
        const TensorView<T> gv(g.data(), b.shape());
        return topk ? distillation_loss_with_grad(b.student(), b.topk_teacher(), b.label_view(), gv, opt)
                    : distillation_loss_with_grad(b.student(), b.teacher(), b.label_view(), gv, opt);
      };
      const LossAndGrad<T> unit = run(o);
      // Each side within two roundings to T of its parts' sizes (see part_sizes); float: one ulp.
      const std::vector<double> sizes = topk ? part_sizes(b, b.topk_teacher(), o) : part_sizes(b, b.teacher(), o);
      for (double scale : {2.5, -4.0}) {
        o.grad_scale = scale;
        const LossAndGrad<T> scaled = run(o);
        CHECK(scaled.loss.value == unit.loss.value);
        double big = 0.0;
        for (const T& x : unit.grad) big = std::max(big, std::fabs(scale * to_d(x)));
        for (std::size_t i = 0; i < unit.grad.size(); ++i) {
          const double want = scale * to_d(unit.grad[i]);
          const double tol = 1e-6 * big + 2.0 * u * (1.0 + std::fabs(scale)) * sizes[i] + sub * (1.0 + std::fabs(scale));
          if (!(std::fabs(to_d(scaled.grad[i]) - want) <= tol)) {
            FAIL_CHECK("scaled grad[" << i << "] = " << to_d(scaled.grad[i]) << ", expected " << want);
            break;
          }
        }
      }
      o.grad_scale = 1.0;
      std::vector<T> before;
      for (float x : test::random_values(b.s.size(), 3, 0.05f)) before.push_back(T(x));
      std::vector<T> after = before;
      o.accumulate = true;
      CHECK(run_into(after, o).value == unit.loss.value);
      for (std::size_t i = 0; i < before.size(); ++i) {
        const double want = to_d(before[i]) + to_d(unit.grad[i]);
        // KD and CE each add once: two roundings to T (and the fresh gradient's own, of its parts' sizes).
        const double tol = 2.0 * u * (std::fabs(to_d(before[i])) + 2.0 * sizes[i]) + 3.0 * sub;
        if (!(std::fabs(to_d(after[i]) - want) <= tol)) FAIL_CHECK("accumulated [" << i << "]");
      }
      // Masked rows: untouched when accumulating, 0 when not.
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b.rows});
      std::vector<T> kept = before;
      run_into(kept, o);
      o.accumulate = false;
      const LossAndGrad<T> masked = run(o);
      for (std::int64_t r = 0; r < b.rows; ++r) {
        if (mask[static_cast<std::size_t>(r)]) continue;
        CHECK(std::memcmp(kept.data() + r * b.n, before.data() + r * b.n, static_cast<std::size_t>(b.n) * sizeof(T)) == 0);
        for (std::int64_t j = 0; j < b.n; ++j) CHECK(to_d(masked.grad[static_cast<std::size_t>(r * b.n + j)]) == 0.0);
      }
      // A row labelled ignore_index still learns from the teacher (row 3), unless alpha is 0.
      bool any = false;
      for (std::int64_t j = 0; j < b.n; ++j) any = any || to_d(masked.grad[static_cast<std::size_t>(3 * b.n + j)]) != 0.0;
      CHECK(any == (alpha > 0.0f));
    }
  }
}

TEST_CASE("distillation_loss: strided rows equal a contiguous copy, gaps untouched; [B, L, V] = [B*L, V]",
          "[distill][combined][layout]") {
  for (std::int64_t n : {11, 1030}) {
    INFO("V = " << n);
    const std::int64_t b = 2, l = 3, rows = b * l, stride = n + 4;
    const Batch<float> batch(rows, n, 5, 600 + static_cast<unsigned>(n));
    const std::vector<std::uint8_t> mask{1, 1, 1, 0, 1, 1};
    DistillationOptions o;
    o.alpha = 0.7f;
    o.temperature = 1.2f;
    o.kd_reduction = Reduction::none;
    o.ce_reduction = Reduction::none;
    o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
    const LossAndGrad<float> flat = combined(batch, batch.teacher(), o);

    std::vector<float> ws(static_cast<std::size_t>(rows * stride + 1), 0.0f), wt = ws, wg(ws.size(), kLogitPoison);
    for (std::int64_t r = 0; r < rows; ++r) {
      std::copy(batch.s.begin() + r * n, batch.s.begin() + (r + 1) * n, ws.begin() + 1 + r * stride);
      std::copy(batch.t.begin() + r * n, batch.t.begin() + (r + 1) * n, wt.begin() + 1 + r * stride);
    }
    const Strides st{stride, 1};
    const Loss strided = distillation_loss_with_grad(TensorView<const float>(ws.data() + 1, Shape{rows, n}, st),
                                                     TensorView<const float>(wt.data() + 1, Shape{rows, n}, st),
                                                     batch.label_view(), TensorView<float>(wg.data() + 1, Shape{rows, n}, st), o);
    CHECK(strided.value == flat.loss.value);
    CHECK(strided.per_row == flat.loss.per_row);
    check_strided_grad(wg, flat.grad, stride, n, kLogitPoison);
    DistillationOptions o3 = o;
    o3.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
    std::vector<float> g3(batch.s.size(), kLogitPoison);
    const Loss three = distillation_loss_with_grad(TensorView<const float>(batch.s.data(), Shape{b, l, n}),
                                                   TensorView<const float>(batch.t.data(), Shape{b, l, n}),
                                                   TensorView<const std::int64_t>(batch.labels.data(), Shape{b, l}),
                                                   TensorView<float>(g3.data(), Shape{b, l, n}), o3);
    CHECK(three.value == flat.loss.value);
    CHECK(three.per_row == flat.loss.per_row);
    CHECK(same_bits(g3, flat.grad));
  }
}
