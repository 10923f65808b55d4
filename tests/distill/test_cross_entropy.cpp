// Tests for shrink/distill/cross_entropy.hpp: F.cross_entropy with ignore_index and label smoothing, against
// autograd, a double reference, every SIMD level and element type, gradient options, layouts and bad input.
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
#include "shrink/distill/cross_entropy.hpp"
#include "support/distill_checks.hpp"
#include "support/distill_logits_golden.hpp"
#include "support/logit_losses.hpp"
#include "support/random.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;

TEST_CASE("cross_entropy matches autograd's values and gradients", "[distill][golden]") {
  CHECK(test::check_logit_goldens({"ce"}) > 0);
}

namespace {

using namespace shrink::test;  // the helpers of support/distill_checks.hpp, logit_losses.hpp and simd_levels.hpp

using namespace shrink::distill;

template <class T, class L>
LossAndGrad<T> ce_result(const std::vector<T>& z, const std::vector<L>& labels, const Shape& shape,
                         const Shape& label_shape, const CrossEntropyOptions& o) {
  LossAndGrad<T> r;
  r.grad.assign(z.size(), T(kLogitPoison));
  r.loss = cross_entropy_with_grad(TensorView<const T>(z.data(), shape), TensorView<const L>(labels.data(), label_shape),
                                   TensorView<T>(r.grad.data(), shape), o);
  return r;
}

// Random labels in [0, n), every fourth row ignore_index.
std::vector<std::int64_t> random_labels(std::int64_t rows, std::int64_t n, unsigned seed, std::int64_t ignore = -100) {
  std::vector<std::int64_t> y;
  const std::vector<float> u = test::random_values(static_cast<std::size_t>(rows), seed);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double f = std::fabs(std::sin(1e3 * static_cast<double>(u[static_cast<std::size_t>(r)])));
    y.push_back(r % 4 == 3 ? ignore : std::min<std::int64_t>(n - 1, static_cast<std::int64_t>(f * static_cast<double>(n))));
  }
  return y;
}

// Double reference: per-row (1 - eps)(-log q_y) + eps mean_j(-log q_j), the reduction, and the gradient
// (q - (1 - eps) onehot(y) - eps / V) * grad_scale / divisor.
ReferenceLoss cross_entropy_reference(const std::vector<float>& z, const std::vector<std::int64_t>& y,
                                      std::int64_t rows, std::int64_t n, const CrossEntropyOptions& o,
                                      const std::vector<std::uint8_t>& mask = {}) {
  ReferenceLoss out;
  out.per_row.assign(static_cast<std::size_t>(rows), 0.0);
  out.grad.assign(static_cast<std::size_t>(rows * n), 0.0);
  const double eps = o.label_smoothing;
  std::int64_t kept = 0;
  auto is_kept = [&](std::int64_t r) {
    return (mask.empty() || mask[static_cast<std::size_t>(r)]) && y[static_cast<std::size_t>(r)] != o.ignore_index;
  };
  for (std::int64_t r = 0; r < rows; ++r) kept += is_kept(r) ? 1 : 0;
  const double divisor = o.reduction == Reduction::mean || o.reduction == Reduction::batchmean ? kept : 1.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (!is_kept(r)) continue;
    const float* row = z.data() + r * n;
    double m = -std::numeric_limits<double>::infinity(), s = 0.0;
    for (std::int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(row[j]));
    for (std::int64_t j = 0; j < n; ++j) s += std::exp(row[j] - m);
    const double lse = m + std::log(s);
    double mean_nll = 0.0;
    for (std::int64_t j = 0; j < n; ++j) mean_nll += (lse - row[j]) / static_cast<double>(n);
    const std::int64_t label = y[static_cast<std::size_t>(r)];
    out.per_row[static_cast<std::size_t>(r)] = (1.0 - eps) * (lse - row[label]) + (eps > 0.0 ? eps * mean_nll : 0.0);
    for (std::int64_t j = 0; j < n; ++j)
      out.grad[static_cast<std::size_t>(r * n + j)] =
          (std::exp(row[j] - lse) - (j == label ? 1.0 - eps : 0.0) - eps / static_cast<double>(n)) * o.grad_scale /
          divisor;
  }
  double total = 0.0;
  for (double v : out.per_row) total += v;
  out.value = total / divisor;
  return out;
}

}  // namespace

TEST_CASE("cross_entropy matches a double reference: smoothing, ignore_index, masks, -inf logits",
          "[distill][ce][reference]") {
  const std::int64_t rows = 9;
  for (std::int64_t n : {1, 5, 64, 1500}) {
    std::vector<float> z = test::random_values(static_cast<std::size_t>(rows * n), 30 + static_cast<unsigned>(n), 3.0f);
    const std::vector<std::int64_t> y = random_labels(rows, n, 7 + static_cast<unsigned>(n));
    // -inf away from the labels (a masked vocabulary).
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 2; j < n; j += 7)
        if (j != y[static_cast<std::size_t>(r)]) z[static_cast<std::size_t>(r * n + j)] = -kInf;
    const std::vector<std::uint8_t> mask{1, 1, 0, 1, 1, 1, 0, 1, 1};
    for (float eps : {0.0f, 0.1f, 1.0f}) {
      for (bool masked : {false, true}) {
        for (Reduction red : kDistillReductions) {
          INFO("V = " << n << ", eps = " << eps << ", mask " << masked << ", " << to_string(red));
          CrossEntropyOptions o;
          o.label_smoothing = eps;
          o.reduction = red;
          o.grad_scale = 0.5;
          if (masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
          const LossAndGrad<float> got = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
          const ReferenceLoss want =
              cross_entropy_reference(z, y, rows, n, o, masked ? mask : std::vector<std::uint8_t>{});
          if (eps > 0.0f && n > 2) {
            CHECK(got.loss.value == std::numeric_limits<double>::infinity());  // -log q_j = +inf at a -inf logit
          } else {
            CHECK(close_rel(got.loss.value, want.value, 1e-6));
            if (red == Reduction::none) check_near(got.loss.per_row, want.per_row, 0.0, 1e-6, "per_row");
          }
          if (red != Reduction::none) CHECK(got.loss.per_row.empty());
          check_near(got.grad, want.grad, 1e-6 * largest(want.grad), 0.0, "grad");
        }
      }
    }
  }
}

TEST_CASE("cross_entropy: a -inf logit at the label is +inf with a finite gradient; all rows ignored",
          "[distill][ce]") {
  const std::vector<float> z{0.0f, -kInf, 1.0f, 2.0f, 0.5f, -1.0f};
  const std::vector<std::int64_t> y{1, 2};
  const LossAndGrad<float> r = ce_result(z, y, Shape{2, 3}, Shape{2}, CrossEntropyOptions{});
  CHECK(r.loss.value == std::numeric_limits<double>::infinity());
  for (float g : r.grad) CHECK(std::isfinite(g));
  CHECK(r.grad[1] == -0.5f);  // (q_y - 1) / 2 rows with q_y = 0
  const std::vector<std::int64_t> none{-100, -100};
  CrossEntropyOptions o;
  const LossAndGrad<float> mean = ce_result(z, none, Shape{2, 3}, Shape{2}, o);
  CHECK(std::isnan(mean.loss.value));  // mean over no rows: 0 / 0, as PyTorch
  for (float g : mean.grad) CHECK(g == 0.0f);
  o.reduction = Reduction::sum;
  CHECK(ce_result(z, none, Shape{2, 3}, Shape{2}, o).loss.value == 0.0);
}

TEST_CASE("cross_entropy refuses bad input, names the argument and writes nothing", "[distill][ce][bad-input]") {
  const std::int64_t rows = 4, n = 37;
  std::vector<float> z = test::random_values(static_cast<std::size_t>(rows * n), 1, 2.0f);
  std::vector<std::int64_t> y{3, 0, 36, 17};
  std::vector<std::int32_t> y32{3, 0, 36, 17};
  std::vector<float> grad(z.size(), kLogitPoison);
  const Shape shape{rows, n};
  const TensorView<const float> logits(z.data(), shape);
  const TensorView<float> g(grad.data(), shape);
  for (bool with_grad : {true, false}) {
    INFO("with_grad " << with_grad);
    auto run = [&](const TensorView<const float>& zl, const auto& labels, const CrossEntropyOptions& o) {
      return with_grad ? cross_entropy_with_grad(zl, labels, g, o) : cross_entropy(zl, labels, o);
    };
    const TensorView<const std::int64_t> labels(y.data(), Shape{rows});
    const TensorView<const std::int32_t> labels32(y32.data(), Shape{rows});
    const CrossEntropyOptions defaults;
    // Labels out of range in a kept row, int64 and int32; -100 is ignore_index, -1 is not.
    for (std::int64_t bad : {std::int64_t{-1}, n, n + 1000, std::int64_t{-101}}) {
      y[2] = bad;
      y32[2] = static_cast<std::int32_t>(bad);
      const std::string needle = "labels = label " + std::to_string(bad) +
                                 " at row 2: expected a class in [0, 37) or ignore_index (-100)";
      check_refused([&] { return run(logits, labels, defaults); }, needle, grad);
      check_refused([&] { return run(logits, labels32, defaults); }, needle, grad);
      // The same label in a masked row is not looked at.
      std::vector<std::uint8_t> mask{1, 1, 0, 1};
      CrossEntropyOptions masked;
      masked.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      CHECK_NOTHROW(run(logits, labels, masked));
      CHECK_NOTHROW(run(logits, labels32, masked));
      std::fill(grad.begin(), grad.end(), kLogitPoison);
    }
    y[2] = 36;
    y32[2] = 36;
    {
      // Another ignore_index: -100 is then an ordinary (out-of-range) label.
      CrossEntropyOptions o;
      o.ignore_index = 5;
      y[1] = -100;
      check_refused([&] { return run(logits, labels, o); }, "label -100 at row 1: expected a class in [0, 37) or ignore_index (5)",
                    grad);
      y[1] = 5;
      CHECK_NOTHROW(run(logits, labels, o));
      std::fill(grad.begin(), grad.end(), kLogitPoison);
      y[1] = 0;
    }
    // Shapes: labels, logits, the mask; empty batches; strides.
    check_refused([&] { return run(logits, TensorView<const std::int64_t>(y.data(), Shape{rows - 1}), defaults); },
                  "labels.shape = [3]: expected one label per row (4)", grad);
    check_refused([&] { return run(logits, TensorView<const std::int64_t>(y.data(), Shape{2}, Strides{2}), defaults); },
                  "labels.shape", grad);
    {
      std::vector<std::int64_t> spread(8, 0);
      check_refused([&] { return run(logits, TensorView<const std::int64_t>(spread.data(), Shape{rows}, Strides{2}), defaults); },
                    "labels.strides", grad);
    }
    for (const Shape& empty : {Shape{0, n}, Shape{rows, 0}})
      check_refused([&] { return run(TensorView<const float>(z.data(), empty), labels, defaults); }, "logits.shape", grad);
    check_refused([&] { return run(TensorView<const float>(z.data(), Shape{rows, n / 2}, Strides{n, 2}), labels, defaults); },
                  "logits.strides", grad);
    {
      std::vector<std::uint8_t> mask(3, 1);
      CrossEntropyOptions o;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{3});
      check_refused([&] { return run(logits, labels, o); }, "options.row_mask.shape = [3]", grad);
    }
    // Options: label_smoothing outside [0, 1], grad_scale not finite.
    for (float eps : {-0.1f, 1.01f, kNaN, kInf}) {
      CrossEntropyOptions o;
      o.label_smoothing = eps;
      check_refused([&] { return run(logits, labels, o); }, "options.label_smoothing", grad);
    }
    for (double scale : {static_cast<double>(kNaN), static_cast<double>(-kInf)}) {
      CrossEntropyOptions o;
      o.grad_scale = scale;
      check_refused([&] { return run(logits, labels, o); }, "options.grad_scale", grad);
    }
    // Values: NaN, +inf, a row of -inf, in kept rows (the last included); in an ignored row they are not read.
    z[static_cast<std::size_t>(rows * n - 1)] = kNaN;
    check_refused([&] { return run(logits, labels, defaults); }, "logits = NaN in row 3: expected logits without NaN", grad);
    {
      // With a mask, validation still comes first: the masked row is not zeroed before the NaN is found.
      std::vector<std::uint8_t> mask{1, 0, 1, 1};
      CrossEntropyOptions o;
      o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
      check_refused([&] { return run(logits, labels, o); }, "logits = NaN in row 3", grad);
    }
    y[3] = -100;
    CHECK_NOTHROW(run(logits, labels, defaults));
    std::fill(grad.begin(), grad.end(), kLogitPoison);
    y[3] = 17;
    z[static_cast<std::size_t>(rows * n - 1)] = 0.0f;
    z[5] = kInf;
    check_refused([&] { return run(logits, labels, defaults); }, "logits = +inf in row 0", grad);
    z[5] = 0.0f;
    const std::vector<float> saved = z;
    std::fill(z.begin() + n, z.begin() + 2 * n, -kInf);
    check_refused([&] { return run(logits, labels, defaults); }, "logits = row 1 all -inf", grad);
    z = saved;
  }
  // The gradient view.
  std::vector<float> wide(static_cast<std::size_t>((rows + 1) * (n + 1)), kLogitPoison);
  const TensorView<const std::int64_t> labels(y.data(), Shape{rows});
  check_refused([&] { return cross_entropy_with_grad(logits, labels, TensorView<float>(wide.data(), Shape{rows, n + 1})); },
                "grad_logits = [4 rows, 38]: expected the shape of logits [4 rows, 37]", wide);
  check_refused([&] { return cross_entropy_with_grad(logits, labels, TensorView<float>(wide.data(), Shape{rows + 1, n})); },
                "grad_logits = [5 rows, 37]", wide);
  check_refused([&] { return cross_entropy_with_grad(logits, labels, TensorView<float>(wide.data(), shape, Strides{n + 1, 0})); },
                "grad_logits.strides", wide);
}

TEST_CASE("cross_entropy with int32 labels equals int64 labels", "[distill][ce]") {
  const std::int64_t rows = 6, n = 50;
  const std::vector<float> z = test::random_values(static_cast<std::size_t>(rows * n), 9, 2.0f);
  const std::vector<std::int64_t> y = random_labels(rows, n, 4);
  const std::vector<std::int32_t> y32(y.begin(), y.end());
  for (Reduction red : kDistillReductions) {
    CrossEntropyOptions o;
    o.reduction = red;
    o.label_smoothing = 0.2f;
    const LossAndGrad<float> a = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
    const LossAndGrad<float> b = ce_result(z, y32, Shape{rows, n}, Shape{rows}, o);
    CHECK(a.loss.value == b.loss.value);
    CHECK(a.loss.per_row == b.loss.per_row);
    CHECK(same_bits(a.grad, b.grad));
    CHECK(cross_entropy(TensorView<const float>(z.data(), Shape{rows, n}), TensorView<const std::int32_t>(y32.data(), Shape{rows}), o)
              .value == a.loss.value);
  }
}

TEST_CASE("every SIMD level gives the same cross_entropy (float, half, bfloat16)", "[distill][ce][simd]") {
  SimdLevelGuard guard;
  for (std::int64_t n : {1, 7, 1023, 1024, 1025, 3000}) {
    const std::int64_t rows = 5;
    const std::vector<float> zf = test::random_values(static_cast<std::size_t>(rows * n), 70 + static_cast<unsigned>(n), 3.0f);
    const std::vector<std::int64_t> y = random_labels(rows, n, 3);
    for (float eps : {0.0f, 0.15f}) {
      CrossEntropyOptions o;
      o.reduction = Reduction::none;
      o.label_smoothing = eps;
      auto each_type = [&](auto tag) {
        using T = decltype(tag);
        std::vector<T> z;
        for (float x : zf) z.push_back(T(x));
        cpu::simd_level() = cpu::SimdLevel::scalar;
        const LossAndGrad<T> base = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
        for (cpu::SimdLevel level : supported_levels()) {
          INFO("V = " << n << ", eps " << eps << ", level " << static_cast<int>(level) << ", element size " << sizeof(T));
          cpu::simd_level() = level;
          const LossAndGrad<T> r = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
          check_same_across_levels(r.loss, r.grad, base.loss, base.grad);
        }
      };
      each_type(float{});
      each_type(half{});
      each_type(bfloat16{});
    }
  }
}

TEMPLATE_TEST_CASE("half and bfloat16 cross_entropy equals float on the same rounded values", "[distill][ce][types]",
                   half, bfloat16) {
  using T = TestType;
  for (std::int64_t n : {9, 700}) {
    const std::int64_t rows = 6;
    const std::vector<float> zf = test::random_values(static_cast<std::size_t>(rows * n), 12, 4.0f);
    std::vector<T> z;
    std::vector<float> rounded;
    for (float x : zf) {
      z.push_back(T(x));
      rounded.push_back(static_cast<float>(T(x)));
    }
    const std::vector<std::int64_t> y = random_labels(rows, n, 21);
    for (Reduction red : kDistillReductions) {
      INFO("V = " << n << ", " << to_string(red));
      CrossEntropyOptions o;
      o.reduction = red;
      o.label_smoothing = 0.05f;
      const LossAndGrad<T> low = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
      const LossAndGrad<float> full = ce_result(rounded, y, Shape{rows, n}, Shape{rows}, o);
      CHECK(close_rel(low.loss.value, full.loss.value, 1e-5));
      const double sub = std::is_same<T, half>::value ? 0x1p-25 : 0.0;
      check_near(low.grad, full.grad, 1e-6 * largest(full.grad) + sub, unit_roundoff<T>(), "grad");
    }
  }
}

TEMPLATE_TEST_CASE("cross_entropy gradients: grad_scale multiplies, accumulate adds, masked and ignored rows",
                   "[distill][ce][grad]", float, half, bfloat16) {
  using T = TestType;
  const std::int64_t rows = 8, n = 33;
  std::vector<T> z;
  for (float x : test::random_values(static_cast<std::size_t>(rows * n), 44, 2.0f)) z.push_back(T(x));
  const std::vector<std::int64_t> y = random_labels(rows, n, 8);  // rows 3 and 7 ignored
  const std::vector<std::uint8_t> mask{1, 0, 1, 1, 1, 1, 0, 1};
  const double u = std::is_same<T, float>::value ? 0x1p-23 : 2.0 * unit_roundoff<T>();
  const double sub = std::is_same<T, half>::value ? 0x1p-24 : 0.0;
  const Shape shape{rows, n};
  for (Reduction red : kDistillReductions) {
    INFO(to_string(red));
    CrossEntropyOptions o;
    o.reduction = red;
    o.label_smoothing = 0.1f;
    const LossAndGrad<T> unit = ce_result(z, y, shape, Shape{rows}, o);
    for (double scale : {2.5, -4.0}) {
      o.grad_scale = scale;
      const LossAndGrad<T> scaled = ce_result(z, y, shape, Shape{rows}, o);
      CHECK(scaled.loss.value == unit.loss.value);
      std::vector<double> want;
      for (const T& x : unit.grad) want.push_back(scale * to_d(x));
      check_near(scaled.grad, want, 1e-6 * largest(want) + sub * (1.0 + std::fabs(scale)), u, "scaled grad");
    }
    o.grad_scale = 1.0;
    std::vector<T> before;
    for (float x : test::random_values(z.size(), 2, 0.05f)) before.push_back(T(x));
    std::vector<T> after = before;
    o.accumulate = true;
    cross_entropy_with_grad(TensorView<const T>(z.data(), shape), TensorView<const std::int64_t>(y.data(), Shape{rows}),
                            TensorView<T>(after.data(), shape), o);
    for (std::size_t i = 0; i < before.size(); ++i) {
      const double want = to_d(before[i]) + to_d(unit.grad[i]);
      const double tol = u * (std::fabs(to_d(before[i])) + std::fabs(to_d(unit.grad[i]))) + sub;
      if (!(std::fabs(to_d(after[i]) - want) <= tol)) FAIL_CHECK("accumulated [" << i << "]");
    }
    // Masked and ignored rows: untouched when accumulating, 0 when not.
    o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
    std::vector<T> kept = before;
    cross_entropy_with_grad(TensorView<const T>(z.data(), shape), TensorView<const std::int64_t>(y.data(), Shape{rows}),
                            TensorView<T>(kept.data(), shape), o);
    o.accumulate = false;
    const LossAndGrad<T> masked = ce_result(z, y, shape, Shape{rows}, o);
    for (std::int64_t r = 0; r < rows; ++r) {
      if (mask[static_cast<std::size_t>(r)] && y[static_cast<std::size_t>(r)] != -100) continue;
      INFO("row " << r);
      CHECK(std::memcmp(kept.data() + r * n, before.data() + r * n, static_cast<std::size_t>(n) * sizeof(T)) == 0);
      for (std::int64_t j = 0; j < n; ++j) CHECK(to_d(masked.grad[static_cast<std::size_t>(r * n + j)]) == 0.0);
    }
  }
}

TEST_CASE("cross_entropy: strided rows equal a contiguous copy, gaps untouched; [B, L, V] = [B*L, V]; loss only = "
          "with grad", "[distill][ce][layout]") {
  for (std::int64_t n : {7, 1030}) {
    INFO("V = " << n);
    const std::int64_t b = 2, l = 4, rows = b * l, stride = n + 6;
    const std::vector<float> z = test::random_values(static_cast<std::size_t>(rows * n), 5, 2.0f);
    const std::vector<std::int64_t> y = random_labels(rows, n, 13);
    const std::vector<std::uint8_t> mask{1, 1, 0, 1, 1, 1, 1, 1};
    CrossEntropyOptions o;
    o.reduction = Reduction::none;
    o.label_smoothing = 0.1f;
    o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
    const LossAndGrad<float> flat = ce_result(z, y, Shape{rows, n}, Shape{rows}, o);
    const Loss only = cross_entropy(TensorView<const float>(z.data(), Shape{rows, n}),
                                    TensorView<const std::int64_t>(y.data(), Shape{rows}), o);
    CHECK(only.value == flat.loss.value);
    CHECK(only.per_row == flat.loss.per_row);

    std::vector<float> wz(static_cast<std::size_t>(rows * stride + 1), 0.0f), wg(wz.size(), kLogitPoison);
    for (std::int64_t r = 0; r < rows; ++r) std::copy(z.begin() + r * n, z.begin() + (r + 1) * n, wz.begin() + 1 + r * stride);
    const Loss strided = cross_entropy_with_grad(TensorView<const float>(wz.data() + 1, Shape{rows, n}, Strides{stride, 1}),
                                                 TensorView<const std::int64_t>(y.data(), Shape{rows}),
                                                 TensorView<float>(wg.data() + 1, Shape{rows, n}, Strides{stride, 1}), o);
    CHECK(strided.value == flat.loss.value);
    CHECK(strided.per_row == flat.loss.per_row);
    check_strided_grad(wg, flat.grad, stride, n, kLogitPoison);
    CrossEntropyOptions o3 = o;
    o3.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
    std::vector<float> g3(z.size(), kLogitPoison);
    const Loss three = cross_entropy_with_grad(TensorView<const float>(z.data(), Shape{b, l, n}),
                                               TensorView<const std::int64_t>(y.data(), Shape{b, l}),
                                               TensorView<float>(g3.data(), Shape{b, l, n}), o3);
    CHECK(three.value == flat.loss.value);
    CHECK(three.per_row == flat.loss.per_row);
    CHECK(same_bits(g3, flat.grad));
  }
}
