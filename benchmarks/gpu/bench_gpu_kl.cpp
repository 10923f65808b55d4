// GPU fused KL + gradient (shrink::cuda::kl_div_with_grad, T = 2) on 8192 x 131072 bf16 logits and other rows of
// interest, on each row path, against a device-to-device copy of the same logits measured in the same run (CUDA
// events after warm-up, manual time). Achieved bandwidth counts 2 reads + 1 write of the logits' bytes; the workspace
// is the extra device memory. PyTorch's figures on the same data come from benchmarks/gpu/torch_kl.py through the
// JSON file named by SHRINK_TORCH_KL_JSON (device-check.sh writes it); the speed and memory ratios are printed as target
// lines once shape 0's automatic path has run, and after the ratio table. Without a device every benchmark reports
// skipped.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/half.hpp"
#include "shrink/cuda/device.hpp"
#include "shrink/cuda/soft_target.hpp"
#include "support/gpu_timing.hpp"
#include "support/guarded.hpp"
#include "support/ratio_table.hpp"

namespace {

using namespace shrink;
using namespace shrink::bench::gpu;
using shrink::bench::RatioTarget;

struct BenchShape {
  std::int64_t rows, cols;
  bool bf16;  // else float
  const char* what;
};

// Shape 0 is the target: 8192 x 128k bf16 (2 GiB a tensor).
const BenchShape kShapes[] = {
    {8192, 131072, true, "8192 x 131072 bf16"},  {8192, 32000, true, "8192 x 32000 bf16"},
    {8192, 50257, true, "8192 x 50257 bf16"},    {2048, 262144, true, "2048 x 262144 bf16"},
    {4096, 32768, false, "4096 x 32768 float"},
};
const cuda::SoftTargetPath kPathList[] = {cuda::SoftTargetPath::automatic, cuda::SoftTargetPath::generic,
                                          cuda::SoftTargetPath::shared_row, cuda::SoftTargetPath::cluster};
constexpr float kTemperature = 2.0f;
constexpr std::int64_t kDistinctRows = 64;

// The logits torch_kl.py makes too, bit for bit: row r repeats row r % 64 of a hashed uniform [-4, 4) block.
float logit(std::int64_t r, std::int64_t j, std::uint64_t salt) {
  const std::uint64_t index = static_cast<std::uint64_t>(j) + 131071u * static_cast<std::uint64_t>(r % kDistinctRows) +
                              7919u * salt;
  const auto h = static_cast<std::uint32_t>((index * 2654435761ull) & 0xFFFFFFFFull);
  return static_cast<float>(h) * 0x1p-29f - 4.0f;
}

// Student, teacher, gradient and workspace of one shape, filled once and kept for the process.
struct ShapeData {
  std::int64_t bytes;  // of one tensor
  std::size_t workspace_size;
  DeviceMemory student, teacher, grad, workspace, value;

  template <class T>
  void fill(DeviceMemory& device, const BenchShape& s, std::uint64_t salt) {
    std::vector<T> block(static_cast<std::size_t>(kDistinctRows * s.cols));
    for (std::int64_t r = 0; r < kDistinctRows; ++r)
      for (std::int64_t j = 0; j < s.cols; ++j) {
        const float v = logit(r, j, salt);
        if constexpr (std::is_same<T, float>::value) block[static_cast<std::size_t>(r * s.cols + j)] = v;
        else block[static_cast<std::size_t>(r * s.cols + j)] = T(v);
      }
    device.upload(block);
    T* d = device.as<T>();
    for (std::int64_t r = kDistinctRows; r < s.rows; r += kDistinctRows) {
      const std::int64_t n = (s.rows - r < kDistinctRows ? s.rows - r : kDistinctRows) * s.cols;
      check(cudaMemcpy(d + r * s.cols, d, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDeviceToDevice), "repeat");
    }
  }

  explicit ShapeData(const BenchShape& s)
      : bytes(s.rows * s.cols * (s.bf16 ? 2 : 4)),
        workspace_size(cuda::soft_target_workspace_bytes(s.rows)),
        student(static_cast<std::size_t>(bytes)),
        teacher(static_cast<std::size_t>(bytes)),
        grad(static_cast<std::size_t>(bytes)),
        workspace(workspace_size),
        value(sizeof(double)) {
    if (s.bf16) {
      fill<bfloat16>(student, s, 0);
      fill<bfloat16>(teacher, s, 1);
    } else {
      fill<float>(student, s, 0);
      fill<float>(teacher, s, 1);
    }
  }
};

ShapeData& data(int shape) {
  static std::map<int, std::unique_ptr<ShapeData>> all;  // kept for the process: the driver tears them down
  auto& d = all[shape];
  if (!d) d = std::make_unique<ShapeData>(kShapes[shape]);
  return *d;
}

void BM_gpu_copy(benchmark::State& state) {
  if (!has_device(state)) return;
  ShapeData& d = data(static_cast<int>(state.range(0)));
  state.SetLabel(kShapes[state.range(0)].what);
  time_copy(state, d.grad, d.student, static_cast<std::size_t>(d.bytes));
}

template <class T>
void run_kl(benchmark::State& state, int shape, cuda::SoftTargetPath path) {
  const BenchShape& s = kShapes[shape];
  ShapeData& d = data(shape);
  cuda::SoftTargetOptions o;
  o.temperature = kTemperature;
  o.path = path;
  const cuda::SoftTargetPlan plan = cuda::soft_target_plan<T>(cuda::SoftTargetLoss::kl_div, s.cols, true, o);
  if (!plan.unsupported.empty()) {
    state.SkipWithError(("not on this device: " + plan.unsupported).c_str());
    return;
  }
  state.SetLabel(std::string(s.what) + ", " + cuda::to_string(plan.path) +
                 (plan.path == cuda::SoftTargetPath::cluster ? " x" + std::to_string(plan.cluster_size) : "") + ", " +
                 std::to_string(plan.threads) + " threads, " + std::to_string(plan.shared_bytes) + " B shared");
  const Shape shape_{s.rows, s.cols};
  const TensorView<const T> student(d.student.as<T>(), shape_, Device::cuda(0));
  const TensorView<const T> teacher(d.teacher.as<T>(), shape_, Device::cuda(0));
  const TensorView<T> grad(d.grad.as<T>(), shape_, Device::cuda(0));
  const cuda::Workspace workspace{d.workspace.as<void>(), d.workspace_size};
  time_on_device(state, 3 * d.bytes, [&] {
    cuda::kl_div_with_grad<T>(student, teacher, grad, {d.value.as<double>(), nullptr}, o, workspace, nullptr);
  });
  state.counters["workspace_bytes"] = static_cast<double>(d.workspace_size);
  cuda::check_status(workspace, nullptr, "bench_gpu_kl");  // the data is finite: never throws
}

void BM_gpu_kl_with_grad(benchmark::State& state) {
  if (!has_device(state)) return;
  const int shape = static_cast<int>(state.range(0));
  const cuda::SoftTargetPath path = kPathList[state.range(1)];
  if (kShapes[shape].bf16) run_kl<bfloat16>(state, shape, path);
  else run_kl<float>(state, shape, path);
}

void register_all() {
  using M = RatioTarget::Measure;
  auto& targets = shrink::bench::ratio_targets();
  for (int s = 0; s < static_cast<int>(sizeof kShapes / sizeof kShapes[0]); ++s) {
    benchmark::RegisterBenchmark("BM_gpu_copy", shrink::bench::guarded(BM_gpu_copy))
        ->ArgNames({"shape"})->Arg(s)->UseManualTime()->Unit(benchmark::kMillisecond);
    const std::string copy = "BM_gpu_copy/shape:" + std::to_string(s) + "/manual_time";
    for (int p = 0; p < 4; ++p) {
      benchmark::RegisterBenchmark("BM_gpu_kl_with_grad", shrink::bench::guarded(BM_gpu_kl_with_grad))
          ->ArgNames({"shape", "path"})->Args({s, p})->UseManualTime()->Unit(benchmark::kMillisecond);
      const std::string name =
          "BM_gpu_kl_with_grad/shape:" + std::to_string(s) + "/path:" + std::to_string(p) + "/manual_time";
      const bool target = s == 0 && p == 0;  // the issue's: 8192 x 128k bf16, automatic path
      targets.push_back({name, copy, M::bandwidth, target ? 0.80 : 0.0,
                         std::string(kShapes[s].what) + ", " + cuda::to_string(kPathList[p]) +
                             (target ? ": fused KL + gradient >= 0.80 of copy bandwidth (2 reads + 1 write)"
                                     : ": bandwidth / copy bandwidth")});
    }
  }
}

// The number after "key": in a one-line JSON object, or -1.
double json_number(const std::string& json, const std::string& key) {
  const std::size_t at = json.find("\"" + key + "\"");
  if (at == std::string::npos) return -1.0;
  const std::size_t colon = json.find(':', at);
  if (colon == std::string::npos) return -1.0;
  return std::strtod(json.c_str() + colon + 1, nullptr);
}

// PyTorch's figures from torch_kl.py's JSON (median ms, peak extra bytes); negative when absent.
struct TorchFigures {
  double ms = -1, extra_bytes = -1;
};

TorchFigures torch_figures(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  return {json_number(json, "median_ms"), json_number(json, "peak_extra_bytes")};
}

const char* const kTargetRun = "BM_gpu_kl_with_grad/shape:0/path:0/manual_time";

// Both sides count the gradient they produce: PyTorch's peak over its inputs holds s.grad, shrink's extra memory is
// the caller's gradient buffer plus the workspace (ShapeData's sizes, from the shape alone).
double shrink_extra_bytes() {
  return static_cast<double>(kShapes[0].rows * kShapes[0].cols * (kShapes[0].bf16 ? 2 : 4)) +
         static_cast<double>(cuda::soft_target_workspace_bytes(kShapes[0].rows));
}

// The PyTorch targets as target lines as soon as the shape:0/path:0 result exists (print_torch_ratios repeats them at
// the end, from the fastest of all repetitions).
void print_torch_targets_early(shrink::bench::RecordingReporter& reporter) {
  const char* path = std::getenv("SHRINK_TORCH_KL_JSON");
  if (path == nullptr) return;
  reporter.when_ready([path](const shrink::bench::RecordingReporter& r) {
    const auto it = r.results().find(kTargetRun);
    if (it == r.results().end()) return false;
    const TorchFigures torch = torch_figures(path);
    if (torch.ms <= 0 || torch.extra_bytes < 0) return true;  // nothing to compare with: the closing section says so
    shrink::bench::print_target_line(kTargetRun, "PyTorch kl_div + backward", torch.ms / (it->second.seconds * 1e3),
                                     true, 2.0, "speed: PyTorch time / shrink time");
    shrink::bench::print_target_line(kTargetRun, "PyTorch peak extra memory", torch.extra_bytes / shrink_extra_bytes(),
                                     true, 4.0, "memory: PyTorch peak extra / shrink gradient + workspace");
    return true;
  });
}

// The PyTorch comparison, from torch_kl.py's JSON and this run's automatic-path time on shape 0.
void print_torch_ratios(const shrink::bench::RecordingReporter& reporter) {
  const char* path = std::getenv("SHRINK_TORCH_KL_JSON");
  std::printf("\nAgainst PyTorch (F.kl_div(F.log_softmax(s/T), F.softmax(t/T), 'batchmean')*T*T + backward, %s, "
              "the same logits):\n", kShapes[0].what);
  if (path == nullptr) {
    std::printf("  skipped: SHRINK_TORCH_KL_JSON is not set (benchmarks/gpu/device-check.sh sets it when PyTorch is there)\n");
    return;
  }
  const TorchFigures torch = torch_figures(path);
  const double torch_ms = torch.ms, torch_extra = torch.extra_bytes;
  const auto it = reporter.results().find(kTargetRun);
  if (torch_ms <= 0 || torch_extra < 0 || it == reporter.results().end()) {
    std::printf("  skipped: no PyTorch figures in %s, or no shape:0/path:0 result in this run\n", path);
    return;
  }
  const double shrink_ms = it->second.seconds * 1e3;
  const double shrink_extra = shrink_extra_bytes();
  const double speed = torch_ms / shrink_ms, memory = torch_extra / shrink_extra;
  // Not in the "target:" form nor "(...: PASS)": the check counts the early target lines, and these once more would
  // count each twice.
  std::printf("  speed:  PyTorch %.3f ms / shrink %.3f ms = %.2fx, target >= 2x: %s\n", torch_ms, shrink_ms, speed,
              speed >= 2.0 ? "PASS" : "MISS");
  std::printf("  memory: PyTorch peak extra %.1f MiB / shrink gradient + workspace %.1f MiB = %.2fx, target >= 4x: %s;"
              " workspace alone %zu bytes\n",
              torch_extra / 1048576.0, shrink_extra / 1048576.0, memory, memory >= 4.0 ? "PASS" : "MISS",
              cuda::soft_target_workspace_bytes(kShapes[0].rows));
}

}  // namespace

int main(int argc, char** argv) {
  return shrink::bench::guarded_main([&] {
    register_all();
    shrink::bench::RecordingReporter reporter;
    print_torch_targets_early(reporter);
    if (!shrink::bench::run_benchmarks(shrink::bench::arguments_with_repetitions(argc, argv), reporter)) return 1;
    shrink::bench::print_ratio_table(reporter);
    if (cuda::device_count() > 0) print_torch_ratios(reporter);
    return 0;
  });
}
