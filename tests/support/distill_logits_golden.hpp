// Runs the cases of tests/golden/distill_logits.golden (gen_distill_logits.py) through shrink::distill and
// compares value, per-row values and the student gradient with PyTorch autograd's (float64 from float32 inputs).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/distill/cross_entropy.hpp"
#include "shrink/distill/distillation_loss.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/golden.hpp"

namespace shrink::test {

inline distill::Reduction reduction_named(const std::string& s) {
  if (s == "none") return distill::Reduction::none;
  if (s == "sum") return distill::Reduction::sum;
  if (s == "mean") return distill::Reduction::mean;
  return distill::Reduction::batchmean;
}

// What shrink computed for one case.
struct LogitCaseResult {
  distill::Loss loss;
  std::vector<float> grad;
};

// The case's inputs, owned, and the views over them.
struct LogitCase {
  const GoldenCase& c;
  Shape shape;
  std::int64_t rows = 0, vocab = 0;
  std::vector<float> student, teacher, topk_logits, tail;
  std::vector<std::int64_t> labels, topk_indices;
  std::vector<std::uint8_t> mask;

  explicit LogitCase(const GoldenCase& g) : c(g) {
    shape = Shape(c.ints("shape"));
    vocab = shape[shape.rank - 1];
    rows = shape.product() / vocab;
    student = c.floats("student");
    if (c.has("teacher")) teacher = c.floats("teacher");
    if (c.has("topk_logits")) {
      topk_logits = c.floats("topk_logits");
      topk_indices = c.ints("topk_indices");
    }
    if (c.has("tail_mass")) tail = c.floats("tail_mass");
    if (c.has("labels")) labels = c.ints("labels");
    if (c.has("mask"))
      for (std::int64_t m : c.ints("mask")) mask.push_back(static_cast<std::uint8_t>(m));
  }

  double real(const char* key, double fallback) const { return c.has(key) ? c.doubles(key)[0] : fallback; }
  TensorView<const float> student_view() const { return TensorView<const float>(student.data(), shape); }
  TensorView<const float> teacher_view() const { return TensorView<const float>(teacher.data(), shape); }
  TensorView<const std::uint8_t> mask_view() const {
    return mask.empty() ? TensorView<const std::uint8_t>() : TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  }
  TensorView<const std::int64_t> label_view() const { return TensorView<const std::int64_t>(labels.data(), Shape{rows}); }
  distill::TopKTeacher<float, std::int64_t> topk() const {
    const std::int64_t k = c.ints("k")[0];
    distill::TopKTeacher<float, std::int64_t> t;
    t.logits = TensorView<const float>(topk_logits.data(), Shape{rows, k});
    t.indices = TensorView<const std::int64_t>(topk_indices.data(), Shape{rows, k});
    if (!tail.empty()) t.tail_mass = TensorView<const float>(tail.data(), Shape{rows});
    return t;
  }
  distill::SoftTargetOptions soft_options() const {
    distill::SoftTargetOptions o;
    o.temperature = static_cast<float>(real("temperature", 1.0));
    o.reduction = reduction_named(c.text("reduction"));
    o.row_mask = mask_view();
    return o;
  }
  distill::CrossEntropyOptions ce_options() const {
    distill::CrossEntropyOptions o;
    o.ignore_index = c.has("ignore_index") ? c.ints("ignore_index")[0] : -100;
    o.label_smoothing = static_cast<float>(real("label_smoothing", 0.0));
    o.reduction = reduction_named(c.text("reduction"));
    o.row_mask = mask_view();
    return o;
  }
  distill::DistillationOptions combined_options() const {
    distill::DistillationOptions o;
    o.alpha = static_cast<float>(real("alpha", 0.5));
    o.temperature = static_cast<float>(real("temperature", 1.0));
    o.kd_reduction = reduction_named(c.text("kd_reduction"));
    o.ce_reduction = reduction_named(c.text("ce_reduction"));
    o.ignore_index = c.has("ignore_index") ? c.ints("ignore_index")[0] : -100;
    o.label_smoothing = static_cast<float>(real("label_smoothing", 0.0));
    o.row_mask = mask_view();
    return o;
  }

  // Runs the case's loss with its gradient.
  LogitCaseResult run() const {
    LogitCaseResult r;
    r.grad.assign(student.size(), -777.0f);  // poison: every entry must be written
    const TensorView<float> g(r.grad.data(), shape);
    const std::string kind = c.text("kind");
    const double beta = real("beta", 0.5);
    if (kind == "kl") r.loss = distill::kl_div_with_grad(student_view(), teacher_view(), g, soft_options());
    if (kind == "reverse_kl") r.loss = distill::reverse_kl_div_with_grad(student_view(), teacher_view(), g, soft_options());
    if (kind == "jsd") r.loss = distill::jensen_shannon_with_grad(student_view(), teacher_view(), beta, g, soft_options());
    if (kind == "topk_kl") r.loss = distill::kl_div_with_grad(student_view(), topk(), g, soft_options());
    if (kind == "topk_reverse_kl") r.loss = distill::reverse_kl_div_with_grad(student_view(), topk(), g, soft_options());
    if (kind == "topk_jsd") r.loss = distill::jensen_shannon_with_grad(student_view(), topk(), beta, g, soft_options());
    if (kind == "ce") r.loss = distill::cross_entropy_with_grad(student_view(), label_view(), g, ce_options());
    if (kind == "combined")
      r.loss = distill::distillation_loss_with_grad(student_view(), teacher_view(), label_view(), g, combined_options());
    if (kind == "topk_combined")
      r.loss = distill::distillation_loss_with_grad(student_view(), topk(), label_view(), g, combined_options());
    return r;
  }

  // The loss without the gradient (the cheaper path) must give the same value.
  distill::Loss run_value_only() const {
    const std::string kind = c.text("kind");
    const double beta = real("beta", 0.5);
    if (kind == "kl") return distill::kl_div(student_view(), teacher_view(), soft_options());
    if (kind == "reverse_kl") return distill::reverse_kl_div(student_view(), teacher_view(), soft_options());
    if (kind == "jsd") return distill::jensen_shannon(student_view(), teacher_view(), beta, soft_options());
    if (kind == "topk_kl") return distill::kl_div(student_view(), topk(), soft_options());
    if (kind == "topk_reverse_kl") return distill::reverse_kl_div(student_view(), topk(), soft_options());
    if (kind == "topk_jsd") return distill::jensen_shannon(student_view(), topk(), beta, soft_options());
    if (kind == "ce") return distill::cross_entropy(student_view(), label_view(), ce_options());
    if (kind == "combined") return distill::distillation_loss(student_view(), teacher_view(), label_view(), combined_options());
    return distill::distillation_loss(student_view(), topk(), label_view(), combined_options());
  }
};

// |a - b| <= tol * |b|, or both the same infinity / both NaN.
inline bool close_relative(double a, double b, double tol, double floor = 0.0) {
  if (std::isinf(b) || std::isnan(b)) return a == b || (std::isnan(a) && std::isnan(b));
  return std::fabs(a - b) <= tol * std::fabs(b) + floor;
}

// Checks every case of the golden file whose kind is in `kinds`; returns how many ran.
inline int check_logit_goldens(const std::vector<std::string>& kinds, double tol = 1e-5) {
  int ran = 0;
  for (const GoldenCase& gc : load_golden("golden/distill_logits.golden")) {
    if (std::find(kinds.begin(), kinds.end(), gc.text("kind")) == kinds.end()) continue;
    ++ran;
    INFO("case " << gc.name);
    const LogitCase lc(gc);
    const LogitCaseResult r = lc.run();
    const double expected = gc.doubles("value")[0];
    INFO("value " << r.loss.value << " expected " << expected);
    CHECK(close_relative(r.loss.value, expected, tol));
    CHECK(close_relative(lc.run_value_only().value, expected, tol));
    // Relative, with a floor of tol times the case's largest magnitude for entries that cancel to near 0
    // (equal rows, q ~ p): float logits carry ~1e-7 of the terms' size there, whatever the arithmetic.
    auto largest = [](const std::vector<double>& v) {
      double m = 0.0;
      for (double x : v)
        if (std::isfinite(x)) m = std::max(m, std::fabs(x));
      return m;
    };
    if (gc.has("per_row")) {
      const std::vector<double>& rows = gc.doubles("per_row");
      REQUIRE(r.loss.per_row.size() == rows.size());
      const double floor = tol * largest(rows);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        INFO("row " << i << ": " << r.loss.per_row[i] << " expected " << rows[i]);
        CHECK(close_relative(r.loss.per_row[i], rows[i], tol, floor));
      }
    }
    const std::vector<double>& grad = gc.doubles("grad");
    REQUIRE(r.grad.size() == grad.size());
    const double floor = std::max(tol * largest(grad), 1e-12);  // the reference has 1e-17 noise for exact zeros
    for (std::size_t i = 0; i < grad.size(); ++i) {
      if (!close_relative(r.grad[i], grad[i], tol, floor)) {
        INFO("grad[" << i / static_cast<std::size_t>(lc.vocab) << ", " << i % static_cast<std::size_t>(lc.vocab)
                     << "] = " << r.grad[i] << " expected " << grad[i]);
        CHECK(false);
      }
    }
  }
  return ran;
}

}  // namespace shrink::test
