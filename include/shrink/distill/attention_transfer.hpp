// Attention transfer (Zagoruyko & Komodakis 2017, "Paying More Attention to Attention"): distillation by the
// spatial attention maps of student and teacher activations, with its gradients, and the maps themselves.
//
// Activations x [B, C, spatial...] (the spatial dims flatten to P positions; student and teacher may differ in C,
// not in B or the spatial dims). Per sample, with eps = 1e-12 (F.normalize's), sums in double:
//   a_p = mean_c x_cp^2,   n = ||a||_2,   at(x)_p = a_p / max(n, eps)
//   loss_b = sum_p (at(s)_p - at(t)_p)^2
// reduced over samples as reduction.hpp says: mean = sum / (kept samples * P), which is the paper's
// `(at(s) - at(t)).pow(2).mean()`; batchmean = sum / kept samples. The row mask is per sample, shape [B].
// Gradient, with g_p = 2 (at(s)_p - at(t)_p) / divisor * grad_scale (and -g_p for the teacher):
//   d loss / d a_p  = (g_p - at_p * sum_q g_q at_q) / n   where n >= eps;   g_p / eps where the clamp holds
//   d loss / d x_cp = d loss / d a_p * 2 x_cp / C
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/view.hpp"
#include "shrink/distill/feature_rows.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::distill {
// F.normalize's eps: the norm is clamped to at least this.
inline constexpr double kAttentionEpsilon = 1e-12;

// [B, C, spatial...] as samples of C channels of P contiguous positions.
struct Samples {
  std::int64_t count = 0;      // B
  std::int64_t channels = 0;   // C
  std::int64_t positions = 0;  // P, the product of the spatial dims
  std::int64_t sample_stride = 0;
  std::int64_t channel_stride = 0;
};

// Layout of a host view of rank >= 3; fails unless the spatial dims are contiguous (row-major, last stride 1).
template <class T>
Samples attention_samples(const TensorView<T>& v, const char* function, const char* argument) {
  Samples s;
  s.count = v.size(0);
  s.channels = v.size(1);
  s.sample_stride = v.stride(0);
  s.channel_stride = v.stride(1);
  s.positions = 1;
  for (int d = v.rank() - 1; d >= 2; --d) {
    if (v.size(d) != 1 && v.stride(d) != s.positions)
      fail(function, feature_detail::field(argument, "strides").c_str(), to_string(v.strides()),
           "contiguous spatial dimensions (row-major, last stride 1) in [B, C, spatial...]");
    s.positions *= v.size(d);
  }
  return s;
}

// Rank >= 3 and at least one sample, channel and position.
template <class T>
void check_attention_shape(const TensorView<T>& v, const char* function, const char* argument) {
  if (v.rank() < 3)
    fail(function, feature_detail::field(argument, "shape").c_str(), to_string(v.shape()),
         "activations [B, C, spatial...] with at least one spatial dimension");
  if (v.empty())
    fail(function, feature_detail::field(argument, "shape").c_str(), to_string(v.shape()),
         "at least one sample, one channel and one position");
}

// Student [B, Cs, spatial...] and teacher [B, Ct, spatial...] (each checked as above, and with the same samples and
// spatial dims) as samples: their layouts. Used by the CUDA backend too.
template <class T>
std::pair<Samples, Samples> attention_pair_samples(const TensorView<T>& student, const TensorView<T>& teacher,
                                                   const char* function) {
  check_attention_shape(student, function, "student");
  bool same_frame = teacher.rank() == student.rank() && teacher.size(0) == student.size(0);
  for (int d = 2; same_frame && d < student.rank(); ++d) same_frame = teacher.size(d) == student.size(d);
  if (!same_frame) {
    std::string expected = "[" + std::to_string(student.size(0)) + ", C";
    for (int d = 2; d < student.rank(); ++d) expected += ", " + std::to_string(student.size(d));
    fail(function, "teacher.shape", to_string(teacher.shape()),
         expected + "]: student's samples and spatial dimensions, any channel count");
  }
  check_attention_shape(teacher, function, "teacher");
  return {attention_samples(student, function, "student"), attention_samples(teacher, function, "teacher")};
}

namespace feature_detail {

// a_p = mean_c x_cp^2 of sample b into a[0, P); returns ||a||_2.
template <class T>
double attention_energy(const TensorView<const T>& x, const Samples& layout, std::int64_t b, double* a) {
  const std::int64_t positions = layout.positions;
  std::fill(a, a + positions, 0.0);
  for (std::int64_t c = 0; c < layout.channels; ++c) {
    const T* row = x.data() + b * layout.sample_stride + c * layout.channel_stride;
    for (std::int64_t p = 0; p < positions; ++p) {
      const double v = load(row[p]);
      a[p] += v * v;
    }
  }
  double norm2 = 0.0;
  for (std::int64_t p = 0; p < positions; ++p) {
    a[p] /= static_cast<double>(layout.channels);
    norm2 += a[p] * a[p];
  }
  return std::sqrt(norm2);
}

// An absent sample's gradient: overwritten with 0, or left alone when accumulating. grad may be null.
template <class T>
void clear_sample(const TensorView<T>* grad, const Samples& layout, std::int64_t b, bool accumulate) {
  for (std::int64_t c = 0; grad != nullptr && c < layout.channels; ++c)
    clear_row(grad->data() + b * layout.sample_stride + c * layout.channel_stride, layout.positions, accumulate);
}

// d loss / d x_cp = coefficient_p * 2 x_cp / C for one sample.
template <class T>
void write_sample_gradient(const TensorView<const T>& x, const Samples& x_layout, const TensorView<T>& grad,
                           const Samples& grad_layout, std::int64_t b, const double* coefficient, bool accumulate) {
  const double twice_over_c = 2.0 / static_cast<double>(x_layout.channels);
  for (std::int64_t c = 0; c < x_layout.channels; ++c) {
    const T* row = x.data() + b * x_layout.sample_stride + c * x_layout.channel_stride;
    T* out = grad.data() + b * grad_layout.sample_stride + c * grad_layout.channel_stride;
    for (std::int64_t p = 0; p < x_layout.positions; ++p)
      write_gradient(out[p], coefficient[p] * twice_over_c * static_cast<double>(load(row[p])), accumulate);
  }
}

// d loss / d a_p from g_p = d loss / d at_p (sign applied), through the normalisation.
inline void through_normalize(const double* g, const double* map, double norm, std::int64_t positions,
                              double* coefficient) {
  if (norm >= kAttentionEpsilon) {
    double dot = 0.0;
    for (std::int64_t p = 0; p < positions; ++p) dot += g[p] * map[p];
    for (std::int64_t p = 0; p < positions; ++p) coefficient[p] = (g[p] - map[p] * dot) / norm;
  } else {  // the clamp holds: at = a / eps
    for (std::int64_t p = 0; p < positions; ++p) coefficient[p] = g[p] / kAttentionEpsilon;
  }
}

template <class T>
Loss attention_transfer(const TensorView<const T>& student, const TensorView<const T>& teacher,
                        const TensorView<T>* grad_student, const TensorView<T>* grad_teacher,
                        const FeatureLossOptions& options, const char* function) {
  static_assert(is_element_type<T>, "attention transfer takes float, shrink::half or shrink::bfloat16 elements");
  require_host_view(student, function, "student");
  require_host_view(teacher, function, "teacher");
  const std::pair<Samples, Samples> layouts = attention_pair_samples(student, teacher, function);
  const Samples& s_layout = layouts.first;  // named references, not structured bindings: lambdas capture them in C++17
  const Samples& t_layout = layouts.second;
  Samples gs_layout, gt_layout;
  if (grad_student) {
    check_gradient_view(*grad_student, student.shape(), function, "grad_student", "student");
    gs_layout = attention_samples(*grad_student, function, "grad_student");
  }
  if (grad_teacher) {
    check_gradient_view(*grad_teacher, teacher.shape(), function, "grad_teacher", "teacher");
    gt_layout = attention_samples(*grad_teacher, function, "grad_teacher");
  }
  const std::int64_t samples = s_layout.count;
  RowMask mask;
  if (!absent(options.row_mask)) {
    check_per_row_view(options.row_mask, Shape{samples}, samples, function, "options.row_mask");
    mask.bytes = options.row_mask.data();
  }
  check_options(options, function);
  require_finite_elements(student, function, "student");
  require_finite_elements(teacher, function, "teacher");

  const std::int64_t positions = s_layout.positions;
  const std::int64_t kept = mask.kept_count(samples);
  const double scale = 2.0 * options.grad_scale / reduction_divisor(options.reduction, kept, positions);
  const auto n = static_cast<std::size_t>(positions);
  std::vector<double> per_row(static_cast<std::size_t>(samples), 0.0);
  // Samples in chunks on the current executor (core/executor.hpp), each with its own scratch.
  const double sample_cost = 8.0 * static_cast<double>(s_layout.channels + t_layout.channels) * static_cast<double>(n);
  parallel_for(samples, chunk_size(samples, sample_cost), [&](std::int64_t b0, std::int64_t b1) {
    std::vector<double> map_s(n), map_t(n), g(n), coefficient(n);
    for (std::int64_t b = b0; b < b1; ++b) {
      if (!mask.kept(b)) {
        clear_sample(grad_student, gs_layout, b, options.accumulate);
        clear_sample(grad_teacher, gt_layout, b, options.accumulate);
        continue;
      }
      const double norm_s = attention_energy(student, s_layout, b, map_s.data());
      const double norm_t = attention_energy(teacher, t_layout, b, map_t.data());
      const double inv_s = 1.0 / std::max(norm_s, kAttentionEpsilon);
      const double inv_t = 1.0 / std::max(norm_t, kAttentionEpsilon);
      double sum = 0.0;
      for (std::size_t p = 0; p < n; ++p) {
        map_s[p] *= inv_s;
        map_t[p] *= inv_t;
        const double diff = map_s[p] - map_t[p];
        sum += diff * diff;
        g[p] = scale * diff;
      }
      per_row[static_cast<std::size_t>(b)] = sum;
      if (grad_student) {
        through_normalize(g.data(), map_s.data(), norm_s, positions, coefficient.data());
        write_sample_gradient(student, s_layout, *grad_student, gs_layout, b, coefficient.data(), options.accumulate);
      }
      if (grad_teacher) {
        for (double& v : g) v = -v;
        through_normalize(g.data(), map_t.data(), norm_t, positions, coefficient.data());
        write_sample_gradient(teacher, t_layout, *grad_teacher, gt_layout, b, coefficient.data(), options.accumulate);
      }
    }
  });
  return reduce_rows(std::move(per_row), options.reduction, kept, positions);
}

}  // namespace feature_detail

// The attention map of every sample of x [B, C, spatial...] into out (float, [B, P] or [B, spatial...],
// contiguous): at(x)_p = a_p / max(||a||_2, 1e-12) with a_p = mean_c x_cp^2. Nothing is written when a check fails.
template <class T>
void attention_map(TensorView<const T> x, TensorView<float> out) {
  static_assert(feature_detail::is_element_type<T>, "attention_map takes float, shrink::half or shrink::bfloat16");
  const char* function = "shrink::distill::attention_map";
  require_host_view(x, function, "x");
  check_attention_shape(x, function, "x");
  const Samples layout = attention_samples(x, function, "x");
  require_host_view(out, function, "out");
  Shape spatial_shape = x.shape();
  for (int d = 1; d + 1 < spatial_shape.rank; ++d) spatial_shape[d] = spatial_shape[d + 1];
  spatial_shape.rank -= 1;
  if (out.shape() != Shape{layout.count, layout.positions} && out.shape() != spatial_shape)
    fail(function, "out.shape", to_string(out.shape()),
         "one value per sample and position: [" + std::to_string(layout.count) + ", " +
             std::to_string(layout.positions) + "] or " + to_string(spatial_shape));
  require_contiguous(out, function, "out");
  feature_detail::require_finite_elements(x, function, "x");

  std::vector<double> a(static_cast<std::size_t>(layout.positions));
  for (std::int64_t b = 0; b < layout.count; ++b) {
    const double norm = feature_detail::attention_energy(x, layout, b, a.data());
    const double inv = 1.0 / std::max(norm, kAttentionEpsilon);
    float* row = out.data() + b * layout.positions;
    for (std::int64_t p = 0; p < layout.positions; ++p)
      row[p] = static_cast<float>(a[static_cast<std::size_t>(p)] * inv);
  }
}

// The attention maps of x [B, C, spatial...], B * P floats, sample after sample.
template <class T>
std::vector<float> attention_map(TensorView<const T> x) {
  const char* function = "shrink::distill::attention_map";
  require_host_view(x, function, "x");
  check_attention_shape(x, function, "x");
  const std::int64_t samples = x.size(0);
  const std::int64_t positions = x.numel() / (samples * x.size(1));
  std::vector<float> out(static_cast<std::size_t>(samples * positions));
  attention_map<T>(x, TensorView<float>(out.data(), Shape{samples, positions}));
  return out;
}

// Attention transfer between student [B, Cs, spatial...] and teacher [B, Ct, spatial...], reduced over samples
// (masked samples absent; options.row_mask is [B]). T: float, half, bfloat16 (deduced from const views).
template <class T>
Loss attention_transfer_loss(TensorView<const T> student, TensorView<const T> teacher,
                             const FeatureLossOptions& options = {}) {
  return feature_detail::attention_transfer<T>(student, teacher, nullptr, nullptr, options,
                                               "shrink::distill::attention_transfer_loss");
}

// attention_transfer_loss and its gradients, written in T into grad_student and grad_teacher (each of its input's
// shape, or TensorView{} when not wanted); options.accumulate adds into them instead. Nothing is written when a
// check fails. T is deduced from the gradient views.
template <class T>
Loss attention_transfer_loss_with_grad(input_view<T> student, input_view<T> teacher, TensorView<T> grad_student,
                                       TensorView<T> grad_teacher, const FeatureLossOptions& options = {}) {
  return feature_detail::attention_transfer<T>(student, teacher, feature_detail::wanted(grad_student),
                                               feature_detail::wanted(grad_teacher), options,
                                               "shrink::distill::attention_transfer_loss_with_grad");
}

}  // namespace shrink::distill
