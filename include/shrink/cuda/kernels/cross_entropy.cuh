// CUDA realisation of distill/cross_entropy.hpp (nvcc only; host-compiled callers use shrink/cuda/cross_entropy.hpp):
// one block per row, an online-softmax pass, then the gradient pass.
//
// Per kept row with label y (m = row max, a_j = z_j - m, S = sum_j exp(a_j), eps = label smoothing):
//   pass 1 (one read):  m and S online (S rescaled when m grows), plus sum_j z_j when eps > 0; NaN / +inf flagged
//   loss  = (1 - eps) (log S - a_y) + eps (log S - (sum_j z_j - V m) / V)             (eps = 0: log S - a_y)
//   pass 2 (grad only): g_j = fma(c / S, exp(a_j), -c eps / V), g_y = c (q_y - (1 - eps)) - c eps / V in double,
// c = grad_scale / divisor (distill/reduction.hpp: kept rows for mean and batchmean). Arithmetic follows the CPU:
// exps in float, sums in double, the label entry in double, one rounding to the element type. A row whose label is
// ignore_index (or that the mask drops) writes loss 0 and a zero gradient (untouched when accumulating); its logits
// are not read. A kept label outside [0, V) is flagged by the kept-row count (kBadIndex) and its row left out here.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/kernels/common/loss_reduce.cuh"
#include "shrink/cuda/kernels/common/row_access.cuh"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda::kernels::cross_entropy {

template <class T, class Label>
struct Args {
  const T* logits;
  std::int64_t rows, cols, logits_stride;
  const Label* labels;
  const std::uint8_t* mask;  // nullptr: every row
  std::int64_t ignore_index;
  float smoothing;
  distill::Reduction reduction;
  double grad_scale;
  bool accumulate;
  T* grad;  // nullptr: the loss only
  std::int64_t grad_stride;
  LossWorkspace ws;
};

// The block's online softmax of a row (temperature 1) and, with smoothing, the sum of its logits.
struct RowStats {
  Softmax softmax;
  double total;
};

template <class T, class Label>
__global__ void __launch_bounds__(kMaxRowThreads) cross_entropy_kernel(const Args<T, Label> a) {
  __shared__ double label_gradient;  // c (q_y - (1 - eps)) - c eps / V of the current row
  const double c = a.grad_scale / divisor(a.reduction, *a.ws.kept, 1);
  const double eps = a.smoothing;
  const double uniform = c * eps / static_cast<double>(a.cols);
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const T* z = a.logits + r * a.logits_stride;
    T* g = a.grad != nullptr ? a.grad + r * a.grad_stride : nullptr;
    std::int64_t y = 0;
    bool kept = a.mask == nullptr || a.mask[r] != 0;
    if (kept) {
      y = static_cast<std::int64_t>(a.labels[r]);
      kept = y != a.ignore_index && y >= 0 && y < a.cols;
    }
    if (!kept) {  // uniform over the block: every thread read the same mask and label
      if (threadIdx.x == 0) a.ws.per_row[r] = 0.0;
      if (g != nullptr && !a.accumulate) zero_row(g, a.cols);
      continue;
    }

    RowStats s{empty_softmax(), 0.0};
    const RowSplit row = split_row(a.cols, z);
    for_each_chunk<T>(row, [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float x[W];
      load<T, W, Cache::keep>(z + j, x);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        add(s.softmax, x[i], 1.0f);
        if (eps > 0.0) s.total += static_cast<double>(x[i]);
      }
    });
    s = block_reduce(s, [](const RowStats& p, const RowStats& q) {
      return RowStats{merge(p.softmax, q.softmax, 1.0f), p.total + q.total};
    });
    const float m = s.softmax.max;
    const double sum = s.softmax.sum;
    if (threadIdx.x == 0) {
      if (s.softmax.bad || m == -kInf) atomicOr(a.ws.status, kNonFinite);
      const double log_s = log(sum);
      const double a_y = static_cast<double>(load1<T>(z + y)) - m;
      const double nll = log_s - a_y;
      const double cross = s.total - static_cast<double>(a.cols) * m;  // sum_j a_j
      a.ws.per_row[r] = eps > 0.0 ? (1.0 - eps) * nll + eps * (log_s - cross / static_cast<double>(a.cols)) : nll;
      label_gradient = c * (exp(a_y) / sum - (1.0 - eps)) - uniform;
    }
    if (g == nullptr) continue;
    __syncthreads();  // label_gradient

    const float scale = static_cast<float>(c / sum), shift = static_cast<float>(uniform);
    const double at_label = label_gradient;
    const bool accumulate = a.accumulate;
    for_each_chunk<T>(split_row(a.cols, z, g), [&](std::int64_t j, auto width) {
      constexpr int W = decltype(width)::value;
      float x[W], out[W];
      load<T, W, Cache::stream>(z + j, x);
      if (accumulate) load<T, W, Cache::stream>(g + j, out);
#pragma unroll
      for (int i = 0; i < W; ++i) {
        const float v = fmaf(scale, expf(x[i] - m), -shift);
        if (j + i == y)
          out[i] = static_cast<float>(accumulate ? static_cast<double>(out[i]) + at_label : at_label);
        else
          out[i] = accumulate ? out[i] + v : v;
      }
      store<T, W>(g + j, out);
    });
  }
}

template <class T, class Label>
void launch(const Args<T, Label>& a, cudaStream_t stream) {
  const int threads = row_threads(a.cols, kVector<T>);
  cross_entropy_kernel<T, Label><<<row_blocks(a.rows), threads, 0, stream>>>(a);
  SHRINK_CUDA_CHECK_LAUNCH(cross_entropy_kernel);
}

}  // namespace shrink::cuda::kernels::cross_entropy
