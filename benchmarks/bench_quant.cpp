// Quantization throughput on 16M floats, single thread, as ratios to memcpy and to a min/max pass.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/observers/entropy.hpp"
#include "shrink/quant/observers/histogram.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/observers/mse.hpp"
#include "shrink/quant/observers/percentile.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/baselines.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 4096, kCols = 4096;  // 16M floats, a 4096 x 4096 weight
constexpr std::int64_t kCount = kRows * kCols;

const std::vector<float>& weights() {
  static const std::vector<float> w = [] {
    std::vector<float> v(static_cast<std::size_t>(kCount));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return w;
}

TensorView<const float> weight_view() { return TensorView<const float>(weights().data(), Shape{kRows, kCols}); }

// Baseline: memcpy of the 64 MB tensor.
void BM_memcpy(benchmark::State& state) { shrink::bench::run_memcpy_baseline(state, weights()); }
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);

QuantScheme scheme_for(int granularity) {
  return granularity == 0 ? QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric)
                          : QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0);
}

// quantize: checks, one fused pass (quantize + finite check) into a new QuantizedTensor; bytes = 4 read + 1
// written per element.
void BM_quantize_int8(benchmark::State& state) {
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)));
  const QParams qp = minmax_qparams(weight_view(), scheme);
  for (auto _ : state) benchmark::DoNotOptimize(quantize(weight_view(), scheme, qp));
  shrink::bench::set_bytes(state, kCount * 5);
}
BENCHMARK(BM_quantize_int8)->Arg(0)->Arg(1)->ArgName("per_channel")->Unit(benchmark::kMillisecond);

// quantize_into the caller's buffer: the fused pass writes a staging copy that is copied out only once all of x
// proved finite, so a NaN leaves `out` untouched; the bytes counted are the same as for quantize.
void BM_quantize_into_int8(benchmark::State& state) {
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)));
  const QParams qp = minmax_qparams(weight_view(), scheme);
  std::vector<std::int8_t> out(static_cast<std::size_t>(kCount));
  for (auto _ : state) {
    quantize_into(weight_view(), scheme, qp, TensorView<std::int8_t>(out.data(), Shape{kRows, kCols}));
    benchmark::ClobberMemory();
  }
  shrink::bench::set_bytes(state, kCount * 5);
}
BENCHMARK(BM_quantize_into_int8)->Arg(0)->Arg(1)->ArgName("per_channel")->Unit(benchmark::kMillisecond);

// dequantize_into: bytes = 1 read + 4 written per element.
void BM_dequantize_int8(benchmark::State& state) {
  const QuantScheme scheme = scheme_for(static_cast<int>(state.range(0)));
  const QParams qp = minmax_qparams(weight_view(), scheme);
  std::vector<std::int8_t> q(static_cast<std::size_t>(kCount));
  quantize_into(weight_view(), scheme, qp, TensorView<std::int8_t>(q.data(), Shape{kRows, kCols}));
  std::vector<float> out(static_cast<std::size_t>(kCount));
  for (auto _ : state) {
    dequantize_into(TensorView<const std::int8_t>(q.data(), Shape{kRows, kCols}), scheme, qp,
                    TensorView<float>(out.data(), Shape{kRows, kCols}));
    benchmark::ClobberMemory();
  }
  shrink::bench::set_bytes(state, kCount * 5);
}
BENCHMARK(BM_dequantize_int8)->Arg(0)->Arg(1)->ArgName("per_channel")->Unit(benchmark::kMillisecond);

// Observers: bytes = 4 read per element.
template <class Observer, class... Args>
void observe_all(benchmark::State& state, const QuantScheme& scheme, Args... args) {
  for (auto _ : state) {
    Observer observer(scheme, args...);
    observer.observe(weight_view());
    benchmark::DoNotOptimize(observer.qparams());
  }
  shrink::bench::set_bytes(state, kCount * 4);
}

void BM_observe_minmax(benchmark::State& state) {
  observe_all<MinMaxObserver>(state, scheme_for(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_observe_minmax)->Arg(0)->Arg(1)->ArgName("per_channel")->Unit(benchmark::kMillisecond);

void BM_observe_moving_average(benchmark::State& state) {
  observe_all<MovingAverageMinMaxObserver>(state, scheme_for(static_cast<int>(state.range(0))), 0.01f);
}
BENCHMARK(BM_observe_moving_average)->Arg(0)->Arg(1)->ArgName("per_channel")->Unit(benchmark::kMillisecond);

void BM_observe_histogram(benchmark::State& state) {
  observe_all<HistogramObserver>(state, scheme_for(0));
}
BENCHMARK(BM_observe_histogram)->Unit(benchmark::kMillisecond);

void BM_observe_entropy(benchmark::State& state) { observe_all<EntropyObserver>(state, scheme_for(0)); }
BENCHMARK(BM_observe_entropy)->Unit(benchmark::kMillisecond);

void BM_observe_percentile(benchmark::State& state) { observe_all<PercentileObserver>(state, scheme_for(0)); }
BENCHMARK(BM_observe_percentile)->Unit(benchmark::kMillisecond);

void BM_observe_mse(benchmark::State& state) { observe_all<MseObserver>(state, scheme_for(0)); }
BENCHMARK(BM_observe_mse)->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (const char* g : {"per_channel:0", "per_channel:1"}) {
    t.push_back({std::string("BM_quantize_int8/") + g, "BM_memcpy", M::bandwidth, 0.6,
                 "quantize >= 0.6 of memcpy, bytes read + written"});
    t.push_back({std::string("BM_quantize_into_int8/") + g, "BM_memcpy", M::bandwidth, 0.0,
                 "quantize_into: out stays untouched on error, so it stages the result and copies it"});
    t.push_back({std::string("BM_dequantize_int8/") + g, "BM_memcpy", M::bandwidth, 0.6,
                 "dequantize >= 0.6 of memcpy, bytes read + written"});
    t.push_back({std::string("BM_observe_minmax/") + g, "BM_memcpy", M::bandwidth, 0.7,
                 "MinMax >= 0.7 of memcpy's read bandwidth", 0.5});
    t.push_back({std::string("BM_observe_minmax/") + g, "BM_memcpy", M::bandwidth, 0.0,
                 "MinMax read bandwidth / memcpy read + write bandwidth (stricter)"});
  }
  for (const char* name : {"histogram", "entropy", "percentile", "mse"})
    t.push_back({std::string("BM_observe_") + name, "BM_observe_minmax/per_channel:0", M::time,
                 std::string(name) == "histogram" || std::string(name) == "entropy" ? 4.0 : 0.0,
                 std::string(name) + " observe + qparams, time / MinMax time (target <= 4 for histogram, entropy)"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
