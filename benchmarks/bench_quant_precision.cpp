// The precision comparison: for each storage precision of a weight and an activation tensor, the bytes it
// takes, how fast it encodes and decodes (single thread), and the error it leaves (MSE, max-abs, SQNR, cosine).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "shrink/metrics/error.hpp"
#include "shrink/metrics/size.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;

constexpr std::int64_t kRows = 4096, kCols = 4096;  // a 4096 x 4096 Linear weight, 16M values
const Shape kShape{kRows, kCols};

// Weights: normal(0, 0.02) with one value in a thousand ten times larger (the outliers real layers have).
// Activations: heavy-tailed (Laplace) with a few hot input channels, as in LLM activations.
const std::vector<float>& tensor(int which) {
  static const std::vector<float> data[2] = {
      [] {
        std::vector<float> v(static_cast<std::size_t>(kRows * kCols));
        std::mt19937 rng(1);
        std::normal_distribution<float> normal(0.0f, 0.02f);
        std::uniform_real_distribution<float> u(0.0f, 1.0f);
        for (float& x : v) x = normal(rng) * (u(rng) < 0.001f ? 10.0f : 1.0f);
        return v;
      }(),
      [] {
        std::vector<float> v(static_cast<std::size_t>(kRows * kCols));
        std::mt19937 rng(2);
        std::exponential_distribution<float> e(1.0f);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = (e(rng) - e(rng)) * ((i % kCols) % 512 == 7 ? 20.0f : 1.0f);
        return v;
      }()};
  return data[which];
}
const char* kTensorNames[2] = {"weight", "activation"};

TensorView<const float> view_of(int which) { return TensorView<const float>(tensor(which).data(), kShape); }

// One storage precision: encode writes its private buffers, decode writes floats back.
struct Precision {
  std::string name;
  std::int64_t bytes = 0;  // storage of the 16M-value tensor, scales and zero points included
  std::function<void()> encode;
  std::function<void(float*)> decode;
};

Precision float32(int which) {
  auto copy = std::make_shared<std::vector<float>>(tensor(which).size());
  return {"fp32", kRows * kCols * 4,
          [which, copy] { std::memcpy(copy->data(), tensor(which).data(), copy->size() * sizeof(float)); },
          [copy](float* out) { std::memcpy(out, copy->data(), copy->size() * sizeof(float)); }};
}

template <class Half>
Precision sixteen_bit(int which, const char* name) {
  auto store = std::make_shared<std::vector<Half>>(tensor(which).size());
  return {name, kRows * kCols * 2,
          [which, store] {
            if constexpr (std::is_same<Half, half>::value)
              cast_to_half(view_of(which), TensorView<half>(store->data(), kShape));
            else
              cast_to_bfloat16(view_of(which), TensorView<bfloat16>(store->data(), kShape));
          },
          [store](float* out) { cast_to_float(TensorView<const Half>(store->data(), kShape), TensorView<float>(out, kShape)); }};
}

Precision fp8(int which, Fp8Format format, Fp8ScaleGranularity granularity, const char* name) {
  const Fp8Tensor calibrated = quantize_fp8(view_of(which), format, granularity, 0);  // scales from amax
  auto codes = std::make_shared<std::vector<std::uint8_t>>(tensor(which).size());
  auto scales = std::make_shared<std::vector<float>>(calibrated.scale);
  Fp8QuantizeOptions options;
  options.scales = calibrated.scale;
  return {name, kRows * kCols + static_cast<std::int64_t>(scales->size()) * 4,
          [=] {
            quantize_fp8_into(view_of(which), format, granularity, 0, options, TensorView<std::uint8_t>(codes->data(), kShape),
                              TensorView<float>(scales->data(), static_cast<std::int64_t>(scales->size())));
          },
          [=](float* out) {
            dequantize_fp8_into(TensorView<const std::uint8_t>(codes->data(), kShape),
                                TensorView<const float>(scales->data(), static_cast<std::int64_t>(scales->size())), format,
                                granularity, 0, TensorView<float>(out, kShape));
          }};
}

Precision integer(int which, const QuantScheme& scheme, const char* name) {
  const QParams qparams = minmax_qparams(view_of(which), scheme);
  const Shape stored = is_packed(scheme.dtype) ? Shape{kRows, int4_row_bytes(kCols)} : kShape;
  auto data = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(stored.product()));
  return {name, metrics::quantized_size(kShape, scheme).total_bytes(),
          [=] {
            if (scheme.dtype == QuantDtype::int8)
              quantize_into(view_of(which), scheme, qparams, TensorView<std::int8_t>(reinterpret_cast<std::int8_t*>(data->data()), stored));
            else
              quantize_into(view_of(which), scheme, qparams, TensorView<std::uint8_t>(data->data(), stored));
          },
          [=](float* out) {
            if (scheme.dtype == QuantDtype::int8)
              dequantize_into(TensorView<const std::int8_t>(reinterpret_cast<const std::int8_t*>(data->data()), stored), scheme,
                              qparams, TensorView<float>(out, kShape));
            else
              dequantize_into(TensorView<const std::uint8_t>(data->data(), stored), scheme, qparams, TensorView<float>(out, kShape));
          }};
}

std::vector<Precision> precisions(int which) {
  std::vector<Precision> p;
  p.push_back(float32(which));
  p.push_back(sixteen_bit<half>(which, "fp16"));
  p.push_back(sixteen_bit<bfloat16>(which, "bf16"));
  p.push_back(fp8(which, Fp8Format::e4m3, Fp8ScaleGranularity::per_tensor, "fp8-e4m3/tensor"));
  p.push_back(fp8(which, Fp8Format::e4m3, Fp8ScaleGranularity::per_channel, "fp8-e4m3/channel"));
  p.push_back(fp8(which, Fp8Format::e5m2, Fp8ScaleGranularity::per_tensor, "fp8-e5m2/tensor"));
  p.push_back(integer(which, QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric), "int8-sym/tensor"));
  p.push_back(integer(which, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0), "int8-sym/channel"));
  p.push_back(integer(which, QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine), "uint8-affine/tensor"));
  p.push_back(integer(which, QuantScheme::per_channel(QuantDtype::int4, Symmetry::symmetric, 0), "int4-sym/channel"));
  p.push_back(integer(which, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 128), "int4-affine/group128"));
  p.push_back(integer(which, QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 32), "int4-affine/group32"));
  return p;
}

std::vector<Precision>& weight_precisions() {
  static std::vector<Precision> p = precisions(0);
  return p;
}

// Encode: read 4 bytes a value, write the storage. Decode: the reverse.
void BM_encode(benchmark::State& state, std::size_t index) {
  Precision& p = weight_precisions()[index];
  for (auto _ : state) {
    p.encode();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * (kRows * kCols * 4 + p.bytes));
}

void BM_decode(benchmark::State& state, std::size_t index) {
  Precision& p = weight_precisions()[index];
  p.encode();
  std::vector<float> out(static_cast<std::size_t>(kRows * kCols));
  for (auto _ : state) {
    p.decode(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * (kRows * kCols * 4 + p.bytes));
}

const bool registered = [] {
  for (std::size_t i = 0; i < weight_precisions().size(); ++i) {
    const std::string& name = weight_precisions()[i].name;
    benchmark::RegisterBenchmark(("encode/" + name).c_str(), BM_encode, i)->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("decode/" + name).c_str(), BM_decode, i)->Unit(benchmark::kMillisecond);
  }
  return true;
}();

// Size and error of every precision on both tensors, then speed relative to fp32 (memcpy) from the run.
void print_precision_table(const shrink::bench::RecordingReporter& reporter) {
  std::printf("\nPrecision comparison: %lld x %lld tensors, single thread, speed of the fastest repetition;\n"
              "error of decode(encode(x)) against x.\n",
              static_cast<long long>(kRows), static_cast<long long>(kCols));
  std::printf("%-22s %6s %6s %9s %9s | %-10s %10s %10s %8s %10s\n", "precision", "bits", "x fp32", "enc GB/s",
              "dec GB/s", "tensor", "MSE", "max-abs", "SQNR dB", "cosine");
  const auto& results = reporter.results();
  for (int which = 0; which < 2; ++which) {
    std::vector<Precision> list = which == 0 ? weight_precisions() : precisions(1);
    std::vector<float> back(static_cast<std::size_t>(kRows * kCols));
    for (Precision& p : list) {
      p.encode();
      p.decode(back.data());
      const metrics::ErrorStats e = metrics::error_stats(view_of(which), TensorView<const float>(back.data(), kShape));
      auto speed = [&](const std::string& kind) {
        auto it = results.find(kind + "/" + p.name);
        return it == results.end() ? 0.0 : it->second.bytes_per_second / 1e9;
      };
      std::printf("%-22s %6.2f %6.2f %9.1f %9.1f | %-10s %10.3e %10.3e %8.1f %10.7f\n", p.name.c_str(),
                  8.0 * static_cast<double>(p.bytes) / static_cast<double>(kRows * kCols),
                  static_cast<double>(kRows * kCols * 4) / static_cast<double>(p.bytes), speed("encode"), speed("decode"),
                  kTensorNames[which], e.mse, e.max_abs, e.sqnr_db, e.cosine);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  shrink::bench::RecordingReporter reporter;
  if (!shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv), reporter)) return 1;
  print_precision_table(reporter);
  return 0;
}
