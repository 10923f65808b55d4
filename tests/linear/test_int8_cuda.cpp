// Tests for shrink/linear/int8_cuda.hpp. [gpu] cases run every path (mma_sync; wgmma on a compute capability 9.0
// device; automatic) × output type × activation × per-token / per-tensor scales on aligned and unaligned shapes (M, N,
// K not multiples of the tiles, 1 × N × K, tiny, K split over CTAs, strided rows), outputs poisoned before each
// launch, and check: accumulators exact (float output, unit scales, no bias, against cpu::gemm_s8s8s32); the epilogue
// within 1e-3 relative of an FP64 reference; bit-identical to the CPU twin cpu::linear_int8 for none and ReLU (GELU
// and SiLU: CUDA's erff / expf against glibc's, within a few float ulps, one ulp of half / bfloat16, one int8 step).
// quantize_rows_absmax is bit-identical to cpu::quantize_rows_absmax, and linear_int8_dynamic to
// cpu::linear_int8_dynamic for none and ReLU. The CPU twin reads the same QuantizedTensors whose copies (values with
// their scales) the device reads. [host] cases check can_implement's reasons and every host check, which throw before
// any CUDA call and so need no device.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/int8_cuda.hpp"
#include "shrink/quant/quantized_tensor.hpp"
#include "shrink/quant/scheme.hpp"
#include "support/activation_reference.hpp"
#include "support/element_types.hpp"
#include "support/float_compare.hpp"
#include "support/mismatch_map.hpp"

namespace {

using Catch::Matchers::Contains;
using shrink::Activation;
using shrink::bfloat16;
using shrink::Device;
using shrink::Epilogue;
using shrink::half;
using shrink::Shape;
using shrink::Strides;
using shrink::TensorView;
using shrink::cuda::LinearInt8Args;
using shrink::cuda::LinearInt8Path;
using shrink::cuda::Synchronize;

using namespace shrink::test;

std::vector<std::int8_t> random_int8(std::int64_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<std::int8_t> v(static_cast<std::size_t>(n));
  for (auto& b : v) b = static_cast<std::int8_t>(d(rng));
  return v;
}

std::vector<float> random_floats(std::int64_t n, std::mt19937& rng, float low, float high) {
  std::uniform_real_distribution<float> d(low, high);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& f : v) f = d(rng);
  return v;
}

// A QuantizedTensor [rows, cols] of int8 values, symmetric, per row (axis 0) or per tensor.
shrink::quant::QuantizedTensor int8_tensor(const std::vector<std::int8_t>& values, std::int64_t rows, std::int64_t cols,
                                           const std::vector<float>& scales, bool per_row) {
  using namespace shrink::quant;
  QuantizedTensor t;
  t.data = shrink::ByteBuffer(values.begin(), values.end());
  t.shape = Shape{rows, cols};
  t.scheme = per_row ? QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0)
                     : QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  t.qparams = QParams{scales, std::vector<std::int32_t>(scales.size(), 0), per_row ? Shape{rows} : Shape{}, {}};
  return t;
}

// One W8A8 problem: the operands as QuantizedTensors (values with their scales), the same objects the CPU twin takes,
// copied to the device with their scales for the CUDA product; the bias on both.
struct Int8Problem {
  std::int64_t m, n, k;
  std::int64_t ldx;  // row stride of x on the device (≥ K, a multiple of 16)
  bool per_token, per_channel, with_bias;
  std::vector<std::int8_t> x, w;  // x [M, K] contiguous on the host
  std::vector<float> sx, sw, bias;
  shrink::quant::QuantizedTensor xq, wq;  // x with sx, w with sw
  std::unique_ptr<DeviceBuffer> x_dev, w_dev, sx_dev, sw_dev, bias_dev;
  std::vector<std::int64_t> acc;  // exact Σ_k x · w

  Int8Problem(std::int64_t m_, std::int64_t n_, std::int64_t k_, bool per_token_, bool per_channel_, bool with_bias_,
              std::uint32_t seed, std::int64_t ldx_ = 0, bool unit = false)
      : m(m_),
        n(n_),
        k(k_),
        ldx(ldx_ > 0 ? ldx_ : k_),
        per_token(per_token_),
        per_channel(per_channel_),
        with_bias(with_bias_),
        x(make_x(seed)),
        w(make_w(seed)),
        sx(unit ? std::vector<float>(per_token ? m : 1, 1.0f) : scales(per_token ? m : 1, seed + 2, 0.002f, 0.03f)),
        sw(unit ? std::vector<float>(per_channel ? n : 1, 1.0f) : scales(per_channel ? n : 1, seed + 3, 1e-4f, 2e-3f)),
        bias(with_bias ? scales(n, seed + 4, -2.0f, 2.0f) : std::vector<float>{}),
        xq(int8_tensor(x, m, k, sx, per_token)),
        wq(int8_tensor(w, n, k, sw, per_channel)),
        x_dev(to_device(strided_x())),
        w_dev(to_device(w)),
        sx_dev(to_device(xq.qparams.scale)),
        sw_dev(to_device(wq.qparams.scale)),
        bias_dev(to_device(with_bias ? bias : std::vector<float>{0.0f})),
        acc(exact_acc()) {}

  std::vector<std::int8_t> make_x(std::uint32_t seed) const {
    std::mt19937 rng(seed);
    return random_int8(m * k, rng);
  }
  std::vector<std::int8_t> make_w(std::uint32_t seed) const {
    std::mt19937 rng(seed + 1);
    return random_int8(n * k, rng);
  }
  static std::vector<float> scales(std::int64_t count, std::uint32_t seed, float low, float high) {
    std::mt19937 rng(seed);
    return random_floats(count, rng, low, high);
  }
  // x with its device row stride; the padding holds values the kernel must not read into the product.
  std::vector<std::int8_t> strided_x() const {
    std::vector<std::int8_t> s(static_cast<std::size_t>(m * ldx), 77);
    for (std::int64_t r = 0; r < m; ++r)
      std::memcpy(&s[static_cast<std::size_t>(r * ldx)], &x[static_cast<std::size_t>(r * k)],
                  static_cast<std::size_t>(k));
    return s;
  }

  // xq and wq on the device: values with their scales.
  shrink::cuda::Int8Operand x_operand() const {
    return {TensorView<const std::int8_t>(x_dev->as<std::int8_t>(), Shape{m, k}, Strides{ldx, 1}, Device::cuda(0)),
            TensorView<const float>(sx_dev->as<float>(), Shape{static_cast<std::int64_t>(sx.size())}, Device::cuda(0))};
  }
  shrink::cuda::Int8Operand w_operand() const {
    return {TensorView<const std::int8_t>(w_dev->as<std::int8_t>(), Shape{n, k}, Device::cuda(0)),
            TensorView<const float>(sw_dev->as<float>(), Shape{static_cast<std::int64_t>(sw.size())}, Device::cuda(0))};
  }
  LinearInt8Args args(LinearInt8Path path) const {
    LinearInt8Args a;
    a.x = x_operand();
    a.w = w_operand();
    a.epilogue = epilogue();
    a.path = path;
    return a;
  }
  // The bias on the device; the scales travel with the operands.
  Epilogue epilogue() const {
    Epilogue e;
    if (with_bias) e.bias = TensorView<const float>(bias_dev->as<float>(), Shape{n}, Device::cuda(0));
    return e;
  }
  // apply_int8_epilogue's form, which has no operands: the scales in the epilogue.
  Epilogue epilogue_with_scales() const {
    Epilogue e = epilogue();
    e.x_scales = x_operand().scales;
    e.w_scales = w_operand().scales;
    return e;
  }

  // The CPU twin: cpu::linear_int8 on xq and wq, writing Out.
  template <class Out>
  std::vector<Out> cpu_twin(Activation act, float out_scale) const {
    shrink::Epilogue e;
    if (with_bias) e.bias = TensorView<const float>(bias.data(), Shape{n});
    e.activation = act;
    e.out_scale = out_scale;
    std::vector<Out> out(static_cast<std::size_t>(m * n));
    shrink::cpu::linear_int8(xq, wq, TensorView<Out>(out.data(), Shape{m, n}), e);
    return out;
  }

  // Exact Σ_k x · w in int64.
  std::vector<std::int64_t> exact_acc() const {
    std::vector<std::int64_t> acc(static_cast<std::size_t>(m * n));
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        std::int64_t s = 0;
        for (std::int64_t i = 0; i < k; ++i)
          s += static_cast<std::int64_t>(x[static_cast<std::size_t>(r * k + i)]) *
               w[static_cast<std::size_t>(c * k + i)];
        acc[static_cast<std::size_t>(r * n + c)] = s;
      }
    return acc;
  }
};

// The output tile one CTA computes on a path (cuda/linear_int8.cu's choice for `automatic`): mma_sync 32 x 64 for
// M <= 64, else 128 x 128; wgmma 128 x 128. A mismatch map counts errors by these tiles.
struct OutputTile {
  std::int64_t rows, cols;
};
OutputTile int8_output_tile(LinearInt8Path path, std::int64_t m) {
  if (path != LinearInt8Path::wgmma && m <= 64) return {32, 64};
  return {128, 128};
}

// Runs one GEMM on the device into a poisoned output and checks it against the FP64 reference and the CPU twin.
template <class Out>
void check_gemm(const Int8Problem& p, LinearInt8Path path, Activation act, std::int64_t ld_out = 0) {
  const std::int64_t ldo = ld_out > 0 ? ld_out : p.n;
  const float out_scale = 0.02f;  // int8: v up to about ±3 spreads over most codes
  INFO(type_name<Out>() << " " << shrink::cuda::to_string(path) << " " << shrink::to_string(act) << " M " << p.m
                        << " N " << p.n << " K " << p.k << (p.per_token ? " per-token" : " per-tensor")
                        << (p.per_channel ? " per-channel" : " per-tensor w") << (p.with_bias ? " bias" : "") << " ldx "
                        << p.ldx << " ldo " << ldo);
  DeviceBuffer out(static_cast<std::size_t>(p.m * ldo) * sizeof(Out));
  LinearInt8Args args = p.args(path);
  args.epilogue.activation = act;
  args.out = TensorView<Out>(out.as<Out>(), Shape{p.m, p.n}, Strides{ldo, 1}, Device::cuda(0));
  args.epilogue.out_scale = out_scale;
  REQUIRE(shrink::cuda::can_implement_linear_int8(args));
  DeviceBuffer ws(shrink::cuda::linear_int8_workspace_bytes(args));
  shrink::cuda::linear_int8(args, ws.workspace(), nullptr, Synchronize::yes);
  const std::vector<Out> got_strided = out.download<Out>(static_cast<std::size_t>(p.m * ldo));

  // Padding between rows keeps the poison.
  for (std::int64_t r = 0; r < p.m; ++r)
    for (std::int64_t c = p.n; c < ldo; ++c) {
      unsigned char bytes[sizeof(Out)];
      std::memcpy(bytes, &got_strided[static_cast<std::size_t>(r * ldo + c)], sizeof(Out));
      for (unsigned char b : bytes) REQUIRE(b == shrink::test::kPoison);
    }
  std::vector<Out> got(static_cast<std::size_t>(p.m * p.n));
  for (std::int64_t r = 0; r < p.m; ++r)
    for (std::int64_t c = 0; c < p.n; ++c)
      got[static_cast<std::size_t>(r * p.n + c)] = got_strided[static_cast<std::size_t>(r * ldo + c)];

  const std::vector<Out> twin = p.cpu_twin<Out>(act, out_scale);
  const std::vector<std::int64_t>& acc = p.acc;
  const bool exact_activation = act == Activation::none || act == Activation::relu;
  const OutputTile tile = int8_output_tile(path, p.m);
  MismatchMap mismatches(p.m, p.n, tile.rows, tile.cols);
  for (std::int64_t r = 0; r < p.m; ++r)
    for (std::int64_t c = 0; c < p.n; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * p.n + c);
      const double sx = p.sx[p.per_token ? static_cast<std::size_t>(r) : 0];
      const double sw = p.sw[p.per_channel ? static_cast<std::size_t>(c) : 0];
      const double b = p.with_bias ? p.bias[static_cast<std::size_t>(c)] : 0.0;
      const double scaled = sx * sw * static_cast<double>(acc[i]);
      const double ref = activate_reference(scaled + b, act);
      const double g = to_float(got[i]), t = to_float(twin[i]);
      // Float rounding of acc, the scale product, the product and the sum: a few ulps of the terms, which cancel.
      const double terms = 1e-6 * (std::fabs(scaled) + std::fabs(b)) + 1e-30;
      bool ok;
      if constexpr (std::is_same<Out, std::int8_t>::value) {
        const double q = std::nearbyint(std::fmin(std::fmax(ref / out_scale, -128.0), 127.0));
        ok = std::fabs(g - q) <= 1.0 && (exact_activation ? g == t : std::fabs(g - t) <= 1.0);
      } else {
        const double rounding = std::is_same<Out, float>::value ? 0.0 : ulp_at<Out>(ref);  // the output type's
        // GELU / SiLU: erff / expf within 2 ulps of 1 or of exp(−v), scaled by |v|, against glibc's.
        const double twin_bound = 1e-6 * (std::fabs(scaled + b) + std::fabs(t)) + 8 * ulp_at<float>(t) + rounding;
        ok = std::fabs(g - ref) <= 1e-3 * std::fabs(ref) + terms + rounding &&
             (exact_activation ? std::memcmp(&got[i], &twin[i], sizeof(Out)) == 0 : std::fabs(g - t) <= twin_bound);
      }
      if (!ok) mismatches.add(r, c, g, ref);  // the twin's value is in the INFO of a rerun with the index
    }
  CHECK_NO_MISMATCHES(mismatches);
}

bool device_is_sm90() {
  const shrink::cuda::DeviceInfo info = shrink::cuda::device_info(0);
  return info.compute_capability() == 90;
}

std::vector<LinearInt8Path> paths_here() {
  std::vector<LinearInt8Path> paths{LinearInt8Path::mma_sync, LinearInt8Path::automatic};
  if (device_is_sm90()) paths.push_back(LinearInt8Path::wgmma);
  return paths;
}

struct GemmShape {
  std::int64_t m, n, k;
};

// Tile sizes: mma_sync 32 × 64 (M ≤ 64) or 128 × 128, k-tiles of 64; wgmma 128 × 128, k-tiles of 128.
const GemmShape kShapes[] = {
    {128, 256, 512},                   // aligned to every tile
    {256, 128, 256},                   // aligned, several tiles in M
    {1, 80, 48},                       // one token, N and K off the tiles
    {33, 70, 80},                      // small tiles, every dimension ragged
    {130, 129, 208},                   // large tiles, every dimension ragged
    {65, 200, 272},                    // just past the small-M limit
    {1, 1, 16},                        // tiny
    {3, 5, 16},       {1, 256, 4096},  // K split 16 ways, small tiles
    {130, 128, 2048},                  // K split over large (or wgmma) tiles
};

// The float output of one GEMM with p's unit scales and no bias: the accumulators themselves (exact below 2^24).
std::vector<float> float_output(const Int8Problem& p, LinearInt8Path path) {
  DeviceBuffer out(static_cast<std::size_t>(p.m * p.n) * sizeof(float));
  LinearInt8Args args = p.args(path);
  args.out = TensorView<float>(out.as<float>(), Shape{p.m, p.n}, Device::cuda(0));
  DeviceBuffer ws(shrink::cuda::linear_int8_workspace_bytes(args));
  shrink::cuda::linear_int8(args, ws.workspace(), nullptr, Synchronize::yes);
  return out.download<float>(static_cast<std::size_t>(p.m * p.n));
}

}  // namespace

TEST_CASE("cuda linear_int8: accumulators are exact (float output, unit scales, no bias)", "[gpu]") {
  for (const LinearInt8Path path : paths_here())
    for (const GemmShape& s : kShapes) {
      // |acc| ≤ K · 2^14 < 2^24 for K < 1024: float holds it exactly. Longer K: acc still exact below 2^24 in practice.
      const Int8Problem p(s.m, s.n, s.k, false, false, false, 100 + static_cast<std::uint32_t>(s.k), 0, true);
      const std::vector<float> got = float_output(p, path);
      std::vector<std::int32_t> cpu(static_cast<std::size_t>(p.m * p.n));
      shrink::cpu::gemm_s8s8s32(TensorView<const std::int8_t>(p.x.data(), Shape{p.m, p.k}),
                                TensorView<const std::int8_t>(p.w.data(), Shape{p.n, p.k}),
                                TensorView<std::int32_t>(cpu.data(), Shape{p.m, p.n}));
      INFO(shrink::cuda::to_string(path) << " M " << s.m << " N " << s.n << " K " << s.k);
      const OutputTile tile = int8_output_tile(path, p.m);
      MismatchMap mismatches(p.m, p.n, tile.rows, tile.cols);
      for (std::size_t i = 0; i < cpu.size(); ++i) {
        if (std::abs(cpu[i]) >= (1 << 24)) continue;
        if (got[i] != static_cast<float>(cpu[i]))
          mismatches.add(static_cast<std::int64_t>(i) / p.n, static_cast<std::int64_t>(i) % p.n, got[i], cpu[i]);
      }
      CHECK_NO_MISMATCHES(mismatches);
    }
}

// Row r of x holds one value, at column k_r = 37 r mod K: output (r, c) is x[r, k_r] · w[c, k_r] alone, so a fragment,
// swizzle or K-advance mapping that fetches the wrong k shows in the map by k step (32 columns, one mma or wgmma k).
TEST_CASE("cuda linear_int8: one-hot rows of x place every k step exactly", "[gpu]") {
  const GemmShape one_hot_shapes[] = {{128, 256, 512}, {33, 70, 80}, {256, 128, 1024}};
  for (const LinearInt8Path path : paths_here())
    for (const GemmShape& s : one_hot_shapes) {
      Int8Problem p(s.m, s.n, s.k, false, false, false, 300 + static_cast<std::uint32_t>(s.m), 0, true);
      std::vector<std::int64_t> column(static_cast<std::size_t>(s.m));
      for (std::int64_t r = 0; r < s.m; ++r) {
        column[static_cast<std::size_t>(r)] = 37 * r % s.k;
        const std::int8_t kept = p.x[static_cast<std::size_t>(r * s.k + column[static_cast<std::size_t>(r)])];
        std::fill(p.x.begin() + r * s.k, p.x.begin() + (r + 1) * s.k, std::int8_t{0});
        p.x[static_cast<std::size_t>(r * s.k + column[static_cast<std::size_t>(r)])] = kept == 0 ? 1 : kept;
      }
      p.x_dev->upload(p.x.data(), p.x.size());
      const std::vector<float> got = float_output(p, path);
      INFO(shrink::cuda::to_string(path) << " M " << s.m << " N " << s.n << " K " << s.k);
      const OutputTile tile = int8_output_tile(path, p.m);
      MismatchMap mismatches(p.m, p.n, tile.rows, tile.cols);
      for (std::int64_t r = 0; r < p.m; ++r)
        for (std::int64_t c = 0; c < p.n; ++c) {
          const std::int64_t kr = column[static_cast<std::size_t>(r)];
          const float want = static_cast<float>(p.x[static_cast<std::size_t>(r * s.k + kr)] *
                                                p.w[static_cast<std::size_t>(c * s.k + kr)]);
          const float g = got[static_cast<std::size_t>(r * p.n + c)];
          if (g != want) mismatches.add(r, c, g, want, kr / 32);
        }
      CHECK_NO_MISMATCHES(mismatches);
    }
}

TEST_CASE("cuda linear_int8 matches the FP64 reference and the CPU twin: every path, output, activation, scale mode",
          "[gpu]") {
  std::uint32_t seed = 1000;
  for (const LinearInt8Path path : paths_here())
    for (const GemmShape& s : kShapes)
      for (const bool per_token : {true, false}) {
        const bool per_channel = per_token || s.m % 2 == 0;  // per-tensor weights on some shapes too
        const Int8Problem p(s.m, s.n, s.k, per_token, per_channel, s.n % 3 != 2, seed++);
        for (const Activation act : kActivations) {
          check_gemm<float>(p, path, act);
          check_gemm<half>(p, path, act);
          check_gemm<bfloat16>(p, path, act);
          check_gemm<std::int8_t>(p, path, act);
        }
      }
}

TEST_CASE("cuda linear_int8 reads strided x rows and writes strided output rows", "[gpu]") {
  for (const LinearInt8Path path : paths_here()) {
    const Int8Problem p(37, 90, 160, true, true, true, 7, 176);  // x rows 176 bytes apart
    check_gemm<float>(p, path, Activation::relu, 93);            // odd output stride: no paired stores
    check_gemm<half>(p, path, Activation::none, 96);
    check_gemm<std::int8_t>(p, path, Activation::gelu, 91);
    const Int8Problem big(200, 130, 96, false, true, false, 8, 128);
    check_gemm<bfloat16>(big, path, Activation::silu, 131);
  }
}

TEST_CASE("cuda linear_int8 flags bad scales and a non-finite bias when asked to synchronise", "[gpu]") {
  const Int8Problem p(20, 40, 64, true, true, true, 9);
  DeviceBuffer out(static_cast<std::size_t>(p.m * p.n) * sizeof(float));
  std::vector<float> bad_sx = p.sx, bad_bias = p.bias;
  bad_sx[3] = 0.0f;
  bad_bias[5] = std::numeric_limits<float>::quiet_NaN();
  const auto sx = to_device(bad_sx);
  const auto bias = to_device(bad_bias);
  for (const LinearInt8Path path : paths_here()) {
    LinearInt8Args args = p.args(path);
    args.out = TensorView<float>(out.as<float>(), Shape{p.m, p.n}, Device::cuda(0));
    DeviceBuffer ws(shrink::cuda::linear_int8_workspace_bytes(args));
    LinearInt8Args scale_args = args;
    scale_args.x.scales = TensorView<const float>(sx->as<float>(), Shape{p.m}, Device::cuda(0));
    CHECK_THROWS_WITH(shrink::cuda::linear_int8(scale_args, ws.workspace(), nullptr, Synchronize::yes),
                      Contains("a scale is not finite and > 0"));
    LinearInt8Args bias_args = args;
    bias_args.epilogue.bias = TensorView<const float>(bias->as<float>(), Shape{p.n}, Device::cuda(0));
    CHECK_THROWS_WITH(shrink::cuda::linear_int8(bias_args, ws.workspace(), nullptr, Synchronize::yes),
                      Contains("NaN or inf"));
    shrink::cuda::linear_int8(args, ws.workspace(), nullptr, Synchronize::yes);  // the status word starts clean again
  }
}

TEST_CASE("cuda linear_int8 plan: one make_plan, run on new activations, the bits of the one-call form", "[gpu]") {
  for (const LinearInt8Path path : paths_here())
    for (const GemmShape& s : {GemmShape{1, 256, 4096}, GemmShape{130, 128, 2048}}) {
      INFO(shrink::cuda::to_string(path) << " M " << s.m << " N " << s.n << " K " << s.k);
      const Int8Problem a(s.m, s.n, s.k, true, true, true, 41), b(s.m, s.n, s.k, true, true, true, 42);
      LinearInt8Args args = a.args(path);  // b's x with a's weight below
      args.epilogue.activation = Activation::relu;
      DeviceBuffer out_one(static_cast<std::size_t>(s.m * s.n) * sizeof(half)), out_plan(out_one.bytes());
      args.out = TensorView<half>(out_one.as<half>(), Shape{s.m, s.n}, Device::cuda(0));
      const shrink::cuda::LinearInt8Plan plan = shrink::cuda::make_plan(args);
      CHECK(plan.workspace_bytes() == shrink::cuda::linear_int8_workspace_bytes(args));
      CHECK((path == LinearInt8Path::automatic || plan.path() == path));
      DeviceBuffer ws(plan.workspace_bytes());
      const TensorView<half> planned_out(out_plan.as<half>(), Shape{s.m, s.n}, Device::cuda(0));
      for (const Int8Problem* x : {&a, &b}) {
        args.x = x->x_operand();
        shrink::cuda::linear_int8(args, ws.workspace(), nullptr, Synchronize::yes);
        shrink::cuda::run(plan, x->x_operand(), planned_out, ws.workspace(), nullptr, Synchronize::yes);
        CHECK(out_one.download<std::uint16_t>(static_cast<std::size_t>(s.m * s.n)) ==
              out_plan.download<std::uint16_t>(static_cast<std::size_t>(s.m * s.n)));
      }
      const shrink::cuda::Int8Operand short_x{
          TensorView<const std::int8_t>(a.x_dev->as<std::int8_t>(), Shape{s.m, s.k - 16}, Device::cuda(0)),
          a.x_operand().scales};
      CHECK_THROWS_WITH(
          shrink::cuda::run(plan, short_x, planned_out, ws.workspace(), nullptr),
          Contains("shrink::cuda::run(LinearInt8Plan): x.values.shape") && Contains("(the planned shape)"));
      CHECK_THROWS_WITH(shrink::cuda::run(plan, a.x_operand(),
                                          TensorView<float>(out_plan.as<float>(), Shape{s.m, s.n / 2}, Device::cuda(0)),
                                          ws.workspace(), nullptr),
                        Contains("the planned output type"));
      CHECK_THROWS_WITH(shrink::cuda::run(plan, a.x_operand(), planned_out, {ws.as<void>(), 4}, nullptr),
                        Contains("expected at least plan.workspace_bytes()"));
    }
}

TEST_CASE("cuda linear_int8 refuses a forced wgmma path on a device that is not sm_90", "[gpu]") {
  if (device_is_sm90()) return;
  const Int8Problem p(8, 16, 32, true, true, false, 10);
  DeviceBuffer out(static_cast<std::size_t>(p.m * p.n) * sizeof(float));
  LinearInt8Args args = p.args(LinearInt8Path::wgmma);
  args.out = TensorView<float>(out.as<float>(), Shape{p.m, p.n}, Device::cuda(0));
  DeviceBuffer ws(1 << 20);
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(args, ws.workspace(), nullptr), Contains("path = wgmma"));
}

TEST_CASE("cuda apply_int8_epilogue finishes int32 accumulators as linear_int8 does", "[gpu]") {
  const Int8Problem p(45, 77, 32, true, true, true, 11);
  const std::vector<std::int32_t> acc(p.acc.begin(), p.acc.end());
  const auto acc_dev = to_device(acc);
  for (const Activation act : kActivations) {
    DeviceBuffer a(static_cast<std::size_t>(p.m * p.n) * sizeof(half)), b(a.bytes());
    Epilogue e = p.epilogue_with_scales();
    e.activation = act;
    const TensorView<half> out_a(a.as<half>(), Shape{p.m, p.n}, Device::cuda(0));
    DeviceBuffer ws(shrink::cuda::int8_epilogue_workspace_bytes());
    shrink::cuda::apply_int8_epilogue(
        TensorView<const std::int32_t>(acc_dev->as<std::int32_t>(), Shape{p.m, p.n}, Device::cuda(0)), e, out_a,
        ws.workspace(), nullptr, Synchronize::yes);
    LinearInt8Args args = p.args(LinearInt8Path::mma_sync);
    args.epilogue.activation = act;
    args.out = TensorView<half>(b.as<half>(), Shape{p.m, p.n}, Device::cuda(0));
    DeviceBuffer gemm_ws(shrink::cuda::linear_int8_workspace_bytes(args));
    shrink::cuda::linear_int8(args, gemm_ws.workspace(), nullptr, Synchronize::yes);
    INFO(shrink::to_string(act));
    CHECK(a.download<std::uint16_t>(static_cast<std::size_t>(p.m * p.n)) ==
          b.download<std::uint16_t>(static_cast<std::size_t>(p.m * p.n)));
  }
}

namespace {

// linear_int8_dynamic on T activations against cpu::linear_int8_dynamic on the same values as floats and the same
// packed QuantizedTensor weight: bit for bit for none and ReLU (the quantizer and the GEMM are each bit-identical).
template <class T, class Out>
void check_dynamic(std::int64_t m, std::int64_t n, std::int64_t k, LinearInt8Path path, Activation act,
                   std::uint32_t seed) {
  INFO("x " << type_name<T>() << " out " << type_name<Out>() << " " << shrink::cuda::to_string(path) << " "
            << shrink::to_string(act) << " M " << m << " N " << n << " K " << k);
  const Int8Problem p(1, n, k, true, true, true, seed);  // the weight, its scales and the bias
  std::mt19937 rng(seed + 9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> x(static_cast<std::size_t>(m * k));
  std::vector<float> as_float(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = from_float<T>(normal(rng));
    as_float[i] = to_float(x[i]);
  }
  const float out_scale = 0.02f;
  Epilogue host_e;
  host_e.bias = TensorView<const float>(p.bias.data(), Shape{n});
  host_e.activation = act;
  host_e.out_scale = out_scale;
  std::vector<Out> twin(static_cast<std::size_t>(m * n));
  shrink::cpu::linear_int8_dynamic(TensorView<const float>(as_float.data(), Shape{m, k}),
                                   shrink::cpu::pack_int8_weight(p.wq), TensorView<Out>(twin.data(), Shape{m, n}),
                                   host_e);

  const auto x_dev = to_device(x);
  DeviceBuffer out(static_cast<std::size_t>(m * n) * sizeof(Out));
  shrink::cuda::LinearInt8DynamicArgs args;
  args.x = TensorView<const T>(x_dev->template as<T>(), Shape{m, k}, Device::cuda(0));
  args.w = p.w_operand();
  args.epilogue = p.epilogue();
  args.epilogue.activation = act;
  args.epilogue.out_scale = out_scale;
  args.out = TensorView<Out>(out.as<Out>(), Shape{m, n}, Device::cuda(0));
  args.path = path;
  REQUIRE(shrink::cuda::can_implement_linear_int8_dynamic(args));
  DeviceBuffer ws(shrink::cuda::linear_int8_dynamic_workspace_bytes(args));
  shrink::cuda::linear_int8_dynamic(args, ws.workspace(), nullptr, Synchronize::yes);
  const std::vector<Out> got = out.download<Out>(static_cast<std::size_t>(m * n));
  const bool exact = act == Activation::none || act == Activation::relu;
  int wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_float(got[i]), c = to_float(twin[i]);
    // GELU and SiLU: CUDA's erff / expf against glibc's, a few float ulps: one int8 step, or 1e-2 relative.
    const double tolerance = std::is_same_v<Out, std::int8_t> ? 1.0 : 1e-2 * std::fabs(c) + 1e-5;
    const bool same = exact ? std::memcmp(&got[i], &twin[i], sizeof(Out)) == 0 : std::fabs(g - c) <= tolerance;
    if (!same && wrong++ < 5) CHECK(g == c);
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("cuda linear_int8_dynamic equals cpu::linear_int8_dynamic on the same objects", "[gpu]") {
  std::uint32_t seed = 3000;
  for (const LinearInt8Path path : paths_here())
    for (const Activation act : kActivations) {
      check_dynamic<float, float>(1, 256, 4096, path, act, seed++);  // one token, K split
      check_dynamic<float, half>(37, 90, 160, path, act, seed++);
      check_dynamic<half, std::int8_t>(130, 129, 208, path, act, seed++);
      check_dynamic<bfloat16, bfloat16>(200, 64, 512, path, act, seed++);
    }
}

TEST_CASE("cuda linear_int8_dynamic flags NaN and inf in x", "[gpu]") {
  const Int8Problem p(1, 32, 64, true, true, false, 31);
  std::vector<float> x(4 * 64, 0.5f);
  x[70] = std::numeric_limits<float>::quiet_NaN();
  const auto x_dev = to_device(x);
  DeviceBuffer out(4 * 32 * sizeof(float));
  shrink::cuda::LinearInt8DynamicArgs args;
  args.x = TensorView<const float>(x_dev->as<float>(), Shape{4, 64}, Device::cuda(0));
  args.w = p.w_operand();
  args.out = TensorView<float>(out.as<float>(), Shape{4, 32}, Device::cuda(0));
  DeviceBuffer ws(shrink::cuda::linear_int8_dynamic_workspace_bytes(args));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8_dynamic(args, ws.workspace(), nullptr, Synchronize::yes),
                    Contains("NaN or inf"));
}

namespace {

// quantize_rows_absmax on the device against the CPU on the same values as floats, bit for bit (q and scales).
template <class T>
void check_quantize_rows(std::int64_t m, std::int64_t k, std::int64_t ldx, std::int64_t ldq, std::uint32_t seed) {
  INFO("type size " << sizeof(T) << " M " << m << " K " << k << " ldx " << ldx << " ldq " << ldq);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-6, 6);
  std::vector<T> x(static_cast<std::size_t>(m * ldx), from_float<T>(1e4f));  // padding: a large value not to read
  std::vector<float> as_float(static_cast<std::size_t>(m * k));
  for (std::int64_t r = 0; r < m; ++r) {
    const int e = binade(rng);  // rows of very different ranges
    for (std::int64_t c = 0; c < k; ++c) {
      const T v = from_float<T>(std::ldexp(normal(rng), e));
      x[static_cast<std::size_t>(r * ldx + c)] = v;
      as_float[static_cast<std::size_t>(r * k + c)] = to_float(v);
    }
  }
  if (m > 2)  // an all-zero row: scale FLT_EPSILON
    for (std::int64_t c = 0; c < k; ++c) {
      x[static_cast<std::size_t>(2 * ldx + c)] = from_float<T>(0.0f);
      as_float[static_cast<std::size_t>(2 * k + c)] = 0.0f;
    }
  const auto cpu = shrink::cpu::quantize_rows_absmax(TensorView<const float>(as_float.data(), Shape{m, k}));
  const auto x_dev = to_device(x);
  DeviceBuffer q(static_cast<std::size_t>(m * ldq)), scales(static_cast<std::size_t>(m) * sizeof(float));
  DeviceBuffer ws(shrink::cuda::quantize_rows_absmax_workspace_bytes());
  shrink::cuda::quantize_rows_absmax(
      TensorView<const T>(x_dev->template as<T>(), Shape{m, k}, Strides{ldx, 1}, Device::cuda(0)),
      TensorView<std::int8_t>(q.as<std::int8_t>(), Shape{m, k}, Strides{ldq, 1}, Device::cuda(0)),
      TensorView<float>(scales.as<float>(), Shape{m}, Device::cuda(0)), ws.workspace(), nullptr, Synchronize::yes);
  const auto got_q = q.download<std::int8_t>(static_cast<std::size_t>(m * ldq));
  const auto got_s = scales.download<float>(static_cast<std::size_t>(m));
  int wrong = 0;
  for (std::int64_t r = 0; r < m; ++r) {
    if (std::memcmp(&got_s[static_cast<std::size_t>(r)], &cpu.qparams.scale[static_cast<std::size_t>(r)], 4) != 0 &&
        wrong++ < 5)
      CHECK(got_s[static_cast<std::size_t>(r)] == cpu.qparams.scale[static_cast<std::size_t>(r)]);
    for (std::int64_t c = 0; c < ldq; ++c) {
      const std::int8_t g = got_q[static_cast<std::size_t>(r * ldq + c)];
      const std::int8_t expected = c < k ? static_cast<std::int8_t>(cpu.data[static_cast<std::size_t>(r * k + c)])
                                         : static_cast<std::int8_t>(shrink::test::kPoison);
      if (g != expected && wrong++ < 5) CHECK(int{g} == int{expected});
    }
  }
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("cuda quantize_rows_absmax equals cpu::quantize_rows_absmax bit for bit", "[gpu]") {
  check_quantize_rows<float>(5, 300, 300, 300, 1);        // 16-byte loads, row in shared memory
  check_quantize_rows<float>(3, 20000, 20000, 20000, 2);  // row past the shared-memory budget: read twice
  check_quantize_rows<float>(4, 37, 41, 40, 3);           // odd K, strided rows: scalar loads
  check_quantize_rows<half>(64, 4096, 4096, 4096, 4);
  check_quantize_rows<half>(6, 300, 304, 320, 5);  // K not a multiple of 8: scalar
  check_quantize_rows<half>(2, 40000, 40000, 40000, 6);
  check_quantize_rows<bfloat16>(7, 11008, 11008, 11008, 7);
  check_quantize_rows<bfloat16>(1, 16, 16, 16, 8);
}

TEST_CASE("cuda quantize_rows_absmax flags NaN and inf", "[gpu]") {
  std::vector<float> x(4 * 64, 0.5f);
  x[100] = std::numeric_limits<float>::infinity();
  const auto x_dev = to_device(x);
  DeviceBuffer q(x.size()), scales(4 * sizeof(float)), ws(shrink::cuda::quantize_rows_absmax_workspace_bytes());
  CHECK_THROWS_WITH(
      shrink::cuda::quantize_rows_absmax(TensorView<const float>(x_dev->as<float>(), Shape{4, 64}, Device::cuda(0)),
                                         TensorView<std::int8_t>(q.as<std::int8_t>(), Shape{4, 64}, Device::cuda(0)),
                                         TensorView<float>(scales.as<float>(), Shape{4}, Device::cuda(0)),
                                         ws.workspace(), nullptr, Synchronize::yes),
      Contains("NaN or inf"));
}

// ---- [host] -------------------------------------------------------------------------------------------------------

namespace {

// Addresses the host checks accept and never dereference, `megabytes` MiB up: far apart so that nothing overlaps by
// accident.
template <class T>
T* fake_at_mib(std::uintptr_t megabytes) {
  return reinterpret_cast<T*>(megabytes << 20);
}

constexpr std::int64_t kM = 64, kN = 96, kK = 128;

LinearInt8Args valid_args() {
  LinearInt8Args a;
  a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, kK}, Device::cuda(0));
  a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{kN, kK}, Device::cuda(0));
  a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{kM}, Device::cuda(0));
  a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{kN}, Device::cuda(0));
  a.epilogue.bias = TensorView<const float>(fake_at_mib<float>(5), Shape{kN}, Device::cuda(0));
  a.out = TensorView<half>(fake_at_mib<half>(6), Shape{kM, kN}, Device::cuda(0));
  return a;
}

// A fake 1 MiB workspace at 7 MiB, apart from valid_args()' operands.
const shrink::cuda::Workspace kFakeInt8Workspace{fake_at_mib<void>(7), std::size_t{1} << 20};

// can_implement refuses `args` naming `fragment`, and linear_int8 throws that reason before any CUDA call.
void expect_refused(const LinearInt8Args& args, const std::string& fragment) {
  const shrink::Support s = shrink::cuda::can_implement_linear_int8(args);
  INFO("reason: " << s.reason());
  CHECK_FALSE(s);
  CHECK_THAT(s.reason(), Contains(fragment));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(args, kFakeInt8Workspace, nullptr),
                    Contains("shrink::cuda::linear_int8: ") && Contains(fragment));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8_workspace_bytes(args), Contains(fragment));
}

}  // namespace

TEST_CASE("cuda can_implement_linear_int8 accepts valid operands of every output type", "[host]") {
  LinearInt8Args a = valid_args();
  CHECK(shrink::cuda::can_implement_linear_int8(a));
  a.out = TensorView<float>(fake_at_mib<float>(6), Shape{kM, kN}, Device::cuda(0));
  CHECK(shrink::cuda::can_implement_linear_int8(a));
  a.out = TensorView<bfloat16>(fake_at_mib<bfloat16>(6), Shape{kM, kN}, Strides{kN + 5, 1}, Device::cuda(0));
  CHECK(shrink::cuda::can_implement_linear_int8(a));
  a.out = TensorView<std::int8_t>(fake_at_mib<std::int8_t>(6), Shape{kM, kN}, Device::cuda(0));
  a.epilogue.out_scale = 0.05f;
  CHECK(shrink::cuda::can_implement_linear_int8(a));
  a.epilogue.bias = TensorView<const float>();                                             // no bias
  a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{1}, Device::cuda(0));  // per tensor
  a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{1}, Device::cuda(0));
  a.x.values =
      TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, kK}, Strides{kK + 48, 1}, Device::cuda(0));
  CHECK(shrink::cuda::can_implement_linear_int8(a));
  a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{1, 16}, Device::cuda(0));  // 1 × N × 16
  a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{1, 16}, Device::cuda(0));
  a.out = TensorView<float>(fake_at_mib<float>(6), Shape{1, 1}, Device::cuda(0));
  CHECK(shrink::cuda::can_implement_linear_int8(a));
}

TEST_CASE("cuda can_implement_linear_int8 names the argument at fault; linear_int8 throws it before any CUDA call",
          "[host]") {
  LinearInt8Args a = valid_args();
  SECTION("x in host memory") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, kK});
    expect_refused(a, "x.values = a view of host memory");
  }
  SECTION("x of rank 1") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kK}, Device::cuda(0));
    expect_refused(a, "x.values.shape = [128]: expected a 2-D tensor");
  }
  SECTION("empty x") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{0, kK}, Device::cuda(0));
    expect_refused(a, "x.values.shape = [0, 128]: expected at least one element");
  }
  SECTION("x with strided columns") {
    a.x.values =
        TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, kK}, Strides{2 * kK, 2}, Device::cuda(0));
    expect_refused(a, "x.values.strides");
  }
  SECTION("x rows overlapping") {
    a.x.values =
        TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, kK}, Strides{16, 1}, Device::cuda(0));
    expect_refused(a, "rows must not overlap");
  }
  SECTION("K not a multiple of 16") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, 100}, Device::cuda(0));
    a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{kN, 100}, Device::cuda(0));
    expect_refused(a, "x.shape = [64, 100]: expected K a multiple of 16");
  }
  SECTION("K past the int32 bound") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1), Shape{kM, 131072}, Device::cuda(0));
    a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(40), Shape{kN, 131072}, Device::cuda(0));
    expect_refused(a, "K ≤ 131071");
  }
  SECTION("w with another K") {
    a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{kN, kK + 16}, Device::cuda(0));
    expect_refused(a, "w.values.shape = [96, 144]: expected [N, 128]");
  }
  SECTION("w on another device") {
    a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{kN, kK}, Device::cuda(1));
    expect_refused(a, "w.values = a view on CUDA device 1");
  }
  SECTION("x not 16-byte aligned") {
    a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(1) + 8, Shape{kM, kK}, Device::cuda(0));
    expect_refused(a, "x.values = a pointer not 16-byte aligned");
  }
  SECTION("w row stride not a multiple of 16") {
    a.w.values =
        TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{kN, kK}, Strides{kK + 8, 1}, Device::cuda(0));
    expect_refused(a, "w.values.strides = [136, 1]: expected a row stride that is a multiple of 16 bytes");
  }
  SECTION("x scales of the wrong size") {
    a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{kM - 1}, Device::cuda(0));
    expect_refused(a, "x.scales.shape = [63]: expected [64] or [1]");
  }
  SECTION("x scales in host memory") {
    a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{kM});
    expect_refused(a, "x.scales = a view of host memory");
  }
  SECTION("x without scales") {
    a.x.scales = TensorView<const float>();
    expect_refused(a, "x.scales");
  }
  SECTION("w scales of the wrong size") {
    a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{kM}, Device::cuda(0));
    expect_refused(a, "w.scales.shape = [64]: expected [96] or [1]");
  }
  SECTION("w scales strided") {
    a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{kN}, Strides{2}, Device::cuda(0));
    expect_refused(a, "w.scales.strides");
  }
  SECTION("scales in the epilogue as well as with the operands") {
    a.epilogue.x_scales = a.x.scales;
    expect_refused(a, "linear_int8 takes the scales with its operands: x.scales and w.scales");
  }
  SECTION("bias of the wrong size") {
    a.epilogue.bias = TensorView<const float>(fake_at_mib<float>(5), Shape{1}, Device::cuda(0));
    expect_refused(a, "epilogue.bias.shape = [1]: expected [96]");
  }
  SECTION("misaligned bias") {
    a.epilogue.bias =
        TensorView<const float>(reinterpret_cast<const float*>(fake_at_mib<char>(5) + 2), Shape{kN}, Device::cuda(0));
    expect_refused(a, "epilogue.bias = a misaligned pointer");
  }
  SECTION("an unknown activation") {
    a.epilogue.activation = static_cast<Activation>(7);
    expect_refused(a, "epilogue.activation = 7");
  }
  SECTION("output of the wrong shape") {
    a.out = TensorView<float>(fake_at_mib<float>(6), Shape{kN, kM}, Device::cuda(0));
    expect_refused(a, "out.shape = [96, 64]: expected [64, 96]");
  }
  SECTION("output with strided columns") {
    a.out = TensorView<half>(fake_at_mib<half>(6), Shape{kM, kN}, Strides{2 * kN, 2}, Device::cuda(0));
    expect_refused(a, "out.strides");
  }
  SECTION("output in host memory") {
    a.out = TensorView<float>(fake_at_mib<float>(6), Shape{kM, kN});
    expect_refused(a, "out = a view of host memory");
  }
  SECTION("int8 output without a usable scale") {
    a.out = TensorView<std::int8_t>(fake_at_mib<std::int8_t>(6), Shape{kM, kN}, Device::cuda(0));
    for (const float bad : {0.0f, -0.5f, std::numeric_limits<float>::infinity(), std::nanf(""), 1e-39f}) {
      a.epilogue.out_scale = bad;
      expect_refused(a, "epilogue.out_scale");
    }
  }
  SECTION("output over x") {
    a.out = TensorView<half>(const_cast<half*>(reinterpret_cast<const half*>(a.x.values.data())), Shape{kM, kN},
                             Device::cuda(0));
    expect_refused(a, "out = memory overlapping x.values");
  }
  SECTION("output over w's scales") {
    a.out = TensorView<half>(reinterpret_cast<half*>(fake_at_mib<char>(4) + 64), Shape{kM, kN}, Device::cuda(0));
    expect_refused(a, "out = memory overlapping w.scales");
  }
  SECTION("output over the bias") {
    a.out = TensorView<half>(reinterpret_cast<half*>(fake_at_mib<char>(5) + 64), Shape{kM, kN}, Device::cuda(0));
    expect_refused(a, "out = memory overlapping epilogue.bias");
  }
  SECTION("an unknown path") {
    a.path = static_cast<LinearInt8Path>(9);
    expect_refused(a, "path = 9");
  }
}

TEST_CASE("cuda linear_int8 run refuses a plan that make_plan did not make, before any CUDA call", "[host]") {
  const shrink::cuda::LinearInt8Plan plan;
  CHECK(plan.empty());
  const LinearInt8Args a = valid_args();
  CHECK_THROWS_WITH(shrink::cuda::run(plan, a.x, a.out, kFakeInt8Workspace, nullptr),
                    Contains("shrink::cuda::run(LinearInt8Plan): plan = a default-constructed plan: expected a plan "
                             "made by make_plan(args)"));
}

TEST_CASE("cuda linear_int8 checks the workspace on the host", "[host]") {
  const LinearInt8Args a = valid_args();
  const std::size_t needed = shrink::cuda::linear_int8_workspace_bytes(a);
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(a, {nullptr, needed}, nullptr),
                    Contains("shrink::cuda::linear_int8: workspace.data = a null pointer"));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(a, {fake_at_mib<char>(7) + 4, needed}, nullptr),
                    Contains("workspace.data = a misaligned pointer"));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(a, {fake_at_mib<void>(7), needed - 1}, nullptr),
                    Contains("workspace.bytes = " + std::to_string(needed - 1) +
                             ": expected at least linear_int8_workspace_bytes(args) = " + std::to_string(needed)));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8(
                        a, {const_cast<void*>(static_cast<const void*>(fake_at_mib<char>(6))), needed}, nullptr),
                    Contains("workspace = memory overlapping out"));
}

TEST_CASE("cuda linear_int8_workspace_bytes: the status word, plus int32 partial sums when K is split", "[host]") {
  LinearInt8Args a = valid_args();
  // Large problems fill the device with tiles: no split.
  a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(100), Shape{4096, 4096}, Device::cuda(0));
  a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(200), Shape{4096, 4096}, Device::cuda(0));
  a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{4096}, Device::cuda(0));
  a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{4096}, Device::cuda(0));
  a.epilogue.bias = TensorView<const float>(fake_at_mib<float>(5), Shape{4096}, Device::cuda(0));
  a.out = TensorView<half>(fake_at_mib<half>(300), Shape{4096, 4096}, Device::cuda(0));
  for (const LinearInt8Path path : {LinearInt8Path::automatic, LinearInt8Path::mma_sync}) {
    a.path = path;
    CHECK(shrink::cuda::linear_int8_workspace_bytes(a) == shrink::cuda::kStatusBytes);
  }
  // One token, K 4096: 4 small tiles of 64 columns, so K splits 16 ways (64 k-tiles, 4 each).
  a.x.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(100), Shape{1, 4096}, Device::cuda(0));
  a.w.values = TensorView<const std::int8_t>(fake_at_mib<std::int8_t>(200), Shape{256, 4096}, Device::cuda(0));
  a.x.scales = TensorView<const float>(fake_at_mib<float>(3), Shape{1}, Device::cuda(0));
  a.w.scales = TensorView<const float>(fake_at_mib<float>(4), Shape{256}, Device::cuda(0));
  a.epilogue.bias = TensorView<const float>(fake_at_mib<float>(5), Shape{256}, Device::cuda(0));
  a.out = TensorView<half>(fake_at_mib<half>(300), Shape{1, 256}, Device::cuda(0));
  a.path = LinearInt8Path::mma_sync;
  CHECK(shrink::cuda::linear_int8_workspace_bytes(a) == shrink::cuda::kStatusBytes + 16 * 256 * 4);
  a.path = LinearInt8Path::automatic;  // the larger of the paths it may take
  CHECK(shrink::cuda::linear_int8_workspace_bytes(a) >= shrink::cuda::kStatusBytes + 16 * 256 * 4);
}

TEST_CASE("cuda apply_int8_epilogue checks its arguments on the host", "[host]") {
  LinearInt8Args a = valid_args();
  a.epilogue.x_scales = a.x.scales;  // no operands here: the scales come in the epilogue
  a.epilogue.w_scales = a.w.scales;
  const TensorView<const std::int32_t> acc(fake_at_mib<std::int32_t>(8), Shape{kM, kN}, Device::cuda(0));
  CHECK(shrink::cuda::can_implement_int8_epilogue(acc, a.epilogue, a.out));
  CHECK_THAT(shrink::cuda::can_implement_int8_epilogue(acc, valid_args().epilogue, a.out).reason(),
             Contains("epilogue.x_scales"));
  CHECK(shrink::cuda::int8_epilogue_workspace_bytes() == shrink::cuda::kStatusBytes);
  const TensorView<const std::int32_t> wrong(fake_at_mib<std::int32_t>(8), Shape{kM, kN + 1}, Device::cuda(0));
  CHECK_THAT(shrink::cuda::can_implement_int8_epilogue(wrong, a.epilogue, a.out).reason(),
             Contains("epilogue.w_scales.shape = [96]: expected [97] or [1]"));
  CHECK_THROWS_WITH(shrink::cuda::apply_int8_epilogue(acc, a.epilogue, a.out, {nullptr, 16}, nullptr),
                    Contains("shrink::cuda::apply_int8_epilogue: workspace.data = a null pointer"));
  const shrink::cuda::LinearInt8Output over =
      TensorView<half>(reinterpret_cast<half*>(fake_at_mib<char>(8) + 128), Shape{kM, kN}, Device::cuda(0));
  CHECK_THROWS_WITH(shrink::cuda::apply_int8_epilogue(acc, a.epilogue, over, kFakeInt8Workspace, nullptr),
                    Contains("out = memory overlapping acc"));
  const TensorView<const std::int32_t> host(fake_at_mib<std::int32_t>(8), Shape{kM, kN});
  CHECK_THROWS_WITH(shrink::cuda::apply_int8_epilogue(host, a.epilogue, a.out, kFakeInt8Workspace, nullptr),
                    Contains("acc = a view of host memory"));
}

TEST_CASE("cuda quantize_rows_absmax checks its arguments on the host", "[host]") {
  using shrink::cuda::quantize_rows_absmax;
  const TensorView<const half> x(fake_at_mib<half>(1), Shape{8, 64}, Device::cuda(0));
  const TensorView<std::int8_t> q(fake_at_mib<std::int8_t>(2), Shape{8, 64}, Device::cuda(0));
  const TensorView<float> s(fake_at_mib<float>(3), Shape{8}, Device::cuda(0));
  CHECK(shrink::cuda::quantize_rows_absmax_workspace_bytes() == shrink::cuda::kStatusBytes);
  CHECK_THROWS_WITH(quantize_rows_absmax(TensorView<const half>(fake_at_mib<half>(1), Shape{8, 64}), q, s,
                                         kFakeInt8Workspace, nullptr),
                    Contains("shrink::cuda::quantize_rows_absmax: x = a view of host memory"));
  CHECK_THROWS_WITH(
      quantize_rows_absmax(x, TensorView<std::int8_t>(fake_at_mib<std::int8_t>(2), Shape{8, 63}, Device::cuda(0)), s,
                           kFakeInt8Workspace, nullptr),
      Contains("q.shape = [8, 63]: expected [8, 64] (x's)"));
  CHECK_THROWS_WITH(quantize_rows_absmax(x, q, TensorView<float>(fake_at_mib<float>(3), Shape{7}, Device::cuda(0)),
                                         kFakeInt8Workspace, nullptr),
                    Contains("scales = a view of shape [7]"));
  CHECK_THROWS_WITH(
      quantize_rows_absmax(x,
                           TensorView<std::int8_t>(reinterpret_cast<std::int8_t*>(fake_at_mib<char>(1) + 64),
                                                   Shape{8, 64}, Device::cuda(0)),
                           s, kFakeInt8Workspace, nullptr),
      Contains("q = memory overlapping x"));
  CHECK_THROWS_WITH(quantize_rows_absmax(x, q, s, {fake_at_mib<void>(7), 8}, nullptr),
                    Contains("workspace.bytes = 8: expected at least quantize_rows_absmax_workspace_bytes() = 16"));
  CHECK_THROWS_WITH(
      quantize_rows_absmax(x, q, s, {const_cast<void*>(static_cast<const void*>(fake_at_mib<char>(3))), 16}, nullptr),
      Contains("workspace = memory overlapping an output"));
  CHECK_THROWS_WITH(
      quantize_rows_absmax(TensorView<const half>(fake_at_mib<half>(1), Shape{8, 64}, Strides{64, 2}, Device::cuda(0)),
                           q, s, kFakeInt8Workspace, nullptr),
      Contains("x.strides"));
}

TEST_CASE("cuda linear_int8_dynamic checks its arguments on the host", "[host]") {
  const LinearInt8Args g = valid_args();
  shrink::cuda::LinearInt8DynamicArgs a;
  a.x = TensorView<const half>(fake_at_mib<half>(1), Shape{kM, kK}, Device::cuda(0));
  a.w = g.w;
  a.epilogue = g.epilogue;
  a.out = g.out;
  CHECK(shrink::cuda::can_implement_linear_int8_dynamic(a));
  const std::size_t needed = shrink::cuda::linear_int8_dynamic_workspace_bytes(a);
  // linear_int8's workspace, then q [M, K] and the M scales, each 256-byte aligned.
  CHECK(needed >= 256 + kM * kK + kM * 4);
  const shrink::cuda::Workspace fake{fake_at_mib<void>(7), std::size_t{1} << 20};
  auto refused = [&](const shrink::cuda::LinearInt8DynamicArgs& args, const std::string& fragment) {
    INFO("reason: " << shrink::cuda::can_implement_linear_int8_dynamic(args).reason());
    CHECK_THAT(shrink::cuda::can_implement_linear_int8_dynamic(args).reason(), Contains(fragment));
    CHECK_THROWS_WITH(shrink::cuda::linear_int8_dynamic(args, fake, nullptr),
                      Contains("shrink::cuda::linear_int8_dynamic: ") && Contains(fragment));
  };
  shrink::cuda::LinearInt8DynamicArgs b = a;
  b.x = TensorView<const float>(fake_at_mib<float>(1), Shape{kM, kK});
  refused(b, "x = a view of host memory");
  b = a;
  b.x = TensorView<const half>(fake_at_mib<half>(1), Shape{kM, kK + 16}, Device::cuda(0));
  refused(b, "w.values.shape = [96, 128]: expected [N, 144]");
  b = a;
  b.x = TensorView<const bfloat16>(fake_at_mib<bfloat16>(1), Shape{kM, kK}, Strides{2 * kK, 2}, Device::cuda(0));
  refused(b, "x.strides");
  b = a;
  b.epilogue.w_scales = g.w.scales;
  refused(b, "linear_int8 takes the scales with its operands");
  b = a;
  b.out = TensorView<half>(reinterpret_cast<half*>(fake_at_mib<char>(1) + 64), Shape{kM, kN}, Device::cuda(0));
  refused(b, "out = memory overlapping x");
  CHECK_THROWS_WITH(shrink::cuda::linear_int8_dynamic(a, {fake_at_mib<void>(7), needed - 1}, nullptr),
                    Contains("expected at least linear_int8_dynamic_workspace_bytes(args)"));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8_dynamic(a, {fake_at_mib<char>(7) + 16, needed}, nullptr),
                    Contains("workspace = a pointer not 256-byte aligned"));
  CHECK_THROWS_WITH(shrink::cuda::linear_int8_dynamic(
                        a, {const_cast<void*>(static_cast<const void*>(fake_at_mib<char>(1))), needed}, nullptr),
                    Contains("workspace = memory overlapping x"));
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: every
// kernel path once, on problems of a few CTAs.
TEST_CASE("cuda linear_int8 sanitizer subset: each path on small tiles, large tiles and split K", "[gpu][sanitize]") {
  for (const LinearInt8Path path : paths_here()) {
    check_gemm<half>(Int8Problem(33, 70, 80, true, true, true, 21), path, Activation::relu);              // small tiles
    check_gemm<std::int8_t>(Int8Problem(130, 129, 208, false, true, false, 22), path, Activation::none);  // large tiles
    check_gemm<float>(Int8Problem(1, 256, 4096, true, true, true, 23), path, Activation::gelu);           // K split
    check_gemm<bfloat16>(Int8Problem(130, 128, 2048, true, false, true, 24), path, Activation::silu);  // K split, large
  }
  check_quantize_rows<half>(5, 200, 208, 208, 25);
  check_dynamic<half, half>(33, 70, 80, LinearInt8Path::automatic, Activation::relu, 26);
}
