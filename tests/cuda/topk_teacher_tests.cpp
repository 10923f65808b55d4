// Tests for shrink/cuda/topk_teacher.hpp: [gpu] cases match distill's top-k kl_div, reverse_kl_div and jensen_shannon
// (and their gradients) on the same random student logits and top-k teachers, for every element and index type,
// reduction, temperature, tail mass, row mask, accumulate, grad_scale, row stride and -inf logits, k from 1 to V and
// V from 1 to 262144, outputs poisoned (padding checked, absent rows NaN); device checks and determinism. [host]
// cases: every host check throws before any CUDA call.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "device_buffer.hpp"
#include "loss_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/topk_teacher.hpp"
#include "shrink/distill/reduction.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/mismatch_map.hpp"

namespace {

using namespace shrink::test;
using namespace shrink::test::losses;
using Catch::Matchers::Contains;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::Strides;
using shrink::TensorView;
using shrink::distill::Loss;
using shrink::distill::Reduction;
using shrink::distill::SoftDivergence;
using shrink::distill::SoftTargetOptions;
using shrink::distill::TopKTeacher;
using shrink::test::same_bits;
using shrink::test::losses::same_bits;

struct TopKCase {
  SoftDivergence kind;
  double beta;  // Jensen-Shannon only
  float temperature;
  Reduction reduction;
  bool masked;  // rows 1, 5, 9, ... are padding
  bool tail;    // a tail mass per row (0 on every third row but for the reverse KL); else none is given
  bool accumulate;
  double grad_scale;
  std::int64_t pad;  // row strides: student V + pad, teacher k + pad
  bool neg_inf;      // -inf student logits outside the row's k
  bool per_row;
};

const char* kind_name(SoftDivergence k) {
  switch (k) {
    case SoftDivergence::forward_kl: return "kl_div";
    case SoftDivergence::reverse_kl: return "reverse_kl_div";
    case SoftDivergence::jensen_shannon: return "jensen_shannon";
  }
  return "?";
}

std::string describe_topk_case(const TopKCase& c) {
  std::ostringstream out;
  out << kind_name(c.kind) << " beta " << c.beta << " T " << c.temperature << " " << reduction_name(c.reduction)
      << (c.masked ? " masked" : "") << (c.tail ? " tail" : "") << (c.accumulate ? " accumulate" : "") << " grad_scale "
      << c.grad_scale << " pad " << c.pad << (c.neg_inf ? " -inf" : "") << (c.per_row ? " per_row" : "");
  return out.str();
}

const std::vector<TopKCase> kTopKCases = {
    {SoftDivergence::forward_kl, 0.0, 1.0f, Reduction::batchmean, false, true, false, 1.0, 0, false, false},
    {SoftDivergence::forward_kl, 0.0, 2.5f, Reduction::mean, true, false, true, 0.5, 4, true, true},
    {SoftDivergence::reverse_kl, 0.0, 1.0f, Reduction::sum, true, true, false, 1.0, 0, true, true},
    {SoftDivergence::reverse_kl, 0.0, 0.7f, Reduction::none, false, true, true, -1.5, 2, false, true},
    {SoftDivergence::jensen_shannon, 0.5, 2.0f, Reduction::batchmean, true, true, false, 1.0, 1, true, false},
    {SoftDivergence::jensen_shannon, 0.1, 1.0f, Reduction::mean, false, false, true, 2.0, 0, false, true},
    {SoftDivergence::jensen_shannon, 1.0, 1.0f, Reduction::batchmean, true, true, false, 1.0, 0, false, false},
};

bool topk_masked_row(std::int64_t r) { return r % 4 == 1; }

template <class T, class Index>
Loss cpu_loss(const TopKCase& c, const TensorView<const T>& z, const TopKTeacher<T, Index>& teacher,
              const TensorView<T>* g, const SoftTargetOptions& o) {
  namespace d = shrink::distill;
  switch (c.kind) {
    case SoftDivergence::forward_kl: return g ? d::kl_div_with_grad(z, teacher, *g, o) : d::kl_div(z, teacher, o);
    case SoftDivergence::reverse_kl:
      return g ? d::reverse_kl_div_with_grad(z, teacher, *g, o) : d::reverse_kl_div(z, teacher, o);
    case SoftDivergence::jensen_shannon:
      return g ? d::jensen_shannon_with_grad(z, teacher, c.beta, *g, o) : d::jensen_shannon(z, teacher, c.beta, o);
  }
  return {};
}

template <class T, class Index>
void gpu_loss(const TopKCase& c, const TensorView<const T>& z, const TopKTeacher<T, Index>& teacher,
              const TensorView<T>* g, shrink::cuda::DeviceLoss out, shrink::cuda::Workspace ws,
              const SoftTargetOptions& o) {
  namespace k = shrink::cuda;
  const auto sync = k::Synchronize::yes;
  switch (c.kind) {
    case SoftDivergence::forward_kl:
      if (g)
        k::kl_div_with_grad(z, teacher, *g, out, ws, nullptr, o, sync);
      else
        k::kl_div(z, teacher, out, ws, nullptr, o, sync);
      break;
    case SoftDivergence::reverse_kl:
      if (g)
        k::reverse_kl_div_with_grad(z, teacher, *g, out, ws, nullptr, o, sync);
      else
        k::reverse_kl_div(z, teacher, out, ws, nullptr, o, sync);
      break;
    case SoftDivergence::jensen_shannon:
      if (g)
        k::jensen_shannon_with_grad(z, teacher, c.beta, *g, out, ws, nullptr, o, sync);
      else
        k::jensen_shannon(z, teacher, c.beta, out, ws, nullptr, o, sync);
      break;
  }
}

// k distinct entries of [0, vocab) in random order.
template <class Index>
std::vector<Index> distinct_indices(std::int64_t vocab, std::int64_t k, std::mt19937& rng) {
  std::vector<Index> out;
  if (vocab <= 4 * k) {
    std::vector<Index> all(static_cast<std::size_t>(vocab));
    std::iota(all.begin(), all.end(), Index{0});
    std::shuffle(all.begin(), all.end(), rng);
    out.assign(all.begin(), all.begin() + k);
    return out;
  }
  std::uniform_int_distribution<std::int64_t> pick(0, vocab - 1);
  std::unordered_set<std::int64_t> seen;
  while (static_cast<std::int64_t>(out.size()) < k) {
    const std::int64_t j = pick(rng);
    if (seen.insert(j).second) out.push_back(static_cast<Index>(j));
  }
  return out;
}

template <class T, class Index>
void check_case(std::int64_t rows, std::int64_t vocab, std::int64_t k, const TopKCase& c, std::uint32_t seed) {
  INFO(type_name<T>() << " indices int" << 8 * sizeof(Index) << " rows " << rows << " V " << vocab << " k " << k << ": "
                      << describe_topk_case(c));
  const std::int64_t zs = vocab + c.pad, ts = k + c.pad;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> tail_mass(0.0f, 0.3f);
  std::vector<T> z = random_elements<T>(static_cast<std::size_t>(rows * zs), seed, 2.5f);
  std::vector<T> tl = random_elements<T>(static_cast<std::size_t>(rows * ts), seed + 1, 2.5f);
  std::vector<Index> idx(static_cast<std::size_t>(rows * ts), Index{-7});  // padding: never read
  std::vector<float> tail(static_cast<std::size_t>(rows), 0.0f);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows), 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* zr = z.data() + r * zs;
    T* tr = tl.data() + r * ts;
    for (std::int64_t j = vocab; j < zs; ++j) zr[j] = from_float<T>(kNaN);
    for (std::int64_t j = k; j < ts; ++j) tr[j] = from_float<T>(kNaN);
    const std::vector<Index> chosen = distinct_indices<Index>(vocab, k, rng);
    std::copy(chosen.begin(), chosen.end(), idx.begin() + r * ts);
    // A row without a tail makes the reverse KL +inf (tested apart): that divergence always gets one.
    if (c.tail && k < vocab && (r % 3 != 0 || c.kind == SoftDivergence::reverse_kl))
      tail[static_cast<std::size_t>(r)] = 0.01f + tail_mass(rng);
    if (c.masked && topk_masked_row(r)) {
      mask[static_cast<std::size_t>(r)] = 0;
      for (std::int64_t j = 0; j < vocab; ++j) zr[j] = from_float<T>(kNaN);  // not read
      for (std::int64_t j = 0; j < k; ++j) tr[j] = from_float<T>(kNaN);
      idx[static_cast<std::size_t>(r * ts)] = Index{-1};  // not checked
      tail[static_cast<std::size_t>(r)] = 2.0f;           // not checked
    } else if (c.neg_inf) {
      std::vector<bool> member(static_cast<std::size_t>(vocab), false);
      for (const Index j : chosen) member[static_cast<std::size_t>(j)] = true;
      for (std::int64_t j = 5; j < vocab; j += 11)
        if (!member[static_cast<std::size_t>(j)]) zr[j] = from_float<T>(-kInf);
    }
  }
  std::vector<T> g0 =
      c.accumulate ? random_elements<T>(z.size(), seed + 2) : std::vector<T>(z.size(), poison_element<T>());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = vocab; j < zs; ++j) g0[static_cast<std::size_t>(r * zs + j)] = poison_element<T>();

  const Shape shape{rows, vocab}, k_shape{rows, k};
  const Strides z_strides{zs, 1}, t_strides{ts, 1};
  SoftTargetOptions o;
  o.temperature = c.temperature;
  o.reduction = c.reduction;
  o.grad_scale = c.grad_scale;
  o.accumulate = c.accumulate;
  if (c.masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  TopKTeacher<T, Index> teacher{
      TensorView<const T>(tl.data(), k_shape, t_strides), TensorView<const Index>(idx.data(), k_shape, t_strides), {}};
  if (c.tail) teacher.tail_mass = TensorView<const float>(tail.data(), Shape{rows});
  const TensorView<const T> z_view(z.data(), shape, z_strides);
  std::vector<T> g_cpu = g0;
  const TensorView<T> g_cpu_view(g_cpu.data(), shape, z_strides);
  Loss cpu = cpu_loss<T, Index>(c, z_view, teacher, &g_cpu_view, o);
  const bool with_rows = c.per_row || c.reduction == Reduction::none;
  if (with_rows && cpu.per_row.empty()) {
    SoftTargetOptions none = o;
    none.reduction = Reduction::none;
    cpu.per_row = cpu_loss<T, Index>(c, z_view, teacher, nullptr, none).per_row;
  }
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < rows; ++r) kept += c.masked && topk_masked_row(r) ? 0 : 1;
  const double unit =
      std::fabs(c.grad_scale) * c.temperature / shrink::distill::reduction_divisor(c.reduction, kept, vocab);

  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> tl_dev = to_device(tl);
  const std::unique_ptr<DeviceBuffer> idx_dev = to_device(idx);
  const std::unique_ptr<DeviceBuffer> tail_dev = to_device(tail);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  const std::unique_ptr<DeviceBuffer> g_dev = to_device(g0);
  DeviceBuffer ws(shrink::cuda::topk_workspace_bytes(rows));
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  SoftTargetOptions od = o;
  if (c.masked) od.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  TopKTeacher<T, Index> teacher_dev{TensorView<const T>(tl_dev->as<T>(), k_shape, t_strides, gpu),
                                    TensorView<const Index>(idx_dev->as<Index>(), k_shape, t_strides, gpu),
                                    {}};
  if (c.tail) teacher_dev.tail_mass = TensorView<const float>(tail_dev->as<float>(), Shape{rows}, gpu);
  const TensorView<const T> z_dev_view(z_dev->as<T>(), shape, z_strides, gpu);
  const TensorView<T> g_view(g_dev->as<T>(), shape, z_strides, gpu);

  gpu_loss<T, Index>(c, z_dev_view, teacher_dev, nullptr, out.loss(with_rows), ws.workspace(), od);
  {
    INFO("loss only");
    check_loss(out.download(with_rows), cpu, c.reduction, rows);
  }
  gpu_loss<T, Index>(c, z_dev_view, teacher_dev, &g_view, out.loss(with_rows), ws.workspace(), od);
  const Loss first = out.download(with_rows);
  const std::vector<T> g_first = g_dev->download<T>(g0.size());
  {
    INFO("with gradient");
    check_loss(first, cpu, c.reduction, rows);
    check_gradient(g_first, g_cpu, rows, vocab, zs, 1e-5 * unit);
  }
  g_dev->upload(g0.data(), g0.size() * sizeof(T));
  gpu_loss<T, Index>(c, z_dev_view, teacher_dev, &g_view, out.loss(with_rows), ws.workspace(), od);
  INFO("a second run gives the same bits");
  CHECK(same_bits(out.download(with_rows), first));
  CHECK_SAME_BITS(g_dev->download<T>(g0.size()), g_first);
}

template <class T, class Index>
void check_topk_cases(std::int64_t rows, std::int64_t vocab, std::int64_t k, std::uint32_t seed) {
  for (std::size_t i = 0; i < kTopKCases.size(); ++i)
    check_case<T, Index>(rows, vocab, k, kTopKCases[i], seed + 13 * static_cast<std::uint32_t>(i));
}

template <class T, class Index>
void check_topk_sizes(std::uint32_t seed) {
  check_topk_cases<T, Index>(5, 1, 1, seed);  // V = 1: no rest class
  check_topk_cases<T, Index>(37, 7, 3, seed + 1);
  check_topk_cases<T, Index>(37, 7, 7, seed + 2);  // k = V: no rest class
  check_topk_cases<T, Index>(37, 1000, 64, seed + 3);
  check_topk_cases<T, Index>(9, 50257, 64, seed + 4);
}

}  // namespace

TEST_CASE("cuda top-k teacher losses match the CPU: float", "[gpu]") {
  check_topk_sizes<float, std::int64_t>(1000);
  check_topk_cases<float, std::int32_t>(11, 1000, 17, 1100);
  check_case<float, std::int64_t>(2, 262144, 64, kTopKCases[1], 1200);
}

TEST_CASE("cuda top-k teacher losses match the CPU: half", "[gpu]") { check_topk_sizes<half, std::int32_t>(2000); }

TEST_CASE("cuda top-k teacher losses match the CPU: bfloat16", "[gpu]") {
  check_topk_sizes<bfloat16, std::int64_t>(3000);
}

TEST_CASE("cuda top-k reverse KL without a tail is +inf where the student has mass outside the k", "[gpu][sanitize]") {
  const std::int64_t rows = 3, vocab = 50, k = 4;
  std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 5);
  std::vector<float> tl = random_elements<float>(static_cast<std::size_t>(rows * k), 6);
  std::vector<std::int32_t> idx = {0, 1, 2, 3, 10, 11, 12, 13, 46, 47, 48, 49};
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> tl_dev = to_device(tl);
  const std::unique_ptr<DeviceBuffer> idx_dev = to_device(idx);
  DeviceBuffer ws(shrink::cuda::topk_workspace_bytes(rows));
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  const TopKTeacher<float, std::int32_t> teacher{
      TensorView<const float>(tl_dev->as<float>(), Shape{rows, k}, gpu),
      TensorView<const std::int32_t>(idx_dev->as<std::int32_t>(), Shape{rows, k}, gpu),
      {}};
  shrink::cuda::reverse_kl_div(TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, gpu), teacher,
                               out.loss(false), ws.workspace(), nullptr, {}, shrink::cuda::Synchronize::yes);
  CHECK(out.download(false).value == kInf);
}

TEST_CASE("cuda top-k teacher device-side checks", "[gpu]") {
  const std::int64_t rows = 4, vocab = 30, k = 3;
  const std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 21);
  const std::vector<float> tl = random_elements<float>(static_cast<std::size_t>(rows * k), 22);
  const std::vector<std::int64_t> idx = {0, 1, 2, 5, 9, 29, 7, 3, 4, 11, 12, 13};
  const std::vector<float> tail = {0.1f, 0.0f, 0.2f, 0.05f};
  const std::vector<std::uint8_t> mask = {1, 1, 0, 1};
  std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  std::unique_ptr<DeviceBuffer> tl_dev = to_device(tl);
  std::unique_ptr<DeviceBuffer> idx_dev = to_device(idx);
  std::unique_ptr<DeviceBuffer> tail_dev = to_device(tail);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::topk_workspace_bytes(rows));
  DeviceOutputs out(rows);
  const Device gpu = Device::cuda(0);
  SoftTargetOptions o;
  o.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  const TopKTeacher<float, std::int64_t> teacher{
      TensorView<const float>(tl_dev->as<float>(), Shape{rows, k}, gpu),
      TensorView<const std::int64_t>(idx_dev->as<std::int64_t>(), Shape{rows, k}, gpu),
      TensorView<const float>(tail_dev->as<float>(), Shape{rows}, gpu)};
  const auto run = [&] {
    shrink::cuda::kl_div_with_grad(TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, gpu), teacher,
                                   TensorView<float>(g_dev.as<float>(), Shape{rows, vocab}, gpu), out.loss(false),
                                   ws.workspace(), nullptr, o, shrink::cuda::Synchronize::yes);
  };
  run();  // valid

  SECTION("an index outside [0, V) or repeated in a kept row") {
    for (const std::int64_t bad : {std::int64_t{-1}, std::int64_t{30}, std::int64_t{5}}) {  // 5: row 1's first
      std::vector<std::int64_t> b = idx;
      b[4] = bad;
      idx_dev->upload(b.data(), b.size() * sizeof(std::int64_t));
      CHECK_THROWS_WITH(run(), Contains("shrink::cuda::kl_div_with_grad") && Contains("top-k index"));
    }
    std::vector<std::int64_t> b = idx;
    b[6] = 99;  // row 2 is masked
    b[7] = 99;
    idx_dev->upload(b.data(), b.size() * sizeof(std::int64_t));
    CHECK_NOTHROW(run());
  }
  SECTION("a tail outside [0, 1) in a kept row") {
    for (const float bad : {1.0f, -0.1f, kNaN}) {
      std::vector<float> b = tail;
      b[3] = bad;
      tail_dev->upload(b.data(), b.size() * sizeof(float));
      CHECK_THROWS_WITH(run(), Contains("tail mass"));
    }
    std::vector<float> b = tail;
    b[2] = 5.0f;  // masked
    tail_dev->upload(b.data(), b.size() * sizeof(float));
    CHECK_NOTHROW(run());
  }
  SECTION("NaN or +inf logits of a kept row, a student row all -inf") {
    std::vector<float> b = z;
    b[vocab + 20] = kNaN;
    z_dev->upload(b.data(), b.size() * sizeof(float));
    CHECK_THROWS_WITH(run(), Contains("NaN or inf"));
    b = z;
    for (std::int64_t j = 0; j < vocab; ++j) b[static_cast<std::size_t>(3 * vocab + j)] = -kInf;
    z_dev->upload(b.data(), b.size() * sizeof(float));
    CHECK_THROWS_WITH(run(), Contains("NaN or inf"));
    z_dev->upload(z.data(), z.size() * sizeof(float));
    std::vector<float> t = tl;
    t[1] = kInf;
    tl_dev->upload(t.data(), t.size() * sizeof(float));
    CHECK_THROWS_WITH(run(), Contains("NaN or inf"));
    t = tl;
    t[2 * k] = kNaN;  // masked row
    tl_dev->upload(t.data(), t.size() * sizeof(float));
    CHECK_NOTHROW(run());
  }
}

TEST_CASE("cuda top-k teacher losses validate their arguments on the host", "[host]") {
  using shrink::cuda::DeviceLoss;
  using shrink::cuda::kl_div;
  using shrink::cuda::Workspace;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* indices = static_cast<std::int32_t*>(fake_device_pointer());
  auto* value = static_cast<double*>(fake_device_pointer());
  const Device gpu = Device::cuda(0);
  const TensorView<const float> z(data, Shape{4, 8}, gpu);
  const TensorView<const float> tl(data, Shape{4, 3}, gpu);
  const TensorView<const std::int32_t> ti(indices, Shape{4, 3}, gpu);
  const TopKTeacher<float, std::int32_t> teacher{tl, ti, {}};
  const DeviceLoss out{value, value};
  const Workspace ws{fake_device_pointer(), shrink::cuda::topk_workspace_bytes(4)};

  CHECK_THROWS_WITH(shrink::cuda::topk_workspace_bytes(0), Contains("rows"));
  CHECK_THROWS_WITH(kl_div(TensorView<const float>(data, Shape{4, 8}), teacher, out, ws, nullptr),
                    Contains("shrink::cuda::kl_div") && Contains("student") && Contains("host memory"));
  CHECK_THROWS_WITH(kl_div(z, TopKTeacher<float, std::int32_t>{TensorView<const float>(data, Shape{5, 3}, gpu), ti, {}},
                           out, ws, nullptr),
                    Contains("teacher.logits") && Contains("one row of k logits"));
  CHECK_THROWS_WITH(
      kl_div(z, TopKTeacher<float, std::int32_t>{tl, TensorView<const std::int32_t>(indices, Shape{4, 2}, gpu), {}},
             out, ws, nullptr),
      Contains("teacher.indices"));
  CHECK_THROWS_WITH(
      kl_div(z, TopKTeacher<float, std::int32_t>{tl, TensorView<const std::int32_t>(indices, Shape{4, 3}), {}}, out, ws,
             nullptr),
      Contains("teacher.indices") && Contains("host memory"));
  CHECK_THROWS_WITH(kl_div(z,
                           TopKTeacher<float, std::int32_t>{TensorView<const float>(data, Shape{4, 9}, gpu),
                                                            TensorView<const std::int32_t>(indices, Shape{4, 9}, gpu),
                                                            {}},
                           out, ws, nullptr),
                    Contains("k <= V"));
  CHECK_THROWS_WITH(kl_div(z,
                           TopKTeacher<float, std::int32_t>{
                               tl, TensorView<const std::int32_t>(indices, Shape{4, 3}, Strides{3, 2}, gpu), {}},
                           out, ws, nullptr),
                    Contains("teacher.indices.strides"));
  CHECK_THROWS_WITH(kl_div(z, TopKTeacher<float, std::int32_t>{tl, ti, TensorView<const float>(data, Shape{3}, gpu)},
                           out, ws, nullptr),
                    Contains("teacher.tail_mass.shape"));
  CHECK_THROWS_WITH(
      shrink::cuda::kl_div_with_grad(z, teacher, TensorView<float>(data, Shape{4, 7}, gpu), out, ws, nullptr),
      Contains("kl_div_with_grad") && Contains("grad_student"));
  SoftTargetOptions o;
  for (const float t : {0.0f, -1.0f, kNaN, kInf}) {
    o.temperature = t;
    CHECK_THROWS_WITH(kl_div(z, teacher, out, ws, nullptr, o), Contains("options.temperature"));
  }
  o = {};
  o.grad_scale = kNaN;
  CHECK_THROWS_WITH(kl_div(z, teacher, out, ws, nullptr, o), Contains("options.grad_scale"));
  o = {};
  o.row_mask = TensorView<const std::uint8_t>(static_cast<std::uint8_t*>(fake_device_pointer()), Shape{5}, gpu);
  CHECK_THROWS_WITH(kl_div(z, teacher, out, ws, nullptr, o), Contains("options.row_mask.shape"));
  o = {};
  CHECK_THROWS_WITH(shrink::cuda::jensen_shannon(z, teacher, 1.5, out, ws, nullptr, o), Contains("beta"));
  CHECK_THROWS_WITH(shrink::cuda::reverse_kl_div(z, teacher, DeviceLoss{}, ws, nullptr, o),
                    Contains("shrink::cuda::reverse_kl_div") && Contains("out.value"));
  o.reduction = Reduction::none;
  CHECK_THROWS_WITH(kl_div(z, teacher, DeviceLoss{value, nullptr}, ws, nullptr, o), Contains("out.per_row"));
  CHECK_THROWS_WITH(kl_div(z, teacher, out, Workspace{ws.data, 8}, nullptr), Contains("topk_workspace_bytes"));
}
