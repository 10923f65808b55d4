// llama.cpp's block formats as grids a method quantizes onto: each row cut into blocks of consecutive values, each
// block with a scale d (and, in the formats with a minimum, a minimum m), each value one code q:
//   symmetric (Q8_0, Q4_0, Q5_0, Q6_K):  x' = d · q        q ∈ [qmin, qmax] = [−128, 127], [−8, 7], [−16, 15], [−32,
//   31] with a minimum (Q4_1, Q5_1, Q4_K, Q5_K): x' = d · q + m  q ∈ [0, levels − 1] = [0, 15], [0, 31], [0, 15], [0,
//   31]
// in float, the product and the sum each rounded (never an FMA), as ggml and gguf-py dequantize. A method that
// chooses d, m and q on this grid writes a block whose dequantization is exactly its own x' (io/gguf_quantize.hpp's
// encode_gguf_blocks lays the bytes out).
//
// The legacy formats (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) have blocks of 32 with d and m stored as fp16. The K formats group
// blocks into super-blocks of 256 values (Q4_K, Q5_K: 8 blocks of 32; Q6_K: 16 of 16) sharing an fp16 d (and dmin),
// each block's scale (and minimum) an integer code sc (and mc):
//   Q4_K, Q5_K:  d_b = d · sc, m_b = −(dmin · mc)     sc, mc ∈ [0, 63]
//   Q6_K:        d_b = d · sc                         sc ∈ [−128, 127]
// d · sc and dmin · mc are exact in float (11-bit times 8-bit significands), so the element formulas above with d_b and
// m_b give ggml's values bit for bit (it computes (d·sc)·q − dmin·mc).
//
// The element formulas (GridParams: d, m and the code bounds, d and m values the format holds):
//   q  = clamp(nearbyint(x · (1 / d)), qmin, qmax)         symmetric   (core/affine.hpp's quantize_value, zp = 0)
//   q  = clamp(nearbyint((x − m) · (1 / d)), 0, levels − 1) with a minimum
//   q  = 0 where d = 0 (an all-zero block)
// and the block parameters a method starts from in the legacy formats, from the block's [lo, hi] (llama.cpp's
// reference choice, ggml's quantize_row_*_ref, with d and m rounded to fp16 before the codes are chosen, so the codes
// are the nearest on the stored grid):
//   Q8_0:         d = fp16(max(|lo|, |hi|) / 127)
//   Q4_0, Q5_0:   d = fp16(v / qmin), v = lo if |lo| >= |hi| else hi: the value of largest magnitude lands on qmin
//                 (d < 0 when it is positive, so the grid's wider side always holds the larger half of the range)
//   Q4_1, Q5_1:   d = fp16((hi − lo) / (levels − 1)), m = fp16(lo)
// In the K formats a super-block's parameters come from its blocks' unrounded fits (k_super_params: llama.cpp's
// choice of the super-block scale, the block codes refined on the stored grid).
// A d or m beyond fp16's range (|value| > 65504) is an Error: a weight of that size has no block in these formats.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"

namespace shrink::quant {

enum class BlockFormat { q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k };

inline constexpr std::int64_t kGridBlock = 32;    // values per block in the legacy formats (and Q4_K, Q5_K)
inline constexpr std::int64_t kSuperBlock = 256;  // values per super-block in the K formats

struct BlockGrid {
  BlockFormat format = BlockFormat::q4_0;
  int qmin = -8, qmax = 7;
  bool has_minimum = false;  // x' = d·q + m
  int bits = 4;
  std::int64_t block = kGridBlock;  // values per block (one d, m)
  std::int64_t super_block = 0;     // K formats: values per super-block (one fp16 d, dmin); 0 in the legacy formats
  int scale_code_min = 0, scale_code_max = 0;  // K formats: the block scale code's range (sc; mc is [0, 63])
};

inline const char* block_format_name(BlockFormat f) {
  switch (f) {
    case BlockFormat::q8_0: return "Q8_0";
    case BlockFormat::q4_0: return "Q4_0";
    case BlockFormat::q4_1: return "Q4_1";
    case BlockFormat::q5_0: return "Q5_0";
    case BlockFormat::q5_1: return "Q5_1";
    case BlockFormat::q4_k: return "Q4_K";
    case BlockFormat::q5_k: return "Q5_K";
    case BlockFormat::q6_k: return "Q6_K";
  }
  return "?";
}

inline BlockGrid block_grid(BlockFormat f) {
  switch (f) {
    case BlockFormat::q8_0: return {f, -128, 127, false, 8, kGridBlock, 0, 0, 0};
    case BlockFormat::q4_0: return {f, -8, 7, false, 4, kGridBlock, 0, 0, 0};
    case BlockFormat::q4_1: return {f, 0, 15, true, 4, kGridBlock, 0, 0, 0};
    case BlockFormat::q5_0: return {f, -16, 15, false, 5, kGridBlock, 0, 0, 0};
    case BlockFormat::q5_1: return {f, 0, 31, true, 5, kGridBlock, 0, 0, 0};
    case BlockFormat::q4_k: return {f, 0, 15, true, 4, kGridBlock, kSuperBlock, 0, 63};
    case BlockFormat::q5_k: return {f, 0, 31, true, 5, kGridBlock, kSuperBlock, 0, 63};
    case BlockFormat::q6_k: return {f, -32, 31, false, 6, 16, kSuperBlock, -128, 127};
  }
  fail("shrink::quant::block_grid", "format", static_cast<int>(f), "Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K");
}

// The values a row is cut into that share parameters chosen together: a super-block in the K formats, a block in
// the others (a row's width must be a multiple of it).
inline std::int64_t grid_row_unit(const BlockGrid& grid) {
  return grid.super_block > 0 ? grid.super_block : grid.block;
}

// An Error naming `argument` unless a weight of `in` input columns is whole row units of the grid (grid_row_unit).
inline void require_grid_width(const BlockGrid& grid, std::int64_t in, const char* fn, const char* argument) {
  const std::int64_t unit = grid_row_unit(grid);
  if (in % unit != 0)
    fail(fn, argument, in,
         "an input width that is a multiple of " + std::to_string(unit) + " (the " +
             (grid.super_block > 0 ? "super-blocks" : "blocks") + " of " + block_format_name(grid.format) + ")");
}

// One block's parameters with the element formulas' bounds (see the file comment); in the K formats also the codes and
// super-block scales d and m come from.
struct GridParams {
  float d = 0.0f;
  float inv_d = 0.0f;  // 1 / d in float, 0 when d = 0
  float m = 0.0f;      // 0 in the symmetric formats
  float qmin = 0.0f, qmax = 0.0f;
  bool has_minimum = false;
  float super_d = 0.0f, super_dmin = 0.0f;  // K formats: d = super_d · scale_code, m = −(super_dmin · min_code)
  std::int32_t scale_code = 0, min_code = 0;

  GridParams() = default;
  GridParams(const BlockGrid& grid, float d_, float m_)
      : d(d_),
        inv_d(d_ != 0.0f ? 1.0f / d_ : 0.0f),
        m(grid.has_minimum ? m_ : 0.0f),
        qmin(static_cast<float>(grid.qmin)),
        qmax(static_cast<float>(grid.qmax)),
        has_minimum(grid.has_minimum) {}
};

// A K format's block parameters from its super-block's fp16 d (and dmin) and its codes sc (and mc).
inline GridParams k_block_params(const BlockGrid& grid, float super_d, float super_dmin, std::int32_t sc,
                                 std::int32_t mc) {
  const float m = grid.has_minimum ? -(super_dmin * static_cast<float>(mc)) : 0.0f;  // exact: see the file comment
  GridParams p(grid, super_d * static_cast<float>(sc), m);
  p.super_d = super_d;
  p.super_dmin = grid.has_minimum ? super_dmin : 0.0f;
  p.scale_code = sc;
  p.min_code = grid.has_minimum ? mc : 0;
  return p;
}

inline std::int32_t quantize_value(float x, const GridParams& p) {
  const volatile float centred = p.has_minimum ? x - p.m : x;
  float v = centred * p.inv_d;
  v = v >= p.qmin ? (v <= p.qmax ? v : p.qmax) : p.qmin;  // NaN lands on qmin, never converted
  return static_cast<std::int32_t>(std::nearbyint(v));
}

inline float dequantize_value(std::int32_t q, const GridParams& p) {
  const volatile float scaled = static_cast<float>(q) * p.d;  // rounded on its own: never fused with the sum
  return p.has_minimum ? scaled + p.m : scaled;
}

// x rounded to the nearest fp16 value (ties to even), as a float.
inline float round_to_fp16(float x) { return half_bits_to_float(float_to_half_bits(x)); }

// round_to_fp16(x); an Error naming `what` when it leaves fp16's range.
inline float fp16_value(float x, const char* fn, const char* what) {
  const float r = round_to_fp16(x);
  if (!std::isfinite(r)) fail(fn, what, x, "a value an fp16 holds (|x| <= 65504)");
  return r;
}

// The block parameters llama.cpp's reference quantizer would choose for a block spanning [lo, hi] (finite, lo <= hi),
// d and m rounded to fp16 (see the file comment).
inline GridParams grid_params_from_range(const BlockGrid& grid, float lo, float hi,
                                         const char* fn = "shrink::quant::grid_params_from_range") {
  if (grid.super_block > 0)
    fail(fn, "format", block_format_name(grid.format), "a legacy format (the K formats: k_super_params)");
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    fail(fn, "[lo, hi]", "[" + to_text(lo) + ", " + to_text(hi) + "]", "a finite range with lo <= hi");
  if (grid.has_minimum) {
    const float d = (hi - lo) / static_cast<float>(grid.qmax);
    return GridParams(grid, fp16_value(d, fn, "block scale d"), fp16_value(lo, fn, "block minimum m"));
  }
  if (grid.format == BlockFormat::q8_0)
    return GridParams(grid, fp16_value(std::fmax(std::fabs(lo), std::fabs(hi)) / 127.0f, fn, "block scale d"), 0.0f);
  const float v = std::fabs(lo) >= std::fabs(hi) ? lo : hi;
  return GridParams(grid, fp16_value(v / static_cast<float>(grid.qmin), fn, "block scale d"), 0.0f);
}

// The block's values on the grid of `p`: Σ a_j (x_j − x'_j)², in double.
inline double grid_weighted_error(const GridParams& p, const double* x, const double* a, std::int64_t n) {
  double e = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double d = x[j] - static_cast<double>(dequantize_value(quantize_value(static_cast<float>(x[j]), p), p));
    e += a[j] * d * d;
  }
  return e;
}

namespace detail {

// Calls fit(d, m) for each stretched candidate of grid_params_search on n values x with weights a (the range rule's
// scale stretched to qmax + 0.1·k steps over [lo, hi], k = −9 .. 9, symmetric: the value of largest magnitude on
// −(|qmin| + 0.1·k) steps, and the weighted least-squares d (and m) given those codes). With nonpositive_minimum a
// fitted m > 0 is held at 0 and d refit alone (the K formats store −m as dmin · mc with mc >= 0).
template <class Fit>
void for_each_stretched_fit(const BlockGrid& grid, const double* x, const double* a, std::int64_t n, double lo,
                            double hi, bool nonpositive_minimum, Fit&& fit) {
  for (int k = -9; k <= 9; ++k) {
    double d = 0.0, m = 0.0;
    if (grid.has_minimum) {
      const double step = (hi - lo) / (grid.qmax + 0.1 * k);
      double sa = 0, sq = 0, sx = 0, sqq = 0, sqx = 0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double q = std::fmin(std::fmax(std::nearbyint((x[j] - lo) / step), 0.0), grid.qmax);
        sa += a[j];
        sq += a[j] * q;
        sx += a[j] * x[j];
        sqq += a[j] * q * q;
        sqx += a[j] * q * x[j];
      }
      const double det = sa * sqq - sq * sq;
      if (!(det > 0.0)) continue;
      d = (sa * sqx - sq * sx) / det;  // the weighted line through (q, x)
      m = (sqq * sx - sq * sqx) / det;
      if (nonpositive_minimum && m > 0.0) {
        m = 0.0;
        d = sqx / sqq;
      }
    } else {
      const double big = std::fabs(lo) >= std::fabs(hi) ? lo : hi;
      const double steps = grid.format == BlockFormat::q8_0 ? 127.0 + 0.1 * k : -grid.qmin + 0.1 * k;
      const double step = big / -steps;  // big lands on −steps, as the range rule puts it on qmin
      double num = 0.0, den = 0.0;
      for (std::int64_t j = 0; j < n; ++j) {
        const double q = std::fmin(std::fmax(std::nearbyint(x[j] / step), grid.qmin), grid.qmax);
        num += a[j] * q * x[j];
        den += a[j] * q * q;
      }
      if (!(den > 0.0)) continue;
      d = num / den;  // Σ a x q / Σ a q²
    }
    fit(d, m);
  }
}

}  // namespace detail

// The block parameters of least weighted error Σ a_j (x_j − x'_j)² (a_j >= 0, not all 0; a GPTQ column's 1/U_jj²,
// an importance) among candidates, for the n values x of one block of a legacy format:
//   the range rule's (grid_params_from_range), then for k = −9 .. 9 the codes of the range rule's scale stretched to
//   (qmax + 0.1·k) steps (symmetric: the largest magnitude on −(|qmin| + 0.1·k) steps), with the least-squares fit
//   given those codes: d = Σ a x q / Σ a q² (symmetric), or d and m of the weighted line through (q, x) (with a
//   minimum); d and m rounded to fp16, the codes taken again on the stored grid, and the error scored.
// The range rule's candidate comes first and a later one must be strictly better, so the result is never worse in
// that error than grid_params_from_range.
inline GridParams grid_params_search(const BlockGrid& grid, const double* x, const double* a, std::int64_t n,
                                     const char* fn = "shrink::quant::grid_params_search") {
  double lo = x[0], hi = x[0];
  for (std::int64_t j = 1; j < n; ++j) {
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  GridParams best = grid_params_from_range(grid, static_cast<float>(lo), static_cast<float>(hi), fn);
  double best_error = grid_weighted_error(best, x, a, n);
  if (hi == lo) return best;
  detail::for_each_stretched_fit(grid, x, a, n, lo, hi, false, [&](double d, double m) {
    const float d16 = round_to_fp16(static_cast<float>(d));
    const float m16 = round_to_fp16(static_cast<float>(m));
    if (!std::isfinite(d16) || !std::isfinite(m16)) return;
    const GridParams candidate(grid, d16, m16);
    const double e = grid_weighted_error(candidate, x, a, n);
    if (e < best_error) {
      best_error = e;
      best = candidate;
    }
  });
  return best;
}

// One block's unrounded parameters x ≈ d·q + m (m = 0 in a symmetric grid).
struct BlockFit {
  double d = 0.0, m = 0.0;
};

// The block's values on the unrounded grid of f: Σ a_j (x_j − (d·q_j + m))², q_j the nearest code, in double.
inline double block_fit_error(const BlockGrid& grid, const BlockFit& f, const double* x, const double* a,
                              std::int64_t n) {
  double e = 0.0;
  for (std::int64_t j = 0; j < n; ++j) {
    const double q = f.d != 0.0 ? std::fmin(std::fmax(std::nearbyint((x[j] - f.m) / f.d), grid.qmin), grid.qmax) : 0.0;
    const double r = x[j] - (f.d * q + f.m);
    e += a[j] * r * r;
  }
  return e;
}

// A K format's block fit, unrounded, of least weighted error among grid_params_search's candidates (the range rule,
// then the stretched fits), with llama.cpp's constraints on a K block: with a minimum, m <= 0 and d >= 0 (the range
// taken over [min(lo, 0), hi]); symmetric, the value of largest magnitude on qmin.
inline BlockFit block_fit_search(const BlockGrid& grid, const double* x, const double* a, std::int64_t n) {
  double lo = x[0], hi = x[0];
  for (std::int64_t j = 1; j < n; ++j) {
    lo = std::fmin(lo, x[j]);
    hi = std::fmax(hi, x[j]);
  }
  if (grid.has_minimum) lo = std::fmin(lo, 0.0);
  BlockFit best;
  if (grid.has_minimum) {
    if (hi == lo) return {0.0, lo};
    best = {(hi - lo) / grid.qmax, lo};
  } else {
    const double big = std::fabs(lo) >= std::fabs(hi) ? lo : hi;
    if (big == 0.0) return best;
    best = {big / grid.qmin, 0.0};
  }
  double best_error = block_fit_error(grid, best, x, a, n);
  detail::for_each_stretched_fit(grid, x, a, n, lo, hi, grid.has_minimum, [&](double d, double m) {
    if (grid.has_minimum && !(d > 0.0)) return;
    if (!std::isfinite(d) || d == 0.0) return;
    const BlockFit candidate{d, m};
    const double e = block_fit_error(grid, candidate, x, a, n);
    if (e < best_error) {
      best_error = e;
      best = candidate;
    }
  });
  return best;
}

// A K block's code for a value v on a super-block scale `unit` (v / unit rounded, clamped to [lo, hi]); 0 where the
// scale is 0 or v is not finite.
inline int k_nearest_code(double v, float unit, int lo, int hi) {
  if (unit == 0.0f || !std::isfinite(v)) return 0;
  return static_cast<int>(std::fmin(std::fmax(std::nearbyint(v / unit), lo), hi));
}

// The parameters of the blocks of one super-block of a K format: grid.super_block values x with weights a (a_j >= 0)
// into out[0 .. super_block / block), each k_block_params of the super-block's d (and dmin):
//   each block's fit f_b (block_fit_search);
//   with a minimum: d = fp16(max_b f_b.d / 63), dmin = fp16(max_b (−f_b.m) / 63); Q6_K: d = fp16(−f / 128) for the fit
//   f of largest magnitude, which takes code −128 (llama.cpp's quantize_row_q*_K_ref);
//   each block's codes sc = nearest(f_b.d / d) (mc = nearest(−f_b.m / dmin)) in range, then, among those and their
//   ±1 neighbours in range, the pair of least weighted error on the stored grid (grid_weighted_error; the nearest
//   first, a neighbour must be strictly better).
// A d or dmin beyond fp16's range is an Error naming fn.
inline void k_super_params(const BlockGrid& grid, const double* x, const double* a, GridParams* out,
                           const char* fn = "shrink::quant::k_super_params") {
  const std::int64_t blocks = grid.super_block / grid.block;
  BlockFit fits[kSuperBlock / 16];
  double top_scale = 0.0, top_min = 0.0;  // the largest d (signed largest |d| in Q6_K) and the largest −m
  for (std::int64_t b = 0; b < blocks; ++b) {
    fits[b] = block_fit_search(grid, x + b * grid.block, a + b * grid.block, grid.block);
    if (grid.has_minimum) {
      top_scale = std::fmax(top_scale, fits[b].d);
      top_min = std::fmax(top_min, -fits[b].m);
    } else if (std::fabs(fits[b].d) > std::fabs(top_scale)) {
      top_scale = fits[b].d;
    }
  }
  const float d = fp16_value(static_cast<float>(grid.has_minimum ? top_scale / 63.0 : top_scale / -128.0), fn,
                             "super-block scale d");
  const float dmin =
      grid.has_minimum ? fp16_value(static_cast<float>(top_min / 63.0), fn, "super-block minimum dmin") : 0.0f;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const double* xb = x + b * grid.block;
    const double* ab = a + b * grid.block;
    const int sc0 = k_nearest_code(fits[b].d, d, grid.scale_code_min, grid.scale_code_max);
    const int mc0 = grid.has_minimum ? k_nearest_code(-fits[b].m, dmin, 0, 63) : 0;
    GridParams best = k_block_params(grid, d, dmin, sc0, mc0);
    double best_error = grid_weighted_error(best, xb, ab, grid.block);
    const int mc_span = grid.has_minimum ? 1 : 0;
    for (int ds = -1; ds <= 1; ++ds)
      for (int dm = -mc_span; dm <= mc_span; ++dm) {
        const int sc = sc0 + ds, mc = mc0 + dm;
        if ((ds == 0 && dm == 0) || sc < grid.scale_code_min || sc > grid.scale_code_max || mc < 0 || mc > 63) continue;
        const GridParams candidate = k_block_params(grid, d, dmin, sc, mc);
        const double e = grid_weighted_error(candidate, xb, ab, grid.block);
        if (e < best_error) {
          best_error = e;
          best = candidate;
        }
      }
    out[b] = best;
  }
}

// One block's stored parameters: d and m values the format holds (legacy: fp16; K: the codes times the super-block's
// scales, with those codes).
struct BlockScale {
  float d = 0.0f;
  float m = 0.0f;                             // 0 in the symmetric formats
  std::int16_t scale_code = 0, min_code = 0;  // K formats: sc and mc (d = super d · sc, m = −(super dmin · mc))
};

// A K format's super-block scales (values fp16 holds; dmin 0 in Q6_K).
struct SuperBlockScale {
  float d = 0.0f, dmin = 0.0f;
};

// A Linear weight [rows, cols] on a block grid: codes row-major (symmetric: q in [qmin, qmax]; with a minimum: q in
// [0, levels − 1]), one BlockScale per row and block ([rows, cols / grid.block] row-major) and, in the K formats, one
// SuperBlockScale per row and super-block ([rows, cols / 256]).
struct BlockQuantized {
  BlockFormat format = BlockFormat::q4_0;
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int8_t> codes;
  std::vector<BlockScale> scales;
  std::vector<SuperBlockScale> supers;
};

// Builds the BlockQuantized of codes [rows, cols] and each block's GridParams [rows, cols / grid.block] (in the K
// formats carrying their super-block's scales: k_block_params).
inline BlockQuantized make_block_quantized(BlockFormat format, std::int64_t rows, std::int64_t cols,
                                           const std::vector<std::int32_t>& codes,
                                           const std::vector<GridParams>& params) {
  const BlockGrid grid = block_grid(format);
  BlockQuantized t;
  t.format = format;
  t.rows = rows;
  t.cols = cols;
  t.codes.reserve(codes.size());
  for (std::int32_t q : codes) t.codes.push_back(static_cast<std::int8_t>(q));
  t.scales.reserve(params.size());
  for (const GridParams& p : params)
    t.scales.push_back({p.d, p.m, static_cast<std::int16_t>(p.scale_code), static_cast<std::int16_t>(p.min_code)});
  if (grid.super_block > 0) {
    const std::size_t per_super = static_cast<std::size_t>(grid.super_block / grid.block);
    for (std::size_t k = 0; k < params.size(); k += per_super)
      t.supers.push_back({params[k].super_d, params[k].super_dmin});
  }
  return t;
}

// The weight a BlockQuantized holds, [rows, cols] row-major, by the element formula.
inline std::vector<float> dequantize(const BlockQuantized& t) {
  const BlockGrid grid = block_grid(t.format);
  const std::int64_t unit = grid_row_unit(grid);
  const std::int64_t blocks = t.cols / grid.block;
  if (t.rows < 0 || t.cols < 0 || t.cols % unit != 0 || static_cast<std::int64_t>(t.codes.size()) != t.rows * t.cols ||
      static_cast<std::int64_t>(t.scales.size()) != t.rows * blocks)
    fail("shrink::quant::dequantize", "blocks", "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]",
         "codes [rows, cols], cols a multiple of " + std::to_string(unit) + ", and one scale per row and block of " +
             std::to_string(grid.block) + " columns");
  std::vector<float> out(t.codes.size());
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const BlockScale& s = t.scales[static_cast<std::size_t>(r * blocks + b)];
      const GridParams p(grid, s.d, s.m);
      for (std::int64_t j = b * grid.block; j < (b + 1) * grid.block; ++j) {
        const auto k = static_cast<std::size_t>(r * t.cols + j);
        out[k] = dequantize_value(t.codes[k], p);
      }
    }
  return out;
}

// The weights of llama.cpp's reference K quantizers for one super-block of values x, into a: Q4_K, Q5_K:
// a_j = sqrt(Σ x² / 32) + |x_j| over x_j's block; Q6_K: a_j = x_j².
inline void k_reference_weights(const BlockGrid& grid, const double* x, double* a) {
  for (std::int64_t b0 = 0; b0 < grid.super_block; b0 += grid.block) {
    double sum_squares = 0.0;
    for (std::int64_t j = b0; j < b0 + grid.block; ++j) sum_squares += x[j] * x[j];
    const double root_mean_square = std::sqrt(sum_squares / static_cast<double>(grid.block));
    for (std::int64_t j = b0; j < b0 + grid.block; ++j)
      a[j] = grid.has_minimum ? root_mean_square + std::fabs(x[j]) : x[j] * x[j];
  }
}

// Round-to-nearest onto the grid of values x [rows, cols] (row-major, cols a multiple of grid_row_unit: 32, or 256 in
// the K formats; finite), each code the nearest on the stored grid:
//   legacy formats: each block's parameters from its [min, max] (grid_params_from_range);
//   K formats: each super-block's by k_super_params with llama.cpp's weights (k_reference_weights).
inline BlockQuantized grid_round_to_nearest(BlockFormat format, const float* x, std::int64_t rows, std::int64_t cols) {
  const char* fn = "shrink::quant::grid_round_to_nearest";
  const BlockGrid grid = block_grid(format);
  const std::int64_t unit = grid_row_unit(grid);
  if (rows < 1 || cols < 1 || cols % unit != 0)
    fail(fn, "shape", "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]",
         "rows >= 1 and a positive multiple of " + std::to_string(unit) + " columns for " + block_format_name(format));
  std::vector<std::int32_t> codes(static_cast<std::size_t>(rows * cols));
  std::vector<GridParams> params(static_cast<std::size_t>(rows * (cols / grid.block)));
  double v[kSuperBlock], a[kSuperBlock];
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 < cols; c0 += unit) {
      const float* xs = x + r * cols + c0;
      float lo = xs[0], hi = xs[0];
      for (std::int64_t j = 0; j < unit; ++j) {
        if (!std::isfinite(xs[j]))
          fail(fn, "x", "a non-finite value at row " + std::to_string(r) + ", column " + std::to_string(c0 + j),
               "finite values");
        v[j] = xs[j];
        lo = std::fmin(lo, xs[j]);
        hi = std::fmax(hi, xs[j]);
      }
      GridParams* p = params.data() + (r * cols + c0) / grid.block;
      if (grid.super_block == 0) {
        *p = grid_params_from_range(grid, lo, hi, fn);
      } else {
        k_reference_weights(grid, v, a);
        k_super_params(grid, v, a, p, fn);
      }
      for (std::int64_t j = 0; j < unit; ++j)
        codes[static_cast<std::size_t>(r * cols + c0 + j)] = quantize_value(xs[j], p[j / grid.block]);
    }
  return make_block_quantized(format, rows, cols, codes, params);
}

}  // namespace shrink::quant
