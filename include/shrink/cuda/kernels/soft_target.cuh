// CUDA realisation of distill/soft_target.hpp's losses and gradients (nvcc only; host-compiled callers use
// shrink/cuda/soft_target.hpp).
//
// One kernel template runs every row path; a CTA (or, on the cluster path, the C CTAs of a cluster, each on its slice
// of the columns) takes rows in a grid-stride loop. Per row, with a = (z_s - M_s) / T, b = (z_t - M_t) / T (computed
// in base 2, a log2(e), so each exp is one ex2 of the SFU):
//   pass A  each thread folds its elements into online statistics (Stats): running maxes M_s, M_t and, relative to
//           them, S_s = sum e^a, S_t = sum e^b and the cross term (forward KL: sum over e^b > 0 of e^b (b - a);
//           reverse: sum over e^a > 0 of e^a (a - b)), rescaled as a max rises (the CPU's KlOnline::raise):
//             S <- rho S, rho = exp((M_old - M_new) / T);  X <- rho_t (X + delta S_t) (forward),
//             X <- rho_s (X - delta S_s) (reverse), delta = ((M_t,old - M_t,new) - (M_s,old - M_s,new)) / T.
//           Staged paths copy the raw row into shared memory on the way. The CTA merges its threads' Stats in a
//           fixed order (warp shuffles, then warp 0 over the warps); the cluster path then merges its CTAs' in rank
//           order through distributed shared memory, so every CTA holds the same row totals. A NaN logit shows as a
//           NaN sum and a +inf one as a +inf max, so the totals flag the row (kNonFinite) with no per-element test.
//   pass B  Jensen-Shannon only: KL(q || m) and KL(p || m) from the normalisers, summed the same way.
//   pass C  the gradient, from the row again (shared memory, or global memory on the generic path):
//             forward  g = (c / S_s) e^a - (c / S_t) e^b
//             reverse  g = (c / S_s) e^a ((a - b) - X / S_s)              where e^a > 0, else 0
//             JSD      g = c (1 - beta) q (log(q / m) - KL(q || m))       where q > 0, else 0
//           c = grad_scale * T / divisor; stored over, or added to, grad_student.
// Each thread owns the same elements in every pass (a row's scalar head up to a 16-byte boundary, its 16-byte chunks
// k = thread, thread + blockDim, ..., its scalar tail), so staged data is read back by the thread that wrote it.
// Rows whose student and teacher starts differ modulo 16 bytes take the same loops one element at a time.
// exp results below FLT_MIN count as 0, as cpu/vector_math.hpp's exps flush them (a probability < 1e-38 is 0).
// Per-row losses (double) go to the caller's per_row or the workspace; finish_kernel sums them in a fixed order.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math_constants.h>

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/convert.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/soft_target.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda::kernels {
namespace soft_target {

enum class Divergence { forward_kl, reverse_kl, jensen_shannon };

constexpr int kMaxThreads = 256;
// CTAs an SM the kernels are register-bounded for: three staged slices of up to ~70 KiB share an sm_90 SM.
constexpr int kMinBlocksPerSm = 3;
constexpr unsigned kFullWarp = 0xFFFFFFFFu;

// Elements in one 16-byte vector.
template <class T>
inline constexpr int kVec = 16 / static_cast<int>(sizeof(T));

// Workspace after the status word: the kept-row count, then one double per row (when the caller gives no per_row).
constexpr std::size_t kKeptOffset = kStatusBytes;
constexpr std::size_t kLossesOffset = kStatusBytes + 16;

template <class T>
struct Params {
  const T* student = nullptr;
  const T* teacher = nullptr;
  T* grad = nullptr;  // null without a gradient
  std::int64_t rows = 0;
  int cols = 0;
  std::int64_t stride_s = 0, stride_t = 0, stride_g = 0;  // elements between row starts
  const std::uint8_t* mask = nullptr;                     // null: every row kept
  const unsigned long long* kept_count = nullptr;         // with a mask: the kept rows, counted on the device
  std::int64_t kept_rows = 0;                             // without one: rows
  double* losses = nullptr;                               // one per row
  int* status = nullptr;
  float log2e_over_t = 1.0f;  // float(log2(e) / T): exps are 2^((z - M) log2(e) / T)
  double temperature = 1.0;  // T
  double beta = 0.0;
  double grad_scale = 1.0;
  distill::Reduction reduction = distill::Reduction::batchmean;
  bool accumulate = false;
  bool degenerate = false;  // Jensen-Shannon with beta 0 or 1: loss and gradient 0 (rows still checked)
  int slice = 0;            // columns per CTA: cols, or on the cluster path ceil(cols / C) rounded to kVec
  int stage_capacity = 0;   // staged paths: elements of shared memory per tensor (slice + kVec, 16-byte multiple)
};

// W elements as loaded: one element, or a 16-byte vector of kVec<T>.
template <class T, int W>
using Raw = std::conditional_t<W == 1, T, uint4>;

template <class T, int W>
__device__ __forceinline__ Raw<T, W> load_global(const T* p) {
  if constexpr (W == 1) return *p;
  else return __ldg(reinterpret_cast<const uint4*>(p));
}

template <class T, int W>
__device__ __forceinline__ Raw<T, W> load_shared(const T* p) {
  if constexpr (W == 1) return *p;
  else return *reinterpret_cast<const uint4*>(p);
}

template <class T, int W>
__device__ __forceinline__ void store_shared(T* p, const Raw<T, W>& v) {
  if constexpr (W == 1) *p = v;
  else *reinterpret_cast<uint4*>(p) = v;
}

template <class T, int W>
__device__ __forceinline__ void unpack(const Raw<T, W>& v, float (&out)[W]) {
  if constexpr (W == 1) {
    out[0] = to_float(v);
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(W == 4, "four floats a vector");
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  } else {
    static_assert(W == 8, "eight 16-bit elements a vector");
    const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // little-endian: element 2i in the low half
      out[2 * i] = to_float(T::from_bits(static_cast<std::uint16_t>(words[i] & 0xFFFFu)));
      out[2 * i + 1] = to_float(T::from_bits(static_cast<std::uint16_t>(words[i] >> 16)));
    }
  }
}

template <class T, int W>
__device__ __forceinline__ Raw<T, W> pack(const float (&v)[W]) {
  if constexpr (W == 1) {
    return from_float<T>(v[0]);
  } else if constexpr (std::is_same_v<T, float>) {
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
  } else {
    unsigned words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      words[i] = static_cast<unsigned>(from_float<T>(v[2 * i]).to_bits()) |
                 (static_cast<unsigned>(from_float<T>(v[2 * i + 1]).to_bits()) << 16);
    return make_uint4(words[0], words[1], words[2], words[3]);
  }
}

// A row start's distance past a 16-byte boundary, in elements (pointers are aligned to their element).
template <class T>
__device__ __forceinline__ int misalignment(const T* p) {
  return static_cast<int>((reinterpret_cast<std::uintptr_t>(p) % 16) / sizeof(T));
}

// --- arithmetic ------------------------------------------------------------------------------------------------------

constexpr double kLn2 = 0.693147180559945309417;
constexpr double kLog2e = 1.442695040888963407360;

// 2^x, results below the smallest normal float flushed to 0 (as the CPU's exps flush them): the SFU's ex2 with
// flush-to-zero, relative error about 2^-22.
__device__ __forceinline__ float exp2_flushed(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#else
  const float y = exp2f(x);
  return y < FLT_MIN ? 0.0f : y;
#endif
}

// exp(x) as a rescale factor: float first; double where float underflows, so a factor is 0 only where the CPU's is.
__device__ __forceinline__ double rescale_factor(double x) {
  if (x == 0.0) return 1.0;
  const float f = expf(static_cast<float>(x));
  return f > 0.0f ? static_cast<double>(f) : exp(x);
}

// The offset exps use: the running max, or 0 while it is -inf (the elements so far are all -inf, their exps 0).
__device__ __forceinline__ float offset_of(float m) { return isfinite(m) ? m : 0.0f; }

// Online statistics of one row (or a part of it): the maxes, then relative to them S_s, S_t and the cross term, the
// latter in base-2 units (a sum of e (b2 - a2), b2 = b log2(e); times ln 2 at the end). A NaN logit makes its sum
// NaN, a +inf one the max +inf: the row's totals show both, so no element needs a check of its own.
struct Stats {
  float max_s, max_t;
  double sum_s, sum_t, cross;
};

__device__ __forceinline__ Stats empty_stats() { return Stats{-CUDART_INF_F, -CUDART_INF_F, 0.0, 0.0, 0.0}; }

// Raises the maxes to (ns, nt) (never below the current ones), rescaling the sums.
template <Divergence D>
__device__ __forceinline__ void raise(Stats& st, float ns, float nt, double temperature) {
  if (ns == st.max_s && nt == st.max_t) return;
  const double os = offset_of(st.max_s), ot = offset_of(st.max_t);
  const double new_os = offset_of(ns), new_ot = offset_of(nt);
  // Sums over no finite element are 0 whatever the factor; keep the factor finite for them.
  const double rho_s = st.sum_s > 0.0 ? rescale_factor((os - new_os) / temperature) : 0.0;
  const double rho_t = st.sum_t > 0.0 ? rescale_factor((ot - new_ot) / temperature) : 0.0;
  const double delta = ((ot - new_ot) - (os - new_os)) / temperature * kLog2e;  // base 2, as the cross term
  // A factor of 0 drops the cross term with its weights; it also keeps a +inf cross term from becoming 0 * inf.
  if constexpr (D == Divergence::forward_kl) st.cross = rho_t > 0.0 ? rho_t * (st.cross + delta * st.sum_t) : 0.0;
  if constexpr (D == Divergence::reverse_kl) st.cross = rho_s > 0.0 ? rho_s * (st.cross - delta * st.sum_s) : 0.0;
  st.sum_s *= rho_s;
  st.sum_t *= rho_t;
  st.max_s = ns;
  st.max_t = nt;
}

template <Divergence D>
__device__ __forceinline__ Stats merge(Stats a, Stats b, double temperature) {
  const float ms = fmaxf(a.max_s, b.max_s), mt = fmaxf(a.max_t, b.max_t);
  raise<D>(a, ms, mt, temperature);
  raise<D>(b, ms, mt, temperature);
  a.sum_s += b.sum_s;
  a.sum_t += b.sum_t;
  a.cross += b.cross;
  return a;
}

// Folds W elements of the student (zs) and teacher (zt) into st: one max check a chunk (fmaxf passes NaN over), then
// the exps. scale = log2(e) / T.
template <Divergence D, int W>
__device__ __forceinline__ void add_chunk(Stats& st, const float (&zs)[W], const float (&zt)[W], float scale,
                                          double temperature) {
  float ms = -CUDART_INF_F, mt = -CUDART_INF_F;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    ms = fmaxf(ms, zs[i]);
    mt = fmaxf(mt, zt[i]);
  }
  raise<D>(st, fmaxf(st.max_s, ms), fmaxf(st.max_t, mt), temperature);
  const float os = offset_of(st.max_s), ot = offset_of(st.max_t);
  float ps = 0.0f, pt = 0.0f, px = 0.0f;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const float a = (zs[i] - os) * scale, b = (zt[i] - ot) * scale;  // base 2
    const float ea = exp2_flushed(a), eb = exp2_flushed(b);
    ps += ea;
    pt += eb;
    // Only where the weight is > 0: a masked (-inf) pair adds nothing rather than NaN.
    if constexpr (D == Divergence::forward_kl) {
      if (eb > 0.0f) px += eb * (b - a);
    } else if constexpr (D == Divergence::reverse_kl) {
      if (ea > 0.0f) px += ea * (a - b);
    }
  }
  st.sum_s += ps;
  st.sum_t += pt;
  if constexpr (D != Divergence::jensen_shannon) st.cross += px;
}

// What passes B and C need of a row, from its totals.
struct RowConstants {
  float os = 0.0f, ot = 0.0f, scale = 1.0f;    // offsets (the final maxes) and log2(e) / T
  float cs = 0.0f, ct = 0.0f, shift = 0.0f;    // forward: c / S_s, c / S_t; reverse: c / S_s, X / S_s
  float inv_ss = 0.0f, inv_st = 0.0f, beta = 0.0f, cj = 0.0f, kl_qm = 0.0f;  // Jensen-Shannon
};

// One element's Jensen-Shannon pieces: q, log(q / m) (0 where q = 0), p, log(p / m), as the CPU's jsd_terms.
struct JsdTerms {
  float q, lq_m, p, lp_m;
};

// a, b in base 2 (times log2(e) / T).
__device__ __forceinline__ JsdTerms jsd_terms(float a, float b, const RowConstants& k) {
  const float q = exp2_flushed(a) * k.inv_ss, p = exp2_flushed(b) * k.inv_st;
  const float m = fmaf(k.beta, p, (1.0f - k.beta) * q);
  // log(q / m) rather than log q - log m: exact 0 where q == m, and no log of an underflowed q.
  return {q, q > 0.0f ? logf(q / m) : 0.0f, p, p > 0.0f ? logf(p / m) : 0.0f};
}

template <Divergence D>
__device__ __forceinline__ float gradient_of(float zs, float zt, const RowConstants& k) {
  const float a = (zs - k.os) * k.scale, b = (zt - k.ot) * k.scale;  // base 2
  if constexpr (D == Divergence::forward_kl) {
    return fmaf(k.cs, exp2_flushed(a), -(k.ct * exp2_flushed(b)));
  } else if constexpr (D == Divergence::reverse_kl) {
    const float ea = exp2_flushed(a);
    return ea > 0.0f ? (k.cs * ea) * ((a - b) * static_cast<float>(kLn2) - k.shift) : 0.0f;
  } else {
    const JsdTerms j = jsd_terms(a, b, k);
    return j.q > 0.0f ? (k.cj * j.q) * (j.lq_m - k.kl_qm) : 0.0f;
  }
}

// --- reductions (fixed order: the same bits every run) ---------------------------------------------------------------

__device__ __forceinline__ Stats shuffle_down(const Stats& s, int offset) {
  Stats o;
  o.max_s = __shfl_down_sync(kFullWarp, s.max_s, offset);
  o.max_t = __shfl_down_sync(kFullWarp, s.max_t, offset);
  o.sum_s = __shfl_down_sync(kFullWarp, s.sum_s, offset);
  o.sum_t = __shfl_down_sync(kFullWarp, s.sum_t, offset);
  o.cross = __shfl_down_sync(kFullWarp, s.cross, offset);
  return o;
}

// Lane 0 ends with the merge of the warp's 32 Stats (the other lanes hold partial merges).
template <Divergence D>
__device__ __forceinline__ Stats warp_merge(Stats s, double temperature) {
  for (int offset = 16; offset > 0; offset >>= 1) s = merge<D>(s, shuffle_down(s, offset), temperature);
  return s;
}

__device__ __forceinline__ double2 warp_sum(double2 v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v.x += __shfl_down_sync(kFullWarp, v.x, offset);
    v.y += __shfl_down_sync(kFullWarp, v.y, offset);
  }
  return v;
}

// The CTA's merge, returned to every thread. scratch: 33 entries of shared memory. Three barriers: the warps' results
// are in, the total is in, everyone has read it (so scratch may be reused at once).
template <Divergence D>
__device__ Stats block_merge(Stats s, double temperature, Stats* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  s = warp_merge<D>(s, temperature);
  if (lane == 0) scratch[warp] = s;
  __syncthreads();
  if (warp == 0) {
    Stats v = lane < warps ? scratch[lane] : empty_stats();
    v = warp_merge<D>(v, temperature);
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  const Stats total = scratch[32];
  __syncthreads();
  return total;
}

__device__ double2 block_sum(double2 v, double2* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    double2 w = lane < warps ? scratch[lane] : make_double2(0.0, 0.0);
    w = warp_sum(w);
    if (lane == 0) scratch[32] = w;
  }
  __syncthreads();
  const double2 total = scratch[32];
  __syncthreads();
  return total;
}

// --- thread-block clusters (sm_90; elsewhere these stand-ins are never reached: the host runs the cluster path only
// where sm_90 code runs) ---------------------------------------------------------------------------------------------

__device__ __forceinline__ unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().block_rank();
#else
  return 0;
#endif
}

__device__ __forceinline__ unsigned cluster_blocks() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().num_blocks();
#else
  return 1;
#endif
}

// Barrier over the cluster's threads, with release/acquire of shared memory across its CTAs.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();
#endif
}

// The address of `p` (a __shared__ variable) in the CTA of cluster rank `rank`.
template <class U>
__device__ __forceinline__ U* cluster_peer(U* p, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(p, static_cast<int>(rank));
#else
  (void)rank;
  return p;
#endif
}

// The cluster's merge of its CTAs' totals, in rank order, returned to every thread of every CTA. `slot` alternates
// between two per exchange: a CTA writes slot k only after the barrier of exchange k - 1, which every CTA reaches only
// after reading exchange k - 2's slots. broadcast: one shared entry.
template <Divergence D>
__device__ Stats cluster_merge(const Stats& mine, double temperature, Stats* slot, Stats* broadcast) {
  if (threadIdx.x == 0) *slot = mine;
  cluster_sync();
  const unsigned blocks = cluster_blocks();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    Stats v = lane < blocks ? *cluster_peer(slot, lane) : empty_stats();
    v = warp_merge<D>(v, temperature);
    if (lane == 0) *broadcast = v;
  }
  __syncthreads();
  const Stats total = *broadcast;
  __syncthreads();
  return total;
}

__device__ double2 cluster_sum(double2 mine, double2* slot, double2* broadcast) {
  if (threadIdx.x == 0) *slot = mine;
  cluster_sync();
  const unsigned blocks = cluster_blocks();
  if (threadIdx.x < 32) {
    const unsigned lane = threadIdx.x;
    double2 v = lane < blocks ? *cluster_peer(slot, lane) : make_double2(0.0, 0.0);
    v = warp_sum(v);
    if (lane == 0) *broadcast = v;
  }
  __syncthreads();
  const double2 total = *broadcast;
  __syncthreads();
  return total;
}

// --- the elements a thread owns ----------------------------------------------------------------------------------

// Columns [c0, c1) of a row as a scalar head [c0, body), `chunks` W-element chunks from body (16-byte aligned when
// W > 1), a scalar tail [tail, c1). mis: the row start's misalignment in elements.
struct Split {
  int c0, c1, body, chunks, tail;
};

template <int W>
__device__ __forceinline__ Split split_columns(int c0, int c1, int mis) {
  Split s;
  s.c0 = c0;
  s.c1 = c1;
  s.body = c0;
  if constexpr (W > 1) {
    const int r = (mis + c0) % W;
    if (r != 0) s.body = min(c1, c0 + (W - r));
  }
  s.chunks = (c1 - s.body) / W;
  s.tail = s.body + s.chunks * W;
  return s;
}

// Calls f(std::integral_constant<int, width>, first column) for each piece this thread owns: head element
// threadIdx.x, tail element threadIdx.x, chunks threadIdx.x + i * blockDim.x. gather_stats owns the same.
template <int W, class F>
__device__ __forceinline__ void for_owned(const Split& sp, F&& f) {
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  if (tid < sp.body - sp.c0) f(std::integral_constant<int, 1>{}, sp.c0 + tid);
  if (tid < sp.c1 - sp.tail) f(std::integral_constant<int, 1>{}, sp.tail + tid);
  for (int k = tid; k < sp.chunks; k += n) f(std::integral_constant<int, W>{}, sp.body + k * W);
}

// Where staged element j lives: stage + (j - c0 + off), off = (c0 + mis) % kVec, so 16-byte chunks stay aligned.
template <class T>
__device__ __forceinline__ int stage_offset(int c0, int mis) {
  return (c0 + mis) % kVec<T>;
}

// Pass A over this thread's elements, staging them when kStage.
template <class T, Divergence D, int W, bool kStage>
__device__ __forceinline__ void gather_stats(const T* s, const T* t, const Split& sp, T* stage_s, T* stage_t,
                                             int off_s, int off_t, float scale, double temperature, Stats& st) {
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  auto one = [&](int j) {
    const T vs = s[j], vt = t[j];
    if constexpr (kStage) {
      stage_s[j - sp.c0 + off_s] = vs;
      stage_t[j - sp.c0 + off_t] = vt;
    }
    const float zs[1] = {to_float(vs)}, zt[1] = {to_float(vt)};
    add_chunk<D, 1>(st, zs, zt, scale, temperature);
  };
  if (tid < sp.body - sp.c0) one(sp.c0 + tid);
  if (tid < sp.c1 - sp.tail) one(sp.tail + tid);
  // Two chunks a step, both loaded before either is used, so each thread keeps four loads in flight.
  for (int k = tid; k < sp.chunks; k += 2 * n) {
    const int j0 = sp.body + k * W, j1 = j0 + n * W;
    const bool two = k + n < sp.chunks;
    const Raw<T, W> rs0 = load_global<T, W>(s + j0), rt0 = load_global<T, W>(t + j0);
    Raw<T, W> rs1{}, rt1{};
    if (two) {
      rs1 = load_global<T, W>(s + j1);
      rt1 = load_global<T, W>(t + j1);
    }
    if constexpr (kStage) {
      store_shared<T, W>(stage_s + (j0 - sp.c0 + off_s), rs0);
      store_shared<T, W>(stage_t + (j0 - sp.c0 + off_t), rt0);
      if (two) {
        store_shared<T, W>(stage_s + (j1 - sp.c0 + off_s), rs1);
        store_shared<T, W>(stage_t + (j1 - sp.c0 + off_t), rt1);
      }
    }
    float zs[W], zt[W];
    unpack<T, W>(rs0, zs);
    unpack<T, W>(rt0, zt);
    add_chunk<D, W>(st, zs, zt, scale, temperature);
    if (two) {
      unpack<T, W>(rs1, zs);
      unpack<T, W>(rt1, zt);
      add_chunk<D, W>(st, zs, zt, scale, temperature);
    }
  }
}

// W elements of one tensor's row from its stage (kShared) or from global memory.
template <class T, int W, bool kShared>
__device__ __forceinline__ void read_chunk(const T* row, const T* stage, int j, int c0, int off, float (&z)[W]) {
  if constexpr (kShared) unpack<T, W>(load_shared<T, W>(stage + (j - c0 + off)), z);
  else unpack<T, W>(load_global<T, W>(row + j), z);
}

// Writes (or adds) W gradient values at g; one 16-byte store when g is aligned for it.
template <class T, int W>
__device__ __forceinline__ void store_gradient(T* g, const float (&v)[W], bool vector_aligned, bool accumulate) {
  if constexpr (W > 1) {
    if (vector_aligned) {
      uint4* const p = reinterpret_cast<uint4*>(g);
      if (accumulate) {
        float old[W], sum[W];
        unpack<T, W>(*p, old);
#pragma unroll
        for (int i = 0; i < W; ++i) sum[i] = old[i] + v[i];
        *p = pack<T, W>(sum);
      } else {
        __stcs(p, pack<T, W>(v));  // written once, never read here: evict first, leave L2 to the logits
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < W; ++i) g[i] = from_float<T>(accumulate ? to_float(g[i]) + v[i] : v[i]);
}

template <class T>
__device__ __forceinline__ void zero_fill(T* g, int c0, int c1) {
  for (int j = c0 + static_cast<int>(threadIdx.x); j < c1; j += static_cast<int>(blockDim.x)) g[j] = from_float<T>(0.0f);
}

// Shared memory of one CTA besides the stage.
struct Scratch {
  Stats stats[33];
  double2 sums[33];
  Stats exchange_stats[2];  // cluster path: this CTA's totals, read by its peers
  double2 exchange_sums[2];
  Stats broadcast_stats;
  double2 broadcast_sums;
};

// Where one CTA stands in the rows: its columns, the cluster exchanges made so far.
struct Place {
  int c0 = 0, c1 = 0;
  unsigned rank = 0;
  unsigned stats_exchanges = 0, sums_exchanges = 0;
};

template <class T, Divergence D, bool kGrad, SoftTargetPath P, int W>
__device__ void process_row(const Params<T>& p, std::int64_t r, const T* s, const T* t, T* g, double c, Place& place,
                            Scratch& scratch, T* stage_s, T* stage_t) {
  constexpr bool kStaged = P != SoftTargetPath::generic;
  constexpr bool kCluster = P == SoftTargetPath::cluster;
  const int c0 = place.c0, c1 = place.c1;
  const int mis_s = misalignment(s), mis_t = misalignment(t);
  const Split sp = split_columns<W>(c0, c1, mis_s);  // W > 1 only when mis_s == mis_t
  const int off_s = stage_offset<T>(c0, mis_s), off_t = stage_offset<T>(c0, mis_t);

  if constexpr (kStaged) __syncthreads();  // the stage's readers of the previous row are done with it
  Stats st = empty_stats();
  gather_stats<T, D, W, kStaged>(s, t, sp, stage_s, stage_t, off_s, off_t, p.log2e_over_t, p.temperature, st);
  st = block_merge<D>(st, p.temperature, scratch.stats);
  if constexpr (kCluster)
    st = cluster_merge<D>(st, p.temperature, &scratch.exchange_stats[place.stats_exchanges++ & 1u],
                          &scratch.broadcast_stats);
  // Uniform over the CTA (and the cluster): every thread holds the same totals. A max of +-inf (a +inf logit, or
  // no finite one) or a sum that is not finite (a NaN logit) flags the row.
  const bool bad = !(isfinite(st.max_s) && isfinite(st.max_t) && isfinite(st.sum_s) && isfinite(st.sum_t));
  const double cross = st.cross * kLn2;
  const double t2 = p.temperature * p.temperature;
  const bool zero_loss = D == Divergence::jensen_shannon && p.degenerate;

  RowConstants k;
  k.os = offset_of(st.max_s);
  k.ot = offset_of(st.max_t);
  k.scale = p.log2e_over_t;
  double loss = 0.0;
  if constexpr (D == Divergence::forward_kl) {
    loss = t2 * (cross / st.sum_t + log(st.sum_s / st.sum_t));
    k.cs = static_cast<float>(c / st.sum_s);
    k.ct = static_cast<float>(c / st.sum_t);
  } else if constexpr (D == Divergence::reverse_kl) {
    loss = t2 * (cross / st.sum_s + log(st.sum_t / st.sum_s));
    k.cs = static_cast<float>(c / st.sum_s);
    k.shift = static_cast<float>(cross / st.sum_s);
  } else {
    if (!zero_loss) {
      k.inv_ss = static_cast<float>(1.0 / st.sum_s);
      k.inv_st = static_cast<float>(1.0 / st.sum_t);
      k.beta = static_cast<float>(p.beta);
      double2 kl = make_double2(0.0, 0.0);  // KL(q || m), KL(p || m)
      for_owned<W>(sp, [&](auto width, int j) {
        constexpr int w = decltype(width)::value;
        float zs[w], zt[w];
        read_chunk<T, w, kStaged>(s, stage_s, j, c0, off_s, zs);
        read_chunk<T, w, kStaged>(t, stage_t, j, c0, off_t, zt);
        float kq = 0.0f, kp = 0.0f;
#pragma unroll
        for (int i = 0; i < w; ++i) {
          const JsdTerms terms = jsd_terms((zs[i] - k.os) * k.scale, (zt[i] - k.ot) * k.scale, k);
          kq += terms.q * terms.lq_m;
          kp += terms.p * terms.lp_m;
        }
        kl.x += kq;
        kl.y += kp;
      });
      kl = block_sum(kl, scratch.sums);
      if constexpr (kCluster)
        kl = cluster_sum(kl, &scratch.exchange_sums[place.sums_exchanges++ & 1u], &scratch.broadcast_sums);
      loss = t2 * (p.beta * kl.y + (1.0 - p.beta) * kl.x);
      k.cj = static_cast<float>(c * (1.0 - p.beta));
      k.kl_qm = static_cast<float>(kl.x);
    }
  }
  if (place.rank == 0 && threadIdx.x == 0) {
    if (bad) atomicOr(p.status, kNonFinite);
    p.losses[r] = bad ? CUDART_NAN : (zero_loss ? 0.0 : loss);
  }

  if constexpr (kGrad) {
    if (zero_loss) {
      if (!p.accumulate) zero_fill(g, c0, c1);
      return;
    }
    const bool vector_aligned = misalignment(g) == mis_s;
    for_owned<W>(sp, [&](auto width, int j) {
      constexpr int w = decltype(width)::value;
      float zs[w], zt[w], v[w];
      read_chunk<T, w, kStaged>(s, stage_s, j, c0, off_s, zs);
      read_chunk<T, w, kStaged>(t, stage_t, j, c0, off_t, zt);
#pragma unroll
      for (int i = 0; i < w; ++i) v[i] = gradient_of<D>(zs[i], zt[i], k);
      store_gradient<T, w>(g + j, v, vector_aligned, p.accumulate);
    });
  }
}

template <class T, Divergence D, bool kGrad, SoftTargetPath P>
__device__ void run_rows(const Params<T>& p) {
  constexpr bool kCluster = P == SoftTargetPath::cluster;
  __shared__ Scratch scratch;
  extern __shared__ uint4 soft_target_stage[];  // staged paths: stage_capacity elements per tensor
  T* const stage_s = reinterpret_cast<T*>(soft_target_stage);
  T* const stage_t = stage_s + p.stage_capacity;

  Place place;
  const unsigned blocks = kCluster ? cluster_blocks() : 1u;
  place.rank = kCluster ? cluster_rank() : 0u;
  const std::int64_t c0 = static_cast<std::int64_t>(place.rank) * p.slice;
  place.c0 = static_cast<int>(c0 < p.cols ? c0 : p.cols);
  place.c1 = static_cast<int>(c0 + p.slice < p.cols ? c0 + p.slice : p.cols);
  const std::int64_t first = blockIdx.x / blocks, step = gridDim.x / blocks;

  double kept = static_cast<double>(p.kept_rows);
  if (p.kept_count != nullptr) kept = static_cast<double>(*p.kept_count);
  double divisor = 1.0;
  if (p.reduction == distill::Reduction::mean) divisor = kept * static_cast<double>(p.cols);
  if (p.reduction == distill::Reduction::batchmean) divisor = kept;
  const double c = p.grad_scale * p.temperature / divisor;  // d(loss)/dz = c * (the bracket in the file comment)

  for (std::int64_t r = first; r < p.rows; r += step) {
    const T* const s = p.student + r * p.stride_s;
    const T* const t = p.teacher + r * p.stride_t;
    T* g = nullptr;
    if constexpr (kGrad) g = p.grad + r * p.stride_g;
    if (p.mask != nullptr && p.mask[r] == 0) {  // absent: not read, loss 0, gradient 0 (untouched when accumulating)
      if constexpr (kGrad)
        if (!p.accumulate) zero_fill(g, place.c0, place.c1);
      if (place.rank == 0 && threadIdx.x == 0) p.losses[r] = 0.0;
      continue;
    }
    if (misalignment(s) == misalignment(t))
      process_row<T, D, kGrad, P, kVec<T>>(p, r, s, t, g, c, place, scratch, stage_s, stage_t);
    else
      process_row<T, D, kGrad, P, 1>(p, r, s, t, g, c, place, scratch, stage_s, stage_t);
  }
  // No CTA may leave while a peer can still read its shared memory.
  if constexpr (kCluster) cluster_sync();
}

template <class T, Divergence D, bool kGrad, SoftTargetPath P>
__global__ void __launch_bounds__(kMaxThreads, kMinBlocksPerSm) soft_target_kernel(const Params<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr bool kClustersHere = true;
#else
  constexpr bool kClustersHere = false;
#endif
  if constexpr (P == SoftTargetPath::cluster && !kClustersHere) {
    return;  // never launched: the host takes the cluster path only where this kernel's sm_90 code runs
  } else {
    run_rows<T, D, kGrad, P>(p);
  }
}

// kept = the mask's nonzero bytes (one block).
template <int Unused = 0>  // a template, so that several translation units may include this header
__global__ void count_kept_kernel(const std::uint8_t* mask, std::int64_t rows, unsigned long long* kept) {
  __shared__ unsigned long long total;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) mine += mask[r] != 0;
  if (mine != 0) atomicAdd(&total, mine);
  __syncthreads();
  if (threadIdx.x == 0) *kept = total;
}

constexpr int kFinishThreads = 256;

// *value = the per-row losses summed in a fixed order (each thread a run of rows, then a tree), divided as the
// reduction says (distill::reduce_rows; none and sum: the plain sum).
template <int Unused = 0>
__global__ void __launch_bounds__(kFinishThreads)
    finish_kernel(const double* losses, std::int64_t rows, const unsigned long long* kept_count,
                  std::int64_t kept_rows, std::int64_t cols, distill::Reduction reduction, double* value) {
  __shared__ double partial[kFinishThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t per = (rows + kFinishThreads - 1) / kFinishThreads;
  const std::int64_t begin = tid * per, end = begin + per < rows ? begin + per : rows;
  double sum = 0.0;
  for (std::int64_t r = begin; r < end; ++r) sum += losses[r];
  partial[tid] = sum;
  __syncthreads();
  for (int half_width = kFinishThreads / 2; half_width > 0; half_width /= 2) {
    if (tid < half_width) partial[tid] += partial[tid + half_width];
    __syncthreads();
  }
  if (tid == 0) {
    const double kept = kept_count != nullptr ? static_cast<double>(*kept_count) : static_cast<double>(kept_rows);
    double divisor = 1.0;
    if (reduction == distill::Reduction::mean) divisor = kept * static_cast<double>(cols);
    if (reduction == distill::Reduction::batchmean) divisor = kept;
    *value = reduction == distill::Reduction::none ? partial[0] : partial[0] / divisor;
  }
}

}  // namespace soft_target
}  // namespace shrink::cuda::kernels
