// Magnitude pruning on 16M and 64M floats, single thread: threshold selection and masks against std::nth_element.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shrink/prune/threshold.hpp"
#include "shrink/prune/unstructured.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::prune;
using shrink::bench::RatioTarget;

constexpr std::int64_t kMillion = std::int64_t{1} << 20;
constexpr std::int64_t kLargest = 64 * kMillion;

// 64M normal weights; the 16M benchmarks read the first quarter.
const std::vector<float>& weights() {
  static const std::vector<float> w = [] {
    std::vector<float> v(static_cast<std::size_t>(kLargest));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& x : v) x = normal(rng);
    return v;
  }();
  return w;
}

TensorView<const float> weight_view(std::int64_t n) {
  return TensorView<const float>(weights().data(), Shape{n / 4096, 4096});
}

// Ten tensors of a model totalling 64M parameters, as views into the weights: 2 x 16M, 2 x 8M, 4 x 3M, 2 x 2M.
std::vector<TensorView<const float>> model_views() {
  const std::int64_t rows[] = {4096, 4096, 2048, 2048, 1536, 1536, 1536, 1536, 512, 512};
  const std::int64_t cols[] = {4096, 4096, 4096, 4096, 2048, 2048, 2048, 2048, 4096, 4096};
  std::vector<TensorView<const float>> views;
  std::int64_t offset = 0;
  for (int t = 0; t < 10; ++t) {
    views.emplace_back(weights().data() + offset, Shape{rows[t], cols[t]});
    offset += rows[t] * cols[t];
  }
  return views;
}

void set_bytes(benchmark::State& state, std::int64_t n) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * n * 4);  // the weights, read once
}

// Baseline: |w| copied out, then std::nth_element to the k-th smallest (k = n / 2, 50% sparsity).
void nth_element_threshold(const std::vector<TensorView<const float>>& views, std::vector<float>& copy) {
  std::size_t at = 0;
  for (const auto& v : views)
    for (std::int64_t i = 0; i < v.numel(); ++i) copy[at++] = std::fabs(v.data()[i]);
  std::nth_element(copy.begin(), copy.begin() + static_cast<std::ptrdiff_t>(copy.size() / 2 - 1), copy.end());
  benchmark::DoNotOptimize(copy[copy.size() / 2 - 1]);
}

void BM_nth_element_copy(benchmark::State& state) {
  const std::int64_t n = state.range(0) * kMillion;
  std::vector<float> copy(static_cast<std::size_t>(n));
  for (auto _ : state) nth_element_threshold({weight_view(n)}, copy);
  set_bytes(state, n);
}
BENCHMARK(BM_nth_element_copy)->ArgName("M")->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_select_threshold(benchmark::State& state) {
  const std::int64_t n = state.range(0) * kMillion;
  for (auto _ : state) benchmark::DoNotOptimize(select_magnitude_threshold(weight_view(n), n / 2));
  set_bytes(state, n);
}
BENCHMARK(BM_select_threshold)->ArgName("M")->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

// The whole l1_unstructured_mask: checks, select, the mask pass and its allocation.
void BM_l1_unstructured_mask(benchmark::State& state) {
  const std::int64_t n = state.range(0) * kMillion;
  for (auto _ : state) benchmark::DoNotOptimize(l1_unstructured_mask(weight_view(n), Amount::fraction(0.5)));
  set_bytes(state, n);
}
BENCHMARK(BM_l1_unstructured_mask)->ArgName("M")->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_global_nth_element_copy(benchmark::State& state) {
  const auto views = model_views();
  std::vector<float> copy(static_cast<std::size_t>(kLargest));
  for (auto _ : state) nth_element_threshold(views, copy);
  set_bytes(state, kLargest);
}
BENCHMARK(BM_global_nth_element_copy)->Unit(benchmark::kMillisecond);

// global_unstructured_masks over the ten tensors: one threshold, ten masks out.
void BM_global_unstructured_masks(benchmark::State& state) {
  const auto views = model_views();
  for (auto _ : state) benchmark::DoNotOptimize(global_unstructured_masks(views, Amount::fraction(0.5)));
  set_bytes(state, kLargest);
}
BENCHMARK(BM_global_unstructured_masks)->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (const char* size : {"M:16", "M:64"}) {
    const std::string baseline = std::string("BM_nth_element_copy/") + size;
    t.push_back({std::string("BM_select_threshold/") + size, baseline, M::time, 0.5,
                 "threshold select at least 2x faster than nth_element on a copy of |w|"});
    t.push_back({std::string("BM_l1_unstructured_mask/") + size, baseline, M::time, 0.0,
                 "the whole mask (select + mask pass) / nth_element on a copy (threshold only)"});
  }
  t.push_back({"BM_global_unstructured_masks", "BM_global_nth_element_copy", M::time, 0.5,
               "10 tensors, 64M: masks out, at least 2x faster than nth_element on a concatenated copy"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
