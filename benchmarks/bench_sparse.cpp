// Sparse formats on the CPU, single thread: 2:4 masks and compression of an 8192 x 8192 weight, and CSR conversion
// at 50/90/99% sparsity, as ratios to memcpy of the same bytes measured in the same run.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/nm_compressed.hpp"
#include "support/baselines.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using shrink::bench::RatioTarget;

constexpr std::int64_t kRows = 8192, kCols = 8192;  // 64M elements: 256 MB of float, 128 MB of half
constexpr std::int64_t kCount = kRows * kCols;
const Shape kShape{kRows, kCols};

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

const std::vector<half>& half_weights() {
  static const std::vector<half> h = [] {
    std::vector<half> v(weights().size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = half(weights()[i]);
    return v;
  }();
  return h;
}

// The weights with a fraction of them zeroed (per mille), for CSR.
const std::vector<float>& sparse_weights(int per_mille) {
  static std::vector<std::vector<float>> cache(1001);
  std::vector<float>& v = cache[static_cast<std::size_t>(per_mille)];
  if (v.empty()) {
    v = weights();
    std::mt19937 rng(static_cast<unsigned>(per_mille));
    std::uniform_int_distribution<int> uniform(0, 999);
    for (float& x : v)
      if (uniform(rng) < per_mille) x = 0.0f;
  }
  return v;
}

// Baseline: memcpy of the float weight (256 MB).
void BM_memcpy(benchmark::State& state) { shrink::bench::run_memcpy_baseline(state, weights()); }
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);

// The same copy into a destination allocated (and so first touched, 4 KB pages) in every iteration, as the
// compressors' outputs are: the page faults of 256 MB cost about as much as the copy itself.
void BM_memcpy_fresh_dst(benchmark::State& state) {
  for (auto _ : state) {
    std::unique_ptr<float[]> dst(new float[weights().size()]);
    std::memcpy(dst.get(), weights().data(), weights().size() * sizeof(float));
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  shrink::bench::set_bytes(state, 2 * kCount * 4);
}
BENCHMARK(BM_memcpy_fresh_dst)->Unit(benchmark::kMillisecond);

// 2:4 mask of float weights: bytes = 4 read per element + 1/8 written (the bit mask).
void BM_nm_mask_2of4_f32(benchmark::State& state) {
  const TensorView<const float> view(weights().data(), kShape);
  for (auto _ : state) benchmark::DoNotOptimize(prune::nm_mask(view, prune::NmPattern{2, 4}));
  shrink::bench::set_bytes(state, kCount * 4 + kCount / 8);
}
BENCHMARK(BM_nm_mask_2of4_f32)->Unit(benchmark::kMillisecond);

// 2:4 compression under a given mask: bytes = dense + mask read, values + positions + metadata written.
template <class T>
void compress_under_mask(benchmark::State& state, const std::vector<T>& w) {
  const TensorView<const T> view(w.data(), kShape);
  const prune::Mask mask = prune::nm_mask(view, prune::NmPattern{2, 4});
  std::int64_t written = 0;
  for (auto _ : state) {
    sparse::NmCompressed<T> c = sparse::compress_nm(view, mask, prune::NmPattern{2, 4});
    written = static_cast<std::int64_t>(c.values.size() * sizeof(T) + c.positions.size() + c.metadata.size() * 4);
    benchmark::DoNotOptimize(c.values.data());
  }
  shrink::bench::set_bytes(state, kCount * static_cast<std::int64_t>(sizeof(T)) + kCount / 8 + written);
}
void BM_compress_2of4_f32(benchmark::State& state) { compress_under_mask(state, weights()); }
void BM_compress_2of4_f16(benchmark::State& state) { compress_under_mask(state, half_weights()); }
BENCHMARK(BM_compress_2of4_f32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_compress_2of4_f16)->Unit(benchmark::kMillisecond);

// Mask + compression from the weights alone (float importance, the common case).
void BM_mask_and_compress_2of4_f32(benchmark::State& state) {
  const TensorView<const float> view(weights().data(), kShape);
  for (auto _ : state) benchmark::DoNotOptimize(sparse::compress_nm(view, prune::NmPattern{2, 4}).values.data());
  shrink::bench::set_bytes(state, kCount * 4 + kCount / 2 * 5);
}
BENCHMARK(BM_mask_and_compress_2of4_f32)->Unit(benchmark::kMillisecond);

// to_csr: bytes = dense read + offsets, indices and values written.
void BM_to_csr_f32(benchmark::State& state) {
  const std::vector<float>& w = sparse_weights(static_cast<int>(state.range(0)));
  const TensorView<const float> view(w.data(), kShape);
  std::int64_t written = 0;
  for (auto _ : state) {
    sparse::Csr<float> csr = sparse::to_csr(view);
    written = (kRows + 1) * 4 + csr.nnz() * 8;
    benchmark::DoNotOptimize(csr.values.data());
  }
  shrink::bench::set_bytes(state, kCount * 4 + written);
}
BENCHMARK(BM_to_csr_f32)->Arg(500)->Arg(900)->Arg(990)->ArgName("zeros_per_mille")->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  t.push_back({"BM_nm_mask_2of4_f32", "BM_memcpy", M::bandwidth, 0.0,
               "2:4 mask, bytes read + written / memcpy's (information)"});
  t.push_back({"BM_nm_mask_2of4_f32", "BM_memcpy", M::bandwidth, 0.0, "2:4 mask / memcpy's read bandwidth", 0.5});
  t.push_back({"BM_compress_2of4_f32", "BM_memcpy", M::bandwidth, 0.0, "2:4 compress (float) under a mask"});
  t.push_back({"BM_compress_2of4_f16", "BM_memcpy", M::bandwidth, 0.0, "2:4 compress (half) under a mask, + metadata"});
  t.push_back({"BM_mask_and_compress_2of4_f32", "BM_memcpy", M::bandwidth, 0.0, "nm_mask + compress from weights"});
  for (const char* z : {"500", "900", "990"})
    t.push_back({std::string("BM_to_csr_f32/zeros_per_mille:") + z, "BM_memcpy", M::bandwidth, 0.0,
                 std::string("to_csr at ") + z + "/1000 zeros"});
  t.push_back({"BM_memcpy_fresh_dst", "BM_memcpy", M::bandwidth, 0.0, "memcpy into a fresh 4 KB-page destination"});
  t.push_back({"BM_compress_2of4_f32", "BM_memcpy_fresh_dst", M::bandwidth, 0.0, "2:4 compress (float) / fresh memcpy"});
  t.push_back({"BM_to_csr_f32/zeros_per_mille:500", "BM_memcpy_fresh_dst", M::bandwidth, 0.0,
               "to_csr at 500/1000 zeros / fresh memcpy"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
