// Tests for shrink/cuda/feature_losses.hpp: [gpu] cases match distill's mse_loss, cosine_embedding_loss and
// attention_transfer_loss (and their gradients, each side alone or both) on the same random features for every element
// type, reduction, row mask, accumulate, grad_scale, target, margin and layout (row strides; sample and channel
// strides), outputs poisoned (padding checked); device checks and determinism. [host] cases: every host check throws
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
#include "shrink/cuda/feature_losses.hpp"
#include "shrink/distill/attention_transfer.hpp"
#include "shrink/distill/cosine_embedding.hpp"
#include "shrink/distill/feature_mse.hpp"
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
using shrink::distill::CosineEmbeddingOptions;
using shrink::distill::FeatureLossOptions;
using shrink::distill::Loss;
using shrink::distill::Reduction;
using shrink::test::same_bits;
using shrink::test::losses::same_bits;

enum class Pair { mse, cosine };

struct FeatureLossCase {
  Reduction reduction;
  bool masked;  // rows 2, 6, 10, ... are padding
  bool accumulate;
  double grad_scale;
  std::int64_t pad;  // row strides D + pad (the teacher's and the gradients' D + 2 pad)
  bool grad_student, grad_teacher;
  bool per_row;
  bool targets;  // cosine: random +1 / -1 targets (else none: every row +1)
  double margin;
};

std::string describe_feature_loss_case(const FeatureLossCase& c) {
  std::ostringstream out;
  out << reduction_name(c.reduction) << (c.masked ? " masked" : "") << (c.accumulate ? " accumulate" : "")
      << " grad_scale " << c.grad_scale << " pad " << c.pad << (c.grad_student ? " grad_student" : "")
      << (c.grad_teacher ? " grad_teacher" : "") << (c.per_row ? " per_row" : "") << (c.targets ? " targets" : "")
      << " margin " << c.margin;
  return out.str();
}

const std::vector<FeatureLossCase> kFeatureLossCases = {
    {Reduction::mean, false, false, 1.0, 0, true, true, false, false, 0.0},
    {Reduction::none, true, false, 1.0, 3, true, false, true, true, 0.2},
    {Reduction::sum, true, true, 0.25, 1, false, true, true, true, -0.3},
    {Reduction::batchmean, false, true, -3.0, 5, true, true, false, true, 0.0},
    {Reduction::mean, true, false, 1.0, 0, false, false, true, false, 0.0},
};

bool feature_loss_masked_row(std::int64_t r) { return r % 4 == 2; }

template <class T>
Loss cpu_pair(Pair kind, const TensorView<const T>& s, const TensorView<const T>& t,
              const TensorView<const std::int8_t>& y, const TensorView<T>& gs, const TensorView<T>& gt,
              const CosineEmbeddingOptions& o) {
  if (kind == Pair::mse) return shrink::distill::mse_loss_with_grad<T>(s, t, gs, gt, o);
  return shrink::distill::cosine_embedding_loss_with_grad<T>(s, t, y, gs, gt, o);
}

template <class T>
void gpu_pair(Pair kind, const TensorView<const T>& s, const TensorView<const T>& t,
              const TensorView<const std::int8_t>& y, const TensorView<T>* gs, const TensorView<T>* gt,
              shrink::cuda::DeviceLoss out, shrink::cuda::Workspace ws, const CosineEmbeddingOptions& o) {
  const auto sync = shrink::cuda::Synchronize::yes;
  const bool grads = gs != nullptr || gt != nullptr;
  const TensorView<T> none{};
  if (kind == Pair::mse) {
    if (grads)
      shrink::cuda::mse_loss_with_grad<T>(s, t, gs ? *gs : none, gt ? *gt : none, out, ws, nullptr, o, sync);
    else
      shrink::cuda::mse_loss(s, t, out, ws, nullptr, o, sync);
  } else {
    if (grads)
      shrink::cuda::cosine_embedding_loss_with_grad<T>(s, t, y, gs ? *gs : none, gt ? *gt : none, out, ws, nullptr, o,
                                                       sync);
    else
      shrink::cuda::cosine_embedding_loss(s, t, y, out, ws, nullptr, o, sync);
  }
}

// Random rows at `stride` (padding NaN); gradient buffers random (accumulate) or poisoned, padding poisoned.
template <class T>
std::vector<T> padded_rows(std::int64_t rows, std::int64_t cols, std::int64_t stride, std::uint32_t seed) {
  std::vector<T> x = random_elements<T>(static_cast<std::size_t>(rows * stride), seed, 1.5f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = cols; j < stride; ++j) x[static_cast<std::size_t>(r * stride + j)] = from_float<T>(kNaN);
  return x;
}

template <class T>
std::vector<T> gradient_buffer(std::int64_t rows, std::int64_t cols, std::int64_t stride, bool accumulate,
                               std::uint32_t seed) {
  std::vector<T> g = accumulate ? random_elements<T>(static_cast<std::size_t>(rows * stride), seed)
                                : std::vector<T>(static_cast<std::size_t>(rows * stride), poison_element<T>());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = cols; j < stride; ++j) g[static_cast<std::size_t>(r * stride + j)] = poison_element<T>();
  return g;
}

template <class T>
void check_pair(Pair kind, std::int64_t rows, std::int64_t d, const FeatureLossCase& c, std::uint32_t seed) {
  INFO((kind == Pair::mse ? "mse_loss " : "cosine_embedding_loss ")
       << type_name<T>() << " rows " << rows << " D " << d << ": " << describe_feature_loss_case(c));
  const std::int64_t ss = d + c.pad, ts = d + 2 * c.pad;
  const std::vector<T> s = padded_rows<T>(rows, d, ss, seed);
  const std::vector<T> t = padded_rows<T>(rows, d, ts, seed + 1);
  std::vector<std::int8_t> y(static_cast<std::size_t>(rows), 1);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(rows), 1);
  std::mt19937 rng(seed);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (c.targets && rng() % 2 == 0) y[static_cast<std::size_t>(r)] = -1;
    if (c.masked && feature_loss_masked_row(r)) mask[static_cast<std::size_t>(r)] = 0;
  }
  const std::vector<T> gs0 = gradient_buffer<T>(rows, d, ts, c.accumulate, seed + 2);
  const std::vector<T> gt0 = gradient_buffer<T>(rows, d, ts, c.accumulate, seed + 3);

  const Shape shape{rows, d};
  const Strides s_strides{ss, 1}, t_strides{ts, 1};
  CosineEmbeddingOptions o;
  o.reduction = c.reduction;
  o.grad_scale = c.grad_scale;
  o.accumulate = c.accumulate;
  o.margin = c.margin;
  if (c.masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{rows});
  const TensorView<const std::int8_t> y_host =
      c.targets ? TensorView<const std::int8_t>(y.data(), Shape{rows}) : TensorView<const std::int8_t>{};
  std::vector<T> gs_cpu = gs0, gt_cpu = gt0;
  const TensorView<const T> s_host(s.data(), shape, s_strides), t_host(t.data(), shape, t_strides);
  Loss cpu = cpu_pair<T>(kind, s_host, t_host, y_host,
                         c.grad_student ? TensorView<T>(gs_cpu.data(), shape, t_strides) : TensorView<T>{},
                         c.grad_teacher ? TensorView<T>(gt_cpu.data(), shape, t_strides) : TensorView<T>{}, o);
  const bool with_rows = c.per_row || c.reduction == Reduction::none;
  if (with_rows && cpu.per_row.empty()) {
    CosineEmbeddingOptions none = o;
    none.reduction = Reduction::none;
    cpu.per_row = cpu_pair<T>(kind, s_host, t_host, y_host, TensorView<T>{}, TensorView<T>{}, none).per_row;
  }
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < rows; ++r) kept += c.masked && feature_loss_masked_row(r) ? 0 : 1;
  const double unit = std::fabs(c.grad_scale) * (kind == Pair::mse ? 2.0 : 1.0) /
                      shrink::distill::reduction_divisor(c.reduction, kept, kind == Pair::mse ? d : 1);

  const Device gpu = Device::cuda(0);
  const std::unique_ptr<DeviceBuffer> s_dev = to_device(s);
  const std::unique_ptr<DeviceBuffer> t_dev = to_device(t);
  const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  const std::unique_ptr<DeviceBuffer> gs_dev = to_device(gs0);
  const std::unique_ptr<DeviceBuffer> gt_dev = to_device(gt0);
  DeviceBuffer ws(shrink::cuda::feature_loss_workspace_bytes(rows));
  DeviceOutputs out(rows);
  CosineEmbeddingOptions od = o;
  if (c.masked) od.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  const TensorView<const std::int8_t> y_view =
      c.targets ? TensorView<const std::int8_t>(y_dev->as<std::int8_t>(), Shape{rows}, gpu)
                : TensorView<const std::int8_t>{};
  const TensorView<const T> s_view(s_dev->as<T>(), shape, s_strides, gpu),
      t_view(t_dev->as<T>(), shape, t_strides, gpu);
  const TensorView<T> gs_view(gs_dev->as<T>(), shape, t_strides, gpu), gt_view(gt_dev->as<T>(), shape, t_strides, gpu);
  const TensorView<T>* gs = c.grad_student ? &gs_view : nullptr;
  const TensorView<T>* gt = c.grad_teacher ? &gt_view : nullptr;

  gpu_pair<T>(kind, s_view, t_view, y_view, nullptr, nullptr, out.loss(with_rows), ws.workspace(), od);
  {
    INFO("loss only");
    check_loss(out.download(with_rows), cpu, c.reduction, rows);
  }
  if (gs == nullptr && gt == nullptr) return;
  gpu_pair<T>(kind, s_view, t_view, y_view, gs, gt, out.loss(with_rows), ws.workspace(), od);
  const Loss first = out.download(with_rows);
  const std::vector<T> gs_first = gs_dev->download<T>(gs0.size()), gt_first = gt_dev->download<T>(gt0.size());
  {
    INFO("with gradients");
    check_loss(first, cpu, c.reduction, rows);
    check_gradient(gs_first, gs_cpu, rows, d, ts, 1e-6 * unit, "grad_student");  // untouched when not wanted
    check_gradient(gt_first, gt_cpu, rows, d, ts, 1e-6 * unit, "grad_teacher");
  }
  gs_dev->upload(gs0.data(), gs0.size() * sizeof(T));
  gt_dev->upload(gt0.data(), gt0.size() * sizeof(T));
  gpu_pair<T>(kind, s_view, t_view, y_view, gs, gt, out.loss(with_rows), ws.workspace(), od);
  INFO("a second run gives the same bits");
  CHECK(same_bits(out.download(with_rows), first));
  CHECK_SAME_BITS(gs_dev->download<T>(gs0.size()), gs_first);
  CHECK_SAME_BITS(gt_dev->download<T>(gt0.size()), gt_first);
}

template <class T>
void check_pairs(std::uint32_t seed) {
  for (const Pair kind : {Pair::mse, Pair::cosine}) {
    for (std::size_t i = 0; i < kFeatureLossCases.size(); ++i) {
      const auto s = seed + 31 * static_cast<std::uint32_t>(i);
      check_pair<T>(kind, 37, 1, kFeatureLossCases[i], s);
      check_pair<T>(kind, 37, 7, kFeatureLossCases[i], s + 1);
      check_pair<T>(kind, 37, 1000, kFeatureLossCases[i], s + 2);
      check_pair<T>(kind, 5, 50257, kFeatureLossCases[i], s + 3);
    }
  }
}

// Attention transfer on [B, Cs, H, W] and [B, Ct, H, W]; padded: the student's channels and samples spaced apart.
template <class T>
void check_attention(std::int64_t b, std::int64_t cs, std::int64_t ct, std::int64_t h, std::int64_t w, bool padded,
                     const FeatureLossCase& c, std::uint32_t seed) {
  INFO("attention_transfer_loss " << type_name<T>() << " B " << b << " Cs " << cs << " Ct " << ct << " " << h << "x"
                                  << w << (padded ? " padded" : "") << ": " << describe_feature_loss_case(c));
  const std::int64_t p = h * w;
  const Strides s_strides = padded ? Strides{cs * (p + 3) + 5, p + 3, w, 1} : Strides{cs * p, p, w, 1};
  const std::int64_t s_elements = b * s_strides[0];
  std::vector<T> s = random_elements<T>(static_cast<std::size_t>(s_elements), seed, 1.5f);
  std::vector<T> t = random_elements<T>(static_cast<std::size_t>(b * ct * p), seed + 1, 1.5f);
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(b), 1);
  for (std::int64_t i = 0; i < b; ++i)
    if (c.masked && feature_loss_masked_row(i)) mask[static_cast<std::size_t>(i)] = 0;
  // Gradients: the student's as compact [B, Cs, H, W] (the layout of a gradient need not be the input's).
  const std::vector<T> gs0 = c.accumulate ? random_elements<T>(static_cast<std::size_t>(b * cs * p), seed + 2)
                                          : std::vector<T>(static_cast<std::size_t>(b * cs * p), poison_element<T>());
  const std::vector<T> gt0 = c.accumulate ? random_elements<T>(static_cast<std::size_t>(b * ct * p), seed + 3)
                                          : std::vector<T>(static_cast<std::size_t>(b * ct * p), poison_element<T>());
  const Shape s_shape{b, cs, h, w}, t_shape{b, ct, h, w};
  FeatureLossOptions o;
  o.reduction = c.reduction;
  o.grad_scale = c.grad_scale;
  o.accumulate = c.accumulate;
  if (c.masked) o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b});
  std::vector<T> gs_cpu = gs0, gt_cpu = gt0;
  const TensorView<const T> s_host(s.data(), s_shape, s_strides), t_host(t.data(), t_shape);
  Loss cpu = shrink::distill::attention_transfer_loss_with_grad<T>(
      s_host, t_host, c.grad_student ? TensorView<T>(gs_cpu.data(), s_shape) : TensorView<T>{},
      c.grad_teacher ? TensorView<T>(gt_cpu.data(), t_shape) : TensorView<T>{}, o);
  const bool with_rows = c.per_row || c.reduction == Reduction::none;
  if (with_rows && cpu.per_row.empty()) {
    FeatureLossOptions none = o;
    none.reduction = Reduction::none;
    cpu.per_row = shrink::distill::attention_transfer_loss<T>(s_host, t_host, none).per_row;
  }
  std::int64_t kept = 0;
  for (std::int64_t i = 0; i < b; ++i) kept += mask[static_cast<std::size_t>(i)] != 0;
  const double unit = 2.0 * std::fabs(c.grad_scale) / shrink::distill::reduction_divisor(c.reduction, kept, p);

  const Device gpu = Device::cuda(0);
  const std::unique_ptr<DeviceBuffer> s_dev = to_device(s);
  const std::unique_ptr<DeviceBuffer> t_dev = to_device(t);
  const std::unique_ptr<DeviceBuffer> mask_dev = to_device(mask);
  const std::unique_ptr<DeviceBuffer> gs_dev = to_device(gs0);
  const std::unique_ptr<DeviceBuffer> gt_dev = to_device(gt0);
  DeviceBuffer ws(shrink::cuda::attention_transfer_workspace_bytes(b, p));
  DeviceOutputs out(b);
  FeatureLossOptions od = o;
  if (c.masked) od.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{b}, gpu);
  const TensorView<const T> s_view(s_dev->as<T>(), s_shape, s_strides, gpu), t_view(t_dev->as<T>(), t_shape, gpu);
  const TensorView<T> gs_view = c.grad_student ? TensorView<T>(gs_dev->as<T>(), s_shape, gpu) : TensorView<T>{};
  const TensorView<T> gt_view = c.grad_teacher ? TensorView<T>(gt_dev->as<T>(), t_shape, gpu) : TensorView<T>{};
  const auto sync = shrink::cuda::Synchronize::yes;

  shrink::cuda::attention_transfer_loss(s_view, t_view, out.loss(with_rows), ws.workspace(), nullptr, od, sync);
  {
    INFO("loss only");
    check_loss(out.download(with_rows), cpu, c.reduction, b);
  }
  if (!c.grad_student && !c.grad_teacher) return;
  shrink::cuda::attention_transfer_loss_with_grad<T>(s_view, t_view, gs_view, gt_view, out.loss(with_rows),
                                                     ws.workspace(), nullptr, od, sync);
  const Loss first = out.download(with_rows);
  const std::vector<T> gs_first = gs_dev->download<T>(gs0.size()), gt_first = gt_dev->download<T>(gt0.size());
  {
    INFO("with gradients");
    check_loss(first, cpu, c.reduction, b);
    check_gradient(gs_first, gs_cpu, b * cs, p, p, 1e-6 * unit, "grad_student");
    check_gradient(gt_first, gt_cpu, b * ct, p, p, 1e-6 * unit, "grad_teacher");
  }
  gs_dev->upload(gs0.data(), gs0.size() * sizeof(T));
  gt_dev->upload(gt0.data(), gt0.size() * sizeof(T));
  shrink::cuda::attention_transfer_loss_with_grad<T>(s_view, t_view, gs_view, gt_view, out.loss(with_rows),
                                                     ws.workspace(), nullptr, od, sync);
  INFO("a second run gives the same bits");
  CHECK(same_bits(out.download(with_rows), first));
  CHECK_SAME_BITS(gs_dev->download<T>(gs0.size()), gs_first);
  CHECK_SAME_BITS(gt_dev->download<T>(gt0.size()), gt_first);
}

template <class T>
void check_attentions(std::uint32_t seed) {
  for (std::size_t i = 0; i < kFeatureLossCases.size(); ++i) {
    const auto s = seed + 29 * static_cast<std::uint32_t>(i);
    check_attention<T>(5, 3, 6, 4, 5, false, kFeatureLossCases[i], s);
    check_attention<T>(6, 16, 8, 7, 7, true, kFeatureLossCases[i], s + 1);
    check_attention<T>(3, 4, 4, 33, 40, i % 2 == 0, kFeatureLossCases[i], s + 2);  // more positions than threads
    check_attention<T>(4, 2, 3, 1, 1, false, kFeatureLossCases[i], s + 3);         // one position
  }
}

}  // namespace

TEST_CASE("cuda mse_loss and cosine_embedding_loss match the CPU", "[gpu]") {
  check_pairs<float>(10);
  check_pairs<half>(20);
  check_pairs<bfloat16>(30);
}

TEST_CASE("cuda feature losses flatten [B, L, D] with a [B, L] mask", "[gpu][sanitize]") {
  const std::int64_t b = 3, l = 4, d = 33;
  const std::vector<float> s = random_elements<float>(static_cast<std::size_t>(b * l * d), 1);
  const std::vector<float> t = random_elements<float>(static_cast<std::size_t>(b * l * d), 2);
  const std::vector<std::uint8_t> mask = {1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1};
  FeatureLossOptions o;
  o.row_mask = TensorView<const std::uint8_t>(mask.data(), Shape{b, l});
  std::vector<float> gs_cpu(s.size());
  const Loss cpu = shrink::distill::mse_loss_with_grad<float>(TensorView<const float>(s.data(), Shape{b, l, d}),
                                                              TensorView<const float>(t.data(), Shape{b, l, d}),
                                                              TensorView<float>(gs_cpu.data(), Shape{b, l, d}), {}, o);
  const Device gpu = Device::cuda(0);
  const std::unique_ptr<DeviceBuffer> s_dev = to_device(s), t_dev = to_device(t), mask_dev = to_device(mask);
  DeviceBuffer gs_dev(s.size() * sizeof(float));
  DeviceBuffer ws(shrink::cuda::feature_loss_workspace_bytes(b * l));
  DeviceOutputs out(b * l);
  o.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{b, l}, gpu);
  shrink::cuda::mse_loss_with_grad<float>(TensorView<const float>(s_dev->as<float>(), Shape{b, l, d}, gpu),
                                          TensorView<const float>(t_dev->as<float>(), Shape{b, l, d}, gpu),
                                          TensorView<float>(gs_dev.as<float>(), Shape{b, l, d}, gpu), {},
                                          out.loss(false), ws.workspace(), nullptr, o,
                                          shrink::cuda::Synchronize::yes);
  check_loss(out.download(false), cpu, Reduction::mean, b * l);
  check_gradient(gs_dev.download<float>(s.size()), gs_cpu, b * l, d, d, 1e-9);
}

TEST_CASE("cuda attention_transfer_loss matches the CPU", "[gpu]") {
  check_attentions<float>(40);
  check_attentions<half>(50);
  check_attentions<bfloat16>(60);
}

TEST_CASE("cuda feature losses device-side checks", "[gpu]") {
  const std::int64_t rows = 5, d = 12;
  const std::vector<float> s = random_elements<float>(static_cast<std::size_t>(rows * d), 3);
  const std::vector<float> t = random_elements<float>(static_cast<std::size_t>(rows * d), 4);
  const std::vector<std::uint8_t> mask = {1, 0, 1, 1, 1};
  const Device gpu = Device::cuda(0);
  std::unique_ptr<DeviceBuffer> s_dev = to_device(s);
  const std::unique_ptr<DeviceBuffer> t_dev = to_device(t), mask_dev = to_device(mask);
  DeviceBuffer ws(shrink::cuda::attention_transfer_workspace_bytes(rows, d));  // large enough for all three
  DeviceOutputs out(rows);
  FeatureLossOptions o;
  o.row_mask = TensorView<const std::uint8_t>(mask_dev->as<std::uint8_t>(), Shape{rows}, gpu);
  const TensorView<const float> s_view(s_dev->as<float>(), Shape{rows, d}, gpu),
      t_view(t_dev->as<float>(), Shape{rows, d}, gpu);
  const auto sync = shrink::cuda::Synchronize::yes;

  std::vector<float> bad = s;
  bad[2 * d + 5] = kNaN;
  s_dev->upload(bad.data(), bad.size() * sizeof(float));
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s_view, t_view, out.loss(false), ws.workspace(), nullptr, o, sync),
                    Contains("shrink::cuda::mse_loss") && Contains("NaN or inf"));
  CosineEmbeddingOptions co;
  co.row_mask = o.row_mask;
  CHECK_THROWS_WITH(
      shrink::cuda::cosine_embedding_loss(s_view, t_view, {}, out.loss(false), ws.workspace(), nullptr, co, sync),
      Contains("NaN or inf"));
  const TensorView<const float> s4(s_dev->as<float>(), Shape{rows, 3, 2, 2}, gpu),
      t4(t_dev->as<float>(), Shape{rows, 3, 2, 2}, gpu);
  CHECK_THROWS_WITH(shrink::cuda::attention_transfer_loss(s4, t4, out.loss(false), ws.workspace(), nullptr, o, sync),
                    Contains("NaN or inf"));
  bad = s;
  bad[1 * d + 5] = kInf;  // a masked row is not read
  s_dev->upload(bad.data(), bad.size() * sizeof(float));
  CHECK_NOTHROW(shrink::cuda::mse_loss(s_view, t_view, out.loss(false), ws.workspace(), nullptr, o, sync));
  CHECK_NOTHROW(shrink::cuda::attention_transfer_loss(s4, t4, out.loss(false), ws.workspace(), nullptr, o, sync));

  s_dev->upload(s.data(), s.size() * sizeof(float));
  for (const std::int8_t wrong : {std::int8_t{0}, std::int8_t{2}, std::int8_t{-3}}) {
    const std::vector<std::int8_t> y = {1, wrong, -1, 1, 1};  // checked in every row, as on the CPU
    const std::unique_ptr<DeviceBuffer> y_dev = to_device(y);
    CHECK_THROWS_WITH(shrink::cuda::cosine_embedding_loss(
                          s_view, t_view, TensorView<const std::int8_t>(y_dev->as<std::int8_t>(), Shape{rows}, gpu),
                          out.loss(false), ws.workspace(), nullptr, co, sync),
                      Contains("target"));
  }
}

TEST_CASE("cuda feature losses validate their arguments on the host", "[host]") {
  using shrink::cuda::DeviceLoss;
  using shrink::cuda::Workspace;
  auto* data = static_cast<float*>(fake_device_pointer());
  auto* value = static_cast<double*>(fake_device_pointer());
  const Device gpu = Device::cuda(0);
  const TensorView<const float> s(data, Shape{4, 8}, gpu);
  const TensorView<float> g(data, Shape{4, 8}, gpu);
  const DeviceLoss out{value, value};
  const Workspace ws{fake_device_pointer(), shrink::cuda::feature_loss_workspace_bytes(4)};

  CHECK_THROWS_WITH(shrink::cuda::feature_loss_workspace_bytes(0), Contains("rows"));
  CHECK_THROWS_WITH(shrink::cuda::attention_transfer_workspace_bytes(2, 0), Contains("positions"));
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(TensorView<const float>(data, Shape{4, 8}), s, out, ws, nullptr),
                    Contains("shrink::cuda::mse_loss") && Contains("student") && Contains("host memory"));
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, TensorView<const float>(data, Shape{4, 7}, gpu), out, ws, nullptr),
                    Contains("teacher.shape"));
  CHECK_THROWS_WITH(
      shrink::cuda::mse_loss(s, TensorView<const float>(data, Shape{4, 8}, Strides{8, 2}, gpu), out, ws, nullptr),
      Contains("teacher.strides"));
  CHECK_THROWS_WITH(
      shrink::cuda::mse_loss_with_grad<float>(s, s, TensorView<float>(data, Shape{8, 4}, gpu), {}, out, ws, nullptr),
      Contains("mse_loss_with_grad") && Contains("grad_student.shape"));
  CHECK_THROWS_WITH(
      shrink::cuda::mse_loss_with_grad<float>(s, s, g, TensorView<float>(data, Shape{4, 8}), out, ws, nullptr),
      Contains("grad_teacher") && Contains("host memory"));
  FeatureLossOptions o;
  o.row_mask = TensorView<const std::uint8_t>(static_cast<std::uint8_t*>(fake_device_pointer()), Shape{2, 2}, gpu);
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, s, out, ws, nullptr, o), Contains("options.row_mask.shape"));
  o = {};
  o.reduction = static_cast<Reduction>(-1);
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, s, out, ws, nullptr, o), Contains("options.reduction"));
  o = {};
  o.grad_scale = kInf;
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, s, out, ws, nullptr, o), Contains("options.grad_scale"));
  o = {};
  o.reduction = Reduction::none;
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, s, DeviceLoss{value, nullptr}, ws, nullptr, o), Contains("out.per_row"));
  CHECK_THROWS_WITH(shrink::cuda::mse_loss(s, s, out, Workspace{ws.data, 16}, nullptr),
                    Contains("feature_loss_workspace_bytes"));

  CosineEmbeddingOptions co;
  const auto* target = static_cast<const std::int8_t*>(fake_device_pointer());
  CHECK_THROWS_WITH(shrink::cuda::cosine_embedding_loss(s, s, TensorView<const std::int8_t>(target, Shape{5}, gpu), out,
                                                        ws, nullptr, co),
                    Contains("target.shape"));
  CHECK_THROWS_WITH(
      shrink::cuda::cosine_embedding_loss(s, s, TensorView<const std::int8_t>(target, Shape{4}), out, ws, nullptr, co),
      Contains("target") && Contains("host memory"));
  for (const double margin : {-1.5, 2.0, std::numeric_limits<double>::quiet_NaN()}) {
    co.margin = margin;
    CHECK_THROWS_WITH(shrink::cuda::cosine_embedding_loss(s, s, {}, out, ws, nullptr, co), Contains("options.margin"));
  }

  const TensorView<const float> a(data, Shape{2, 3, 4, 4}, gpu);
  const Workspace aws{fake_device_pointer(), shrink::cuda::attention_transfer_workspace_bytes(2, 16)};
  using shrink::cuda::attention_transfer_loss;
  CHECK_THROWS_WITH(attention_transfer_loss(TensorView<const float>(data, Shape{2, 16}, gpu), a, out, aws, nullptr),
                    Contains("student.shape") && Contains("spatial"));
  CHECK_THROWS_WITH(
      attention_transfer_loss(a, TensorView<const float>(data, Shape{2, 5, 4, 3}, gpu), out, aws, nullptr),
      Contains("teacher.shape"));
  CHECK_THROWS_WITH(
      attention_transfer_loss(a, TensorView<const float>(data, Shape{3, 5, 4, 4}, gpu), out, aws, nullptr),
      Contains("teacher.shape"));
  CHECK_THROWS_WITH(
      attention_transfer_loss(TensorView<const float>(data, Shape{2, 3, 4, 4}, Strides{48, 16, 1, 4}, gpu), a, out, aws,
                              nullptr),
      Contains("student.strides") && Contains("contiguous spatial"));
  CHECK_THROWS_WITH(
      attention_transfer_loss(TensorView<const float>(data, Shape{2, 0, 4, 4}, gpu), a, out, aws, nullptr),
      Contains("student.shape"));
  CHECK_THROWS_WITH(shrink::cuda::attention_transfer_loss_with_grad<float>(
                        a, a, TensorView<float>(data, Shape{2, 3, 16}, gpu), {}, out, aws, nullptr),
                    Contains("grad_student.shape"));
  o = {};
  o.row_mask = TensorView<const std::uint8_t>(static_cast<std::uint8_t*>(fake_device_pointer()), Shape{2, 1}, gpu);
  CHECK_THROWS_WITH(attention_transfer_loss(a, a, out, aws, nullptr, o), Contains("options.row_mask.shape"));
  CHECK_THROWS_WITH(attention_transfer_loss(a, a, out, ws, nullptr),
                    Contains("attention_transfer_workspace_bytes(samples, positions)"));
}
