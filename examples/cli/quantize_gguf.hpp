// `shrink quantize IN OUT --format gguf --type T`: a llama.cpp model file (GGUF) requantized into one of the block
// formats llama.cpp reads, each tensor's type chosen as llama-quantize chooses it for that file type, the blocks by
// llama.cpp's reference round-to-nearest quantizer (io/gguf_requantize.hpp); prints each tensor's plan and the
// totals (--json: as JSON). Options of the safetensors path that do not apply are refused by name.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "args.hpp"
#include "paths.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_requantize.hpp"

namespace shrink::cli {

inline std::uint32_t gguf_target_type(const std::string& name) {
  using io::GgufType;
  const std::pair<const char*, GgufType> types[] = {
      {"q4_0", GgufType::q4_0}, {"q4_1", GgufType::q4_1}, {"q5_0", GgufType::q5_0}, {"q5_1", GgufType::q5_1},
      {"q8_0", GgufType::q8_0}, {"f16", GgufType::f16},   {"bf16", GgufType::bf16}, {"f32", GgufType::f32}};
  for (const auto& [text, type] : types)
    if (name == text) return static_cast<std::uint32_t>(type);
  throw UsageError("--type = '" + name + "': expected one of q4_0|q4_1|q5_0|q5_1|q8_0|f16|bf16|f32");
}

inline int run_quantize_gguf(const std::string& command, const ArgParser& args) {
  for (const char* option :
       {"dtype", "scheme", "granularity", "axis", "group-size", "calib", "restricted-range", "reduce-range", "include",
        "exclude", "force", "calibration", "bits", "act-order", "static-groups", "damp", "min-samples", "no-clip"})
    if (args.has(option))
      throw UsageError(std::string("--") + option +
                       " does not apply to --format gguf: the type of each tensor follows --type as llama-quantize "
                       "chooses it");
  const std::string method = args.choice("method", {"rtn", "gptq", "awq", "hqq"}, "rtn");
  if (method != "rtn")
    throw UsageError("--format gguf writes llama.cpp's round-to-nearest blocks only: --method " + method +
                     " is not available for it yet (write --method rtn)");
  if (!args.has("type")) throw UsageError("--format gguf needs --type q4_0|q4_1|q5_0|q5_1|q8_0|f16|bf16|f32");
  const std::uint32_t type = gguf_target_type(args.text("type", ""));
  const std::string in = args.arg("IN");
  const std::string out = args.arg("OUT");
  const io::GgufFile input = io::GgufFile::open(in);
  require_distinct_output(in, out);
  const Progress progress(command);
  std::size_t done = 0;
  // Each tensor announced as it is written, and where Ctrl-C stops the command (OUT is then left as it was).
  const std::vector<io::GgufTensorPlan> plans = io::requantize_gguf(
      input, out, type, [&](const io::GgufTensorPlan& p) { progress.step(p.name, done++, input.tensors().size()); });
  const io::GgufFile written = io::GgufFile::open(out);
  std::uint64_t bytes_in = 0, bytes_out = 0;
  for (const auto& t : input.tensors()) bytes_in += t.bytes;
  for (const auto& t : written.tensors()) bytes_out += t.bytes;
  if (args.flag_set("json")) {
    Json tensors = Json::array();
    for (const io::GgufTensorPlan& p : plans)
      tensors.push_back({{"name", p.name},
                         {"from", io::gguf_type_name(p.from_type)},
                         {"to", io::gguf_type_name(p.to_type)},
                         {"copied", p.copied},
                         {"note", p.note}});
    const Json summary = {{"input", in},
                          {"output", out},
                          {"format", "gguf"},
                          {"type", io::gguf_type_name(type)},
                          {"tensors", tensors},
                          {"tensor_bytes_in", bytes_in},
                          {"tensor_bytes_out", bytes_out}};
    std::printf("%s\n", summary.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s -> %s: GGUF, linears %s (llama-quantize's choice per tensor, round to nearest)\n", in.c_str(),
              out.c_str(), io::gguf_type_name(type));
  for (const io::GgufTensorPlan& p : plans)
    std::printf("  %-32s %-5s -> %-5s%s%s\n", p.name.c_str(), io::gguf_type_name(p.from_type),
                io::gguf_type_name(p.to_type), p.copied ? "  (copied)" : "",
                p.note.empty() ? "" : ("  " + p.note).c_str());
  std::printf("tensor bytes: %llu -> %llu\n", static_cast<unsigned long long>(bytes_in),
              static_cast<unsigned long long>(bytes_out));
  return kExitOk;
}

}  // namespace shrink::cli
