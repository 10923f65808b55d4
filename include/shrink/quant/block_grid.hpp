// llama.cpp's legacy block formats as grids a method quantizes onto: each row cut into blocks of 32 consecutive
// values, each block with an fp16 scale d (and, in the "_1" formats, an fp16 minimum m), each value one code q:
//   symmetric (Q8_0, Q4_0, Q5_0):  x' = d · q          q ∈ [qmin, qmax] = [−128, 127], [−8, 7], [−16, 15]
//   with a minimum (Q4_1, Q5_1):   x' = d · q + m      q ∈ [0, levels − 1] = [0, 15], [0, 31]
// in float, the product and the sum each rounded (never an FMA), as ggml and gguf-py dequantize. A method that
// chooses d, m and q on this grid writes a block whose dequantization is exactly its own x' (io/gguf_quantize.hpp's
// encode_gguf_blocks lays the bytes out).
//
// The element formulas (GridParams: d, m and the code bounds, d and m values an fp16 holds):
//   q  = clamp(nearbyint(x · (1 / d)), qmin, qmax)         symmetric   (core/affine.hpp's quantize_value, zp = 0)
//   q  = clamp(nearbyint((x − m) · (1 / d)), 0, levels − 1) with a minimum
//   q  = 0 where d = 0 (an all-zero block)
// and the block parameters a method starts from, from the block's [lo, hi] (llama.cpp's reference choice, ggml's
// quantize_row_*_ref, with d and m rounded to fp16 before the codes are chosen, so the codes are the nearest on the
// stored grid):
//   Q8_0:         d = fp16(max(|lo|, |hi|) / 127)
//   Q4_0, Q5_0:   d = fp16(v / qmin), v = lo if |lo| >= |hi| else hi: the value of largest magnitude lands on qmin
//                 (d < 0 when it is positive, so the grid's wider side always holds the larger half of the range)
//   Q4_1, Q5_1:   d = fp16((hi − lo) / (levels − 1)), m = fp16(lo)
// A d or m beyond fp16's range (|value| > 65504) is an Error: a weight of that size has no block in these formats.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"

namespace shrink::quant {

enum class BlockFormat { q8_0, q4_0, q4_1, q5_0, q5_1 };

inline constexpr std::int64_t kGridBlock = 32;  // values per block in every format here

struct BlockGrid {
  BlockFormat format = BlockFormat::q4_0;
  int qmin = -8, qmax = 7;
  bool has_minimum = false;  // x' = d·q + m
  int bits = 4;
};

inline const char* block_format_name(BlockFormat f) {
  switch (f) {
    case BlockFormat::q8_0: return "Q8_0";
    case BlockFormat::q4_0: return "Q4_0";
    case BlockFormat::q4_1: return "Q4_1";
    case BlockFormat::q5_0: return "Q5_0";
    case BlockFormat::q5_1: return "Q5_1";
  }
  return "?";
}

inline BlockGrid block_grid(BlockFormat f) {
  switch (f) {
    case BlockFormat::q8_0: return {f, -128, 127, false, 8};
    case BlockFormat::q4_0: return {f, -8, 7, false, 4};
    case BlockFormat::q4_1: return {f, 0, 15, true, 4};
    case BlockFormat::q5_0: return {f, -16, 15, false, 5};
    case BlockFormat::q5_1: return {f, 0, 31, true, 5};
  }
  fail("shrink::quant::block_grid", "format", static_cast<int>(f), "Q8_0, Q4_0, Q4_1, Q5_0 or Q5_1");
}

// One block's parameters with the element formulas' bounds (see the file comment).
struct GridParams {
  float d = 0.0f;
  float inv_d = 0.0f;  // 1 / d in float, 0 when d = 0
  float m = 0.0f;      // 0 in the symmetric formats
  float qmin = 0.0f, qmax = 0.0f;
  bool has_minimum = false;

  GridParams() = default;
  GridParams(const BlockGrid& grid, float d_, float m_)
      : d(d_),
        inv_d(d_ != 0.0f ? 1.0f / d_ : 0.0f),
        m(grid.has_minimum ? m_ : 0.0f),
        qmin(static_cast<float>(grid.qmin)),
        qmax(static_cast<float>(grid.qmax)),
        has_minimum(grid.has_minimum) {}
};

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

// The block parameters of least weighted error Σ a_j (x_j − x'_j)² (a_j >= 0, not all 0; a GPTQ column's 1/U_jj²,
// an importance) among candidates, for the n values x of one block:
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
      d = (sa * sqx - sq * sx) / det;
      m = (sqq * sx - sq * sqx) / det;
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
      d = num / den;
    }
    const float d16 = round_to_fp16(static_cast<float>(d));
    const float m16 = round_to_fp16(static_cast<float>(m));
    if (!std::isfinite(d16) || !std::isfinite(m16)) continue;
    const GridParams candidate(grid, d16, m16);
    const double e = grid_weighted_error(candidate, x, a, n);
    if (e < best_error) {
      best_error = e;
      best = candidate;
    }
  }
  return best;
}

// One block's stored parameters (values an fp16 holds).
struct BlockScale {
  float d = 0.0f;
  float m = 0.0f;  // 0 in the symmetric formats
};

// A Linear weight [rows, cols] on a block grid: codes row-major (symmetric: q in [qmin, qmax]; with a minimum: q in
// [0, levels − 1]), one BlockScale per row and block of 32 columns ([rows, cols / 32] row-major).
struct BlockQuantized {
  BlockFormat format = BlockFormat::q4_0;
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int8_t> codes;
  std::vector<BlockScale> scales;
};

// Builds the BlockQuantized of codes [rows, cols] and each block's GridParams [rows, cols / 32].
inline BlockQuantized make_block_quantized(BlockFormat format, std::int64_t rows, std::int64_t cols,
                                           const std::vector<std::int32_t>& codes,
                                           const std::vector<GridParams>& params) {
  BlockQuantized t;
  t.format = format;
  t.rows = rows;
  t.cols = cols;
  t.codes.reserve(codes.size());
  for (std::int32_t q : codes) t.codes.push_back(static_cast<std::int8_t>(q));
  t.scales.reserve(params.size());
  for (const GridParams& p : params) t.scales.push_back({p.d, p.m});
  return t;
}

// The weight a BlockQuantized holds, [rows, cols] row-major, by the element formula.
inline std::vector<float> dequantize(const BlockQuantized& t) {
  const BlockGrid grid = block_grid(t.format);
  const std::int64_t blocks = t.cols / kGridBlock;
  if (t.cols % kGridBlock != 0 || static_cast<std::int64_t>(t.codes.size()) != t.rows * t.cols ||
      static_cast<std::int64_t>(t.scales.size()) != t.rows * blocks)
    fail("shrink::quant::dequantize", "blocks", "[" + std::to_string(t.rows) + ", " + std::to_string(t.cols) + "]",
         "codes [rows, cols] and one scale per row and block of 32 columns");
  std::vector<float> out(t.codes.size());
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const BlockScale& s = t.scales[static_cast<std::size_t>(r * blocks + b)];
      const GridParams p(grid, s.d, s.m);
      for (std::int64_t j = b * kGridBlock; j < (b + 1) * kGridBlock; ++j) {
        const auto k = static_cast<std::size_t>(r * t.cols + j);
        out[k] = dequantize_value(t.codes[k], p);
      }
    }
  return out;
}

// Round-to-nearest onto the grid of values x [rows, cols] (row-major, cols a multiple of 32, finite): each block's
// parameters from its [min, max] (grid_params_from_range), each code the nearest on the stored grid.
inline BlockQuantized grid_round_to_nearest(BlockFormat format, const float* x, std::int64_t rows, std::int64_t cols) {
  const char* fn = "shrink::quant::grid_round_to_nearest";
  if (rows < 1 || cols < 1 || cols % kGridBlock != 0)
    fail(fn, "shape", "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]",
         "rows >= 1 and a positive multiple of 32 columns");
  const BlockGrid grid = block_grid(format);
  std::vector<std::int32_t> codes(static_cast<std::size_t>(rows * cols));
  std::vector<GridParams> params;
  params.reserve(static_cast<std::size_t>(rows * (cols / kGridBlock)));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kGridBlock) {
      const float* v = x + r * cols + c0;
      float lo = v[0], hi = v[0];
      for (std::int64_t j = 0; j < kGridBlock; ++j) {
        if (!std::isfinite(v[j]))
          fail(fn, "x", "a non-finite value at row " + std::to_string(r) + ", column " + std::to_string(c0 + j),
               "finite values");
        lo = std::fmin(lo, v[j]);
        hi = std::fmax(hi, v[j]);
      }
      params.push_back(grid_params_from_range(grid, lo, hi, fn));
      for (std::int64_t j = 0; j < kGridBlock; ++j)
        codes[static_cast<std::size_t>(r * cols + c0 + j)] = quantize_value(v[j], params.back());
    }
  return make_block_quantized(format, rows, cols, codes, params);
}

}  // namespace shrink::quant
