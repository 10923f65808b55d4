// Tests for shrink/cuda/soft_target.hpp: [gpu] cases run kl_div, reverse_kl_div and jensen_shannon (loss only and with
// the gradient) on every row path against distill/soft_target.hpp on the same random logits, for float, half and
// bfloat16, odd vocabularies up to 262144, row masks, row strides and misaligned rows (input gaps hold NaN, so a read
// outside the rows is flagged), -inf entries, accumulate and grad_scale; gradient buffers start poisoned and their gaps
// must stay so; two runs must give the same bits. Device-side checks (NaN, +inf, rows without a finite logit) must
// throw with Synchronize::yes. [host] cases check that every argument is validated before any CUDA call.
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/soft_target.hpp"
#include "shrink/distill/soft_target.hpp"
#include "support/element_types.hpp"
#include "support/float_compare.hpp"
#include "support/special_floats.hpp"

namespace {

using Catch::Matchers::Contains;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::Strides;
using shrink::TensorView;
using shrink::cuda::DeviceLoss;
using shrink::cuda::SoftTargetPath;
using shrink::cuda::Synchronize;
using shrink::cuda::Workspace;
using shrink::distill::Reduction;
using shrink::test::DeviceBuffer;
using shrink::test::fake_device_pointer;
using shrink::test::kInf;
using shrink::test::kNaN;
using shrink::test::type_name;
using shrink::test::ulp_at;

constexpr double kBeta = 0.3;
constexpr float kGradPoison = -777.25f;  // far from any gradient: an element left unwritten cannot pass

enum class Kind { kl, reverse, jsd };
const Kind kKinds[] = {Kind::kl, Kind::reverse, Kind::jsd};
const SoftTargetPath kSoftTargetPaths[] = {SoftTargetPath::generic, SoftTargetPath::shared_row, SoftTargetPath::cluster,
                                           SoftTargetPath::automatic};

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kl: return "kl_div";
    case Kind::reverse: return "reverse_kl_div";
    case Kind::jsd: return "jensen_shannon";
  }
  return "?";
}

shrink::cuda::SoftTargetLoss loss_of(Kind k) {
  switch (k) {
    case Kind::kl: return shrink::cuda::SoftTargetLoss::kl_div;
    case Kind::reverse: return shrink::cuda::SoftTargetLoss::reverse_kl_div;
    case Kind::jsd: return shrink::cuda::SoftTargetLoss::jensen_shannon;
  }
  return shrink::cuda::SoftTargetLoss::kl_div;
}

template <class T>
T to_t(float x) {
  if constexpr (std::is_same<T, float>::value) return x;
  else return T(x);
}

template <class T>
float to_f(T x) {
  return static_cast<float>(x);
}

// One unit in the last place of T at |x| (0 for float: the tolerance's relative part covers it).
template <class T>
double rounding_ulp(double x) {
  return std::is_same<T, float>::value ? 0.0 : ulp_at<T>(x);
}

bool close_rel(double a, double b, double rel, double slack = 0.0) {
  if (a == b) return true;  // infinities too
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) return false;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)) + slack;
}

double divisor_of(const shrink::distill::SoftTargetOptions& o, std::int64_t kept, std::int64_t cols) {
  if (o.reduction == Reduction::mean) return static_cast<double>(kept) * static_cast<double>(cols);
  if (o.reduction == Reduction::batchmean) return static_cast<double>(kept);
  return 1.0;
}

// Losses: within 1e-5 relative, plus 1e-6 T^2 a kept row (over the reduction's divisor). Both sides sum float terms:
// log(p / m), log(p / q) carry ~2e-7 absolute error whatever their size, so a loss near 0 (student close to teacher)
// is good to that absolutely, not relatively. Random independent logits give losses far above it.
double loss_slack(const shrink::distill::SoftTargetOptions& o, std::int64_t kept, std::int64_t cols) {
  const double t2 = static_cast<double>(o.temperature) * o.temperature;
  return kept == 0 ? 0.0 : 1e-6 * t2 * static_cast<double>(kept) / divisor_of(o, kept, cols);
}

// Gradients: within 1e-5 of the largest |gradient|, plus 2^-23 c (c = |grad_scale| T / divisor bounds every gradient
// element's scale): g = c (q - p) is formed as fma(c / S_s, e_s, -(c / S_t) e_t), whose rounding leaves ~ulp(c q)
// where q and p cancel (a row of V = 1 has gradient 0 and largest 0), plus one ulp of T at the value for 16-bit types.
double grad_slack(const shrink::distill::SoftTargetOptions& o, std::int64_t kept, std::int64_t cols) {
  return kept == 0 ? 0.0 : 0x1p-23 * std::fabs(o.grad_scale) * o.temperature / divisor_of(o, kept, cols);
}

// Rows of logits: normal(0, scale) values; when V >= 8, every fourth row from row 2 has -inf at j % 7 == 3 in both
// student and teacher (a masked vocabulary: probability 0 on both sides).
template <class T>
struct Logits {
  std::int64_t rows, cols;
  std::vector<T> s, t;
  Logits(std::int64_t rows_, std::int64_t cols_, std::uint32_t seed, float scale = 2.0f) : rows(rows_), cols(cols_) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    s.resize(static_cast<std::size_t>(rows * cols));
    t.resize(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
      s[i] = to_t<T>(normal(rng));
      t[i] = to_t<T>(normal(rng));
    }
    if (cols >= 8)
      for (std::int64_t r = 2; r < rows; r += 4)
        for (std::int64_t j = 3; j < cols; j += 7) {
          s[static_cast<std::size_t>(r * cols + j)] = to_t<T>(-kInf);
          t[static_cast<std::size_t>(r * cols + j)] = to_t<T>(-kInf);
        }
  }
};

// Where rows sit in a device buffer: `offset` elements in, `pad` elements between the end of a row and the next.
struct RowLayout {
  std::int64_t offset = 0, pad = 0;
};

template <class T>
std::size_t buffer_elements(std::int64_t rows, std::int64_t cols, RowLayout l) {
  return static_cast<std::size_t>(l.offset + (rows - 1) * (cols + l.pad) + cols + 3);
}

// rows x cols values placed per `l` in a buffer otherwise holding `gap`.
template <class T>
std::vector<T> embed(const std::vector<T>& rows_data, std::int64_t rows, std::int64_t cols, RowLayout l, T gap) {
  std::vector<T> out(buffer_elements<T>(rows, cols, l), gap);
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + l.offset + r * (cols + l.pad), rows_data.data() + r * cols,
                static_cast<std::size_t>(cols) * sizeof(T));
  return out;
}

template <class T>
TensorView<T> device_view(const DeviceBuffer& b, std::int64_t rows, std::int64_t cols, RowLayout l) {
  return TensorView<T>(b.as<T>() + l.offset, Shape{rows, cols}, Strides{cols + l.pad, 1}, Device::cuda(0));
}

struct Variant {
  const char* name;
  RowLayout s, t, g;
  bool masked;
  Reduction reduction;
  bool accumulate;
  float temperature;
  double grad_scale;
  bool give_per_row;  // per_row on the caller's side (always with none); else the workspace holds the rows' losses
};

const Variant kVariants[] = {
    {"contiguous, batchmean", {}, {}, {}, false, Reduction::batchmean, false, 1.7f, 1.0, false},
    {"rows one element in, strided; masked; mean; accumulate", {1, 5}, {1, 5}, {2, 3}, true, Reduction::mean, true,
     1.0f, 0.75, true},
    {"student and teacher misaligned differently; masked; sum", {0, 1}, {3, 2}, {1, 4}, true, Reduction::sum, false,
     2.5f, -2.0, false},
    {"contiguous, none, masked", {}, {}, {}, true, Reduction::none, false, 0.9f, 1.0, true},
};

template <class T>
shrink::distill::Loss run_cpu(Kind kind, const TensorView<const T>& s, const TensorView<const T>& t,
                              const TensorView<T>* g, const shrink::distill::SoftTargetOptions& o, double beta) {
  using namespace shrink::distill;
  switch (kind) {
    case Kind::kl: return g ? kl_div_with_grad(s, t, *g, o) : kl_div(s, t, o);
    case Kind::reverse: return g ? reverse_kl_div_with_grad(s, t, *g, o) : reverse_kl_div(s, t, o);
    case Kind::jsd: return g ? jensen_shannon_with_grad(s, t, beta, *g, o) : jensen_shannon(s, t, beta, o);
  }
  return {};
}

template <class T>
void run_gpu(Kind kind, const TensorView<const T>& s, const TensorView<const T>& t, const TensorView<T>* g,
             DeviceLoss loss, const shrink::cuda::SoftTargetOptions& o, double beta, Workspace ws,
             Synchronize sync = Synchronize::yes) {
  namespace sc = shrink::cuda;
  switch (kind) {
    case Kind::kl:
      if (g) sc::kl_div_with_grad<T>(s, t, *g, loss, o, ws, nullptr, sync);
      else sc::kl_div<T>(s, t, loss, o, ws, nullptr, sync);
      return;
    case Kind::reverse:
      if (g) sc::reverse_kl_div_with_grad<T>(s, t, *g, loss, o, ws, nullptr, sync);
      else sc::reverse_kl_div<T>(s, t, loss, o, ws, nullptr, sync);
      return;
    case Kind::jsd:
      if (g) sc::jensen_shannon_with_grad<T>(s, t, beta, *g, loss, o, ws, nullptr, sync);
      else sc::jensen_shannon<T>(s, t, beta, loss, o, ws, nullptr, sync);
      return;
  }
}

// The CPU's answer for one case: its loss and gradient rows (contiguous).
template <class T>
struct Expected {
  shrink::distill::Loss loss;
  std::vector<T> grad;
  double largest = 0.0;  // of |grad|
};

// One configuration on every path against the CPU; `paths` defaults to all of them.
template <class T>
void check_case(Kind kind, const Logits<T>& in, const Variant& v, bool with_grad, double beta = kBeta,
                const std::vector<SoftTargetPath>& paths = {std::begin(kSoftTargetPaths), std::end(kSoftTargetPaths)}) {
  const std::int64_t rows = in.rows, cols = in.cols;
  const Shape shape{rows, cols};
  std::vector<std::uint8_t> mask;
  if (v.masked) {
    for (std::int64_t r = 0; r < rows; ++r) mask.push_back(r % 3 == 1 ? 0 : 1);
  }
  // Initial gradient rows: random when accumulating (the CPU starts from the same), else the poison.
  std::vector<T> initial(static_cast<std::size_t>(rows * cols), to_t<T>(kGradPoison));
  if (v.accumulate) {
    std::mt19937 rng(static_cast<std::uint32_t>(rows * 31 + cols));
    std::normal_distribution<float> small(0.0f, 0.05f);
    for (T& x : initial) x = to_t<T>(small(rng));
  }

  shrink::distill::SoftTargetOptions co;
  co.temperature = v.temperature;
  co.reduction = v.reduction;
  co.grad_scale = v.grad_scale;
  co.accumulate = v.accumulate;
  if (v.masked) co.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  Expected<T> want;
  want.grad = initial;
  const TensorView<T> cpu_grad(want.grad.data(), shape);
  want.loss = run_cpu<T>(kind, TensorView<const T>(in.s.data(), shape), TensorView<const T>(in.t.data(), shape),
                         with_grad ? &cpu_grad : nullptr, co, beta);
  for (const T& x : want.grad)
    if (std::isfinite(to_f(x))) want.largest = std::max(want.largest, static_cast<double>(std::fabs(to_f(x))));
  std::int64_t kept = rows;
  if (v.masked) kept = static_cast<std::int64_t>(std::count(mask.begin(), mask.end(), std::uint8_t{1}));

  // Device inputs: rows placed per the layout, NaN everywhere else.
  DeviceBuffer s_dev(buffer_elements<T>(rows, cols, v.s) * sizeof(T)), t_dev(buffer_elements<T>(rows, cols, v.t) * sizeof(T));
  s_dev.upload(embed(in.s, rows, cols, v.s, to_t<T>(kNaN)).data(), s_dev.bytes());
  t_dev.upload(embed(in.t, rows, cols, v.t, to_t<T>(kNaN)).data(), t_dev.bytes());
  const std::vector<T> g_start = embed(initial, rows, cols, v.g, to_t<T>(kGradPoison));
  DeviceBuffer g_dev(g_start.size() * sizeof(T));
  DeviceBuffer mask_dev(std::max<std::size_t>(mask.size(), 1));
  if (v.masked) mask_dev.upload(mask.data(), mask.size());
  DeviceBuffer value_dev(sizeof(double)), per_row_dev(static_cast<std::size_t>(rows) * sizeof(double));
  DeviceBuffer ws(shrink::cuda::soft_target_workspace_bytes(rows));
  const TensorView<const T> s_view = device_view<T>(s_dev, rows, cols, v.s);
  const TensorView<const T> t_view = device_view<T>(t_dev, rows, cols, v.t);
  const TensorView<T> g_view = device_view<T>(g_dev, rows, cols, v.g);
  const DeviceLoss loss{value_dev.as<double>(), v.give_per_row ? per_row_dev.as<double>() : nullptr};

  for (const SoftTargetPath path : paths) {
    shrink::cuda::SoftTargetOptions o;
    o.temperature = v.temperature;
    o.reduction = v.reduction;
    o.grad_scale = v.grad_scale;
    o.accumulate = v.accumulate;
    o.path = path;
    if (v.masked) o.row_mask = TensorView<const std::uint8_t>(mask_dev.as<std::uint8_t>(), Shape{rows}, Device::cuda(0));
    const shrink::cuda::SoftTargetPlan plan = shrink::cuda::soft_target_plan<T>(loss_of(kind), cols, with_grad, o);
    INFO(kind_name(kind) << " " << type_name<T>() << " rows " << rows << " V " << cols << " (" << v.name << ") "
                         << (with_grad ? "with grad" : "loss only") << ", path " << shrink::cuda::to_string(path)
                         << " -> " << shrink::cuda::to_string(plan.path) << " x" << plan.cluster_size << ", "
                         << plan.threads << " threads, " << plan.shared_bytes << " bytes");
    if (!plan.unsupported.empty()) {
      CHECK_THROWS_WITH(run_gpu<T>(kind, s_view, t_view, with_grad ? &g_view : nullptr, loss, o, beta, ws.workspace()),
                        Contains(plan.unsupported));
      continue;
    }
    auto run_once = [&] {
      g_dev.upload(g_start.data(), g_dev.bytes());
      value_dev.poison();
      per_row_dev.poison();
      run_gpu<T>(kind, s_view, t_view, with_grad ? &g_view : nullptr, loss, o, beta, ws.workspace());
    };
    REQUIRE_NOTHROW(run_once());
    const double value = value_dev.download<double>(1)[0];
    const std::vector<double> per_row = per_row_dev.download<double>(static_cast<std::size_t>(rows));
    const std::vector<T> g_got = g_dev.download<T>(g_start.size());

    INFO("loss " << value << ", CPU " << want.loss.value);
    CHECK(close_rel(value, want.loss.value, 1e-5, loss_slack(co, kept, cols)));
    if (v.reduction == Reduction::none)
      for (std::int64_t r = 0; r < rows; ++r) {
        INFO("row " << r << ": " << per_row[static_cast<std::size_t>(r)] << ", CPU "
                    << want.loss.per_row[static_cast<std::size_t>(r)]);
        CHECK(close_rel(per_row[static_cast<std::size_t>(r)], want.loss.per_row[static_cast<std::size_t>(r)], 1e-5,
                        loss_slack(co, 1, cols)));
      }
    // Gradient rows within 1e-5 of the largest plus one ulp of T; the gaps and, without a gradient, everything as
    // it started.
    std::int64_t bad = 0;
    for (std::size_t i = 0; i < g_got.size(); ++i) {
      const std::int64_t at = static_cast<std::int64_t>(i) - v.g.offset, row_step = cols + v.g.pad;
      const std::int64_t r = at >= 0 ? at / row_step : -1, j = at >= 0 ? at % row_step : -1;
      const bool in_rows = with_grad && r >= 0 && r < rows && j < cols;
      if (!in_rows) {
        if (std::memcmp(&g_got[i], &g_start[i], sizeof(T)) != 0 && bad++ < 5)
          FAIL_CHECK("gradient buffer element " << i << " outside the written rows changed");
        continue;
      }
      const double got = to_f(g_got[i]), expect = to_f(want.grad[static_cast<std::size_t>(r * cols + j)]);
      const double tol = 1e-5 * want.largest + grad_slack(co, kept, cols) + rounding_ulp<T>(expect);
      const bool same = got == expect || (std::isnan(got) && std::isnan(expect));  // +-inf where the CPU has them
      if (!same && !(std::fabs(got - expect) <= tol) && bad++ < 5)
        FAIL_CHECK("grad[" << r << ", " << j << "] = " << got << ", CPU " << expect << " (tolerance " << tol << ")");
    }
    CHECK(bad == 0);

    if (!v.accumulate) {  // the same inputs, the same bits
      run_once();
      CHECK(value_dev.download<double>(1)[0] == value);
      if (v.give_per_row) {
        const std::vector<double> again = per_row_dev.download<double>(static_cast<std::size_t>(rows));
        CHECK(std::memcmp(again.data(), per_row.data(), again.size() * sizeof(double)) == 0);
      }
      const std::vector<T> g_again = g_dev.download<T>(g_start.size());
      CHECK(std::memcmp(g_again.data(), g_got.data(), g_got.size() * sizeof(T)) == 0);
    }
  }
}

template <class T>
void check_all_sizes() {
  struct Size {
    std::int64_t rows, cols;
  };
  for (const Size& size : {Size{5, 1}, Size{9, 3}, Size{9, 1000}, Size{9, 4097}, Size{3, 50257}}) {
    const Logits<T> in(size.rows, size.cols, static_cast<std::uint32_t>(size.cols * 7 + size.rows));
    for (Kind kind : kKinds)
      for (const Variant& v : kVariants)
        for (bool with_grad : {false, true}) check_case<T>(kind, in, v, with_grad);
  }
  // More rows than CTAs (or clusters) fit at once: the grid-stride loop turns.
  const Logits<T> many(1500, 1000, 1234);
  for (Kind kind : kKinds)
    for (const Variant& v : {kVariants[0], kVariants[1]}) check_case<T>(kind, many, v, true);
}

}  // namespace

TEST_CASE("cuda soft-target losses match the CPU on every path: float", "[gpu]") { check_all_sizes<float>(); }
TEST_CASE("cuda soft-target losses match the CPU on every path: half", "[gpu]") { check_all_sizes<half>(); }
TEST_CASE("cuda soft-target losses match the CPU on every path: bfloat16", "[gpu]") { check_all_sizes<bfloat16>(); }

TEST_CASE("cuda soft-target losses on 128k and 256k vocabularies", "[gpu]") {
  {
    const Logits<bfloat16> in(3, 131072, 501);
    for (Kind kind : kKinds)
      for (const Variant& v : {kVariants[0], kVariants[1], kVariants[2]})
        for (bool with_grad : {false, true}) check_case<bfloat16>(kind, in, v, with_grad);
  }
  {
    const Logits<float> in(2, 131072, 502);
    for (Kind kind : kKinds) check_case<float>(kind, in, kVariants[1], true);
  }
  {
    const Logits<half> in(2, 131072, 503);
    check_case<half>(Kind::kl, in, kVariants[0], true);
  }
  {
    const Logits<bfloat16> in(2, 262144, 504);
    for (Kind kind : kKinds) check_case<bfloat16>(kind, in, kVariants[0], true);
    check_case<bfloat16>(Kind::kl, in, kVariants[2], true);
  }
  {
    const Logits<float> in(2, 262144, 505);  // 2 MiB a row pair: generic (and automatic); the staged paths refuse
    check_case<float>(Kind::kl, in, kVariants[0], true);
  }
}

namespace {

// The cluster path with `blocks` CTAs a row against the CPU, loss and gradient (check_case's options have no
// cluster_size, so this runs the same comparison by hand). False, having checked nothing, where the plan refuses the
// cluster size on this device.
bool check_cluster(Kind kind, const Logits<bfloat16>& in, int blocks) {
  shrink::cuda::SoftTargetOptions o;
  o.path = SoftTargetPath::cluster;
  o.cluster_size = blocks;
  const shrink::cuda::SoftTargetPlan plan = shrink::cuda::soft_target_plan<bfloat16>(loss_of(kind), in.cols, true, o);
  INFO(kind_name(kind) << ", cluster of " << blocks << ": " << plan.unsupported);
  if (!plan.unsupported.empty()) return false;
  CHECK(plan.cluster_size == blocks);
  const Shape shape{in.rows, in.cols};
  std::vector<bfloat16> cpu_grad(in.s.size());
  shrink::distill::SoftTargetOptions co;
  const TensorView<bfloat16> cg(cpu_grad.data(), shape);
  const shrink::distill::Loss want =
      run_cpu<bfloat16>(kind, TensorView<const bfloat16>(in.s.data(), shape),
                        TensorView<const bfloat16>(in.t.data(), shape), &cg, co, kBeta);
  DeviceBuffer s(in.s.size() * 2), t(in.t.size() * 2), g(in.s.size() * 2), value(8);
  DeviceBuffer ws(shrink::cuda::soft_target_workspace_bytes(in.rows));
  s.upload(in.s.data(), s.bytes());
  t.upload(in.t.data(), t.bytes());
  const TensorView<bfloat16> gv(g.as<bfloat16>(), shape, Device::cuda(0));
  run_gpu<bfloat16>(kind, TensorView<const bfloat16>(s.as<bfloat16>(), shape, Device::cuda(0)),
                    TensorView<const bfloat16>(t.as<bfloat16>(), shape, Device::cuda(0)), &gv,
                    DeviceLoss{value.as<double>(), nullptr}, o, kBeta, ws.workspace());
  CHECK(close_rel(value.download<double>(1)[0], want.value, 1e-5));
  const std::vector<bfloat16> got = g.download<bfloat16>(in.s.size());
  double largest = 0.0;
  for (const bfloat16& x : cpu_grad) largest = std::max(largest, static_cast<double>(std::fabs(to_f(x))));
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = to_f(cpu_grad[i]);
    if (!(std::fabs(to_f(got[i]) - e) <= 1e-5 * largest + grad_slack(co, in.rows, in.cols) + ulp_at<bfloat16>(e)))
      ++bad;
  }
  CHECK(bad == 0);
  return true;
}

}  // namespace

TEST_CASE("cuda soft-target losses: the cluster path with each cluster size", "[gpu]") {
  const Logits<bfloat16> in(5, 50257, 600);
  for (int blocks = 2; blocks <= 8; ++blocks)
    for (Kind kind : kKinds) check_cluster(kind, in, blocks);
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck.
TEST_CASE("cuda soft-target sanitizer subset: KL on the cluster path, two rows", "[gpu][sanitize]") {
  const Logits<bfloat16> in(2, 50257, 602);
  int checked = 0;
  for (int blocks : {2, 4, 8}) checked += check_cluster(Kind::kl, in, blocks) ? 1 : 0;
  CHECK(checked > 0);  // a device that takes no cluster size at all has no cluster path to check
}

TEST_CASE("cuda soft-target losses: rising maxes, -inf runs, +-1e4 logits, one-sided -inf", "[gpu]") {
  const std::int64_t n = 5000;
  std::vector<float> s(static_cast<std::size_t>(8 * n)), t(s.size());
  std::mt19937 rng(77);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  for (std::int64_t j = 0; j < n; ++j) {
    const float x = static_cast<float>(j) / static_cast<float>(n);
    auto at = [&](std::int64_t r) -> std::size_t { return static_cast<std::size_t>(r * n + j); };
    s[at(0)] = 12.0f * x + noise(rng);  // rising: every chunk raises the max
    t[at(0)] = 9.0f * x;
    s[at(1)] = -12.0f * x;  // the max in the first chunk
    t[at(1)] = -10.0f * x + noise(rng);
    s[at(2)] = j < 1024 ? -kInf : noise(rng) * 2.0f;  // -inf over the first 1024 of both
    t[at(2)] = j < 1024 ? -kInf : noise(rng) * 2.0f;
    s[at(3)] = j % 3 == 0 ? 1e4f : -1e4f;  // +-1e4
    t[at(3)] = j % 2 == 0 ? 1e4f - static_cast<float>(j % 5) : -1e4f;
    s[at(4)] = j < 2048 ? -1e4f : 1e4f + noise(rng);  // a jump of 2e4 halfway
    t[at(4)] = j < 2048 ? -1e4f + noise(rng) : 1e4f + noise(rng);
    s[at(5)] = j % 11 == 4 ? -kInf : noise(rng) * 3.0f;  // student alone -inf: forward KL +inf
    t[at(5)] = noise(rng) * 3.0f;
    s[at(6)] = noise(rng) * 3.0f;  // teacher alone -inf: reverse KL +inf
    t[at(6)] = j % 13 == 2 ? -kInf : noise(rng) * 3.0f;
    s[at(7)] = j < 4000 ? -kInf : noise(rng);  // student -inf where the teacher is -1e4, then ordinary
    t[at(7)] = j < 4000 ? -1e4f : noise(rng);
  }
  Logits<float> in(8, n, 1);
  in.s = s;
  in.t = t;
  const Variant v{"hard rows, none", {}, {}, {}, false, Reduction::none, false, 1.25f, 1.0, true};
  for (Kind kind : kKinds) {
    check_case<float>(kind, in, v, true);
    check_case<float>(kind, in, v, false);
  }
  Logits<bfloat16> in16(8, n, 1);
  for (std::size_t i = 0; i < s.size(); ++i) {
    in16.s[i] = bfloat16(s[i]);
    in16.t[i] = bfloat16(t[i]);
  }
  for (Kind kind : kKinds) check_case<bfloat16>(kind, in16, v, true);
}

TEST_CASE("cuda jensen_shannon with beta 0 or 1 gives 0 and a zero (or untouched) gradient, as the CPU", "[gpu]") {
  const Logits<float> in(6, 777, 31);
  for (double beta : {0.0, 1.0, 0.5})
    for (const Variant& v : kVariants) check_case<float>(Kind::jsd, in, v, true, beta);
}

TEST_CASE("cuda soft-target losses: [B, L, V] views equal [B*L, V]", "[gpu]") {
  const std::int64_t b = 2, l = 3, n = 1030;
  const Logits<float> in(b * l, n, 9);
  DeviceBuffer s(in.s.size() * 4), t(in.t.size() * 4), g2(in.s.size() * 4), g3(in.s.size() * 4);
  DeviceBuffer v2(8), v3(8), ws(shrink::cuda::soft_target_workspace_bytes(b * l));
  s.upload(in.s.data(), s.bytes());
  t.upload(in.t.data(), t.bytes());
  for (Kind kind : kKinds) {
    INFO(kind_name(kind));
    shrink::cuda::SoftTargetOptions o;
    o.temperature = 1.3f;
    const TensorView<float> flat_g(g2.as<float>(), Shape{b * l, n}, Device::cuda(0));
    const TensorView<float> three_g(g3.as<float>(), Shape{b, l, n}, Device::cuda(0));
    run_gpu<float>(kind, TensorView<const float>(s.as<float>(), Shape{b * l, n}, Device::cuda(0)),
                   TensorView<const float>(t.as<float>(), Shape{b * l, n}, Device::cuda(0)), &flat_g,
                   DeviceLoss{v2.as<double>(), nullptr}, o, kBeta, ws.workspace());
    run_gpu<float>(kind, TensorView<const float>(s.as<float>(), Shape{b, l, n}, Device::cuda(0)),
                   TensorView<const float>(t.as<float>(), Shape{b, l, n}, Device::cuda(0)), &three_g,
                   DeviceLoss{v3.as<double>(), nullptr}, o, kBeta, ws.workspace());
    CHECK(v2.download<double>(1)[0] == v3.download<double>(1)[0]);
    const std::vector<float> a = g2.download<float>(in.s.size()), c = g3.download<float>(in.s.size());
    CHECK(std::memcmp(a.data(), c.data(), a.size() * 4) == 0);
  }
}

TEST_CASE("cuda soft-target device-side checks: NaN, +inf and rows without a finite logit set kNonFinite", "[gpu]") {
  const std::int64_t rows = 4, n = 3001;
  for (Kind kind : kKinds) {
    for (SoftTargetPath path : kSoftTargetPaths) {
      shrink::cuda::SoftTargetOptions o;
      o.path = path;
      if (!shrink::cuda::soft_target_plan<float>(loss_of(kind), n, true, o).unsupported.empty()) continue;
      INFO(kind_name(kind) << ", path " << shrink::cuda::to_string(path));
      struct Bad {
        bool student;
        std::int64_t row, col;
        float value;  // all of the row when col < 0
      };
      for (const Bad& bad : {Bad{true, 2, 17, kNaN}, Bad{false, 0, n - 1, kNaN}, Bad{true, 3, 0, kInf},
                             Bad{false, 1, 1500, kInf}, Bad{true, 2, -1, -kInf}, Bad{false, 3, -1, -kInf}}) {
        Logits<float> in(rows, n, 3);
        std::vector<float>& x = bad.student ? in.s : in.t;
        if (bad.col < 0)
          std::fill(x.begin() + bad.row * n, x.begin() + (bad.row + 1) * n, bad.value);
        else
          x[static_cast<std::size_t>(bad.row * n + bad.col)] = bad.value;
        DeviceBuffer s(in.s.size() * 4), t(in.t.size() * 4), g(in.s.size() * 4), value(8), per_row(rows * 8);
        DeviceBuffer ws(shrink::cuda::soft_target_workspace_bytes(rows));
        s.upload(in.s.data(), s.bytes());
        t.upload(in.t.data(), t.bytes());
        const TensorView<const float> sv(s.as<float>(), Shape{rows, n}, Device::cuda(0));
        const TensorView<const float> tv(t.as<float>(), Shape{rows, n}, Device::cuda(0));
        const TensorView<float> gv(g.as<float>(), Shape{rows, n}, Device::cuda(0));
        o.reduction = Reduction::none;
        const DeviceLoss loss{value.as<double>(), per_row.as<double>()};
        INFO((bad.student ? "student" : "teacher") << " row " << bad.row << " col " << bad.col << " = " << bad.value);
        CHECK_THROWS_WITH(run_gpu<float>(kind, sv, tv, &gv, loss, o, kBeta, ws.workspace()), Contains("NaN or inf"));
        CHECK_THROWS_WITH(run_gpu<float>(kind, sv, tv, nullptr, loss, o, kBeta, ws.workspace()), Contains("NaN or inf"));
        // Without Synchronize::yes the call returns; check_status finds the flag, and the row's loss is NaN.
        run_gpu<float>(kind, sv, tv, &gv, loss, o, kBeta, ws.workspace(), Synchronize::no);
        CHECK_THROWS_WITH(shrink::cuda::check_status(ws.workspace(), nullptr), Contains("NaN or inf"));
        const std::vector<double> losses = per_row.download<double>(rows);
        CHECK(std::isnan(losses[static_cast<std::size_t>(bad.row)]));
        for (std::int64_t r = 0; r < rows; ++r)
          if (r != bad.row) CHECK(std::isfinite(losses[static_cast<std::size_t>(r)]));
        // The same row masked out is not read: no flag.
        std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows), 1);
        mask[static_cast<std::size_t>(bad.row)] = 0;
        DeviceBuffer mask_dev(mask.size());
        mask_dev.upload(mask.data(), mask.size());
        shrink::cuda::SoftTargetOptions masked = o;
        masked.row_mask = TensorView<const std::uint8_t>(mask_dev.as<std::uint8_t>(), Shape{rows}, Device::cuda(0));
        CHECK_NOTHROW(run_gpu<float>(kind, sv, tv, &gv, loss, masked, kBeta, ws.workspace()));
        CHECK(per_row.download<double>(rows)[static_cast<std::size_t>(bad.row)] == 0.0);
      }
    }
  }
}

TEST_CASE("cuda soft-target: forcing a path the device or row cannot take throws, naming why", "[gpu]") {
  // Two float rows of 262144: 2 MiB of student + teacher a row, more than any CTA's or 8-CTA cluster's shared memory.
  const std::int64_t n = 262144;
  DeviceBuffer s(2 * n * 4), t(2 * n * 4), g(2 * n * 4), value(8), ws(shrink::cuda::soft_target_workspace_bytes(2));
  const TensorView<const float> sv(s.as<float>(), Shape{2, n}, Device::cuda(0));
  const TensorView<const float> tv(t.as<float>(), Shape{2, n}, Device::cuda(0));
  const TensorView<float> gv(g.as<float>(), Shape{2, n}, Device::cuda(0));
  shrink::cuda::SoftTargetOptions o;
  o.path = SoftTargetPath::shared_row;
  CHECK_THROWS_WITH(shrink::cuda::kl_div_with_grad<float>(sv, tv, gv, {value.as<double>(), nullptr}, o, ws.workspace(),
                                                          nullptr),
                    Contains("options.path = shared_row") && Contains("shared memory"));
  o.path = SoftTargetPath::cluster;
  CHECK_THROWS_WITH(shrink::cuda::kl_div_with_grad<float>(sv, tv, gv, {value.as<double>(), nullptr}, o, ws.workspace(),
                                                          nullptr),
                    Contains("options.path = cluster"));
  const shrink::cuda::SoftTargetPlan automatic =
      shrink::cuda::soft_target_plan<float>(shrink::cuda::SoftTargetLoss::kl_div, n, true);
  CHECK(automatic.path == SoftTargetPath::generic);
  CHECK(automatic.unsupported.empty());
  // Without a gradient the forward KL reads each row once on any path: automatic takes the generic one.
  CHECK(shrink::cuda::soft_target_plan<bfloat16>(shrink::cuda::SoftTargetLoss::kl_div, 4096, false).path ==
        SoftTargetPath::generic);
}

// ---------------------------------------------------------------------------------------------------------------
// Host-side validation: every case throws before any CUDA call (the pointers are fake and never dereferenced).

TEST_CASE("cuda soft_target_workspace_bytes: a status word, the kept count and one double per row", "[host]") {
  CHECK(shrink::cuda::soft_target_workspace_bytes(0) >= 32);
  CHECK(shrink::cuda::soft_target_workspace_bytes(1000) >= 32 + 8000);
  CHECK(shrink::cuda::soft_target_workspace_bytes(1000) % 16 == 0);
  CHECK_THROWS_WITH(shrink::cuda::soft_target_workspace_bytes(-1), Contains("rows"));
  CHECK_THROWS_WITH(shrink::cuda::soft_target_plan<float>(shrink::cuda::SoftTargetLoss::kl_div, 0, true),
                    Contains("columns"));
  CHECK_THROWS_WITH(shrink::cuda::soft_target_plan<float>(shrink::cuda::SoftTargetLoss::kl_div,
                                                          shrink::cuda::kMaxSoftTargetColumns + 1, true),
                    Contains("columns"));
}

TEST_CASE("cuda soft-target losses validate their arguments on the host before any CUDA call", "[host]") {
  const std::int64_t rows = 4, n = 8;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* out = static_cast<double*>(fake_device_pointer());
  const Shape shape{rows, n};
  const TensorView<const float> good(data, shape, Device::cuda(0));
  const TensorView<float> grad(data, shape, Device::cuda(0));
  const Workspace ws{fake_device_pointer(), shrink::cuda::soft_target_workspace_bytes(rows)};
  const DeviceLoss loss{out, nullptr};
  const shrink::cuda::SoftTargetOptions defaults;
  for (Kind kind : kKinds) {
    for (bool with_grad : {false, true}) {
      INFO(kind_name(kind) << (with_grad ? " with grad" : ""));
      const char* fn = with_grad ? (kind == Kind::kl        ? "kl_div_with_grad"
                                    : kind == Kind::reverse ? "reverse_kl_div_with_grad"
                                                            : "jensen_shannon_with_grad")
                                 : kind_name(kind);
      auto call_with = [&](const TensorView<const float>& s, const TensorView<const float>& t,
                           const shrink::cuda::SoftTargetOptions& o, DeviceLoss l, Workspace w, double beta,
                           const TensorView<float>* g) {
        run_gpu<float>(kind, s, t, with_grad ? g : nullptr, l, o, beta, w, Synchronize::no);
      };
      auto call = [&](const TensorView<const float>& s, const TensorView<const float>& t,
                      const shrink::cuda::SoftTargetOptions& o) { call_with(s, t, o, loss, ws, kBeta, &grad); };
      CHECK_THROWS_WITH(call_with(good, good, defaults, loss, Workspace{nullptr, ws.bytes}, kBeta, &grad),
                        Contains(std::string("shrink::cuda::") + fn + ": workspace.data = a null pointer"));
      // Views: host memory, shapes, empty batches, strides, alignment.
      CHECK_THROWS_WITH(call(TensorView<const float>(data, shape), good, defaults), Contains("student = a view of host memory"));
      CHECK_THROWS_WITH(call(good, TensorView<const float>(data, shape), defaults), Contains("teacher = a view of host memory"));
      CHECK_THROWS_WITH(call(good, TensorView<const float>(data, Shape{rows, n - 1}, Device::cuda(0)), defaults),
                        Contains("teacher.shape = [4, 7]: expected the shape of student [4, 8]"));
      CHECK_THROWS_WITH(call(good, TensorView<const float>(data, Shape{2, 2, n}, Device::cuda(0)), defaults),
                        Contains("teacher.shape = [2, 2, 8]"));
      CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{0, n}, Device::cuda(0)),
                             TensorView<const float>(data, Shape{0, n}, Device::cuda(0)), defaults),
                        Contains("student.shape") && Contains("non-empty"));
      CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{rows, n / 2}, Strides{n, 2}, Device::cuda(0)),
                             TensorView<const float>(data, Shape{rows, n / 2}, Device::cuda(0)), defaults),
                        Contains("student.strides = [8, 2]: expected a contiguous last dimension"));
      CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{2, 2, n}, Strides{3 * n, n, 1}, Device::cuda(0)),
                             TensorView<const float>(data, Shape{2, 2, n}, Device::cuda(0)), defaults),
                        Contains("student.strides") && Contains("flatten"));
      CHECK_THROWS_WITH(call(TensorView<const float>(data, shape, Strides{n - 1, 1}, Device::cuda(0)),
                             TensorView<const float>(data, shape, Strides{n - 1, 1}, Device::cuda(0)), defaults),
                        Contains("student.strides") && Contains("overlap"));
      const auto* odd = reinterpret_cast<const float*>(static_cast<const char*>(fake_device_pointer()) + 2);
      CHECK_THROWS_WITH(call(TensorView<const float>(odd, shape, Device::cuda(0)), good, defaults),
                        Contains("student = a misaligned pointer"));
      CHECK_THROWS_WITH(call(good, TensorView<const float>(nullptr, shape, Device::cuda(0)), defaults),
                        Contains("teacher = a null pointer"));
      CHECK_THROWS_WITH(call(TensorView<const float>(data, Shape{1, shrink::cuda::kMaxSoftTargetColumns + 1},
                                                     Device::cuda(0)),
                             TensorView<const float>(data, Shape{1, shrink::cuda::kMaxSoftTargetColumns + 1},
                                                     Device::cuda(0)),
                             defaults),
                        Contains("kMaxSoftTargetColumns"));
      // Parameters.
      for (float bad_t : {0.0f, -1.0f, kNaN, kInf}) {
        shrink::cuda::SoftTargetOptions o;
        o.temperature = bad_t;
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.temperature"));
      }
      for (double bad_scale : {static_cast<double>(kNaN), static_cast<double>(kInf)}) {
        shrink::cuda::SoftTargetOptions o;
        o.grad_scale = bad_scale;
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.grad_scale"));
      }
      if (kind == Kind::jsd)
        for (double bad_beta : {-0.1, 1.5, static_cast<double>(kNaN)})
          CHECK_THROWS_WITH(call_with(good, good, defaults, loss, ws, bad_beta, &grad), Contains("beta = "));
      {
        shrink::cuda::SoftTargetOptions o;
        o.reduction = static_cast<Reduction>(7);
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.reduction"));
        o = {};
        o.path = static_cast<SoftTargetPath>(9);
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.path"));
        o = {};
        o.path = SoftTargetPath::cluster;
        o.cluster_size = 9;
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.cluster_size = 9"));
        o.cluster_size = 1;
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.cluster_size = 1"));
        o.path = SoftTargetPath::generic;
        o.cluster_size = 4;
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.cluster_size = 4") && Contains("SoftTargetPath::cluster"));
      }
      // The row mask: shape, memory, strides.
      {
        const auto* mask = static_cast<const std::uint8_t*>(fake_device_pointer());
        shrink::cuda::SoftTargetOptions o;
        o.row_mask = TensorView<const std::uint8_t>(mask, Shape{rows - 1}, Device::cuda(0));
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.row_mask.shape = [3]: expected one entry per row (4)"));
        o.row_mask = TensorView<const std::uint8_t>(mask, Shape{rows});
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.row_mask = a view of host memory"));
        o.row_mask = TensorView<const std::uint8_t>(mask, Shape{rows}, Strides{2}, Device::cuda(0));
        CHECK_THROWS_WITH(call(good, good, o), Contains("options.row_mask.strides"));
      }
      // The outputs and the workspace.
      CHECK_THROWS_WITH(call_with(good, good, defaults, {nullptr, out}, ws, kBeta, &grad),
                        Contains("loss.value = a null pointer"));
      CHECK_THROWS_WITH(call_with(good, good, defaults,
                                  {reinterpret_cast<double*>(reinterpret_cast<char*>(out) + 4), nullptr}, ws, kBeta,
                                  &grad),
                        Contains("loss.value = a misaligned pointer"));
      {
        shrink::cuda::SoftTargetOptions o;
        o.reduction = Reduction::none;
        CHECK_THROWS_WITH(call_with(good, good, o, {out, nullptr}, ws, kBeta, &grad),
                          Contains("loss.per_row = a null pointer"));
      }
      CHECK_THROWS_WITH(call_with(good, good, defaults, loss, Workspace{fake_device_pointer(), 16}, kBeta, &grad),
                        Contains("workspace.bytes = 16") && Contains("soft_target_workspace_bytes(4)"));
      CHECK_THROWS_WITH(call_with(good, good, defaults, loss,
                                  Workspace{static_cast<char*>(fake_device_pointer()) + 8, ws.bytes}, kBeta, &grad),
                        Contains("workspace.data = a misaligned pointer"));
      if (with_grad) {
        const TensorView<float> host_grad(data, shape);
        CHECK_THROWS_WITH(call_with(good, good, defaults, loss, ws, kBeta, &host_grad),
                          Contains("grad_student = a view of host memory"));
        const TensorView<float> wrong(data, Shape{rows, n + 1}, Device::cuda(0));
        CHECK_THROWS_WITH(call_with(good, good, defaults, loss, ws, kBeta, &wrong),
                          Contains("grad_student.shape = [4, 9]: expected the shape of student [4, 8]"));
        const TensorView<float> strided(data, shape, Strides{n, 0}, Device::cuda(0));
        CHECK_THROWS_WITH(call_with(good, good, defaults, loss, ws, kBeta, &strided), Contains("grad_student.strides"));
      }
    }
  }
}
