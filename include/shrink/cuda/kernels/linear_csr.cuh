// CUDA realisation of the CSR SpMM of shrink/linear/csr_cuda.hpp (nvcc only; host-compiled callers use that header):
// the transpose of X into the workspace, the row_dots kernel (small M), the tile kernel (row_split, nnz_split) and the
// staged kernel (Xᵀ streamed through shared memory).
//
// Every kernel computes Yᵀ[n, m] = Σ_j w[n, c_j] · Xᵀ[c_j, m] over the stored values j of row n, in float, then
// out[m, n] = T(act(Yᵀ[n, m] + bias[n])) (the epilogue operation). Xᵀ is [K, ldxt] with ldxt = M rounded up to 8
// elements (zeros past M), so each of its rows starts 16-byte aligned for float, half and bfloat16. Index checks
// (kBadIndex) as the file comment of shrink/linear/csr_cuda.hpp says: offsets clamped into [0, nnz] and made
// non-decreasing, a bad column's product skipped, so no bad index is ever followed.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/convert.cuh"
#include "shrink/cuda/kernels/common/epilogue.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda::kernels {
namespace linear_csr {

constexpr int kWarp = 32;
constexpr int kWarps = 8;  // per CTA, in every kernel
constexpr int kThreads = kWarp * kWarps;
constexpr int kTileRows = 16;  // weight rows per CTA of the tile kernel: 16 consecutive outputs per row of out
constexpr int kStagedRowsPerWarp = 4;
constexpr int kStagedRows = kWarps * kStagedRowsPerWarp;  // weight rows per CTA of the staged kernel
constexpr int kStagedK = 64;                              // rows of Xᵀ per chunk of the staged kernel
constexpr unsigned kFullMask = 0xFFFFFFFFu;

// Elements of T in one 16-byte load.
template <class T>
constexpr int kVector16 = static_cast<int>(16 / sizeof(T));

// Xᵀ's row length for M rows of X: a multiple of 8 elements (16 bytes of half, 32 of float).
inline std::int64_t padded_m(std::int64_t m) { return (m + 7) / 8 * 8; }

template <class T>
__device__ __forceinline__ T zero_value() {
  if constexpr (std::is_same_v<T, float>)
    return 0.0f;
  else
    return T::from_bits(0);
}

// The elements of `Words` 32-bit words read from memory (little-endian: element 0 is the low half of word 0).
template <class T, int Words>
__device__ __forceinline__ void unpack(const unsigned (&words)[Words], float* out) {
#pragma unroll
  for (int i = 0; i < Words; ++i) {
    if constexpr (std::is_same_v<T, float>) {
      out[i] = __uint_as_float(words[i]);
    } else if constexpr (std::is_same_v<T, half>) {
      out[2 * i] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] & 0xFFFFu)));
      out[2 * i + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(words[i] >> 16)));
    } else {
      out[2 * i] = __uint_as_float(words[i] << 16);
      out[2 * i + 1] = __uint_as_float(words[i] & 0xFFFF0000u);
    }
  }
}

// Vec consecutive elements at p (aligned to their Vec · sizeof(T) = 8 or 16 bytes), widened to float.
template <class T, int Vec>
__device__ __forceinline__ void load_widened(const T* p, float (&out)[Vec]) {
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));
  static_assert(kBytes == 8 || kBytes == 16, "8- or 16-byte loads");
  if constexpr (kBytes == 16) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
    const unsigned words[4] = {q.x, q.y, q.z, q.w};
    unpack<T, 4>(words, out);
  } else {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    const unsigned words[2] = {q.x, q.y};
    unpack<T, 2>(words, out);
  }
}

// xt[k, m] = x[m, k] for m < M and 0 for M <= m < ldxt: X [M, K] row-major into Xᵀ [K, ldxt], by 32 × 32 tiles through
// shared memory (reads coalesced along k, writes along m). Block (32, 8); a grid-stride loop over the tiles.
template <class T>
__global__ void __launch_bounds__(256) transpose_kernel(const T* __restrict__ x, std::int64_t m_total,
                                                        std::int64_t k_total, T* __restrict__ xt, std::int64_t ldxt) {
  __shared__ T tile[32][33];
  const std::int64_t tiles_m = (ldxt + 31) / 32, tiles_k = (k_total + 31) / 32;
  for (std::int64_t t = blockIdx.x; t < tiles_m * tiles_k; t += gridDim.x) {  // uniform over the block
    const std::int64_t m0 = (t % tiles_m) * 32, k0 = (t / tiles_m) * 32;
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      const std::int64_t m = m0 + i, k = k0 + threadIdx.x;
      tile[i][threadIdx.x] = m < m_total && k < k_total ? x[m * k_total + k] : zero_value<T>();
    }
    __syncthreads();
    for (int i = threadIdx.y; i < 32; i += blockDim.y) {
      const std::int64_t k = k0 + i, m = m0 + threadIdx.x;
      if (k < k_total && m < ldxt) xt[k * ldxt + m] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the next tile overwrites `tile`
  }
}

// Row n's stored values [row_offsets[n], row_offsets[n + 1]), clamped into [0, nnz] and non-empty only when ordered;
// sets `bad` for offsets out of [0, nnz] or decreasing, a first offset other than 0 or a last other than nnz.
__device__ __forceinline__ void row_range(const std::int32_t* __restrict__ row_offsets, std::int64_t n,
                                          std::int64_t n_total, std::int64_t nnz, std::int64_t& begin,
                                          std::int64_t& end, bool& bad) {
  const std::int64_t a = row_offsets[n], b = row_offsets[n + 1];
  bad |= a < 0 || b < a || b > nnz || (n == 0 && a != 0) || (n == n_total - 1 && b != nnz);
  begin = a < 0 ? 0 : (a > nnz ? nnz : a);
  end = b < begin ? begin : (b > nnz ? nnz : b);
}

// row_dots: one warp per weight row n. Lane l takes the row's stored values j = begin + l, begin + l + 32, ...; each
// lane accumulates acc[m] += w_j · Xᵀ[c_j, m] for every m < M (Vectors 16-byte loads of Xᵀ's row c_j; Vectors = 0:
// M = 1, `xt` is x itself and one element is read). Lane sums then meet in a butterfly: partners add the same two
// values, so every lane ends with the same bits; lane m writes out[m, n].
// (No __launch_bounds__ on the product kernels: with it, nvcc 13's ptxas caps them at 48 registers and spills.)
template <class T, int Vectors>
__global__ void row_dots_kernel(const T* __restrict__ xt, std::int64_t ldxt, std::int64_t m_total, std::int64_t k_total,
                                std::int64_t n_total, const std::int32_t* __restrict__ row_offsets,
                                const std::int32_t* __restrict__ column_indices, const T* __restrict__ values,
                                std::int64_t nnz, EpilogueOp op, T* __restrict__ out, int* status) {
  constexpr int kVec = kVector16<T>;
  constexpr int kAcc = Vectors == 0 ? 1 : Vectors * kVec;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * kWarps;
  bool bad = false;
  EpilogueFlags flags;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarp; n < n_total;
       n += warps_total) {  // uniform over the warp
    std::int64_t begin = 0, end = 0;
    row_range(row_offsets, n, n_total, nnz, begin, end, bad);
    float acc[kAcc];
#pragma unroll
    for (int e = 0; e < kAcc; ++e) acc[e] = 0.0f;
    int last_column = -1;  // the column of the previous step's lane 31 (every step but the last is full)
    for (std::int64_t j0 = begin; j0 < end; j0 += kWarp) {
      const std::int64_t j = j0 + lane;
      const bool live = j < end;
      const int c = live ? column_indices[j] : 0;
      const float w = live ? to_float(values[j]) : 0.0f;
      int before = __shfl_up_sync(kFullMask, c, 1);
      if (lane == 0) before = last_column;
      last_column = __shfl_sync(kFullMask, c, kWarp - 1);
      const bool ok = c > before && c < k_total;  // before >= -1, so c >= 0
      if (live && !ok) bad = true;
      if (live && ok) {
        if constexpr (Vectors == 0) {
          acc[0] += w * to_float(xt[c]);
        } else {
          const T* row = xt + static_cast<std::int64_t>(c) * ldxt;
#pragma unroll
          for (int q = 0; q < Vectors; ++q) {
            float f[kVec];
            load_widened<T, kVec>(row + q * kVec, f);
#pragma unroll
            for (int e = 0; e < kVec; ++e) acc[q * kVec + e] += w * f[e];
          }
        }
      }
    }
#pragma unroll
    for (int e = 0; e < kAcc; ++e)
#pragma unroll
      for (int offset = kWarp / 2; offset > 0; offset /= 2) acc[e] += __shfl_xor_sync(kFullMask, acc[e], offset);
#pragma unroll
    for (int e = 0; e < kAcc; ++e)
      if (lane == e && e < m_total) out[e * n_total + n] = checked_output<T>(op, acc[e], e, n, flags);
  }
  if (bad) atomicOr(status, kBadIndex);
  flags.report(status);
}

// The tile kernel's shared memory: Yᵀ of the CTA's rows (padded by one column against bank conflicts when read
// transposed), one carry per warp, the rows' offsets, each warp's staged (value, column) pairs.
template <int TileM>
struct TileShared {
  float tile[kTileRows][TileM + 1];
  float carry[kWarps][TileM];   // a warp's partial sum of a row that an earlier warp started
  int carry_row[kWarps];        // that row (local index), or -1
  int offsets[kTileRows + 1];   // row_offsets[n0 .. n0 + rows], clamped into [0, nnz] and non-decreasing
  float2 pairs[kWarps][kWarp];  // each warp's current step: (value, column bits) of up to 32 stored values
};

// The tile kernel: a CTA owns rows n0 .. n0 + 15 of W and, for each tile of M it visits (blockIdx.y, then every
// gridDim.y-th), the columns m0 .. m0 + 32 · Vec − 1; lane l of every warp owns the Vec columns from m0 + l · Vec.
// The CTA's stored values are contiguous in the CSR: [offsets[0], offsets[rows]). Warp w takes the range
//   BalanceNonzeros (nnz_split): [base + total · w / 8, base + total · (w + 1) / 8), whatever the row lengths;
//   otherwise (row_split):        the values of its rows [rows · w / 8, rows · (w + 1) / 8).
// It walks its range row segment by row segment; for each stored value (staged 32 at a time in shared memory, read
// back as a broadcast) every lane adds w · Xᵀ[c, its columns] (one 8- or 16-byte load) into Vec registers. A
// segment's sums go to the tile row when the warp holds the row's first stored value (one warp per row: the owner),
// otherwise (only a warp's first segment, the rest of a row an earlier warp began) to the warp's carry. After a
// barrier, carries are added to their rows in warp order, so each row's sum has one fixed order: deterministic.
// Rows without stored values keep the tile's zeros. The tile is then written transposed: out[m, n0 .. n0 + 15].
template <class T, int Vec, bool BalanceNonzeros>
__global__ void tile_kernel(const T* __restrict__ xt, std::int64_t ldxt, std::int64_t m_total, std::int64_t k_total,
                            std::int64_t n_total, const std::int32_t* __restrict__ row_offsets,
                            const std::int32_t* __restrict__ column_indices, const T* __restrict__ values,
                            std::int64_t nnz, EpilogueOp op, T* __restrict__ out, int* status) {
  constexpr int kTileM = kWarp * Vec;
  constexpr int kBatch = 4;  // stored values whose Xᵀ loads are issued together
  __shared__ TileShared<kTileM> s;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * kTileRows;
  const int rows = static_cast<int>(n_total - n0 < kTileRows ? n_total - n0 : kTileRows);
  bool bad = false;
  EpilogueFlags flags;

  if (threadIdx.x == 0) {  // the rows' offsets, checked, clamped into [previous, nnz]
    std::int64_t previous = 0;
    for (int r = 0; r <= rows; ++r) {
      const std::int64_t raw = row_offsets[n0 + r];
      bad |= raw < previous || raw > nnz || (n0 + r == 0 && raw != 0) || (n0 + r == n_total && raw != nnz);
      previous = raw < previous ? previous : (raw > nnz ? nnz : raw);
      s.offsets[r] = static_cast<int>(previous);
    }
  }
  __syncthreads();

  const std::int64_t base = s.offsets[0], total = s.offsets[rows] - base;
  std::int64_t a, b;  // this warp's stored values [a, b)
  if constexpr (BalanceNonzeros) {
    a = base + total * warp / kWarps;
    b = base + total * (warp + 1) / kWarps;
  } else {
    a = s.offsets[rows * warp / kWarps];
    b = s.offsets[rows * (warp + 1) / kWarps];
  }
  int first_row = 0;  // the last row starting at or before a: the row holding a when a < b
  for (int r = 1; r < rows; ++r)
    if (s.offsets[r] <= a) first_row = r;

  const std::int64_t m_tiles = (m_total + kTileM - 1) / kTileM;
  for (std::int64_t m_tile = blockIdx.y; m_tile < m_tiles; m_tile += gridDim.y) {  // uniform over the CTA
    const std::int64_t m0 = m_tile * kTileM;
    for (int i = threadIdx.x; i < kTileRows * (kTileM + 1); i += kThreads) (&s.tile[0][0])[i] = 0.0f;
    if (lane == 0) s.carry_row[warp] = -1;
    __syncthreads();

    const std::int64_t m_lane = m0 + static_cast<std::int64_t>(lane) * Vec;
    // ldxt is a multiple of Vec: a lane's vector lies wholly inside Xᵀ's row or wholly past it.
    const T* xt_lane = xt + (m_lane < ldxt ? m_lane : 0);
    int row = first_row;
    bool owner = s.offsets[row] == a;
    for (std::int64_t j = a; j < b;) {  // one row segment per pass; uniform over the warp
      const std::int64_t segment_end = s.offsets[row + 1] < b ? s.offsets[row + 1] : b;
      float acc[Vec];
#pragma unroll
      for (int e = 0; e < Vec; ++e) acc[e] = 0.0f;
      // The column before the segment's first value within its row; -1 at the row's start.
      int last_column = j > s.offsets[row] ? column_indices[j - 1] : -1;
      for (std::int64_t j0 = j; j0 < segment_end; j0 += kWarp) {
        const int count = static_cast<int>(segment_end - j0 < kWarp ? segment_end - j0 : kWarp);
        const bool live = lane < count;
        const int c = live ? column_indices[j0 + lane] : 0;
        const float w = live ? to_float(values[j0 + lane]) : 0.0f;
        int before = __shfl_up_sync(kFullMask, c, 1);
        if (lane == 0) before = last_column;
        last_column = __shfl_sync(kFullMask, c, count - 1);
        const bool ok = c > before && c < k_total;  // before >= -1, so c >= 0
        if (live && !ok) bad = true;
        const unsigned good = __ballot_sync(kFullMask, live && ok);
        const unsigned all = count == kWarp ? kFullMask : (1u << count) - 1u;
        // The step's (value, column) pairs, staged in the warp's slot: each product then starts with one broadcast
        // shared load. The first __syncwarp waits until every lane has read the previous step's pairs.
        __syncwarp();
        s.pairs[warp][lane] = make_float2(w, __int_as_float(c));
        __syncwarp();
        // Lanes past Xᵀ's row (m >= ldxt, never written out) read columns 0 .. Vec - 1 of the same row instead, so
        // that no load waits behind a branch.
        const auto add = [&](int i) {
          const float2 pair = s.pairs[warp][i];
          float f[Vec];
          load_widened<T, Vec>(xt_lane + static_cast<std::int64_t>(__float_as_int(pair.y)) * ldxt, f);
#pragma unroll
          for (int e = 0; e < Vec; ++e) acc[e] += pair.x * f[e];
        };
        if (good == all) {
          int i = 0;
          for (; i + kBatch <= count; i += kBatch) {  // kBatch loads in flight, then their products in order
            float wb[kBatch], f[kBatch][Vec];
#pragma unroll
            for (int u = 0; u < kBatch; ++u) {
              const float2 pair = s.pairs[warp][i + u];
              wb[u] = pair.x;
              load_widened<T, Vec>(xt_lane + static_cast<std::int64_t>(__float_as_int(pair.y)) * ldxt, f[u]);
            }
#pragma unroll
            for (int u = 0; u < kBatch; ++u)
#pragma unroll
              for (int e = 0; e < Vec; ++e) acc[e] += wb[u] * f[u][e];
          }
          for (; i < count; ++i) add(i);
        } else {  // a bad index in the step: skip its product (never read Xᵀ at it)
          for (int i = 0; i < count; ++i)
            if ((good >> i) & 1u) add(i);
        }
      }
      float* destination = owner ? &s.tile[row][lane * Vec] : &s.carry[warp][lane * Vec];
#pragma unroll
      for (int e = 0; e < Vec; ++e) destination[e] = acc[e];
      if (!owner && lane == 0) s.carry_row[warp] = row;
      j = segment_end;
      if (j < b) {  // the row holding j: past the rows without stored values (they keep the tile's zeros)
        ++row;
        while (s.offsets[row + 1] <= j) ++row;
        owner = true;  // offsets[row] == j: the warp holds the row's first stored value
      }
    }
    __syncthreads();
    for (int column = threadIdx.x; column < kTileM; column += kThreads)
      for (int w = 0; w < kWarps; ++w) {  // warp order: the one order each row's sum is added in
        const int r = s.carry_row[w];
        if (r >= 0) s.tile[r][column] += s.carry[w][column];
      }
    __syncthreads();
    for (int e = threadIdx.x; e < kTileRows * kTileM; e += kThreads) {
      const int r = e % kTileRows, i = e / kTileRows;  // consecutive threads: consecutive n of one row of out
      const std::int64_t m = m0 + i, n = n0 + r;
      if (r < rows && m < m_total) out[m * n_total + n] = checked_output<T>(op, s.tile[r][i], m, n, flags);
    }
    __syncthreads();  // the next tile clears s.tile and s.carry_row
  }
  if (bad) atomicOr(status, kBadIndex);
  flags.report(status);
}

// The staged kernel's shared memory: a chunk of Xᵀ (later reused for the transposed write of Yᵀ) and each warp's
// staged (value, column) pairs.
template <class T, int Vec>
struct StagedShared {
  static constexpr int kTileM = kWarp * Vec;
  union alignas(16) Chunk {
    T xt[kStagedK][kTileM];               // Xᵀ[k0 + kk, m0 .. m0 + kTileM)
    float tile[kStagedRows][kTileM + 1];  // Yᵀ of the CTA's rows, padded against bank conflicts when read transposed
  } chunk;
  float2 pairs[kWarps][kWarp];
};

// The staged kernel (LinearCsrPath::staged): a CTA owns rows n0 .. n0 + 31 of W (warp w the 4 rows n0 + 4w .. n0 + 4w +
// 3) and a tile of M as in the tile kernel. It streams Xᵀ[:, tile] through shared memory, 64 rows of K at a time
// (16-byte loads by the whole CTA, zeros past K and past ldxt); after each chunk arrives, every warp takes, for each of
// its rows, the stored values whose columns fall in the chunk (the next ones in the row: columns increase), staged 32
// at a time, and adds w · chunk[c − k0][its columns]. Each Xᵀ element then crosses from L2 once per CTA, whatever the
// sparsity, and is read from shared memory by 32 · density products on average: worth it while the weight is dense
// enough (automatic: density >= kCsrStagedMinDensity). Each row's sum runs in column order: deterministic. Columns out
// of order or out of range are skipped and flagged (a column below k0 or not above its predecessor, or at or past K;
// one past every chunk is left over and flagged at the end).
template <class T, int Vec>
__global__ void staged_kernel(const T* __restrict__ xt, std::int64_t ldxt, std::int64_t m_total, std::int64_t k_total,
                              std::int64_t n_total, const std::int32_t* __restrict__ row_offsets,
                              const std::int32_t* __restrict__ column_indices, const T* __restrict__ values,
                              std::int64_t nnz, EpilogueOp op, T* __restrict__ out, int* status) {
  using Shared = StagedShared<T, Vec>;
  constexpr int kTileM = Shared::kTileM;
  constexpr int kRows = kStagedRowsPerWarp;
  constexpr int kBytes = Vec * static_cast<int>(sizeof(T));  // one lane's vector: 8 or 16 bytes
  using Vector = std::conditional_t<kBytes == 16, uint4, uint2>;
  constexpr int kNone = 0x7FFFFFFF;  // "no next column": the row is used up
  constexpr int kBatch = 4;          // stored values whose chunk reads are issued together
  __shared__ Shared s;
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.x) * kStagedRows;
  const int rows = static_cast<int>(n_total - n0 < kStagedRows ? n_total - n0 : kStagedRows);
  bool bad = false;
  EpilogueFlags flags;

  const std::int64_t m_tiles = (m_total + kTileM - 1) / kTileM;
  for (std::int64_t m_tile = blockIdx.y; m_tile < m_tiles; m_tile += gridDim.y) {  // uniform over the CTA
    const std::int64_t m0 = m_tile * kTileM;
    // This warp's rows: the stored values still to take [cursor, end), the column at cursor, the last column taken.
    std::int64_t cursor[kRows], end[kRows];
    int next[kRows], last[kRows];
    float acc[kRows][Vec];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const std::int64_t n = n0 + warp * kRows + r;
      cursor[r] = end[r] = 0;
      if (n < n_total) row_range(row_offsets, n, n_total, nnz, cursor[r], end[r], bad);
      next[r] = cursor[r] < end[r] ? column_indices[cursor[r]] : kNone;
      last[r] = -1;
#pragma unroll
      for (int e = 0; e < Vec; ++e) acc[r][e] = 0.0f;
    }

    for (std::int64_t k0 = 0; k0 < k_total; k0 += kStagedK) {
      __syncthreads();  // every warp is done with the previous chunk (or the previous tile's write)
      for (int v = threadIdx.x; v < kStagedK * kWarp; v += kThreads) {
        const int kk = v / kWarp, part = v % kWarp;
        const std::int64_t k = k0 + kk, m = m0 + static_cast<std::int64_t>(part) * Vec;
        Vector value{};
        if (k < k_total && m < ldxt) value = __ldg(reinterpret_cast<const Vector*>(xt + k * ldxt + m));
        *reinterpret_cast<Vector*>(&s.chunk.xt[kk][part * Vec]) = value;
      }
      __syncthreads();
      const std::int64_t k_end = k0 + kStagedK;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        while (next[r] < k_end) {  // uniform over the warp; a negative (bad) column is taken and flagged
          const std::int64_t j = cursor[r] + lane;
          const bool live = j < end[r];
          const int c = live ? column_indices[j] : 0;
          const float w = live ? to_float(values[j]) : 0.0f;
          // The leading lanes whose columns lie below k_end: this chunk's share of the step (at least lane 0's).
          const unsigned below = __ballot_sync(kFullMask, live && c < k_end);
          const int count = below == kFullMask ? kWarp : __ffs(~below) - 1;
          if (count == 0) break;  // only when K is within 64 of INT32_MAX and the row is used up
          int before = __shfl_up_sync(kFullMask, c, 1);
          if (lane == 0) before = last[r];
          last[r] = __shfl_sync(kFullMask, c, count - 1);
          const bool ok = c > before && c >= k0 && c < k_total;
          if (lane < count && !ok) bad = true;
          const unsigned good = __ballot_sync(kFullMask, lane < count && ok);
          const unsigned lives = __ballot_sync(kFullMask, live);
          const int after = __shfl_sync(kFullMask, c, count & (kWarp - 1));
          __syncwarp();  // every lane has read the previous step's pairs
          s.pairs[warp][lane] = make_float2(w, __int_as_float(c));
          __syncwarp();
          const auto chunk_row = [&](int column, float(&f)[Vec]) {
            const Vector raw = *reinterpret_cast<const Vector*>(&s.chunk.xt[column - k0][lane * Vec]);
            if constexpr (kBytes == 16) {
              const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
              unpack<T, 4>(words, f);
            } else {
              const unsigned words[2] = {raw.x, raw.y};
              unpack<T, 2>(words, f);
            }
          };
          const auto add = [&](int i) {
            const float2 pair = s.pairs[warp][i];
            float f[Vec];
            chunk_row(__float_as_int(pair.y), f);
#pragma unroll
            for (int e = 0; e < Vec; ++e) acc[r][e] += pair.x * f[e];
          };
          if (good == (count == kWarp ? kFullMask : (1u << count) - 1u)) {
            int i = 0;
            for (; i + kBatch <= count; i += kBatch) {  // kBatch shared loads in flight, then their products in order
              float wb[kBatch], f[kBatch][Vec];
#pragma unroll
              for (int u = 0; u < kBatch; ++u) {
                const float2 pair = s.pairs[warp][i + u];
                wb[u] = pair.x;
                chunk_row(__float_as_int(pair.y), f[u]);
              }
#pragma unroll
              for (int u = 0; u < kBatch; ++u)
#pragma unroll
                for (int e = 0; e < Vec; ++e) acc[r][e] += wb[u] * f[u][e];
            }
            for (; i < count; ++i) add(i);
          } else {  // a bad column in the step: skip its product (never read the chunk at it)
            for (int i = 0; i < count; ++i)
              if ((good >> i) & 1u) add(i);
          }
          cursor[r] += count;
          // The column now at cursor: lane `count` of this step when it was live; a full step reads it anew.
          if (count == kWarp)
            next[r] = cursor[r] < end[r] ? column_indices[cursor[r]] : kNone;
          else
            next[r] = (lives >> count) & 1u ? after : kNone;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      if (cursor[r] != end[r]) bad = true;  // stored values with columns at or past K (never taken)

    __syncthreads();  // the chunk becomes the tile
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int e = 0; e < Vec; ++e) s.chunk.tile[warp * kRows + r][lane * Vec + e] = acc[r][e];
    __syncthreads();
    for (int e = threadIdx.x; e < kStagedRows * kTileM; e += kThreads) {
      const int r = e % kStagedRows, i = e / kStagedRows;  // consecutive threads: consecutive n of one row of out
      const std::int64_t m = m0 + i, n = n0 + r;
      if (r < rows && m < m_total) out[m * n_total + n] = checked_output<T>(op, s.chunk.tile[r][i], m, n, flags);
    }
  }
  if (bad) atomicOr(status, kBadIndex);
  flags.report(status);
}

// The launches, on the current device.
template <class T>
void transpose(const T* x, std::int64_t m_total, std::int64_t k_total, T* xt, std::int64_t ldxt, cudaStream_t stream) {
  const std::int64_t tiles = ((ldxt + 31) / 32) * ((k_total + 31) / 32);
  transpose_kernel<T><<<grid_blocks(tiles * 256, 256), dim3(32, 8), 0, stream>>>(x, m_total, k_total, xt, ldxt);
  SHRINK_CUDA_CHECK_LAUNCH(transpose_kernel);
}

// Operands shared by the product kernels (device pointers).
template <class T>
struct Operands {
  const T* xt;
  std::int64_t ldxt, m_total, k_total, n_total;
  const std::int32_t* row_offsets;
  const std::int32_t* column_indices;
  const T* values;
  std::int64_t nnz;
  EpilogueOp op;
  T* out;
  int* status;
};

template <class T, int Vectors>
void launch_row_dots(const Operands<T>& o, cudaStream_t stream) {
  const std::int64_t blocks = (o.n_total + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(blocks < 0x7FFFFFFF ? blocks : 0x7FFFFFFF);
  row_dots_kernel<T, Vectors><<<grid, kThreads, 0, stream>>>(o.xt, o.ldxt, o.m_total, o.k_total, o.n_total,
                                                             o.row_offsets, o.column_indices, o.values, o.nnz, o.op,
                                                             o.out, o.status);
  SHRINK_CUDA_CHECK_LAUNCH(row_dots_kernel);
}

// row_dots for M <= 16: Vectors 16-byte loads per stored value cover M; x itself (ldxt 1) for M = 1.
template <class T>
void row_dots(const Operands<T>& o, cudaStream_t stream) {
  constexpr int kVec = kVector16<T>;
  const int vectors = o.ldxt == 1 ? 0 : static_cast<int>((o.m_total + kVec - 1) / kVec);
  switch (vectors) {
    case 0: launch_row_dots<T, 0>(o, stream); break;
    case 1: launch_row_dots<T, 1>(o, stream); break;
    case 2: launch_row_dots<T, 2>(o, stream); break;
    default:
      if constexpr (kVec == 4) {  // float: up to 4 vectors
        if (vectors == 3)
          launch_row_dots<T, 3>(o, stream);
        else
          launch_row_dots<T, 4>(o, stream);
      }
      break;
  }
}

template <class T, int Vec, bool BalanceNonzeros>
void launch_tile(const Operands<T>& o, cudaStream_t stream) {
  constexpr int kTileM = kWarp * Vec;
  const std::int64_t m_tiles = (o.m_total + kTileM - 1) / kTileM;
  const dim3 grid(static_cast<unsigned>((o.n_total + kTileRows - 1) / kTileRows),
                  static_cast<unsigned>(m_tiles < 65535 ? m_tiles : 65535));
  tile_kernel<T, Vec, BalanceNonzeros><<<grid, kThreads, 0, stream>>>(o.xt, o.ldxt, o.m_total, o.k_total, o.n_total,
                                                                      o.row_offsets, o.column_indices, o.values, o.nnz,
                                                                      o.op, o.out, o.status);
  SHRINK_CUDA_CHECK_LAUNCH(tile_kernel);
}

// The tile kernel with 8-byte lanes while one tile of them covers M (fewer idle lanes), 16-byte lanes above.
template <class T, bool BalanceNonzeros>
void tile(const Operands<T>& o, cudaStream_t stream) {
  constexpr int kVec8 = static_cast<int>(8 / sizeof(T));
  if (o.m_total <= kWarp * kVec8)
    launch_tile<T, kVec8, BalanceNonzeros>(o, stream);
  else
    launch_tile<T, kVector16<T>, BalanceNonzeros>(o, stream);
}

template <class T, int Vec>
void launch_staged(const Operands<T>& o, cudaStream_t stream) {
  constexpr int kTileM = kWarp * Vec;
  const std::int64_t m_tiles = (o.m_total + kTileM - 1) / kTileM;
  const dim3 grid(static_cast<unsigned>((o.n_total + kStagedRows - 1) / kStagedRows),
                  static_cast<unsigned>(m_tiles < 65535 ? m_tiles : 65535));
  staged_kernel<T, Vec><<<grid, kThreads, 0, stream>>>(o.xt, o.ldxt, o.m_total, o.k_total, o.n_total, o.row_offsets,
                                                       o.column_indices, o.values, o.nnz, o.op, o.out, o.status);
  SHRINK_CUDA_CHECK_LAUNCH(staged_kernel);
}

// The staged kernel, with 8- or 16-byte lanes as the tile kernel.
template <class T>
void staged(const Operands<T>& o, cudaStream_t stream) {
  constexpr int kVec8 = static_cast<int>(8 / sizeof(T));
  if (o.m_total <= kWarp * kVec8)
    launch_staged<T, kVec8>(o, stream);
  else
    launch_staged<T, kVector16<T>>(o, stream);
}

}  // namespace linear_csr
}  // namespace shrink::cuda::kernels
