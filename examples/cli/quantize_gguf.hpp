// `shrink quantize IN OUT --format gguf --type T`: a llama.cpp model file (GGUF) requantized into one of the block
// formats llama.cpp reads, each tensor's type chosen as llama-quantize chooses it for that file type, the blocks by
// llama.cpp's reference round-to-nearest quantizer (io/gguf_requantize.hpp); prints each tensor's plan and the
// totals (--json: as JSON). Options of the safetensors path that do not apply are refused by name. IN may also be a
// Hugging Face Llama checkpoint (a directory, model.safetensors or model.safetensors.index.json, with config.json and
// the tokenizer files beside it): it is first written in llama's layout (io/hf_llama_gguf.hpp) as a GGUF beside OUT,
// which is removed when the command ends.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "gguf_methods.hpp"
#include "paths.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_requantize.hpp"
#include "shrink/io/hf_llama_gguf.hpp"

namespace shrink::cli {

inline const char* gguf_type_choices() { return "q4_0|q4_1|q5_0|q5_1|q8_0|q4_k|q5_k|q6_k|f16|bf16|f32"; }

inline std::uint32_t gguf_target_type(const std::string& name) {
  using io::GgufType;
  const std::pair<const char*, GgufType> types[] = {
      {"q4_0", GgufType::q4_0}, {"q4_1", GgufType::q4_1}, {"q5_0", GgufType::q5_0}, {"q5_1", GgufType::q5_1},
      {"q8_0", GgufType::q8_0}, {"q4_k", GgufType::q4_k}, {"q5_k", GgufType::q5_k}, {"q6_k", GgufType::q6_k},
      {"f16", GgufType::f16},   {"bf16", GgufType::bf16}, {"f32", GgufType::f32}};
  for (const auto& [text, type] : types)
    if (name == text) return static_cast<std::uint32_t>(type);
  throw UsageError("--type = '" + name + "': expected one of " + gguf_type_choices());
}

// IN of --format gguf: a GGUF as it is, or a Hugging Face Llama checkpoint written in llama's layout first, as a GGUF
// beside OUT that lives as long as this object.
class GgufSource {
 public:
  GgufSource(const std::string& in, const std::string& out) {
    if (!hf_checkpoint(in)) {
      file_.emplace(io::GgufFile::open(in));
      return;
    }
    const std::size_t slash = out.find_last_of('/');
    temp_ = (slash == std::string::npos ? std::string() : out.substr(0, slash + 1)) + "." +
            (slash == std::string::npos ? out : out.substr(slash + 1)) + ".source.gguf";
    const io::HfGgufWritten written = io::write_hf_llama_gguf(in, temp_);
    tensors_ = written.tensors.size();
    pre_ = written.pre;
    file_.emplace(io::GgufFile::open(temp_));
  }
  ~GgufSource() {
    file_.reset();
    if (!temp_.empty()) std::remove(temp_.c_str());
  }
  GgufSource(const GgufSource&) = delete;
  GgufSource& operator=(const GgufSource&) = delete;

  const io::GgufFile& file() const { return *file_; }
  bool from_checkpoint() const { return !temp_.empty(); }
  std::size_t checkpoint_tensors() const { return tensors_; }
  const std::string& tokenizer_pre() const { return pre_; }

 private:
  // A directory, a .safetensors file or a .json index: a Hugging Face checkpoint; anything else is read as a GGUF.
  static bool hf_checkpoint(const std::string& in) {
    struct stat info {};
    if (::stat(in.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) return true;
    for (const std::string tail : {".safetensors", ".json"})
      if (in.size() > tail.size() && in.compare(in.size() - tail.size(), tail.size(), tail) == 0) return true;
    return false;
  }

  std::optional<io::GgufFile> file_;
  std::string temp_, pre_;
  std::size_t tensors_ = 0;
};

// The method flags for --format gguf, each refused where it does not apply.
inline GgufMethod read_gguf_method(const ArgParser& args) {
  GgufMethod m;
  m.name = args.choice("method", {"rtn", "gptq", "awq", "hqq"}, "rtn");
  auto only_for = [&](const char* option, std::initializer_list<const char*> methods) {
    if (!args.has(option)) return;
    for (const char* name : methods)
      if (m.name == name) return;
    std::string list;
    for (const char* name : methods) list += (list.empty() ? "" : " or ") + std::string(name);
    throw UsageError(std::string("--") + option + " does not apply to --method " + m.name + ": only to " + list);
  };
  only_for("calibration", {"gptq", "awq"});
  only_for("act-order", {"gptq"});
  only_for("static-groups", {"gptq"});
  only_for("damp", {"gptq"});
  only_for("min-samples", {"gptq", "awq"});
  only_for("no-clip", {"awq"});
  m.gptq.act_order = args.flag_set("act-order");
  m.gptq.static_groups = m.gptq.act_order || args.flag_set("static-groups");  // a block is a run of columns
  m.gptq.damp_percent = args.number("damp", 0.0, 100.0, 0.01);
  m.min_samples = args.integer("min-samples", 1, INT64_MAX, 128);
  m.clip = !args.flag_set("no-clip");
  if (m.name == "gptq" || m.name == "awq") {
    if (!args.has("calibration"))
      throw UsageError("--method " + m.name +
                       " needs --calibration FILE: the statistics of each linear's input, named as the GGUF's "
                       "tensors (blk.N.attn_q, ...; shrink_llm --write-calibration-stats writes them)");
    m.calibration = *args.value("calibration");
  }
  return m;
}

inline int run_quantize_gguf(const std::string& command, const ArgParser& args) {
  for (const char* option : {"dtype", "scheme", "granularity", "axis", "group-size", "calib", "restricted-range",
                             "reduce-range", "include", "exclude", "force", "bits"})
    if (args.has(option))
      throw UsageError(std::string("--") + option +
                       " does not apply to --format gguf: the type of each tensor follows --type as llama-quantize "
                       "chooses it");
  const GgufMethod method = read_gguf_method(args);
  if (!args.has("type")) throw UsageError(std::string("--format gguf needs --type ") + gguf_type_choices());
  const std::uint32_t type = gguf_target_type(args.text("type", ""));
  const std::string in = args.arg("IN");
  const std::string out = args.arg("OUT");
  require_distinct_output(in, out);
  const GgufSource source(in, out);
  const io::GgufFile& input = source.file();
  const Progress progress(command);
  std::size_t done = 0;
  std::optional<GgufMethodRun> run;  // the method's blocks for the linears (rtn: llama.cpp's reference path)
  if (method.name != "rtn") run.emplace(input, io::plan_gguf_requantize(input, type), method);
  io::GgufTensorEncoder encoder;
  if (run)
    encoder = [&run](const io::GgufTensorPlan& p, const io::GgufTensorInfo& t, std::uint8_t* o, std::size_t bytes) {
      return run->encode(p, t, o, bytes);
    };
  // Each tensor announced as it is written, and where Ctrl-C stops the command (OUT is then left as it was).
  const std::vector<io::GgufTensorPlan> plans = io::requantize_gguf(
      input, out, type, [&](const io::GgufTensorPlan& p) { progress.step(p.name, done++, input.tensors().size()); },
      encoder);
  const io::GgufFile written = io::GgufFile::open(out);
  std::uint64_t bytes_in = 0, bytes_out = 0;
  for (const auto& t : input.tensors()) bytes_in += t.bytes;
  for (const auto& t : written.tensors()) bytes_out += t.bytes;
  // What the method chose for a tensor ("" on the reference path).
  auto method_detail = [&run](const std::string& name) -> std::string {
    if (!run) return "";
    const auto found = run->details().find(name);
    return found == run->details().end() ? "" : found->second;
  };
  if (args.flag_set("json")) {
    Json tensors = Json::array();
    for (const io::GgufTensorPlan& p : plans)
      tensors.push_back({{"name", p.name},
                         {"from", io::gguf_type_name(p.from_type)},
                         {"to", io::gguf_type_name(p.to_type)},
                         {"copied", p.copied},
                         {"note", p.note},
                         {"method", method_detail(p.name)}});
    const Json summary = {{"input", in},
                          {"source", source.from_checkpoint() ? "huggingface" : "gguf"},
                          {"tokenizer_pre", source.tokenizer_pre()},
                          {"output", out},
                          {"format", "gguf"},
                          {"type", io::gguf_type_name(type)},
                          {"method", method.name},
                          {"tensors", tensors},
                          {"tensor_bytes_in", bytes_in},
                          {"tensor_bytes_out", bytes_out}};
    std::printf("%s\n", summary.dump(2).c_str());
    return kExitOk;
  }
  if (source.from_checkpoint()) {
    std::printf("%s: a Hugging Face Llama checkpoint, %zu tensors in llama's layout (q, k rows in its rotary order)\n",
                in.c_str(), source.checkpoint_tensors());
    if (source.tokenizer_pre().empty())
      std::printf(
          "  note: tokenizer.json's pre-tokenizer is not one llama.cpp names: tokenizer.ggml.pre is not written "
          "and llama.cpp will split text with its default expressions\n");
    else
      std::printf("  tokenizer.ggml.pre: %s\n", source.tokenizer_pre().c_str());
  }
  std::printf("%s -> %s: GGUF, linears %s (llama-quantize's choice per tensor, %s)\n", in.c_str(), out.c_str(),
              io::gguf_type_name(type),
              method.name == "rtn" ? "round to nearest" : ("--method " + method.name + " onto its blocks").c_str());
  for (const io::GgufTensorPlan& p : plans) {
    const std::string detail = method_detail(p.name);
    std::printf("  %-32s %-5s -> %-5s%s%s%s\n", p.name.c_str(), io::gguf_type_name(p.from_type),
                io::gguf_type_name(p.to_type), p.copied ? "  (copied)" : "",
                p.note.empty() ? "" : ("  " + p.note).c_str(), detail.empty() ? "" : ("  " + detail).c_str());
  }
  std::printf("tensor bytes: %llu -> %llu\n", static_cast<unsigned long long>(bytes_in),
              static_cast<unsigned long long>(bytes_out));
  return kExitOk;
}

}  // namespace shrink::cli
