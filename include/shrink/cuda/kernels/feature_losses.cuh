// CUDA realisation of the feature distillation losses, distill/feature_mse.hpp, cosine_embedding.hpp and
// attention_transfer.hpp (nvcc only; host-compiled callers use shrink/cuda/feature_losses.hpp). One block per row
// (per sample for attention transfer); arithmetic as on the CPU: elements read as float, products and sums in double,
// each gradient rounded once from double to float, then to the element type.
//
//   mse        one read: loss_r = sum_j (s_j - t_j)^2; grad_s = 2 (s - t) grad_scale / divisor, grad_t = -grad_s
//   cosine     pass 1: s.t, s.s, t.t; then cos = s.t / sqrt((s.s + 1e-12)(t.t + 1e-12)), the loss and its slope;
//              pass 2 (gradients only) reads the row again: grad_s = g (t / sqrt(A B) - cos s / A), likewise grad_t
//   attention  per sample b: a_p = mean_c x_cp^2 for each position (kept in the workspace, 2 P doubles a sample),
//              the norms, the maps at = a / max(||a||, 1e-12), the loss sum_p (at_s - at_t)^2 and the dot products the
//              normalisation's gradient needs; then d x_cp = coefficient_p * 2 x_cp / C.
// Device checks: NaN or inf in a kept row (sample) flags kNonFinite; a cosine target other than +1 or -1 (in any
// row, as the CPU checks) flags kBadIndex. Absent rows: loss 0, gradients 0 (untouched when accumulating), inputs
// not read.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"
#include "shrink/cuda/kernels/common/row_access.cuh"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda::kernels::feature_losses {

// Student and teacher rows of one shape, their optional gradients (nullptr: not wanted) and the options.
template <class T>
struct PairArgs {
  const T* student;
  const T* teacher;
  std::int64_t rows, cols, student_stride, teacher_stride;
  T* grad_student;
  T* grad_teacher;
  std::int64_t grad_student_stride, grad_teacher_stride;
  const std::uint8_t* mask;  // nullptr: every row
  distill::Reduction reduction;
  double grad_scale;
  bool accumulate;
  const std::int8_t* target;  // cosine only; nullptr: every row +1
  double margin;              // cosine only
  LossWorkspace ws;
};

// The gradient entry: g, or old + g when accumulating, rounded once to float (distill's write_gradient).
__device__ __forceinline__ float gradient_value(float old, double g, bool accumulate) {
  return static_cast<float>(accumulate ? static_cast<double>(old) + g : g);
}

__device__ __forceinline__ bool finite(float x) { return fabsf(x) < kInf; }

// An absent row: its gradients zeroed unless accumulating, its loss 0 (thread 0 writes it).
template <class T>
__device__ __forceinline__ void absent_row(const PairArgs<T>& a, std::int64_t r, T* gs, T* gt) {
  if (threadIdx.x == 0) a.ws.per_row[r] = 0.0;
  if (a.accumulate) return;
  if (gs != nullptr) zero_row(gs, a.cols);
  if (gt != nullptr) zero_row(gt, a.cols);
}

// A row sum and the flag of a non-finite input.
struct CheckedSum {
  double sum;
  int bad;
  int unused;
};

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) mse_kernel(const PairArgs<T> a) {
  const double scale = 2.0 * a.grad_scale / divisor(a.reduction, *a.ws.kept, a.cols);
  const bool accumulate = a.accumulate;
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* s = a.student + r * a.student_stride;
    const T* t = a.teacher + r * a.teacher_stride;
    T* gs = a.grad_student != nullptr ? a.grad_student + r * a.grad_student_stride : nullptr;
    T* gt = a.grad_teacher != nullptr ? a.grad_teacher + r * a.grad_teacher_stride : nullptr;
    if (a.mask != nullptr && a.mask[r] == 0) {
      absent_row(a, r, gs, gt);
      continue;
    }
    CheckedSum row{0.0, 0, 0};
    for_each_chunk<T>(split_row(a.cols, s, t, gs, gt), [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float xs[W], xt[W], os[W] = {}, ot[W] = {};
      load<T, W, Cache::stream>(s + j, xs);
      load<T, W, Cache::stream>(t + j, xt);
      if (gs != nullptr && accumulate) load<T, W, Cache::stream>(gs + j, os);
      if (gt != nullptr && accumulate) load<T, W, Cache::stream>(gt + j, ot);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        row.bad |= !(finite(xs[i]) && finite(xt[i]));
        const double diff = static_cast<double>(xs[i]) - static_cast<double>(xt[i]);
        row.sum += diff * diff;
        os[i] = gradient_value(os[i], scale * diff, accumulate);
        ot[i] = gradient_value(ot[i], -scale * diff, accumulate);
      }
      if (gs != nullptr) store<T, W>(gs + j, os);
      if (gt != nullptr) store<T, W>(gt + j, ot);
    });
    row = block_reduce(row, [](const CheckedSum& p, const CheckedSum& q) {
      return CheckedSum{p.sum + q.sum, p.bad | q.bad, 0};
    });
    if (threadIdx.x == 0) {
      a.ws.per_row[r] = row.sum;
      if (row.bad) atomicOr(a.ws.status, kNonFinite);
    }
  }
}

// PyTorch's EPSILON of cosine_embedding_loss, added to each squared magnitude.
constexpr double kCosineEpsilon = 1e-12;

struct CosineSums {
  double dot, ss, tt;
  int bad;
  int unused;
};

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) cosine_kernel(const PairArgs<T> a) {
  const double scale = a.grad_scale / divisor(a.reduction, *a.ws.kept, 1);
  const bool accumulate = a.accumulate;
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* s = a.student + r * a.student_stride;
    const T* t = a.teacher + r * a.teacher_stride;
    T* gs = a.grad_student != nullptr ? a.grad_student + r * a.grad_student_stride : nullptr;
    T* gt = a.grad_teacher != nullptr ? a.grad_teacher + r * a.grad_teacher_stride : nullptr;
    const int y = a.target != nullptr ? a.target[r] : 1;
    if (threadIdx.x == 0 && y != 1 && y != -1) atomicOr(a.ws.status, kBadIndex);
    if (a.mask != nullptr && a.mask[r] == 0) {
      absent_row(a, r, gs, gt);
      continue;
    }
    const bool wanted = gs != nullptr || gt != nullptr;
    CosineSums sums{0.0, 0.0, 0.0, 0, 0};
    for_each_chunk<T>(split_row(a.cols, s, t), [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float xs[W], xt[W];
      if (wanted) {  // read again below
        load<T, W, Cache::keep>(s + j, xs);
        load<T, W, Cache::keep>(t + j, xt);
      } else {
        load<T, W, Cache::stream>(s + j, xs);
        load<T, W, Cache::stream>(t + j, xt);
      }
#pragma unroll
      for (int i = 0; i < W; ++i) {
        sums.bad |= !(finite(xs[i]) && finite(xt[i]));
        const double sj = xs[i], tj = xt[i];
        sums.dot += sj * tj;
        sums.ss += sj * sj;
        sums.tt += tj * tj;
      }
    });
    sums = block_reduce(sums, [](const CosineSums& p, const CosineSums& q) {
      return CosineSums{p.dot + q.dot, p.ss + q.ss, p.tt + q.tt, p.bad | q.bad, 0};
    });
    const double a_norm = sums.ss + kCosineEpsilon, b_norm = sums.tt + kCosineEpsilon;
    const double denominator = sqrt(a_norm * b_norm);
    const double cos = sums.dot / denominator;
    double slope = -1.0;  // d loss_r / d cos
    double row_loss = 1.0 - cos;
    if (y != 1) {
      const double hinge = cos - a.margin;
      row_loss = hinge > 0.0 ? hinge : 0.0;
      slope = hinge >= 0.0 ? 1.0 : 0.0;
    }
    if (threadIdx.x == 0) {
      a.ws.per_row[r] = row_loss;
      if (sums.bad) atomicOr(a.ws.status, kNonFinite);
    }
    if (!wanted) continue;
    const double g = slope * scale;
    for_each_chunk<T>(split_row(a.cols, s, t, gs, gt), [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float xs[W], xt[W], os[W] = {}, ot[W] = {};
      load<T, W, Cache::stream>(s + j, xs);
      load<T, W, Cache::stream>(t + j, xt);
      if (gs != nullptr && accumulate) load<T, W, Cache::stream>(gs + j, os);
      if (gt != nullptr && accumulate) load<T, W, Cache::stream>(gt + j, ot);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const double sj = xs[i], tj = xt[i];
        os[i] = gradient_value(os[i], g * (tj / denominator - cos * sj / a_norm), accumulate);
        ot[i] = gradient_value(ot[i], g * (sj / denominator - cos * tj / b_norm), accumulate);
      }
      if (gs != nullptr) store<T, W>(gs + j, os);
      if (gt != nullptr) store<T, W>(gt + j, ot);
    });
  }
}

// One side of attention transfer: [B, C, P] with contiguous positions, its gradient (nullptr: not wanted).
template <class T>
struct AttentionSide {
  const T* x;
  std::int64_t channels, sample_stride, channel_stride;
  T* grad;
  std::int64_t grad_sample_stride, grad_channel_stride;
};

template <class T>
struct AttentionArgs {
  AttentionSide<T> student, teacher;
  std::int64_t samples, positions;
  const std::uint8_t* mask;  // nullptr: every sample
  distill::Reduction reduction;
  double grad_scale;
  bool accumulate;
  LossWorkspace ws;  // ws.extra: 2 * samples * positions doubles, the energies a_p of both sides
};

// F.normalize's eps: the norm is clamped to at least this.
constexpr double kAttentionEpsilon = 1e-12;

// a_p = mean_c x_cp^2 of sample b, position p; flags non-finite values into bad.
template <class T>
__device__ __forceinline__ double energy(const AttentionSide<T>& side, std::int64_t b, std::int64_t p, int& bad) {
  const T* x = side.x + b * side.sample_stride + p;
  double sum = 0.0;
  for (std::int64_t c = 0; c < side.channels; ++c) {
    const float v = load1<T>(x + c * side.channel_stride);
    bad |= !finite(v);
    sum += static_cast<double>(v) * static_cast<double>(v);
  }
  return sum / static_cast<double>(side.channels);
}

// d loss / d x_cp = coefficient * 2 x_cp / C for every channel of sample b, position p.
template <class T>
__device__ __forceinline__ void write_position(const AttentionSide<T>& side, std::int64_t b, std::int64_t p,
                                               double coefficient, bool accumulate) {
  const double twice_over_c = 2.0 / static_cast<double>(side.channels);
  const T* x = side.x + b * side.sample_stride + p;
  T* g = side.grad + b * side.grad_sample_stride + p;
  for (std::int64_t c = 0; c < side.channels; ++c) {
    const double v = load1<T, Cache::stream>(x + c * side.channel_stride);
    T* out = g + c * side.grad_channel_stride;
    const float old = accumulate ? load1<T, Cache::stream>(out) : 0.0f;
    store1<T>(out, gradient_value(old, coefficient * twice_over_c * v, accumulate));
  }
}

template <class T>
__device__ __forceinline__ void clear_sample(const AttentionSide<T>& side, std::int64_t b, std::int64_t positions) {
  if (side.grad == nullptr) return;
  for (std::int64_t c = 0; c < side.channels; ++c) {
    T* g = side.grad + b * side.grad_sample_stride + c * side.grad_channel_stride;
    for (std::int64_t p = threadIdx.x; p < positions; p += blockDim.x) store1<T>(g + p, 0.0f);
  }
}

struct AttentionNorms {
  double student, teacher;  // sum_p a_p^2
  int bad;
  int unused;
};

template <class T>
__global__ void __launch_bounds__(kMaxRowThreads) attention_kernel(const AttentionArgs<T> a) {
  const std::int64_t positions = a.positions;
  const double scale = 2.0 * a.grad_scale / divisor(a.reduction, *a.ws.kept, positions);
  double* const energies = reinterpret_cast<double*>(a.ws.extra);
  for (std::int64_t b = blockIdx.x; b < a.samples; b += gridDim.x) {
    if (a.mask != nullptr && a.mask[b] == 0) {
      if (threadIdx.x == 0) a.ws.per_row[b] = 0.0;
      if (!a.accumulate) {
        clear_sample(a.student, b, positions);
        clear_sample(a.teacher, b, positions);
      }
      continue;
    }
    // Each thread owns positions threadIdx.x, + blockDim.x, ...: it alone writes and reads their energies.
    double* const a_s = energies + 2 * b * positions;
    double* const a_t = a_s + positions;
    AttentionNorms n{0.0, 0.0, 0, 0};
    for (std::int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
      a_s[p] = energy(a.student, b, p, n.bad);
      a_t[p] = energy(a.teacher, b, p, n.bad);
      n.student += a_s[p] * a_s[p];
      n.teacher += a_t[p] * a_t[p];
    }
    n = block_reduce(n, [](const AttentionNorms& p, const AttentionNorms& q) {
      return AttentionNorms{p.student + q.student, p.teacher + q.teacher, p.bad | q.bad, 0};
    });
    const double norm_s = sqrt(n.student), norm_t = sqrt(n.teacher);
    const double inv_s = 1.0 / fmax(norm_s, kAttentionEpsilon), inv_t = 1.0 / fmax(norm_t, kAttentionEpsilon);
    // The loss and sum_p g_p at_p of both maps, g_p = scale (at_s - at_t).
    Sums<3> sums{{0.0, 0.0, 0.0}};
    for (std::int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
      const double map_s = a_s[p] * inv_s, map_t = a_t[p] * inv_t;
      const double diff = map_s - map_t;
      sums.v[0] += diff * diff;
      sums.v[1] += scale * diff * map_s;
      sums.v[2] += scale * diff * map_t;
    }
    sums = block_sum(sums);
    if (threadIdx.x == 0) {
      a.ws.per_row[b] = sums.v[0];
      if (n.bad) atomicOr(a.ws.status, kNonFinite);
    }
    if (a.student.grad == nullptr && a.teacher.grad == nullptr) continue;
    const double dot_s = sums.v[1], dot_t = sums.v[2];
    for (std::int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
      const double map_s = a_s[p] * inv_s, map_t = a_t[p] * inv_t;
      const double g = scale * (map_s - map_t);
      // Through the normalisation (distill's through_normalize); the teacher's g is -g.
      if (a.student.grad != nullptr) {
        const double coefficient =
            norm_s >= kAttentionEpsilon ? (g - map_s * dot_s) / norm_s : g / kAttentionEpsilon;
        write_position(a.student, b, p, coefficient, a.accumulate);
      }
      if (a.teacher.grad != nullptr) {
        const double coefficient =
            norm_t >= kAttentionEpsilon ? (-g - map_t * -dot_t) / norm_t : -g / kAttentionEpsilon;
        write_position(a.teacher, b, p, coefficient, a.accumulate);
      }
    }
  }
}

template <class T>
void launch_mse(const PairArgs<T>& a, cudaStream_t stream) {
  mse_kernel<T><<<row_blocks(a.rows), row_threads(a.cols, kVector<T>), 0, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(mse_kernel);
}

template <class T>
void launch_cosine(const PairArgs<T>& a, cudaStream_t stream) {
  cosine_kernel<T><<<row_blocks(a.rows), row_threads(a.cols, kVector<T>), 0, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(cosine_kernel);
}

template <class T>
void launch_attention(const AttentionArgs<T>& a, cudaStream_t stream) {
  // One position a thread where they fit (positions are read one by one, coalesced across the threads).
  const std::int64_t wanted = (a.positions + 31) / 32 * 32;
  const int threads = static_cast<int>(wanted < kMaxRowThreads ? wanted : kMaxRowThreads);
  attention_kernel<T><<<row_blocks(a.samples), threads, 0, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(attention_kernel);
}

}  // namespace shrink::cuda::kernels::feature_losses
