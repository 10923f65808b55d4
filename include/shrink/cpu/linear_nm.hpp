// N:M sparse linear layers on the CPU (2:4 above all) with the weight in sparse/nm_compressed.hpp's format, read as
// it is (values + positions): Y[M, N] = X[M, K] · W[N, K]ᵀ, out = act(Y + bias) (cpu/linear_epilogue.hpp).
//
//   M ≤ 48, AVX-512, 2:4  each weight row is a sparse dot product: 16 kept values at a time, their 16 positions
//                         turned into indices into 32 columns of X and picked with one vpermt2ps per row of X,
//                         12 rows of X a pass — the weight is read once a pass, half its dense size (plus a
//                         position byte per value).
//   M ≤ 12, otherwise     the same dot products in scalar code, any n:m.
//   larger M              blocks of 32 rows × 256 columns of W are expanded to dense float panels and multiplied
//                         by the float kernels of cpu/gemm_panel.hpp: a CPU has no sparse tensor cores, so with
//                         many rows 2:4 runs at about the dense float speed (a little slower: the expansion).
// Positions are checked (in range, increasing within each group) before anything is written. NaN and inf propagate
// as IEEE arithmetic does, except that a NaN in x meets only the kept weights.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"
#include "shrink/cpu/gemm_panel.hpp"
#include "shrink/cpu/lane_sums.hpp"
#include "shrink/cpu/linear_check.hpp"
#include "shrink/cpu/linear_epilogue.hpp"
#include "shrink/cpu/prefetch.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace shrink::cpu {

namespace detail {

inline constexpr std::int64_t kNmDotRows = 12;   // rows of X per pass of the dot products
inline constexpr std::int64_t kNmDotChunks = 4;  // passes (AVX-512 2:4) before expanding panels pays off

inline LinearSupport check_nm_structure(const sparse::NmCompressed<float>& w) {
  const prune::NmPattern pattern = w.pattern;
  if (pattern.n < 1 || pattern.m <= pattern.n || pattern.m > prune::detail::kMaxNmGroup)
    return LinearSupport::no("w.pattern", prune::to_string(pattern), "1 ≤ n < m ≤ 256");
  if (w.rows <= 0 || w.cols <= 0 || w.cols % pattern.m != 0)
    return LinearSupport::no("w.shape", to_string(Shape{w.rows, w.cols}),
                             "N, K ≥ 1 with K divisible by m = " + std::to_string(pattern.m));
  const std::int64_t count = w.rows * w.kept_per_row();
  if (static_cast<std::int64_t>(w.values.size()) != count)
    return LinearSupport::no("w.values.size()", std::to_string(w.values.size()),
                             "rows · cols / m · n = " + std::to_string(count));
  if (static_cast<std::int64_t>(w.positions.size()) != count)
    return LinearSupport::no("w.positions.size()", std::to_string(w.positions.size()),
                             "rows · cols / m · n = " + std::to_string(count));
  return LinearSupport::yes();
}

// Every group's positions in [0, m) and strictly increasing (O(values); the small-M kernels check as they read).
// A branch-free pass first (vectorised by the compiler for 2:4), then the search for the first bad one.
inline LinearSupport check_nm_positions(const sparse::NmCompressed<float>& w) {
  const int n = w.pattern.n;
  const std::int64_t groups = static_cast<std::int64_t>(w.positions.size()) / n;
  if (n == 2) {
    const std::uint8_t* p = w.positions.data();
    const auto m = static_cast<std::uint8_t>(w.pattern.m);
    unsigned bad = 0;
    for (std::int64_t g = 0; g < groups; ++g)
      bad |= static_cast<unsigned>(p[2 * g] >= p[2 * g + 1]) | static_cast<unsigned>(p[2 * g + 1] >= m);
    if (bad == 0) return LinearSupport::yes();
  }
  for (std::int64_t g = 0; g < groups; ++g)
    for (int j = 0; j < n; ++j) {
      const int p = w.positions[static_cast<std::size_t>(g * n + j)];
      const int lowest = j == 0 ? 0 : w.positions[static_cast<std::size_t>(g * n + j - 1)] + 1;
      if (p < lowest || p >= w.pattern.m)
        return LinearSupport::no("w.positions[" + std::to_string(g * n + j) + "]", std::to_string(p),
                                 "a position in [" + std::to_string(lowest) + ", " + std::to_string(w.pattern.m) +
                                     ") (in range, strictly increasing within a group)");
    }
  return LinearSupport::yes();
}

// yt[r, m] = Σ kept w[r, ·] · x[m, ·] for the weight rows r in [r0, r1) from group g0 on; false on a bad position.
inline bool nm_dots_scalar(const sparse::NmCompressed<float>& w, const float* x, std::int64_t ldx, std::int64_t rows,
                           std::int64_t r0, std::int64_t r1, std::int64_t g0, float* yt, bool accumulate) {
  const int n = w.pattern.n, m = w.pattern.m;
  const std::int64_t groups = w.cols / m;
  bool bad = false;
  for (std::int64_t r = r0; r < r1; ++r) {
    float acc[kNmDotRows] = {};
    const std::size_t base = static_cast<std::size_t>(r * w.kept_per_row());
    for (std::int64_t g = g0; g < groups; ++g) {
      int previous = -1;
      for (int j = 0; j < n; ++j) {
        const std::size_t at = base + static_cast<std::size_t>(g * n + j);
        const int p = w.positions[at];
        bad |= p <= previous || p >= m;
        previous = p;
        const std::int64_t col = bad ? 0 : g * m + p;
        for (std::int64_t i = 0; i < rows; ++i) acc[i] += w.values[at] * x[i * ldx + col];
      }
    }
    for (std::int64_t i = 0; i < rows; ++i) yt[r * rows + i] = accumulate ? yt[r * rows + i] + acc[i] : acc[i];
  }
  return !bad;
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
// 2:4 dot products of every weight row with MR rows of x, 8 groups (16 kept values, 32 columns) a step; the groups
// past the last whole step are left to the scalar loop (returned: the first group not done).
template <int MR>
SHRINK_TARGET_AVX512 bool nm24_dots_avx512(const sparse::NmCompressed<float>& w, const float* x, std::int64_t ldx,
                                           float* yt, std::int64_t& groups_done) {
  const std::int64_t kept = w.kept_per_row();
  const std::int64_t steps = kept / 16;
  groups_done = steps * 8;
  // Lane l holds a value of group l / 2 of the step: its column is 4 · (l / 2) + position.
  const __m512i group_base = _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28);
  const __m512i four = _mm512_set1_epi32(4);
  __mmask16 bad = 0;
  for (std::int64_t r = 0; r < w.rows; ++r) {
    const float* values = w.values.data() + r * kept;
    const std::uint8_t* positions = w.positions.data() + r * kept;
    __m512 acc[MR];
    for (int i = 0; i < MR; ++i) acc[i] = _mm512_setzero_ps();
    for (std::int64_t s = 0; s < steps; ++s) {
      const __m512 v = _mm512_loadu_ps(values + 16 * s);
      const __m512i p =
          _mm512_maskz_cvtepu8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(positions + 16 * s)));
      // Valid pairs: the first position below the second (its neighbour), every position below 4.
      const __m512i partner = _mm512_maskz_shuffle_epi32(0xFFFF, p, _MM_PERM_CDAB);  // each lane's pair partner
      bad |= static_cast<__mmask16>(_mm512_cmplt_epi32_mask(p, partner) ^ 0x5555) | _mm512_cmpge_epu32_mask(p, four);
      const __m512i column = _mm512_add_epi32(group_base, p);
      for (int i = 0; i < MR; ++i) {
        const float* row = x + i * ldx + 32 * s;
        const __m512 picked = _mm512_permutex2var_ps(_mm512_loadu_ps(row), column, _mm512_loadu_ps(row + 16));
        acc[i] = _mm512_fmadd_ps(v, picked, acc[i]);
      }
    }
    for (int i = 0; i < MR; ++i) yt[r * MR + i] = sum_lanes16(acc[i]);
  }
  return bad == 0;
}
#endif

}  // namespace detail

inline LinearSupport can_implement_linear_nm(const TensorView<const float>& x, const sparse::NmCompressed<float>& w,
                                             const TensorView<float>& out, const LinearEpilogue& epilogue = {}) {
  LinearSupport s = detail::check_nm_structure(w);
  if (!s) return s;
  s = detail::check_linear_operands(x, w.cols, w.rows, out, epilogue);
  if (!s) return s;
  s = detail::check_no_overlap(out, w.values.data(), w.values.size() * sizeof(float), "w.values");
  if (!s) return s;
  return detail::check_no_overlap(out, w.positions.data(), w.positions.size(), "w.positions");
}

// out[m, n] = act(Σ_{kept k of row n} x[m, k] · w[n, k] + bias[n]); x [M, K] any strides, w N:M compressed [N, K].
inline void linear_nm(TensorView<const float> x, const sparse::NmCompressed<float>& w, TensorView<float> out,
                      const LinearEpilogue& epilogue = {}) {
  const char* fn = "shrink::cpu::linear_nm";
  require_supported(can_implement_linear_nm(x, w, out, epilogue), fn);
  const std::int64_t m_total = x.size(0), n_total = w.rows, k_total = w.cols;
  const float* bias = detail::bias_data(epilogue);
  std::vector<float> x_rows;
  std::int64_t ldx = 0;
  const float* xs = detail::contiguous_rows(x, x_rows, ldx);

  bool use_dots = m_total <= detail::kNmDotRows;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  const bool vector_dots = use_avx512() && w.pattern.n == 2 && w.pattern.m == 4;
  use_dots = use_dots || (vector_dots && m_total <= detail::kNmDotChunks * detail::kNmDotRows);
#endif
  if (use_dots) {  // dot products, 12 rows of X a pass, into private storage checked before out is written
    const std::int64_t chunks = (m_total + detail::kNmDotRows - 1) / detail::kNmDotRows;
    std::vector<float> yt(static_cast<std::size_t>(n_total * m_total));
    bool ok = true;
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t m0 = c * detail::kNmDotRows, rows = std::min(detail::kNmDotRows, m_total - m0);
      float* chunk_yt = yt.data() + m0 * n_total;  // [N, rows]
      const float* chunk_x = xs + m0 * ldx;
      std::int64_t groups_done = 0;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
      if (vector_dots) {
        detail::for_each_row_tile<detail::kNmDotRows>(rows, [&](auto tile_rows, std::int64_t) {
          ok = detail::nm24_dots_avx512<decltype(tile_rows)::value>(w, chunk_x, ldx, chunk_yt, groups_done) && ok;
        });
      }
#endif
      ok = detail::nm_dots_scalar(w, chunk_x, ldx, rows, 0, n_total, groups_done, chunk_yt, groups_done > 0) && ok;
    }
    if (!ok) require_supported(detail::check_nm_positions(w), fn);
    for (std::int64_t c = 0; c < chunks; ++c) {
      const std::int64_t m0 = c * detail::kNmDotRows, rows = std::min(detail::kNmDotRows, m_total - m0);
      detail::finish_transposed(yt.data() + m0 * n_total, rows, rows, n_total, m0, bias, epilogue.activation, out);
    }
    return;
  }

  require_supported(detail::check_nm_positions(w), fn);
  const int n_keep = w.pattern.n, m_group = w.pattern.m;
  const std::int64_t block_k = std::max<std::int64_t>(1, detail::kPanelBlockK / m_group) * m_group;
  AlignedVector<float> block(static_cast<std::size_t>(std::max(block_k, k_total) * kPanelWidth));
  // Rows 32p .. 32p + 31, columns k0 .. k0 + kc − 1 of W as a dense k-major panel: zeros, then each kept value
  // stored at its column.
  auto expand = [&](std::int64_t p, std::int64_t k0, std::int64_t kc) -> const float* {
    std::fill(block.begin(), block.begin() + kc * kPanelWidth, 0.0f);
    const std::int64_t r_end = std::min(n_total, (p + 1) * kPanelWidth);
    const std::int64_t first_group = k0 / m_group, groups = kc / m_group, kept_per_row = w.kept_per_row();
    for (std::int64_t r = p * kPanelWidth; r < r_end; ++r) {
      const float* values = w.values.data() + r * kept_per_row + first_group * n_keep;
      const std::uint8_t* positions = w.positions.data() + r * kept_per_row + first_group * n_keep;
      float* column = block.data() + (r - p * kPanelWidth);
      for (std::int64_t g = 0; g < groups; ++g, column += m_group * kPanelWidth) {
        for (int t = 0; t < n_keep; ++t) column[positions[t] * kPanelWidth] = values[t];
        values += n_keep;
        positions += n_keep;
      }
    }
    return block.data();
  };
  // The values and positions a panel block is made from: 32 rows, each a run of each array; a few rows per step.
  auto source = [&](std::int64_t p, std::int64_t k0, std::int64_t kc, std::int64_t step, std::int64_t steps) {
    const std::int64_t rows = std::min(kPanelWidth, n_total - p * kPanelWidth);
    const std::int64_t per_step = (rows + steps - 1) / steps;
    const std::int64_t begin = k0 / m_group * n_keep, count = kc / m_group * n_keep;
    for (std::int64_t r = p * kPanelWidth + step * per_step;
         r < std::min(p * kPanelWidth + rows, p * kPanelWidth + (step + 1) * per_step); ++r) {
      prefetch_part_l2(w.values.data() + r * w.kept_per_row() + begin, static_cast<std::size_t>(count) * sizeof(float),
                       0, 1);
      prefetch_part_l2(w.positions.data() + r * w.kept_per_row() + begin, static_cast<std::size_t>(count), 0, 1);
    }
  };
  float* y = out.data();
  const std::int64_t ldy = out.stride(0);
  auto finish = [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t m = 0; m < m_total; ++m)
      detail::finish_run(y + m * ldy + n0, 1.0f, nullptr, bias != nullptr ? bias + n0 : nullptr, epilogue.activation,
                         y + m * ldy + n0, n1 - n0);
  };
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512()) {
    auto tile = [&](auto rows, const float* xr, const float* panel, std::int64_t kc, float* yr, int valid,
                    bool accumulate) {
      detail::panel_tile_avx512<decltype(rows)::value>(xr, ldx, panel, kc, yr, ldy, valid, accumulate);
    };
    detail::gemm_panels_blocked<detail::kPanelRowsAvx512>(xs, ldx, m_total, n_total, k_total, block_k, y, ldy, expand,
                                                          source, tile, finish);
    return;
  }
  if (use_avx2_fma()) {
    auto tile = [&](auto rows, const float* xr, const float* panel, std::int64_t kc, float* yr, int valid,
                    bool accumulate) {
      for (int half_index = 0; half_index < 2; ++half_index) {
        const int half_valid = std::min(16, valid - 16 * half_index);
        if (half_valid <= 0) break;
        detail::panel_tile_avx2<decltype(rows)::value>(xr, ldx, panel + 16 * half_index, kc, yr + 16 * half_index, ldy,
                                                       half_valid, accumulate);
      }
    };
    detail::gemm_panels_blocked<detail::kPanelRowsAvx2>(xs, ldx, m_total, n_total, k_total, block_k, y, ldy, expand,
                                                        source, tile, finish);
    return;
  }
#endif
  detail::gemm_panels_eigen(xs, ldx, m_total, n_total, k_total, y, ldy,
                            [&](std::int64_t p) { return expand(p, 0, k_total); });
  finish(0, n_total);
}

// With a raw bias pointer: N floats (w's rows), or nullptr for none.
inline void linear_nm(TensorView<const float> x, const sparse::NmCompressed<float>& w, const float* bias,
                      TensorView<float> out, Activation activation = Activation::none) {
  LinearEpilogue e;
  if (bias != nullptr) e.bias = TensorView<const float>(bias, Shape{w.rows});
  e.activation = activation;
  linear_nm(x, w, out, e);
}

}  // namespace shrink::cpu
