// Tests for shrink/cuda/distillation_loss.hpp: [gpu] cases match distill::distillation_loss(_with_grad) on the same
// random logits for alpha 0, between and 1, full and top-k teachers, every element, label and index type, paired
// reductions, temperature, row mask, ignore_index rows, label smoothing, accumulate, grad_scale and row stride (the
// gradient zeroed through the memset or the strided kernel when alpha = 0), outputs poisoned (padding checked, absent
// rows NaN); nothing written on a host error; device checks of both parts. [host] cases: every host check throws
// before any CUDA call.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "loss_checks.hpp"
#include "support/element_types.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/distillation_loss.hpp"
#include "shrink/distill/distillation_loss.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/mismatch_map.hpp"

namespace {

using namespace shrink::test::losses;
using Catch::Matchers::Contains;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::Strides;
using shrink::TensorView;
using shrink::distill::DistillationOptions;
using shrink::distill::Loss;
using shrink::distill::Reduction;
using shrink::distill::TopKTeacher;
using shrink::test::DeviceBuffer;
using shrink::test::fake_device_pointer;
using shrink::test::from_float;
using shrink::test::kInf;
using shrink::test::kNaN;
using shrink::test::same_bits;
using shrink::test::to_device;
using shrink::test::to_float;
using shrink::test::type_name;
using shrink::test::losses::same_bits;

struct DistillationCase {
  float alpha;
  Reduction kd, ce;
  float temperature;
  bool masked;   // rows 1, 6, 11, ... are padding
  bool ignored;  // rows 3, 7, 11, ... (unless masked) are labelled ignore_index: out of CE, still taught by KD
  float smoothing;
  bool accumulate;
  double grad_scale;
  std::int64_t pad;  // row strides: V + pad (student, teacher logits, gradient), k + pad (top-k)
  bool per_row;      // ask for out.per_row (always with none)
};

std::string describe_distillation_case(const DistillationCase& c) {
  std::ostringstream out;
  out << "alpha " << c.alpha << " kd " << reduction_name(c.kd) << " ce " << reduction_name(c.ce) << " T "
      << c.temperature << (c.masked ? " masked" : "") << (c.ignored ? " ignore_index" : "") << " eps " << c.smoothing
      << (c.accumulate ? " accumulate" : "") << " grad_scale " << c.grad_scale << " pad " << c.pad
      << (c.per_row ? " per_row" : "");
  return out.str();
}

const std::vector<DistillationCase> kDistillationCases = {
    {0.3f, Reduction::batchmean, Reduction::mean, 2.0f, false, true, 0.0f, false, 1.0, 0, false},
    {0.3f, Reduction::none, Reduction::none, 1.0f, true, true, 0.1f, true, 0.5, 3, true},
    {0.0f, Reduction::sum, Reduction::mean, 1.0f, true, true, 0.0f, false, 1.0, 5, true},            // strided zeroing
    {0.0f, Reduction::batchmean, Reduction::mean, 1.5f, false, false, 0.05f, false, 1.0, 0, false},  // memset
    {0.0f, Reduction::none, Reduction::none, 1.0f, false, true, 0.0f, true, -1.0, 2, true},
    {1.0f, Reduction::mean, Reduction::sum, 2.5f, true, false, 0.0f, false, -1.5, 1, true},
    {1.0f, Reduction::none, Reduction::none, 1.0f, false, true, 0.0f, true, 1.0, 0, true},
    {0.7f, Reduction::sum, Reduction::batchmean, 0.5f, true, true, 0.2f, true, 2.0, 4, false},
};

bool distillation_masked_row(std::int64_t r) { return r % 5 == 1; }

// k distinct entries of [0, vocab) in random order: the first k of a shuffle of them all (topk_teacher_tests.cpp's
// distinct_indices draws them another way when vocab is large).
template <class Index>
std::vector<Index> shuffled_indices(std::int64_t vocab, std::int64_t k, std::mt19937& rng) {
  std::vector<Index> all(static_cast<std::size_t>(vocab));
  std::iota(all.begin(), all.end(), Index{0});
  std::shuffle(all.begin(), all.end(), rng);
  return std::vector<Index>(all.begin(), all.begin() + k);
}

// Losses: 1e-5 relative, plus 1e-6 max(1, T^2) a row (as the parts' own tests).
void check_value(double gpu, double cpu, double abs, const char* what) {
  INFO(what << ": gpu " << gpu << " cpu " << cpu);
  CHECK(close(gpu, cpu, 1e-5, abs));
}

void check_losses(const Loss& gpu, const Loss& cpu, const DistillationCase& c, std::int64_t rows) {
  const double row_abs = 1e-6 * std::max(1.0, static_cast<double>(c.temperature) * c.temperature);
  const bool summed = c.kd == Reduction::sum || c.kd == Reduction::none || c.ce == Reduction::sum;
  check_value(gpu.value, cpu.value, row_abs * (summed ? static_cast<double>(rows) : 1.0), "value");
  if (gpu.per_row.empty()) return;
  REQUIRE(gpu.per_row.size() == static_cast<std::size_t>(rows));
  REQUIRE(cpu.per_row.size() == static_cast<std::size_t>(rows));
  int failures = 0;
  for (std::int64_t r = 0; r < rows && failures < 3; ++r) {
    const double g = gpu.per_row[static_cast<std::size_t>(r)], e = cpu.per_row[static_cast<std::size_t>(r)];
    if (!close(g, e, 1e-5, row_abs)) {
      ++failures;
      FAIL_CHECK("per_row[" << r << "]: gpu " << g << " cpu " << e);
    }
  }
}

// The gradient is rounded to T twice (KD writes it, CE adds to it), so an entry may be one ulp of T off at the KD
// part's size as well as at its own: rel * (|cpu| + |kd|), plus 1e-5 of the row's largest entry (the float sums of
// both parts), plus half's subnormal step. Between rows the buffer still holds the poison.
template <class T>
void check_gradient_mix(const std::vector<T>& gpu, const std::vector<T>& cpu, const std::vector<T>& kd,
                        std::int64_t rows, std::int64_t cols, std::int64_t stride) {
  REQUIRE(gpu.size() == cpu.size());
  REQUIRE(kd.size() == cpu.size());
  const double rel = gradient_rel<T>(), floor = gradient_abs<T>(0.0);
  int failures = 0;
  std::int64_t wrong = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double largest = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const std::size_t i = static_cast<std::size_t>(r * stride + j);
      largest = std::max({largest, std::fabs(static_cast<double>(to_float(cpu[i]))),
                          std::fabs(static_cast<double>(to_float(kd[i])))});
    }
    for (std::int64_t j = 0; j < stride && r * stride + j < static_cast<std::int64_t>(gpu.size()); ++j) {
      const std::size_t i = static_cast<std::size_t>(r * stride + j);
      if (j >= cols) {
        if (std::memcmp(&gpu[i], &cpu[i], sizeof(T)) != 0 && ++wrong && failures++ < 3)
          FAIL_CHECK("gradient: padding at row " << r << " column " << j << " was written");
        continue;
      }
      const double g = to_float(gpu[i]), e = to_float(cpu[i]);
      const double tol = rel * (std::fabs(e) + std::fabs(to_float(kd[i]))) + 1e-5 * largest + floor;
      if (!(std::fabs(g - e) <= tol) && ++wrong && failures++ < 3)
        FAIL_CHECK("gradient[" << r << ", " << j << "]: gpu " << g << " cpu " << e << " (tolerance " << tol << ")");
    }
  }
  INFO("gradient: " << wrong << " entries out of tolerance");
  CHECK(wrong == 0);
}

// Runs one case on the CPU and the GPU (loss only, with the gradient, again for the bits) and compares.
template <class T, class L, class HostTeacher, class DeviceTeacher>
void compare(const DistillationCase& c, std::int64_t rows, std::int64_t vocab, const std::vector<T>& z,
             const std::vector<L>& y, const std::vector<std::uint8_t>& mask, const std::vector<T>& g0,
             const HostTeacher& teacher, const DeviceTeacher& teacher_dev) {
  namespace k = shrink::cuda;
  const std::int64_t stride = vocab + c.pad;
  const Shape shape{rows, vocab};
  const Strides strides{stride, 1};
  DistillationOptions o;
  o.alpha = c.alpha;
  o.temperature = c.temperature;
  o.kd_reduction = c.kd;
  o.ce_reduction = c.ce;
  o.label_smoothing = c.smoothing;
  o.grad_scale = c.grad_scale;
  o.accumulate = c.accumulate;
  if (c.masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  const TensorView<const T> z_view(z.data(), shape, strides);
  const TensorView<const L> y_view(y.data(), Shape{rows});
  std::vector<T> g_cpu = g0;
  Loss cpu = shrink::distill::distillation_loss_with_grad(z_view, teacher, y_view,
                                                          TensorView<T>(g_cpu.data(), shape, strides), o);
  const bool with_rows = c.per_row || c.kd == Reduction::none;
  if (with_rows && cpu.per_row.empty()) {
    DistillationOptions none = o;
    none.kd_reduction = none.ce_reduction = Reduction::none;
    cpu.per_row = shrink::distill::distillation_loss(z_view, teacher, y_view, none).per_row;
  }
  // The KD part's gradient alone (what the GPU rounds to T before CE adds), for the tolerance.
  std::vector<T> g_kd = c.accumulate ? g0 : std::vector<T>(g0.size(), from_float<T>(0.0f));
  if (c.alpha > 0.0f)
    shrink::distill::kl_div_with_grad(
        z_view, teacher, TensorView<T>(g_kd.data(), shape, strides),
        shrink::distill::kd_options(o, o.grad_scale * static_cast<double>(o.alpha), o.accumulate));

  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  const std::unique_ptr<DeviceBuffer> g_dev = to_device(g0);
  DeviceBuffer ws(k::distillation_loss_workspace_bytes(rows));  // poisoned: status words included
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  DistillationOptions od = o;
  if (c.masked) od.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  const TensorView<const T> z_dev_view(z_dev->as<T>(), shape, strides, gpu);
  const TensorView<const L> y_dev_view(y_dev->as<L>(), Shape{rows}, gpu);
  const TensorView<T> g_view(g_dev->as<T>(), shape, strides, gpu);

  k::distillation_loss(z_dev_view, teacher_dev, y_dev_view, out.loss(with_rows), ws.workspace(), nullptr, od,
                       k::Synchronize::yes);
  {
    INFO("loss only");
    check_losses(out.download(with_rows), cpu, c, rows);
    if (!with_rows) CHECK(out.per_row_untouched());
    CHECK_SAME_BITS(g_dev->download<T>(g0.size()), g0);  // no gradient asked for: none written
  }
  k::distillation_loss_with_grad(z_dev_view, teacher_dev, y_dev_view, g_view, out.loss(with_rows), ws.workspace(),
                                 nullptr, od, k::Synchronize::yes);
  const Loss first = out.download(with_rows);
  const std::vector<T> g_first = g_dev->download<T>(g0.size());
  {
    INFO("with gradient");
    check_losses(first, cpu, c, rows);
    if (!with_rows) CHECK(out.per_row_untouched());
    check_gradient_mix(g_first, g_cpu, g_kd, rows, vocab, stride);
  }
  g_dev->upload(g0.data(), g0.size() * sizeof(T));
  k::distillation_loss_with_grad(z_dev_view, teacher_dev, y_dev_view, g_view, out.loss(with_rows), ws.workspace(),
                                 nullptr, od, k::Synchronize::yes);
  INFO("a second run gives the same bits");
  CHECK(same_bits(out.download(with_rows), first));
  CHECK_SAME_BITS(g_dev->download<T>(g0.size()), g_first);
}

// Random inputs for one case, then compare() against a full teacher or a top-k teacher of k entries a row.
template <class T, class L, class Index>
void check_case(bool topk, std::int64_t rows, std::int64_t vocab, std::int64_t k, const DistillationCase& c,
                std::uint32_t seed) {
  INFO(type_name<T>() << " labels int" << 8 * sizeof(L) << (topk ? " top-k teacher, indices int" : " full teacher")
                      << (topk ? std::to_string(8 * sizeof(Index)) : std::string()) << " rows " << rows << " V "
                      << vocab << " k " << k << ": " << describe_distillation_case(c));
  const std::int64_t zs = vocab + c.pad, ts = k + c.pad;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> label(0, vocab - 1);
  std::uniform_real_distribution<float> tail_mass(0.01f, 0.3f);
  std::vector<T> z = random_elements<T>(static_cast<std::size_t>(rows * zs), seed, 2.5f);
  std::vector<T> t = random_elements<T>(static_cast<std::size_t>(rows * zs), seed + 1, 2.5f);
  std::vector<T> tl = random_elements<T>(static_cast<std::size_t>(rows * ts), seed + 2, 2.5f);
  std::vector<Index> idx(static_cast<std::size_t>(rows * ts), Index{-7});  // padding: never read
  std::vector<float> tail(static_cast<std::size_t>(rows), 0.0f);
  std::vector<L> y(static_cast<std::size_t>(rows));
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows), 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* zr = z.data() + r * zs;
    T* tr = t.data() + r * zs;
    T* lr = tl.data() + r * ts;
    for (std::int64_t j = vocab; j < zs; ++j) zr[j] = tr[j] = from_float<T>(kNaN);
    for (std::int64_t j = k; j < ts; ++j) lr[j] = from_float<T>(kNaN);
    const std::vector<Index> chosen = shuffled_indices<Index>(vocab, k, rng);
    std::copy(chosen.begin(), chosen.end(), idx.begin() + r * ts);
    if (k < vocab) tail[static_cast<std::size_t>(r)] = tail_mass(rng);
    y[static_cast<std::size_t>(r)] = static_cast<L>(label(rng));
    if (r % 3 == 2) mask[static_cast<std::size_t>(r)] = 9;  // any nonzero byte keeps a row
    if (c.masked && distillation_masked_row(r)) {
      mask[static_cast<std::size_t>(r)] = 0;
      for (std::int64_t j = 0; j < vocab; ++j) zr[j] = tr[j] = from_float<T>(kNaN);  // not read by either part
      for (std::int64_t j = 0; j < k; ++j) lr[j] = from_float<T>(kNaN);
      idx[static_cast<std::size_t>(r * ts)] = Index{-1};  // not checked
      tail[static_cast<std::size_t>(r)] = 2.0f;           // not checked
      y[static_cast<std::size_t>(r)] = static_cast<L>(vocab + 3);
    } else if (c.ignored && ignored_row(r)) {
      y[static_cast<std::size_t>(r)] = static_cast<L>(-100);
    }
  }
  std::vector<T> g0 =
      c.accumulate ? random_elements<T>(z.size(), seed + 3, 0.1f) : std::vector<T>(z.size(), poison_element<T>());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = vocab; j < zs; ++j) g0[static_cast<std::size_t>(r * zs + j)] = poison_element<T>();

  const Device gpu = Device::cuda(0);
  if (!topk) {
    const std::unique_ptr<DeviceBuffer> t_dev = to_device(t);
    const Shape shape{rows, vocab};
    const Strides strides{zs, 1};
    compare<T, L>(c, rows, vocab, z, y, mask, g0, TensorView<const T>(t.data(), shape, strides),
                  TensorView<const T>(t_dev->as<T>(), shape, strides, gpu));
    return;
  }
  const std::unique_ptr<DeviceBuffer> tl_dev = to_device(tl);
  const std::unique_ptr<DeviceBuffer> idx_dev = to_device(idx);
  const std::unique_ptr<DeviceBuffer> tail_dev = to_device(tail);
  const Shape k_shape{rows, k};
  const Strides k_strides{ts, 1};
  const bool with_tail = k < vocab;
  TopKTeacher<T, Index> host{TensorView<const T>(tl.data(), k_shape, k_strides),
                             TensorView<const Index>(idx.data(), k_shape, k_strides), {}};
  TopKTeacher<T, Index> device{TensorView<const T>(tl_dev->as<T>(), k_shape, k_strides, gpu),
                               TensorView<const Index>(idx_dev->as<Index>(), k_shape, k_strides, gpu), {}};
  if (with_tail) {
    host.tail_mass = TensorView<const float>(tail.data(), Shape{rows});
    device.tail_mass = TensorView<const float>(tail_dev->as<float>(), Shape{rows}, gpu);
  }
  compare<T, L>(c, rows, vocab, z, y, mask, g0, host, device);
}

template <class T, class L, class Index>
void check_distillation_cases(bool topk, std::int64_t rows, std::int64_t vocab, std::int64_t k, std::uint32_t seed) {
  for (std::size_t i = 0; i < kDistillationCases.size(); ++i)
    check_case<T, L, Index>(topk, rows, vocab, k, kDistillationCases[i], seed + 19 * static_cast<std::uint32_t>(i));
}

template <class T, class L, class Index>
void check_distillation_sizes(std::uint32_t seed) {
  for (const bool topk : {false, true}) {
    check_distillation_cases<T, L, Index>(topk, 5, 1, 1, seed);
    check_distillation_cases<T, L, Index>(topk, 37, 7, 3, seed + 1000);
    check_distillation_cases<T, L, Index>(topk, 37, 1000, 64, seed + 2000);
  }
}

}  // namespace

TEST_CASE("cuda distillation_loss matches the CPU: float", "[gpu]") {
  check_distillation_sizes<float, std::int64_t, std::int32_t>(100);
  check_distillation_sizes<float, std::int32_t, std::int64_t>(10100);
  check_case<float, std::int64_t, std::int32_t>(false, 9, 50257, 64, kDistillationCases[1], 20100);
  check_case<float, std::int32_t, std::int64_t>(true, 9, 50257, 64, kDistillationCases[7], 20200);
}

TEST_CASE("cuda distillation_loss matches the CPU: half", "[gpu]") {
  check_distillation_sizes<half, std::int32_t, std::int64_t>(200);
}

TEST_CASE("cuda distillation_loss matches the CPU: bfloat16", "[gpu]") {
  check_distillation_sizes<bfloat16, std::int64_t, std::int64_t>(300);
}

TEST_CASE("cuda distillation_loss flattens [B, L, V] logits and [B, L] labels", "[gpu][sanitize]") {
  const std::int64_t b = 3, l = 5, vocab = 300;
  const Shape shape{b, l, vocab};
  const std::vector<float> z = random_elements<float>(static_cast<std::size_t>(b * l * vocab), 7, 2.0f);
  const std::vector<float> t = random_elements<float>(z.size(), 8, 2.0f);
  std::vector<std::int64_t> y(static_cast<std::size_t>(b * l));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>((i * 37) % vocab);
  std::vector<float> g_cpu(z.size());
  DistillationOptions o;  // alpha 0.5, batchmean and mean
  o.temperature = 2.0f;
  const Loss cpu = shrink::distill::distillation_loss_with_grad(
      TensorView<const float>(z.data(), shape), TensorView<const float>(t.data(), shape),
      TensorView<const std::int64_t>(y.data(), Shape{b, l}), TensorView<float>(g_cpu.data(), shape), o);
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> t_dev = to_device(t);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::distillation_loss_workspace_bytes(b * l));
  DeviceOutputs out(b * l);
  const Device gpu = Device::cuda(0);
  shrink::cuda::distillation_loss_with_grad(
      TensorView<const float>(z_dev->as<float>(), shape, gpu), TensorView<const float>(t_dev->as<float>(), shape, gpu),
      TensorView<const std::int64_t>(y_dev->as<std::int64_t>(), Shape{b, l}, gpu),
      TensorView<float>(g_dev.as<float>(), shape, gpu), out.loss(false), ws.workspace(), nullptr, o,
      shrink::cuda::Synchronize::yes);
  check_value(out.download(false).value, cpu.value, 4e-6, "value");
  check_gradient(g_dev.download<float>(z.size()), g_cpu, b * l, vocab, vocab, 1e-6);
}

TEST_CASE("cuda distillation_loss writes nothing when a host check of the CE part fails", "[gpu]") {
  const std::int64_t rows = 4, vocab = 16;
  const std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 31);
  const std::vector<std::int32_t> y = {1, 2, 3, 4, 5};  // one label too many
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::distillation_loss_workspace_bytes(rows));
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  const TensorView<const float> zv(z_dev->as<float>(), Shape{rows, vocab}, gpu);
  CHECK_THROWS_WITH(shrink::cuda::distillation_loss_with_grad(
                        zv, zv, TensorView<const std::int32_t>(y_dev->as<std::int32_t>(), Shape{5}, gpu),
                        TensorView<float>(g_dev.as<float>(), Shape{rows, vocab}, gpu), out.loss(true),
                        ws.workspace(), nullptr, {}, shrink::cuda::Synchronize::yes),
                    Contains("shrink::cuda::distillation_loss_with_grad") && Contains("labels.shape"));
  CUDA_REQUIRE(cudaDeviceSynchronize());
  const std::vector<unsigned char> g = g_dev.download<unsigned char>(g_dev.bytes());
  CHECK(std::all_of(g.begin(), g.end(), [](unsigned char b) { return b == shrink::test::kPoison; }));
  const std::vector<unsigned char> w = ws.download<unsigned char>(ws.bytes());
  CHECK(std::all_of(w.begin(), w.end(), [](unsigned char b) { return b == shrink::test::kPoison; }));
  CHECK(out.per_row_untouched());
  const double v = out.download(false).value;
  unsigned char vb[sizeof(double)];
  std::memcpy(vb, &v, sizeof v);
  CHECK(std::all_of(vb, vb + sizeof vb, [](unsigned char b) { return b == shrink::test::kPoison; }));
}

TEST_CASE("cuda distillation_loss device-side checks of both parts", "[gpu]") {
  namespace k = shrink::cuda;
  const std::int64_t rows = 6, vocab = 40;
  const std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 11);
  const std::vector<float> t = random_elements<float>(z.size(), 12);
  const std::vector<std::int64_t> y = {1, 5, 39, 0, 7, 12};
  const std::vector<std::uint8_t> mask = {1, 1, 1, 1, 0, 1};
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> t_dev = to_device(t);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(k::distillation_loss_workspace_bytes(rows));
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  DistillationOptions o;
  o.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  const auto run = [&](float alpha, k::Synchronize sync) {
    DistillationOptions a = o;
    a.alpha = alpha;
    k::distillation_loss_with_grad(
        TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, gpu),
        TensorView<const float>(t_dev->as<float>(), Shape{rows, vocab}, gpu),
        TensorView<const std::int64_t>(y_dev->as<std::int64_t>(), Shape{rows}, gpu),
        TensorView<float>(g_dev.as<float>(), Shape{rows, vocab}, gpu), out.loss(false), ws.workspace(), nullptr, a,
        sync);
  };
  const auto yes = k::Synchronize::yes;
  for (const float alpha : {0.0f, 0.4f, 1.0f}) CHECK_NOTHROW(run(alpha, yes));  // valid

  SECTION("a label outside [0, V) in a kept row: CE's check, unless alpha = 1 leaves CE out") {
    std::vector<std::int64_t> b = y;
    b[2] = 40;
    y_dev->upload(b.data(), b.size() * sizeof(std::int64_t));
    CHECK_THROWS_WITH(run(0.4f, yes), Contains("shrink::cuda::distillation_loss_with_grad") && Contains("label"));
    CHECK_THROWS_WITH(run(0.0f, yes), Contains("label"));
    CHECK_NOTHROW(run(1.0f, yes));
    b = y;
    b[4] = 1000;  // a masked row's label is not checked
    y_dev->upload(b.data(), b.size() * sizeof(std::int64_t));
    CHECK_NOTHROW(run(0.4f, yes));
  }
  SECTION("NaN in a kept teacher row: KD's check, unless alpha = 0 leaves KD out") {
    std::vector<float> b = t;
    b[3 * vocab + 5] = kNaN;
    t_dev->upload(b.data(), b.size() * sizeof(float));
    CHECK_THROWS_WITH(run(0.4f, yes), Contains("NaN or inf"));
    CHECK_THROWS_WITH(run(1.0f, yes), Contains("NaN or inf"));
    CHECK_NOTHROW(run(0.0f, yes));
    t_dev->upload(t.data(), t.size() * sizeof(float));
    CHECK_NOTHROW(run(0.4f, yes));  // the next call starts from a clean status word
  }
  SECTION("both at once, and check_status later on the same workspace") {
    std::vector<float> b = t;
    b[vocab] = kInf;
    t_dev->upload(b.data(), b.size() * sizeof(float));
    std::vector<std::int64_t> yb = y;
    yb[0] = -3;
    y_dev->upload(yb.data(), yb.size() * sizeof(std::int64_t));
    run(0.5f, k::Synchronize::no);
    CHECK_THROWS_WITH(k::check_status(ws.workspace(), nullptr), Contains("NaN or inf") && Contains("label"));
  }
}

TEST_CASE("cuda distillation_loss validates its arguments on the host", "[host]") {
  using shrink::cuda::DeviceLoss;
  using shrink::cuda::distillation_loss;
  using shrink::cuda::distillation_loss_with_grad;
  using shrink::cuda::Workspace;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* labels = static_cast<std::int64_t*>(fake_device_pointer());
  auto* indices = static_cast<std::int32_t*>(fake_device_pointer());
  auto* value = static_cast<double*>(fake_device_pointer());
  auto* bytes = static_cast<std::uint8_t*>(fake_device_pointer());
  const Device gpu = Device::cuda(0);
  const TensorView<const float> z(data, Shape{4, 8}, gpu);
  const TensorView<const std::int64_t> y(labels, Shape{4}, gpu);
  const TensorView<float> g(data, Shape{4, 8}, gpu);
  const TopKTeacher<float, std::int32_t> topk{TensorView<const float>(data, Shape{4, 3}, gpu),
                                              TensorView<const std::int32_t>(indices, Shape{4, 3}, gpu), {}};
  const DeviceLoss out{value, value};
  const Workspace ws{fake_device_pointer(), shrink::cuda::distillation_loss_workspace_bytes(4)};
  const char* fn = "shrink::cuda::distillation_loss";

  CHECK_THROWS_WITH(shrink::cuda::distillation_loss_workspace_bytes(0), Contains("rows"));
  CHECK(ws.bytes >= shrink::cuda::distillation_loss_workspace_bytes(1));

  SECTION("options") {
    DistillationOptions o;
    for (const float alpha : {-0.1f, 1.5f, kNaN}) {
      o.alpha = alpha;
      CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains(fn) && Contains("options.alpha"));
      CHECK_THROWS_WITH(distillation_loss(z, topk, y, out, ws, nullptr, o), Contains("options.alpha"));
    }
    o = {};
    for (const float alpha : {0.0f, 0.5f}) {  // checked even when alpha = 0 leaves KD out
      o.alpha = alpha;
      o.temperature = 0.0f;
      CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.temperature"));
      o.temperature = kInf;
      CHECK_THROWS_WITH(distillation_loss(z, topk, y, out, ws, nullptr, o), Contains("options.temperature"));
    }
    o = {};
    o.grad_scale = std::numeric_limits<double>::quiet_NaN();
    CHECK_THROWS_WITH(distillation_loss_with_grad(z, z, y, g, out, ws, nullptr, o),
                      Contains("shrink::cuda::distillation_loss_with_grad") && Contains("options.grad_scale"));
    o = {};
    o.kd_reduction = Reduction::none;
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o),
                      Contains("options.kd_reduction") && Contains("none for both"));
    o = {};
    o.ce_reduction = Reduction::none;
    CHECK_THROWS_WITH(distillation_loss(z, topk, y, out, ws, nullptr, o), Contains("none for both"));
    o = {};
    o.ce_reduction = static_cast<Reduction>(9);
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.ce_reduction"));
    o = {};
    o.kd_reduction = static_cast<Reduction>(-1);
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.kd_reduction"));
    o = {};
    for (const float eps : {-0.1f, 1.5f, kNaN}) {
      o.label_smoothing = eps;
      CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.label_smoothing"));
    }
    o = {};
    o.row_mask = TensorView<const std::uint8_t>(bytes, Shape{3}, gpu);
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.row_mask.shape"));
    o.row_mask = TensorView<const std::uint8_t>(bytes, Shape{4});
    CHECK_THROWS_WITH(distillation_loss(z, topk, y, out, ws, nullptr, o),
                      Contains("options.row_mask") && Contains("host memory"));
    o.row_mask = TensorView<const std::uint8_t>(bytes, Shape{4}, Strides{2}, gpu);
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, ws, nullptr, o), Contains("options.row_mask.strides"));
  }

  SECTION("student, labels, gradient") {
    CHECK_THROWS_WITH(distillation_loss(TensorView<const float>(data, Shape{4, 8}), z, y, out, ws, nullptr),
                      Contains(fn) && Contains("student") && Contains("host memory"));
    CHECK_THROWS_WITH(
        distillation_loss(TensorView<const float>(reinterpret_cast<float*>(reinterpret_cast<char*>(data) + 2),
                                                  Shape{4, 8}, gpu),
                          topk, y, out, ws, nullptr),
        Contains("student") && Contains("misaligned"));
    CHECK_THROWS_WITH(distillation_loss(TensorView<const float>(data, Shape{4, 0}, gpu), z, y, out, ws, nullptr),
                      Contains("student.shape"));
    CHECK_THROWS_WITH(
        distillation_loss(TensorView<const float>(data, Shape{4, 8}, Strides{1, 4}, gpu), z, y, out, ws, nullptr),
        Contains("student.strides"));
    CHECK_THROWS_WITH(distillation_loss(z, z, TensorView<const std::int64_t>(labels, Shape{5}, gpu), out, ws, nullptr),
                      Contains("labels.shape"));
    CHECK_THROWS_WITH(distillation_loss(z, topk, TensorView<const std::int64_t>(labels, Shape{4}), out, ws, nullptr),
                      Contains("labels") && Contains("host memory"));
    CHECK_THROWS_WITH(distillation_loss(z, z, TensorView<const std::int64_t>{}, out, ws, nullptr), Contains("labels"));
    CHECK_THROWS_WITH(
        distillation_loss(z, z, TensorView<const std::int32_t>(reinterpret_cast<std::int32_t*>(labels), Shape{4},
                                                               Strides{2}, gpu),
                          out, ws, nullptr),
        Contains("labels.strides"));
    CHECK_THROWS_WITH(
        distillation_loss_with_grad(z, z, y, TensorView<float>(data, Shape{4, 9}, gpu), out, ws, nullptr),
        Contains("shrink::cuda::distillation_loss_with_grad") && Contains("grad_student"));
    CHECK_THROWS_WITH(distillation_loss_with_grad(z, topk, y, TensorView<float>(data, Shape{4, 8}), out, ws, nullptr),
                      Contains("grad_student") && Contains("host memory"));
    // Full logits: the gradient has the student's very shape (as soft_target.hpp asks); top-k: its rows.
    CHECK_THROWS_WITH(
        distillation_loss_with_grad(z, z, y, TensorView<float>(data, Shape{2, 2, 8}, gpu), out, ws, nullptr),
        Contains("grad_student.shape"));
  }

  SECTION("full teacher") {
    CHECK_THROWS_WITH(distillation_loss(z, TensorView<const float>(data, Shape{4, 9}, gpu), y, out, ws, nullptr),
                      Contains(fn) && Contains("teacher"));
    CHECK_THROWS_WITH(distillation_loss(z, TensorView<const float>(data, Shape{2, 2, 8}, gpu), y, out, ws, nullptr),
                      Contains("teacher.shape"));
    CHECK_THROWS_WITH(distillation_loss(z, TensorView<const float>(data, Shape{4, 8}), y, out, ws, nullptr),
                      Contains("teacher") && Contains("host memory"));
    DistillationOptions o;
    o.alpha = 0.0f;  // still checked
    CHECK_THROWS_WITH(
        distillation_loss(z, TensorView<const float>(data, Shape{4, 8}, Strides{16, 2}, gpu), y, out, ws, nullptr, o),
        Contains("teacher.strides"));
  }

  SECTION("top-k teacher") {
    using Teacher = TopKTeacher<float, std::int32_t>;
    CHECK_THROWS_WITH(
        distillation_loss(z, Teacher{TensorView<const float>(data, Shape{5, 3}, gpu), topk.indices, {}}, y, out, ws,
                          nullptr),
        Contains(fn) && Contains("teacher.logits") && Contains("one row of k logits"));
    CHECK_THROWS_WITH(
        distillation_loss(z, Teacher{topk.logits, TensorView<const std::int32_t>(indices, Shape{4, 2}, gpu), {}}, y,
                          out, ws, nullptr),
        Contains("teacher.indices"));
    CHECK_THROWS_WITH(
        distillation_loss(z, Teacher{topk.logits, TensorView<const std::int32_t>(indices, Shape{4, 3}), {}}, y, out,
                          ws, nullptr),
        Contains("teacher.indices") && Contains("host memory"));
    CHECK_THROWS_WITH(distillation_loss(z,
                                        Teacher{TensorView<const float>(data, Shape{4, 9}, gpu),
                                                TensorView<const std::int32_t>(indices, Shape{4, 9}, gpu), {}},
                                        y, out, ws, nullptr),
                      Contains("k <= V"));
    CHECK_THROWS_WITH(
        distillation_loss(z, Teacher{topk.logits, topk.indices, TensorView<const float>(data, Shape{3}, gpu)}, y, out,
                          ws, nullptr),
        Contains("teacher.tail_mass.shape"));
    const TopKTeacher<float, std::int64_t> wide{
        topk.logits, TensorView<const std::int64_t>(labels, Shape{4, 3}, Strides{3, 2}, gpu), {}};
    DistillationOptions o;
    o.alpha = 0.0f;  // still checked
    CHECK_THROWS_WITH(distillation_loss(z, wide, y, out, ws, nullptr, o), Contains("teacher.indices.strides"));
  }

  SECTION("outputs and workspace") {
    CHECK_THROWS_WITH(distillation_loss(z, z, y, DeviceLoss{}, ws, nullptr), Contains(fn) && Contains("out.value"));
    DistillationOptions o;
    o.kd_reduction = o.ce_reduction = Reduction::none;
    CHECK_THROWS_WITH(distillation_loss(z, topk, y, DeviceLoss{value, nullptr}, ws, nullptr, o),
                      Contains("out.per_row"));
    CHECK_THROWS_WITH(
        distillation_loss(z, z, y, DeviceLoss{value, reinterpret_cast<double*>(reinterpret_cast<char*>(value) + 4)},
                          ws, nullptr, o),
        Contains("out.per_row") && Contains("misaligned"));
    CHECK_THROWS_WITH(distillation_loss(z, z, y, out, Workspace{ws.data, ws.bytes - 1}, nullptr),
                      Contains("workspace.bytes") && Contains("distillation_loss_workspace_bytes"));
    CHECK_THROWS_WITH(distillation_loss_with_grad(z, topk, y, g, out, Workspace{nullptr, ws.bytes}, nullptr),
                      Contains("workspace.data"));
    CHECK_THROWS_WITH(
        distillation_loss(z, z, y, out, Workspace{static_cast<char*>(ws.data) + 8, ws.bytes}, nullptr),
        Contains("workspace.data") && Contains("misaligned"));
  }
}
