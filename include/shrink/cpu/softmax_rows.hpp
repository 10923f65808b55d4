// CPU row passes behind the distillation losses: per-row max and NaN scan, softmax sums at a temperature, and
// the gradient writes, for float, half and bfloat16 rows (arithmetic in float, row sums in double).
//
// Notation for one row at temperature T (inv_t = 1 / T), m = the row's max:
//   a_j = (z_j - m) * inv_t   (<= 0),   e_j = exp(a_j),   S = sum_j e_j,   softmax_j = e_j / S,
//   log softmax_j = a_j - log S.
// exp comes from cpu/vector_math.hpp (exp8 and its bit-identical scalar twin); results below the smallest
// normal float flush to 0, so probabilities under ~1e-38 count as 0. Sums gather 16 vector steps in float lanes
// and then move to double: each float partial adds at most 16 terms.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "shrink/core/config.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/simd.hpp"
#include "shrink/cpu/vector_math.hpp"
#include "shrink/cpu/widening_loads.hpp"

namespace shrink::cpu {

// The vector paths need AVX2, FMA and F16C (every AVX2 CPU in practice; asked anyway).
inline bool use_softmax_rows_avx2() { return use_avx2_fma() && use_avx2_f16c(); }

inline float element_to_float(float x) { return x; }
inline float element_to_float(half x) { return x.to_float(); }
inline float element_to_float(bfloat16 x) { return x.to_float(); }

template <class T>
T float_to_element(float x) {
  if constexpr (std::is_same_v<T, float>)
    return x;
  else
    return T(x);
}

// Writes value to *g, or adds it to what *g holds.
template <class T>
void put_element(T* g, float value, bool accumulate) {
  *g = float_to_element<T>(accumulate ? element_to_float(*g) + value : value);
}

struct RowScan {
  float max = -std::numeric_limits<float>::infinity();
  bool has_nan = false;
};

// Sums of one row pass: S of the first row, S of the second, and a weighted cross term.
struct RowSums {
  double first = 0.0;
  double second = 0.0;
  double cross = 0.0;
};

// The Jensen-Shannon row constants: 1 / S of both rows, the weight beta of the teacher.
struct JsdRow {
  float inv_s_student, inv_s_teacher, beta;
};

namespace detail {

template <class T>
RowScan scan_row_scalar(const T* z, std::int64_t begin, std::int64_t n, RowScan s) {
  for (std::int64_t j = begin; j < n; ++j) {
    const float v = element_to_float(z[j]);
    s.has_nan = s.has_nan || v != v;
    s.max = std::fmax(s.max, v);
  }
  return s;
}

// One element's pieces: q = student probability, lq_m = log(q / m) (0 where q = 0), likewise p.
struct JsdTerms {
  float q, lq_m, p, lp_m;
};

// log(q / m) rather than log q - log m: exact 0 where q == m (equal rows), and no log of an underflowed q.
inline JsdTerms jsd_terms_scalar(float a_s, float a_t, const JsdRow& r) {
  const float q = exp_scalar(a_s) * r.inv_s_student, p = exp_scalar(a_t) * r.inv_s_teacher;
  // An explicit fma, as in jsd_terms8: left to -ffp-contract the two paths could round m differently.
  const float m = std::fma(r.beta, p, (1.0f - r.beta) * q);
  return {q, q > 0.0f ? log_scalar(q / m) : 0.0f, p, p > 0.0f ? log_scalar(p / m) : 0.0f};
}

#if defined(SHRINK_CPU_AVX2_DISPATCH)
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void store8(half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void store8(bfloat16* p, __m256 v) {
  // Round to nearest even at bit 16 (gradients are finite or +-inf here; a NaN keeps its top bits).
  const __m256i x = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}

template <class T>
SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void put8(T* p, __m256 v, bool accumulate) {
  store8(p, accumulate ? _mm256_add_ps(load8(p), v) : v);
}

// Float lanes that hand their sum to double every kFlush additions.
struct LaneSum {
  static constexpr int kFlush = 16;
  __m256 part;
  __m256d total;
  int count = 0;

  SHRINK_TARGET_AVX2_FMA_F16C LaneSum() : part(_mm256_setzero_ps()), total(_mm256_setzero_pd()) {}
  SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void add(__m256 v) {
    part = _mm256_add_ps(part, v);
    if (++count == kFlush) flush();
  }
  SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE void flush() {
    total = _mm256_add_pd(total, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(part)),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(part, 1))));
    part = _mm256_setzero_ps();
    count = 0;
  }
  SHRINK_TARGET_AVX2_FMA_F16C double sum() {
    flush();
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, total);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
};

template <class T>
SHRINK_TARGET_AVX2_FMA_F16C RowScan scan_row_avx2(const T* z, std::int64_t n) {
  __m256 mx = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 nan = _mm256_setzero_ps();
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = load8(z + j);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mx = _mm256_max_ps(mx, v);
  }
  alignas(32) float m[8];
  _mm256_store_ps(m, mx);
  RowScan s;
  for (float v : m) s.max = std::fmax(s.max, v);
  s.has_nan = _mm256_movemask_ps(nan) != 0;
  return scan_row_scalar(z, j, n, s);
}

// S_a, S_b and cross = sum over e_w > 0 of e_w * (a_w - a_other), where w is row a when weight_first, else b.
template <class T>
SHRINK_TARGET_AVX2_FMA_F16C RowSums pair_sums_avx2(const T* za, const T* zb, std::int64_t n, float ma, float mb,
                                                   float inv_t, bool weight_first) {
  const __m256 vma = _mm256_set1_ps(ma), vmb = _mm256_set1_ps(mb), vinv = _mm256_set1_ps(inv_t);
  const __m256 zero = _mm256_setzero_ps();
  LaneSum sa, sb, cross;
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_sub_ps(load8(za + j), vma), vinv);
    const __m256 b = _mm256_mul_ps(_mm256_sub_ps(load8(zb + j), vmb), vinv);
    const __m256 ea = exp8(a), eb = exp8(b);
    sa.add(ea);
    sb.add(eb);
    const __m256 w = weight_first ? ea : eb;
    const __m256 diff = weight_first ? _mm256_sub_ps(a, b) : _mm256_sub_ps(b, a);
    // 0 * (anything) where the weight is 0: a masked (-inf) entry adds nothing, not NaN.
    cross.add(_mm256_and_ps(_mm256_cmp_ps(w, zero, _CMP_GT_OQ), _mm256_mul_ps(w, diff)));
  }
  RowSums s{sa.sum(), sb.sum(), cross.sum()};
  for (; j < n; ++j) {
    const float a = (element_to_float(za[j]) - ma) * inv_t, b = (element_to_float(zb[j]) - mb) * inv_t;
    const float ea = exp_scalar(a), eb = exp_scalar(b);
    s.first += ea;
    s.second += eb;
    const float w = weight_first ? ea : eb;
    if (w > 0.0f) s.cross += w * (weight_first ? a - b : b - a);
  }
  return s;
}

// g_j (+)= c * e_a_j * ((a_j - b_j) - shift) where e_a_j > 0, else 0: the reverse-KL gradient.
template <class T, class G>
SHRINK_TARGET_AVX2_FMA_F16C void weighted_log_ratio_gradient_avx2(const T* za, const T* zb, G* g, std::int64_t n,
                                                                  float ma, float mb, float inv_t, float c, float shift,
                                                                  bool accumulate) {
  const __m256 vma = _mm256_set1_ps(ma), vmb = _mm256_set1_ps(mb), vinv = _mm256_set1_ps(inv_t);
  const __m256 vc = _mm256_set1_ps(c), vshift = _mm256_set1_ps(shift), zero = _mm256_setzero_ps();
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_sub_ps(load8(za + j), vma), vinv);
    const __m256 b = _mm256_mul_ps(_mm256_sub_ps(load8(zb + j), vmb), vinv);
    const __m256 ea = exp8(a);
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(vc, ea), _mm256_sub_ps(_mm256_sub_ps(a, b), vshift));
    put8(g + j, _mm256_and_ps(_mm256_cmp_ps(ea, zero, _CMP_GT_OQ), v), accumulate);
  }
  for (; j < n; ++j) {
    const float a = (element_to_float(za[j]) - ma) * inv_t, b = (element_to_float(zb[j]) - mb) * inv_t;
    const float ea = exp_scalar(a);
    put_element(g + j, ea > 0.0f ? (c * ea) * ((a - b) - shift) : 0.0f, accumulate);
  }
}

struct JsdTerms8 {
  __m256 q, lq_m, p, lp_m;
};

SHRINK_TARGET_AVX2_FMA_F16C SHRINK_FORCE_INLINE JsdTerms8 jsd_terms8(__m256 a_s, __m256 a_t, const JsdRow& r) {
  const __m256 zero = _mm256_setzero_ps(), beta = _mm256_set1_ps(r.beta);
  const __m256 q = _mm256_mul_ps(exp8(a_s), _mm256_set1_ps(r.inv_s_student));
  const __m256 p = _mm256_mul_ps(exp8(a_t), _mm256_set1_ps(r.inv_s_teacher));
  const __m256 m = _mm256_fmadd_ps(beta, p, _mm256_mul_ps(_mm256_set1_ps(1.0f - r.beta), q));
  const __m256 lq = log8(_mm256_div_ps(q, m));
  const __m256 lp = log8(_mm256_div_ps(p, m));
  return {q, _mm256_and_ps(_mm256_cmp_ps(q, zero, _CMP_GT_OQ), lq), p, _mm256_and_ps(_mm256_cmp_ps(p, zero, _CMP_GT_OQ), lp)};
}

// first = KL(q || m) = sum q (log q - log m), second = KL(p || m), over one row.
template <class T>
SHRINK_TARGET_AVX2_FMA_F16C RowSums jsd_sums_avx2(const T* zs, const T* zt, std::int64_t n, float ms, float mt, float inv_t,
                                                  const JsdRow& r) {
  const __m256 vms = _mm256_set1_ps(ms), vmt = _mm256_set1_ps(mt), vinv = _mm256_set1_ps(inv_t);
  LaneSum kq, kp;
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const JsdTerms8 t = jsd_terms8(_mm256_mul_ps(_mm256_sub_ps(load8(zs + j), vms), vinv),
                                   _mm256_mul_ps(_mm256_sub_ps(load8(zt + j), vmt), vinv), r);
    kq.add(_mm256_mul_ps(t.q, t.lq_m));
    kp.add(_mm256_mul_ps(t.p, t.lp_m));
  }
  RowSums s{kq.sum(), kp.sum(), 0.0};
  for (; j < n; ++j) {
    const JsdTerms t = jsd_terms_scalar((element_to_float(zs[j]) - ms) * inv_t, (element_to_float(zt[j]) - mt) * inv_t, r);
    s.first += t.q * t.lq_m;
    s.second += t.p * t.lp_m;
  }
  return s;
}

// g (+)= c * q * (lq_m - kl_qm): the student side of the JSD gradient (c holds (1 - beta)).
template <class T, class G>
SHRINK_TARGET_AVX2_FMA_F16C void jsd_gradient_avx2(const T* zs, const T* zt, G* g, std::int64_t n, float ms, float mt,
                                                   float inv_t, const JsdRow& r, float c, float kl_qm, bool accumulate) {
  const __m256 vms = _mm256_set1_ps(ms), vmt = _mm256_set1_ps(mt), vinv = _mm256_set1_ps(inv_t);
  const __m256 vc = _mm256_set1_ps(c), vk = _mm256_set1_ps(kl_qm), zero = _mm256_setzero_ps();
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const JsdTerms8 t = jsd_terms8(_mm256_mul_ps(_mm256_sub_ps(load8(zs + j), vms), vinv),
                                   _mm256_mul_ps(_mm256_sub_ps(load8(zt + j), vmt), vinv), r);
    const __m256 v = _mm256_mul_ps(_mm256_mul_ps(vc, t.q), _mm256_sub_ps(t.lq_m, vk));
    put8(g + j, _mm256_and_ps(_mm256_cmp_ps(t.q, zero, _CMP_GT_OQ), v), accumulate);
  }
  for (; j < n; ++j) {
    const JsdTerms t = jsd_terms_scalar((element_to_float(zs[j]) - ms) * inv_t, (element_to_float(zt[j]) - mt) * inv_t, r);
    put_element(g + j, t.q > 0.0f ? (c * t.q) * (t.lq_m - kl_qm) : 0.0f, accumulate);
  }
}

// S = sum e_j and sum a_j (cross) of one row at temperature 1 / inv_t.
template <class T>
SHRINK_TARGET_AVX2_FMA_F16C RowSums single_sums_avx2(const T* z, std::int64_t n, float m, float inv_t) {
  const __m256 vm = _mm256_set1_ps(m), vinv = _mm256_set1_ps(inv_t);
  LaneSum s, total;
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 a = _mm256_mul_ps(_mm256_sub_ps(load8(z + j), vm), vinv);
    s.add(exp8(a));
    total.add(a);
  }
  RowSums r{s.sum(), 0.0, total.sum()};
  for (; j < n; ++j) {
    const float a = (element_to_float(z[j]) - m) * inv_t;
    r.first += exp_scalar(a);
    r.cross += a;
  }
  return r;
}

// g_j (+)= c * e_j - shift: the cross-entropy gradient before its label entry.
template <class T, class G>
SHRINK_TARGET_AVX2_FMA_F16C void scaled_softmax_gradient_avx2(const T* z, G* g, std::int64_t n, float m, float inv_t,
                                                              float c, float shift, bool accumulate) {
  const __m256 vm = _mm256_set1_ps(m), vinv = _mm256_set1_ps(inv_t), vc = _mm256_set1_ps(c), vs = _mm256_set1_ps(shift);
  std::int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    put8(g + j, _mm256_fmsub_ps(vc, exp8(_mm256_mul_ps(_mm256_sub_ps(load8(z + j), vm), vinv)), vs), accumulate);
  for (; j < n; ++j)
    put_element(g + j, std::fma(c, exp_scalar((element_to_float(z[j]) - m) * inv_t), -shift), accumulate);
}
#endif

}  // namespace detail

// Max and NaN flag of one row.
template <class T>
RowScan scan_row(const T* z, std::int64_t n) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::scan_row_avx2(z, n);
#endif
  return detail::scan_row_scalar(z, 0, n, RowScan{});
}

// Softmax sums of two rows at one temperature: first = S_a, second = S_b, cross = sum over e_w > 0 of
// e_w * (a_w - a_other) with w = a when weight_first (reverse KL: the student), else b. (The forward KL has its
// own one-read kernel in kl_rows.hpp.)
template <class T>
RowSums pair_sums(const T* za, const T* zb, std::int64_t n, float ma, float mb, float inv_t, bool weight_first) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::pair_sums_avx2(za, zb, n, ma, mb, inv_t, weight_first);
#endif
  RowSums s;
  for (std::int64_t j = 0; j < n; ++j) {
    const float a = (element_to_float(za[j]) - ma) * inv_t, b = (element_to_float(zb[j]) - mb) * inv_t;
    const float ea = exp_scalar(a), eb = exp_scalar(b);
    s.first += ea;
    s.second += eb;
    const float w = weight_first ? ea : eb;
    if (w > 0.0f) s.cross += w * (weight_first ? a - b : b - a);
  }
  return s;
}

// g (+)= c * e_a * ((a - b) - shift) where e_a > 0, else 0.
template <class T, class G>
void weighted_log_ratio_gradient(const T* za, const T* zb, G* g, std::int64_t n, float ma, float mb, float inv_t, float c,
                                 float shift, bool accumulate) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2())
    return detail::weighted_log_ratio_gradient_avx2(za, zb, g, n, ma, mb, inv_t, c, shift, accumulate);
#endif
  for (std::int64_t j = 0; j < n; ++j) {
    const float a = (element_to_float(za[j]) - ma) * inv_t, b = (element_to_float(zb[j]) - mb) * inv_t;
    const float ea = exp_scalar(a);
    put_element(g + j, ea > 0.0f ? (c * ea) * ((a - b) - shift) : 0.0f, accumulate);
  }
}

// first = KL(q || m), second = KL(p || m) of one row (student a, teacher b).
template <class T>
RowSums jsd_sums(const T* zs, const T* zt, std::int64_t n, float ms, float mt, float inv_t, const JsdRow& r) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::jsd_sums_avx2(zs, zt, n, ms, mt, inv_t, r);
#endif
  RowSums s;
  for (std::int64_t j = 0; j < n; ++j) {
    const detail::JsdTerms t =
        detail::jsd_terms_scalar((element_to_float(zs[j]) - ms) * inv_t, (element_to_float(zt[j]) - mt) * inv_t, r);
    s.first += t.q * t.lq_m;
    s.second += t.p * t.lp_m;
  }
  return s;
}

// g (+)= c * q * ((log q - log m) - kl_qm) where q > 0, else 0.
template <class T, class G>
void jsd_gradient(const T* zs, const T* zt, G* g, std::int64_t n, float ms, float mt, float inv_t, const JsdRow& r,
                  float c, float kl_qm, bool accumulate) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::jsd_gradient_avx2(zs, zt, g, n, ms, mt, inv_t, r, c, kl_qm, accumulate);
#endif
  for (std::int64_t j = 0; j < n; ++j) {
    const detail::JsdTerms t =
        detail::jsd_terms_scalar((element_to_float(zs[j]) - ms) * inv_t, (element_to_float(zt[j]) - mt) * inv_t, r);
    put_element(g + j, t.q > 0.0f ? (c * t.q) * (t.lq_m - kl_qm) : 0.0f, accumulate);
  }
}

// first = S, cross = sum of a_j, for one row.
template <class T>
RowSums single_sums(const T* z, std::int64_t n, float m, float inv_t) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::single_sums_avx2(z, n, m, inv_t);
#endif
  RowSums r;
  for (std::int64_t j = 0; j < n; ++j) {
    const float a = (element_to_float(z[j]) - m) * inv_t;
    r.first += exp_scalar(a);
    r.cross += a;
  }
  return r;
}

// g (+)= c * e - shift.
template <class T, class G>
void scaled_softmax_gradient(const T* z, G* g, std::int64_t n, float m, float inv_t, float c, float shift,
                             bool accumulate) {
#if defined(SHRINK_CPU_AVX2_DISPATCH)
  if (use_softmax_rows_avx2()) return detail::scaled_softmax_gradient_avx2(z, g, n, m, inv_t, c, shift, accumulate);
#endif
  for (std::int64_t j = 0; j < n; ++j)
    put_element(g + j, std::fma(c, exp_scalar((element_to_float(z[j]) - m) * inv_t), -shift), accumulate);
}

}  // namespace shrink::cpu
