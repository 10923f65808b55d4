// Tests for shrink/cuda/cross_entropy.hpp: [gpu] cases match distill::cross_entropy(_with_grad) on the same random
// logits for every element and label type, reduction, row mask, ignore_index, label smoothing, accumulate, grad_scale,
// row stride and -inf logits, V from 1 to 262144, outputs poisoned (padding between rows poisoned and checked, rows
// the kernel must not read filled with NaN); device checks and determinism. [host] cases: every host check throws
// before any CUDA call.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "loss_checks.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/cross_entropy.hpp"
#include "shrink/distill/cross_entropy.hpp"
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
using shrink::distill::CrossEntropyOptions;
using shrink::distill::Loss;
using shrink::distill::Reduction;
using shrink::test::same_bits;
using shrink::test::losses::same_bits;

struct CrossEntropyCase {
  Reduction reduction;
  bool masked;   // rows 2, 7, 12, ... are padding (mask 0; mask values other than 1 keep a row)
  bool ignored;  // rows 3, 7, 11, ... are labelled ignore_index
  float smoothing;
  bool accumulate;
  double grad_scale;
  std::int64_t pad;  // row stride = V + pad
  bool neg_inf;      // -inf logits away from the label (with smoothing the row's loss is +inf)
  bool per_row;      // ask for out.per_row (always with none)
};

std::string describe_cross_entropy_case(const CrossEntropyCase& c) {
  std::ostringstream out;
  out << reduction_name(c.reduction) << (c.masked ? " masked" : "") << (c.ignored ? " ignore_index" : "") << " eps "
      << c.smoothing << (c.accumulate ? " accumulate" : "") << " grad_scale " << c.grad_scale << " pad " << c.pad
      << (c.neg_inf ? " -inf" : "") << (c.per_row ? " per_row" : "");
  return out.str();
}

const std::vector<CrossEntropyCase> kCrossEntropyCases = {
    {Reduction::mean, false, false, 0.0f, false, 1.0, 0, false, false},
    {Reduction::none, true, true, 0.0f, false, 1.0, 0, false, true},
    {Reduction::sum, true, true, 0.1f, true, 0.37, 5, false, true},
    {Reduction::batchmean, false, true, 0.0f, false, -2.0, 3, true, false},
    {Reduction::mean, true, false, 0.25f, false, 1.0, 0, true, true},
    {Reduction::mean, true, true, 1.0f, true, 1.0, 8, false, false},
};

bool cross_entropy_masked_row(std::int64_t r) { return r % 5 == 2; }

// Runs one case on the CPU and the GPU (loss only, then with the gradient, then again for the bits) and compares.
template <class T, class L>
void check_case(std::int64_t rows, std::int64_t vocab, const CrossEntropyCase& c, std::uint32_t seed) {
  INFO(type_name<T>() << " labels int" << 8 * sizeof(L) << " rows " << rows << " V " << vocab << ": "
                      << describe_cross_entropy_case(c));
  const std::int64_t stride = vocab + c.pad;
  const std::int64_t ignore_index = -100;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> label(0, vocab - 1);

  std::vector<T> z = random_elements<T>(static_cast<std::size_t>(rows * stride), seed, 3.0f);
  std::vector<L> y(static_cast<std::size_t>(rows));
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows), 1);
  for (std::int64_t r = 0; r < rows; ++r) {
    T* row = z.data() + r * stride;
    for (std::int64_t j = vocab; j < stride; ++j) row[j] = from_float<T>(kNaN);  // never read
    y[static_cast<std::size_t>(r)] = static_cast<L>(label(rng));
    if (r % 3 == 1) mask[static_cast<std::size_t>(r)] = 7;  // any nonzero byte keeps a row
    const bool absent = (c.masked && cross_entropy_masked_row(r)) || (c.ignored && ignored_row(r));
    if (c.masked && cross_entropy_masked_row(r)) {
      mask[static_cast<std::size_t>(r)] = 0;
      y[static_cast<std::size_t>(r)] = static_cast<L>(vocab + 3);  // a padding row's label is not checked
    } else if (c.ignored && ignored_row(r)) {
      y[static_cast<std::size_t>(r)] = static_cast<L>(ignore_index);
    }
    if (absent) {
      for (std::int64_t j = 0; j < vocab; ++j) row[j] = from_float<T>(kNaN);  // an absent row is not read
    } else if (c.neg_inf) {
      for (std::int64_t j = 3; j < vocab; j += 7)
        if (j != static_cast<std::int64_t>(y[static_cast<std::size_t>(r)])) row[j] = from_float<T>(-kInf);
    }
  }
  // The gradient buffer: random values to add to, or poison; poison between rows either way.
  std::vector<T> g0 =
      c.accumulate ? random_elements<T>(z.size(), seed + 1) : std::vector<T>(z.size(), poison_element<T>());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = vocab; j < stride; ++j) g0[static_cast<std::size_t>(r * stride + j)] = poison_element<T>();

  const Shape shape{rows, vocab};
  const Strides strides{stride, 1};
  CrossEntropyOptions o;
  o.ignore_index = ignore_index;
  o.label_smoothing = c.smoothing;
  o.reduction = c.reduction;
  o.grad_scale = c.grad_scale;
  o.accumulate = c.accumulate;
  if (c.masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  std::vector<T> g_cpu = g0;
  Loss cpu = shrink::distill::cross_entropy_with_grad(TensorView<const T>(z.data(), shape, strides),
                                                      TensorView<const L>(y.data(), Shape{rows}),
                                                      TensorView<T>(g_cpu.data(), shape, strides), o);
  const bool with_rows = c.per_row || c.reduction == Reduction::none;
  if (with_rows && cpu.per_row.empty()) {
    CrossEntropyOptions none = o;
    none.reduction = Reduction::none;
    cpu.per_row = shrink::distill::cross_entropy(TensorView<const T>(z.data(), shape, strides),
                                                 TensorView<const L>(y.data(), Shape{rows}), none)
                      .per_row;
  }

  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  const std::unique_ptr<DeviceBuffer> g_dev = to_device(g0);
  DeviceBuffer ws(shrink::cuda::cross_entropy_workspace_bytes(rows));
  DeviceOutputs out(rows);
  CrossEntropyOptions od = o;
  if (c.masked)
    od.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, Device::cuda(0));
  const TensorView<const T> z_view(z_dev->as<T>(), shape, strides, Device::cuda(0));
  const TensorView<const L> y_view(y_dev->as<L>(), Shape{rows}, Device::cuda(0));
  const TensorView<T> g_view(g_dev->as<T>(), shape, strides, Device::cuda(0));

  shrink::cuda::cross_entropy(z_view, y_view, out.loss(with_rows), ws.workspace(), nullptr, od,
                              shrink::cuda::Synchronize::yes);
  {
    INFO("loss only");
    check_loss(out.download(with_rows), cpu, c.reduction, rows);
    if (!with_rows) CHECK(out.per_row_untouched());
  }

  shrink::cuda::cross_entropy_with_grad(z_view, y_view, g_view, out.loss(with_rows), ws.workspace(), nullptr, od,
                                        shrink::cuda::Synchronize::yes);
  const Loss first = out.download(with_rows);
  const std::vector<T> g_first = g_dev->download<T>(g0.size());
  {
    INFO("with gradient");
    check_loss(first, cpu, c.reduction, rows);
    const double unit = std::fabs(c.grad_scale);  // c = grad_scale / divisor <= |grad_scale|
    check_gradient(g_first, g_cpu, rows, vocab, stride, 1e-6 * unit);
  }

  g_dev->upload(g0.data(), g0.size() * sizeof(T));
  shrink::cuda::cross_entropy_with_grad(z_view, y_view, g_view, out.loss(with_rows), ws.workspace(), nullptr, od,
                                        shrink::cuda::Synchronize::yes);
  INFO("a second run gives the same bits");
  CHECK(same_bits(out.download(with_rows), first));
  CHECK_SAME_BITS(g_dev->download<T>(g0.size()), g_first);
}

template <class T, class L>
void check_cross_entropy_cases(std::int64_t rows, std::int64_t vocab, std::uint32_t seed) {
  for (std::size_t i = 0; i < kCrossEntropyCases.size(); ++i)
    check_case<T, L>(rows, vocab, kCrossEntropyCases[i], seed + 17 * static_cast<std::uint32_t>(i));
}

}  // namespace

TEST_CASE("cuda cross_entropy matches the CPU: float", "[gpu]") {
  for (const std::int64_t vocab : {1, 7, 1000}) check_cross_entropy_cases<float, std::int64_t>(37, vocab, 100);
  check_cross_entropy_cases<float, std::int32_t>(9, 50257, 110);
}

TEST_CASE("cuda cross_entropy matches the CPU: half", "[gpu]") {
  for (const std::int64_t vocab : {1, 7, 1000}) check_cross_entropy_cases<half, std::int32_t>(37, vocab, 200);
  check_cross_entropy_cases<half, std::int64_t>(9, 50257, 210);
}

TEST_CASE("cuda cross_entropy matches the CPU: bfloat16", "[gpu]") {
  for (const std::int64_t vocab : {1, 7, 1000}) check_cross_entropy_cases<bfloat16, std::int64_t>(37, vocab, 300);
  check_cross_entropy_cases<bfloat16, std::int32_t>(9, 50257, 310);
  check_case<bfloat16, std::int64_t>(3, 262144, kCrossEntropyCases[0], 320);
  check_case<bfloat16, std::int64_t>(3, 262144, kCrossEntropyCases[2], 330);
}

TEST_CASE("cuda cross_entropy flattens [B, L, V] logits and [B, L] labels", "[gpu][sanitize]") {
  const std::int64_t b = 3, l = 5, vocab = 300;
  std::vector<float> z = random_elements<float>(static_cast<std::size_t>(b * l * vocab), 7, 2.0f);
  std::vector<std::int64_t> y(static_cast<std::size_t>(b * l));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int64_t>((i * 37) % vocab);
  std::vector<float> g_cpu(z.size());
  const Loss cpu = shrink::distill::cross_entropy_with_grad(TensorView<const float>(z.data(), Shape{b, l, vocab}),
                                                            TensorView<const std::int64_t>(y.data(), Shape{b, l}),
                                                            TensorView<float>(g_cpu.data(), Shape{b, l, vocab}));
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::cross_entropy_workspace_bytes(b * l));
  DeviceOutputs out(b * l);
  shrink::cuda::cross_entropy_with_grad(
      TensorView<const float>(z_dev->as<float>(), Shape{b, l, vocab}, Device::cuda(0)),
      TensorView<const std::int64_t>(y_dev->as<std::int64_t>(), Shape{b, l}, Device::cuda(0)),
      TensorView<float>(g_dev.as<float>(), Shape{b, l, vocab}, Device::cuda(0)), out.loss(false), ws.workspace(),
      nullptr, {}, shrink::cuda::Synchronize::yes);
  check_loss(out.download(false), cpu, Reduction::mean, b * l);
  check_gradient(g_dev.download<float>(z.size()), g_cpu, b * l, vocab, vocab, 1e-6);
}

TEST_CASE("cuda cross_entropy: a gradient at another 16-byte phase than the logits", "[gpu]") {
  const std::int64_t rows = 5, vocab = 1003;
  const std::vector<half> z = random_elements<half>(static_cast<std::size_t>(rows * vocab), 9, 2.0f);
  std::vector<std::int32_t> y = {0, 1002, 17, 500, 3};
  std::vector<half> g_cpu(z.size());
  const Loss cpu = shrink::distill::cross_entropy_with_grad(TensorView<const half>(z.data(), Shape{rows, vocab}),
                                                            TensorView<const std::int32_t>(y.data(), Shape{rows}),
                                                            TensorView<half>(g_cpu.data(), Shape{rows, vocab}));
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  DeviceBuffer g_dev((z.size() + 1) * sizeof(half));  // the gradient starts one element in: 2 bytes off the logits
  DeviceBuffer ws(shrink::cuda::cross_entropy_workspace_bytes(rows));
  DeviceOutputs out(rows);
  shrink::cuda::cross_entropy_with_grad(
      TensorView<const half>(z_dev->as<half>(), Shape{rows, vocab}, Device::cuda(0)),
      TensorView<const std::int32_t>(y_dev->as<std::int32_t>(), Shape{rows}, Device::cuda(0)),
      TensorView<half>(g_dev.as<half>() + 1, Shape{rows, vocab}, Device::cuda(0)), out.loss(false), ws.workspace(),
      nullptr, {}, shrink::cuda::Synchronize::yes);
  check_loss(out.download(false), cpu, Reduction::mean, rows);
  const std::vector<half> g_all = g_dev.download<half>(z.size() + 1);
  CHECK_SAME_BITS(std::vector<half>{g_all[0]}, std::vector<half>{poison_element<half>()});  // the one before
  check_gradient(std::vector<half>(g_all.begin() + 1, g_all.end()), g_cpu, rows, vocab, vocab, 1e-6 / rows);
}

TEST_CASE("cuda cross_entropy: a mean over no kept rows is NaN, as on the CPU", "[gpu]") {
  const std::int64_t rows = 4, vocab = 10;
  std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 3);
  const std::vector<std::int64_t> y(static_cast<std::size_t>(rows), -100);
  const std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::cross_entropy_workspace_bytes(rows));
  DeviceOutputs out(rows);
  shrink::cuda::cross_entropy_with_grad(
      TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, Device::cuda(0)),
      TensorView<const std::int64_t>(y_dev->as<std::int64_t>(), Shape{rows}, Device::cuda(0)),
      TensorView<float>(g_dev.as<float>(), Shape{rows, vocab}, Device::cuda(0)), out.loss(false), ws.workspace(),
      nullptr, {}, shrink::cuda::Synchronize::yes);
  CHECK(std::isnan(out.download(false).value));
  for (float v : g_dev.download<float>(z.size())) CHECK(v == 0.0f);
}

TEST_CASE("cuda cross_entropy device-side checks", "[gpu]") {
  const std::int64_t rows = 6, vocab = 40;
  std::vector<float> z = random_elements<float>(static_cast<std::size_t>(rows * vocab), 11);
  std::vector<std::int32_t> y = {1, 5, 39, 0, 7, 12};
  std::vector<std::uint8_t> mask = {1, 1, 1, 1, 0, 1};
  std::unique_ptr<DeviceBuffer> z_dev = to_device(z);
  std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  DeviceBuffer g_dev(z.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::cross_entropy_workspace_bytes(rows));
  DeviceOutputs out(rows);
  CrossEntropyOptions o;
  o.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, Device::cuda(0));
  const auto run = [&] {
    shrink::cuda::cross_entropy_with_grad(
        TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, Device::cuda(0)),
        TensorView<const std::int32_t>(y_dev->as<std::int32_t>(), Shape{rows}, Device::cuda(0)),
        TensorView<float>(g_dev.as<float>(), Shape{rows, vocab}, Device::cuda(0)), out.loss(false), ws.workspace(),
        nullptr, o, shrink::cuda::Synchronize::yes);
  };
  const auto reset = [&] {
    z_dev->upload(z.data(), z.size() * sizeof(float));
    y_dev->upload(y.data(), y.size() * sizeof(std::int32_t));
  };
  run();  // valid

  SECTION("NaN or +inf in a kept row") {
    for (const float bad : {kNaN, kInf}) {
      std::vector<float> zb = z;
      zb[2 * vocab + 17] = bad;
      z_dev->upload(zb.data(), zb.size() * sizeof(float));
      CHECK_THROWS_WITH(run(), Contains("shrink::cuda::cross_entropy_with_grad") && Contains("NaN or inf"));
    }
    reset();
    run();  // the next call starts from a clean status word
  }
  SECTION("a kept row all -inf") {
    std::vector<float> zb = z;
    for (std::int64_t j = 0; j < vocab; ++j) zb[static_cast<std::size_t>(vocab + j)] = -kInf;
    z_dev->upload(zb.data(), zb.size() * sizeof(float));
    CHECK_THROWS_WITH(run(), Contains("not a whole row"));
  }
  SECTION("NaN in a masked row is not read") {
    std::vector<float> zb = z;
    zb[4 * vocab + 3] = kNaN;
    z_dev->upload(zb.data(), zb.size() * sizeof(float));
    CHECK_NOTHROW(run());
  }
  SECTION("labels outside [0, V)") {
    for (const std::int32_t bad : {-1, 40, 1000}) {
      std::vector<std::int32_t> yb = y;
      yb[3] = bad;
      y_dev->upload(yb.data(), yb.size() * sizeof(std::int32_t));
      CHECK_THROWS_WITH(run(), Contains("label"));
    }
    std::vector<std::int32_t> yb = y;
    yb[4] = 1000;  // a masked row's label is not checked
    yb[5] = -100;  // ignore_index
    y_dev->upload(yb.data(), yb.size() * sizeof(std::int32_t));
    CHECK_NOTHROW(run());
  }
  SECTION("check_status later, on the same workspace") {
    std::vector<std::int32_t> yb = y;
    yb[0] = 77;
    y_dev->upload(yb.data(), yb.size() * sizeof(std::int32_t));
    shrink::cuda::cross_entropy(TensorView<const float>(z_dev->as<float>(), Shape{rows, vocab}, Device::cuda(0)),
                                TensorView<const std::int32_t>(y_dev->as<std::int32_t>(), Shape{rows}, Device::cuda(0)),
                                out.loss(false), ws.workspace(), nullptr, o);
    CHECK_THROWS_WITH(shrink::cuda::check_status(ws.workspace(), nullptr), Contains("label"));
  }
}

TEST_CASE("cuda cross_entropy validates its arguments on the host", "[host]") {
  using shrink::cuda::cross_entropy;
  using shrink::cuda::cross_entropy_with_grad;
  using shrink::cuda::DeviceLoss;
  using shrink::cuda::Workspace;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* labels = static_cast<std::int64_t*>(fake_device_pointer());
  auto* value = static_cast<double*>(fake_device_pointer());
  const Device gpu = Device::cuda(0);
  const TensorView<const float> z(data, Shape{4, 8}, gpu);
  const TensorView<const std::int64_t> y(labels, Shape{4}, gpu);
  const TensorView<float> g(data, Shape{4, 8}, gpu);
  const DeviceLoss out{value, value};
  const Workspace ws{fake_device_pointer(), shrink::cuda::cross_entropy_workspace_bytes(4)};
  const char* fn = "shrink::cuda::cross_entropy";

  CHECK_THROWS_WITH(shrink::cuda::cross_entropy_workspace_bytes(0), Contains("rows"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(data, Shape{4, 8}), y, out, ws, nullptr),
                    Contains(fn) && Contains("logits") && Contains("host memory"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(nullptr, Shape{4, 8}, gpu), y, out, ws, nullptr),
                    Contains("null pointer"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(reinterpret_cast<float*>(reinterpret_cast<char*>(data) + 2),
                                                          Shape{4, 8}, gpu),
                                  y, out, ws, nullptr),
                    Contains("misaligned"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(data, Shape{}, gpu), y, out, ws, nullptr),
                    Contains("logits.rank"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(data, Shape{4, 0}, gpu), y, out, ws, nullptr),
                    Contains("logits.shape"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(data, Shape{4, 8}, Strides{1, 4}, gpu), y, out, ws, nullptr),
                    Contains("logits.strides") && Contains("contiguous last dimension"));
  CHECK_THROWS_WITH(
      cross_entropy(TensorView<const float>(data, Shape{2, 2, 8}, Strides{100, 10, 1}, gpu), y, out, ws, nullptr),
      Contains("logits.strides") && Contains("one stride"));
  CHECK_THROWS_WITH(cross_entropy(TensorView<const float>(data, Shape{4, 8}, Strides{6, 1}, gpu), y, out, ws, nullptr),
                    Contains("do not overlap"));
  CHECK_THROWS_WITH(cross_entropy(z, TensorView<const std::int64_t>(labels, Shape{5}, gpu), out, ws, nullptr),
                    Contains("labels.shape"));
  CHECK_THROWS_WITH(
      cross_entropy(z, TensorView<const std::int64_t>(labels, Shape{4}, Strides{2}, gpu), out, ws, nullptr),
      Contains("labels.strides"));
  CHECK_THROWS_WITH(cross_entropy(z, TensorView<const std::int64_t>(labels, Shape{4}), out, ws, nullptr),
                    Contains("labels") && Contains("host memory"));
  CHECK_THROWS_WITH(cross_entropy(z, TensorView<const std::int64_t>{}, out, ws, nullptr), Contains("labels"));
  CHECK_THROWS_WITH(cross_entropy_with_grad(z, y, TensorView<float>(data, Shape{4, 9}, gpu), out, ws, nullptr),
                    Contains("cross_entropy_with_grad") && Contains("grad_logits"));
  CHECK_THROWS_WITH(cross_entropy_with_grad(z, y, TensorView<float>(data, Shape{4, 8}), out, ws, nullptr),
                    Contains("grad_logits") && Contains("host memory"));

  CrossEntropyOptions o;
  o.row_mask = TensorView<const std::uint8_t>(static_cast<std::uint8_t*>(fake_device_pointer()), Shape{3}, gpu);
  CHECK_THROWS_WITH(cross_entropy(z, y, out, ws, nullptr, o), Contains("options.row_mask.shape"));
  o.row_mask = TensorView<const std::uint8_t>(static_cast<std::uint8_t*>(fake_device_pointer()), Shape{4});
  CHECK_THROWS_WITH(cross_entropy(z, y, out, ws, nullptr, o), Contains("options.row_mask") && Contains("host memory"));
  o = {};
  for (const float eps : {-0.1f, 1.5f, kNaN}) {
    o.label_smoothing = eps;
    CHECK_THROWS_WITH(cross_entropy(z, y, out, ws, nullptr, o), Contains("options.label_smoothing"));
  }
  o = {};
  o.grad_scale = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(cross_entropy(z, y, out, ws, nullptr, o), Contains("options.grad_scale"));
  o = {};
  o.reduction = static_cast<Reduction>(9);
  CHECK_THROWS_WITH(cross_entropy(z, y, out, ws, nullptr, o), Contains("options.reduction"));
  o = {};
  CHECK_THROWS_WITH(cross_entropy(z, y, DeviceLoss{}, ws, nullptr, o), Contains("out.value"));
  o.reduction = Reduction::none;
  CHECK_THROWS_WITH(cross_entropy(z, y, DeviceLoss{value, nullptr}, ws, nullptr, o), Contains("out.per_row"));
  CHECK_THROWS_WITH(
      cross_entropy(z, y, DeviceLoss{value, reinterpret_cast<double*>(reinterpret_cast<char*>(value) + 4)}, ws, nullptr,
                    o),
      Contains("out.per_row") && Contains("misaligned"));
  CHECK_THROWS_WITH(cross_entropy(z, y, out, Workspace{ws.data, ws.bytes - 1}, nullptr),
                    Contains("workspace.bytes") && Contains("cross_entropy_workspace_bytes"));
  CHECK_THROWS_WITH(cross_entropy(z, y, out, Workspace{nullptr, ws.bytes}, nullptr), Contains("workspace.data"));
}
