// Tests for shrink/linear/weight_only_cuda.hpp (W8A16 / W4A16): [gpu] cases run every path, weight type (int8, int4
// group 64 and 128, affine int4 group 64 and uint4 group 128 with zero points), activation type and epilogue for M in
// {1, 2, 3, 5, 16, 33, 64} on shapes with odd N and K not a multiple of 64, outputs poisoned with NaN, against the CPU
// twin (cpu::linear_weight_only) and an FP64 reference (1e-3 relative, plus the output type's own rounding); split-K
// runs twice give the same bits; bad scales and biases are reported. [host] cases check the bit-level conversions
// exhaustively, the mma.sync fragment order on an emulated warp, can_implement's reasons and every host check, none of
// which touches the driver.
#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda/device_buffer.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/int4.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/kernels/linear_weight_only_bits.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/linear/weight_only_cuda.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/activation_reference.hpp"
#include "support/element_types.hpp"
#include "support/mismatch_map.hpp"

namespace {

using shrink::Activation;
using shrink::bfloat16;
using shrink::Device;
using shrink::half;
using shrink::Shape;
using shrink::Strides;
using shrink::TensorView;
using shrink::cuda::LinearWeightOnlyArgs;
using shrink::cuda::WeightOnlyPath;
using shrink::cuda::WeightOnlyWeight;
using shrink::quant::QuantDtype;
using shrink::quant::QuantScheme;
using shrink::quant::Symmetry;
using namespace shrink::test;
using Catch::Matchers::Contains;
namespace bits = shrink::cuda::kernels::linear_weight_only;

template <class T>
double decode(std::uint16_t b) {
  return static_cast<double>(T::from_bits(b).to_float());
}
template <class T>
double low_of(std::uint32_t pair) {
  return decode<T>(static_cast<std::uint16_t>(pair & 0xFFFFu));
}
template <class T>
double high_of(std::uint32_t pair) {
  return decode<T>(static_cast<std::uint16_t>(pair >> 16));
}

// Spacing of T at |v|: outputs are rounded to it.
template <class T>
double ulp_of(double v) {
  constexpr int mantissa = std::is_same<T, half>::value ? 10 : 7;
  constexpr int min_exponent = std::is_same<T, half>::value ? -14 : -126;
  const int e = v == 0.0 ? min_exponent : std::max(min_exponent, std::ilogb(std::fabs(v)));
  return std::ldexp(1.0, e - mantissa);
}

// ---- The 16-bit weight pair of a thread's step, as the kernels build it (after the offset subtraction), decoded ----
template <class T>
std::pair<double, double> weight_pair(bool int4, const std::uint32_t* raw, int step, int which) {
  if (!int4) {
    std::uint32_t flipped[4];
    for (int i = 0; i < 4; ++i) flipped[i] = bits::flip_int8_signs(raw[i]);
    if (std::is_same<T, bfloat16>::value) {
      const std::uint32_t p = bits::int8_weight_pair_bfloat16(flipped, step, which);
      return {low_of<T>(p), high_of<T>(p)};
    }
    const std::uint32_t p = bits::int8_weight_pair_biased_half(flipped, step, which);
    return {low_of<T>(p) - 1152.0, high_of<T>(p) - 1152.0};
  }
  std::uint32_t flipped[2];
  for (int i = 0; i < 2; ++i) flipped[i] = bits::flip_int4_signs(raw[i]);
  const bool is_half = std::is_same<T, half>::value;
  const std::uint32_t p =
      bits::int4_weight_pair_biased(flipped, step, which, is_half ? bits::kHalfMagicPair : bits::kBfloat16MagicPair);
  const double offset = is_half ? 1032.0 : 136.0;
  return {low_of<T>(p) - offset, high_of<T>(p) - offset};
}

// ---- Host references ----------------------------------------------------------------------------------------------
// The affine cases carry zero points (GPTQ / AWQ style): signed int4 in groups of 64, unsigned uint4 in groups of 128.
enum class WeightCase { int8, int4_g64, int4_g128, int4_affine_g64, uint4_affine_g128 };

const char* case_name(WeightCase c) {
  switch (c) {
    case WeightCase::int8: return "int8";
    case WeightCase::int4_g64: return "int4 g64";
    case WeightCase::int4_g128: return "int4 g128";
    case WeightCase::int4_affine_g64: return "int4 affine g64";
    case WeightCase::uint4_affine_g128: return "uint4 affine g128";
  }
  return "?";
}

std::int64_t group_of(WeightCase c) {
  return c == WeightCase::int8 ? 0 : c == WeightCase::int4_g64 || c == WeightCase::int4_affine_g64 ? 64 : 128;
}

bool is_affine(WeightCase c) { return c == WeightCase::int4_affine_g64 || c == WeightCase::uint4_affine_g128; }

// A weight quantized by the quantization module, with its exact real values (q − zp) · s.
struct HostWeight {
  shrink::quant::QuantizedTensor q;
  std::vector<double> real;  // [N, K]
};

HostWeight make_weight(WeightCase c, std::int64_t n, std::int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& v : w) v = normal(rng);
  if (is_affine(c))  // off centre, row by row: zero points far from the symmetric ones
    for (std::size_t i = 0; i < w.size(); ++i)
      w[i] += (0.5f + 0.25f * static_cast<float>((i / static_cast<std::size_t>(k)) % 4)) * normal.stddev();
  const QuantScheme scheme = c == WeightCase::int8 ? QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0)
                             : c == WeightCase::int4_affine_g64
                                 ? QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 64)
                             : c == WeightCase::uint4_affine_g128
                                 ? QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 128)
                                 : QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, group_of(c));
  HostWeight h{shrink::quant::quantize(TensorView<const float>(w.data(), Shape{n, k}), scheme), {}};
  h.real.resize(w.size());
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t j = 0; j < k; ++j) {
      const std::size_t s = c == WeightCase::int8 ? static_cast<std::size_t>(r)
                                                  : static_cast<std::size_t>(r * (k / group_of(c)) + j / group_of(c));
      h.real[static_cast<std::size_t>(r * k + j)] =
          static_cast<double>(h.q.value(r * k + j) - h.q.qparams.zero_point[s]) *
          static_cast<double>(h.q.qparams.scale[s]);
    }
  return h;
}

template <class T>
std::vector<T> random_activations(std::int64_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> x(static_cast<std::size_t>(count));
  for (T& v : x) {
    do v = T(normal(rng));
    while (v.to_float() == 0.0f);
  }
  return x;
}

// The device copy of one problem's inputs.
struct WeightOnlyDeviceProblem {
  DeviceBuffer x, data, scales, bias, out, zero_points;
  WeightOnlyDeviceProblem(std::size_t x_bytes, std::size_t data_bytes, std::size_t scale_bytes, std::size_t bias_bytes,
                          std::size_t out_bytes, std::size_t zero_point_bytes = 0)
      : x(x_bytes),
        data(data_bytes),
        scales(scale_bytes),
        bias(bias_bytes),
        out(out_bytes),
        zero_points(zero_point_bytes) {}

  // The weight [n, k] of case wc in `data`, `scales` and (affine cases) `zero_points`.
  WeightOnlyWeight weight(WeightCase wc, std::int64_t n, std::int64_t k) const {
    if (wc == WeightCase::int8)
      return WeightOnlyWeight::int8(TensorView<const std::int8_t>(data.as<std::int8_t>(), Shape{n, k}, Device::cuda(0)),
                                    TensorView<const float>(scales.as<float>(), Shape{n}, Device::cuda(0)));
    const TensorView<const std::uint8_t> packed(data.as<std::uint8_t>(), Shape{n, k / 2}, Device::cuda(0));
    const TensorView<const float> s(scales.as<float>(), Shape{n, k / group_of(wc)}, Device::cuda(0));
    const TensorView<const std::int32_t> zp(zero_points.as<std::int32_t>(), Shape{n, k / group_of(wc)},
                                            Device::cuda(0));
    if (wc == WeightCase::int4_affine_g64) return WeightOnlyWeight::int4(packed, s, group_of(wc), zp);
    if (wc == WeightCase::uint4_affine_g128) return WeightOnlyWeight::uint4(packed, s, zp, group_of(wc));
    return WeightOnlyWeight::int4(packed, s, group_of(wc));
  }

  // The arguments of an [m, n, k] product over these buffers: x, the weight of case wc, out.
  template <class T>
  LinearWeightOnlyArgs<T> args(WeightCase wc, std::int64_t m, std::int64_t n, std::int64_t k) const {
    LinearWeightOnlyArgs<T> a;
    a.x = TensorView<const T>(x.as<T>(), Shape{m, k}, Device::cuda(0));
    a.w = weight(wc, n, k);
    a.out = TensorView<T>(out.as<T>(), Shape{m, n}, Device::cuda(0));
    return a;
  }

  // Uploads the weight's bytes, scales and zero points.
  void upload_weight(const HostWeight& w) {
    data.upload(w.q.data.data(), data.bytes());
    scales.upload(w.q.qparams.scale.data(), scales.bytes());
    if (zero_points.bytes() > 0) zero_points.upload(w.q.qparams.zero_point.data(), zero_points.bytes());
  }
};

std::size_t zero_point_bytes(WeightCase wc, const HostWeight& w) {
  return is_affine(wc) ? w.q.qparams.zero_point.size() * sizeof(std::int32_t) : 0;
}

constexpr std::int64_t kGuard = 64;  // outputs past the end that must stay poisoned

template <class T>
struct Run {
  std::vector<T> out;
  bool guard_intact = true;
};

// One call on the device, out poisoned with NaN (all-ones bytes) first, kGuard elements past it checked after.
template <class T>
Run<T> run_on_device(WeightOnlyDeviceProblem& d, const LinearWeightOnlyArgs<T>& args, std::int64_t m, std::int64_t n) {
  const std::size_t out_bytes = static_cast<std::size_t>(m * n + kGuard) * sizeof(T);
  CUDA_REQUIRE(cudaMemset(d.out.as<void>(), 0xFF, out_bytes));
  const std::size_t workspace_bytes = shrink::cuda::linear_weight_only_workspace_bytes(args);
  DeviceBuffer workspace(workspace_bytes);
  shrink::cuda::linear_weight_only(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes);
  CUDA_REQUIRE(cudaDeviceSynchronize());
  Run<T> r;
  const std::vector<T> all = d.out.download<T>(static_cast<std::size_t>(m * n + kGuard));
  r.out.assign(all.begin(), all.begin() + m * n);
  for (std::int64_t i = m * n; i < m * n + kGuard; ++i)
    r.guard_intact &= all[static_cast<std::size_t>(i)].to_bits() == 0xFFFFu;
  return r;
}

struct Shapes {
  std::int64_t n, k;
};

// Every path, activation and bias setting for one weight case, activation type and M, against the twin and FP64.
template <class T>
void check_problem(WeightCase wc, std::int64_t m, Shapes shape, std::uint32_t seed) {
  const std::int64_t n = shape.n, k = shape.k;
  std::mt19937 rng(seed);
  const HostWeight w = make_weight(wc, n, k, rng);
  const std::vector<T> x = random_activations<T>(m * k, rng);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> bias(static_cast<std::size_t>(n));
  for (float& b : bias) b = normal(rng);

  WeightOnlyDeviceProblem d(x.size() * sizeof(T), w.q.data.size(), w.q.qparams.scale.size() * sizeof(float),
                            bias.size() * sizeof(float), static_cast<std::size_t>(m * n + kGuard) * sizeof(T),
                            zero_point_bytes(wc, w));
  d.x.upload(x.data(), d.x.bytes());
  d.upload_weight(w);
  d.bias.upload(bias.data(), d.bias.bytes());

  LinearWeightOnlyArgs<T> args;
  args.x = TensorView<const T>(d.x.as<T>(), Shape{m, k}, Device::cuda(0));
  args.w = d.weight(wc, n, k);
  args.out = TensorView<T>(d.out.as<T>(), Shape{m, n}, Device::cuda(0));
  REQUIRE(shrink::cuda::can_implement_linear_weight_only(args));

  // Pre-activation FP64 reference and its scale: Σ_k x · (q − zp) · s + bias, Σ_k |x · (q − zp) · s|.
  std::vector<double> pre(static_cast<std::size_t>(m * n)), magnitude(pre.size());
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c) {
      double s = 0, a = 0;
      for (std::int64_t j = 0; j < k; ++j) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(r * k + j)].to_float()) *
                         w.real[static_cast<std::size_t>(c * k + j)];
        s += p;
        a += std::fabs(p);
      }
      pre[static_cast<std::size_t>(r * n + c)] = s;
      magnitude[static_cast<std::size_t>(r * n + c)] = a;
    }

  int variant = 0;
  for (const WeightOnlyPath path : {WeightOnlyPath::cuda_core, WeightOnlyPath::tensor_core, WeightOnlyPath::automatic})
    for (const Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu}) {
      const bool with_bias = (variant++ % 2) == 0;
      INFO(type_name<T>() << " " << case_name(wc) << " M " << m << " N " << n << " K " << k << " path "
                          << shrink::cuda::to_string(path) << " activation " << shrink::to_string(act)
                          << (with_bias ? " with bias" : " no bias"));
      args.path = path;
      args.epilogue.activation = act;
      args.epilogue.bias = with_bias ? TensorView<const float>(d.bias.as<float>(), Shape{n}, Device::cuda(0))
                                     : TensorView<const float>();
      const Run<T> gpu = run_on_device(d, args, m, n);
      CHECK(gpu.guard_intact);

      shrink::Epilogue e;
      if (with_bias) e.bias = TensorView<const float>(bias.data(), Shape{n});
      e.activation = act;
      std::vector<T> twin(static_cast<std::size_t>(m * n));
      shrink::cpu::linear_weight_only(TensorView<const T>(x.data(), Shape{m, k}), w.q,
                                      TensorView<T>(twin.data(), Shape{m, n}), e);

      double rms = 0;
      for (std::size_t i = 0; i < pre.size(); ++i) {
        const double v = activate_reference(pre[i] + (with_bias ? bias[i % static_cast<std::size_t>(n)] : 0.0), act);
        rms += v * v;
      }
      rms = std::sqrt(rms / static_cast<double>(pre.size())) + 1e-30;

      // Mapped by the output tile of a CTA: all M x the 64 weight rows of the tensor-core kernel's 4 warps (the
      // cuda-core kernel's 16 rows are a quarter of one).
      MismatchMap bad_twin(m, n, m, 64), bad_reference(m, n, m, 64);
      double worst_relative = 0;
      for (std::size_t i = 0; i < pre.size(); ++i) {
        const double b = with_bias ? bias[i % static_cast<std::size_t>(n)] : 0.0;
        const double expected = activate_reference(pre[i] + b, act);
        const double got = gpu.out[i].to_float(), cpu = twin[i].to_float();
        // Twin: both sums in float (orders differ), then one rounding to T each.
        const double float_bound = 1.2 * 2 * (static_cast<double>(k) + 8) * std::ldexp(1.0, -23) * magnitude[i] +
                                   std::ldexp(1.0, -20) * (std::fabs(expected) + std::fabs(b));
        const double twin_bound = float_bound + ulp_of<T>(std::max(std::fabs(got), std::fabs(cpu)));
        // FP64: 1e-3 of the value (or of the outputs' RMS, for values near 0), plus T's rounding.
        const double reference_bound = 1e-3 * std::max(std::fabs(expected), rms) + ulp_of<T>(std::fabs(expected));
        const double error = std::fabs(got - expected);
        worst_relative = std::max(worst_relative, error / std::max(std::fabs(expected), rms));
        const auto row = static_cast<std::int64_t>(i) / n, col = static_cast<std::int64_t>(i) % n;
        if (!(std::fabs(got - cpu) <= twin_bound)) bad_twin.add(row, col, got, cpu);
        if (!(error <= reference_bound)) bad_reference.add(row, col, got, expected);
      }
      INFO("worst error relative to max(|expected|, rms): " << worst_relative);
      CHECK_NO_MISMATCHES(bad_twin);
      CHECK_NO_MISMATCHES(bad_reference);
    }
}

// Shapes per weight case: N odd or not a multiple of 16 / 64, K past a whole number of 64-k blocks where the format
// allows it (int8: K % 16 == 0), and K long enough for automatic K slices.
std::vector<Shapes> shapes_for(WeightCase c) {
  switch (c) {
    case WeightCase::int8: return {{33, 272}, {257, 1040}, {8, 16}};
    case WeightCase::int4_g64: return {{33, 256}, {257, 1152}, {100, 64}};
    case WeightCase::int4_g128: return {{33, 384}, {257, 1152}, {70, 128}};
    case WeightCase::int4_affine_g64: return {{33, 256}, {257, 1152}, {101, 64}};
    case WeightCase::uint4_affine_g128: return {{35, 384}, {257, 1152}, {70, 128}};
  }
  return {};
}

template <class T>
void check_all_problems(std::uint32_t seed) {
  for (const WeightCase wc : {WeightCase::int8, WeightCase::int4_g64, WeightCase::int4_g128})
    for (const Shapes& shape : shapes_for(wc))
      for (const std::int64_t m : {1, 2, 3, 5, 16, 33, 64}) check_problem<T>(wc, m, shape, seed++);
}

template <class T>
void check_affine_problems(std::uint32_t seed) {
  for (const WeightCase wc : {WeightCase::int4_affine_g64, WeightCase::uint4_affine_g128})
    for (const Shapes& shape : shapes_for(wc))
      for (const std::int64_t m : {1, 2, 3, 5, 16, 33, 64}) check_problem<T>(wc, m, shape, seed++);
}

// Fake device addresses for the host checks: far apart (no overlap), aligned, never dereferenced.
template <class T>
T* fake_address(int slot, std::uintptr_t offset = 0) {
  return reinterpret_cast<T*>((static_cast<std::uintptr_t>(slot) << 32) + offset);
}

struct WeightOnlyHostArgs {
  LinearWeightOnlyArgs<half> a;
  WeightOnlyHostArgs(std::int64_t m = 4, std::int64_t n = 48, std::int64_t k = 128, std::int64_t group = 64) {
    a.x = TensorView<const half>(fake_address<const half>(1), Shape{m, k}, Device::cuda(0));
    a.w = WeightOnlyWeight::int4(
        TensorView<const std::uint8_t>(fake_address<const std::uint8_t>(2), Shape{n, k / 2}, Device::cuda(0)),
        TensorView<const float>(fake_address<const float>(3), Shape{n, k / group}, Device::cuda(0)), group);
    a.epilogue.bias = TensorView<const float>(fake_address<const float>(4), Shape{n}, Device::cuda(0));
    a.out = TensorView<half>(fake_address<half>(5), Shape{m, n}, Device::cuda(0));
  }
};

void expect_refused(const LinearWeightOnlyArgs<half>& a, const std::string& argument, const std::string& fragment) {
  const shrink::Support s = shrink::cuda::can_implement_linear_weight_only(a);
  INFO("reason: " << s.reason());
  CHECK_FALSE(s);
  CHECK(s.argument == argument);
  CHECK_THAT(s.reason(), Contains(fragment));
  // The call itself refuses with the same words, before any CUDA call.
  const shrink::cuda::Workspace ws{shrink::test::fake_device_pointer(), std::size_t{1} << 40};
  CHECK_THROWS_WITH(shrink::cuda::linear_weight_only(a, ws, nullptr),
                    Contains(fragment) && Contains("linear_weight_only"));
}

}  // namespace

// ---- [host] ---------------------------------------------------------------------------------------------------------

TEST_CASE("weight-only bits: magic constants decode to the values the kernels rely on", "[host]") {
  CHECK(decode<half>(0x6400u) == 1024.0);
  CHECK(decode<bfloat16>(0x4300u) == 128.0);
  CHECK(decode<half>(0xE480u) == -1152.0);
  CHECK(decode<half>(0xE408u) == -1032.0);
  CHECK(decode<bfloat16>(0xC308u) == -136.0);
  CHECK(decode<half>(0x3C00u) == 1.0);
  CHECK(decode<bfloat16>(0x3F80u) == 1.0);
  CHECK(shrink::bits_to_float(bits::kFloatMagicBits) == 8388608.0f);
}

TEST_CASE("weight-only bits: every int8 and int4 value converts exactly, at every position", "[host]") {
  for (int value = -128; value < 128; ++value)
    for (int byte = 0; byte < 4; ++byte) {
      const std::uint32_t filler = 0x5A3C7E01u;  // other bytes: anything
      const std::uint32_t word =
          (filler & ~(0xFFu << (8 * byte))) | (static_cast<std::uint32_t>(value & 0xFF) << (8 * byte));
      const std::uint32_t flipped = bits::flip_int8_signs(word);
      INFO("value " << value << " byte " << byte);
      REQUIRE(bits::int8_byte_as_float(flipped, byte) == static_cast<float>(value));
      const int pair = byte / 2, which = byte % 2;
      const std::uint32_t h = bits::int8_pair_as_biased_half(flipped, pair);
      REQUIRE((which == 0 ? low_of<half>(h) : high_of<half>(h)) - 1152.0 == value);
      const std::uint32_t b = bits::int8_pair_as_bfloat16(flipped, pair);
      REQUIRE((which == 0 ? low_of<bfloat16>(b) : high_of<bfloat16>(b)) == value);
    }
  for (int value = -8; value < 8; ++value)
    for (int e = 0; e < 8; ++e) {
      const std::uint32_t filler = 0x9E3779B9u;
      const std::uint32_t word = (filler & ~(0xFu << (4 * e))) | (static_cast<std::uint32_t>(value & 0xF) << (4 * e));
      const std::uint32_t flipped = bits::flip_int4_signs(word);
      INFO("value " << value << " element " << e);
      REQUIRE(bits::int4_element_as_float(flipped, e) == static_cast<float>(value));
      const int j = e % 4;  // the pair (j, j + 4) holds element e in its low (e < 4) or high half
      const std::uint32_t h = bits::int4_pair_as_biased(flipped, j, bits::kHalfMagicPair);
      REQUIRE((e < 4 ? low_of<half>(h) : high_of<half>(h)) - 1032.0 == value);
      const std::uint32_t b = bits::int4_pair_as_biased(flipped, j, bits::kBfloat16MagicPair);
      REQUIRE((e < 4 ? low_of<bfloat16>(b) : high_of<bfloat16>(b)) - 136.0 == value);
      // The element agrees with core/int4.hpp's reading of the packed row.
      std::uint8_t row[4];
      std::memcpy(row, &word, 4);
      REQUIRE(shrink::load_int4(row, e, true) == value);
    }
}

// Emulates one warp's four mma.sync m16n8k16 steps over a block of 64 k from the registers the tensor-core kernel
// builds, placing them with the PTX ISA's fragment layouts (.f16 / .bf16 A: a_i at row g + 8 ((i / 2) % 2), column
// 2t + i % 2 + 8 (i / 4); B: b_i at row 2t + i % 2 + 8 (i / 2), column g; register r holds elements 2r, 2r + 1, the
// lower in its low half), and checks C = Σ_k x[m, k] · q[n, k] exactly.
template <class T>
void check_fragment_order(bool int4, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q_dist(int4 ? -8 : -128, int4 ? 7 : 127);
  std::vector<T> x(16 * 64);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (T& v : x) v = T(normal(rng));
  std::vector<int> q(8 * 64);
  for (int& v : q) v = q_dist(rng);

  double c[16][8] = {};
  for (int s = 0; s < 4; ++s) {
    double a_logical[16][16], b_logical[16][8];
    for (auto& row : a_logical)
      for (double& v : row) v = std::numeric_limits<double>::quiet_NaN();
    for (auto& row : b_logical)
      for (double& v : row) v = std::numeric_limits<double>::quiet_NaN();
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      std::uint32_t upper[8], lower[8];  // rows g and g + 8, k = 16t .. 16t + 15 as loaded
      for (int r = 0; r < 8; ++r) {
        upper[r] =
            x[static_cast<std::size_t>(g * 64 + 16 * t + 2 * r)].to_bits() |
            (static_cast<std::uint32_t>(x[static_cast<std::size_t>(g * 64 + 16 * t + 2 * r + 1)].to_bits()) << 16);
        lower[r] = x[static_cast<std::size_t>((g + 8) * 64 + 16 * t + 2 * r)].to_bits() |
                   (static_cast<std::uint32_t>(x[static_cast<std::size_t>((g + 8) * 64 + 16 * t + 2 * r + 1)].to_bits())
                    << 16);
      }
      auto pair = [&](const std::uint32_t(&run)[8], int which) {
        return int4 ? bits::int4_activation_pair(run, s, which) : bits::int8_activation_pair(run, s, which);
      };
      const std::uint32_t a[4] = {pair(upper, 0), pair(lower, 0), pair(upper, 1), pair(lower, 1)};
      // The thread's 16 weights of row g as the kernel loads them: 16 bytes, or 8 bytes of nibbles.
      std::uint32_t raw[4] = {0, 0, 0, 0};
      for (int i = 0; i < 16; ++i) {
        const int v = q[static_cast<std::size_t>(g * 64 + 16 * t + i)];
        if (int4)
          raw[i / 8] |= static_cast<std::uint32_t>(v & 0xF) << (4 * (i % 8));
        else
          raw[i / 4] |= static_cast<std::uint32_t>(v & 0xFF) << (8 * (i % 4));
      }
      for (int i = 0; i < 8; ++i) {
        const std::uint32_t reg = a[i / 2];
        a_logical[g + 8 * ((i / 2) % 2)][2 * t + i % 2 + 8 * (i / 4)] = i % 2 == 0 ? low_of<T>(reg) : high_of<T>(reg);
      }
      for (int which = 0; which < 2; ++which) {
        const auto w = weight_pair<T>(int4, raw, s, which);
        b_logical[2 * t + 8 * which][g] = w.first;
        b_logical[2 * t + 1 + 8 * which][g] = w.second;
      }
    }
    for (int r = 0; r < 16; ++r)
      for (int col = 0; col < 8; ++col)
        for (int p = 0; p < 16; ++p) {
          REQUIRE_FALSE(std::isnan(a_logical[r][p]));
          REQUIRE_FALSE(std::isnan(b_logical[p][col]));
          c[r][col] += a_logical[r][p] * b_logical[p][col];
        }
  }
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 8; ++col) {
      double expected = 0;
      for (int j = 0; j < 64; ++j)
        expected += static_cast<double>(x[static_cast<std::size_t>(r * 64 + j)].to_float()) *
                    q[static_cast<std::size_t>(col * 64 + j)];
      INFO("row " << r << " column " << col);
      CHECK(c[r][col] == expected);
    }
}

TEST_CASE("weight-only bits: every zero-point offset and nibble give u − o exactly, in half, bfloat16 and float",
          "[host]") {
  CHECK(bits::half_minus_offset_pair(8) == bits::kHalfMinus1032Pair);
  CHECK(bits::bfloat16_minus_offset_pair(8) == bits::kBfloat16Minus136Pair);
  CHECK(bits::float_magic_offset(8) == bits::kFloatMagicInt4);
  for (std::uint32_t o = 0; o < 16; ++o) {
    const std::uint32_t h = bits::half_minus_offset_pair(o), b = bits::bfloat16_minus_offset_pair(o);
    REQUIRE(low_of<half>(h) == -(1024.0 + o));
    REQUIRE(high_of<half>(h) == -(1024.0 + o));
    REQUIRE(low_of<bfloat16>(b) == -(128.0 + o));
    REQUIRE(high_of<bfloat16>(b) == -(128.0 + o));
    for (std::uint32_t u = 0; u < 16; ++u)
      for (int e = 0; e < 8; ++e) {
        INFO("offset " << o << " nibble " << u << " element " << e);
        const std::uint32_t word = (0x9E3779B9u & ~(0xFu << (4 * e))) | (u << (4 * e));
        const double expected = static_cast<double>(u) - static_cast<double>(o);
        REQUIRE(bits::int4_element_minus_offset(word, e, bits::float_magic_offset(o)) == expected);
        // The kernels' 16-bit fma (biased · 1 − (magic + o)) is exact: the difference is a small integer.
        const int j = e % 4;
        const std::uint32_t hb = bits::int4_pair_as_biased(word, j, bits::kHalfMagicPair);
        REQUIRE((e < 4 ? low_of<half>(hb) : high_of<half>(hb)) + low_of<half>(h) == expected);
        const std::uint32_t bb = bits::int4_pair_as_biased(word, j, bits::kBfloat16MagicPair);
        REQUIRE((e < 4 ? low_of<bfloat16>(bb) : high_of<bfloat16>(bb)) + low_of<bfloat16>(b) == expected);
      }
  }
  // int4: o = 8 + zp on the flipped nibble gives q − zp; uint4: o = zp on the nibble as it is gives u − zp.
  for (int q = -8; q < 8; ++q)
    for (int zp = -8; zp < 8; ++zp) {
      const std::uint32_t flipped = bits::flip_int4_signs(static_cast<std::uint32_t>(q & 0xF));
      REQUIRE(
          bits::int4_element_minus_offset(flipped, 0, bits::float_magic_offset(static_cast<std::uint32_t>(8 + zp))) ==
          static_cast<float>(q - zp));
    }
  for (int u = 0; u < 16; ++u)
    for (int zp = 0; zp < 16; ++zp)
      REQUIRE(bits::int4_element_minus_offset(static_cast<std::uint32_t>(u), 0,
                                              bits::float_magic_offset(static_cast<std::uint32_t>(zp))) ==
              static_cast<float>(u - zp));
}

TEST_CASE("weight-only mma.sync fragments: every k meets its own activation once (emulated warp)", "[host]") {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) {
    check_fragment_order<half>(false, seed);
    check_fragment_order<half>(true, seed + 10);
    check_fragment_order<bfloat16>(false, seed + 20);
    check_fragment_order<bfloat16>(true, seed + 30);
  }
}

TEST_CASE("cuda can_implement_linear_weight_only: zero points of int4 and uint4 weights", "[host]") {
  const std::int64_t n = 48, k = 128, group = 64;
  WeightOnlyHostArgs h(4, n, k, group);
  const TensorView<const std::int32_t> zp(fake_address<const std::int32_t>(6), Shape{n, k / group}, Device::cuda(0));
  h.a.w.zero_points = zp;
  CHECK(shrink::cuda::can_implement_linear_weight_only(h.a));
  WeightOnlyHostArgs u(4, n, k, group);
  u.a.w = WeightOnlyWeight::uint4(u.a.w.data, u.a.w.scales, zp, group);
  CHECK(shrink::cuda::can_implement_linear_weight_only(u.a));
  CHECK(u.a.w.cols() == k);
  u.a.w.zero_points = TensorView<const std::int32_t>();  // symmetric uint4: zero point 8
  CHECK(shrink::cuda::can_implement_linear_weight_only(u.a));
  {
    WeightOnlyHostArgs b(4, n, k, group);
    b.a.w.zero_points = TensorView<const std::int32_t>(zp.data(), Shape{n, k / group + 1}, Device::cuda(0));
    expect_refused(b.a, "w.zero_points.shape", "one zero point per row and group");
  }
  {
    WeightOnlyHostArgs b(4, n, k, group);
    b.a.w.zero_points = TensorView<const std::int32_t>(zp.data(), Shape{n, k / group});  // host memory
    expect_refused(b.a, "w.zero_points", "a CUDA view");
  }
  {
    WeightOnlyHostArgs b(4, n, k, group);
    b.a.w.zero_points =
        TensorView<const std::int32_t>(fake_address<const std::int32_t>(6, 2), Shape{n, k / group}, Device::cuda(0));
    expect_refused(b.a, "w.zero_points", "aligned");
  }
  {
    WeightOnlyHostArgs b(4, n, k, group);
    b.a.w.zero_points = TensorView<const std::int32_t>(reinterpret_cast<const std::int32_t*>(b.a.out.data()),
                                                       Shape{n, k / group}, Device::cuda(0));
    expect_refused(b.a, "out", "w.zero_points");
  }
  {
    WeightOnlyHostArgs b(4, n, k, group);
    b.a.w = WeightOnlyWeight::int8(
        TensorView<const std::int8_t>(fake_address<const std::int8_t>(2), Shape{n, k}, Device::cuda(0)),
        TensorView<const float>(fake_address<const float>(3), Shape{n}, Device::cuda(0)));
    b.a.w.zero_points = TensorView<const std::int32_t>(zp.data(), Shape{n, 1}, Device::cuda(0));
    expect_refused(b.a, "w.zero_points", "int8 weights are symmetric");
  }
}

TEST_CASE("cuda can_implement_linear_weight_only accepts good arguments and names the bad one", "[host]") {
  CHECK(shrink::cuda::can_implement_linear_weight_only(WeightOnlyHostArgs().a));
  CHECK(shrink::cuda::can_implement_linear_weight_only(WeightOnlyHostArgs(64, 1, 128, 128).a));
  {
    WeightOnlyHostArgs h;
    h.a.epilogue.bias = TensorView<const float>();  // no bias
    CHECK(shrink::cuda::can_implement_linear_weight_only(h.a));
  }
  {
    WeightOnlyHostArgs h(3, 5, 48);
    h.a.w = WeightOnlyWeight::int8(
        TensorView<const std::int8_t>(fake_address<const std::int8_t>(2), Shape{5, 48}, Device::cuda(0)),
        TensorView<const float>(fake_address<const float>(3), Shape{5}, Device::cuda(0)));
    CHECK(shrink::cuda::can_implement_linear_weight_only(h.a));
  }

  SECTION("x") {
    WeightOnlyHostArgs h;
    h.a.x = TensorView<const half>(fake_address<const half>(1), Shape{4, 128});
    expect_refused(h.a, "x", "a view of host memory");
    WeightOnlyHostArgs big(65);
    expect_refused(big.a, "x.shape", "use the dense or W8A8 path");
    h = WeightOnlyHostArgs();
    h.a.x = TensorView<const half>(fake_address<const half>(1, 2), Shape{4, 128}, Device::cuda(0));
    expect_refused(h.a, "x", "alignment to 16 bytes");
    h.a.x = TensorView<const half>(fake_address<const half>(1), Shape{4, 128}, Strides{1, 4}, Device::cuda(0));
    expect_refused(h.a, "x.strides", "contiguous");
    h.a.x = TensorView<const half>(fake_address<const half>(1), Shape{0, 128}, Device::cuda(0));
    expect_refused(h.a, "x.shape", "at least one element");
    h.a.x = TensorView<const half>(nullptr, Shape{4, 128}, Device::cuda(0));
    expect_refused(h.a, "x", "a null pointer");
  }
  SECTION("the weight") {
    WeightOnlyHostArgs h;
    h.a.w.dtype = QuantDtype::uint8;
    expect_refused(h.a, "w.dtype", "int8 (per output row) or int4 / uint4");
    h = WeightOnlyHostArgs();
    h.a.w.group_size = 32;
    expect_refused(h.a, "w.group_size", "64 or 128");
    WeightOnlyHostArgs odd(4, 48, 192, 128);  // K = 192 is not a multiple of 128
    expect_refused(odd.a, "x.shape", "K a multiple of w.group_size = 128");
    h = WeightOnlyHostArgs();
    h.a.w.data = TensorView<const std::uint8_t>(fake_address<const std::uint8_t>(2), Shape{48, 60}, Device::cuda(0));
    expect_refused(h.a, "w.data.shape", "two int4 a byte");
    h = WeightOnlyHostArgs();
    h.a.w.scales = TensorView<const float>(fake_address<const float>(3), Shape{48, 3}, Device::cuda(0));
    expect_refused(h.a, "w.scales.shape", "[48, 2]");
    h = WeightOnlyHostArgs();
    h.a.w.data = TensorView<const std::uint8_t>(fake_address<const std::uint8_t>(2, 8), Shape{48, 64}, Device::cuda(0));
    expect_refused(h.a, "w.data", "alignment to 16 bytes");
    h = WeightOnlyHostArgs();
    h.a.w.scales = TensorView<const float>(fake_address<const float>(3), Shape{48, 2});
    expect_refused(h.a, "w.scales", "a view of host memory");
    WeightOnlyHostArgs i8(4, 48, 40);
    i8.a.w = WeightOnlyWeight::int8(
        TensorView<const std::int8_t>(fake_address<const std::int8_t>(2), Shape{48, 40}, Device::cuda(0)),
        TensorView<const float>(fake_address<const float>(3), Shape{48}, Device::cuda(0)));
    expect_refused(i8.a, "x.shape", "K a multiple of 16");
    WeightOnlyHostArgs i8k(4, 48, 64);
    i8k.a.w = WeightOnlyWeight::int8(
        TensorView<const std::int8_t>(fake_address<const std::int8_t>(2), Shape{48, 48}, Device::cuda(0)),
        TensorView<const float>(fake_address<const float>(3), Shape{48}, Device::cuda(0)));
    expect_refused(i8k.a, "w.data.shape", "K equal to x's");
    i8k.a.w.data = TensorView<const std::uint8_t>(fake_address<const std::uint8_t>(2), Shape{48, 64}, Device::cuda(0));
    i8k.a.w.scales = TensorView<const float>(fake_address<const float>(3), Shape{47}, Device::cuda(0));
    expect_refused(i8k.a, "w.scales.shape", "one scale per row");
    i8k.a.w.scales = TensorView<const float>(fake_address<const float>(3), Shape{48}, Device::cuda(0));
    i8k.a.w.group_size = 64;
    expect_refused(i8k.a, "w.group_size", "0 for int8");
  }
  SECTION("out, bias, activation, path, split_k") {
    WeightOnlyHostArgs h;
    h.a.out = TensorView<half>(fake_address<half>(5), Shape{4, 47}, Device::cuda(0));
    expect_refused(h.a, "out.shape", "[4, 48]");
    h.a.out = TensorView<half>(fake_address<half>(5), Shape{4, 48});
    expect_refused(h.a, "out", "a view of host memory");
    h.a.out = TensorView<half>(fake_address<half>(5, 1), Shape{4, 48}, Device::cuda(0));
    expect_refused(h.a, "out", "alignment to 2 bytes");
    h.a.out = TensorView<half>(fake_address<half>(5), Shape{4, 48}, Device::cuda(1));
    expect_refused(h.a, "out", "the device of x");
    h = WeightOnlyHostArgs();
    h.a.epilogue.bias = TensorView<const float>(fake_address<const float>(4), Shape{47}, Device::cuda(0));
    expect_refused(h.a, "epilogue.bias.shape", "[48]");
    h.a.epilogue.bias = TensorView<const float>(fake_address<const float>(4), Shape{48});
    expect_refused(h.a, "epilogue.bias", "a view of host memory");
    h = WeightOnlyHostArgs();
    h.a.epilogue.activation = static_cast<Activation>(9);
    expect_refused(h.a, "epilogue.activation", "none, relu, gelu or silu");
    h = WeightOnlyHostArgs();
    h.a.path = static_cast<WeightOnlyPath>(7);
    expect_refused(h.a, "path", "automatic, cuda_core or tensor_core");
    h = WeightOnlyHostArgs();
    h.a.split_k = -1;
    expect_refused(h.a, "split_k", "[1, 1024]");
    h.a.split_k = 1025;
    expect_refused(h.a, "split_k", "[1, 1024]");
  }
  SECTION("overlaps") {
    WeightOnlyHostArgs h;
    h.a.out = TensorView<half>(fake_address<half>(1, 64), Shape{4, 48}, Device::cuda(0));
    expect_refused(h.a, "out", "memory overlapping x");
    h.a.out = TensorView<half>(fake_address<half>(2, 16), Shape{4, 48}, Device::cuda(0));
    expect_refused(h.a, "out", "memory overlapping w.data");
    h.a.out = TensorView<half>(fake_address<half>(3), Shape{4, 48}, Device::cuda(0));
    expect_refused(h.a, "out", "memory overlapping w.scales");
    h.a.out = TensorView<half>(fake_address<half>(4, 4), Shape{4, 48}, Device::cuda(0));
    expect_refused(h.a, "out", "memory overlapping epilogue.bias");
  }
}

TEST_CASE("cuda weight-only run refuses a plan that make_plan did not make, before any CUDA call", "[host]") {
  const shrink::cuda::LinearWeightOnlyPlan<half> plan;
  CHECK(plan.empty());
  CHECK_THROWS_WITH(shrink::cuda::run(plan, TensorView<const half>(), TensorView<half>(), {nullptr, 0}, nullptr),
                    Contains("shrink::cuda::run(LinearWeightOnlyPlan): plan = a default-constructed plan: expected a "
                             "plan made by make_plan(args)"));
}

TEST_CASE("cuda linear_weight_only checks the workspace before any CUDA call; the path rule", "[host]") {
  WeightOnlyHostArgs h;
  using shrink::cuda::linear_weight_only;
  CHECK_THROWS_WITH(linear_weight_only(h.a, shrink::cuda::Workspace{nullptr, 1 << 20}, nullptr),
                    Contains("workspace.data"));
  CHECK_THROWS_WITH(
      linear_weight_only(
          h.a, shrink::cuda::Workspace{static_cast<char*>(shrink::test::fake_device_pointer()) + 8, 1 << 20}, nullptr),
      Contains("workspace.data") && Contains("16 bytes"));
  CHECK_THROWS_WITH(linear_weight_only(h.a, shrink::cuda::Workspace{shrink::test::fake_device_pointer(), 8}, nullptr),
                    Contains("workspace.bytes"));
  // Forced slices need no device to size the workspace: K = 128 in 2 slices of 64, 4 x 48 partials each.
  h.a.split_k = 2;
  CHECK_THROWS_WITH(
      linear_weight_only(h.a, shrink::cuda::Workspace{shrink::test::fake_device_pointer(), 1000}, nullptr),
      Contains("linear_weight_only_workspace_bytes(args) = " + std::to_string(16 + 2 * 4 * 48 * 4)));
  CHECK(shrink::cuda::linear_weight_only_workspace_bytes(h.a) == 16 + 2 * 4 * 48 * 4);
  h.a.split_k = 1;
  CHECK(shrink::cuda::linear_weight_only_workspace_bytes(h.a) == 16);
  h.a.split_k = 5;  // at most 2 blocks of 64 k: 2 slices
  CHECK(shrink::cuda::linear_weight_only_workspace_bytes(h.a) == 16 + 2 * 4 * 48 * 4);

  using shrink::cuda::linear_weight_only_path;
  CHECK(linear_weight_only_path(WeightOnlyHostArgs(2).a) == WeightOnlyPath::cuda_core);
  CHECK(linear_weight_only_path(WeightOnlyHostArgs(3).a) == WeightOnlyPath::tensor_core);
  WeightOnlyHostArgs forced(64);
  forced.a.path = WeightOnlyPath::cuda_core;
  CHECK(linear_weight_only_path(forced.a) == WeightOnlyPath::cuda_core);
  WeightOnlyHostArgs i8(4, 48, 64);
  i8.a.w = WeightOnlyWeight::int8(
      TensorView<const std::int8_t>(fake_address<const std::int8_t>(2), Shape{48, 64}, Device::cuda(0)),
      TensorView<const float>(fake_address<const float>(3), Shape{48}, Device::cuda(0)));
  CHECK(linear_weight_only_path(i8.a) == WeightOnlyPath::cuda_core);
  WeightOnlyHostArgs i8_5(5, 48, 64);
  i8_5.a.w = i8.a.w;
  CHECK(linear_weight_only_path(i8_5.a) == WeightOnlyPath::tensor_core);
  WeightOnlyHostArgs bad(65);
  CHECK_THROWS_WITH(linear_weight_only_path(bad.a), Contains("dense or W8A8"));
}

// ---- [gpu] ----------------------------------------------------------------------------------------------------------

TEST_CASE("cuda linear_weight_only matches the CPU twin and an FP64 reference: half activations", "[gpu]") {
  check_all_problems<half>(100);
}

TEST_CASE("cuda linear_weight_only matches the CPU twin and an FP64 reference: bfloat16 activations", "[gpu]") {
  check_all_problems<bfloat16>(500);
}

TEST_CASE("cuda linear_weight_only with zero points (affine int4 g64, uint4 g128) matches the CPU twin: half",
          "[gpu]") {
  check_affine_problems<half>(1300);
}

TEST_CASE("cuda linear_weight_only with zero points (affine int4 g64, uint4 g128) matches the CPU twin: bfloat16",
          "[gpu]") {
  check_affine_problems<bfloat16>(1700);
}

TEST_CASE("cuda linear_weight_only: K slices give the same bits on every run, and agree with one slice", "[gpu]") {
  for (const WeightCase wc : {WeightCase::int8, WeightCase::int4_g128, WeightCase::int4_affine_g64})
    for (const WeightOnlyPath path : {WeightOnlyPath::cuda_core, WeightOnlyPath::tensor_core}) {
      const std::int64_t m = 7, n = 300, k = 2048;
      std::mt19937 rng(900);
      const HostWeight w = make_weight(wc, n, k, rng);
      const std::vector<half> x = random_activations<half>(m * k, rng);
      WeightOnlyDeviceProblem d(x.size() * 2, w.q.data.size(), w.q.qparams.scale.size() * 4, 4,
                                static_cast<std::size_t>(m * n + kGuard) * 2, zero_point_bytes(wc, w));
      d.x.upload(x.data(), d.x.bytes());
      d.upload_weight(w);
      LinearWeightOnlyArgs<half> args = d.args<half>(wc, m, n, k);
      args.path = path;
      args.epilogue.activation = Activation::gelu;
      std::vector<std::vector<half>> by_slices;
      for (const int slices : {1, 3, 7, 32}) {
        INFO(case_name(wc) << " path " << shrink::cuda::to_string(path) << " split_k " << slices);
        args.split_k = slices;
        const Run<half> first = run_on_device(d, args, m, n), second = run_on_device(d, args, m, n);
        CHECK(first.guard_intact);
        CHECK(std::memcmp(first.out.data(), second.out.data(), first.out.size() * 2) == 0);
        by_slices.push_back(first.out);
      }
      for (std::size_t s = 1; s < by_slices.size(); ++s) {
        int far = 0;
        for (std::size_t i = 0; i < by_slices[0].size(); ++i) {
          const double a = by_slices[0][i].to_float(), b = by_slices[s][i].to_float();
          far += !(std::fabs(a - b) <= 2e-3 * std::max(1.0, std::fabs(a)) + ulp_of<half>(std::fabs(a)));
        }
        CHECK(far == 0);
      }
    }
}

TEST_CASE("cuda weight-only plan: one make_plan, run on new activations, the bits of the one-call form", "[gpu]") {
  for (const WeightCase wc : {WeightCase::int8, WeightCase::int4_affine_g64})
    for (const std::int64_t m : {std::int64_t{1}, std::int64_t{16}}) {
      INFO(case_name(wc) << " M " << m);
      const std::int64_t n = 300, k = 2048;
      std::mt19937 rng(950 + static_cast<std::uint32_t>(m));
      const HostWeight w = make_weight(wc, n, k, rng);
      const std::vector<half> x1 = random_activations<half>(m * k, rng), x2 = random_activations<half>(m * k, rng);
      WeightOnlyDeviceProblem d(x1.size() * 2, w.q.data.size(), w.q.qparams.scale.size() * 4, 4,
                                static_cast<std::size_t>(m * n + kGuard) * 2, zero_point_bytes(wc, w));
      d.upload_weight(w);
      LinearWeightOnlyArgs<half> args = d.args<half>(wc, m, n, k);
      args.epilogue.activation = Activation::silu;
      const shrink::cuda::LinearWeightOnlyPlan<half> plan = shrink::cuda::make_plan(args);
      CHECK(plan.path() == shrink::cuda::linear_weight_only_path(args));
      CHECK(plan.workspace_bytes() == shrink::cuda::linear_weight_only_workspace_bytes(args));
      DeviceBuffer workspace(plan.workspace_bytes());
      DeviceBuffer x_other(x2.size() * 2), out_other(static_cast<std::size_t>(m * n) * 2);
      x_other.upload(x2.data(), x_other.bytes());
      for (const std::vector<half>* x : {&x1, &x2}) {
        d.x.upload(x->data(), d.x.bytes());
        const Run<half> one_call = run_on_device(d, args, m, n);
        // The plan on the other buffers: the same bits.
        x_other.upload(x->data(), x_other.bytes());
        shrink::cuda::run(plan, TensorView<const half>(x_other.as<half>(), Shape{m, k}, Device::cuda(0)),
                          TensorView<half>(out_other.as<half>(), Shape{m, n}, Device::cuda(0)), workspace.workspace(),
                          nullptr, shrink::cuda::Synchronize::yes);
        const std::vector<half> planned = out_other.download<half>(static_cast<std::size_t>(m * n));
        CHECK(std::memcmp(planned.data(), one_call.out.data(), planned.size() * 2) == 0);
      }
      const TensorView<half> out_view(out_other.as<half>(), Shape{m, n}, Device::cuda(0));
      CHECK_THROWS_WITH(
          shrink::cuda::run(plan, TensorView<const half>(x_other.as<half>(), Shape{m, k - 64}, Device::cuda(0)),
                            out_view, workspace.workspace(), nullptr),
          Contains("shrink::cuda::run(LinearWeightOnlyPlan): x.shape") && Contains("(the planned shape)"));
      CHECK_THROWS_WITH(shrink::cuda::run(plan, args.x, TensorView<half>(d.x.as<half>(), Shape{m, n}, Device::cuda(0)),
                                          workspace.workspace(), nullptr),
                        Contains("out = memory overlapping x"));
      CHECK_THROWS_WITH(shrink::cuda::run(plan, args.x, out_view, {workspace.as<void>(), 4}, nullptr),
                        Contains("expected at least plan.workspace_bytes()"));
    }
}

TEST_CASE("cuda linear_weight_only reports bad scales, zero points and biases when asked to synchronise", "[gpu]") {
  for (const WeightCase wc :
       {WeightCase::int8, WeightCase::int4_g64, WeightCase::int4_affine_g64, WeightCase::uint4_affine_g128})
    for (const WeightOnlyPath path : {WeightOnlyPath::cuda_core, WeightOnlyPath::tensor_core})
      for (const int slices : {1, 2}) {
        INFO(case_name(wc) << " path " << shrink::cuda::to_string(path) << " split_k " << slices);
        const std::int64_t m = 3, n = 40, k = 256;
        std::mt19937 rng(77);
        HostWeight w = make_weight(wc, n, k, rng);
        const std::vector<half> x = random_activations<half>(m * k, rng);
        std::vector<float> bias(static_cast<std::size_t>(n), 0.5f);
        WeightOnlyDeviceProblem d(x.size() * 2, w.q.data.size(), w.q.qparams.scale.size() * 4, bias.size() * 4,
                                  static_cast<std::size_t>(m * n + kGuard) * 2, zero_point_bytes(wc, w));
        d.x.upload(x.data(), d.x.bytes());
        d.upload_weight(w);
        LinearWeightOnlyArgs<half> args = d.args<half>(wc, m, n, k);
        args.epilogue.bias = TensorView<const float>(d.bias.as<float>(), Shape{n}, Device::cuda(0));
        args.path = path;
        args.split_k = slices;
        DeviceBuffer workspace(shrink::cuda::linear_weight_only_workspace_bytes(args));

        std::vector<float> scales = w.q.qparams.scale;
        scales[scales.size() / 2] = 0.0f;
        d.scales.upload(scales.data(), d.scales.bytes());
        d.bias.upload(bias.data(), d.bias.bytes());
        CHECK_THROWS_WITH(
            shrink::cuda::linear_weight_only(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes),
            Contains("scale is not finite and > 0"));

        d.scales.upload(w.q.qparams.scale.data(), d.scales.bytes());
        if (is_affine(wc)) {  // one past the top of the dtype's range: 8 for int4, 16 for uint4
          std::vector<std::int32_t> zero_points = w.q.qparams.zero_point;
          zero_points[zero_points.size() / 3] = wc == WeightCase::uint4_affine_g128 ? 16 : 8;
          d.zero_points.upload(zero_points.data(), d.zero_points.bytes());
          CHECK_THROWS_WITH(
              shrink::cuda::linear_weight_only(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes),
              Contains("zero point lies outside"));
          d.zero_points.upload(w.q.qparams.zero_point.data(), d.zero_points.bytes());
        }
        bias[7] = std::numeric_limits<float>::quiet_NaN();
        d.bias.upload(bias.data(), d.bias.bytes());
        CHECK_THROWS_WITH(
            shrink::cuda::linear_weight_only(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes),
            Contains("NaN or inf"));

        bias[7] = 0.5f;  // clean inputs: the status word is cleared by every call
        d.bias.upload(bias.data(), d.bias.bytes());
        CHECK_NOTHROW(
            shrink::cuda::linear_weight_only(args, workspace.workspace(), nullptr, shrink::cuda::Synchronize::yes));
      }
}

// benchmarks/gpu/device-check.sh runs the "[sanitize]" cases under compute-sanitizer memcheck and racecheck: each
// weight format through every path (check_problem), K slices included, on a few CTAs.
TEST_CASE(
    "cuda linear_weight_only sanitizer subset: int8, int4 g64 and g128, affine int4 and uint4 (K slices), every "
    "path",
    "[gpu][sanitize]") {
  check_problem<half>(WeightCase::int8, 5, {33, 272}, 41);
  check_problem<bfloat16>(WeightCase::int4_g64, 16, {33, 256}, 42);
  check_problem<half>(WeightCase::int4_g128, 3, {257, 1152}, 43);
  check_problem<half>(WeightCase::int4_affine_g64, 16, {33, 256}, 44);
  check_problem<bfloat16>(WeightCase::uint4_affine_g128, 2, {257, 1152}, 45);
}
