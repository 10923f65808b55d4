// Calibration statistics of a model's Linears in one safetensors file: collected once where the model runs (an
// inference codebase, examples/llm), read where a method is applied offline (the `shrink` command's GPTQ, SparseGPT,
// AWQ, Wanda). Layout, per Linear named as its weight without ".weight" (e.g. "model.layers.0.self_attn.q_proj"):
//   "<linear>.hessian"         F64 (or F32) [in, in]  H = (2 / n) Σ_t x_tᵀ x_t over the n calibration rows
//                                                    (quant/hessian.hpp), symmetric
//   "<linear>.act_norm"        F64 (or F32) [in]      ‖x_j‖₂ = sqrt(Σ_t x_tj²)   (Wanda's, prune/wanda.hpp)
//   "<linear>.act_abs_mean"    F64 (or F32) [in]      (1 / n) Σ_t |x_tj|          (AWQ's)
//   __metadata__ "<linear>.samples"        n, decimal: every Linear with a statistic has it
//   __metadata__ "<linear>.same_input_as"  another Linear whose statistics stand for this one's (q, k and v read one
//                                          input: their Hessian is stored once); one level, to a Linear with tensors
//   __metadata__ "shrink.calibration"      "1", the layout's version
// Any statistic may be absent. The file is untrusted: every name, dtype, shape, count and alias is checked when it is
// opened, and every value (finite, H symmetric with a non-negative diagonal, norms and means >= 0) when it is read,
// each failure one Error naming the tensor or key and what was expected.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/safetensors.hpp"
#include "shrink/quant/hessian.hpp"

namespace shrink::io {

inline constexpr const char* kCalibrationVersionKey = "shrink.calibration";
inline constexpr const char* kCalibrationVersion = "1";

// One Linear's input over the calibration rows; an absent statistic is empty.
struct LinearInputStats {
  std::int64_t samples = 0;          // calibration rows (tokens)
  std::vector<double> hessian;       // [in, in] row-major
  std::vector<double> act_norm;      // [in]
  std::vector<double> act_abs_mean;  // [in]
};

namespace calibration_detail {

inline const char* const kSuffixes[] = {".hessian", ".act_norm", ".act_abs_mean"};

// A decimal count >= 1 of at most 18 digits.
inline bool parse_count(const std::string& text, std::int64_t& out) {
  if (text.empty() || text.size() > 18) return false;  // at most 999,999,999,999,999,999: no overflow
  std::int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < 1) return false;
  out = v;
  return true;
}

// The width `in` of a Linear's statistics, or 0 when it has none; an Error when they disagree.
inline std::int64_t width_of(const std::string& linear, const LinearInputStats& s, const char* fn) {
  std::int64_t in = 0;
  auto agree = [&](std::int64_t w, const char* what) {
    if (in != 0 && w != in)
      fail(fn, ("linears[\"" + linear + "\"]." + what + ".size()").c_str(), w,
           "a width of " + std::to_string(in) + " features, as its other statistics");
    in = w;
  };
  if (!s.hessian.empty()) {
    const auto w = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(s.hessian.size()))));
    if (w * w != static_cast<std::int64_t>(s.hessian.size()))
      fail(fn, ("linears[\"" + linear + "\"].hessian.size()").c_str(), s.hessian.size(), "a square count in·in");
    agree(w, "hessian");
  }
  if (!s.act_norm.empty()) agree(static_cast<std::int64_t>(s.act_norm.size()), "act_norm");
  if (!s.act_abs_mean.empty()) agree(static_cast<std::int64_t>(s.act_abs_mean.size()), "act_abs_mean");
  return in;
}

}  // namespace calibration_detail

// Writes `linears` (and the aliases `same_input_as`: linear -> the Linear whose statistics it shares) to `path`,
// atomically (io/safetensors.hpp's writer). Everything is checked before the file is created: each Linear has at
// least one statistic of one width, samples >= 1, finite values; each alias names a Linear in `linears` and is not
// one itself.
inline void save_calibration_stats(const std::string& path, const std::map<std::string, LinearInputStats>& linears,
                                   const std::map<std::string, std::string>& same_input_as = {}) {
  const char* fn = "shrink::io::save_calibration_stats";
  std::vector<TensorDeclaration> tensors;
  std::map<std::string, std::string> metadata{{kCalibrationVersionKey, kCalibrationVersion}};
  for (const auto& [linear, s] : linears) {
    const std::int64_t in = calibration_detail::width_of(linear, s, fn);
    if (in == 0)
      fail(fn, ("linears[\"" + linear + "\"]").c_str(), "no statistic", "a Hessian, act_norm or act_abs_mean");
    if (s.samples < 1) fail(fn, ("linears[\"" + linear + "\"].samples").c_str(), s.samples, "at least 1");
    if (same_input_as.count(linear))
      fail(fn, ("same_input_as[\"" + linear + "\"]").c_str(), same_input_as.at(linear),
           "no alias for a Linear that has statistics of its own");
    for (const std::vector<double>* v : {&s.hessian, &s.act_norm, &s.act_abs_mean})
      for (double x : *v)
        if (!std::isfinite(x)) fail(fn, ("linears[\"" + linear + "\"]").c_str(), x, "finite statistics");
    metadata[linear + ".samples"] = std::to_string(s.samples);
    if (!s.hessian.empty()) tensors.push_back({linear + ".hessian", ScalarType::f64, {in, in}});
    if (!s.act_norm.empty()) tensors.push_back({linear + ".act_norm", ScalarType::f64, {in}});
    if (!s.act_abs_mean.empty()) tensors.push_back({linear + ".act_abs_mean", ScalarType::f64, {in}});
  }
  for (const auto& [linear, target] : same_input_as) {
    if (!linears.count(target))
      fail(fn, ("same_input_as[\"" + linear + "\"]").c_str(), target, "a Linear with statistics in `linears`");
    metadata[linear + ".same_input_as"] = target;
  }
  SafetensorsWriter writer(path, tensors, metadata);
  for (const auto& [linear, s] : linears) {
    if (!s.hessian.empty()) writer.write(linear + ".hessian", s.hessian.data(), s.hessian.size() * sizeof(double));
    if (!s.act_norm.empty()) writer.write(linear + ".act_norm", s.act_norm.data(), s.act_norm.size() * sizeof(double));
    if (!s.act_abs_mean.empty())
      writer.write(linear + ".act_abs_mean", s.act_abs_mean.data(), s.act_abs_mean.size() * sizeof(double));
  }
  writer.finish();
}

// A calibration statistics file, opened and checked; statistics are read one at a time (a Hessian is copied out of
// the mapping when asked for, so a method holds one Linear's at a time).
class CalibrationStatsFile {
 public:
  explicit CalibrationStatsFile(const std::string& path) : file_(path) {
    const char* fn = "shrink::io::CalibrationStatsFile";
    const auto& meta = file_.metadata();
    const auto version = meta.find(kCalibrationVersionKey);
    if (version == meta.end() || version->second != kCalibrationVersion)
      fail(fn, path + ": __metadata__ \"" + kCalibrationVersionKey +
                   "\" = " + (version == meta.end() ? std::string("(absent)") : detail::quoted(version->second)) +
                   ": expected \"" + kCalibrationVersion + "\" (a file written by save_calibration_stats)");
    for (const TensorInfo& t : file_.tensors()) {
      std::string linear, kind;
      for (const char* suffix : calibration_detail::kSuffixes)
        if (detail::ends_with(t.name, suffix)) {
          linear = t.name.substr(0, t.name.size() - std::string(suffix).size());
          kind = suffix + 1;
        }
      if (linear.empty())
        fail(fn, path + ": tensor " + detail::quoted(t.name) +
                     ": expected a name \"<linear>.hessian\", \"<linear>.act_norm\" or \"<linear>.act_abs_mean\"");
      if (t.dtype != ScalarType::f64 && t.dtype != ScalarType::f32)
        fail(fn, path + ": tensor " + detail::quoted(t.name) + " has dtype " + safetensors_dtype_name(t.dtype) +
                     ": expected F64 or F32");
      const bool square = kind == "hessian";
      const std::size_t rank = square ? 2 : 1;
      if (t.shape.size() != rank || t.shape[0] < 1 || (square && t.shape[1] != t.shape[0]))
        fail(fn, path + ": tensor " + detail::quoted(t.name) + " has shape " + detail::dims_text(t.shape) +
                     ": expected " + (square ? "[in, in]" : "[in]") + " with in >= 1");
      Entry& e = entries_[linear];
      if (e.features != 0 && e.features != t.shape[0])
        fail(fn, path + ": tensor " + detail::quoted(t.name) + " has " + std::to_string(t.shape[0]) +
                     " features: expected " + std::to_string(e.features) + ", as the other statistics of " +
                     detail::quoted(linear));
      e.features = t.shape[0];
      e.tensors[kind] = t.name;
    }
    for (auto& [linear, e] : entries_) {
      const auto samples = meta.find(linear + ".samples");
      if (samples == meta.end() || !calibration_detail::parse_count(samples->second, e.samples))
        fail(fn, path + ": __metadata__ " + detail::quoted(linear + ".samples") + " = " +
                     (samples == meta.end() ? std::string("(absent)") : detail::quoted(samples->second)) +
                     ": expected the number of calibration rows, a decimal count >= 1");
    }
    for (const auto& [key, target] : meta) {
      if (!detail::ends_with(key, ".same_input_as")) continue;
      const std::string linear = key.substr(0, key.size() - std::string(".same_input_as").size());
      if (entries_.count(linear))
        fail(fn, path + ": __metadata__ " + detail::quoted(key) + ": " + detail::quoted(linear) +
                     " has statistics of its own: expected an alias only for a Linear without them");
      if (!entries_.count(target))
        fail(fn, path + ": __metadata__ " + detail::quoted(key) + " = " + detail::quoted(target) +
                     ": expected a Linear with statistics in the file");
      aliases_[linear] = target;
    }
  }

  const std::string& path() const { return file_.path(); }

  // Every Linear with statistics, its own or an alias's, sorted.
  std::vector<std::string> linears() const {
    std::set<std::string> names;
    for (const auto& e : entries_) names.insert(e.first);
    for (const auto& a : aliases_) names.insert(a.first);
    return {names.begin(), names.end()};
  }
  bool contains(const std::string& linear) const { return entries_.count(linear) || aliases_.count(linear); }
  // The Linear whose statistics stand for `linear`: the one its same_input_as names, else itself. Linears with one
  // source read one input, so they share its Hessian and the factors made from it.
  const std::string& source(const std::string& linear) const {
    const auto alias = aliases_.find(linear);
    if (alias != aliases_.end()) return alias->second;
    entry(linear, "source");  // an Error naming the Linear when the file has no statistics for it
    return entries_.find(linear)->first;
  }
  std::int64_t samples(const std::string& linear) const { return entry(linear, "samples").samples; }
  std::int64_t features(const std::string& linear) const { return entry(linear, "features").features; }
  bool has_hessian(const std::string& linear) const { return has(linear, "hessian"); }
  bool has_act_norm(const std::string& linear) const { return has(linear, "act_norm"); }
  bool has_act_abs_mean(const std::string& linear) const { return has(linear, "act_abs_mean"); }

  // H of `linear`, symmetric to 1e-6 relative (then made exactly symmetric: the mean of both triangles), finite,
  // with a non-negative diagonal.
  quant::Hessian hessian(const std::string& linear) const {
    const char* fn = "shrink::io::CalibrationStatsFile::hessian";
    const Entry& e = entry(linear, "hessian");
    const std::string& name = tensor(linear, e, "hessian", fn);
    quant::Hessian h;
    h.features = e.features;
    h.samples = e.samples;
    h.values = values(name, fn);
    const std::int64_t n = e.features;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = h.values[static_cast<std::size_t>(i * n + i)];
      if (d < 0.0)
        fail(fn, path() + ": " + name + "[" + std::to_string(i) + ", " + std::to_string(i) + "] = " + to_text(d) +
                     ": expected a non-negative diagonal (a sum of squares)");
      for (std::int64_t j = 0; j < i; ++j) {
        double& a = h.values[static_cast<std::size_t>(i * n + j)];
        double& b = h.values[static_cast<std::size_t>(j * n + i)];
        const double scale = std::max(std::fabs(a), std::fabs(b));
        if (std::fabs(a - b) > 1e-6 * scale)
          fail(fn, path() + ": " + name + "[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + to_text(a) +
                       " but [" + std::to_string(j) + ", " + std::to_string(i) + "] = " + to_text(b) +
                       ": expected a symmetric matrix");
        a = b = a / 2 + b / 2;
      }
    }
    return h;
  }
  std::vector<double> act_norm(const std::string& linear) const { return nonnegative(linear, "act_norm"); }
  std::vector<double> act_abs_mean(const std::string& linear) const { return nonnegative(linear, "act_abs_mean"); }

 private:
  struct Entry {
    std::int64_t features = 0;
    std::int64_t samples = 0;
    std::map<std::string, std::string> tensors;  // kind -> tensor name
  };

  const Entry& entry(const std::string& linear, const char* what) const {
    const auto alias = aliases_.find(linear);
    const auto found = entries_.find(alias == aliases_.end() ? linear : alias->second);
    if (found == entries_.end())
      fail((std::string("shrink::io::CalibrationStatsFile::") + what).c_str(),
           path() + ": no statistics for " + detail::quoted(linear) +
               ": expected a Linear of the model the file was collected on");
    return found->second;
  }
  bool has(const std::string& linear, const char* kind) const {
    return contains(linear) && entry(linear, kind).tensors.count(kind) != 0;
  }
  const std::string& tensor(const std::string& linear, const Entry& e, const char* kind, const char* fn) const {
    const auto t = e.tensors.find(kind);
    if (t == e.tensors.end())
      fail(fn, path() + ": no " + kind + " for " + detail::quoted(linear) + ": expected a tensor " +
                   detail::quoted(linear + "." + kind) + " (or one of the Linear it shares its input with)");
    return t->second;
  }
  // A statistic's values widened to double, every one finite.
  std::vector<double> values(const std::string& name, const char* fn) const {
    const TensorInfo& t = file_.info(name);
    const ByteView bytes = file_.bytes(name);
    const std::size_t count = static_cast<std::size_t>(t.numel());
    std::vector<double> out(count);
    for (std::size_t k = 0; k < count; ++k) {
      if (t.dtype == ScalarType::f64) {
        std::memcpy(&out[k], bytes.data + k * sizeof(double), sizeof(double));
      } else {
        float f;
        std::memcpy(&f, bytes.data + k * sizeof(float), sizeof(float));
        out[k] = f;
      }
      if (!std::isfinite(out[k]))
        fail(fn,
             path() + ": " + name + "[" + std::to_string(k) + "] = " + to_text(out[k]) + ": expected finite values");
    }
    return out;
  }
  std::vector<double> nonnegative(const std::string& linear, const char* kind) const {
    const std::string fn = std::string("shrink::io::CalibrationStatsFile::") + kind;
    const std::string& name = tensor(linear, entry(linear, kind), kind, fn.c_str());
    std::vector<double> v = values(name, fn.c_str());
    for (std::size_t k = 0; k < v.size(); ++k)
      if (v[k] < 0.0)
        fail(fn.c_str(),
             path() + ": " + name + "[" + std::to_string(k) + "] = " + to_text(v[k]) + ": expected values >= 0");
    return v;
  }

  SafetensorsFile file_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::string> aliases_;
};

}  // namespace shrink::io
