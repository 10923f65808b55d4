// What `shrink bench` reports: one result per precision × shape × M, shown as a table, as JSON and as an SVG chart.
//
// JSON (bench.json, and stdout with --json), schema "shrink-bench/1" (fields marked + came with the GPU rows; a
// consumer of the first version reads the CPU rows as before by keeping those whose device is "cpu"):
//   { "schema": "shrink-bench/1",
//     "product": "Y[M,N] = X[M,K] · W[N,K]^T",
//     "machine": { "cpu": "<model name>", "simd": "AVX-512 + VNNI" | "AVX-512" | "AVX2" | "SSE2" | "scalar",
//                  "threads": the hardware's threads (shrink's default executor; 1 before --threads) (+),
//                  "gpu": "<shrink::cuda::describe of device 0>" | null (+) },
//     "timing": "<how the CPU rows' seconds are measured>",
//     "gpu_timing": "<how the GPU rows' seconds are measured>" | null (+),
//     "price_per_hour": P | null,
//     "results": [ { "device": "cpu" or the GPU's name (shrink::cuda::device_info),
//                    "precision": "int8-w8a8", "stored": "<what the weight is stored as>",
//                    "n": 4096, "k": 4096, "m": 128,
//                    "threads": CPU rows: the executor's threads (--threads); GPU rows: null (+),
//                    "seconds": CPU rows: best wall time of one product (+: was the thread CPU time with one
//                               thread); GPU rows: median CUDA-event time,
//                    "wall_seconds": CPU rows: the same; GPU rows: best CUDA-event time,
//                    "cpu_seconds": CPU rows: the calling thread's CPU time in the fastest run; GPU rows: null (+),
//                    "repetitions": products timed,
//                    "gflops": 2·M·N·K / seconds / 1e9 (dense-equivalent, also for the sparse rows),
//                    "speedup_vs_fp32": the CPU fp32 row's seconds / seconds, same shape and M, same run (CPU rows:
//                                       same thread count; GPU rows: the last --threads count),
//                    "baseline": "fp32" (CPU rows) | "gpu-fp16-cublas" (GPU rows) (+),
//                    "speedup_vs_baseline": the baseline's seconds / seconds, same shape and M, same run (+),
//                    "weight_bytes": bytes of the stored weight (values, scales, indices, positions),
//                    "sqnr_db": 10·log10(Σ y_fp32² / Σ (y − y_fp32)²) against the CPU fp32 output, null when exact,
//                    "relative_error": ‖y − y_fp32‖ / ‖y_fp32‖ (Frobenius),
//                    "cost_per_million_rows": P / 3600 · seconds / M · 1e6, null without --price-per-hour }, ... ],
//     "not_run": [ { "device", "precision", "n", "k", "m", "reason": "M > 64" }, ... ] (+: rows a kernel cannot
//                  run at that shape, listed instead of timed) }
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "report.hpp"
#include "shrink/metrics/error.hpp"

namespace shrink::cli {

struct BenchResult {
  std::string device;  // "cpu", or the GPU's name
  std::string precision;
  std::string stored;
  std::int64_t n = 0, k = 0, m = 0;
  int threads = 0;           // CPU: the executor's threads; 0 for GPU rows
  double seconds = 0;        // CPU: best wall-clock time of one product; GPU: median CUDA-event time
  double wall_seconds = 0;   // CPU: the same; GPU: best CUDA-event time
  double cpu_seconds = NAN;  // CPU: the calling thread's CPU time in the fastest run; NaN for GPU rows
  std::int64_t repetitions = 0;
  double gflops = 0;
  std::string baseline = "fp32";  // the row `speedup` is measured against: fp32, or gpu-fp16-cublas for GPU rows
  double speedup = NAN;           // the baseline's seconds / seconds
  double speedup_vs_fp32 = NAN;   // the CPU fp32 row's seconds / seconds (= speedup for CPU rows)
  std::int64_t weight_bytes = 0;
  double sqnr_db = INFINITY;
  double relative_error = 0;
  double cost_per_million_rows = NAN;  // NaN without a price
  std::string not_run;                 // why the row was not measured (e.g. "M > 64"); empty when it was
};

struct BenchReport {
  std::string cpu;
  std::string simd;
  int hardware_threads = 1;  // default_thread_count()
  std::string timing;
  std::string gpu;              // shrink::cuda::describe of the GPU rows' device; empty without GPU rows
  std::string gpu_timing;       // how the GPU rows are timed; empty without GPU rows
  double price_per_hour = NAN;  // NaN: not given
  std::vector<BenchResult> results;
};

// Sets sqnr_db and relative_error of `r` from its output y against the CPU fp32 output (both [M, N] row-major).
// Returns the number of outputs that are NaN or inf: then both measures are NaN (a wrong result, not an error).
inline std::int64_t measure_error(BenchResult& r, const std::vector<float>& reference, const std::vector<float>& y) {
  std::int64_t nonfinite = 0;
  for (float v : y) nonfinite += std::isfinite(v) ? 0 : 1;
  if (nonfinite > 0) {
    r.sqnr_db = r.relative_error = NAN;
    return nonfinite;
  }
  const Shape shape{r.m, r.n};
  const metrics::ErrorStats e =
      metrics::error_stats(TensorView<const float>(reference.data(), shape), TensorView<const float>(y.data(), shape));
  r.sqnr_db = e.sqnr_db;
  r.relative_error = std::isinf(e.sqnr_db) && e.sqnr_db > 0 ? 0.0 : std::pow(10.0, -e.sqnr_db / 20.0);
  return 0;
}

inline std::string time_text(double seconds) {
  if (seconds < 1e-3) return number_text(seconds * 1e6, "%.1f us");
  if (seconds < 1.0) return number_text(seconds * 1e3, "%.2f ms");
  return number_text(seconds, "%.3f s");
}

inline std::string shape_label(const BenchResult& r) { return std::to_string(r.n) + "x" + std::to_string(r.k); }

// The device column: "cpu", or "gpu" (the GPU's name is on the line above the table).
inline const char* device_label(const BenchResult& r) { return r.device == "cpu" ? "cpu" : "gpu"; }

// The thread counts of the CPU rows, in the order they first appear.
inline std::vector<int> thread_counts(const BenchReport& report) {
  std::vector<int> counts;
  for (const BenchResult& r : report.results)
    if (r.device == "cpu" && r.threads > 0 && std::find(counts.begin(), counts.end(), r.threads) == counts.end())
      counts.push_back(r.threads);
  return counts;
}

// A row's name in the chart: the precision, with its thread count when the run timed several.
inline std::string series_name(const BenchResult& r, bool several_thread_counts) {
  if (!several_thread_counts || r.device != "cpu") return r.precision;
  return r.precision + " (" + std::to_string(r.threads) + (r.threads == 1 ? " thread)" : " threads)");
}

inline void print_bench_table(const BenchReport& report, std::FILE* out) {
  const bool priced = !std::isnan(report.price_per_hour);
  std::fprintf(out, "Y[M,N] = X[M,K] * W[N,K]^T on %s (%s, %d hardware threads); %s\n", report.cpu.c_str(),
               report.simd.c_str(), report.hardware_threads, report.timing.c_str());
  std::fprintf(out,
               "speedup and error against fp32 of the same shape, M and thread count in this run; GFLOP/s counts "
               "2*M*N*K\n");
  if (!report.gpu.empty())
    std::fprintf(out, "gpu rows: %s; %s; speedup against gpu-fp16-cublas, error against the cpu fp32 output\n",
                 report.gpu.c_str(), report.gpu_timing.c_str());
  std::fprintf(out, "\n");
  int width = 17;  // the precision column, wider for the longer GPU names
  for (const BenchResult& r : report.results) width = std::max(width, static_cast<int>(r.precision.size()));
  std::fprintf(out, "%-*s %-6s %4s %-11s %4s %10s %9s %8s %10s %8s %9s", width, "precision", "device", "thr", "N x K",
               "M", "time", "GFLOP/s", "speedup", "weight MB", "SQNR dB", "rel err");
  if (priced) std::fprintf(out, " %12s", "cost/1M rows");
  std::fprintf(out, "\n");
  std::string previous_group;
  for (const BenchResult& r : report.results) {
    const std::string group = shape_label(r) + "/" + std::to_string(r.m);
    if (!previous_group.empty() && group != previous_group) std::fprintf(out, "\n");
    previous_group = group;
    if (!r.not_run.empty()) {
      std::fprintf(out, "%-*s %-6s %4s %-11s %4lld  n/a (%s)\n", width, r.precision.c_str(), device_label(r),
                   r.threads > 0 ? std::to_string(r.threads).c_str() : "-", shape_label(r).c_str(),
                   static_cast<long long>(r.m), r.not_run.c_str());
      continue;
    }
    std::fprintf(out, "%-*s %-6s %4s %-11s %4lld %10s %9.1f %7sx %10.2f %8s %9s", width, r.precision.c_str(),
                 device_label(r), r.threads > 0 ? std::to_string(r.threads).c_str() : "-", shape_label(r).c_str(),
                 static_cast<long long>(r.m), time_text(r.seconds).c_str(), r.gflops,
                 number_text(r.speedup, "%.2f").c_str(), static_cast<double>(r.weight_bytes) / 1e6,
                 number_text(r.sqnr_db, "%.1f").c_str(), number_text(r.relative_error, "%.1e").c_str());
    if (priced) std::fprintf(out, " %12s", number_text(r.cost_per_million_rows, "%.4f").c_str());
    std::fprintf(out, "\n");
  }
}

inline Json bench_json(const BenchReport& report) {
  Json results = Json::array(), not_run = Json::array();
  for (const BenchResult& r : report.results) {
    if (!r.not_run.empty()) {
      not_run.push_back(Json{
          {"device", r.device}, {"precision", r.precision}, {"n", r.n}, {"k", r.k}, {"m", r.m}, {"reason", r.not_run}});
      continue;
    }
    results.push_back(Json{{"device", r.device},
                           {"precision", r.precision},
                           {"stored", r.stored},
                           {"n", r.n},
                           {"k", r.k},
                           {"m", r.m},
                           {"threads", r.threads > 0 ? Json(r.threads) : Json(nullptr)},
                           {"seconds", r.seconds},
                           {"wall_seconds", r.wall_seconds},
                           {"cpu_seconds", json_number(r.cpu_seconds)},
                           {"repetitions", r.repetitions},
                           {"gflops", json_number(r.gflops)},
                           {"speedup_vs_fp32", json_number(r.speedup_vs_fp32)},
                           {"baseline", r.baseline},
                           {"speedup_vs_baseline", json_number(r.speedup)},
                           {"weight_bytes", r.weight_bytes},
                           {"sqnr_db", json_number(r.sqnr_db)},
                           {"relative_error", json_number(r.relative_error)},
                           {"cost_per_million_rows", json_number(r.cost_per_million_rows)}});
  }
  const auto text_or_null = [](const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); };
  return Json{{"schema", "shrink-bench/1"},
              {"product", "Y[M,N] = X[M,K] · W[N,K]^T"},
              {"machine", Json{{"cpu", report.cpu},
                               {"simd", report.simd},
                               {"threads", report.hardware_threads},
                               {"gpu", text_or_null(report.gpu)}}},
              {"timing", report.timing},
              {"gpu_timing", text_or_null(report.gpu_timing)},
              {"price_per_hour", json_number(report.price_per_hour)},
              {"results", std::move(results)},
              {"not_run", std::move(not_run)}};
}

namespace detail {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

inline std::string svg_number(double v) { return number_text(v, "%.1f"); }

// A round axis maximum at or above v: 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten.
inline double axis_max(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double f : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0})
    if (f * p >= v) return f * p;
  return 10 * p;
}

}  // namespace detail

// Which rows a chart shows: the CPU rows (bench.svg) or the GPU rows (bench-gpu.svg), each against its own baseline.
enum class ChartRows { cpu, gpu };

// A grouped bar chart: speedup against the baseline (fp32, or gpu-fp16-cublas) for every precision (bars) in every
// shape × M (groups), and below it the accuracy of each precision (median SQNR over the groups). Plain SVG 1.1,
// readable in any browser. Rows that were not run are left out.
inline std::string bench_svg(const BenchReport& report, ChartRows rows = ChartRows::cpu) {
  using detail::svg_number;
  using detail::xml_escape;
  static const char* kColors[] = {"#4e79a7", "#9c9c9c", "#f28e2b", "#e15759", "#59a14f",
                                  "#76b7b2", "#b07aa1", "#edc948", "#ff9da7", "#9c755f"};
  const bool gpu = rows == ChartRows::gpu;
  std::vector<std::string> precisions, groups;
  std::map<std::string, std::map<std::string, const BenchResult*>> by_group;  // group -> precision -> result
  std::vector<const BenchResult*> shown;
  for (const BenchResult& r : report.results)
    if ((r.device != "cpu") == gpu && r.not_run.empty()) shown.push_back(&r);
  const bool several_thread_counts = thread_counts(report).size() > 1;
  for (const BenchResult* row : shown) {
    const BenchResult& r = *row;
    const std::string name = series_name(r, several_thread_counts);
    if (std::find(precisions.begin(), precisions.end(), name) == precisions.end()) precisions.push_back(name);
    const std::string group = shape_label(r) + " M=" + std::to_string(r.m);
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
    by_group[group][name] = &r;
  }
  const double bar = 14, gap = 24, left = 70, top = 70, plot_h = 300, label_h = 50;
  const double bars_w = static_cast<double>(precisions.size()) * bar;
  const double group_w = std::max(bars_w + gap, 120.0);  // room for the group's label under few bars
  const double plot_w = std::max(640.0, static_cast<double>(groups.size()) * group_w);
  const double acc_top = top + plot_h + label_h + 30, acc_h = 180;
  const double legend_x = left + plot_w + 20, width = legend_x + 190;
  const double height = acc_top + acc_h + 110;
  double max_speedup = 1;
  for (const BenchResult* r : shown)
    if (std::isfinite(r->speedup)) max_speedup = std::max(max_speedup, r->speedup);
  const double y_max = detail::axis_max(max_speedup * 1.05);

  std::string s;
  s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + svg_number(width) + "\" height=\"" + svg_number(height) +
       "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + svg_number(left) +
       "\" y=\"28\" font-size=\"16\" font-weight=\"bold\">shrink bench: Y = X \u00b7 W\u1d40, " +
       (gpu ? xml_escape(shown.empty() ? std::string() : shown.front()->device)
            : xml_escape(report.cpu) + " (" + xml_escape(report.simd) + ")") +
       "</text>\n";
  s += "<text x=\"" + svg_number(left) + "\" y=\"50\">Speedup against " + (gpu ? "gpu-fp16-cublas" : "fp32") +
       (gpu ? "" : " at the same thread count") +
       " of the same shape and M, in the same run (higher is faster)</text>\n";
  // Speedup axis, grid and the 1x line.
  for (int t = 0; t <= 5; ++t) {
    const double v = y_max * t / 5, y = top + plot_h - plot_h * t / 5;
    s += "<line x1=\"" + svg_number(left) + "\" x2=\"" + svg_number(left + plot_w) + "\" y1=\"" + svg_number(y) +
         "\" y2=\"" + svg_number(y) + "\" stroke=\"#e0e0e0\"/>\n";
    s += "<text x=\"" + svg_number(left - 8) + "\" y=\"" + svg_number(y + 4) + "\" text-anchor=\"end\">" +
         number_text(v, "%.3g") + "x</text>\n";
  }
  const double one_y = top + plot_h - plot_h / y_max;
  s += "<line x1=\"" + svg_number(left) + "\" x2=\"" + svg_number(left + plot_w) + "\" y1=\"" + svg_number(one_y) +
       "\" y2=\"" + svg_number(one_y) + "\" stroke=\"black\" stroke-dasharray=\"4,3\"/>\n";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double gx = left + static_cast<double>(g) * group_w + (group_w - bars_w) / 2;
    for (std::size_t p = 0; p < precisions.size(); ++p) {
      const auto found = by_group[groups[g]].find(precisions[p]);
      if (found == by_group[groups[g]].end() || !std::isfinite(found->second->speedup)) continue;
      const double h = plot_h * std::min(found->second->speedup, y_max) / y_max;
      s += "<rect x=\"" + svg_number(gx + static_cast<double>(p) * bar) + "\" y=\"" + svg_number(top + plot_h - h) +
           "\" width=\"" + svg_number(bar - 2) + "\" height=\"" + svg_number(h) + "\" fill=\"" + kColors[p % 10] +
           "\"><title>" +
           xml_escape(precisions[p] + ", " + groups[g] + ": " + number_text(found->second->speedup, "%.2f") + "x, " +
                      time_text(found->second->seconds)) +
           "</title></rect>\n";
    }
    s += "<text x=\"" + svg_number(gx + bars_w / 2) + "\" y=\"" + svg_number(top + plot_h + 18) +
         "\" text-anchor=\"middle\">" + xml_escape(groups[g]) + "</text>\n";
  }
  s += "<line x1=\"" + svg_number(left) + "\" x2=\"" + svg_number(left) + "\" y1=\"" + svg_number(top) + "\" y2=\"" +
       svg_number(top + plot_h) + "\" stroke=\"black\"/>\n";

  // Accuracy: median SQNR of each precision over the groups (exact results drawn as "exact").
  s += "<text x=\"" + svg_number(left) + "\" y=\"" + svg_number(acc_top - 20) + "\">Accuracy against the " +
       (gpu ? "cpu " : "") +
       "fp32 output: SQNR in dB, median over shapes (higher is closer; 20 dB = 10% "
       "error)</text>\n";
  const double acc_max = 100,
               acc_bar = std::min(60.0, plot_w / std::max<double>(1, static_cast<double>(precisions.size())) - 10);
  for (int t = 0; t <= 5; ++t) {
    const double y = acc_top + acc_h - acc_h * t / 5;
    s += "<line x1=\"" + svg_number(left) + "\" x2=\"" + svg_number(left + plot_w) + "\" y1=\"" + svg_number(y) +
         "\" y2=\"" + svg_number(y) + "\" stroke=\"#e0e0e0\"/>\n";
    s += "<text x=\"" + svg_number(left - 8) + "\" y=\"" + svg_number(y + 4) + "\" text-anchor=\"end\">" +
         number_text(acc_max * t / 5, "%.0f") + "</text>\n";
  }
  for (std::size_t p = 0; p < precisions.size(); ++p) {
    std::vector<double> values;
    for (const std::string& g : groups) {
      const auto found = by_group[g].find(precisions[p]);
      if (found != by_group[g].end() && !std::isnan(found->second->sqnr_db)) values.push_back(found->second->sqnr_db);
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    const double median = values[values.size() / 2];
    const double x = left + 10 + static_cast<double>(p) * (acc_bar + 10);
    const double h = std::isfinite(median) ? acc_h * std::clamp(median, 0.0, acc_max) / acc_max : acc_h;
    s += "<rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(acc_top + acc_h - h) + "\" width=\"" +
         svg_number(acc_bar) + "\" height=\"" + svg_number(h) + "\" fill=\"" + kColors[p % 10] + "\" fill-opacity=\"" +
         (std::isfinite(median) ? "1" : "0.25") + "\"/>\n";
    s += "<text x=\"" + svg_number(x + acc_bar / 2) + "\" y=\"" + svg_number(acc_top + acc_h - h - 4) +
         "\" text-anchor=\"middle\" font-size=\"11\">" +
         (std::isfinite(median) ? number_text(median, "%.1f") : std::string("exact")) + "</text>\n";
    s += "<text transform=\"translate(" + svg_number(x + acc_bar / 2 + 4) + "," + svg_number(acc_top + acc_h + 10) +
         ") rotate(30)\" font-size=\"11\">" + xml_escape(precisions[p]) + "</text>\n";
  }
  // Legend.
  for (std::size_t p = 0; p < precisions.size(); ++p) {
    const double y = top + static_cast<double>(p) * 20;
    s += "<rect x=\"" + svg_number(legend_x) + "\" y=\"" + svg_number(y) + "\" width=\"12\" height=\"12\" fill=\"" +
         kColors[p % 10] + "\"/>\n";
    s += "<text x=\"" + svg_number(legend_x + 18) + "\" y=\"" + svg_number(y + 10) + "\">" + xml_escape(precisions[p]) +
         "</text>\n";
  }
  s += "<text x=\"" + svg_number(left) + "\" y=\"" + svg_number(height - 30) + "\" fill=\"#555\">" +
       xml_escape(gpu ? report.gpu_timing : report.timing) + ".</text>\n";
  s += "<text x=\"" + svg_number(left) + "\" y=\"" + svg_number(height - 12) + "\" fill=\"#555\">" +
       (gpu ? "int8/int4 weight-only (W8A16, W4A16) run at M \u2264 64 only; int8-w8a8 quantizes the activations per "
              "token within its time."
            : "fp16/bf16/int8 weight-only store the weight in fewer bits and compute in float; int8-w8a8 sums in "
              "int32.") +
       "</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace shrink::cli
