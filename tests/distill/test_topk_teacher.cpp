// Tests for shrink/distill/topk_teacher.hpp: the three divergences against a top-k teacher, against autograd, a
// double reference with central-difference gradients, the full teacher (k = V), every SIMD level and element type,
// gradient options, layouts and bad input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/distill_checks.hpp"
#include "support/distill_logits_golden.hpp"
#include "support/logit_losses.hpp"
#include "support/random.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;

TEST_CASE("top-k teachers match autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"topk_kl"}) > 0);
  CHECK(test::check_logit_goldens({"topk_reverse_kl"}) > 0);
  CHECK(test::check_logit_goldens({"topk_jsd"}) > 0);
}

namespace {

using namespace shrink::test;  // the helpers of support/distill_checks.hpp, logit_losses.hpp and simd_levels.hpp

using namespace shrink::distill;

constexpr double kTopKBeta = 0.35;  // the JSD weight the tests use unless they say otherwise

// A student and a top-k teacher: the teacher's full logits, its k largest of each row (shuffled), their indices,
// and the teacher's probability outside them at temperature t.
template <class Index = std::int64_t>
struct TopKData {
  std::int64_t rows, n, k;
  std::vector<float> s, full, logits, tail;
  std::vector<Index> idx;

  TopKData(std::int64_t rows_, std::int64_t n_, std::int64_t k_, unsigned seed, double t = 1.0, float scale = 2.0f)
      : rows(rows_), n(n_), k(k_),
        s(test::random_values(static_cast<std::size_t>(rows_ * n_), seed, scale)),
        full(test::random_values(static_cast<std::size_t>(rows_ * n_), seed + 500u, scale)) {
    std::mt19937 rng(seed);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = full.data() + r * n;
      std::vector<std::int64_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [row](std::int64_t a, std::int64_t b) { return row[a] > row[b]; });
      order.resize(static_cast<std::size_t>(k));
      std::shuffle(order.begin(), order.end(), rng);
      double m = -std::numeric_limits<double>::infinity(), total = 0.0, kept = 0.0;
      for (std::int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(row[j]));
      for (std::int64_t j = 0; j < n; ++j) total += std::exp((row[j] - m) / t);
      for (std::int64_t c : order) {
        idx.push_back(static_cast<Index>(c));
        logits.push_back(row[c]);
        kept += std::exp((row[c] - m) / t);
      }
      tail.push_back(static_cast<float>(std::max(0.0, 1.0 - kept / total)));
    }
  }
  Shape shape() const { return Shape{rows, n}; }
  TopKTeacher<float, Index> teacher(bool with_tail) const {
    TopKTeacher<float, Index> t;
    t.logits = TensorView<const float>(logits.data(), Shape{rows, k});
    t.indices = TensorView<const Index>(idx.data(), Shape{rows, k});
    if (with_tail) t.tail_mass = TensorView<const float>(tail.data(), Shape{rows});
    return t;
  }
};

template <class T, class Index>
Loss run_topk(SoftDivergence kind, const TensorView<const T>& s, const TopKTeacher<T, Index>& t, const TensorView<T>* g,
              const SoftTargetOptions& o, double beta = kTopKBeta) {
  switch (kind) {
    case SoftDivergence::forward_kl: return g ? kl_div_with_grad(s, t, *g, o) : kl_div(s, t, o);
    case SoftDivergence::reverse_kl: return g ? reverse_kl_div_with_grad(s, t, *g, o) : reverse_kl_div(s, t, o);
    case SoftDivergence::jensen_shannon:
      return g ? jensen_shannon_with_grad(s, t, beta, *g, o) : jensen_shannon(s, t, beta, o);
  }
  return {};
}

// The top-k teacher of d in element type T (logits rounded to T).
template <class T, class Index>
struct TypedTeacher {
  std::vector<T> logits;
  TopKTeacher<T, Index> teacher;
  TypedTeacher(const TopKData<Index>& d, bool with_tail) {
    for (float x : d.logits) logits.push_back(T(x));
    teacher.logits = TensorView<const T>(logits.data(), Shape{d.rows, d.k});
    teacher.indices = TensorView<const Index>(d.idx.data(), Shape{d.rows, d.k});
    if (with_tail) teacher.tail_mass = TensorView<const float>(d.tail.data(), Shape{d.rows});
  }
};

template <class T, class Index>
LossAndGrad<T> topk_result(SoftDivergence kind, const std::vector<T>& s, const TopKTeacher<T, Index>& t,
                           const Shape& shape, const SoftTargetOptions& o, double beta = kTopKBeta) {
  LossAndGrad<T> r;
  r.grad.assign(s.size(), T(kLogitPoison));
  const TensorView<T> g(r.grad.data(), shape);
  r.loss = run_topk<T, Index>(kind, TensorView<const T>(s.data(), shape), t, &g, o, beta);
  return r;
}

// The coarsened divergence of one row in double (file comment of topk_teacher.hpp), times T^2.
double topk_reference_row(SoftDivergence kind, const std::vector<double>& z, const float* tl, const std::int64_t* idx,
                          std::int64_t k, double tail, double t, double beta) {
  const std::int64_t n = static_cast<std::int64_t>(z.size());
  auto log_sum_exp = [t](const std::vector<double>& v) {
    double m = -std::numeric_limits<double>::infinity();
    for (double x : v) m = std::max(m, x);
    if (m == -std::numeric_limits<double>::infinity()) return m;
    double s = 0.0;
    for (double x : v) s += std::exp((x - m) / t);
    return m / t + std::log(s);
  };
  const double lse = log_sum_exp(z);
  std::vector<bool> in_k(static_cast<std::size_t>(n), false);
  for (std::int64_t c = 0; c < k; ++c) in_k[static_cast<std::size_t>(idx[c])] = true;
  std::vector<double> rest;
  for (std::int64_t j = 0; j < n; ++j)
    if (!in_k[static_cast<std::size_t>(j)]) rest.push_back(z[static_cast<std::size_t>(j)]);
  std::vector<double> teacher(tl, tl + k);
  const double lse_t = log_sum_exp(teacher);
  std::vector<double> lp, lq;
  for (std::int64_t c = 0; c < k; ++c) {
    lp.push_back(tl[c] / t - lse_t + std::log1p(-tail));
    lq.push_back(z[static_cast<std::size_t>(idx[c])] / t - lse);
  }
  lp.push_back(tail > 0.0 ? std::log(tail) : -std::numeric_limits<double>::infinity());
  lq.push_back(log_sum_exp(rest) - lse);
  double d = 0.0;
  for (std::size_t c = 0; c < lp.size(); ++c) {
    const double p = std::exp(lp[c]), q = std::exp(lq[c]);
    if (kind == SoftDivergence::forward_kl) {
      if (p > 0.0) d += p * (lp[c] - lq[c]);
    } else if (kind == SoftDivergence::reverse_kl) {
      if (q > 0.0) d += q * (lq[c] - lp[c]);
    } else {
      const double lm = std::log(beta * p + (1.0 - beta) * q);
      if (p > 0.0) d += beta * p * (lp[c] - lm);
      if (q > 0.0) d += (1.0 - beta) * q * (lq[c] - lm);
    }
  }
  return t * t * d;
}

// The reduced reference over every row, with its gradient by central differences (independent of the formula
// topk_teacher.hpp uses).
template <class Index>
ReferenceLoss topk_reference(SoftDivergence kind, const TopKData<Index>& d, bool with_tail, const SoftTargetOptions& o,
                             double beta, const std::vector<std::uint8_t>& mask = {}) {
  ReferenceLoss out;
  out.per_row.assign(static_cast<std::size_t>(d.rows), 0.0);
  out.grad.assign(static_cast<std::size_t>(d.rows * d.n), 0.0);
  std::int64_t kept = 0;
  const double t = o.temperature;
  for (std::int64_t r = 0; r < d.rows; ++r)
    if (mask.empty() || mask[static_cast<std::size_t>(r)]) ++kept;
  double divisor = 1.0;
  if (o.reduction == Reduction::mean) divisor = static_cast<double>(kept * d.n);
  if (o.reduction == Reduction::batchmean) divisor = static_cast<double>(kept);
  for (std::int64_t r = 0; r < d.rows; ++r) {
    if (!mask.empty() && !mask[static_cast<std::size_t>(r)]) continue;
    std::vector<double> z(d.s.begin() + r * d.n, d.s.begin() + (r + 1) * d.n);
    std::vector<std::int64_t> idx(d.idx.begin() + r * d.k, d.idx.begin() + (r + 1) * d.k);
    const double tail = with_tail ? d.tail[static_cast<std::size_t>(r)] : 0.0;
    const float* tl = d.logits.data() + r * d.k;
    out.per_row[static_cast<std::size_t>(r)] = topk_reference_row(kind, z, tl, idx.data(), d.k, tail, t, beta);
    for (std::int64_t j = 0; j < d.n; ++j) {
      const double h = 1e-4, saved = z[static_cast<std::size_t>(j)];
      z[static_cast<std::size_t>(j)] = saved + h;
      const double up = topk_reference_row(kind, z, tl, idx.data(), d.k, tail, t, beta);
      z[static_cast<std::size_t>(j)] = saved - h;
      const double down = topk_reference_row(kind, z, tl, idx.data(), d.k, tail, t, beta);
      z[static_cast<std::size_t>(j)] = saved;
      out.grad[static_cast<std::size_t>(r * d.n + j)] = (up - down) / (2.0 * h) * o.grad_scale / divisor;
    }
  }
  double total = 0.0;
  for (double v : out.per_row) total += v;
  out.value = total / divisor;
  return out;
}

}  // namespace

TEST_CASE("top-k teachers match a double reference with central-difference gradients", "[distill][topk][reference]") {
  for (SoftDivergence kind : kDivergences) {
    for (bool with_tail : {false, true}) {
      if (kind == SoftDivergence::reverse_kl && !with_tail) continue;  // +inf: the student has mass outside the k
      for (double t : {0.7, 1.0, 2.0}) {
        for (std::int64_t k : {1, 4, 9}) {
          const TopKData<> d(5, 23, k, 100 + static_cast<unsigned>(k), t);
          const std::vector<std::uint8_t> mask{1, 0, 1, 1, 1};
          for (Reduction red : kDistillReductions) {
            INFO(soft_divergence_name(kind)
                 << ", tail " << with_tail << ", T = " << t << ", k = " << k << ", " << to_string(red));
            SoftTargetOptions o;
            o.temperature = static_cast<float>(t);
            o.reduction = red;
            o.grad_scale = 1.5;
            o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{d.rows});
            const LossAndGrad<float> got =
                topk_result<float, std::int64_t>(kind, d.s, d.teacher(with_tail), d.shape(), o);
            const ReferenceLoss want = topk_reference(kind, d, with_tail, o, kTopKBeta, mask);
            CHECK(close_rel(got.loss.value, want.value, 1e-5));
            if (red == Reduction::none) check_near(got.loss.per_row, want.per_row, 1e-6 * largest(want.per_row), 1e-5, "per_row");
            check_near(got.grad, want.grad, 1e-5 * largest(want.grad), 0.0, "grad");
          }
        }
      }
    }
  }
}

TEST_CASE("a top-k teacher with k = V and no tail is the full teacher", "[distill][topk]") {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {1, 6, 40}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const TopKData<> d(3, n, n, 7 + static_cast<unsigned>(n));
      // The full teacher whose entries sit where the indices say.
      std::vector<float> full(d.s.size());
      for (std::int64_t r = 0; r < d.rows; ++r)
        for (std::int64_t c = 0; c < d.k; ++c)
          full[static_cast<std::size_t>(r * n + d.idx[static_cast<std::size_t>(r * d.k + c)])] =
              d.logits[static_cast<std::size_t>(r * d.k + c)];
      SoftTargetOptions o;
      o.temperature = 1.3f;
      o.reduction = Reduction::none;
      const LossAndGrad<float> topk = topk_result<float, std::int64_t>(kind, d.s, d.teacher(false), d.shape(), o);
      std::vector<float> g(d.s.size(), kLogitPoison);
      const TensorView<const float> sv(d.s.data(), d.shape()), tv(full.data(), d.shape());
      const TensorView<float> gv(g.data(), d.shape());
      Loss whole;
      if (kind == SoftDivergence::forward_kl) whole = kl_div_with_grad(sv, tv, gv, o);
      if (kind == SoftDivergence::reverse_kl) whole = reverse_kl_div_with_grad(sv, tv, gv, o);
      if (kind == SoftDivergence::jensen_shannon) whole = jensen_shannon_with_grad(sv, tv, kTopKBeta, gv, o);
      // 1e-12 absolute: where both are 0 (V = 1) the top-k path's double log-sum-exp leaves ~1e-16.
      check_near(topk.loss.per_row, whole.per_row, 1e-6 * largest(whole.per_row) + 1e-12, 1e-5, "per_row");
      check_near(topk.grad, g, 1e-5 * largest(g) + 1e-12, 0.0, "grad");
    }
  }
}

TEST_CASE("top-k teachers refuse bad input, name the argument and write nothing", "[distill][topk][bad-input]") {
  const std::int64_t rows = 4, n = 37, k = 5;
  for (SoftDivergence kind : kDivergences) {
    INFO(soft_divergence_name(kind));
    TopKData<> d(rows, n, k, 3);
    TopKData<std::int32_t> d32(rows, n, k, 3);
    std::vector<float> grad(d.s.size(), kLogitPoison);
    const TensorView<float> g(grad.data(), d.shape());
    const TensorView<const float> student(d.s.data(), d.shape());
    for (bool with_grad : {true, false}) {
      INFO("with_grad " << with_grad);
      auto run = [&](const TopKTeacher<float, std::int64_t>& t, const SoftTargetOptions& o, double beta,
                     const TensorView<const float>& s) {
        return run_topk<float, std::int64_t>(kind, s, t, with_grad ? &g : nullptr, o, beta);
      };
      auto run32 = [&](const TopKTeacher<float, std::int32_t>& t, const SoftTargetOptions& o) {
        return run_topk<float, std::int32_t>(kind, student, t, with_grad ? &g : nullptr, o, kTopKBeta);
      };
      const SoftTargetOptions defaults;
      // Indices: out of range (both ends), repeated in a row; int64 and int32.
      for (std::int64_t bad : {std::int64_t{-1}, n, n + 100}) {
        const std::int64_t saved = d.idx[12];
        d.idx[12] = bad;
        check_refused(
            [&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
            "teacher.indices = index " + std::to_string(bad) + " in row 2: expected vocabulary entries in [0, 37)",
            grad);
        d.idx[12] = saved;
        const std::int32_t saved32 = d32.idx[19];
        d32.idx[19] = static_cast<std::int32_t>(bad);
        check_refused([&] { return run32(d32.teacher(false), defaults); },
                      "teacher.indices = index " + std::to_string(bad) + " in row 3", grad);
        d32.idx[19] = saved32;
      }
      {
        const std::int64_t saved = d.idx[7];
        d.idx[7] = d.idx[9];  // row 1
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
                      "teacher.indices = a repeated index in row 1: expected k distinct entries a row", grad);
        d.idx[7] = saved;
        const std::int32_t saved32 = d32.idx[0];
        d32.idx[0] = d32.idx[4];
        check_refused([&] { return run32(d32.teacher(true), defaults); }, "a repeated index in row 0", grad);
        d32.idx[0] = saved32;
      }
      // Shapes: k > V, logits and indices of different shapes, rows that differ from the student's.
      {
        std::vector<float> many(static_cast<std::size_t>(rows * (n + 1)), 0.0f);
        std::vector<std::int64_t> many_idx(many.size());
        for (std::size_t i = 0; i < many_idx.size(); ++i) many_idx[i] = static_cast<std::int64_t>(i % static_cast<std::size_t>(n + 1));
        TopKTeacher<float, std::int64_t> t;
        t.logits = TensorView<const float>(many.data(), Shape{rows, n + 1});
        t.indices = TensorView<const std::int64_t>(many_idx.data(), Shape{rows, n + 1});
        check_refused([&] { return run(t, defaults, kTopKBeta, student); },
                      "teacher.logits = [4 rows, 38]: expected k <= V (37)", grad);
        TopKTeacher<float, std::int64_t> mismatch = d.teacher(false);
        mismatch.indices = TensorView<const std::int64_t>(d.idx.data(), Shape{rows, k - 1});
        check_refused([&] { return run(mismatch, defaults, kTopKBeta, student); },
                      "teacher.indices = [4 rows, 4]: expected the shape of teacher.logits [4 rows, 5]", grad);
        mismatch = d.teacher(false);
        mismatch.indices = TensorView<const std::int64_t>(d.idx.data(), Shape{rows - 1, k});
        check_refused([&] { return run(mismatch, defaults, kTopKBeta, student); }, "teacher.indices = [3 rows, 5]",
                      grad);
        TopKTeacher<float, std::int64_t> few = d.teacher(false);
        few.logits = TensorView<const float>(d.logits.data(), Shape{rows - 1, k});
        few.indices = TensorView<const std::int64_t>(d.idx.data(), Shape{rows - 1, k});
        check_refused([&] { return run(few, defaults, kTopKBeta, student); },
                      "teacher.logits = [3 rows, 5]: expected one row of k logits per student row (4)", grad);
        TopKTeacher<float, std::int64_t> empty = d.teacher(false);
        empty.logits = TensorView<const float>(d.logits.data(), Shape{rows, 0});
        empty.indices = TensorView<const std::int64_t>(d.idx.data(), Shape{rows, 0});
        check_refused([&] { return run(empty, defaults, kTopKBeta, student); }, "teacher.logits.shape", grad);
        check_refused(
            [&] {
              return run(d.teacher(false), defaults, kTopKBeta, TensorView<const float>(d.s.data(), Shape{0, n}));
            },
            "student.shape", grad);
        check_refused(
            [&] {
              return run(d.teacher(false), defaults, kTopKBeta,
                         TensorView<const float>(d.s.data(), Shape{rows, n / 2}, Strides{n, 2}));
            },
            "student.strides", grad);
      }
      // tail_mass: outside [0, 1), NaN, the wrong size.
      for (float bad : {-0.01f, 1.0f, 1.5f, kNaN, kInf}) {
        const float saved = d.tail[2];
        d.tail[2] = bad;
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
                      "teacher.tail_mass = row 2: ", grad);
        d.tail[2] = saved;
      }
      {
        TopKTeacher<float, std::int64_t> t = d.teacher(true);
        t.tail_mass = TensorView<const float>(d.tail.data(), Shape{rows - 1});
        check_refused([&] { return run(t, defaults, kTopKBeta, student); },
                      "teacher.tail_mass.shape = [3]: expected one contiguous entry per row (4)", grad);
      }
      // Values: NaN in the student, NaN / +inf / all -inf in the teacher's logits, the last row included.
      {
        d.s[static_cast<std::size_t>(rows * n - 1)] = kNaN;
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); }, "student = NaN in row 3",
                      grad);
        std::vector<std::uint8_t> mask{1, 0, 1, 1};
        SoftTargetOptions masked;
        masked.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
        check_refused([&] { return run(d.teacher(true), masked, kTopKBeta, student); }, "student = NaN in row 3", grad);
        d.s[static_cast<std::size_t>(rows * n - 1)] = 0.5f;
        d.s[static_cast<std::size_t>(n + 2)] = kInf;
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); }, "student = +inf in row 1",
                      grad);
        d.s[static_cast<std::size_t>(n + 2)] = 0.5f;
        const std::vector<float> saved = d.logits;
        d.logits[static_cast<std::size_t>(rows * k - 1)] = kNaN;
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
                      "teacher.logits = NaN in row 3", grad);
        d.logits = saved;
        d.logits[static_cast<std::size_t>(k)] = kInf;
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
                      "teacher.logits = +inf in row 1", grad);
        d.logits = saved;
        std::fill(d.logits.begin() + 2 * k, d.logits.begin() + 3 * k, -kInf);
        check_refused([&] { return run(d.teacher(true), defaults, kTopKBeta, student); },
                      "teacher.logits = row 2 all -inf", grad);
        d.logits = saved;
      }
      // Options: temperature, grad_scale, beta, the mask.
      for (float bad_t : {0.0f, -2.0f, kNaN, kInf}) {
        SoftTargetOptions o;
        o.temperature = bad_t;
        check_refused([&] { return run(d.teacher(true), o, kTopKBeta, student); }, "options.temperature", grad);
      }
      {
        SoftTargetOptions o;
        o.grad_scale = static_cast<double>(kNaN);
        check_refused([&] { return run(d.teacher(true), o, kTopKBeta, student); }, "options.grad_scale", grad);
        std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows + 1), 1);
        SoftTargetOptions m;
        m.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows + 1});
        check_refused([&] { return run(d.teacher(true), m, kTopKBeta, student); }, "options.row_mask.shape = [5]",
                      grad);
      }
      if (kind == SoftDivergence::jensen_shannon)
        for (double bad_beta : {-0.5, 1.5, static_cast<double>(kNaN)})
          check_refused([&] { return run(d.teacher(true), defaults, bad_beta, student); }, "beta = ", grad);
    }
    // The gradient view.
    std::vector<float> wide(static_cast<std::size_t>((rows + 1) * (n + 1)), kLogitPoison);
    const TopKTeacher<float, std::int64_t> t = d.teacher(true);
    for (const Shape& bad : {Shape{rows, n + 1}, Shape{rows + 1, n}}) {
      const TensorView<float> wrong(wide.data(), bad);
      check_refused([&] { return run_topk<float, std::int64_t>(kind, student, t, &wrong, SoftTargetOptions{}); },
                    "grad_student = [" + std::to_string(bad[0]) + " rows, " + std::to_string(bad[1]) +
                        "]: expected the shape of student [4 rows, 37]",
                    wide);
    }
    // Masked rows are not read: a bad index, tail, NaN there is fine.
    std::vector<std::uint8_t> mask{1, 1, 0, 1};
    SoftTargetOptions o;
    o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
    d.idx[static_cast<std::size_t>(2 * k)] = n + 5;
    d.idx[static_cast<std::size_t>(2 * k + 1)] = d.idx[static_cast<std::size_t>(2 * k + 2)];
    d.tail[2] = 7.0f;
    d.s[static_cast<std::size_t>(2 * n + 3)] = kNaN;
    d.logits[static_cast<std::size_t>(2 * k + 3)] = kNaN;
    const Loss loss = run_topk<float, std::int64_t>(kind, student, d.teacher(true), &g, o);
    CHECK(std::isfinite(loss.value));
    for (std::int64_t j = 0; j < n; ++j) CHECK(grad[static_cast<std::size_t>(2 * n + j)] == 0.0f);
  }
}

TEST_CASE("every SIMD level gives the same top-k losses and gradients (float, half, bfloat16)", "[distill][topk][simd]") {
  SimdLevelGuard guard;
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {1, 7, 1023, 1024, 1025, 3000}) {
      const std::int64_t k = std::min<std::int64_t>(n, 20);
      const TopKData<> d(3, n, k, 60 + static_cast<unsigned>(n), 1.3, 2.5f);
      const bool with_tail = n > k;
      std::vector<std::uint8_t> mask{1, 1, 0};
      SoftTargetOptions o;
      o.temperature = 1.3f;
      o.reduction = Reduction::none;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{3});
      auto each_type = [&](auto tag) {
        using T = decltype(tag);
        std::vector<T> s;
        for (float x : d.s) s.push_back(T(x));
        const TypedTeacher<T, std::int64_t> teacher(d, with_tail);
        cpu::simd_level() = cpu::SimdLevel::scalar;
        const LossAndGrad<T> base = topk_result<T, std::int64_t>(kind, s, teacher.teacher, d.shape(), o);
        for (cpu::SimdLevel level : supported_levels()) {
          INFO(soft_divergence_name(kind)
               << ", V = " << n << ", level " << static_cast<int>(level) << ", element size " << sizeof(T));
          cpu::simd_level() = level;
          const LossAndGrad<T> r = topk_result<T, std::int64_t>(kind, s, teacher.teacher, d.shape(), o);
          check_same_across_levels(r.loss, r.grad, base.loss, base.grad);
        }
      };
      each_type(float{});
      each_type(half{});
      each_type(bfloat16{});
    }
  }
}

TEMPLATE_TEST_CASE("half and bfloat16 top-k losses equal float on the same rounded values", "[distill][topk][types]",
                   half, bfloat16) {
  using T = TestType;
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {8, 300}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const TopKData<std::int32_t> d(4, n, 6, 80 + static_cast<unsigned>(n), 2.0, 3.0f);
      std::vector<T> s;
      std::vector<float> sf;
      for (float x : d.s) {
        s.push_back(T(x));
        sf.push_back(static_cast<float>(T(x)));
      }
      const TypedTeacher<T, std::int32_t> low_teacher(d, true);
      std::vector<float> rounded_logits;
      for (const T& x : low_teacher.logits) rounded_logits.push_back(static_cast<float>(x));
      TopKTeacher<float, std::int32_t> float_teacher = d.teacher(true);
      float_teacher.logits = TensorView<const float>(rounded_logits.data(), Shape{d.rows, d.k});
      for (Reduction red : kDistillReductions) {
        SoftTargetOptions o;
        o.temperature = 2.0f;
        o.reduction = red;
        const LossAndGrad<T> low = topk_result<T, std::int32_t>(kind, s, low_teacher.teacher, d.shape(), o);
        const LossAndGrad<float> full = topk_result<float, std::int32_t>(kind, sf, float_teacher, d.shape(), o);
        CHECK(close_rel(low.loss.value, full.loss.value, 1e-5));
        const double sub = std::is_same<T, half>::value ? 0x1p-25 : 0.0;
        check_near(low.grad, full.grad, 1e-6 * largest(full.grad) + sub, unit_roundoff<T>(), "grad");
      }
    }
  }
}

TEMPLATE_TEST_CASE("top-k gradients: grad_scale multiplies, accumulate adds, masked rows", "[distill][topk][grad]", float,
                   half, bfloat16) {
  using T = TestType;
  const TopKData<> d(5, 30, 6, 15);
  std::vector<T> s;
  for (float x : d.s) s.push_back(T(x));
  const TypedTeacher<T, std::int64_t> teacher(d, true);
  const std::vector<std::uint8_t> mask{1, 0, 1, 1, 0};
  const double u = std::is_same<T, float>::value ? 0x1p-23 : 2.0 * unit_roundoff<T>();
  const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
  for (SoftDivergence kind : kDivergences) {
    for (Reduction red : kDistillReductions) {
      INFO(soft_divergence_name(kind) << ", " << to_string(red));
      SoftTargetOptions o;
      o.reduction = red;
      o.temperature = 1.5f;
      const LossAndGrad<T> unit = topk_result<T, std::int64_t>(kind, s, teacher.teacher, d.shape(), o);
      for (double scale : {2.5, -4.0}) {
        o.grad_scale = scale;
        const LossAndGrad<T> scaled = topk_result<T, std::int64_t>(kind, s, teacher.teacher, d.shape(), o);
        CHECK(scaled.loss.value == unit.loss.value);
        std::vector<double> want;
        for (const T& x : unit.grad) want.push_back(scale * to_d(x));
        check_near(scaled.grad, want, 1e-6 * largest(want) + sub * (1.0 + std::fabs(scale)), u, "scaled grad");
      }
      o.grad_scale = 1.0;
      std::vector<T> before;
      for (float x : test::random_values(s.size(), 5, 0.05f)) before.push_back(T(x));
      std::vector<T> after = before;
      o.accumulate = true;
      const TensorView<T> av(after.data(), d.shape());
      run_topk<T, std::int64_t>(kind, TensorView<const T>(s.data(), d.shape()), teacher.teacher, &av, o);
      for (std::size_t i = 0; i < before.size(); ++i) {
        const double want = to_d(before[i]) + to_d(unit.grad[i]);
        const double tol = u * (std::fabs(to_d(before[i])) + std::fabs(to_d(unit.grad[i]))) + sub;
        if (!(std::fabs(to_d(after[i]) - want) <= tol)) FAIL_CHECK("accumulated [" << i << "]");
      }
      // Masked rows: untouched when accumulating, 0 when not.
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{d.rows});
      std::vector<T> kept = before;
      const TensorView<T> kv(kept.data(), d.shape());
      run_topk<T, std::int64_t>(kind, TensorView<const T>(s.data(), d.shape()), teacher.teacher, &kv, o);
      o.accumulate = false;
      const LossAndGrad<T> masked = topk_result<T, std::int64_t>(kind, s, teacher.teacher, d.shape(), o);
      for (std::int64_t r = 0; r < d.rows; ++r) {
        if (mask[static_cast<std::size_t>(r)]) continue;
        CHECK(std::memcmp(kept.data() + r * d.n, before.data() + r * d.n, static_cast<std::size_t>(d.n) * sizeof(T)) == 0);
        for (std::int64_t j = 0; j < d.n; ++j) CHECK(to_d(masked.grad[static_cast<std::size_t>(r * d.n + j)]) == 0.0);
      }
    }
  }
}

TEST_CASE("top-k teachers: strided rows equal a contiguous copy, gaps untouched; [B, L, V] = [B*L, V]; loss only = "
          "with grad", "[distill][topk][layout]") {
  for (SoftDivergence kind : kDivergences) {
    for (std::int64_t n : {9, 1100}) {
      INFO(soft_divergence_name(kind) << ", V = " << n);
      const std::int64_t b = 2, l = 3, rows = b * l, k = 4, stride = n + 3, kstride = k + 2;
      const TopKData<> d(rows, n, k, 400 + static_cast<unsigned>(n));
      std::vector<std::uint8_t> mask{1, 0, 1, 1, 1, 1};
      SoftTargetOptions o;
      o.reduction = Reduction::none;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      const LossAndGrad<float> flat = topk_result<float, std::int64_t>(kind, d.s, d.teacher(true), d.shape(), o);
      const Loss only = run_topk<float, std::int64_t>(kind, TensorView<const float>(d.s.data(), d.shape()),
                                                      d.teacher(true), nullptr, o);
      CHECK(only.value == flat.loss.value);
      CHECK(only.per_row == flat.loss.per_row);

      std::vector<float> ws(static_cast<std::size_t>(rows * stride + 1), 0.0f), wg(ws.size(), kLogitPoison);
      std::vector<float> wl(static_cast<std::size_t>(rows * kstride), 0.0f);
      std::vector<std::int64_t> wi(wl.size(), 0);
      for (std::int64_t r = 0; r < rows; ++r) {
        std::copy(d.s.begin() + r * n, d.s.begin() + (r + 1) * n, ws.begin() + 1 + r * stride);
        std::copy(d.logits.begin() + r * k, d.logits.begin() + (r + 1) * k, wl.begin() + r * kstride);
        std::copy(d.idx.begin() + r * k, d.idx.begin() + (r + 1) * k, wi.begin() + r * kstride);
      }
      TopKTeacher<float, std::int64_t> strided_teacher;
      strided_teacher.logits = TensorView<const float>(wl.data(), Shape{rows, k}, Strides{kstride, 1});
      strided_teacher.indices = TensorView<const std::int64_t>(wi.data(), Shape{rows, k}, Strides{kstride, 1});
      strided_teacher.tail_mass = TensorView<const float>(d.tail.data(), Shape{rows});
      const TensorView<float> gv(wg.data() + 1, Shape{rows, n}, Strides{stride, 1});
      const Loss strided = run_topk<float, std::int64_t>(
          kind, TensorView<const float>(ws.data() + 1, Shape{rows, n}, Strides{stride, 1}), strided_teacher, &gv, o);
      CHECK(strided.value == flat.loss.value);
      CHECK(strided.per_row == flat.loss.per_row);
      check_strided_grad(wg, flat.grad, stride, n, kLogitPoison);

      SoftTargetOptions o3 = o;
      o3.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
      TopKTeacher<float, std::int64_t> t3;
      t3.logits = TensorView<const float>(d.logits.data(), Shape{b, l, k});
      t3.indices = TensorView<const std::int64_t>(d.idx.data(), Shape{b, l, k});
      t3.tail_mass = TensorView<const float>(d.tail.data(), Shape{b, l});
      std::vector<float> g3(d.s.size(), kLogitPoison);
      const TensorView<float> g3v(g3.data(), Shape{b, l, n});
      const Loss three = run_topk<float, std::int64_t>(kind, TensorView<const float>(d.s.data(), Shape{b, l, n}), t3,
                                                       &g3v, o3);
      CHECK(three.value == flat.loss.value);
      CHECK(three.per_row == flat.loss.per_row);
      CHECK(same_bits(g3, flat.grad));
    }
  }
}
