// Soft-target distillation losses over full teacher logits, with their gradients to the student logits:
// Hinton's KL, the reverse KL and the generalised Jensen-Shannon divergence, all at a temperature T.
//
// Per row, q = softmax(z_s / T) (student) and p = softmax(z_t / T) (teacher):
//   kl_div          T^2 * KL(p || q)     torch: F.kl_div(F.log_softmax(zs/T), F.softmax(zt/T), reduction) * T^2
//   reverse_kl_div  T^2 * KL(q || p)     torch: F.kl_div(F.log_softmax(zt/T), F.softmax(zs/T), reduction) * T^2
//   jensen_shannon  T^2 * (beta * KL(p || m) + (1 - beta) * KL(q || m)),  m = beta * p + (1 - beta) * q;
//                   beta = 0.5 is the symmetric JSD; beta = 0 or 1 makes m one of p, q and the loss 0 (TRL
//                   substitutes forward / reverse KL there; shrink leaves that to kl_div / reverse_kl_div).
// Gradients (before the reduction's divisor and grad_scale), from d/dz = (1/T) q (g - sum q g), g = dL/dq:
//   kl_div: T (q - p);  reverse: T q ((log q - log p) - KL(q || p));  JSD: T (1 - beta) q (log(q/m) - KL(q || m)).
// Reductions, row masks, grad_scale and accumulate: distill/reduction.hpp. Logits may be -inf (a masked
// vocabulary entry: probability 0; 0 log 0 = 0); where the first distribution of a KL has mass the second
// lacks, the loss is +inf. NaN, +inf or a row with no finite logit is an error (masked rows are not read).
// kl_div and kl_div_with_grad run the row kernel of cpu/kl_rows.hpp.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/kl_rows.hpp"
#include "shrink/cpu/softmax_rows.hpp"
#include "shrink/distill/logit_rows.hpp"
#include "shrink/distill/options.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {

namespace detail {

// Row r's max, after checking it holds no NaN or +inf and at least one finite logit.
inline float checked_row_max(const cpu::RowScan& s, std::int64_t r, const char* function, const char* name) {
  if (s.has_nan) fail(function, name, "NaN in row " + std::to_string(r), "logits without NaN");
  if (s.max == std::numeric_limits<float>::infinity())
    fail(function, name, "+inf in row " + std::to_string(r), "finite or -inf logits");
  if (s.max == -std::numeric_limits<float>::infinity())
    fail(function, name, "row " + std::to_string(r) + " all -inf", "at least one finite logit a row");
  return s.max;
}

// Each kept row's max, every row checked (masked rows are not read; their entry is 0).
template <class T>
std::vector<float> scanned_row_maxes(const Rows<const T>& rows, const RowMask& mask, const char* function,
                                     const char* name) {
  std::vector<float> maxes(static_cast<std::size_t>(rows.rows), 0.0f);
  parallel_for(rows.rows, row_chunk(rows.rows, rows.cols), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      if (mask.kept(r))
        maxes[static_cast<std::size_t>(r)] = checked_row_max(cpu::scan_row(rows.row(r), rows.cols), r, function, name);
  });
  return maxes;
}

// Row maxes on demand: all computed up front (validate_first), or each scanned when first asked for.
template <class T>
class RowMaxes {
 public:
  RowMaxes(const Rows<const T>& rows, const RowMask& mask, bool up_front, const char* function, const char* name)
      : rows_(rows), function_(function), name_(name) {
    if (up_front) maxes_ = scanned_row_maxes(rows, mask, function, name);
  }
  float operator()(std::int64_t r) const {
    if (!maxes_.empty()) return maxes_[static_cast<std::size_t>(r)];
    return checked_row_max(cpu::scan_row(rows_.row(r), rows_.cols), r, function_, name_);
  }

 private:
  Rows<const T> rows_;
  const char* function_;
  const char* name_;
  std::vector<float> maxes_;
};

template <class S, class U>
void check_logit_types() {
  static_assert(std::is_same_v<std::remove_const_t<S>, std::remove_const_t<U>>,
                "student and teacher logits must have the same element type");
  static_assert(is_logit_type_v<std::remove_const_t<S>>, "logits must be float, shrink::half or shrink::bfloat16");
}

// The forward KL (and its gradient when g is given) through cpu/kl_rows.hpp: each row's sums stage (one read of
// the row, exps kept in scratch rows) runs beside the previous row's gradient stage, tile by tile over the same
// scratch, so reads and writes overlap. Without validate_first each row is checked after its sums stage, before
// its gradient is written.
template <class T>
void forward_kl_rows(const Rows<const T>& zs, const Rows<const T>& zt, const Rows<T>* g,
                     const std::vector<std::int64_t>& kept, double t, double c, bool accumulate,
                     std::vector<double>& per_row, const char* fn) {
  const std::int64_t n = zs.cols, tiles = cpu::kl_tile_count(n);
  std::vector<float> scratch(static_cast<std::size_t>(2 * n + 2 * tiles));
  float* const es = scratch.data();
  float* const et = es + n;
  float* const tile_ms = et + n;
  float* const tile_mt = tile_ms + tiles;
  // Streaming stores pay off once the gradient cannot stay in cache.
  constexpr double kStreamBytes = 16.0 * 1024 * 1024;
  const bool stream = g != nullptr && std::is_same_v<T, float> && !accumulate &&
                      static_cast<double>(kept.size()) * static_cast<double>(n) * sizeof(T) >= kStreamBytes;
  cpu::KlGradJob<T> job;
  job.n = n;
  job.es = es;
  job.et = et;
  job.tile_ms = tile_ms;
  job.tile_mt = tile_mt;
  job.t = t;
  job.accumulate = accumulate;
  job.stream = stream;
  bool pending = false;
  for (const std::int64_t r : kept) {
    const cpu::KlRowSums s = cpu::kl_row_sums(zs.row(r), zt.row(r), n, t, es, et, tile_ms, tile_mt, pending ? &job : nullptr);
    checked_row_max(cpu::RowScan{s.max_student, s.nan_student}, r, fn, "student");
    checked_row_max(cpu::RowScan{s.max_teacher, s.nan_teacher}, r, fn, "teacher");
    per_row[static_cast<std::size_t>(r)] = t * t * (s.cross / s.s_teacher + std::log(s.s_student / s.s_teacher));
    if (g == nullptr) continue;
    job.g = g->row(r);
    job.sums = s;
    job.cs = c / s.s_student;
    job.ct = c / s.s_teacher;
    pending = true;
  }
  if (pending) cpu::kl_row_grad(job);
  if (stream) cpu::kl_rows_done();
}

// Shared body of the three losses; grad == nullptr computes the loss only.
template <class T>
Loss soft_target_loss(SoftDivergence kind, double beta, const TensorView<const T>& student,
                      const TensorView<const T>& teacher, const TensorView<T>* grad, const SoftTargetOptions& o) {
  const char* fn = soft_divergence_name(kind);
  const Rows<const T> zs = as_rows(student, fn, "student");
  const Rows<const T> zt = as_rows(teacher, fn, "teacher");
  require_same_shape(student, teacher, fn, "teacher", "student");
  require_temperature(o.temperature, fn);
  require_grad_scale(o.grad_scale, fn);
  if (kind == SoftDivergence::jensen_shannon) require_unit_interval(beta, fn, "beta");
  const RowMask mask = row_mask(o.row_mask, zs.rows, fn);
  Rows<T> g;
  if (grad != nullptr) {
    require_same_shape(student, *grad, fn, "grad_student", "student");
    g = gradient_rows(*grad, zs, fn);
  }
  const bool one_read = kind == SoftDivergence::forward_kl;
  // With validate_first every kept row is scanned here, before anything is written. The forward-KL gradient
  // kernel finds its own maxes (online), so it only needs the check.
  const RowMaxes<T> ms(zs, mask, o.validate_first, fn, "student");
  const RowMaxes<T> mt(zt, mask, o.validate_first, fn, "teacher");

  const std::int64_t kept = kept_rows(mask, zs.rows);
  const std::int64_t n = zs.cols;
  const double t = o.temperature;
  const float inv_t = static_cast<float>(1.0 / t);
  const double divisor = reduction_divisor(o.reduction, kept, n);
  // dloss/dz = grad_scale * T^2 * (1/T) * (...) / divisor.
  const double c = o.grad_scale * t / divisor;
  const bool degenerate_jsd = kind == SoftDivergence::jensen_shannon && (beta == 0.0 || beta == 1.0);
  std::vector<double> per_row(static_cast<std::size_t>(zs.rows), 0.0);
  std::vector<std::int64_t> kept_list;
  for (std::int64_t r = 0; r < zs.rows; ++r) {
    if (mask.kept(r) && !degenerate_jsd) {
      kept_list.push_back(r);
    } else if (grad != nullptr && !o.accumulate) {
      std::fill(g.row(r), g.row(r) + n, cpu::float_to_element<T>(0.0f));
    }
  }
  // Kept rows in chunks on the current executor; each row's loss and gradient are the same whatever the cut.
  const auto kept_count = static_cast<std::int64_t>(kept_list.size());
  if (one_read) {
    parallel_for(kept_count, row_chunk(kept_count, n), [&](std::int64_t i0, std::int64_t i1) {
      const std::vector<std::int64_t> part(kept_list.begin() + i0, kept_list.begin() + i1);
      forward_kl_rows(zs, zt, grad != nullptr ? &g : nullptr, part, t, c, o.accumulate, per_row, fn);
    });
    return reduce_rows(std::move(per_row), o.reduction, kept, n);
  }
  parallel_for(kept_count, row_chunk(kept_count, n), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t r = kept_list[static_cast<std::size_t>(i)];
      const std::size_t ri = static_cast<std::size_t>(r);
      const T* a = zs.row(r);
      const T* b = zt.row(r);
      const float max_s = ms(r), max_t = mt(r);
      switch (kind) {
        case SoftDivergence::forward_kl: break;  // forward_kl_rows above
        case SoftDivergence::reverse_kl: {
          const cpu::RowSums s = cpu::pair_sums(a, b, n, max_s, max_t, inv_t, true);
          per_row[ri] = t * t * (s.cross / s.first + std::log(s.second / s.first));
          if (grad != nullptr)
            cpu::weighted_log_ratio_gradient(a, b, g.row(r), n, max_s, max_t, inv_t, static_cast<float>(c / s.first),
                                             static_cast<float>(s.cross / s.first), o.accumulate);
          break;
        }
        case SoftDivergence::jensen_shannon: {
          const cpu::RowSums s = cpu::pair_sums(a, b, n, max_s, max_t, inv_t, false);
          const cpu::JsdRow jr{static_cast<float>(1.0 / s.first), static_cast<float>(1.0 / s.second),
                               static_cast<float>(beta)};
          const cpu::RowSums kl = cpu::jsd_sums(a, b, n, max_s, max_t, inv_t, jr);  // KL(q||m), KL(p||m)
          per_row[ri] = t * t * (beta * kl.second + (1.0 - beta) * kl.first);
          if (grad != nullptr)
            cpu::jsd_gradient(a, b, g.row(r), n, max_s, max_t, inv_t, jr, static_cast<float>(c * (1.0 - beta)),
                              static_cast<float>(kl.first), o.accumulate);
          break;
        }
      }
    }
  });
  return reduce_rows(std::move(per_row), o.reduction, kept, n);
}

}  // namespace detail

// T^2 * KL(softmax(teacher / T) || softmax(student / T)), reduced.
template <class S, class U>
Loss kl_div(const TensorView<S>& student, const TensorView<U>& teacher, const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  return detail::soft_target_loss<T>(SoftDivergence::forward_kl, 0.0, student, teacher, nullptr, options);
}

// kl_div and its gradient to the student logits, written to (or added to) grad_student.
template <class S, class U, class G>
Loss kl_div_with_grad(const TensorView<S>& student, const TensorView<U>& teacher, const TensorView<G>& grad_student,
                      const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::soft_target_loss<T>(SoftDivergence::forward_kl, 0.0, student, teacher, &grad_student, options);
}

// T^2 * KL(softmax(student / T) || softmax(teacher / T)), reduced.
template <class S, class U>
Loss reverse_kl_div(const TensorView<S>& student, const TensorView<U>& teacher, const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  return detail::soft_target_loss<T>(SoftDivergence::reverse_kl, 0.0, student, teacher, nullptr, options);
}

template <class S, class U, class G>
Loss reverse_kl_div_with_grad(const TensorView<S>& student, const TensorView<U>& teacher,
                              const TensorView<G>& grad_student, const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::soft_target_loss<T>(SoftDivergence::reverse_kl, 0.0, student, teacher, &grad_student, options);
}

// T^2 * (beta KL(p || m) + (1 - beta) KL(q || m)), m = beta p + (1 - beta) q; beta in [0, 1].
template <class S, class U>
Loss jensen_shannon(const TensorView<S>& student, const TensorView<U>& teacher, double beta,
                    const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  return detail::soft_target_loss<T>(SoftDivergence::jensen_shannon, beta, student, teacher, nullptr, options);
}

template <class S, class U, class G>
Loss jensen_shannon_with_grad(const TensorView<S>& student, const TensorView<U>& teacher, double beta,
                              const TensorView<G>& grad_student, const SoftTargetOptions& options = {}) {
  detail::check_logit_types<S, U>();
  using T = std::remove_const_t<S>;
  static_assert(std::is_same_v<G, T>, "grad_student must be a mutable view of the logits' element type");
  return detail::soft_target_loss<T>(SoftDivergence::jensen_shannon, beta, student, teacher, &grad_student, options);
}

}  // namespace shrink::distill
