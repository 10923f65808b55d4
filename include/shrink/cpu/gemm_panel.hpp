// The panel driver: every float-accumulating Linear product whose weight can be read as panels of 32 outputs
// (float, half, bfloat16 and int8 panels here; int4 in cpu/gemm_int4_panel.hpp; N:M expanded in cpu/nm_product.hpp)
// runs Y[M, N] = X[M, K] · W[N, K]ᵀ through gemm_panel_source, which alone chooses the SIMD level; arithmetic in float
// with one rounding per multiply-add (FMA).
//
//   AVX-512  tiles of up to 12 rows of X × 32 outputs (24 accumulators): per k, the panel's 32 values are loaded
//            (and converted) once, each X value broadcast and multiplied into both halves.
//   AVX2     tiles of up to 3 rows × 32 outputs (12 accumulators of 16 registers).
//   other    (scalar / SSE2 levels, other CPUs) Eigen's product with each panel converted to float.
// With few rows (48 with AVX-512, 3 with AVX2) a weight that stores its panels (PackedWeight) is streamed panel by
// panel, converted in registers: the weight is read from memory once, in its compact type (what decides the speed of
// a product with few rows: it is memory-bound), and from L2 by the later row tiles.
// With more rows, or a weight made into floats block by block (int4, N:M), K is cut in blocks of 256: a block of each
// panel is made once into a float buffer kept in L1 and every row tile of X passes over it, the partial sums staying
// in the output (L2) across blocks of 512 outputs, while the next block is prefetched.
#pragma once

#include <Eigen/Core>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/config.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/cast.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/packed_weight.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/cpu/widening_loads.hpp"

namespace shrink::cpu {

inline constexpr int kPanelRowsAvx512 = 12;
inline constexpr int kPanelRowsAvx2 = 3;
inline constexpr std::int64_t kPanelBlockK = 256;  // panel block: 256 × 32 floats = 32 KB, kept in L1
inline constexpr std::int64_t kPanelBlockN = 512;  // outputs whose partial sums stay in L2 across k blocks
inline constexpr std::int64_t kPrefetchRows = 32;  // panel rows (k) a streaming kernel prefetches ahead
inline constexpr std::int64_t kDirectTiles = 4;    // row tiles that stream whole panels (a panel stays in L2)

// A panel value as float, one element (the Eigen path and tails).
inline float panel_value(float v) { return v; }
inline float panel_value(half v) { return static_cast<float>(v); }
inline float panel_value(bfloat16 v) { return static_cast<float>(v); }
inline float panel_value(std::int8_t v) { return static_cast<float>(v); }

// Converts count panel values to floats.
template <class T>
void panel_to_float(const T* src, float* dst, std::int64_t count) {
  if constexpr (std::is_same<T, float>::value) {
    std::copy(src, src + count, dst);
  } else if constexpr (std::is_same<T, half>::value) {
    half_to_float(src, dst, count);
  } else if constexpr (std::is_same<T, bfloat16>::value) {
    bfloat16_to_float(src, dst, count);
  } else {
    for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// ---- AVX-512 --------------------------------------------------------------------------------------------------
// y[i, 0 .. valid) (+)= Σ_k x[i, k] · panel[k, 0 .. valid) for i < MR; the panel row stride is 32.
template <int MR, class T, bool kStream = false>
SHRINK_TARGET_AVX512 void panel_tile_avx512(const float* x, std::int64_t ldx, const T* panel, std::int64_t k_count,
                                            float* y, std::int64_t ldy, int valid, bool accumulate) {
  __m512 c[static_cast<std::size_t>(MR)][2];
  for (int i = 0; i < MR; ++i) c[i][0] = c[i][1] = _mm512_setzero_ps();
  for (std::int64_t k = 0; k < k_count; ++k) {
    // Streaming a panel from memory: ask for the panel row kPrefetchRows ahead (prefetches never fault).
    if (kStream) _mm_prefetch(reinterpret_cast<const char*>(panel + (k + kPrefetchRows) * kPanelWidth), _MM_HINT_T0);
    if (kStream && sizeof(T) == 4)
      _mm_prefetch(reinterpret_cast<const char*>(panel + (k + kPrefetchRows) * kPanelWidth) + 64, _MM_HINT_T0);
    const __m512 b0 = detail::load16(panel + k * kPanelWidth), b1 = detail::load16(panel + k * kPanelWidth + 16);
    for (int i = 0; i < MR; ++i) {
      const __m512 a = _mm512_set1_ps(x[i * ldx + k]);
      c[i][0] = _mm512_fmadd_ps(a, b0, c[i][0]);
      c[i][1] = _mm512_fmadd_ps(a, b1, c[i][1]);
    }
  }
  const auto m0 = static_cast<__mmask16>(valid >= 16 ? 0xFFFFu : (1u << valid) - 1);
  const auto m1 = static_cast<__mmask16>(valid >= 32 ? 0xFFFFu : valid <= 16 ? 0u : (1u << (valid - 16)) - 1);
  for (int i = 0; i < MR; ++i) {
    float* row = y + i * ldy;
    if (accumulate) {
      c[i][0] = _mm512_add_ps(c[i][0], _mm512_maskz_loadu_ps(m0, row));
      c[i][1] = _mm512_add_ps(c[i][1], _mm512_maskz_loadu_ps(m1, row + 16));
    }
    _mm512_mask_storeu_ps(row, m0, c[i][0]);
    _mm512_mask_storeu_ps(row + 16, m1, c[i][1]);
  }
}

// ---- AVX2 -----------------------------------------------------------------------------------------------------
// y[i, 0 .. valid) (+)= the accumulators c[i][0 .. 4) of a tile of MR rows × 32 outputs.
template <int MR>
SHRINK_TARGET_AVX2 SHRINK_FORCE_INLINE void store_tile_avx2(const __m256 (&c)[static_cast<std::size_t>(MR)][4],
                                                            float* y, std::int64_t ldy, int valid, bool accumulate) {
#pragma GCC unroll 3
  for (int i = 0; i < MR; ++i) {
    float* row = y + i * ldy;
    if (valid == kPanelWidth) {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
        _mm256_storeu_ps(row + 8 * v, accumulate ? _mm256_add_ps(c[i][v], _mm256_loadu_ps(row + 8 * v)) : c[i][v]);
    } else {
      alignas(32) float lanes[kPanelWidth];
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) _mm256_store_ps(lanes + 8 * v, c[i][v]);
      for (int j = 0; j < valid; ++j) row[j] = accumulate ? row[j] + lanes[j] : lanes[j];
    }
  }
}

// y[i, 0 .. 32) (+)= Σ_k x[i, k] · row_k for i < MR ≤ 3 over k_count panel rows, each row's 32 floats made by
// rows.next(b) (b[v]: outputs 8v .. 8v + 7): 3 rows × a whole panel (12 accumulators of 16 registers; every byte of a
// panel row's cache lines used as they arrive, which two passes over halves of 16 did not). The loops over rows and
// registers are unrolled so that the accumulators stay in registers (GCC otherwise stores them back to the stack on
// every k step, halving the speed).
template <int MR, class Rows>
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void tile_avx2(const float* x, std::int64_t ldx, Rows& rows,
                                                               std::int64_t k_count, float* y, std::int64_t ldy,
                                                               int valid, bool accumulate) {
  static_assert(MR >= 1 && MR <= 3, "3 rows of 4 accumulators, of 16 registers");
  __m256 c[static_cast<std::size_t>(MR)][4];
#pragma GCC unroll 3
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) c[i][v] = _mm256_setzero_ps();
  for (std::int64_t k = 0; k < k_count; ++k) {
    __m256 b[4];
    rows.next(b);
#pragma GCC unroll 3
    for (int i = 0; i < MR; ++i) {
      const __m256 a = _mm256_broadcast_ss(x + i * ldx + k);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) c[i][v] = _mm256_fmadd_ps(a, b[v], c[i][v]);
    }
  }
  store_tile_avx2<MR>(c, y, ldy, valid, accumulate);
}

// The rows of a stored panel (float, half, bfloat16 or int8, row stride 32), converted as they are loaded.
template <class T>
class PanelRowsAvx2 {
 public:
  explicit PanelRowsAvx2(const T* panel) : panel_(panel) {}
  SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void next(__m256 (&b)[4]) {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) b[v] = detail::load8(panel_ + 8 * v);
    panel_ += kPanelWidth;
  }

 private:
  const T* panel_;
};

// As panel_tile_avx512 with 8-float registers, up to 3 rows (tile_avx2 over a stored panel).
template <int MR, class T>
SHRINK_TARGET_AVX2_FMA_F16C void panel_tile_avx2(const float* x, std::int64_t ldx, const T* panel, std::int64_t k_count,
                                                 float* y, std::int64_t ldy, int valid, bool accumulate) {
  PanelRowsAvx2<T> rows(panel);
  tile_avx2<MR>(x, ldx, rows, k_count, y, ldy, valid, accumulate);
}
#endif

template <class Tile, std::size_t... I>
void row_tile_remainder(std::int64_t rest, std::int64_t m, Tile& tile, std::index_sequence<I...>) {
  ((rest == static_cast<std::int64_t>(I + 1) ? tile(std::integral_constant<int, static_cast<int>(I + 1)>{}, m)
                                             : void()),
   ...);
}

// Calls tile(rows, m0) over M rows in tiles of MaxRows rows, the last one smaller (rows: a compile-time count).
template <int MaxRows, class Tile>
void for_each_row_tile(std::int64_t m_total, Tile&& tile) {
  std::int64_t m = 0;
  for (; m + MaxRows <= m_total; m += MaxRows) tile(std::integral_constant<int, MaxRows>{}, m);
  if (m < m_total)
    row_tile_remainder(m_total - m, m, tile, std::make_index_sequence<static_cast<std::size_t>(MaxRows - 1)>{});
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
template <class T>
SHRINK_TARGET_AVX512 void panel_to_float_avx512(const T* src, float* dst, std::int64_t count) {
  for (std::int64_t i = 0; i < count; i += 16)
    _mm512_storeu_ps(dst + i, detail::load16(src + i));  // count: a multiple of 32
}

template <class T>
SHRINK_TARGET_AVX2_FMA_F16C void panel_to_float_avx2(const T* src, float* dst, std::int64_t count) {
  for (std::int64_t i = 0; i < count; i += 8) _mm256_storeu_ps(dst + i, detail::load8(src + i));
}
#endif

// The blocked product for many rows: for each block of 512 outputs, each block of k and each panel of 32 outputs,
// panel(p, k0, kc) gives the panel's rows k0 .. k0 + kc − 1 as floats (row stride 32) and every row tile of X
// passes over them; partial sums accumulate in y. prefetch(p, k0, kc, step, steps) asks for part `step` of `steps`
// of the memory that panel block is made from: the row tiles of one block prefetch the next block, a part each.
// tile(rows, x, panel, kc, y, valid, accumulate) is the level's kernel; finish(n0, n1) runs the epilogue once
// outputs are complete.
// Outputs n_begin .. n_end − 1 only (n_begin a multiple of 32).
template <int MaxRows, class Panel, class Prefetch, class Tile, class Finish>
void gemm_panels_blocked(const float* x, std::int64_t ldx, std::int64_t m_total, std::int64_t n_begin,
                         std::int64_t n_end, std::int64_t k_total, std::int64_t block_k, float* y, std::int64_t ldy,
                         Panel&& panel, Prefetch&& prefetch, Tile&& tile, Finish&& finish) {
  const std::int64_t n_total = n_end;
  const std::int64_t tiles = (m_total + MaxRows - 1) / MaxRows;
  for (std::int64_t nb0 = n_begin; nb0 < n_total; nb0 += kPanelBlockN) {
    const std::int64_t nb1 = std::min(n_total, nb0 + kPanelBlockN);
    const std::int64_t p_begin = nb0 / kPanelWidth, p_end = (nb1 + kPanelWidth - 1) / kPanelWidth;
    for (std::int64_t k0 = 0; k0 < k_total; k0 += block_k) {
      const std::int64_t kc = std::min(block_k, k_total - k0);
      for (std::int64_t p = p_begin; p < p_end; ++p) {
        const float* floats = panel(p, k0, kc);
        const int valid = static_cast<int>(std::min(kPanelWidth, n_total - p * kPanelWidth));
        // The block used next: the following panel, or the first panel of the next k block.
        const bool last_panel = p + 1 == p_end;
        const std::int64_t next_k0 = last_panel ? k0 + block_k : k0;
        const std::int64_t next_p = last_panel ? p_begin : p + 1, next_kc = std::min(block_k, k_total - next_k0);
        std::int64_t tile_index = 0;
        for_each_row_tile<MaxRows>(m_total, [&](auto rows, std::int64_t m0) {
          if (next_k0 < k_total) prefetch(next_p, next_k0, next_kc, tile_index++, tiles);
          tile(rows, x + m0 * ldx + k0, floats, kc, y + m0 * ldy + p * kPanelWidth, valid, k0 > 0);
        });
      }
    }
    finish(nb0, nb1);
  }
}

// Eigen's product panel by panel: y[:, 32p .. 32p + 31] = X · panel(p) for panels given whole ([K, 32] floats).
// Outputs n_begin .. n_end − 1 only (n_begin a multiple of 32).
template <class Panel>
void gemm_panels_eigen(const float* x, std::int64_t ldx, std::int64_t m_total, std::int64_t n_begin, std::int64_t n_end,
                       std::int64_t k_total, float* y, std::int64_t ldy, Panel&& panel) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>> xs(x, m_total, k_total, Eigen::OuterStride<>(ldx));
  const std::int64_t n_total = n_end;
  RowMajor product(m_total, kPanelWidth);
  for (std::int64_t p = n_begin / kPanelWidth; p * kPanelWidth < n_total; ++p) {
    product.noalias() = xs * Eigen::Map<const RowMajor>(panel(p), k_total, kPanelWidth);
    const std::int64_t valid = std::min(kPanelWidth, n_total - p * kPanelWidth);
    for (std::int64_t m = 0; m < m_total; ++m)
      std::copy(product.data() + m * kPanelWidth, product.data() + m * kPanelWidth + valid,
                y + m * ldy + p * kPanelWidth);
  }
}

// How a panel product is cut for the executor (core/executor.hpp): parts of whole panels and, on the AVX paths with
// many rows, of row tiles. Which kernel runs (streaming, blocked, Eigen) is chosen from the whole product, and each
// output is computed by one part with the same instructions in the same order whatever the cut, so every executor
// and thread count gives the same bits. (Rows are never cut for Eigen's product, whose blocking follows its sizes.)
enum class PanelPath { stream, blocked, eigen };

inline constexpr std::int64_t kPartRows = 192;  // rows of a part on the AVX blocked path: 16 tiles of 12, 32 of 6

// Calls part(m0, m1, n0, n1) over parts covering [0, M) × [0, N), through parallel_for.
template <class Part>
void for_each_panel_part(PanelPath path, std::int64_t m_total, std::int64_t n_total, std::int64_t k_total,
                         Part&& part) {
  const std::int64_t panels = (n_total + kPanelWidth - 1) / kPanelWidth;
  const double panel_cost = 2.0 * static_cast<double>(m_total) * static_cast<double>(k_total) * kPanelWidth;
  std::int64_t part_panels = chunk_size(panels, panel_cost);
  std::int64_t part_rows = m_total;
  if (path == PanelPath::blocked) {
    constexpr std::int64_t block_panels = kPanelBlockN / kPanelWidth;  // whole blocks: X streams once per block
    part_panels = (part_panels + block_panels - 1) / block_panels * block_panels;
    if (m_total >= 2 * kPartRows) part_rows = kPartRows;
  }
  const std::int64_t n_parts = (panels + part_panels - 1) / part_panels;
  const std::int64_t m_parts = (m_total + part_rows - 1) / part_rows;
  parallel_for(m_parts * n_parts, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t mi = i / n_parts, ni = i % n_parts;
      part(mi * part_rows, std::min(m_total, (mi + 1) * part_rows), ni * part_panels * kPanelWidth,
           std::min(n_total, (ni + 1) * part_panels * kPanelWidth));
    }
  });
}

// Converts count values of a panel block (a multiple of 32) to floats at the best level the CPU allows.
template <class T>
void panel_block_to_float(const T* src, float* dst, std::int64_t count) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512()) return panel_to_float_avx512(src, dst, count);
  if (use_avx2_fma() && use_avx2_f16c()) return panel_to_float_avx2(src, dst, count);
#endif
  panel_to_float(src, dst, count);
}

// ---- The panel driver ------------------------------------------------------------------------------------------
// Every float-accumulating product over panels of 32 outputs runs here, whatever its weight is made of. A weight
// source says where the float panels of W[N, K] come from:
//   rows, cols                                   N and K
//   block_k                                      the k block of the blocked product (a multiple of its k step)
//   const float* floats(p, k0, kc, buffer)       rows k0 .. k0 + kc − 1 of panel p as floats (row stride 32), made
//                                                in buffer (room for max(block_k, K) · 32 floats) or stored there
//   void prefetch(p, k0, kc, step, steps)        part `step` of `steps` of the bytes that block is made from, into L2
// and, to let a product of few rows stream each panel from memory, converting in registers:
//   static constexpr bool streams = true;  const Element* panel(p)       AVX-512: panels stored as float, half,
//                                                                         bfloat16 or int8 values (row stride 32)
//   static constexpr int stream_rows_avx2 = R;                            AVX2: rows of X up to which it streams, and
//   template <int MR> void stream_avx2(x, ldx, p, y, ldy, valid)         its tile: y[i, ·] = Σ_k x[i, k] · panel p
//                                                                         for i < MR ≤ R, over all of K

template <class Source, class = void>
struct StreamsPanels : std::false_type {};
template <class Source>
struct StreamsPanels<Source, std::void_t<decltype(Source::streams)>> : std::bool_constant<Source::streams> {};

template <class Source, class = void>
struct StreamRowsAvx2 : std::integral_constant<int, 0> {};
template <class Source>
struct StreamRowsAvx2<Source, std::void_t<decltype(Source::stream_rows_avx2)>>
    : std::integral_constant<int, Source::stream_rows_avx2> {};

// y[m, n] = op(Σ_k x[m, k] · W[n, k]) (the epilogue operation in float: core/epilogue.hpp) for the M rows of x (row
// stride ldx, contiguous along k) into y (row stride ldy), W given by a weight source (above). Arguments are checked by
// the caller. Runs on the current executor (core/executor.hpp), cut by for_each_panel_part.
template <class Source>
void gemm_panel_source(const float* x, std::int64_t ldx, std::int64_t m_total, const Source& w, float* y,
                       std::int64_t ldy, const EpilogueOp& op) {
  const std::int64_t n_total = w.rows, k_total = w.cols;
  // The rows m0 .. m1 − 1 of outputs n0 .. n1 − 1: the epilogue once they are complete.
  auto finisher = [&](std::int64_t m0, std::int64_t m1) {
    return [=](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        float* row = y + m * ldy + n0;
        finish_run(op, row, op.x_scale(m), n0, n1 - n0, row);
      }
    };
  };
  auto valid_of = [&](std::int64_t p) { return static_cast<int>(std::min(kPanelWidth, n_total - p * kPanelWidth)); };
  auto prefetch = [&](std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) {
    w.prefetch(p, k0, kc, step, steps);
  };
  // The blocked product over one part, each block of panel made into the part's own buffer.
  auto blocked_part = [&](auto rows_tag, auto tile, std::int64_t m0, std::int64_t m1, std::int64_t n0,
                          std::int64_t n1) {
    AlignedVector<float> block(static_cast<std::size_t>(w.block_k * kPanelWidth));
    auto floats = [&](std::int64_t p, std::int64_t k0, std::int64_t kc) { return w.floats(p, k0, kc, block.data()); };
    gemm_panels_blocked<decltype(rows_tag)::value>(x + m0 * ldx, ldx, m1 - m0, n0, n1, k_total, w.block_k, y + m0 * ldy,
                                                   ldy, floats, prefetch, tile, finisher(m0, m1));
  };
  // Streams panels over parts when M ≤ stream_rows (0: the source does not stream), else the blocked product.
  auto run_parts = [&](std::int64_t stream_rows, auto rows_tag, auto tile, auto stream) {
    const PanelPath path = m_total <= stream_rows ? PanelPath::stream : PanelPath::blocked;
    for_each_panel_part(path, m_total, n_total, k_total,
                        [&](std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
                          if (path == PanelPath::blocked) return blocked_part(rows_tag, tile, m0, m1, n0, n1);
                          for (std::int64_t p = n0 / kPanelWidth; p * kPanelWidth < n1; ++p) stream(m0, m1, p);
                          finisher(m0, m1)(n0, n1);
                        });
  };
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  // A source that streams few rows with AVX2 kernels only (int4) keeps them on an AVX-512 machine: its blocked path
  // would write each block of panel to memory as floats for one or two rows to read once.
  constexpr int avx2_only_stream_rows = StreamsPanels<Source>::value ? 0 : StreamRowsAvx2<Source>::value;
  if (use_avx512() && m_total > avx2_only_stream_rows) {
    auto tile = [&](auto rows, const float* xs, const float* panel, std::int64_t kc, float* ys, int valid,
                    bool accumulate) {
      panel_tile_avx512<decltype(rows)::value>(xs, ldx, panel, kc, ys, ldy, valid, accumulate);
    };
    // Up to 4 row tiles: each streams the panel over all of K, converting in registers.
    auto stream = [&](std::int64_t m0, std::int64_t m1, std::int64_t p) {
      if constexpr (StreamsPanels<Source>::value) {
        using Element = std::remove_cv_t<std::remove_pointer_t<decltype(w.panel(p))>>;
        for_each_row_tile<kPanelRowsAvx512>(m1 - m0, [&](auto rows, std::int64_t m) {
          panel_tile_avx512<decltype(rows)::value, Element, true>(x + (m0 + m) * ldx, ldx, w.panel(p), k_total,
                                                                  y + (m0 + m) * ldy + p * kPanelWidth, ldy,
                                                                  valid_of(p), false);
        });
      }
    };
    run_parts(StreamsPanels<Source>::value ? kDirectTiles * kPanelRowsAvx512 : 0,
              std::integral_constant<int, kPanelRowsAvx512>{}, tile, stream);
    return;
  }
  if (use_avx2_fma() && use_avx2_f16c()) {
    auto tile = [&](auto rows, const float* xs, const float* panel, std::int64_t kc, float* ys, int valid,
                    bool accumulate) {
      panel_tile_avx2<decltype(rows)::value>(xs, ldx, panel, kc, ys, ldy, valid, accumulate);
    };
    // One row tile streams each panel (more rows run blocked: as fast as streaming in k chunks, measured on Zen 3).
    constexpr int stream_rows = StreamRowsAvx2<Source>::value;
    auto stream = [&](std::int64_t m0, std::int64_t m1, std::int64_t p) {
      if constexpr (stream_rows > 0) {
        for_each_row_tile<stream_rows>(m1 - m0, [&](auto rows, std::int64_t m) {
          w.template stream_avx2<decltype(rows)::value>(x + (m0 + m) * ldx, ldx, p,
                                                        y + (m0 + m) * ldy + p * kPanelWidth, ldy, valid_of(p));
        });
      }
    };
    run_parts(stream_rows, std::integral_constant<int, kPanelRowsAvx2>{}, tile, stream);
    return;
  }
#endif
  // Eigen's product, one whole panel as floats at a time; parts of whole panels and all rows.
  for_each_panel_part(
      PanelPath::eigen, m_total, n_total, k_total, [&](std::int64_t, std::int64_t, std::int64_t n0, std::int64_t n1) {
        AlignedVector<float> whole(static_cast<std::size_t>(k_total * kPanelWidth));
        gemm_panels_eigen(x, ldx, m_total, n0, n1, k_total, y, ldy,
                          [&](std::int64_t p) -> const float* { return w.floats(p, 0, k_total, whole.data()); });
        finisher(0, m_total)(n0, n1);
      });
}

// A PackedWeight<T> as a weight source: panels streamed as stored, or blocks converted to float.
template <class T>
struct PackedPanelSource {
  static constexpr bool streams = true;
  static constexpr int stream_rows_avx2 = kPanelRowsAvx2;
  const PackedWeight<T>& weight;
  std::int64_t rows = weight.rows, cols = weight.cols;
  std::int64_t block_k = kPanelBlockK;

  const T* panel(std::int64_t p) const { return weight.panel(p); }
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  template <int MR>
  void stream_avx2(const float* x, std::int64_t ldx, std::int64_t p, float* y, std::int64_t ldy, int valid) const {
    panel_tile_avx2<MR, T>(x, ldx, weight.panel(p), cols, y, ldy, valid, false);
  }
#endif
  const float* floats(std::int64_t p, std::int64_t k0, std::int64_t kc, float* buffer) const {
    panel_block_to_float(weight.panel(p) + k0 * kPanelWidth, buffer, kc * kPanelWidth);
    return buffer;
  }
  void prefetch(std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) const {
    prefetch_part_l2(weight.panel(p) + k0 * kPanelWidth, static_cast<std::size_t>(kc * kPanelWidth) * sizeof(T), step,
                     steps);
  }
};

// The product over a panel-packed weight (float, half, bfloat16 or int8 values), as gemm_panel_source.
template <class T>
void gemm_panels(const float* x, std::int64_t ldx, std::int64_t m_total, const PackedWeight<T>& w, float* y,
                 std::int64_t ldy, const EpilogueOp& op) {
  gemm_panel_source(x, ldx, m_total, PackedPanelSource<T>{w}, y, ldy, op);
}

}  // namespace shrink::cpu
