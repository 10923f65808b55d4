// `shrink compare A B`: error of B's tensors against A's, matched by name (quantized tensors dequantized
// first, AWQ's divided by their input scale: the weights themselves): MSE, max-abs error, SQNR dB and cosine per tensor
// and over all matched elements, with the sparsity and stored bytes of each side.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/checkpoint.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/metrics/error.hpp"

namespace shrink::cli {

namespace {

// A model tensor of one file: its logical shape and the bytes it is stored in (data + scales + zero points + input
// scale).
struct Side {
  std::vector<std::int64_t> shape;
  std::string stored_as;  // "F32", or the record's dtype ("int8", "fp8_e4m3", ...)
  std::int64_t bytes = 0;
};

// The model tensors of one file (a shard), added to `out` and `order`.
void model_tensors(const io::SafetensorsFile& file, std::map<std::string, Side>& out, std::vector<std::string>& order) {
  const std::vector<io::QuantizationRecord> records = io::quantization_records(file);
  const std::set<std::string> parameters = io::parameter_tensor_names(records);
  std::map<std::string, const io::QuantizationRecord*> record_of;
  for (const auto& r : records) record_of[r.name] = &r;
  for (const io::TensorInfo& t : file.tensors()) {
    if (parameters.count(t.name)) continue;
    Side side;
    const auto found = record_of.find(t.name);
    if (found != record_of.end()) {
      side.shape = found->second->shape;
      side.stored_as = found->second->dtype_name();
      for (const auto& d : io::stored_tensors(*found->second))
        side.bytes += static_cast<std::int64_t>(file.info(d.name).bytes);
    } else {
      side.shape = t.shape;
      side.stored_as = dtype_text(t.dtype);
      side.bytes = static_cast<std::int64_t>(t.bytes);
    }
    out.emplace(t.name, side);
    order.push_back(t.name);
  }
}

// The model tensors of a checkpoint, shard by shard.
std::map<std::string, Side> model_tensors(io::CheckpointReader& reader, std::vector<std::string>& order) {
  std::map<std::string, Side> out;
  for (std::size_t k = 0; k < reader.checkpoint().shards.size(); ++k) model_tensors(reader.shard(k), out, order);
  return out;
}

Json side_json(const Side& side, std::int64_t zeros, std::int64_t elements) {
  return Json{{"dtype", side.stored_as}, {"bytes", side.bytes}, {"zeros", zeros}, {"sparsity", fraction(zeros, elements)}};
}

// The command line of `shrink compare`.
void declare_compare_options(ArgParser& args) {
  args.positional("A", "reference .safetensors file, checkpoint directory or sharded index .json")
      .positional("B", "the file or checkpoint to compare with it");
  args.flag("json", "print JSON on stdout instead of a table");
}

// What the comparison found: the compared tensors (JSON entries and table lines), those left out, and the totals.
struct Comparison {
  Json tensors = Json::array();
  Json skipped = Json::array();
  Json only_a = Json::array(), only_b = Json::array();
  metrics::ErrorSums totals;            // over the tensors that differ
  metrics::ErrorSums unchanged_totals;  // over the identical ones
  std::int64_t unchanged = 0;           // tensors whose values are the same bits in A and B
  std::int64_t bytes_a = 0, bytes_b = 0, zeros_a = 0, zeros_b = 0, elements = 0;
  std::vector<std::string> lines;
};

// The table line of one compared tensor.
std::string tensor_line(const std::string& name, const Side& sa, const Side& sb, const metrics::ErrorStats& e,
                        std::int64_t za, std::int64_t zb) {
  char line[768];
  std::snprintf(line, sizeof line,
                "%s %s: %s -> %s, mse %.3e, max-abs %.3e, SQNR %s dB, cosine %.6f, sparsity %.4f -> %.4f", name.c_str(),
                shape_text(sa.shape).c_str(), sa.stored_as.c_str(), sb.stored_as.c_str(), e.mse, e.max_abs,
                number_text(e.sqnr_db, "%.2f").c_str(), e.cosine, fraction(za, e.count), fraction(zb, e.count));
  return line;
}

// Compares one tensor present in both files: adds its figures to `c`, or lists it as skipped with the reason.
void compare_tensor(io::CheckpointReader& a, io::CheckpointReader& b, const std::string& name, const Side& sa,
                    const Side& sb, Comparison& c) {
  if (sa.shape != sb.shape) {
    c.skipped.push_back(
        {{"name", name}, {"reason", "shape " + shape_text(sa.shape) + " in A, " + shape_text(sb.shape) + " in B"}});
    return;
  }
  const std::vector<float> x = io::read_float(a.file_of(name), name);
  const std::vector<float> y = io::read_float(b.file_of(name), name);
  if (x.empty()) {
    c.skipped.push_back({{"name", name}, {"reason", "no elements"}});
    return;
  }
  // Flat views: the elements match one to one, and stored ranks may exceed what a Shape holds.
  const TensorView<const float> vx(x.data(), Shape{static_cast<std::int64_t>(x.size())});
  const TensorView<const float> vy(y.data(), Shape{static_cast<std::int64_t>(y.size())});
  metrics::ErrorSums sums;
  try {
    sums = metrics::error_sums(vx, vy);
  } catch (const shrink::Error&) {
    c.skipped.push_back({{"name", name}, {"reason", "NaN or inf values"}});
    return;
  }
  // The overall figures come from the tensors that differ: copied tensors would drown the error of the changed ones.
  const bool identical = x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  metrics::accumulate(identical ? c.unchanged_totals : c.totals, sums);
  c.unchanged += identical;
  c.elements += static_cast<std::int64_t>(x.size());
  const metrics::ErrorStats e = metrics::stats_from_sums(sums);
  const std::int64_t za = count_zeros(x), zb = count_zeros(y);
  c.bytes_a += sa.bytes;
  c.bytes_b += sb.bytes;
  c.zeros_a += za;
  c.zeros_b += zb;
  c.tensors.push_back({{"name", name},
                       {"shape", sa.shape},
                       {"elements", e.count},
                       {"mse", e.mse},
                       {"max_abs", e.max_abs},
                       {"sqnr_db", json_number(e.sqnr_db)},
                       {"cosine", e.cosine},
                       {"changed", !identical},
                       {"a", side_json(sa, za, e.count)},
                       {"b", side_json(sb, zb, e.count)}});
  c.lines.push_back(tensor_line(name, sa, sb, e, za, zb));
}

// Every tensor of A matched by name in B, in A's order; then the tensors of B that A lacks.
Comparison compare_files(io::CheckpointReader& a, io::CheckpointReader& b, const Progress& progress) {
  std::vector<std::string> order_a, order_b;
  const std::map<std::string, Side> side_a = model_tensors(a, order_a);
  const std::map<std::string, Side> side_b = model_tensors(b, order_b);
  Comparison c;
  for (std::size_t i = 0; i < order_a.size(); ++i) {
    const std::string& name = order_a[i];
    const auto found = side_b.find(name);
    if (found == side_b.end()) {
      c.only_a.push_back(name);
      continue;
    }
    progress.step(name, i, order_a.size());
    compare_tensor(a, b, name, side_a.at(name), found->second, c);
  }
  for (const std::string& name : order_b)
    if (!side_a.count(name)) c.only_b.push_back(name);
  return c;
}

// The sums the overall figures come from: the changed tensors, or every compared one when none changed.
const metrics::ErrorSums& overall_sums(const Comparison& c) {
  return c.totals.count > 0 ? c.totals : c.unchanged_totals;
}

// The comparison as JSON on stdout (--json).
void print_json_report(const std::string& a, const std::string& b, const Comparison& c) {
  const metrics::ErrorSums& sums = overall_sums(c);
  const metrics::ErrorStats overall = metrics::stats_from_sums(sums);
  const std::int64_t counted = static_cast<std::int64_t>(c.tensors.size()) - (c.totals.count > 0 ? c.unchanged : 0);
  Json report;
  report["a"] = a;
  report["b"] = b;
  report["tensors"] = c.tensors;
  report["overall"] = {
      {"tensors", counted},
      {"elements", sums.count},
      {"unchanged_tensors", c.unchanged},
      {"mse", overall.mse},
      {"max_abs", sums.max_abs},
      {"sqnr_db", json_number(overall.sqnr_db)},
      {"cosine", overall.cosine},
      {"a", {{"bytes", c.bytes_a}, {"zeros", c.zeros_a}, {"sparsity", fraction(c.zeros_a, c.elements)}}},
      {"b", {{"bytes", c.bytes_b}, {"zeros", c.zeros_b}, {"sparsity", fraction(c.zeros_b, c.elements)}}}};
  report["only_in_a"] = c.only_a;
  report["only_in_b"] = c.only_b;
  report["skipped"] = c.skipped;
  print_json(report);
}

// The comparison as a table: one line per compared tensor, those left out, and the overall line.
void print_table(const Comparison& c) {
  const metrics::ErrorSums& sums = overall_sums(c);
  const metrics::ErrorStats overall = metrics::stats_from_sums(sums);
  const bool changed_only = c.totals.count > 0;
  const std::size_t counted = c.tensors.size() - (changed_only ? static_cast<std::size_t>(c.unchanged) : 0);
  for (const auto& l : c.lines) std::printf("%s\n", l.c_str());
  for (const auto& s : c.skipped)
    std::printf("skipped %s: %s\n", s["name"].get<std::string>().c_str(), s["reason"].get<std::string>().c_str());
  for (const auto& n : c.only_a) std::printf("only in A: %s\n", n.get<std::string>().c_str());
  for (const auto& n : c.only_b) std::printf("only in B: %s\n", n.get<std::string>().c_str());
  if (changed_only && c.unchanged > 0)
    std::printf("unchanged: %lld tensors, identical in A and B (left out of the overall error)\n",
                static_cast<long long>(c.unchanged));
  std::printf(
      "overall (%zu %s tensors, %lld elements): mse %.3e, max-abs %.3e, SQNR %s dB, cosine %.6f; "
      "all %zu compared: A %s sparsity %.4f, B %s sparsity %.4f\n",
      counted, changed_only ? "changed" : "identical", static_cast<long long>(sums.count), overall.mse, sums.max_abs,
      number_text(overall.sqnr_db, "%.2f").c_str(), overall.cosine, c.tensors.size(), bytes_text(c.bytes_a).c_str(),
      fraction(c.zeros_a, c.elements), bytes_text(c.bytes_b).c_str(), fraction(c.zeros_b, c.elements));
}

}  // namespace

int run_compare_command(int argc, char** argv) {
  const std::string command = "shrink compare";
  return run_command(command, [&] {
    ArgParser args(command,
                   "Compare two safetensors files tensor by tensor (matched by name; tensors quantized or cast under\n"
                   "shrink's convention are dequantized first, and divided by their input scale when they have one:\n"
                   "the weights themselves), taking A as the reference: MSE, max-abs error, SQNR in dB and cosine\n"
                   "similarity per tensor and over all compared elements, with each side's sparsity and stored bytes\n"
                   "(integers + scales + zero points + input scales). The overall error covers the tensors that\n"
                   "differ (identical ones are counted apart); tensors only in one file, with different shapes, or\n"
                   "holding NaN/inf are listed and left out of the totals.");
    declare_compare_options(args);
    if (!args.parse(argc, argv)) return kExitOk;
    const io::Checkpoint a = io::open_checkpoint(args.arg("A"));
    const io::Checkpoint b = io::open_checkpoint(args.arg("B"));
    io::CheckpointReader reader_a(a), reader_b(b);  // one shard of each open at a time
    const Progress progress(command);
    const Comparison comparison = compare_files(reader_a, reader_b, progress);
    if (args.flag_set("json"))
      print_json_report(args.arg("A"), args.arg("B"), comparison);
    else
      print_table(comparison);
    return kExitOk;
  });
}

}  // namespace shrink::cli
