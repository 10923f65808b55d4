// The forward-KL row kernel behind kl_div_with_grad: one read of each logit, exps computed once.
//
// Sums stage, one row, tile by tile (kKlTile columns): the tile's max of both rows, then for every element
//   a = (z_s - M_s) / T, b = (z_t - M_t) / T, e_s = exp(a), e_t = exp(b) (stored in two scratch rows),
//   S_s += e_s, S_t += e_t, X += e_t (b - a) where e_t > 0,
// with M_s, M_t the running maxes (online softmax): when a tile raises them the sums are rescaled,
//   S <- S exp((M_old - M_new) / T),  X <- rho_t (X + delta S_t),  delta = ((M_t,old - M_t,new) - (M_s,old - M_s,new)) / T,
// and the maxes each tile used are kept. The tile is read from memory once and from L1 for the exps.
// Then KL = X / S_t + log(S_s / S_t) with everything relative to the final maxes.
// Gradient stage: g = c (q - p) = (c / S_s) f_s e_s - (c / S_t) f_t e_t per tile, f = exp((M_tile - M_final) / T),
// one fma an element on every path (explicit, so -ffp-contract cannot make the streamed and cached writes differ),
// from the scratch rows (still in cache), written with streaming stores when the gradient is too large to stay
// in cache, tile by tile while the next row's sums run over the same scratch (each tile read before it is
// overwritten). Scratch: 2 V floats and 2 V / kKlTile maxes: O(V), not O(rows x V).
// Loops for AVX-512 (16 lanes), AVX2 + FMA (8) and scalar, chosen at run time; the exps have the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/cpu/softmax_rows.hpp"
#include "shrink/cpu/vector_math.hpp"

namespace shrink::cpu {

inline constexpr std::int64_t kKlTile = 1024;

inline std::int64_t kl_tile_count(std::int64_t n) { return (n + kKlTile - 1) / kKlTile; }

// What the sums stage learns of a row.
struct KlRowSums {
  double s_student = 0.0, s_teacher = 0.0, cross = 0.0;  // relative to the final maxes
  float max_student = -std::numeric_limits<float>::infinity();
  float max_teacher = -std::numeric_limits<float>::infinity();
  bool nan_student = false, nan_teacher = false;
};

// The gradient stage of one row, as kl_row_sums can run it tile by tile beside the next row's sums.
template <class T>
struct KlGradJob {
  T* g = nullptr;
  std::int64_t n = 0;
  const float* es = nullptr;
  const float* et = nullptr;
  const float* tile_ms = nullptr;
  const float* tile_mt = nullptr;
  KlRowSums sums;
  double t = 1.0, cs = 0.0, ct = 0.0;  // cs = c / S_s, ct = c / S_t
  bool accumulate = false;
  bool stream = false;
};

template <class T>
void kl_grad_tile(const KlGradJob<T>& job, std::int64_t tile);

namespace detail {

// The running state of one row's sums; `lane` sums are added by the vector loops before a rescale.
struct KlOnline {
  double s_student = 0.0, s_teacher = 0.0, cross = 0.0;
  float m_student = -std::numeric_limits<float>::infinity();
  float m_teacher = -std::numeric_limits<float>::infinity();

  // The offset the exps of a tile use: the running max, or 0 while a row has no finite value yet (its
  // elements are then all -inf and their exps 0).
  float offset_student() const { return std::isfinite(m_student) ? m_student : 0.0f; }
  float offset_teacher() const { return std::isfinite(m_teacher) ? m_teacher : 0.0f; }

  // Raises the maxes to include a tile's, rescaling the sums gathered so far.
  void raise(float tile_student, float tile_teacher, double t) {
    const float ns = std::fmax(m_student, tile_student), nt = std::fmax(m_teacher, tile_teacher);
    if (ns == m_student && nt == m_teacher) return;
    const double os = offset_student(), ot = offset_teacher();
    const double new_os = std::isfinite(ns) ? ns : 0.0, new_ot = std::isfinite(nt) ? nt : 0.0;
    // Sums over no finite element are 0 whatever the factor; keep the factor finite for them.
    const double rho_s = s_student > 0.0 ? std::exp((os - new_os) / t) : 0.0;
    const double rho_t = s_teacher > 0.0 ? std::exp((ot - new_ot) / t) : 0.0;
    const double delta = ((ot - new_ot) - (os - new_os)) / t;
    // rho_t == 0: the teacher mass so far underflows (or there was none), and so do its cross terms; this also
    // keeps a +inf cross (teacher mass where the student had none) from turning into 0 * inf = NaN.
    cross = rho_t > 0.0 ? rho_t * (cross + delta * s_teacher) : 0.0;
    s_student *= rho_s;
    s_teacher *= rho_t;
    m_student = ns;
    m_teacher = nt;
  }
};

template <class T>
void kl_tile_sums_scalar(const T* zs, const T* zt, std::int64_t begin, std::int64_t end, float os, float ot,
                         float inv_t, float* es, float* et, KlOnline& st) {
  for (std::int64_t j = begin; j < end; ++j) {
    const float a = (element_to_float(zs[j]) - os) * inv_t, b = (element_to_float(zt[j]) - ot) * inv_t;
    const float ea = exp_scalar(a), eb = exp_scalar(b);
    es[j] = ea;
    et[j] = eb;
    st.s_student += ea;
    st.s_teacher += eb;
    if (eb > 0.0f) st.cross += eb * (b - a);
  }
}

template <class T>
void kl_tile_max_scalar(const T* z, std::int64_t begin, std::int64_t end, float& m, bool& nan) {
  for (std::int64_t j = begin; j < end; ++j) {
    const float v = element_to_float(z[j]);
    nan = nan || v != v;
    m = std::fmax(m, v);
  }
}

template <class T>
KlRowSums kl_row_sums_scalar(const T* zs, const T* zt, std::int64_t n, float inv_t, double t, float* es, float* et,
                             float* tile_ms, float* tile_mt,
                             const KlGradJob<T>* job) {
  KlOnline st;
  KlRowSums out;
  for (std::int64_t tile = 0, begin = 0; begin < n; ++tile, begin += kKlTile) {
    const std::int64_t end = std::min(n, begin + kKlTile);
    float ms = -std::numeric_limits<float>::infinity(), mt = ms;
    kl_tile_max_scalar(zs, begin, end, ms, out.nan_student);
    kl_tile_max_scalar(zt, begin, end, mt, out.nan_teacher);
    // The previous row's gradient for this tile goes first: it reads the scratch this tile then overwrites.
    if (job != nullptr) kl_grad_tile(*job, tile);
    st.raise(ms, mt, t);
    tile_ms[tile] = st.offset_student();
    tile_mt[tile] = st.offset_teacher();
    kl_tile_sums_scalar(zs, zt, begin, end, tile_ms[tile], tile_mt[tile], inv_t, es, et, st);
  }
  out.s_student = st.s_student;
  out.s_teacher = st.s_teacher;
  out.cross = st.cross;
  out.max_student = st.m_student;
  out.max_teacher = st.m_teacher;
  return out;
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
SHRINK_TARGET_AVX2_FMA_F16C inline double lanes_total(__m256d v) {
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, v);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE __m256d widen_add(__m256d total, __m256 part) {
  return _mm256_add_pd(total, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(part)),
                                            _mm256_cvtps_pd(_mm256_extractf128_ps(part, 1))));
}

template <class T>
SHRINK_TARGET_AVX2_FMA_F16C KlRowSums kl_row_sums_avx2(const T* zs, const T* zt, std::int64_t n, float inv_t, double t,
                                                       float* es, float* et, float* tile_ms, float* tile_mt,
                             const KlGradJob<T>* job) {
  KlOnline st;
  KlRowSums out;
  const __m256 vinv = _mm256_set1_ps(inv_t), zero = _mm256_setzero_ps();
  __m256 nan_s = zero, nan_t = zero;
  for (std::int64_t tile = 0, begin = 0; begin < n; ++tile, begin += kKlTile) {
    const std::int64_t end = std::min(n, begin + kKlTile);
    const std::int64_t vend = begin + (end - begin) / 8 * 8;
    __m256 max_s = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), max_t = max_s;
    for (std::int64_t j = begin; j < vend; j += 8) {
      const __m256 a = load8(zs + j), b = load8(zt + j);
      nan_s = _mm256_or_ps(nan_s, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
      nan_t = _mm256_or_ps(nan_t, _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
      max_s = _mm256_max_ps(max_s, a);
      max_t = _mm256_max_ps(max_t, b);
    }
    alignas(32) float lanes_s[8], lanes_t[8];
    _mm256_store_ps(lanes_s, max_s);
    _mm256_store_ps(lanes_t, max_t);
    float ms = -std::numeric_limits<float>::infinity(), mt = ms;
    for (int l = 0; l < 8; ++l) {
      ms = std::fmax(ms, lanes_s[l]);
      mt = std::fmax(mt, lanes_t[l]);
    }
    kl_tile_max_scalar(zs, vend, end, ms, out.nan_student);
    kl_tile_max_scalar(zt, vend, end, mt, out.nan_teacher);
    // The previous row's gradient for this tile goes first: it reads the scratch this tile then overwrites.
    if (job != nullptr) kl_grad_tile(*job, tile);
    st.raise(ms, mt, t);
    tile_ms[tile] = st.offset_student();
    tile_mt[tile] = st.offset_teacher();
    const __m256 vos = _mm256_set1_ps(tile_ms[tile]), vot = _mm256_set1_ps(tile_mt[tile]);
    __m256d sum_s = _mm256_setzero_pd(), sum_t = sum_s, sum_x = sum_s;
    for (std::int64_t j = begin; j < vend;) {
      const std::int64_t block_end = std::min(vend, j + 128);  // 16 float additions a lane, then double
      __m256 part_s = zero, part_t = zero, part_x = zero;
      for (; j < block_end; j += 8) {
        if ((j & 15) == 0) {  // a line (16 floats) at a time, two tiles ahead, as the AVX-512 loop
          _mm_prefetch(reinterpret_cast<const char*>(zs + j + 2 * kKlTile), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(zt + j + 2 * kKlTile), _MM_HINT_T0);
        }
        const __m256 a = _mm256_mul_ps(_mm256_sub_ps(load8(zs + j), vos), vinv);
        const __m256 b = _mm256_mul_ps(_mm256_sub_ps(load8(zt + j), vot), vinv);
        const __m256 ea = exp8(a), eb = exp8(b);
        _mm256_storeu_ps(es + j, ea);
        _mm256_storeu_ps(et + j, eb);
        part_s = _mm256_add_ps(part_s, ea);
        part_t = _mm256_add_ps(part_t, eb);
        part_x = _mm256_add_ps(part_x, _mm256_and_ps(_mm256_cmp_ps(eb, zero, _CMP_GT_OQ), _mm256_mul_ps(eb, _mm256_sub_ps(b, a))));
      }
      sum_s = widen_add(sum_s, part_s);
      sum_t = widen_add(sum_t, part_t);
      sum_x = widen_add(sum_x, part_x);
    }
    st.s_student += lanes_total(sum_s);
    st.s_teacher += lanes_total(sum_t);
    st.cross += lanes_total(sum_x);
    kl_tile_sums_scalar(zs, zt, vend, end, tile_ms[tile], tile_mt[tile], inv_t, es, et, st);
  }
  out.nan_student = out.nan_student || _mm256_movemask_ps(nan_s) != 0;
  out.nan_teacher = out.nan_teacher || _mm256_movemask_ps(nan_t) != 0;
  out.s_student = st.s_student;
  out.s_teacher = st.s_teacher;
  out.cross = st.cross;
  out.max_student = st.m_student;
  out.max_teacher = st.m_teacher;
  return out;
}

template <class T, bool kStream>
SHRINK_TARGET_AVX2_FMA_F16C void kl_grad_range_avx2(T* g, const float* es, const float* et, std::int64_t begin,
                                                    std::int64_t end, float fs, float ft, bool accumulate) {
  const __m256 vfs = _mm256_set1_ps(fs), vft = _mm256_set1_ps(ft);
  std::int64_t j = begin;
  for (; j + 8 <= end; j += 8) {
    const __m256 v = _mm256_fmsub_ps(vfs, _mm256_loadu_ps(es + j), _mm256_mul_ps(vft, _mm256_loadu_ps(et + j)));
    if constexpr (kStream)
      _mm256_stream_ps(reinterpret_cast<float*>(g + j), v);
    else
      put8(g + j, v, accumulate);
  }
  for (; j < end; ++j) put_element(g + j, std::fma(fs, es[j], -(ft * et[j])), accumulate);
}

// AVX-512: the same stages sixteen lanes at a time, for float rows (half and bfloat16 rows take the AVX2 loops).
SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
// GCC 12 warns (-Wmaybe-uninitialized) about the undefined pass-through operand of the unmasked forms of some
// AVX-512 intrinsics; the masked forms with every lane on and a defined pass-through are the same instructions.
constexpr __mmask16 kAll16 = 0xFFFF;
constexpr __mmask8 kAll8 = 0xFF;

SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512 max16(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, kAll16, a, b); }

SHRINK_TARGET_AVX512 inline float lanes_max16(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float m = lanes[0];
  for (int l = 1; l < 16; ++l) m = std::fmax(m, lanes[l]);
  return m;
}

SHRINK_TARGET_AVX512 SHRINK_FORCE_INLINE __m512d widen_add16(__m512d total, __m512 part) {
  alignas(64) float lanes[16];  // once a block of 256 elements: through memory rather than an extract
  _mm512_store_ps(lanes, part);
  const __m512d low = _mm512_maskz_cvtps_pd(kAll8, _mm256_load_ps(lanes));
  const __m512d high = _mm512_maskz_cvtps_pd(kAll8, _mm256_load_ps(lanes + 8));
  return _mm512_add_pd(total, _mm512_add_pd(low, high));
}

SHRINK_TARGET_AVX512 inline double lanes_total16(__m512d v) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, v);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

template <class T>
SHRINK_TARGET_AVX512 KlRowSums kl_row_sums_avx512(const T* zs, const T* zt, std::int64_t n, float inv_t, double t,
                                                  float* es, float* et, float* tile_ms, float* tile_mt,
                             const KlGradJob<T>* job) {
  KlOnline st;
  KlRowSums out;
  const __m512 vinv = _mm512_set1_ps(inv_t), zero = _mm512_setzero_ps();
  __mmask16 nan_s = 0, nan_t = 0;
  for (std::int64_t tile = 0, begin = 0; begin < n; ++tile, begin += kKlTile) {
    const std::int64_t end = std::min(n, begin + kKlTile);
    const std::int64_t vend = begin + (end - begin) / 16 * 16;
    __m512 max_s = _mm512_set1_ps(-std::numeric_limits<float>::infinity()), max_t = max_s;
    for (std::int64_t j = begin; j < vend; j += 16) {
      const __m512 a = load16(zs + j), b = load16(zt + j);
      nan_s = static_cast<__mmask16>(nan_s | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q));
      nan_t = static_cast<__mmask16>(nan_t | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q));
      max_s = max16(max_s, a);
      max_t = max16(max_t, b);
    }
    float ms = lanes_max16(max_s), mt = lanes_max16(max_t);
    kl_tile_max_scalar(zs, vend, end, ms, out.nan_student);
    kl_tile_max_scalar(zt, vend, end, mt, out.nan_teacher);
    // The previous row's gradient for this tile goes first: it reads the scratch this tile then overwrites.
    if (job != nullptr) kl_grad_tile(*job, tile);
    st.raise(ms, mt, t);
    tile_ms[tile] = st.offset_student();
    tile_mt[tile] = st.offset_teacher();
    const __m512 vos = _mm512_set1_ps(tile_ms[tile]), vot = _mm512_set1_ps(tile_mt[tile]);
    __m512d sum_s = _mm512_setzero_pd(), sum_t = sum_s, sum_x = sum_s;
    for (std::int64_t j = begin; j < vend;) {
      const std::int64_t block_end = std::min(vend, j + 256);  // 16 float additions a lane, then double
      __m512 part_s = zero, part_t = zero, part_x = zero;
      for (; j < block_end; j += 16) {
        // Lines two tiles ahead are requested while this tile computes: the max loop then finds them in cache.
        _mm_prefetch(reinterpret_cast<const char*>(zs + j + 2 * kKlTile), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(zt + j + 2 * kKlTile), _MM_HINT_T0);
        const __m512 a = _mm512_mul_ps(_mm512_sub_ps(load16(zs + j), vos), vinv);
        const __m512 b = _mm512_mul_ps(_mm512_sub_ps(load16(zt + j), vot), vinv);
        const __m512 ea = exp16(a), eb = exp16(b);
        _mm512_storeu_ps(es + j, ea);
        _mm512_storeu_ps(et + j, eb);
        part_s = _mm512_add_ps(part_s, ea);
        part_t = _mm512_add_ps(part_t, eb);
        // Only where e_t > 0: a masked (-inf) pair adds nothing rather than NaN.
        part_x = _mm512_mask_add_ps(part_x, _mm512_cmp_ps_mask(eb, zero, _CMP_GT_OQ), part_x,
                                    _mm512_mul_ps(eb, _mm512_sub_ps(b, a)));
      }
      sum_s = widen_add16(sum_s, part_s);
      sum_t = widen_add16(sum_t, part_t);
      sum_x = widen_add16(sum_x, part_x);
    }
    st.s_student += lanes_total16(sum_s);
    st.s_teacher += lanes_total16(sum_t);
    st.cross += lanes_total16(sum_x);
    kl_tile_sums_scalar(zs, zt, vend, end, tile_ms[tile], tile_mt[tile], inv_t, es, et, st);
  }
  out.nan_student = out.nan_student || nan_s != 0;
  out.nan_teacher = out.nan_teacher || nan_t != 0;
  out.s_student = st.s_student;
  out.s_teacher = st.s_teacher;
  out.cross = st.cross;
  out.max_student = st.m_student;
  out.max_teacher = st.m_teacher;
  return out;
}

template <class T, bool kStream>
SHRINK_TARGET_AVX512 void kl_grad_range_avx512(T* g, const float* es, const float* et, std::int64_t begin,
                                               std::int64_t end, float fs, float ft, bool accumulate) {
  const __m512 vfs = _mm512_set1_ps(fs), vft = _mm512_set1_ps(ft);
  std::int64_t j = begin;
  for (; j + 16 <= end; j += 16) {
    const __m512 v = _mm512_fmsub_ps(vfs, _mm512_loadu_ps(es + j), _mm512_mul_ps(vft, _mm512_loadu_ps(et + j)));
    if constexpr (kStream)
      _mm512_stream_ps(reinterpret_cast<float*>(g + j), v);
    else
      store16(g + j, accumulate ? _mm512_add_ps(load16(g + j), v) : v);
  }
  for (; j < end; ++j) put_element(g + j, std::fma(fs, es[j], -(ft * et[j])), accumulate);
}
#endif

}  // namespace detail

// The sums stage of one row (see the file comment): e_s, e_t into es, et; each tile's offsets into
// tile_ms, tile_mt (kl_tile_count(n) entries).
// job (optional, the previous row's gradient stage, same n) runs tile by tile beside the sums, so the row's reads
// and the previous row's writes overlap. It may use the same scratch (es, et, tile_ms, tile_mt): each of its tiles
// is read before this row writes that tile.
template <class T>
KlRowSums kl_row_sums(const T* zs, const T* zt, std::int64_t n, double t, float* es, float* et, float* tile_ms,
                      float* tile_mt, const KlGradJob<T>* job = nullptr) {
  const float inv_t = static_cast<float>(1.0 / t);
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if constexpr (std::is_same_v<T, float>)
    if (use_avx512()) return detail::kl_row_sums_avx512(zs, zt, n, inv_t, t, es, et, tile_ms, tile_mt, job);
  if (use_softmax_rows_avx2()) return detail::kl_row_sums_avx2(zs, zt, n, inv_t, t, es, et, tile_ms, tile_mt, job);
#endif
  return detail::kl_row_sums_scalar(zs, zt, n, inv_t, t, es, et, tile_ms, tile_mt, job);
}

// One tile of the gradient stage: g (+)= cs f_s e_s - ct f_t e_t, f = exp((tile offset - final max) / T).
template <class T>
void kl_grad_tile(const KlGradJob<T>& job, std::int64_t tile) {
  const std::int64_t begin = tile * kKlTile, end = std::min(job.n, begin + kKlTile);
  const double t = job.t;
  // The exponent is <= 0 (running maxes never exceed the final one) except for a tile whose offset stood in for a
  // running max of -inf: its exps are all 0, and the clamp keeps their factor finite (not inf * 0 = NaN).
  const float fs = static_cast<float>(
      job.cs * std::exp(std::min(0.0, (job.tile_ms[tile] - static_cast<double>(job.sums.max_student)) / t)));
  const float ft = static_cast<float>(
      job.ct * std::exp(std::min(0.0, (job.tile_mt[tile] - static_cast<double>(job.sums.max_teacher)) / t)));
  T* const g = job.g;
  const float* const es = job.es;
  const float* const et = job.et;
  const bool accumulate = job.accumulate;
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_avx512() || use_softmax_rows_avx2()) {
    const bool wide = std::is_same_v<T, float> && use_avx512();
    auto run = [&](std::int64_t from, std::int64_t to, bool streaming) {
      if constexpr (std::is_same_v<T, float>) {
        if (wide) {
          if (streaming)
            detail::kl_grad_range_avx512<T, true>(g, es, et, from, to, fs, ft, false);
          else
            detail::kl_grad_range_avx512<T, false>(g, es, et, from, to, fs, ft, accumulate);
          return;
        }
      }
      {
        if (streaming)
          detail::kl_grad_range_avx2<T, true>(g, es, et, from, to, fs, ft, false);
        else
          detail::kl_grad_range_avx2<T, false>(g, es, et, from, to, fs, ft, accumulate);
      }
    };
    const auto address = reinterpret_cast<std::uintptr_t>(g + begin);
    if (std::is_same_v<T, float> && job.stream && !accumulate && address % sizeof(float) == 0) {
      // Streaming stores need aligned addresses: the elements up to a 64-byte boundary go the usual way.
      const std::int64_t head =
          std::min<std::int64_t>(end - begin, static_cast<std::int64_t>((64 - address % 64) % 64 / sizeof(float)));
      run(begin, begin + head, false);
      run(begin + head, end, true);
    } else {
      run(begin, end, false);
    }
    return;
  }
#endif
  for (std::int64_t j = begin; j < end; ++j) put_element(g + j, std::fma(fs, es[j], -(ft * et[j])), accumulate);
}

// The whole gradient stage of one row.
template <class T>
void kl_row_grad(const KlGradJob<T>& job) {
  for (std::int64_t tile = 0; tile < kl_tile_count(job.n); ++tile) kl_grad_tile(job, tile);
}

// Orders the streaming stores so far before anything that follows.
inline void kl_rows_done() {
#if defined(SHRINK_CPU_SSE2)
  _mm_sfence();
#endif
}

}  // namespace shrink::cpu
