// What the layout probe's files share (benchmarks/gpu/layout_probe*.cu): result codes, the CUDA check, the table rows
// it prints (a mapping, what the kernels assume, what the hardware did), and the probes' entry points.
#pragma once

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace shrink_probe {

// A probe process's exit status.
enum Result : int { kMatch = 0, kDiffer = 1, kError = 2, kSkipped = 3 };

struct Options {
  bool verbose = false;  // print every raw measured map, not only those that differ
};

// printf into a std::string.
__attribute__((format(printf, 1, 2))) inline std::string text(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

// A failed CUDA call ends the probe (its process: a sticky error ends the context anyway) with kError.
#define PROBE_CHECK(call)                                                                     \
  do {                                                                                        \
    const cudaError_t probe_status_ = (call);                                                 \
    if (probe_status_ != cudaSuccess) {                                                       \
      std::printf("  CUDA error %s (%s) in `%s`, line %d\n", cudaGetErrorName(probe_status_), \
                  cudaGetErrorString(probe_status_), #call, __LINE__);                        \
      std::fflush(stdout);                                                                    \
      return ::shrink_probe::kError;                                                          \
    }                                                                                         \
  } while (0)

// One row of a probe's table: each entry the hardware was asked about is the same as the assumption, or not; the
// first few that are not are kept in full.
class Comparison {
 public:
  Comparison(std::string mapping, std::string assumed) : mapping_(std::move(mapping)), assumed_(std::move(assumed)) {}

  void check(bool same, const std::string& difference) {
    ++entries_;
    if (same) return;
    if (differ_ < kShown) first_.push_back(difference);
    ++differ_;
  }
  bool match() const { return entries_ > 0 && differ_ == 0; }
  int differ() const { return differ_; }

  void print() const {
    std::printf("  %-30s %-56s %s %d/%d\n", mapping_.c_str(), assumed_.c_str(), match() ? "MATCH " : "DIFFER",
                entries_ - differ_, entries_);
    for (const std::string& d : first_) std::printf("      differs: %s\n", d.c_str());
    if (differ_ > kShown) std::printf("      ... and %d more\n", differ_ - kShown);
  }

 private:
  static constexpr int kShown = 6;
  std::string mapping_, assumed_;
  int entries_ = 0, differ_ = 0;
  std::vector<std::string> first_;
};

inline void print_table_header() {
  std::printf("  %-30s %-56s %s\n", "mapping", "assumed (the kernels' code)", "measured");
}

// Every row printed, the probe's result: kMatch when all rows in `required` match.
inline int result_of(const std::vector<const Comparison*>& required) {
  for (const Comparison* c : required)
    if (!c->match()) return kDiffer;
  return kMatch;
}

// The probes, each run in a process of its own (layout_probe.cu).
int probe_mma_sp_s8(const Options& options);
int probe_mma_sp_f16(const Options& options);
int probe_mma_s8(const Options& options);
// Defined in layout_probe_wgmma.sm90a.cu when the build has sm_90a code; otherwise layout_probe.cu's definition
// reports the probe skipped (kSkipped), naming the missing architecture.
int probe_wgmma_s8(const Options& options);

}  // namespace shrink_probe
