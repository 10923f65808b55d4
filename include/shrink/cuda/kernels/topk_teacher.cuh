// CUDA realisation of distill/topk_teacher.hpp (nvcc only; host-compiled callers use shrink/cuda/topk_teacher.hpp):
// soft-target losses against a teacher's top-k logits, one block per row, with the gradient to every student logit.
//
// Per kept row (T the temperature, inv_t = 1 / T in float as on the CPU):
//   members  a shared-memory bitmap of the row's k indices, (V + 31) / 32 words; an index outside [0, V) or set
//            twice flags kBadIndex (and is skipped)
//   teacher  mt = max of the k logits, S_t = sum_c exp((t_c - mt) inv_t); log p_c = (t_c - mt) / T + log1p(-tail)
//            - log S_t, p_rest = tail (a tail outside [0, 1) flags kBadTailMass)
//   student  one read: ms = max over the row, and the rest class's own online softmax (m_rest, s_rest) over the
//            entries outside the k, in its own frame so that a rest far below ms keeps a finite log (as the CPU);
//            S = sum_c exp((z_idx_c - ms) inv_t) + s_rest exp((m_rest - ms) / T); log q_c = (z_idx_c - ms) / T - log S
//   loss     T^2 * (sum_c D_c + D_rest), per class term D and h = q dD/dq as distill::coarse_term
//   gradient with H = sum of h over the k + 1 classes: the rest entries g_j = c e_j (h_rest / s_rest - q_rest H /
//            s_rest), e_j = exp((z_j - m_rest) inv_t), from a second read of the row (a pass that stores whole
//            16-byte chunks, leaving the k entries 0 or, accumulating, as they were); then, after a barrier, the k
//            entries g = c (h_c - q_c H) in double, each by the thread that owns class c.
// c = grad_scale * T / divisor (elementwise: kept rows * V for mean). Jensen-Shannon with beta 0 or 1 is 0: its rows
// write zeros as absent rows do (but still count for mean), as on the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"
#include "shrink/cuda/kernels/common/row_access.cuh"
#include "shrink/distill/reduction.hpp"
#include "shrink/distill/soft_target.hpp"

namespace shrink::cuda::kernels::topk_teacher {

using distill::SoftDivergence;

template <class T, class Index>
struct Args {
  const T* student;
  std::int64_t rows, cols, student_stride;
  const T* teacher;  // [rows, k] logits
  std::int64_t k, teacher_stride;
  const Index* indices;  // [rows, k]
  std::int64_t index_stride;
  const float* tail;         // nullptr: 0 for every row
  const std::uint8_t* mask;  // nullptr: every row
  SoftDivergence kind;
  double beta;
  float temperature;
  distill::Reduction reduction;
  double grad_scale;
  bool accumulate;
  T* grad;  // nullptr: the loss only
  std::int64_t grad_stride;
  LossWorkspace ws;
};

// One coarse class: its term of D and q_c dD/dq_c, from log p and log q (distill::coarse_term).
struct ClassTerm {
  double loss;
  double h;
};

__device__ __forceinline__ ClassTerm coarse_class_term(SoftDivergence kind, double beta, double log_p, double log_q) {
  const double p = exp(log_p), q = exp(log_q);
  switch (kind) {
    case SoftDivergence::forward_kl:  // p log(p / q); q * (-p / q) = -p
      return {p > 0.0 ? p * (log_p - log_q) : 0.0, -p};
    case SoftDivergence::reverse_kl: {  // q log(q / p); q * (log(q / p) + 1)
      if (!(q > 0.0)) return {0.0, 0.0};
      const double l = log_q - log_p;
      return {q * l, q * (l + 1.0)};
    }
    default: {  // Jensen-Shannon: beta p log(p/m) + (1-beta) q log(q/m); q * (1-beta) log(q/m)
      const double neg_inf = -__builtin_huge_val();
      const double a = beta > 0.0 ? log(beta) + log_p : neg_inf;
      const double b = beta < 1.0 ? log1p(-beta) + log_q : neg_inf;
      const double top = fmax(a, b);
      if (top == neg_inf) return {0.0, 0.0};
      const double log_m = top + log(exp(a - top) + exp(b - top));  // log(beta p + (1 - beta) q)
      const double lq = q > 0.0 ? log_q - log_m : 0.0;
      const double lp = p > 0.0 ? log_p - log_m : 0.0;
      return {beta * p * lp + (1.0 - beta) * q * lq, (1.0 - beta) * q * lq};
    }
  }
}

__device__ __forceinline__ bool is_member(const unsigned* members, std::int64_t j) {
  return (members[j >> 5] >> (j & 31)) & 1u;
}

// The student row's pass: the max over every entry, the rest class's online softmax.
struct StudentStats {
  Softmax rest;
  float max;
  int bad;
};

// The teacher's k logits: max and NaN/+inf flag, then their sum.
struct TeacherMax {
  float max;
  int bad;
};

template <class T, class Index>
__global__ void __launch_bounds__(kMaxRowThreads, 2) topk_kernel(const Args<T, Index> a) {
  extern __shared__ unsigned members[];  // bitmap of the row's k indices
  const std::int64_t words = (a.cols + 31) / 32;
  const double t = a.temperature;
  const float inv_t = static_cast<float>(1.0 / t);
  const double c = a.grad_scale * t / divisor(a.reduction, *a.ws.kept, a.cols);
  const bool degenerate = a.kind == SoftDivergence::jensen_shannon && (a.beta == 0.0 || a.beta == 1.0);
  constexpr double kNegInf = -__builtin_huge_val();
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* z = a.student + r * a.student_stride;
    const T* tl = a.teacher + r * a.teacher_stride;
    const Index* idx = a.indices + r * a.index_stride;
    T* g = a.grad != nullptr ? a.grad + r * a.grad_stride : nullptr;
    const bool kept = a.mask == nullptr || a.mask[r] != 0;
    if (!kept || degenerate) {  // uniform over the block
      if (threadIdx.x == 0) a.ws.per_row[r] = 0.0;
      if (g != nullptr && !a.accumulate) zero_row(g, a.cols);
      continue;
    }

    __syncthreads();  // the previous row's threads are done with the bitmap
    for (std::int64_t w = threadIdx.x; w < words; w += blockDim.x) members[w] = 0u;
    __syncthreads();
    bool bad_index = false;
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x) {
      const auto j = static_cast<std::int64_t>(idx[cl]);
      if (j < 0 || j >= a.cols) {
        bad_index = true;
      } else {
        const unsigned bit = 1u << (j & 31);
        bad_index |= (atomicOr(&members[j >> 5], bit) & bit) != 0u;  // already set: a repeated index
      }
    }
    if (bad_index) atomicOr(a.ws.status, kBadIndex);
    const float tail = a.tail != nullptr ? a.tail[r] : 0.0f;
    if (threadIdx.x == 0 && !(tail >= 0.0f && tail < 1.0f)) atomicOr(a.ws.status, kBadTailMass);
    __syncthreads();  // the bitmap is complete

    // Teacher: max, then the sum of its exps.
    TeacherMax tm{-kInf, 0};
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x) {
      const float x = load1<T>(tl + cl);
      tm.bad |= !(x < kInf);
      tm.max = fmaxf(tm.max, x);
    }
    tm = block_reduce(tm, [](const TeacherMax& p, const TeacherMax& q) {
      return TeacherMax{fmaxf(p.max, q.max), p.bad | q.bad};
    });
    const float mt = tm.max;
    double teacher_sum = 0.0;
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x)
      teacher_sum += static_cast<double>(expf((load1<T>(tl + cl) - mt) * inv_t));

    // Student: one read of the row.
    StudentStats s{empty_softmax(), -kInf, 0};
    const RowSplit row = split_row(a.cols, z);
    for_each_chunk<T>(row, [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float x[W];
      load<T, W, Cache::keep>(z + j, x);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        s.bad |= !(x[i] < kInf);
        s.max = fmaxf(s.max, x[i]);
        if (!is_member(members, j + i)) add(s.rest, x[i], inv_t);
      }
    });
    s = block_reduce(s, [inv_t](const StudentStats& p, const StudentStats& q) {
      return StudentStats{merge(p.rest, q.rest, inv_t), fmaxf(p.max, q.max), p.bad | q.bad};
    });
    const float ms = s.max, m_rest = s.rest.max;
    const bool has_rest = m_rest > -kInf;
    const double s_rest = s.rest.sum;
    if (threadIdx.x == 0 && (s.bad || tm.bad || ms == -kInf || mt == -kInf)) atomicOr(a.ws.status, kNonFinite);

    // The student's k entries: their share of S.
    double member_sum = 0.0;
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x) {
      const auto j = static_cast<std::int64_t>(idx[cl]);
      if (j >= 0 && j < a.cols) member_sum += static_cast<double>(expf((load1<T>(z + j) - ms) * inv_t));
    }
    const Sums<2> sums = block_sum(Sums<2>{{teacher_sum, member_sum}});
    const double student_sum = sums.v[1] + (has_rest ? s_rest * exp((static_cast<double>(m_rest) - ms) / t) : 0.0);
    const double log_s_student = log(student_sum);
    const double log_kept_mass = log1p(-static_cast<double>(tail)) - log(sums.v[0]);
    const double log_q_rest =
        has_rest ? (static_cast<double>(m_rest) - ms) / t + log(s_rest) - log_s_student : kNegInf;

    // log p_c, log q_c and the class term of class cl.
    const auto class_term = [&](std::int64_t cl, double& log_q) {
      const auto j = static_cast<std::int64_t>(idx[cl]);
      const double log_p = (static_cast<double>(load1<T>(tl + cl)) - mt) / t + log_kept_mass;
      const float zj = j >= 0 && j < a.cols ? load1<T>(z + j) : -kInf;
      log_q = (static_cast<double>(zj) - ms) / t - log_s_student;
      return coarse_class_term(a.kind, a.beta, log_p, log_q);
    };
    Sums<2> terms{{0.0, 0.0}};  // the loss and H over the k classes
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x) {
      double log_q;
      const ClassTerm term = class_term(cl, log_q);
      terms.v[0] += term.loss;
      terms.v[1] += term.h;
    }
    terms = block_sum(terms);
    const double log_p_rest = tail > 0.0f ? log(static_cast<double>(tail)) : kNegInf;
    const ClassTerm rest = coarse_class_term(a.kind, a.beta, log_p_rest, log_q_rest);
    const double total_h = terms.v[1] + rest.h;
    if (threadIdx.x == 0) a.ws.per_row[r] = t * t * (terms.v[0] + rest.loss);
    if (g == nullptr) continue;

    // Gradient. Rest entries: c (q_j / q_rest) h_rest - c q_j H, both multiples of exp((z_j - m_rest) / T), from one
    // more read of the row; that pass leaves the k entries as they were (accumulate) or 0.
    const bool accumulate = a.accumulate;
    const double scale_to_q = has_rest ? exp((static_cast<double>(m_rest) - ms) / t - log_s_student) : 0.0;
    const double per_e = has_rest ? rest.h / s_rest - scale_to_q * total_h : 0.0;
    const float frame = has_rest ? m_rest : ms;
    const float scale = static_cast<float>(c * per_e);
    for_each_chunk<T>(split_row(a.cols, z, g), [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float x[W], out[W];
      load<T, W, Cache::stream>(z + j, x);
      if (accumulate) load<T, W, Cache::stream>(g + j, out);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const float v = is_member(members, j + i) ? 0.0f : scale * expf((x[i] - frame) * inv_t);
        out[i] = accumulate ? out[i] + v : v;
      }
      store<T, W>(g + j, out);
    });
    __syncthreads();  // the pass above stored whole chunks, k entries included: it is done before they are written
    // The k entries: c (h_c - q_c H), in double, by the threads that own class c.
    for (std::int64_t cl = threadIdx.x; cl < a.k; cl += blockDim.x) {
      const auto j = static_cast<std::int64_t>(idx[cl]);
      if (j < 0 || j >= a.cols) continue;
      double log_q;
      const ClassTerm term = class_term(cl, log_q);
      const double value = c * (term.h - exp(log_q) * total_h);
      const double before = accumulate ? static_cast<double>(load1<T, Cache::stream>(g + j)) : 0.0;
      store1<T>(g + j, static_cast<float>(before + value));
    }
  }
}

// Dynamic shared memory of a block: the bitmap of a row of `cols` entries.
inline std::size_t bitmap_bytes(std::int64_t cols) {
  return static_cast<std::size_t>((cols + 31) / 32) * sizeof(unsigned);
}

// Room left for the bitmap on the current device once the reductions' static shared memory (under 4 KiB) is taken.
inline std::size_t max_bitmap_bytes() {
  int device = 0, optin = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return optin > 4096 ? static_cast<std::size_t>(optin) - 4096 : 0;
}

template <class T, class Index>
void launch(const Args<T, Index>& a, cudaStream_t stream) {
  const int threads = row_threads(a.cols, kVector<T>);
  const std::size_t bytes = bitmap_bytes(a.cols);
  if (bytes > 48 * 1024)  // past the default limit a kernel must opt in
    SHRINK_CUDA_CHECK(cudaFuncSetAttribute(topk_kernel<T, Index>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes)));
  topk_kernel<T, Index><<<row_blocks(a.rows), threads, bytes, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(topk_kernel);
}

}  // namespace shrink::cuda::kernels::topk_teacher
