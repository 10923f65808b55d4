// AWQ (quant/awq.hpp) on SmolLM2-135M's shapes, one thread: the scale search of the q/k/v group (576 -> 576, 192, 192)
// and of the gate/up group (576 -> 1536, 1536) from 2048 calibration rows, from the rows themselves (the Hessian and
// mean |x| gathered inside) and from a given Hessian; the clip search of one Linear; awq_quantize.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "shrink/quant/awq.hpp"
#include "shrink/quant/hessian.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::quant;

constexpr std::int64_t kRows = 2048, kIn = 576;

// Correlated rows X = Z·A + noise [2048, 576] with a few salient channels (×20 and an offset), built once.
const std::vector<float>& calibration_rows() {
  static const std::vector<float> x = [] {
    std::mt19937 rng(576);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const std::int64_t k = kIn / 4;
    std::vector<float> a(static_cast<std::size_t>(k * kIn)), rows(static_cast<std::size_t>(kRows * kIn));
    for (float& v : a) v = normal(rng) / 12.0f;
    std::vector<float> z(static_cast<std::size_t>(k));
    for (std::int64_t t = 0; t < kRows; ++t) {
      for (float& v : z) v = normal(rng);
      for (std::int64_t j = 0; j < kIn; ++j) {
        float s = 0.1f * normal(rng);
        for (std::int64_t l = 0; l < k; ++l)
          s += z[static_cast<std::size_t>(l)] * a[static_cast<std::size_t>(l * kIn + j)];
        rows[static_cast<std::size_t>(t * kIn + j)] = j % 97 == 13 ? 20.0f * s + 3.0f : s;
      }
    }
    return rows;
  }();
  return x;
}

std::vector<float> weight(std::int64_t out, std::int64_t in) {
  std::mt19937 rng(static_cast<unsigned>(out * 7 + in));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(out * in));
  for (float& v : w) v = normal(rng);
  return w;
}

TensorView<const float> rows_view() { return TensorView<const float>(calibration_rows().data(), Shape{kRows, kIn}); }

// The group's weights [out_k, 576] for the outputs in state.range(0..2) (0: absent).
std::vector<std::vector<float>> group_weights(const benchmark::State& state) {
  std::vector<std::vector<float>> w;
  for (int k = 0; k < 3; ++k)
    if (state.range(k) > 0) w.push_back(weight(state.range(k), kIn));
  return w;
}

std::vector<TensorView<const float>> views(const std::vector<std::vector<float>>& w) {
  std::vector<TensorView<const float>> v;
  for (const auto& m : w) v.emplace_back(m.data(), Shape{static_cast<std::int64_t>(m.size()) / kIn, kIn});
  return v;
}

// 4-bit affine, groups of 64, grid 20 (the defaults): from the 2048 rows, Hessian and mean |x| included.
void BM_awq_search(benchmark::State& state) {
  const auto w = group_weights(state);
  const AwqOptions o;
  for (auto _ : state) {
    AwqResult r = awq_search(views(w), rows_view(), o);
    benchmark::DoNotOptimize(r.scales.data());
  }
}
BENCHMARK(BM_awq_search)->Args({576, 192, 192})->Args({1536, 1536, 0})->Unit(benchmark::kMillisecond)->MinTime(0.5);

// The same search with the Hessian and mean |x| given (gathered while calibrating).
void BM_awq_search_hessian(benchmark::State& state) {
  const auto w = group_weights(state);
  HessianObserver h;
  h.observe(rows_view());
  ActivationMeanAbsObserver a;
  a.observe(rows_view());
  const Hessian hessian = h.hessian();
  const std::vector<float> mean_abs = a.mean_abs();
  const AwqOptions o;
  for (auto _ : state) {
    AwqResult r = awq_search(views(w), hessian, mean_abs, o);
    benchmark::DoNotOptimize(r.scales.data());
  }
}
BENCHMARK(BM_awq_search_hessian)
    ->Args({576, 192, 192})
    ->Args({1536, 1536, 0})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.5);

// The clip search of one Linear [out, 576] (Hessian given) and the quantization of its scaled, clipped weight.
void BM_awq_clip_search(benchmark::State& state) {
  const std::vector<float> w = weight(state.range(0), kIn);
  const TensorView<const float> wv(w.data(), Shape{state.range(0), kIn});
  HessianObserver h;
  h.observe(rows_view());
  const Hessian hessian = h.hessian();
  const AwqOptions o;
  const std::vector<float> scales = awq_search({wv}, rows_view(), o).scales;
  for (auto _ : state) {
    std::vector<float> clip = awq_clip_search(wv, hessian, scales, o);
    QuantizedTensor q = awq_quantize(wv, scales, o, clip);
    benchmark::DoNotOptimize(q.data.data());
  }
}
BENCHMARK(BM_awq_clip_search)->Arg(192)->Arg(576)->Arg(1536)->Unit(benchmark::kMillisecond)->MinTime(0.5);

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
