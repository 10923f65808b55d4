// Google Benchmark main with a closing table of ratios against baselines measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace shrink::bench {

// A target: `name` compared with `baseline`, by bandwidth (bytes_per_second, higher is better) or by
// time (lower is better), passing when the ratio reaches `target` (>= for bandwidth, <= for time).
struct RatioTarget {
  enum class Measure { bandwidth, time };
  std::string name;
  std::string baseline;
  Measure measure;
  double target;
  std::string what;  // the wording of the target
};

inline std::vector<RatioTarget>& ratio_targets() {
  static std::vector<RatioTarget> targets;
  return targets;
}

// Console output as usual, and every run's time and bandwidth kept for the table.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  struct Result {
    double seconds = 0;
    double bytes_per_second = 0;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      // With repetitions keep the median; without, the single run.
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      const std::string name = run.run_name.str();
      Result r;
      r.seconds = run.real_accumulated_time / static_cast<double>(run.iterations ? run.iterations : 1);
      auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end()) r.bytes_per_second = it->second.value;
      if (run.run_type == Run::RT_Aggregate || !results_.count(name)) results_[name] = r;
    }
  }

  const std::map<std::string, Result>& results() const { return results_; }

 private:
  std::map<std::string, Result> results_;
};

inline void print_ratio_table(const RecordingReporter& reporter) {
  const auto& results = reporter.results();
  std::printf("\n%-44s %-26s %9s %8s  %s\n", "benchmark", "baseline", "ratio", "target", "result");
  for (const RatioTarget& t : ratio_targets()) {
    auto a = results.find(t.name), b = results.find(t.baseline);
    if (a == results.end() || b == results.end()) continue;  // filtered out of this run
    const bool by_bandwidth = t.measure == RatioTarget::Measure::bandwidth;
    const double ratio = by_bandwidth ? a->second.bytes_per_second / b->second.bytes_per_second
                                      : a->second.seconds / b->second.seconds;
    const bool pass = by_bandwidth ? ratio >= t.target : ratio <= t.target;
    std::printf("%-44s %-26s %9.3f %s%6.2f  %s  (%s)\n", t.name.c_str(), t.baseline.c_str(), ratio,
                by_bandwidth ? ">=" : "<=", t.target, pass ? "PASS" : "MISS", t.what.c_str());
  }
}

// Runs the registered benchmarks, then prints the ratio table.
inline int run_with_ratio_table(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  print_ratio_table(reporter);
  return 0;
}

}  // namespace shrink::bench
