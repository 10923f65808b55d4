// Tests for shrink/cpu/kl_rows.hpp, the forward-KL row kernel: its online softmax over tiles of kKlTile columns
// against a double-precision reference, -inf over whole tiles, huge logits, the NaN flags, the gradient stage run
// beside the next row's sums, and the streaming stores, on every SIMD level.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cpu/kl_rows.hpp"
#include "shrink/cpu/simd.hpp"
#include "support/random.hpp"
#include "support/distill_checks.hpp"
#include "support/simd_levels.hpp"

using namespace shrink;

namespace {

using test::close_rel;
using test::kInf;
using test::SimdLevelGuard;
using test::supported_levels;

constexpr float kPoison = -777.25f;

const char* level_name(cpu::SimdLevel l) {
  switch (l) {
    case cpu::SimdLevel::scalar: return "scalar";
    case cpu::SimdLevel::sse2: return "sse2";
    case cpu::SimdLevel::avx2: return "avx2";
    case cpu::SimdLevel::avx512: return "avx512";
  }
  return "?";
}

// The scratch one row needs: e_s, e_t (n floats each) and the per-tile offsets.
struct Scratch {
  std::vector<float> es, et, ms, mt;
  explicit Scratch(std::int64_t n)
      : es(static_cast<std::size_t>(n)), et(es), ms(static_cast<std::size_t>(cpu::kl_tile_count(n))), mt(ms) {}
};

// The sums stage of one row, and the job that writes its gradient c (q - p) into g.
template <class T>
cpu::KlGradJob<T> row_job(const T* zs, const T* zt, std::int64_t n, double t, double c, Scratch& sc, T* g,
                          const cpu::KlGradJob<T>* previous = nullptr) {
  cpu::KlGradJob<T> job;
  job.sums = cpu::kl_row_sums(zs, zt, n, t, sc.es.data(), sc.et.data(), sc.ms.data(), sc.mt.data(), previous);
  job.g = g;
  job.n = n;
  job.es = sc.es.data();
  job.et = sc.et.data();
  job.tile_ms = sc.ms.data();
  job.tile_mt = sc.mt.data();
  job.t = t;
  job.cs = c / job.sums.s_student;
  job.ct = c / job.sums.s_teacher;
  return job;
}

// T^2 KL(p || q) from the sums, as soft_target.hpp forms it.
double row_loss(const cpu::KlRowSums& s, double t) {
  return t * t * (s.cross / s.s_teacher + std::log(s.s_student / s.s_teacher));
}

// One row through the kernel: the loss T^2 KL(p || q) and the gradient T (q - p) (c = T).
template <class T>
double kernel_row(const std::vector<T>& zs, const std::vector<T>& zt, double t, std::vector<T>& grad) {
  const std::int64_t n = static_cast<std::int64_t>(zs.size());
  Scratch sc(n);
  grad.assign(zs.size(), T(kPoison));
  const cpu::KlGradJob<T> job = row_job(zs.data(), zt.data(), n, t, t, sc, grad.data());
  cpu::kl_row_grad(job);
  cpu::kl_rows_done();
  return row_loss(job.sums, t);
}

// Double-precision reference of one row: T^2 KL(p || q) and T (q - p).
double reference_row(const std::vector<float>& zs, const std::vector<float>& zt, double t, std::vector<double>& grad) {
  auto log_softmax = [t](const std::vector<float>& z) {
    double m = -std::numeric_limits<double>::infinity();
    for (float v : z) m = std::max(m, static_cast<double>(v));
    double s = 0.0;
    for (float v : z) s += std::exp((v - m) / t);
    std::vector<double> l;
    for (float v : z) l.push_back((v - m) / t - std::log(s));
    return l;
  };
  const std::vector<double> ls = log_softmax(zs), lt = log_softmax(zt);
  double kl = 0.0;
  grad.assign(zs.size(), 0.0);
  for (std::size_t j = 0; j < zs.size(); ++j) {
    const double p = std::exp(lt[j]), q = std::exp(ls[j]);
    if (p > 0.0) kl += p * (lt[j] - ls[j]);
    grad[j] = t * (q - p);
  }
  return t * t * kl;
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> out;
  for (const T& x : v) out.push_back(static_cast<float>(x));
  return out;
}

// |got - want| <= tolerance everywhere; reports the first few misses.
template <class T>
void check_grad(const std::vector<T>& got, const std::vector<double>& want, double tolerance_of_largest,
                double relative = 0.0, double absolute = 0.0) {
  REQUIRE(got.size() == want.size());
  double largest = 0.0;
  for (double w : want) largest = std::max(largest, std::fabs(w));
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(static_cast<float>(got[i]));
    const double allowed = tolerance_of_largest * largest + relative * std::fabs(want[i]) + absolute;
    if (!(std::fabs(g - want[i]) <= allowed) && reported++ < 5)
      FAIL_CHECK("grad[" << i << "] = " << g << ", reference " << want[i] << " (allowed " << allowed << ")");
  }
}

// A row built from a function of the column.
std::vector<float> row_of(std::int64_t n, const std::function<float(std::int64_t)>& f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) v[static_cast<std::size_t>(j)] = f(j);
  return v;
}

float wobble(std::int64_t j, float scale) { return scale * std::sin(0.37f * static_cast<float>(j)); }

}  // namespace

TEST_CASE("kl_tile_count rounds up to whole tiles", "[cpu][kl_rows]") {
  CHECK(cpu::kKlTile == 1024);
  CHECK(cpu::kl_tile_count(1) == 1);
  CHECK(cpu::kl_tile_count(1024) == 1);
  CHECK(cpu::kl_tile_count(1025) == 2);
  CHECK(cpu::kl_tile_count(5000) == 5);
}

TEST_CASE("kl_rows' online softmax: a max rising tile after tile, and a max in the first tile, against double",
          "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  const std::int64_t n = 5000;
  const std::vector<float> noise = test::random_values(static_cast<std::size_t>(n), 3, 0.25f);
  auto x = [n](std::int64_t j) { return static_cast<float>(j) / static_cast<float>(n); };
  struct Case {
    const char* what;
    std::vector<float> s, t;
  };
  const std::vector<Case> cases = {
      {"both rising (every tile raises both maxes)", row_of(n, [&](std::int64_t j) { return 14.0f * x(j); }),
       row_of(n, [&](std::int64_t j) { return 10.0f * x(j) + noise[static_cast<std::size_t>(j)]; })},
      {"both falling (the max in the first tile)", row_of(n, [&](std::int64_t j) { return -14.0f * x(j); }),
       row_of(n, [&](std::int64_t j) { return -9.0f * x(j) + noise[static_cast<std::size_t>(j)]; })},
      {"student rising, teacher falling", row_of(n, [&](std::int64_t j) { return 12.0f * x(j); }),
       row_of(n, [&](std::int64_t j) { return -6.0f * x(j); })},
      {"staircase: each tile 3 above the last", row_of(n, [&](std::int64_t j) { return 3.0f * static_cast<float>(j / 1024) + wobble(j, 1.0f); }),
       row_of(n, [&](std::int64_t j) { return 2.0f * static_cast<float>(j / 1024) + wobble(j + 11, 1.5f); })},
  };
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (const Case& c : cases) {
      for (double t : {1.0, 0.7, 2.5}) {
        INFO(level_name(level) << ": " << c.what << ", T = " << t);
        std::vector<float> grad;
        std::vector<double> want;
        const double loss = kernel_row(c.s, c.t, t, grad);
        const double ref = reference_row(c.s, c.t, t, want);
        INFO("loss " << loss << ", reference " << ref);
        CHECK(close_rel(loss, ref, 1e-6));
        check_grad(grad, want, 1e-6);
      }
    }
  }
}

TEST_CASE("kl_rows: row lengths around the tile and the vector widths, half and bfloat16 rows", "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  for (std::int64_t n : {1, 2, 7, 8, 15, 16, 17, 1023, 1024, 1025, 2048, 3000}) {
    const std::vector<float> s = test::random_values(static_cast<std::size_t>(n), 10 + static_cast<unsigned>(n), 2.0f);
    const std::vector<float> t = test::random_values(static_cast<std::size_t>(n), 20 + static_cast<unsigned>(n), 2.0f);
    for (cpu::SimdLevel level : supported_levels()) {
      cpu::simd_level() = level;
      INFO(level_name(level) << ", n = " << n);
      std::vector<float> g;
      std::vector<double> want;
      const double ref = reference_row(s, t, 1.5, want);
      CHECK(close_rel(kernel_row(s, t, 1.5, g), ref, 1e-6));
      check_grad(g, want, 1e-6);
      // 16-bit rows: the same arithmetic on the rounded values, the gradient rounded once more.
      std::vector<half> hs, ht, hg;
      std::vector<bfloat16> bs, bt, bg;
      for (std::size_t j = 0; j < s.size(); ++j) {
        hs.push_back(half(s[j]));
        ht.push_back(half(t[j]));
        bs.push_back(bfloat16(s[j]));
        bt.push_back(bfloat16(t[j]));
      }
      const double href = reference_row(widened(hs), widened(ht), 1.5, want);
      CHECK(close_rel(kernel_row(hs, ht, 1.5, hg), href, 1e-6));
      check_grad(hg, want, 1e-6, 0x1p-11, 0x1p-25);
      const double bref = reference_row(widened(bs), widened(bt), 1.5, want);
      CHECK(close_rel(kernel_row(bs, bt, 1.5, bg), bref, 1e-6));
      check_grad(bg, want, 1e-6, 0x1p-8);
    }
  }
}

TEST_CASE("kl_rows: -inf over whole tiles of the student and/or the teacher, logits of +-1e4", "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  const std::int64_t n = 4500, tile = cpu::kKlTile;
  auto in_tile = [tile](std::int64_t j, std::int64_t k) { return j >= k * tile && j < (k + 1) * tile; };
  struct Case {
    const char* what;
    std::function<float(std::int64_t)> s, t;
    bool infinite;  // the teacher has mass where the student has none: +inf
  };
  const std::vector<Case> cases = {
      {"both -inf over tile 0", [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : wobble(j, 2.0f); },
       [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : wobble(j + 3, 2.0f); }, false},
      {"teacher -inf over tiles 0, 1 and 3", [&](std::int64_t j) { return wobble(j, 2.0f); },
       [&](std::int64_t j) { return in_tile(j, 0) || in_tile(j, 1) || in_tile(j, 3) ? -kInf : wobble(j + 5, 3.0f); },
       false},
      {"student -inf over tile 2 (the teacher there too), teacher over the last, partial tile",
       [&](std::int64_t j) { return in_tile(j, 2) ? -kInf : wobble(j, 2.0f); },
       [&](std::int64_t j) { return in_tile(j, 2) || in_tile(j, 4) ? -kInf : wobble(j + 1, 2.0f); }, false},
      {"both -inf over tiles 0 to 3: only the partial tail tile is finite",
       [&](std::int64_t j) { return j < 4 * tile ? -kInf : wobble(j, 2.0f); },
       [&](std::int64_t j) { return j < 4 * tile ? -kInf : wobble(j + 2, 2.0f); }, false},
      {"teacher -inf over tile 0, then logits near -1e4", [&](std::int64_t j) { return wobble(j, 2.0f); },
       [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : -1e4f + wobble(j, 2.0f); }, false},
      {"both -inf over tile 0, then student logits near -1e4",
       [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : -1e4f + wobble(j, 2.0f); },
       [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : wobble(j + 7, 1.0f); }, false},
      {"student -inf over tile 0 where the teacher sits 2e4 below its later max",
       [&](std::int64_t j) { return in_tile(j, 0) ? -kInf : 1e4f + wobble(j, 1.0f); },
       [&](std::int64_t j) { return in_tile(j, 0) ? -1e4f : 1e4f + wobble(j + 2, 1.0f); }, false},
      {"+-1e4", [&](std::int64_t j) { return j % 3 == 0 ? 1e4f : -1e4f; },
       [&](std::int64_t j) { return j % 2 == 0 ? 1e4f - static_cast<float>(j % 5) : -1e4f; }, false},
      {"-1e4 in the first tiles, +1e4 later", [&](std::int64_t j) { return j < 2 * tile ? -1e4f : 1e4f + wobble(j, 1.0f); },
       [&](std::int64_t j) { return j < 2 * tile ? -1e4f + wobble(j, 1.0f) : 1e4f + wobble(j + 2, 1.0f); }, false},
      {"student -inf over tile 1 where the teacher has mass",
       [&](std::int64_t j) { return in_tile(j, 1) ? -kInf : wobble(j, 2.0f); },
       [&](std::int64_t j) { return wobble(j + 4, 2.0f); }, true},
  };
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (const Case& c : cases) {
      INFO(level_name(level) << ": " << c.what);
      const std::vector<float> s = row_of(n, c.s), t = row_of(n, c.t);
      std::vector<float> grad;
      std::vector<double> want;
      const double loss = kernel_row(s, t, 1.25, grad);
      const double ref = reference_row(s, t, 1.25, want);
      INFO("loss " << loss << ", reference " << ref);
      if (c.infinite) {
        CHECK(loss == std::numeric_limits<double>::infinity());
      } else {
        CHECK(std::isfinite(loss));
        CHECK(close_rel(loss, ref, 1e-6));
      }
      // The gradient T (q - p) is finite even where the loss is not.
      CHECK(std::all_of(grad.begin(), grad.end(), [](float g) { return std::isfinite(g); }));
      check_grad(grad, want, 1e-6);
    }
  }
}

TEST_CASE("kl_rows flags NaN wherever it is and reports both rows' maxes", "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t n : {5, 16, 1030, 2100}) {
      for (std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
        for (bool in_student : {true, false}) {
          INFO(level_name(level) << ", n = " << n << ", NaN at " << at << (in_student ? " of the student" : " of the teacher"));
          std::vector<float> s = test::random_values(static_cast<std::size_t>(n), 1), t = test::random_values(s.size(), 2);
          (in_student ? s : t)[static_cast<std::size_t>(at)] = nan;
          Scratch sc(n);
          const cpu::KlRowSums sums =
              cpu::kl_row_sums(s.data(), t.data(), n, 1.0, sc.es.data(), sc.et.data(), sc.ms.data(), sc.mt.data());
          CHECK(sums.nan_student == in_student);
          CHECK(sums.nan_teacher == !in_student);
          std::vector<half> hs, ht;
          for (std::size_t j = 0; j < s.size(); ++j) {
            hs.push_back(half(s[j]));
            ht.push_back(half(t[j]));
          }
          const cpu::KlRowSums hsums =
              cpu::kl_row_sums(hs.data(), ht.data(), n, 1.0, sc.es.data(), sc.et.data(), sc.ms.data(), sc.mt.data());
          CHECK(hsums.nan_student == in_student);
          CHECK(hsums.nan_teacher == !in_student);
        }
      }
      std::vector<float> s = test::random_values(static_cast<std::size_t>(n), 5), t = test::random_values(s.size(), 6);
      s[static_cast<std::size_t>(n - 1)] = 50.0f;
      t[0] = -kInf;
      t[static_cast<std::size_t>(n / 2)] = 40.0f;
      Scratch sc(n);
      const cpu::KlRowSums sums =
          cpu::kl_row_sums(s.data(), t.data(), n, 2.0, sc.es.data(), sc.et.data(), sc.ms.data(), sc.mt.data());
      CHECK_FALSE(sums.nan_student);
      CHECK_FALSE(sums.nan_teacher);
      CHECK(sums.max_student == 50.0f);
      CHECK(sums.max_teacher == 40.0f);
    }
  }
}

TEST_CASE("kl_rows: a gradient stage run beside the next row's sums equals one run alone; accumulate adds",
          "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t n : {9, 1024, 3100}) {
      INFO(level_name(level) << ", n = " << n);
      const std::vector<float> s = test::random_values(static_cast<std::size_t>(2 * n), 31, 2.0f);
      const std::vector<float> t = test::random_values(s.size(), 32, 2.0f);
      const double temp = 1.5, c = 0.25;
      // Alone: row 0's gradient after its sums.
      std::vector<float> alone(static_cast<std::size_t>(n), kPoison);
      Scratch a(n);
      const cpu::KlGradJob<float> job0 = row_job(s.data(), t.data(), n, temp, c, a, alone.data());
      cpu::kl_row_grad(job0);
      // Beside: row 0's job handed to row 1's sums (its own scratch set), which runs it tile by tile.
      std::vector<float> beside(static_cast<std::size_t>(n), kPoison);
      Scratch b0(n), b1(n);
      const cpu::KlGradJob<float> first = row_job(s.data(), t.data(), n, temp, c, b0, beside.data());
      const cpu::KlGradJob<float> second = row_job(s.data() + n, t.data() + n, n, temp, c, b1, beside.data(), &first);
      CHECK(std::memcmp(alone.data(), beside.data(), alone.size() * sizeof(float)) == 0);
      // Row 1's sums are those of row 1 alone.
      Scratch c1(n);
      const cpu::KlRowSums lone =
          cpu::kl_row_sums(s.data() + n, t.data() + n, n, temp, c1.es.data(), c1.et.data(), c1.ms.data(), c1.mt.data());
      CHECK(row_loss(second.sums, temp) == row_loss(lone, temp));
      // accumulate: g + fresh, one float rounding (the same float value is added).
      std::vector<float> acc = test::random_values(static_cast<std::size_t>(n), 77, 0.01f);
      const std::vector<float> before = acc;
      cpu::KlGradJob<float> add = job0;
      add.g = acc.data();
      add.accumulate = true;
      cpu::kl_row_grad(add);
      for (std::size_t j = 0; j < acc.size(); ++j)
        if (acc[j] != before[j] + alone[j]) {
          FAIL_CHECK("accumulate at " << j << ": " << acc[j] << " != " << before[j] << " + " << alone[j]);
          break;
        }
    }
  }
}

TEST_CASE("kl_rows' streaming stores from a misaligned start write the same values and nothing around them",
          "[cpu][kl_rows]") {
  SimdLevelGuard guard;
  for (cpu::SimdLevel level : supported_levels()) {
    cpu::simd_level() = level;
    for (std::int64_t n : {5, 16, 100, 1024, 2500}) {
      for (std::int64_t misalign : {0, 1, 3, 15}) {
        INFO(level_name(level) << ", n = " << n << ", start " << misalign << " floats past 64 bytes");
        const std::vector<float> s = test::random_values(static_cast<std::size_t>(n), 41, 2.0f);
        const std::vector<float> t = test::random_values(s.size(), 42, 2.0f);
        std::vector<float> plain_buffer(static_cast<std::size_t>(n + 64), kPoison), stream_buffer = plain_buffer;
        auto aligned = [misalign](std::vector<float>& b) {
          float* p = b.data();
          while (reinterpret_cast<std::uintptr_t>(p) % 64 != 0) ++p;
          return p + misalign;
        };
        float* plain = aligned(plain_buffer);
        float* streamed = aligned(stream_buffer);
        Scratch sc(n);
        cpu::KlGradJob<float> job = row_job(s.data(), t.data(), n, 1.0, 1.0, sc, plain);
        cpu::kl_row_grad(job);
        job.g = streamed;
        job.stream = true;
        cpu::kl_row_grad(job);
        cpu::kl_rows_done();
        CHECK(std::memcmp(plain, streamed, static_cast<std::size_t>(n) * sizeof(float)) == 0);
        const std::ptrdiff_t head = streamed - stream_buffer.data();
        for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(stream_buffer.size()); ++i)
          if ((i < head || i >= head + n) && stream_buffer[static_cast<std::size_t>(i)] != kPoison) {
            FAIL_CHECK("written outside the row at " << i - head);
            break;
          }
      }
    }
  }
}
