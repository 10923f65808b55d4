// Google Benchmark main with a closing table of ratios against baselines measured in the same run.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/executor.hpp"
#include "support/guarded.hpp"

namespace shrink::bench {

// A target: `name` compared with `baseline`, by bandwidth (bytes_per_second, higher is better) or by
// time (lower is better), passing when the ratio reaches `target` (>= for bandwidth, <= for time).
// A target of 0 marks a row shown for information only.
struct RatioTarget {
  enum class Measure { bandwidth, time };
  std::string name;
  std::string baseline;
  Measure measure;
  double target;
  std::string what;  // the wording of the target
  // Multiplies the baseline's bandwidth: 0.5 turns memcpy's read + write bandwidth into its read bandwidth.
  double baseline_scale = 1.0;
};

inline std::vector<RatioTarget>& ratio_targets() {
  static std::vector<RatioTarget> targets;
  return targets;
}

// One target as a line of its own, in the form the check script greps, the same for every program:
//   target: <benchmark> vs <baseline>: ratio 1.234 (>= 1.60) PASS  (<what>)
// ("<=" for a time ratio; "(info)" in place of the target and result when `target` is 0). One space before the
// result, so the older patterns that count the closing table ("  PASS  ", ": PASS)") do not count it too.
inline void print_target_line(const std::string& name, const std::string& baseline, double ratio, bool higher_is_better,
                              double target, const std::string& what) {
  if (target <= 0) {
    std::printf("target: %s vs %s: ratio %.3f (info)  (%s)\n", name.c_str(), baseline.c_str(), ratio, what.c_str());
    return;
  }
  const bool pass = higher_is_better ? ratio >= target : ratio <= target;
  std::printf("target: %s vs %s: ratio %.3f (%s %.2f) %s  (%s)\n", name.c_str(), baseline.c_str(), ratio,
              higher_is_better ? ">=" : "<=", target, pass ? "PASS" : "MISS", what.c_str());
}

// Console output as usual, and each benchmark's fastest repetition kept for the table: on a shared machine
// the fastest of several interleaved repetitions is the figure least disturbed by other work.
// Each target also gets its line as soon as its benchmark and baseline have both reported (the fastest repetition so
// far; the closing table has the fastest of all): a program killed by a timeout keeps the figures it measured. Google
// Benchmark 1.7.1 reports a benchmark once all its repetitions have run, so under interleaved repetitions the line
// comes late; with one repetition (device-check.sh) it comes right after the later of the two has run.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  struct Result {
    double seconds = 0;
    double bytes_per_second = 0;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    benchmark::ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate) continue;
      reported_.insert(run.run_name.str());
      if (run.error_occurred) continue;
      Result r;
      r.seconds = run.real_accumulated_time / static_cast<double>(run.iterations ? run.iterations : 1);
      auto it = run.counters.find("bytes_per_second");
      if (it != run.counters.end()) r.bytes_per_second = it->second.value;
      auto [at, inserted] = results_.emplace(run.run_name.str(), r);
      if (!inserted && r.seconds < at->second.seconds) at->second = r;
    }
    print_ready_targets();
    for (auto& wait : waiting_)
      if (wait && wait(*this)) wait = nullptr;
    flush_output();
  }

  // `print` runs after every report until it returns true: a program's own early lines (print_target_line), printed
  // once the results they need exist.
  void when_ready(std::function<bool(const RecordingReporter&)> print) { waiting_.push_back(std::move(print)); }

  const std::map<std::string, Result>& results() const { return results_; }
  // Whether the run named `name` (exactly) has reported, with a result or with an error.
  bool reported(const std::string& name) const { return reported_.count(name) != 0; }

  // The result named `name`, else the first whose name begins with `name` + "/": a name given without the options
  // Google Benchmark appends (such as min_time, written differently across its versions). Null when none ran.
  const std::pair<const std::string, Result>* find(const std::string& name) const {
    auto it = results_.find(name);
    if (it == results_.end()) {
      it = results_.lower_bound(name + "/");
      if (it != results_.end() && it->first.compare(0, name.size() + 1, name + "/") != 0) it = results_.end();
    }
    return it == results_.end() ? nullptr : &*it;
  }

 private:
  void print_ready_targets();

  std::map<std::string, Result> results_;
  std::set<std::string> reported_;
  std::vector<bool> printed_;  // by index in ratio_targets()
  std::vector<std::function<bool(const RecordingReporter&)>> waiting_;
};

// A target's ratio from the recorded results: bandwidth over the scaled baseline's, or time over the baseline's.
inline double target_ratio(const RatioTarget& t, const RecordingReporter::Result& a,
                           const RecordingReporter::Result& b) {
  return t.measure == RatioTarget::Measure::bandwidth ? a.bytes_per_second / (b.bytes_per_second * t.baseline_scale)
                                                      : a.seconds / b.seconds;
}

inline void RecordingReporter::print_ready_targets() {
  const std::vector<RatioTarget>& targets = ratio_targets();
  printed_.resize(targets.size(), false);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (printed_[i]) continue;
    const auto *a = find(targets[i].name), *b = find(targets[i].baseline);
    if (a == nullptr || b == nullptr) continue;
    print_target_line(a->first, b->first, target_ratio(targets[i], a->second, b->second),
                      targets[i].measure == RatioTarget::Measure::bandwidth, targets[i].target, targets[i].what);
    printed_[i] = true;
  }
}

inline void print_ratio_table(const RecordingReporter& reporter) {
  std::printf("\nRatios from the fastest repetition of each benchmark and of its baseline, in this run:\n");
  std::printf("%-44s %-26s %9s %8s  %s\n", "benchmark", "baseline", "ratio", "target", "result");
  for (const RatioTarget& t : ratio_targets()) {
    const auto *a = reporter.find(t.name), *b = reporter.find(t.baseline);
    if (a == nullptr || b == nullptr) continue;  // filtered out of this run
    const bool by_bandwidth = t.measure == RatioTarget::Measure::bandwidth;
    const double ratio = target_ratio(t, a->second, b->second);
    if (t.target <= 0) {
      std::printf("%-44s %-26s %9.3f %8s  %s  (%s)\n", a->first.c_str(), b->first.c_str(), ratio, "", "    ",
                  t.what.c_str());
      continue;
    }
    const bool pass = by_bandwidth ? ratio >= t.target : ratio <= t.target;
    std::printf("%-44s %-26s %9.3f %s%6.2f  %s  (%s)\n", a->first.c_str(), b->first.c_str(), ratio,
                by_bandwidth ? ">=" : "<=", t.target, pass ? "PASS" : "MISS", t.what.c_str());
  }
}

// Google Benchmark's arguments, with `count` (five) interleaved repetitions unless the caller chose repetitions.
inline std::vector<char*> arguments_with_repetitions(int argc, char** argv, int count = 5) {
  static std::string repetitions;
  static std::string interleave = "--benchmark_enable_random_interleaving=true";
  repetitions = "--benchmark_repetitions=" + std::to_string(count);
  std::vector<char*> args(argv, argv + argc);
  bool chosen = false;
  for (int i = 1; i < argc; ++i) chosen = chosen || std::string(argv[i]).rfind("--benchmark_repetitions", 0) == 0;
  if (!chosen) {
    args.push_back(repetitions.data());
    args.push_back(interleave.data());
  }
  return args;
}

// Runs the registered benchmarks with Google Benchmark's arguments `args` (see arguments_with_repetitions), recording
// into `reporter`; false, having run nothing, when an argument is not Google Benchmark's.
inline bool run_benchmarks(std::vector<char*> args, RecordingReporter& reporter) {
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return false;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return true;
}

// Runs the registered benchmarks, then prints the ratio table.
// Benchmarks time one thread unless they scope an executor of their own (bench_threads.cpp): the process-wide
// executor is set to the serial one here, so shrink's operations do not spread over the default pool.
// A throw outside the benchmarks ends the program with status 1 and its reason (guarded_main).
inline int run_with_ratio_table(int argc, char** argv) {
  return guarded_main([&] {
    set_executor(&serial_executor());
    RecordingReporter reporter;
    if (!run_benchmarks(arguments_with_repetitions(argc, argv), reporter)) return 1;
    print_ratio_table(reporter);
    return 0;
  });
}

}  // namespace shrink::bench
