// Tests for shrink/distill/soft_target.hpp: kl_div, reverse_kl_div and jensen_shannon against PyTorch autograd,
// a double-precision reference, every SIMD level and element type, gradient options, layouts and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/kl_rows.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/distill/soft_target.hpp"
#include "support/distill_checks.hpp"
#include "support/distill_logits_golden.hpp"
#include "support/logit_losses.hpp"
#include "support/random.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;

TEST_CASE("kl_div, reverse_kl_div and jensen_shannon match autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"kl"}) > 0);
  CHECK(test::check_logit_goldens({"reverse_kl"}) > 0);
  CHECK(test::check_logit_goldens({"jsd"}) > 0);
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers for the tests below.

namespace {

using namespace shrink::test;  // the helpers of support/distill_checks.hpp, logit_losses.hpp and simd_levels.hpp

using namespace shrink::distill;

constexpr double kSoftTargetBeta = 0.3;  // the JSD weight the tests use unless they say otherwise

const char* level_name(cpu::SimdLevel l) {
  switch (l) {
    case cpu::SimdLevel::scalar: return "scalar";
    case cpu::SimdLevel::sse2: return "sse2";
    case cpu::SimdLevel::avx2: return "avx2";
    case cpu::SimdLevel::avx512: return "avx512";
  }
  return "?";
}

template <class T>
float to_f(T x) {
  return static_cast<float>(x);
}


template <class T>
std::vector<T> converted(const std::vector<float>& v) {
  std::vector<T> out;
  out.reserve(v.size());
  for (float x : v) out.push_back(T(x));
  return out;
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  out.reserve(v.size());
  for (const T& x : v) out.push_back(to_f(x));
  return out;
}

// Runs one of the three losses, with its gradient when grad != nullptr.
template <class T>
Loss run_soft(SoftDivergence kind, const TensorView<const T>& s, const TensorView<const T>& t,
              const TensorView<T>* grad, const SoftTargetOptions& o, double beta = kSoftTargetBeta) {
  switch (kind) {
    case SoftDivergence::forward_kl: return grad ? kl_div_with_grad(s, t, *grad, o) : kl_div(s, t, o);
    case SoftDivergence::reverse_kl: return grad ? reverse_kl_div_with_grad(s, t, *grad, o) : reverse_kl_div(s, t, o);
    case SoftDivergence::jensen_shannon:
      return grad ? jensen_shannon_with_grad(s, t, beta, *grad, o) : jensen_shannon(s, t, beta, o);
  }
  return {};
}

// The loss and its gradient, from contiguous [rows, V] inputs.
template <class T>
LossAndGrad<T> soft_result(SoftDivergence kind, const std::vector<T>& s, const std::vector<T>& t, const Shape& shape,
                           const SoftTargetOptions& o, double beta = kSoftTargetBeta) {
  LossAndGrad<T> r;
  r.grad.assign(s.size(), T(kLogitPoison));
  const TensorView<T> g(r.grad.data(), shape);
  r.loss = run_soft<T>(kind, TensorView<const T>(s.data(), shape), TensorView<const T>(t.data(), shape), &g, o, beta);
  return r;
}

// Double-precision reference of one row: T^2 * D and its gradient d(T^2 D)/dz_s.
struct RowReference {
  double loss = 0.0;
  std::vector<double> grad;
};

std::vector<double> log_softmax(const float* z, std::int64_t n, double t) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(z[j]));
  double s = 0.0;
  for (std::int64_t j = 0; j < n; ++j) s += std::exp((z[j] - m) / t);
  std::vector<double> l(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) l[static_cast<std::size_t>(j)] = (z[j] - m) / t - std::log(s);
  return l;
}

RowReference soft_target_reference_row(SoftDivergence kind, const float* zs, const float* zt, std::int64_t n, double t,
                                       double beta) {
  const std::vector<double> ls = log_softmax(zs, n, t), lt = log_softmax(zt, n, t);
  const std::size_t un = static_cast<std::size_t>(n);
  std::vector<double> q(un), p(un);
  for (std::size_t j = 0; j < un; ++j) {
    q[j] = std::exp(ls[j]);
    p[j] = std::exp(lt[j]);
  }
  RowReference r;
  r.grad.assign(un, 0.0);
  if (kind == SoftDivergence::forward_kl) {
    for (std::size_t j = 0; j < un; ++j) {
      if (p[j] > 0.0) r.loss += p[j] * (lt[j] - ls[j]);
      r.grad[j] = t * (q[j] - p[j]);
    }
  } else if (kind == SoftDivergence::reverse_kl) {
    for (std::size_t j = 0; j < un; ++j)
      if (q[j] > 0.0) r.loss += q[j] * (ls[j] - lt[j]);
    for (std::size_t j = 0; j < un; ++j)
      if (q[j] > 0.0) r.grad[j] = t * q[j] * ((ls[j] - lt[j]) - r.loss);
  } else {
    std::vector<double> lqm(un, 0.0), lpm(un, 0.0);
    double kl_qm = 0.0, kl_pm = 0.0;
    for (std::size_t j = 0; j < un; ++j) {
      const double m = beta * p[j] + (1.0 - beta) * q[j];
      if (q[j] > 0.0) kl_qm += q[j] * (lqm[j] = std::log(q[j] / m));
      if (p[j] > 0.0) kl_pm += p[j] * (lpm[j] = std::log(p[j] / m));
    }
    r.loss = beta * kl_pm + (1.0 - beta) * kl_qm;
    for (std::size_t j = 0; j < un; ++j)
      if (q[j] > 0.0) r.grad[j] = t * (1.0 - beta) * q[j] * (lqm[j] - kl_qm);
  }
  r.loss *= t * t;
  return r;
}

// The reduced reference over rows x n (mask optional), its gradient with grad_scale.
ReferenceLoss soft_target_reference(SoftDivergence kind, const std::vector<float>& s, const std::vector<float>& t,
                                    std::int64_t rows, std::int64_t n, const SoftTargetOptions& o, double beta,
                                    const std::vector<std::uint8_t>& mask = {}) {
  ReferenceLoss out;
  out.per_row.assign(static_cast<std::size_t>(rows), 0.0);
  out.grad.assign(static_cast<std::size_t>(rows * n), 0.0);
  std::int64_t kept = 0;
  std::vector<RowReference> rr(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!mask.empty() && mask[static_cast<std::size_t>(r)] == 0) continue;
    ++kept;
    rr[static_cast<std::size_t>(r)] =
        soft_target_reference_row(kind, s.data() + r * n, t.data() + r * n, n, o.temperature, beta);
    out.per_row[static_cast<std::size_t>(r)] = rr[static_cast<std::size_t>(r)].loss;
  }
  double total = 0.0;
  for (double v : out.per_row) total += v;
  double divisor = 1.0;
  if (o.reduction == Reduction::mean) divisor = static_cast<double>(kept * n);
  if (o.reduction == Reduction::batchmean) divisor = static_cast<double>(kept);
  out.value = total / divisor;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!mask.empty() && mask[static_cast<std::size_t>(r)] == 0) continue;
    for (std::int64_t j = 0; j < n; ++j)
      out.grad[static_cast<std::size_t>(r * n + j)] =
          rr[static_cast<std::size_t>(r)].grad[static_cast<std::size_t>(j)] * o.grad_scale / divisor;
  }
  return out;
}

// Student and teacher logits, [rows, n], random normal values times scale (teacher from its own seed).
struct Logits {
  std::int64_t rows, n;
  std::vector<float> s, t;
  Logits(std::int64_t rows_, std::int64_t n_, unsigned seed, float scale = 2.0f)
      : rows(rows_), n(n_),
        s(test::random_values(static_cast<std::size_t>(rows_ * n_), seed, scale)),
        t(test::random_values(static_cast<std::size_t>(rows_ * n_), seed + 1000u, scale)) {}
  Shape shape() const { return Shape{rows, n}; }
};

// Calls `call` (which should throw), checks for a shrink::Error naming `needle`, and that the gradient buffer kept
}  // namespace

// ---------------------------------------------------------------------------------------------------------------

TEST_CASE("soft-target losses refuse bad input, name the argument and write nothing", "[distill][soft][bad-input]") {
  const std::int64_t rows = 4, n = 37;
  for (SoftDivergence kind : kDivergences) {
    INFO(soft_divergence_name(kind));
    Logits in(rows, n, 21);
    std::vector<float> grad(static_cast<std::size_t>(rows * n), kLogitPoison);
    const Shape shape{rows, n};
    SoftTargetOptions defaults;
    // Runs with a gradient view over `grad` of the given shape (and loss-only when with_grad is false).
    auto run = [&](const TensorView<const float>& s, const TensorView<const float>& t, const SoftTargetOptions& o,
                   double beta, Shape gshape, bool with_grad) {
      const TensorView<float> g(grad.data(), gshape);
      return run_soft<float>(kind, s, t, with_grad ? &g : nullptr, o, beta);
    };
    const TensorView<const float> student(in.s.data(), shape), teacher(in.t.data(), shape);
    for (bool with_grad : {true, false}) {
      INFO("with_grad " << with_grad);
      // Shapes: student and teacher, the gradient, empty batches, the last dimension's stride, the mask.
      check_refused(
          [&] {
            return run(student, TensorView<const float>(in.t.data(), Shape{rows, n - 1}), defaults, kSoftTargetBeta,
                       shape, with_grad);
          },
          "teacher.shape = [4, 36]: expected the shape of student [4, 37]", grad);
      check_refused(
          [&] {
            return run(student, TensorView<const float>(in.t.data(), Shape{rows - 1, n}), defaults, kSoftTargetBeta,
                       shape, with_grad);
          },
          "teacher.shape = [3, 37]", grad);
      for (const Shape& empty : {Shape{0, n}, Shape{rows, 0}, Shape{0, 0}, Shape{2, 0, n}}) {
        check_refused(
            [&] {
              return run(TensorView<const float>(in.s.data(), empty), TensorView<const float>(in.t.data(), empty),
                         defaults, kSoftTargetBeta, empty, with_grad);
            },
            "student.shape", grad);
        check_refused(
            [&] {
              return run(student, TensorView<const float>(in.t.data(), empty), defaults, kSoftTargetBeta, shape,
                         with_grad);
            },
            "teacher.shape", grad);
      }
      check_refused(
          [&] {
            return run(TensorView<const float>(in.s.data(), Shape{rows, n / 2}, Strides{n, 2}),
                       TensorView<const float>(in.t.data(), Shape{rows, n / 2}), defaults, kSoftTargetBeta,
                       Shape{rows, n / 2}, with_grad);
          },
          "student.strides = [37, 2]: expected a contiguous last dimension", grad);
      check_refused(
          [&] {
            return run(TensorView<const float>(in.s.data(), Shape{rows, n / 2}),
                       TensorView<const float>(in.t.data(), Shape{rows, n / 2}, Strides{n, 2}), defaults,
                       kSoftTargetBeta, Shape{rows, n / 2}, with_grad);
          },
          "teacher.strides", grad);
      std::vector<std::uint8_t> short_mask(static_cast<std::size_t>(rows - 1), 1);
      SoftTargetOptions masked;
      masked.row_mask = TensorView<const std::uint8_t>(short_mask.data(), Shape{rows - 1});
      check_refused([&] { return run(student, teacher, masked, kSoftTargetBeta, shape, with_grad); },
                    "options.row_mask.shape = [3]: expected one entry per row (4)", grad);
      // Parameters: temperature, grad_scale, beta.
      for (float bad_t : {0.0f, -0.0f, -1.0f, kNaN, kInf, -kInf}) {
        SoftTargetOptions o;
        o.temperature = bad_t;
        check_refused([&] { return run(student, teacher, o, kSoftTargetBeta, shape, with_grad); },
                      "options.temperature", grad);
      }
      for (double bad_scale : {static_cast<double>(kNaN), static_cast<double>(kInf), -static_cast<double>(kInf)}) {
        SoftTargetOptions o;
        o.grad_scale = bad_scale;
        check_refused([&] { return run(student, teacher, o, kSoftTargetBeta, shape, with_grad); }, "options.grad_scale",
                      grad);
      }
      if (kind == SoftDivergence::jensen_shannon) {
        for (double bad_beta : {-0.01, 1.01, -1.0, 2.0, static_cast<double>(kNaN), static_cast<double>(kInf)})
          check_refused([&] { return run(student, teacher, defaults, bad_beta, shape, with_grad); }, "beta = ", grad);
      }
      // Values: NaN, +inf, a row without a finite logit; first, middle and last row, both validate_first modes
      // where nothing may be written (the first row: nothing precedes it).
      struct BadValue {
        bool in_student;
        std::int64_t row, col;
        float value;
        std::string needle;
      };
      const std::vector<BadValue> values = {
          {true, 0, 0, kNaN, "student = NaN in row 0: expected logits without NaN"},
          {true, rows - 1, n - 1, kNaN, "student = NaN in row 3"},
          {false, rows - 1, 17, kNaN, "teacher = NaN in row 3"},
          {false, 1, n - 1, kNaN, "teacher = NaN in row 1"},
          {true, 2, 5, kInf, "student = +inf in row 2: expected finite or -inf logits"},
          {false, rows - 1, 0, kInf, "teacher = +inf in row 3"},
      };
      for (const BadValue& b : values) {
        std::vector<float>& v = b.in_student ? in.s : in.t;
        const std::size_t at = static_cast<std::size_t>(b.row * n + b.col);
        const float saved = v[at];
        v[at] = b.value;
        check_refused([&] { return run(student, teacher, defaults, kSoftTargetBeta, shape, with_grad); }, b.needle,
                      grad);
        v[at] = saved;
      }
      {
        // With a mask, validation still comes first: the masked row is not zeroed before the NaN is found.
        std::vector<std::uint8_t> mask{1, 0, 1, 1};
        SoftTargetOptions o;
        o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
        in.t[static_cast<std::size_t>(rows * n - 1)] = kNaN;
        check_refused([&] { return run(student, teacher, o, kSoftTargetBeta, shape, with_grad); },
                      "teacher = NaN in row 3", grad);
        in.t[static_cast<std::size_t>(rows * n - 1)] = 0.5f;
      }
      for (bool in_student : {true, false}) {
        std::vector<float>& v = in_student ? in.s : in.t;
        const std::vector<float> saved = v;
        std::fill(v.begin() + 2 * n, v.begin() + 3 * n, -kInf);
        check_refused([&] { return run(student, teacher, defaults, kSoftTargetBeta, shape, with_grad); },
                      std::string(in_student ? "student" : "teacher") +
                          " = row 2 all -inf: expected at least one finite logit a row",
                      grad);
        v = saved;
      }
    }
    // The gradient view: wrong rows, wrong V, a strided last dimension.
    std::vector<float> wide(static_cast<std::size_t>((rows + 1) * (n + 1)), kLogitPoison);
    auto run_g = [&](const TensorView<float>& g) {
      return run_soft<float>(kind, student, teacher, &g, defaults);
    };
    check_refused([&] { return run_g(TensorView<float>(wide.data(), Shape{rows + 1, n})); },
                  "grad_student.shape = [5, 37]: expected the shape of student [4, 37]", wide);
    check_refused([&] { return run_g(TensorView<float>(wide.data(), Shape{rows, n + 1})); }, "grad_student.shape = [4, 38]",
                  wide);
    check_refused([&] { return run_g(TensorView<float>(wide.data(), Shape{rows, n}, Strides{n + 1, 0})); },
                  "grad_student.strides", wide);
    check_refused([&] { return run_g(TensorView<float>(wide.data(), Shape{rows * n})); }, "grad_student.shape = [148]",
                  wide);
    // A NaN in a masked row is not read: no error, and the masked row's gradient is 0.
    std::vector<std::uint8_t> mask{1, 0, 1, 1};
    SoftTargetOptions o;
    o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
    in.s[static_cast<std::size_t>(n + 3)] = kNaN;
    in.t[static_cast<std::size_t>(n + 4)] = kInf;
    std::fill(in.t.begin() + n + 10, in.t.begin() + 2 * n, -kInf);
    const TensorView<float> g(grad.data(), shape);
    const Loss loss = run_soft<float>(kind, student, teacher, &g, o);
    CHECK(std::isfinite(loss.value));
    for (std::int64_t j = 0; j < n; ++j) CHECK(grad[static_cast<std::size_t>(n + j)] == 0.0f);
  }
}

TEST_CASE("soft-target losses: half and bfloat16 inputs are refused like float ones", "[distill][soft][bad-input]") {
  const std::int64_t rows = 3, n = 19;
  Logits in(rows, n, 5);
  std::vector<half> s = converted<half>(in.s), t = converted<half>(in.t);
  std::vector<half> grad(s.size(), half(kLogitPoison));
  const Shape shape{rows, n};
  s[static_cast<std::size_t>(2 * n + 18)] = half(kNaN);
  const TensorView<half> g(grad.data(), shape);
  for (SoftDivergence kind : kDivergences) {
    INFO(soft_divergence_name(kind));
    check_refused([&] { return run_soft<half>(kind, TensorView<const half>(s.data(), shape),
                                              TensorView<const half>(t.data(), shape), &g, SoftTargetOptions{}); },
                  "student = NaN in row 2", grad);
  }
  std::vector<bfloat16> sb = converted<bfloat16>(in.s), tb = converted<bfloat16>(in.t);
  std::vector<bfloat16> gb(sb.size(), bfloat16(kLogitPoison));
  tb[static_cast<std::size_t>(n)] = bfloat16(kInf);
  const TensorView<bfloat16> gbv(gb.data(), shape);
  for (SoftDivergence kind : kDivergences) {
    INFO(soft_divergence_name(kind));
    check_refused([&] { return run_soft<bfloat16>(kind, TensorView<const bfloat16>(sb.data(), shape),
                                                  TensorView<const bfloat16>(tb.data(), shape), &gbv,
                                                  SoftTargetOptions{}); },
                  "teacher = +inf in row 1", gb);
  }
}

TEST_CASE("validate_first = false gives exactly the results of validate_first = true, and still refuses NaN",
          "[distill][soft][validate]") {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {1, 9, 1100}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const std::int64_t rows = 6;
      Logits in(rows, n, 40 + static_cast<unsigned>(n));
      std::vector<std::uint8_t> mask{1, 1, 0, 1, 0, 1};
      for (bool masked : {false, true}) {
        for (bool accumulate : {false, true}) {
          SoftTargetOptions o;
          o.temperature = 1.7f;
          o.accumulate = accumulate;
          o.reduction = Reduction::none;
          if (masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
          const std::vector<float> start = test::random_values(in.s.size(), 3);
          std::vector<float> g1 = start, g2 = start;
          const TensorView<const float> s(in.s.data(), in.shape()), t(in.t.data(), in.shape());
          const TensorView<float> v1(g1.data(), in.shape()), v2(g2.data(), in.shape());
          o.validate_first = true;
          const Loss a = run_soft<float>(kind, s, t, &v1, o);
          const Loss a_only = run_soft<float>(kind, s, t, nullptr, o);
          o.validate_first = false;
          const Loss b = run_soft<float>(kind, s, t, &v2, o);
          const Loss b_only = run_soft<float>(kind, s, t, nullptr, o);
          CHECK(a.value == b.value);
          CHECK(a.per_row == b.per_row);
          CHECK(a_only.value == b_only.value);
          CHECK(a_only.per_row == b_only.per_row);
          CHECK(same_bits(g1, g2));
        }
      }
      // A NaN in row r still throws. Rows before r may already hold their gradient (that is the contract of
      // validate_first = false: one read of the logits, each row checked just before it is used); rows after r
      // have not been reached and keep the poison.
      for (std::int64_t bad_row : {std::int64_t{0}, std::int64_t{3}, rows - 1}) {
        for (bool in_student : {true, false}) {
          Logits bad(rows, n, 77);
          (in_student ? bad.s : bad.t)[static_cast<std::size_t>(bad_row * n + n / 2)] = kNaN;
          std::vector<float> g(bad.s.size(), kLogitPoison);
          const TensorView<float> gv(g.data(), bad.shape());
          SoftTargetOptions o;
          o.validate_first = false;
          const std::string needle =
              std::string(in_student ? "student" : "teacher") + " = NaN in row " + std::to_string(bad_row);
          const TensorView<const float> s(bad.s.data(), bad.shape()), t(bad.t.data(), bad.shape());
          CHECK_THROWS_AS(run_soft<float>(kind, s, t, &gv, o), Error);
          CHECK_THROWS_WITH(run_soft<float>(kind, s, t, &gv, o), Catch::Contains(needle));
          CHECK_THROWS_WITH(run_soft<float>(kind, s, t, nullptr, o), Catch::Contains(needle));
          for (std::size_t i = static_cast<std::size_t>((bad_row + 1) * n); i < g.size(); ++i)
            if (g[i] != kLogitPoison) FAIL_CHECK("row after the bad one written at " << i);
        }
      }
    }
  }
}

TEST_CASE("every SIMD level gives the same soft-target losses and gradients (float, half, bfloat16)",
          "[distill][soft][simd]") {
  SimdLevelGuard guard;
  const std::vector<cpu::SimdLevel> levels = supported_levels();
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {1, 7, 16, 33, 1023, 1024, 1025, 3000}) {
      const std::int64_t rows = 3;
      const Logits in(rows, n, 300 + static_cast<unsigned>(n), 2.5f);
      std::vector<std::uint8_t> mask{1, 0, 1};
      SoftTargetOptions o;
      o.temperature = 1.3f;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      o.reduction = Reduction::none;
      auto each_type = [&](auto tag) {
        using T = decltype(tag);
        const std::vector<T> s = converted<T>(in.s), t = converted<T>(in.t);
        cpu::simd_level() = cpu::SimdLevel::scalar;
        const LossAndGrad<T> base = soft_result<T>(kind, s, t, in.shape(), o);
        const double big = largest(base.grad);
        for (cpu::SimdLevel level : levels) {
          INFO(soft_divergence_name(kind)
               << ", V = " << n << ", " << level_name(level) << ", element size " << sizeof(T));
          cpu::simd_level() = level;
          const LossAndGrad<T> r = soft_result<T>(kind, s, t, in.shape(), o);
          CHECK(close_rel(r.loss.value, base.loss.value, 1e-6));
          for (std::size_t i = 0; i < r.loss.per_row.size(); ++i)
            CHECK(close_rel(r.loss.per_row[i], base.loss.per_row[i], 1e-6));
          // Float: within 1e-6 of the largest. A 16-bit output may round the last float bit either way: one ulp
          // of T at the element on top of that.
          const double ulp = std::is_same<T, float>::value ? 0.0 : 2.0 * unit_roundoff<T>();
          const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;  // one step of half's subnormals
          check_near(r.grad, base.grad, 1e-6 * big + sub, ulp, "grad");
          CHECK(r.loss.value == run_soft<T>(kind, TensorView<const T>(s.data(), in.shape()),
                                            TensorView<const T>(t.data(), in.shape()), nullptr, o).value);
        }
      };
      each_type(float{});
      each_type(half{});
      each_type(bfloat16{});
    }
  }
}

TEMPLATE_TEST_CASE("half and bfloat16 soft-target losses equal float on the same rounded values",
                   "[distill][soft][types]", half, bfloat16) {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {5, 64, 1500}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const std::int64_t rows = 4;
      const Logits in(rows, n, 500 + static_cast<unsigned>(n), 3.0f);
      const std::vector<TestType> s = converted<TestType>(in.s), t = converted<TestType>(in.t);
      const std::vector<float> sf = widened(s), tf = widened(t);
      for (Reduction red : kDistillReductions) {
        SoftTargetOptions o;
        o.temperature = 2.0f;
        o.reduction = red;
        o.grad_scale = 3.0;
        const LossAndGrad<TestType> low = soft_result<TestType>(kind, s, t, in.shape(), o);
        const LossAndGrad<float> full = soft_result<float>(kind, sf, tf, in.shape(), o);
        CHECK(close_rel(low.loss.value, full.loss.value, 1e-5));
        REQUIRE(low.loss.per_row.size() == full.loss.per_row.size());
        for (std::size_t i = 0; i < low.loss.per_row.size(); ++i)
          CHECK(close_rel(low.loss.per_row[i], full.loss.per_row[i], 1e-5));
        // The gradient is the float one rounded to T: half an ulp of T, plus the float paths' own 1e-6.
        const double sub = std::is_same<TestType, half>::value ? 0x1p-25 : 0.0;
        check_near(low.grad, full.grad, 1e-6 * largest(full.grad) + sub, unit_roundoff<TestType>(), "grad");
      }
    }
  }
}

TEST_CASE("soft-target losses match a double-precision reference, masked vocabulary entries included",
          "[distill][soft][reference]") {
  for (SoftDivergence kind : kDivergences) {
    for (float temperature : {0.5f, 1.0f, 2.7f}) {
      for (std::int64_t n : {3, 40, 1300}) {
        const std::int64_t rows = 5;
        Logits in(rows, n, 900 + static_cast<unsigned>(n), 2.0f);
        // -inf entries in both (a masked vocabulary), never a whole row, never where only the student lacks them.
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 1; j < n; j += 3) {
            in.s[static_cast<std::size_t>(r * n + j)] = -kInf;
            in.t[static_cast<std::size_t>(r * n + j)] = -kInf;
          }
        // The teacher alone lacks some entries (p = 0 there).
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 2; j < n; j += 5) in.t[static_cast<std::size_t>(r * n + j)] = -kInf;
        std::vector<std::uint8_t> mask{1, 1, 0, 1, 1};
        for (Reduction red : kDistillReductions) {
          INFO(soft_divergence_name(kind) << ", T = " << temperature << ", V = " << n << ", " << to_string(red));
          SoftTargetOptions o;
          o.temperature = temperature;
          o.reduction = red;
          o.grad_scale = 0.75;
          o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
          if (kind == SoftDivergence::reverse_kl) {
            // Reverse KL is +inf wherever the teacher lacks what the student has; compare on shared support.
            for (std::int64_t r = 0; r < rows; ++r)
              for (std::int64_t j = 2; j < n; j += 5) in.s[static_cast<std::size_t>(r * n + j)] = -kInf;
          }
          const LossAndGrad<float> got = soft_result<float>(kind, in.s, in.t, in.shape(), o);
          const ReferenceLoss want = soft_target_reference(kind, in.s, in.t, rows, n, o, kSoftTargetBeta, mask);
          CHECK(close_rel(got.loss.value, want.value, 1e-5));
          if (red == Reduction::none) {
            // Relative, with a floor of 1e-5 of the largest row for rows whose divergence is tiny (p ~ q).
            check_near(got.loss.per_row, want.per_row, 1e-5 * largest(want.per_row), 1e-5, "per_row");
          } else {
            CHECK(got.loss.per_row.empty());
          }
          check_near(got.grad, want.grad, 1e-5 * largest(want.grad), 0.0, "grad");
        }
      }
    }
  }
}

TEST_CASE("kl_div is +inf where the teacher has mass the student lacks; JSD with beta 0 or 1 is 0",
          "[distill][soft]") {
  const std::vector<float> s{0.0f, -kInf, 1.0f, 2.0f}, t{0.5f, 0.1f, -kInf, 1.0f};
  const TensorView<const float> sv(s.data(), Shape{1, 4}), tv(t.data(), Shape{1, 4});
  CHECK(kl_div(sv, tv).value == std::numeric_limits<double>::infinity());
  CHECK(reverse_kl_div(sv, tv).value == std::numeric_limits<double>::infinity());
  CHECK(std::isfinite(jensen_shannon(sv, tv, 0.5).value));
  std::vector<float> g(4, kLogitPoison);
  // The gradient of the forward KL stays finite: T (q - p).
  kl_div_with_grad(sv, tv, TensorView<float>(g.data(), Shape{1, 4}));
  for (float x : g) CHECK(std::isfinite(x));
  const Logits in(3, 11, 8);
  for (double beta : {0.0, 1.0}) {
    std::vector<float> gj(in.s.size(), kLogitPoison);
    const Loss l = jensen_shannon_with_grad(TensorView<const float>(in.s.data(), in.shape()),
                                            TensorView<const float>(in.t.data(), in.shape()), beta,
                                            TensorView<float>(gj.data(), in.shape()));
    CHECK(l.value == 0.0);
    for (float x : gj) CHECK(x == 0.0f);
  }
}

TEMPLATE_TEST_CASE("soft-target gradients: grad_scale multiplies, accumulate adds, masked rows",
                   "[distill][soft][grad]", float, half, bfloat16) {
  using T = TestType;
  const std::int64_t rows = 5, n = 45;
  const Logits in(rows, n, 61);
  const std::vector<T> s = converted<T>(in.s), t = converted<T>(in.t);
  const Shape shape{rows, n};
  const TensorView<const T> sv(s.data(), shape), tv(t.data(), shape);
  std::vector<std::uint8_t> mask{1, 0, 1, 1, 0};
  const double u = std::is_same<T, float>::value ? 0x1p-23 : 2.0 * unit_roundoff<T>();
  for (SoftDivergence kind : kDivergences) {
    for (Reduction red : kDistillReductions) {
      INFO(soft_divergence_name(kind) << ", " << to_string(red));
      SoftTargetOptions o;
      o.reduction = red;
      o.temperature = 1.5f;
      const LossAndGrad<T> unit = soft_result<T>(kind, s, t, shape, o);
      for (double scale : {2.5, -4.0, 0.125}) {
        o.grad_scale = scale;
        const LossAndGrad<T> scaled = soft_result<T>(kind, s, t, shape, o);
        CHECK(scaled.loss.value == unit.loss.value);  // the loss does not see grad_scale
        std::vector<double> want;
        for (const T& x : unit.grad) want.push_back(scale * to_f(x));
        // One rounding to T of each side, scaled: for half's subnormals, steps of 2^-24 times the scale.
        const double sub = std::is_same<T, half>::value ? 0x1p-24 * (1.0 + std::fabs(scale)) : 0.0;
        check_near(scaled.grad, want, 1e-6 * largest(want) + sub, u, "scaled grad");
      }
      o.grad_scale = 0.0;
      for (const T& x : soft_result<T>(kind, s, t, shape, o).grad) CHECK(to_f(x) == 0.0f);
      o.grad_scale = 1.0;

      // accumulate: g_after = g_before + g_fresh, within one rounding to T.
      const std::vector<T> before = converted<T>(test::random_values(s.size(), 99, 0.05f));
      std::vector<T> after = before;
      o.accumulate = true;
      const TensorView<T> av(after.data(), shape);
      const Loss acc = run_soft<T>(kind, sv, tv, &av, o);
      CHECK(acc.value == unit.loss.value);
      std::vector<double> sum;
      for (std::size_t i = 0; i < before.size(); ++i)
        sum.push_back(static_cast<double>(to_f(before[i])) + to_f(unit.grad[i]));
      for (std::size_t i = 0; i < before.size(); ++i) {
        const double tol = u * (std::fabs(to_f(before[i])) + std::fabs(to_f(unit.grad[i]))) +
                           (std::is_same<T, half>::value ? 0x1p-24 : 0.0);
        if (!(std::fabs(to_f(after[i]) - sum[i]) <= tol)) FAIL_CHECK("accumulated [" << i << "]");
      }
      o.accumulate = false;

      // Masked rows: 0 when overwriting, untouched when accumulating; kept rows as without the mask
      // (up to the reduction's divisor).
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      o.reduction = Reduction::sum;
      const LossAndGrad<T> masked = soft_result<T>(kind, s, t, shape, o);
      SoftTargetOptions plain = o;
      plain.row_mask = {};
      const LossAndGrad<T> all = soft_result<T>(kind, s, t, shape, plain);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          const std::size_t i = static_cast<std::size_t>(r * n + j);
          if (mask[static_cast<std::size_t>(r)])
            CHECK(same_bits(std::vector<T>{masked.grad[i]}, std::vector<T>{all.grad[i]}));
          else
            CHECK(to_f(masked.grad[i]) == 0.0f);
        }
      std::vector<T> kept = before;
      o.accumulate = true;
      const TensorView<T> kv(kept.data(), shape);
      run_soft<T>(kind, sv, tv, &kv, o);
      for (std::int64_t r = 0; r < rows; ++r) {
        if (mask[static_cast<std::size_t>(r)]) continue;
        CHECK(std::memcmp(kept.data() + r * n, before.data() + r * n, static_cast<std::size_t>(n) * sizeof(T)) == 0);
      }
    }
  }
}

TEST_CASE("soft-target losses: strided rows equal a contiguous copy and the gaps stay untouched; [B, L, V] = [B*L, V]",
          "[distill][soft][layout]") {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {7, 1030}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const std::int64_t b = 2, l = 3, rows = b * l, stride = n + 5;
      const Logits in(rows, n, 1234 + static_cast<unsigned>(n));
      std::vector<std::uint8_t> mask{1, 1, 0, 1, 1, 1};
      SoftTargetOptions o;
      o.reduction = Reduction::none;
      o.temperature = 0.9f;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      const LossAndGrad<float> flat = soft_result<float>(kind, in.s, in.t, Shape{rows, n}, o);

      // Rows inside wider buffers (one float in, too: a misaligned start), gradient gaps poisoned.
      std::vector<float> ws(static_cast<std::size_t>(rows * stride + 1), 3.0f), wt = ws;
      std::vector<float> wg(ws.size(), kLogitPoison);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          ws[static_cast<std::size_t>(1 + r * stride + j)] = in.s[static_cast<std::size_t>(r * n + j)];
          wt[static_cast<std::size_t>(1 + r * stride + j)] = in.t[static_cast<std::size_t>(r * n + j)];
        }
      const Strides st{stride, 1};
      const TensorView<float> gv(wg.data() + 1, Shape{rows, n}, st);
      const Loss strided = run_soft<float>(kind, TensorView<const float>(ws.data() + 1, Shape{rows, n}, st),
                                           TensorView<const float>(wt.data() + 1, Shape{rows, n}, st), &gv, o);
      CHECK(strided.value == flat.loss.value);
      CHECK(strided.per_row == flat.loss.per_row);
      check_strided_grad(wg, flat.grad, stride, n, kLogitPoison);

      // [B, L, V], its mask [B, L]; and [B, L, V] through strides whose leading dimensions collapse.
      std::vector<float> g3(in.s.size(), kLogitPoison);
      SoftTargetOptions o3 = o;
      o3.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
      const TensorView<float> g3v(g3.data(), Shape{b, l, n});
      const Loss three = run_soft<float>(kind, TensorView<const float>(in.s.data(), Shape{b, l, n}),
                                         TensorView<const float>(in.t.data(), Shape{b, l, n}), &g3v, o3);
      CHECK(three.value == flat.loss.value);
      CHECK(three.per_row == flat.loss.per_row);
      CHECK(same_bits(g3, flat.grad));
      std::fill(wg.begin(), wg.end(), kLogitPoison);
      const Strides st3{l * stride, stride, 1};
      const TensorView<float> g3s(wg.data() + 1, Shape{b, l, n}, st3);
      const Loss three_strided = run_soft<float>(kind, TensorView<const float>(ws.data() + 1, Shape{b, l, n}, st3),
                                                 TensorView<const float>(wt.data() + 1, Shape{b, l, n}, st3), &g3s, o3);
      CHECK(three_strided.value == flat.loss.value);
      for (std::int64_t r = 0; r < rows; ++r)
        CHECK(std::memcmp(wg.data() + 1 + r * stride, flat.grad.data() + r * n, static_cast<std::size_t>(n) * 4) == 0);
      // Leading dimensions that do not collapse into one row stride are refused.
      const Strides broken{l * stride + 2, stride, 1};
      std::vector<float> big(static_cast<std::size_t>(b * (l * stride + 2)), 1.0f);
      CHECK_THROWS_WITH(run_soft<float>(kind, TensorView<const float>(big.data(), Shape{b, l, n}, broken),
                                        TensorView<const float>(big.data(), Shape{b, l, n}, broken), nullptr, o3),
                        Catch::Contains("student.strides") && Catch::Contains("flatten"));
    }
  }
}

TEST_CASE("kl_div, reverse_kl_div and jensen_shannon without a gradient give exactly the value with it",
          "[distill][soft]") {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {1, 13, 1024, 2100}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const Logits in(4, n, 7000 + static_cast<unsigned>(n));
      for (Reduction red : kDistillReductions) {
        SoftTargetOptions o;
        o.reduction = red;
        o.temperature = 3.0f;
        const LossAndGrad<float> with = soft_result<float>(kind, in.s, in.t, in.shape(), o);
        const Loss without = run_soft<float>(kind, TensorView<const float>(in.s.data(), in.shape()),
                                             TensorView<const float>(in.t.data(), in.shape()), nullptr, o);
        CHECK(without.value == with.loss.value);
        CHECK(without.per_row == with.loss.per_row);
      }
    }
  }
}

// The forward KL runs an online softmax over tiles of cpu::kKlTile columns (cpu/kl_rows.hpp): maxes that rise
// from tile to tile, -inf over whole tiles, huge logits and the streaming stores of large gradients.
TEST_CASE("kl_div's online softmax: rising maxes, a max in the first tile, against a double reference",
          "[distill][soft][kl-tiles]") {
  SimdLevelGuard guard;
  const std::int64_t n = 5000;
  std::vector<float> s(static_cast<std::size_t>(4 * n)), t(s.size());
  const std::vector<float> noise = test::random_values(s.size(), 17, 0.3f);
  for (std::int64_t j = 0; j < n; ++j) {
    const float x = static_cast<float>(j) / static_cast<float>(n);
    const std::size_t uj = static_cast<std::size_t>(j);
    s[uj] = 12.0f * x + noise[uj];                       // rising: every tile raises the max
    t[uj] = 9.0f * x;
    s[uj + static_cast<std::size_t>(n)] = -12.0f * x;    // the max in the first tile
    t[uj + static_cast<std::size_t>(n)] = -10.0f * x + noise[uj];
    s[uj + static_cast<std::size_t>(2 * n)] = 12.0f * x;  // student rising, teacher falling
    t[uj + static_cast<std::size_t>(2 * n)] = -8.0f * x;
    s[uj + static_cast<std::size_t>(3 * n)] = noise[uj] * 6.0f;  // the max somewhere in the middle
    t[uj + static_cast<std::size_t>(3 * n)] = 5.0f * std::sin(static_cast<float>(j) * 0.01f);
  }
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (float temperature : {1.0f, 1.7f}) {
      INFO(level_name(level) << ", T = " << temperature);
      SoftTargetOptions o;
      o.reduction = Reduction::none;
      o.temperature = temperature;
      const LossAndGrad<float> got = soft_result<float>(SoftDivergence::forward_kl, s, t, Shape{4, n}, o);
      const ReferenceLoss want = soft_target_reference(SoftDivergence::forward_kl, s, t, 4, n, o, 0.0);
      for (std::size_t r = 0; r < 4; ++r) {
        INFO("row " << r << ": " << got.loss.per_row[r] << ", reference " << want.per_row[r]);
        CHECK(close_rel(got.loss.per_row[r], want.per_row[r], 1e-6));
      }
      check_near(got.grad, want.grad, 1e-6 * largest(want.grad), 0.0, "grad");
    }
  }
}

TEST_CASE("kl_div's online softmax: -inf over whole tiles and logits of +-1e4", "[distill][soft][kl-tiles]") {
  SimdLevelGuard guard;
  const std::int64_t n = 3500, tile = cpu::kKlTile;
  struct Row {
    const char* what;
    std::function<float(std::int64_t)> s, t;
  };
  auto noise = [](std::int64_t j, float scale) { return scale * std::sin(0.37f * static_cast<float>(j)); };
  const std::vector<Row> cases = {
      {"student -inf over tile 0, teacher too", [&](std::int64_t j) { return j < tile ? -kInf : noise(j, 2.0f); },
       [&](std::int64_t j) { return j < tile ? -kInf : noise(j + 5, 2.0f); }},
      {"teacher -inf over tiles 0 and 2", [&](std::int64_t j) { return noise(j, 2.0f); },
       [&](std::int64_t j) { return j < tile || (j >= 2 * tile && j < 3 * tile) ? -kInf : noise(j + 3, 1.5f); }},
      {"student -inf over tile 1, teacher too; teacher -inf over the tail tile",
       [&](std::int64_t j) { return j >= tile && j < 2 * tile ? -kInf : noise(j, 3.0f); },
       [&](std::int64_t j) { return j >= tile && j < 2 * tile ? -kInf : j >= 3 * tile ? -kInf : noise(j + 1, 3.0f); }},
      {"teacher -inf over tile 0, then logits near -1e4",
       [&](std::int64_t j) { return noise(j, 2.0f); },
       [&](std::int64_t j) { return j < tile ? -kInf : -1e4f + noise(j, 2.0f); }},
      {"student -inf over tile 0 where the teacher is -inf, then logits near -1e4",
       [&](std::int64_t j) { return j < tile ? -kInf : -1e4f + noise(j, 2.0f); },
       [&](std::int64_t j) { return j < tile ? -kInf : noise(j + 7, 1.0f); }},
      {"+-1e4 alternating", [&](std::int64_t j) { return j % 3 == 0 ? 1e4f : -1e4f; },
       [&](std::int64_t j) { return j % 2 == 0 ? 1e4f - static_cast<float>(j % 5) : -1e4f; }},
      {"-1e4 first, +1e4 from tile 2 on", [&](std::int64_t j) { return j < 2 * tile ? -1e4f : 1e4f + noise(j, 1.0f); },
       [&](std::int64_t j) { return j < 2 * tile ? -1e4f + noise(j, 1.0f) : 1e4f + noise(j + 2, 1.0f); }},
      {"student -inf over tile 0, teacher -1e4 there, then +1e4",
       [&](std::int64_t j) { return j < tile ? -kInf : 1e4f + noise(j, 1.0f); },
       [&](std::int64_t j) { return j < tile ? -1e4f : 1e4f + noise(j + 2, 1.0f); }},
  };
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (const Row& c : cases) {
      INFO(level_name(level) << ": " << c.what);
      std::vector<float> s(static_cast<std::size_t>(n)), t(s.size());
      for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<std::size_t>(j)] = c.s(j);
        t[static_cast<std::size_t>(j)] = c.t(j);
      }
      SoftTargetOptions o;
      o.temperature = 1.25f;
      const LossAndGrad<float> got = soft_result<float>(SoftDivergence::forward_kl, s, t, Shape{1, n}, o);
      const ReferenceLoss want = soft_target_reference(SoftDivergence::forward_kl, s, t, 1, n, o, 0.0);
      INFO("loss " << got.loss.value << ", reference " << want.value);
      CHECK(std::isfinite(got.loss.value));
      CHECK(close_rel(got.loss.value, want.value, 1e-6));
      for (float x : got.grad)
        if (!std::isfinite(x)) {
          FAIL_CHECK("gradient not finite: " << x);
          break;
        }
      check_near(got.grad, want.grad, 1e-6 * largest(want.grad), 0.0, "grad");
      CHECK(kl_div(TensorView<const float>(s.data(), Shape{1, n}), TensorView<const float>(t.data(), Shape{1, n}), o)
                .value == got.loss.value);
    }
  }
}

TEST_CASE("kl_div_with_grad's streaming stores: a 17 MB gradient from a misaligned start equals row-by-row results",
          "[distill][soft][kl-tiles]") {
  SimdLevelGuard guard;
  const std::int64_t rows = 4200, n = 1024;  // 4200 x 1024 floats = 17.2 MB >= the 16 MiB streaming threshold
  const Logits in(rows, n, 4242, 1.5f);
  std::vector<float> buffer(static_cast<std::size_t>(rows * n + 64), kLogitPoison);
  float* start = buffer.data();
  while (reinterpret_cast<std::uintptr_t>(start) % 64 != 0) ++start;
  ++start;  // one float past a 64-byte boundary: streaming needs a head done the ordinary way
  const std::ptrdiff_t offset = start - buffer.data();
  std::vector<cpu::SimdLevel> levels;  // the vector loops stream; the scalar loop has no streaming stores
  for (cpu::SimdLevel level : supported_levels())
    if (level >= cpu::SimdLevel::avx2) levels.push_back(level);
  if (levels.empty()) levels.push_back(cpu::detect_simd_level());
  for (cpu::SimdLevel level : levels) {
    cpu::simd_level() = level;
    INFO(level_name(level));
    std::fill(buffer.begin(), buffer.end(), kLogitPoison);
    SoftTargetOptions o;
    o.reduction = Reduction::sum;
    o.temperature = 2.0f;
    const TensorView<const float> s(in.s.data(), in.shape()), t(in.t.data(), in.shape());
    const Loss loss = kl_div_with_grad(s, t, TensorView<float>(start, in.shape()), o);
    o.reduction = Reduction::none;
    double total = 0.0;
    std::vector<float> one(static_cast<std::size_t>(n));
    bool same = true;
    for (std::int64_t r = 0; r < rows && same; ++r) {
      const Loss row = kl_div_with_grad(TensorView<const float>(in.s.data() + r * n, Shape{1, n}),
                                        TensorView<const float>(in.t.data() + r * n, Shape{1, n}),
                                        TensorView<float>(one.data(), Shape{1, n}), o);
      total += row.value;
      if (std::memcmp(one.data(), start + r * n, static_cast<std::size_t>(n) * sizeof(float)) != 0) {
        FAIL_CHECK("row " << r << " differs");
        same = false;
      }
    }
    CHECK(same);
    CHECK(close_rel(loss.value, total, 1e-12));
    for (std::ptrdiff_t i = 0; i < offset; ++i) CHECK(buffer[static_cast<std::size_t>(i)] == kLogitPoison);
    for (std::size_t i = static_cast<std::size_t>(offset + rows * n); i < buffer.size(); ++i)
      CHECK(buffer[i] == kLogitPoison);
  }
}
