// Every SIMD level of the CPU loops (scalar, SSE2, AVX2 where the CPU has it) gives identical results.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "shrink/cpu/cast.hpp"
#include "shrink/cpu/epilogue_rows.hpp"
#include "shrink/cpu/int4.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/cpu/reduce.hpp"
#include "shrink/cpu/simd.hpp"

using namespace shrink;
using namespace shrink::cpu;

namespace {

// Runs fn at every level the CPU supports, restoring the default afterwards.
template <class Fn>
void at_each_level(Fn&& fn) {
  const SimdLevel best = detect_simd_level();
  for (SimdLevel level : {SimdLevel::scalar, SimdLevel::sse2, SimdLevel::avx2}) {
    if (static_cast<int>(level) > static_cast<int>(best)) continue;
    simd_level() = level;
    fn(level);
  }
  simd_level() = best;
}

std::vector<float> awkward_values(std::size_t n) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = i % 7 == 0 ? static_cast<float>(static_cast<int>(i % 300) - 150) + 0.5f  // ties
                      : normal(rng);
  return v;
}

}  // namespace

TEST_CASE("quantize, dequantize and fake-quantize runs agree across SIMD levels", "[cpu][simd]") {
  const std::vector<float> x = awkward_values(1000 + 37);  // odd length reaches every tail
  const AffineParams params[] = {AffineParams(1.0f, 0, -128, 127), AffineParams(0.37f, 3, -128, 127),
                                 AffineParams(0.5f, 128, 0, 255), AffineParams(0.25f, 0, -64, 63)};
  for (const AffineParams& p : params) {
    std::vector<std::int8_t> q_ref;
    std::vector<std::uint8_t> u_ref;
    std::vector<float> d_ref, f_ref;
    std::vector<std::uint8_t> m_ref;
    at_each_level([&](SimdLevel level) {
      INFO("level " << static_cast<int>(level) << " scale " << p.scale);
      std::vector<std::int8_t> q(x.size());
      std::vector<std::uint8_t> u(x.size()), m(x.size());
      std::vector<float> d(x.size()), f(x.size());
      // Each output type gets the parameters of its own range.
      const bool unsigned_range = p.low + static_cast<float>(p.zero_point) >= 0.0f;  // qmin >= 0
      if (unsigned_range) {
        CHECK(quantize_run(x.data(), u.data(), static_cast<std::int64_t>(x.size()), p));
        dequantize_run(u.data(), d.data(), static_cast<std::int64_t>(x.size()), p);
      } else {
        CHECK(quantize_run(x.data(), q.data(), static_cast<std::int64_t>(x.size()), p));
        dequantize_run(q.data(), d.data(), static_cast<std::int64_t>(x.size()), p);
      }
      fake_quantize_run(x.data(), f.data(), m.data(), static_cast<std::int64_t>(x.size()), p);
      if (level == SimdLevel::scalar) {
        q_ref = q, u_ref = u, d_ref = d, f_ref = f, m_ref = m;
        for (std::size_t i = 0; i < x.size(); ++i)
          REQUIRE((unsigned_range ? u[i] : static_cast<std::uint8_t>(q[i])) ==
                  static_cast<std::uint8_t>(quantize_value(x[i], p)));
        return;
      }
      CHECK(q == q_ref);
      CHECK(u == u_ref);
      CHECK(d == d_ref);
      CHECK(f == f_ref);
      CHECK(m == m_ref);
    });
  }
}

TEST_CASE("finite_range and the fused finite check agree across SIMD levels", "[cpu][simd]") {
  std::vector<float> x = awkward_values(777);
  x[100] = std::numeric_limits<float>::quiet_NaN();
  x[500] = std::numeric_limits<float>::infinity();
  x[776] = -std::numeric_limits<float>::infinity();
  at_each_level([&](SimdLevel level) {
    INFO("level " << static_cast<int>(level));
    const FiniteRange r = finite_range(x.data(), static_cast<std::int64_t>(x.size()));
    CHECK(r.nonfinite == 3);
    float lo = INFINITY, hi = -INFINITY;
    for (float v : x)
      if (std::isfinite(v)) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
    CHECK(r.min == lo);
    CHECK(r.max == hi);
    CHECK(first_nonfinite(x.data(), static_cast<std::int64_t>(x.size())) == 100);
    std::vector<std::int8_t> q(x.size());
    CHECK_FALSE(
        quantize_run(x.data(), q.data(), static_cast<std::int64_t>(x.size()), AffineParams(1.0f, 0, -128, 127)));
    CHECK(quantize_run(x.data(), q.data(), 100, AffineParams(1.0f, 0, -128, 127)));
  });
}

TEST_CASE("half and bfloat16 casts agree across SIMD levels, NaN payloads, subnormals and ties included",
          "[cpu][simd][half]") {
  std::vector<float> x = awkward_values(4096 + 5);
  std::mt19937 rng(3);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (std::size_t i = 0; i < x.size(); i += 3) {  // every kind of float bit pattern, NaNs and infinities too
    const std::uint32_t b = any_bits(rng);
    std::memcpy(&x[i], &b, sizeof b);
  }
  std::vector<std::uint16_t> ref_bits;
  std::vector<std::uint32_t> ref_back;
  at_each_level([&](SimdLevel level) {
    INFO("level " << static_cast<int>(level));
    std::vector<half> h(x.size());
    std::vector<bfloat16> b(x.size());
    std::vector<float> back(x.size()), back_b(x.size());
    const auto n = static_cast<std::int64_t>(x.size());
    float_to_half(x.data(), h.data(), n);
    half_to_float(h.data(), back.data(), n);
    float_to_bfloat16(x.data(), b.data(), n);
    bfloat16_to_float(b.data(), back_b.data(), n);
    std::vector<std::uint16_t> bits(2 * x.size());
    std::vector<std::uint32_t> back_bits(2 * x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      bits[i] = h[i].to_bits();
      bits[x.size() + i] = b[i].to_bits();
      std::memcpy(&back_bits[i], &back[i], sizeof(float));
      std::memcpy(&back_bits[x.size() + i], &back_b[i], sizeof(float));
    }
    if (level == SimdLevel::scalar) {
      ref_bits = bits;
      ref_back = back_bits;
      return;
    }
    CHECK(bits == ref_bits);
    CHECK(back_bits == ref_back);
  });
}

TEST_CASE("int4 packing and unpacking agree across SIMD levels for every nibble and row length", "[cpu][simd][int4]") {
  for (bool is_signed : {true, false}) {
    for (std::int64_t length : {1, 2, 31, 32, 33, 64, 95, 200}) {
      std::vector<std::int8_t> values(static_cast<std::size_t>(3 * length));
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] =
            static_cast<std::int8_t>(is_signed ? static_cast<int>(i * 7 % 16) - 8 : static_cast<int>(i * 5 % 16));
      const Shape shape{3, length};
      std::vector<std::uint8_t> reference;
      at_each_level([&](SimdLevel level) {
        INFO("level " << static_cast<int>(level) << " length " << length << " signed " << is_signed);
        std::vector<std::uint8_t> packed(static_cast<std::size_t>(int4_packed_bytes(shape)), 0xAA);
        pack_int4_rows(values.data(), shape, packed.data());
        std::vector<std::int8_t> back(values.size(), 99);
        unpack_int4_rows(packed.data(), shape, is_signed, back.data());
        CHECK(back == values);
        if (level == SimdLevel::scalar) {
          reference = packed;
          for (std::int64_t r = 0; r < 3; ++r)  // the documented layout: even element in the low nibble
            for (std::int64_t j = 0; j < length; ++j)
              REQUIRE(load_int4(packed.data() + r * int4_row_bytes(length), j, is_signed) ==
                      values[static_cast<std::size_t>(r * length + j)]);
        }
        CHECK(packed == reference);
      });
    }
  }
}

TEST_CASE("finite_range finds NaN and inf in any block of a long run", "[cpu][simd]") {
  for (std::size_t bad_at :
       {std::size_t{0}, std::size_t{4095}, std::size_t{4096}, std::size_t{9000}, std::size_t{12344}}) {
    std::vector<float> x = awkward_values(12345);
    x[bad_at] = bad_at % 2 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    float lo = INFINITY, hi = -INFINITY;
    for (float v : x)
      if (std::isfinite(v)) lo = std::fmin(lo, v), hi = std::fmax(hi, v);
    at_each_level([&](SimdLevel level) {
      INFO("level " << static_cast<int>(level) << " bad at " << bad_at);
      const FiniteRange r = finite_range(x.data(), static_cast<std::int64_t>(x.size()));
      CHECK(r.nonfinite == 1);
      CHECK(r.min == lo);
      CHECK(r.max == hi);
      CHECK(first_nonfinite(x.data(), static_cast<std::int64_t>(x.size())) == static_cast<std::int64_t>(bad_at));
    });
  }
}

TEST_CASE("SHRINK_SIMD lowers the level by name, never above the CPU's", "[cpu][simd]") {
  CHECK(requested_simd_level(nullptr, SimdLevel::avx2) == SimdLevel::avx2);
  CHECK(requested_simd_level("avx2", SimdLevel::avx512) == SimdLevel::avx2);
  CHECK(requested_simd_level("sse2", SimdLevel::avx512) == SimdLevel::sse2);
  CHECK(requested_simd_level("scalar", SimdLevel::avx2) == SimdLevel::scalar);
  CHECK(requested_simd_level("avx512", SimdLevel::avx2) == SimdLevel::avx2);    // not above the CPU
  CHECK(requested_simd_level("AVX2", SimdLevel::avx512) == SimdLevel::avx512);  // unknown names change nothing
  CHECK(requested_simd_level("", SimdLevel::sse2) == SimdLevel::sse2);
}

TEST_CASE("finish_run gives the same float outputs at every SIMD level: scales, bias, -0, NaN and inf", "[cpu][simd]") {
  std::mt19937 rng(71);
  std::normal_distribution<float> normal;
  const std::int64_t n = 45;  // five vectors of 8 and a tail
  std::vector<float> acc(static_cast<std::size_t>(n)), scales(acc.size()), bias(acc.size());
  for (std::size_t i = 0; i < acc.size(); ++i) {
    acc[i] = normal(rng) * 100.0f;
    scales[i] = std::fabs(normal(rng)) + 0.01f;
    bias[i] = normal(rng);
  }
  acc[3] = -0.0f;
  acc[9] = std::numeric_limits<float>::quiet_NaN();
  acc[17] = std::numeric_limits<float>::infinity();
  acc[20] = std::numeric_limits<float>::denorm_min();
  for (int variant = 0; variant < 4; ++variant) {
    EpilogueOp op;
    if (variant & 1) op = op.with_scales(nullptr, 0, scales.data(), 1);
    if (variant & 2) op.bias = bias.data();
    std::vector<std::uint32_t> first;
    at_each_level([&](SimdLevel) {
      std::vector<float> out(acc.size());
      finish_run(op, acc.data(), 0.75f, 0, n, out.data());
      std::vector<float> in_place = acc;
      finish_run(op, in_place.data(), 0.75f, 0, n, in_place.data());
      std::vector<std::uint32_t> bits(out.size());
      std::memcpy(bits.data(), out.data(), out.size() * sizeof(float));
      CHECK(std::memcmp(in_place.data(), out.data(), out.size() * sizeof(float)) == 0);
      if (first.empty()) first = bits;
      INFO("variant " << variant);
      CHECK(bits == first);
    });
    // The -0 accumulator gives +0 without a bias, as acc * scale + 0.0f does.
    float zero_out;
    std::memcpy(&zero_out, &first[3], sizeof zero_out);
    if (variant < 2) CHECK(!std::signbit(zero_out));
  }
}
