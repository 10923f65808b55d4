// Distillation losses on large vocabularies, single thread: kl_div_with_grad against memcpy of the bytes it must move
// (read both logits, write the gradient) and against the straightforward Eigen composition of the same loss.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/distill/soft_target.hpp"
#include "shrink/distill/topk_teacher.hpp"
#include "support/baselines.hpp"
#include "support/ratio_table.hpp"

namespace {

// Peak memory of one call, from the kernel's accounting: /proc/self/clear_refs "5" resets VmHWM (Linux >= 4.0),
// VmHWM after the call minus VmRSS before it is what the call added at its peak. -1 where /proc is missing.
std::int64_t status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atoll(line.c_str() + std::strlen(field));
  return -1;
}

struct PeakMemory {
  std::int64_t before;
  PeakMemory() {
    std::ofstream("/proc/self/clear_refs") << "5";
    before = status_kib("VmRSS:");
  }
  double added_kib() const { return before < 0 ? -1.0 : static_cast<double>(status_kib("VmHWM:") - before); }
};

}  // namespace

namespace {

using shrink::TensorView;
using shrink::bench::RatioTarget;
using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr float kTemperature = 2.0f;

struct Shape2 {
  std::int64_t rows, vocab;
};
// state.range(0) picks one of the two shapes, 134M logits each.
constexpr Shape2 kShapes[] = {{4096, 32768}, {512, 131072}};

// Student and teacher logits of one shape: normal, teacher sharper, as trained models give.
const std::vector<float>& logits(int which, bool teacher) {
  static std::vector<float> cache[2][2];
  std::vector<float>& v = cache[which][teacher ? 1 : 0];
  if (v.empty()) {
    const Shape2 s = kShapes[which];
    v.resize(static_cast<std::size_t>(s.rows * s.vocab));
    std::mt19937 rng(teacher ? 11 : 7);
    std::normal_distribution<float> normal(0.0f, teacher ? 3.0f : 2.0f);
    for (float& x : v) x = normal(rng);
  }
  return v;
}

std::int64_t moved_bytes(const Shape2& s, std::int64_t element_size) { return 3 * s.rows * s.vocab * element_size; }

void BM_memcpy(benchmark::State& state) {
  shrink::bench::run_memcpy_baseline(state, logits(0, false));  // 512 MB, into a reused buffer
}
BENCHMARK(BM_memcpy)->Unit(benchmark::kMillisecond);

// range(1): validate_first (1: every row checked before anything is written, the logits read twice; 0: each row
// checked just before use, one read).
void BM_kl_div_with_grad(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const Shape2 s = kShapes[which];
  const std::vector<float>& zs = logits(which, false);
  const std::vector<float>& zt = logits(which, true);
  std::vector<float> grad(zs.size());
  shrink::distill::SoftTargetOptions o;
  o.temperature = kTemperature;
  o.validate_first = state.range(1) != 0;
  double extra = 0;
  for (auto _ : state) {
    const PeakMemory memory;
    const auto loss = shrink::distill::kl_div_with_grad(TensorView<const float>(zs.data(), {s.rows, s.vocab}),
                                                        TensorView<const float>(zt.data(), {s.rows, s.vocab}),
                                                        TensorView<float>(grad.data(), {s.rows, s.vocab}), o);
    benchmark::DoNotOptimize(loss.value);
    benchmark::ClobberMemory();
    extra = memory.added_kib();
  }
  shrink::bench::set_bytes(state, moved_bytes(s, 4));
  state.counters["extra_KiB"] = extra;
}
BENCHMARK(BM_kl_div_with_grad)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"shape", "validate_first"})
    ->Unit(benchmark::kMillisecond);

// The same loss as a user would write it with Eigen: softmax, log, multiply and sum as separate expressions.
void BM_kl_div_with_grad_eigen(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const Shape2 s = kShapes[which];
  const Eigen::Map<const RowMatrix> zs(logits(which, false).data(), s.rows, s.vocab);
  const Eigen::Map<const RowMatrix> zt(logits(which, true).data(), s.rows, s.vocab);
  RowMatrix grad(s.rows, s.vocab);
  const float t = kTemperature;
  double extra = 0;
  for (auto _ : state) {
    const PeakMemory memory;
    RowMatrix a = zs / t;
    a.colwise() -= a.rowwise().maxCoeff();
    RowMatrix q = a.array().exp().matrix();
    const Eigen::VectorXf sum_q = q.rowwise().sum();
    q = sum_q.asDiagonal().inverse() * q;  // softmax(zs / T)
    RowMatrix b = zt / t;
    b.colwise() -= b.rowwise().maxCoeff();
    RowMatrix p = b.array().exp().matrix();
    const Eigen::VectorXf sum_p = p.rowwise().sum();
    p = sum_p.asDiagonal().inverse() * p;  // softmax(zt / T)
    const RowMatrix log_ratio = (p.array().log() - q.array().log()).matrix();
    const double loss = (p.array() * log_ratio.array()).unaryExpr([](float v) { return std::isfinite(v) ? v : 0.0f; }).sum() *
                        static_cast<double>(t * t) / static_cast<double>(s.rows);
    grad = (q - p) * (t / static_cast<float>(s.rows));
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
    extra = memory.added_kib();
  }
  shrink::bench::set_bytes(state, moved_bytes(s, 4));
  state.counters["extra_KiB"] = extra;
}
BENCHMARK(BM_kl_div_with_grad_eigen)->Arg(0)->Arg(1)->ArgName("shape")->Unit(benchmark::kMillisecond)->Iterations(1);

// For information: the loss alone, and bfloat16 logits (half the bytes).
void BM_kl_div(benchmark::State& state) {
  const Shape2 s = kShapes[0];
  const std::vector<float>& zs = logits(0, false);
  const std::vector<float>& zt = logits(0, true);
  shrink::distill::SoftTargetOptions o;
  o.temperature = kTemperature;
  for (auto _ : state)
    benchmark::DoNotOptimize(shrink::distill::kl_div(TensorView<const float>(zs.data(), {s.rows, s.vocab}),
                                                     TensorView<const float>(zt.data(), {s.rows, s.vocab}), o)
                                 .value);
  shrink::bench::set_bytes(state, 2 * s.rows * s.vocab * 4);
}
BENCHMARK(BM_kl_div)->Unit(benchmark::kMillisecond);

void BM_kl_div_with_grad_bfloat16(benchmark::State& state) {
  const Shape2 s = kShapes[0];
  std::vector<shrink::bfloat16> zs(logits(0, false).size()), zt(zs.size()), grad(zs.size());
  for (std::size_t i = 0; i < zs.size(); ++i) {
    zs[i] = shrink::bfloat16(logits(0, false)[i]);
    zt[i] = shrink::bfloat16(logits(0, true)[i]);
  }
  shrink::distill::SoftTargetOptions o;
  o.temperature = kTemperature;
  for (auto _ : state)
    benchmark::DoNotOptimize(
        shrink::distill::kl_div_with_grad(TensorView<const shrink::bfloat16>(zs.data(), {s.rows, s.vocab}),
                                          TensorView<const shrink::bfloat16>(zt.data(), {s.rows, s.vocab}),
                                          TensorView<shrink::bfloat16>(grad.data(), {s.rows, s.vocab}), o)
            .value);
  shrink::bench::set_bytes(state, moved_bytes(s, 2));
}
BENCHMARK(BM_kl_div_with_grad_bfloat16)->Unit(benchmark::kMillisecond);

const bool registered = [] {
  using M = RatioTarget::Measure;
  auto& t = shrink::bench::ratio_targets();
  for (const char* shape : {"shape:0", "shape:1"}) {
    const std::string fast = std::string("BM_kl_div_with_grad/") + shape + "/validate_first:0";
    const std::string checked = std::string("BM_kl_div_with_grad/") + shape + "/validate_first:1";
    const std::string eigen = std::string("BM_kl_div_with_grad_eigen/") + shape + "/iterations:1";
    t.push_back({fast, "BM_memcpy", M::bandwidth, 0.5,
                 "KL + gradient >= 0.5 of memcpy of the bytes that must move (both logits read once, gradient written)"});
    t.push_back({checked, "BM_memcpy", M::bandwidth, 0,
                 "the same with validate_first: the logits are read twice, 20 bytes an element move for 12 counted"});
    t.push_back({fast, eigen, M::time, 0.5, "time / the Eigen composition's time (<= 0.5: at least 2x faster)"});
    t.push_back({checked, eigen, M::time, 0.5, "validate_first time / the Eigen composition's time"});
  }
  t.push_back({"BM_kl_div", "BM_memcpy", M::bandwidth, 0, "loss only, bytes of both logits"});
  t.push_back({"BM_kl_div_with_grad_bfloat16", "BM_memcpy", M::bandwidth, 0, "bfloat16 logits and gradient"});
  return true;
}();

}  // namespace

int main(int argc, char** argv) { return shrink::bench::run_with_ratio_table(argc, argv); }
