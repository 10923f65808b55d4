// Soft-target losses against a teacher stored as its top-k logits per row (the memory-saving form for large
// vocabularies), with gradients to every student logit.
//
// The rule for the mass outside the k: both distributions are coarsened to k + 1 classes, the k stored
// vocabulary entries and one "rest" class:
//   teacher  p_c = (1 - tail) * softmax(topk_logits / T)_c,  p_rest = tail
//   student  q_c = softmax(z_s / T)[index_c],                  q_rest = sum of q_j over the other entries
// where tail is the teacher's probability outside its k at this temperature, given per row, or 0 when not
// given (the top-k are then renormalised). kl_div, reverse_kl_div and jensen_shannon are taken between the two
// k+1-class distributions (times T^2, as the full-logit losses in soft_target.hpp) and their gradient flows back
// through the coarsening: with h_c = q_c * dD/dq_c and H = sum over the k + 1 classes of h_c,
//   dz_j = T * (h_c - q_j H)                    for j = index_c,
//   dz_j = T * q_j * (h_rest / q_rest - H)       for the other entries.
// KL(p || q) over the coarsened classes is at most the full KL (coarsening loses information); with tail = 0,
// reverse KL is +inf wherever the student has mass outside the k. Indices (int32 or int64) must be distinct in
// a row and in [0, V); tail in [0, 1).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/softmax_rows.hpp"
#include "shrink/cpu/vector_math.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"
#include "shrink/distill/soft_target.hpp"

namespace shrink::distill {

namespace detail {

// The validated top-k teacher: rows of k logits and indices, the tail per row (0 when not given).
template <class T, class Index>
struct TopKPlan {
  Rows<const T> student;
  Rows<const T> logits;
  Rows<const Index> indices;
  const float* tail = nullptr;
  RowMask mask;
  std::vector<float> student_max, teacher_max;
};

template <class T, class Index>
TopKPlan<T, Index> plan_topk(const TensorView<const T>& student, const TopKTeacher<T, Index>& teacher, double beta,
                             bool jsd, const SoftTargetOptions& o, const char* fn) {
  static_assert(std::is_same_v<Index, std::int64_t> || std::is_same_v<Index, std::int32_t>,
                "top-k indices must be int64 or int32");
  TopKPlan<T, Index> p;
  p.student = as_rows(student, fn, "student");
  p.logits = as_rows(teacher.logits, fn, "teacher.logits");
  p.indices = as_rows(teacher.indices, fn, "teacher.indices");
  if (p.logits.rows != p.student.rows)
    fail(fn, "teacher.logits", rows_text(p.logits.rows, p.logits.cols),
         "one row of k logits per student row (" + std::to_string(p.student.rows) + ")");
  require_same_rows(p.logits, p.indices, fn, "teacher.indices", "teacher.logits");
  if (p.logits.cols > p.student.cols)
    fail(fn, "teacher.logits", rows_text(p.logits.rows, p.logits.cols),
         "k <= V (" + std::to_string(p.student.cols) + ")");
  require_temperature(o.temperature, fn);
  require_grad_scale(o.grad_scale, fn);
  if (jsd) require_unit_interval(beta, fn, "beta");
  p.mask = row_mask(o.row_mask, p.student.rows, fn);
  if (teacher.tail_mass.data() != nullptr) {
    if (teacher.tail_mass.numel() != p.student.rows || !teacher.tail_mass.is_contiguous())
      fail(fn, "teacher.tail_mass.shape", to_string(teacher.tail_mass.shape()),
           "one contiguous entry per row (" + std::to_string(p.student.rows) + ")");
    p.tail = teacher.tail_mass.data();
    for (std::int64_t r = 0; r < p.student.rows; ++r)
      if (p.mask.kept(r) && !(p.tail[r] >= 0.0f && p.tail[r] < 1.0f))
        fail(fn, "teacher.tail_mass", "row " + std::to_string(r) + ": " + std::to_string(p.tail[r]), "a mass in [0, 1)");
  }
  const std::int64_t k = p.indices.cols, vocab = p.student.cols;
  std::vector<std::int64_t> sorted(static_cast<std::size_t>(k));
  for (std::int64_t r = 0; r < p.student.rows; ++r) {
    if (!p.mask.kept(r)) continue;
    const Index* idx = p.indices.row(r);
    for (std::int64_t c = 0; c < k; ++c) {
      if (idx[c] < 0 || idx[c] >= vocab)
        fail(fn, "teacher.indices", "index " + std::to_string(idx[c]) + " in row " + std::to_string(r),
             "vocabulary entries in [0, " + std::to_string(vocab) + ")");
      sorted[static_cast<std::size_t>(c)] = idx[c];
    }
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      fail(fn, "teacher.indices", "a repeated index in row " + std::to_string(r), "k distinct entries a row");
  }
  p.student_max = scanned_row_maxes(p.student, p.mask, fn, "student");
  p.teacher_max = scanned_row_maxes(p.logits, p.mask, fn, "teacher.logits");
  return p;
}

template <class T, class Index>
Loss topk_loss(SoftDivergence kind, double beta, const TensorView<const T>& student, const TopKTeacher<T, Index>& teacher,
               const TensorView<T>* grad, const SoftTargetOptions& o) {
  const char* fn = soft_divergence_name(kind);
  const TopKPlan<T, Index> p = plan_topk(student, teacher, beta, kind == SoftDivergence::jensen_shannon, o, fn);
  Rows<T> g;
  if (grad != nullptr) g = gradient_rows(*grad, p.student, fn);
  // Validation is over: from here on rows are written.

  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  const std::int64_t kept = kept_rows(p.mask, p.student.rows);
  const std::int64_t n = p.student.cols, k = p.logits.cols;
  const double t = o.temperature;
  const float inv_t = static_cast<float>(1.0 / t);
  const double c = o.grad_scale * t / reduction_divisor(o.reduction, kept, n);
  const bool degenerate_jsd = kind == SoftDivergence::jensen_shannon && (beta == 0.0 || beta == 1.0);
  std::vector<double> per_row(static_cast<std::size_t>(p.student.rows), 0.0);
  // Rows in chunks on the current executor, each with its own scratch; each row's loss and gradient its own.
  parallel_for(p.student.rows, row_chunk(p.student.rows, n), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<double> log_q(static_cast<std::size_t>(k)), h(static_cast<std::size_t>(k));
    std::vector<float> before(static_cast<std::size_t>(k)), rest(static_cast<std::size_t>(n));
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::size_t ri = static_cast<std::size_t>(r);
      if (!p.mask.kept(r) || degenerate_jsd) {
        if (grad != nullptr && !o.accumulate) std::fill(g.row(r), g.row(r) + n, cpu::float_to_element<T>(0.0f));
        continue;
      }
      const T* z = p.student.row(r);
      const T* tl = p.logits.row(r);
      const Index* idx = p.indices.row(r);
      const float ms = p.student_max[ri], mt = p.teacher_max[ri];
      const double log_s_student = std::log(cpu::single_sums(z, n, ms, inv_t).first);
      // The student's rest class in its own frame: the row with the k entries at -inf, its max and sum.
      for (std::int64_t j = 0; j < n; ++j) rest[static_cast<std::size_t>(j)] = cpu::element_to_float(z[j]);
      for (std::int64_t cl = 0; cl < k; ++cl)
        rest[static_cast<std::size_t>(idx[cl])] = -std::numeric_limits<float>::infinity();
      const float m_rest = cpu::scan_row(rest.data(), n).max;
      const bool has_rest = m_rest > -std::numeric_limits<float>::infinity();
      const double s_rest = has_rest ? cpu::single_sums(rest.data(), n, m_rest, inv_t).first : 0.0;
      const double log_q_rest =
          has_rest ? (static_cast<double>(m_rest) - ms) / t + std::log(s_rest) - log_s_student : kNegInf;
      double s_teacher = 0.0;
      for (std::int64_t cl = 0; cl < k; ++cl)
        s_teacher += cpu::exp_scalar((cpu::element_to_float(tl[cl]) - mt) * inv_t);
      const double tail = p.tail != nullptr ? static_cast<double>(p.tail[r]) : 0.0;
      const double log_kept_mass = std::log1p(-tail) - std::log(s_teacher);
      double loss = 0.0, total_h = 0.0;
      for (std::int64_t cl = 0; cl < k; ++cl) {
        const std::size_t ci = static_cast<std::size_t>(cl);
        const double log_p = (static_cast<double>(cpu::element_to_float(tl[cl])) - mt) / t + log_kept_mass;
        log_q[ci] = (static_cast<double>(cpu::element_to_float(z[idx[cl]])) - ms) / t - log_s_student;
        const ClassTerm term = coarse_term(kind, beta, log_p, log_q[ci]);
        loss += term.loss;
        h[ci] = term.h;
        total_h += term.h;
      }
      const ClassTerm rest_term = coarse_term(kind, beta, tail > 0.0 ? std::log(tail) : kNegInf, log_q_rest);
      loss += rest_term.loss;
      total_h += rest_term.h;
      per_row[ri] = t * t * loss;
      if (grad == nullptr) continue;
      T* gr = g.row(r);
      if (o.accumulate)
        for (std::int64_t cl = 0; cl < k; ++cl)
          before[static_cast<std::size_t>(cl)] = cpu::element_to_float(gr[idx[cl]]);
      // Rest entries: dz_j = c (q_j / q_rest) h_rest - c q_j H, both multiples of e'_j = exp((z_j - m_rest) / T):
      // q_j / q_rest = e'_j / s_rest and q_j = e'_j exp((m_rest - m_s) / T) / S. The k entries are rewritten below.
      const double scale_to_q = has_rest ? std::exp((static_cast<double>(m_rest) - ms) / t - log_s_student) : 0.0;
      const double per_e = has_rest ? rest_term.h / s_rest - scale_to_q * total_h : 0.0;
      cpu::scaled_softmax_gradient(z, gr, n, has_rest ? m_rest : ms, inv_t, static_cast<float>(c * per_e), 0.0f,
                                   o.accumulate);
      for (std::int64_t cl = 0; cl < k; ++cl) {
        const std::size_t ci = static_cast<std::size_t>(cl);
        const double value = c * (h[ci] - std::exp(log_q[ci]) * total_h);
        gr[idx[cl]] = cpu::float_to_element<T>(static_cast<float>(o.accumulate ? before[ci] + value : value));
      }
    }
  });
  return reduce_rows(std::move(per_row), o.reduction, kept, n);
}

}  // namespace detail

// kl_div against a top-k teacher (see the file comment for the rule outside the k).
template <class S, class T, class Index>
Loss kl_div(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher, const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  return detail::topk_loss<T, Index>(SoftDivergence::forward_kl, 0.0, student, teacher, nullptr, options);
}

template <class S, class T, class Index, class G>
Loss kl_div_with_grad(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher, const TensorView<G>& grad_student,
                      const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::topk_loss<T, Index>(SoftDivergence::forward_kl, 0.0, student, teacher, &grad_student, options);
}

template <class S, class T, class Index>
Loss reverse_kl_div(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher,
                    const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  return detail::topk_loss<T, Index>(SoftDivergence::reverse_kl, 0.0, student, teacher, nullptr, options);
}

template <class S, class T, class Index, class G>
Loss reverse_kl_div_with_grad(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher,
                              const TensorView<G>& grad_student, const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::topk_loss<T, Index>(SoftDivergence::reverse_kl, 0.0, student, teacher, &grad_student, options);
}

template <class S, class T, class Index>
Loss jensen_shannon(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher, double beta,
                    const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  return detail::topk_loss<T, Index>(SoftDivergence::jensen_shannon, beta, student, teacher, nullptr, options);
}

template <class S, class T, class Index, class G>
Loss jensen_shannon_with_grad(const TensorView<S>& student, const TopKTeacher<T, Index>& teacher, double beta,
                              const TensorView<G>& grad_student, const SoftTargetOptions& options = {}) {
  static_assert(std::is_same_v<std::remove_const_t<S>, T>, "student and teacher logits must have the same element type");
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::topk_loss<T, Index>(SoftDivergence::jensen_shannon, beta, student, teacher, &grad_student, options);
}

}  // namespace shrink::distill
