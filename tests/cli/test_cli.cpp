// Tests for the `shrink` command (examples/cli): every subcommand run as its own process on a small generated
// model; exit codes (0, 1 for bad files, 2 for bad command lines), one-line errors, --help, JSON output, and the
// files written (quantize -> dequantize -> compare SQNR ranges, pruning sparsities and the 2:4 pattern).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf_writer.hpp"
#include "io/temp_dir.hpp"
#include "shrink/core/config.hpp"
#include "shrink/io/calibration_stats.hpp"
#include "shrink/io/gguf_quantize.hpp"
#include "shrink/io/gguf_requantize.hpp"
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/metrics/error.hpp"
#include "shrink/prune/sparsegpt.hpp"
#include "shrink/prune/wanda.hpp"
#include "shrink/quant/awq.hpp"
#include "shrink/quant/gptq.hpp"
#include "shrink/quant/hessian.hpp"
#include "shrink/quant/hqq.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/random.hpp"

using nlohmann::json;
using shrink::ScalarType;
using shrink::io::SafetensorsFile;
using shrink::io::SafetensorsWriter;

namespace {

struct Result {
  int code = -1;
  std::string out;
  std::string err;
  json parsed() const { return json::parse(out); }
  std::size_t error_lines() const {
    std::size_t n = 0;
    for (char c : err) n += c == '\n';
    return n;
  }
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The `shrink` command: $SHRINK_CLI when set (benchmarks/gpu/device-check.sh, whose programs share one folder), else
// the build tree's, found from this program's own folder, so that no absolute path is compiled in.
std::string cli_path() {
  const char* chosen = std::getenv("SHRINK_CLI");
  if (chosen != nullptr && *chosen != '\0') return chosen;
  return (std::filesystem::canonical("/proc/self/exe").parent_path() / SHRINK_CLI_RELATIVE_PATH).string();
}

// Runs `shrink args...` with stdout and stderr captured in files of `dir` (stderr is not a terminal, so no
// progress lines).
Result run(const shrink::test::TempDir& dir, const std::vector<std::string>& args) {
  std::string command = shell_quoted(cli_path());
  for (const std::string& a : args) command += " " + shell_quoted(a);
  const std::string out = dir.file("stdout.txt");
  const std::string err = dir.file("stderr.txt");
  command += " >" + shell_quoted(out) + " 2>" + shell_quoted(err) + " </dev/null";
  const int status = std::system(command.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_text(out);
  r.err = read_text(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<std::uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<std::uint16_t> to_half_bits(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits;
  for (float v : values) bits.push_back(shrink::half(v).to_bits());
  return bits;
}

// A small model: two Linear weights (F32 and F16), a bias and a norm (1-D), a scalar step counter (I64).
std::string write_model(const shrink::test::TempDir& dir, const std::string& name = "model.safetensors") {
  const std::string path = dir.file(name);
  struct T {
    std::string name;
    ScalarType dtype;
    std::vector<std::int64_t> shape;
    std::vector<std::uint8_t> bytes;
  };
  const std::vector<T> tensors = {
      {"fc1.weight", ScalarType::f32, {32, 64}, bytes_of(shrink::test::random_values(32 * 64, 1, 0.05f))},
      {"fc1.bias", ScalarType::f32, {32}, bytes_of(shrink::test::random_values(32, 2))},
      {"fc2.weight", ScalarType::f16, {16, 32}, bytes_of(to_half_bits(shrink::test::random_values(16 * 32, 3, 0.1f)))},
      {"norm.weight", ScalarType::f32, {64}, bytes_of(shrink::test::random_values(64, 4))},
      {"step", ScalarType::i64, {}, bytes_of(std::vector<std::int64_t>{1000})},
  };
  SafetensorsWriter writer(path);
  for (const T& t : tensors) writer.add_tensor(t.name, t.dtype, t.shape);
  writer.add_metadata("format", "pt");
  writer.write_header();
  for (const T& t : tensors) writer.write(t.name, t.bytes.data(), t.bytes.size());
  writer.finish();
  return path;
}

// The JSON a successful `shrink args...` prints.
json run_json(const shrink::test::TempDir& dir, const std::vector<std::string>& args) {
  const Result r = run(dir, args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return r.parsed();
}

// compare --json of two files.
json compare(const shrink::test::TempDir& dir, const std::string& a, const std::string& b) {
  return run_json(dir, {"compare", a, b, "--json"});
}

double tensor_sqnr(const json& report, const std::string& name) {
  for (const json& t : report["tensors"])
    if (t["name"] == name) return t["sqnr_db"].is_null() ? INFINITY : t["sqnr_db"].get<double>();
  FAIL("no tensor " << name << " in the report");
  return 0.0;
}

void require_one_line_error(const Result& r, int code, const std::string& command, const std::string& text) {
  CAPTURE(r.err);
  REQUIRE(r.code == code);
  REQUIRE(r.error_lines() == 1);
  REQUIRE(r.err.rfind("shrink " + command + ": error: ", 0) == 0);
  REQUIRE(r.err.find(text) != std::string::npos);
  REQUIRE(r.out.empty());
}

// A command line that must fail: `shrink command args...` and a text its one error line holds.
struct FailingCase {
  std::string command;
  std::vector<std::string> args;
  std::string expected;
};

// Every case exits with `code`, one error line and nothing on stdout, and leaves no file at `out`.
void require_each_fails(const shrink::test::TempDir& dir, const std::vector<FailingCase>& cases, int code,
                        const std::string& out) {
  for (const FailingCase& c : cases) {
    CAPTURE(c.command, c.args);
    std::vector<std::string> args = {c.command};
    args.insert(args.end(), c.args.begin(), c.args.end());
    require_one_line_error(run(dir, args), code, c.command, c.expected);
    REQUIRE_FALSE(std::filesystem::exists(out));
  }
}

}  // namespace

TEST_CASE("--help for the command and every subcommand exits 0", "[cli]") {
  shrink::test::TempDir dir;
  const Result top = run(dir, {"--help"});
  REQUIRE(top.code == 0);
  REQUIRE(top.out.find("usage: shrink COMMAND") != std::string::npos);
  for (const char* command : {"inspect", "quantize", "dequantize", "prune", "compare", "bench"}) {
    for (const char* flag : {"--help", "-h"}) {
      CAPTURE(command, flag);
      const Result r = run(dir, {command, flag});
      REQUIRE(r.code == 0);
      REQUIRE(r.out.rfind(std::string("usage: shrink ") + command, 0) == 0);
      REQUIRE(r.out.find("--help") != std::string::npos);
      REQUIRE(r.err.empty());
    }
  }
  const Result bench = run(dir, {"bench", "--help"});
  REQUIRE(bench.out.find("--gpu auto|on|off") != std::string::npos);
  REQUIRE(bench.out.find("gpu-int4-weight-only") != std::string::npos);
  const Result nothing = run(dir, {});
  REQUIRE(nothing.code == 2);
  REQUIRE(nothing.out.empty());
}

TEST_CASE("shrink --version prints the version of shrink/core/config.hpp first", "[cli]") {
  shrink::test::TempDir dir;
  for (const char* flag : {"--version", "version"}) {
    const Result r = run(dir, {flag});
    REQUIRE(r.code == 0);
    REQUIRE(r.err.empty());
    REQUIRE(r.out.rfind(std::string("shrink ") + SHRINK_VERSION_STRING + "\n", 0) == 0);
    REQUIRE(r.out.find("CPU kernels: ") != std::string::npos);
    REQUIRE(r.out.find("CUDA layer: ") != std::string::npos);
  }
}

TEST_CASE("bad command lines exit 2 with one line naming the problem", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string out = dir.file("out.safetensors");
  const std::vector<FailingCase> cases = {
      {"quantize", {model, out, "--dtype", "int3"}, "--dtype = 'int3': expected one of int8|uint8|int4"},
      {"quantize", {model, out, "--frobnicate"}, "unknown option --frobnicate"},
      {"quantize", {model, out, "--json=yes"}, "option --json takes no value"},
      {"quantize", {model, out, "--dtype"}, "option --dtype needs a value"},
      {"quantize", {model, out, "--dtype", "int8", "--dtype", "int8"}, "given more than once"},
      {"quantize", {model}, "missing OUT"},
      {"quantize", {model, out, "extra"}, "unexpected argument 'extra'"},
      {"quantize", {model, model}, "OUT is the input file"},
      {"quantize", {model, out, "--axis", "2"}, "--axis 2 is outside the shape [32, 64]"},
      {"quantize", {model, out, "--axis", "x"}, "--axis = 'x': expected an integer"},
      {"quantize", {model, out, "--granularity", "group", "--group-size", "48"}, "--group-size 48 does not divide"},
      {"quantize", {model, out, "--dtype", "int4", "--granularity", "tensor"}, "needs --granularity channel or group"},
      {"quantize", {model, out, "--calib", "kl"}, "--calib = 'kl'"},
      {"quantize", {model, out, "--calib", "percentile:101"}, "expected a number in [0, 100]"},
      {"quantize",
       {model, out, "--granularity", "group", "--calib", "entropy"},
       "with --granularity group use --calib minmax"},
      {"quantize", {model, out, "--dtype", "fp16", "--scheme", "affine"}, "--scheme does not apply to --dtype fp16"},
      {"quantize", {model, out, "--include", "("}, "--include = '(': not a valid regular expression"},
      {"prune", {model, out}, "--method is required"},
      {"prune", {model, out, "--method", "lottery"}, "--method = 'lottery'"},
      {"prune", {model, out, "--method", "magnitude"}, "--sparsity S is required"},
      {"prune", {model, out, "--method", "magnitude", "--sparsity", "1"}, "expected a number in [0, 1)"},
      {"prune", {model, out, "--method", "magnitude", "--sparsity", "-0.1"}, "expected a number in [0, 1)"},
      {"prune", {model, out, "--method", "magnitude", "--sparsity", "nan"}, "expected a number in [0, 1)"},
      {"prune", {model, out, "--method", "nm", "--n", "4", "--m", "2"}, "expected n < m"},
      {"prune", {model, out, "--method", "nm", "--n", "3", "--m", "3"}, "expected n < m"},
      {"prune", {model, out, "--method", "nm", "--sparsity", "0.5"}, "--sparsity does not apply to an N:M pattern"},
      {"prune", {model, out, "--method", "magnitude", "--sparsity", "0.5", "--dim", "1"}, "--dim does not apply"},
      {"prune", {model, out, "--method", "structured", "--sparsity", "0.5", "--dim", "2"}, "--dim 2 is outside"},
      {"prune", {model, out, "--method", "structured", "--sparsity", "0.5", "--norm", "3"}, "--norm = '3'"},
      {"prune", {model, out, "--method", "nm", "--m", "5"}, "last dimension divisible by m = 5"},
      {"prune", {model, out, "--method", "wanda", "--sparsity", "0.5"}, "--method wanda needs --activations FILE"},
      {"dequantize", {model, model}, "OUT is the input file"},
      {"inspect", {}, "missing FILE"},
      {"compare", {model}, "missing B"},
  };
  require_each_fails(dir, cases, 2, out);
  const Result unknown = run(dir, {"squash"});
  REQUIRE(unknown.code == 2);
  REQUIRE(unknown.err == "shrink: error: unknown command 'squash' (see shrink --help)\n");
}

TEST_CASE("unreadable and hostile files exit 1 with one line and write nothing", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string truncated = dir.file("truncated.safetensors");
  {
    const std::string bytes = read_text(model);
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  // A quantized tensor whose scale is negative.
  const std::string hostile = dir.file("hostile.safetensors");
  {
    SafetensorsWriter writer(hostile);
    writer.add_tensor("w_scale", ScalarType::f32, {});
    writer.add_tensor("w", ScalarType::i8, {4});
    writer.add_metadata("shrink.format_version", "1");
    writer.add_metadata("shrink.quant.w",
                        R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","shape":[4]})");
    writer.write_header();
    const float scale = -0.5f;
    writer.write("w_scale", &scale, sizeof scale);
    const std::int8_t w[4] = {1, 2, 3, 4};
    writer.write("w", w, sizeof w);
    writer.finish();
  }
  // A weight holding NaN.
  const std::string nan_model = dir.file("nan.safetensors");
  {
    std::vector<float> w = shrink::test::random_values(16, 5);
    w[7] = NAN;
    SafetensorsWriter writer(nan_model);
    writer.add_tensor("w", ScalarType::f32, {4, 4});
    writer.write_header();
    writer.write("w", w.data(), w.size() * sizeof(float));
    writer.finish();
  }
  const std::string out = dir.file("out.safetensors");
  const std::string missing = dir.file("missing.safetensors");
  const std::vector<FailingCase> cases = {
      {"inspect", {missing}, "cannot open"},
      {"inspect", {truncated}, "truncated"},
      {"quantize", {truncated, out}, "truncated"},
      {"dequantize", {hostile, out}, "expected a finite scale > 0"},
      {"inspect", {hostile}, "expected a finite scale > 0"},
      {"compare", {model, hostile}, "expected a finite scale > 0"},
      {"compare", {missing, model}, "cannot open"},
      {"prune", {truncated, out, "--method", "nm"}, "truncated"},
      {"quantize", {nan_model, out}, "tensor \"w\": "},
      {"prune", {nan_model, out, "--method", "magnitude", "--sparsity", "0.5"}, "tensor \"w\": "},
      {"prune", {model, out, "--method", "wanda", "--sparsity", "0.5", "--activations", truncated}, "truncated"},
      {"quantize", {model, dir.file("no/such/dir/out.safetensors")}, "cannot create a temporary file"},
  };
  require_each_fails(dir, cases, 1, out);
  // Nothing but the four inputs is left in the directory: no temporary outputs.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(""))) (void)entry, ++files;
  REQUIRE(files == 4);
}

TEST_CASE("inspect lists a GGUF file, found by its magic: version, metadata and tensor table", "[cli]") {
  shrink::test::TempDir dir;
  shrink::test::GgufBuilder b;
  b.add_string("general.architecture", "llama");
  b.add_u32("llama.block_count", 30);
  b.add_strings("tokenizer.ggml.tokens", {"a", "b", "c"});
  b.add_tensor({"token_embd.weight", {64, 3}, 8, shrink::test::Bytes(3 * 2 * 34, 0), {}});     // Q8_0, shape {3, 64}
  b.add_tensor({"output_norm.weight", {64}, 0, shrink::test::Bytes(256, 0), {}});              // F32
  b.add_tensor({"blk.0.ffn_down.weight", {256, 2}, 10, shrink::test::Bytes(2 * 84, 0), {}});  // Q2_K
  const std::string model = dir.file("model.bin");  // not named .gguf: the magic tells
  {
    const shrink::test::Bytes bytes = b.bytes();
    std::ofstream(model, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  const Result text = run(dir, {"inspect", model});
  REQUIRE(text.code == 0);
  REQUIRE(text.err.empty());
  CHECK(text.out.find(model + ": GGUF version 3, 3 metadata keys, 3 tensors") == 0);
  CHECK(text.out.find("general.architecture   string         \"llama\"") != std::string::npos);
  CHECK(text.out.find("tokenizer.ggml.tokens  array[string]  [string x 3]") != std::string::npos);
  CHECK(text.out.find("token_embd.weight      Q8_0  [3, 64]   204") != std::string::npos);
  CHECK(text.out.find("blk.0.ffn_down.weight  Q2_K  [2, 256]  168") != std::string::npos);
  CHECK(text.out.find("total: 3 tensors, 768 elements, 628 bytes") != std::string::npos);

  const json j = run_json(dir, {"inspect", model, "--json"});
  CHECK(j["format"] == "gguf");
  CHECK(j["version"] == 3);
  CHECK(j["alignment"] == 32);
  REQUIRE(j["metadata"].size() == 3);
  CHECK(j["metadata"][0] == json({{"key", "general.architecture"}, {"type", "string"}, {"value", "llama"}}));
  CHECK(j["metadata"][1]["value"] == 30);
  CHECK(j["metadata"][2] ==
        json({{"key", "tokenizer.ggml.tokens"}, {"type", "array[string]"}, {"count", 3}, {"value", "[string x 3]"}}));
  REQUIRE(j["tensors"].size() == 3);
  CHECK(j["tensors"][0]["name"] == "token_embd.weight");
  CHECK(j["tensors"][0]["type"] == "Q8_0");
  CHECK(j["tensors"][0]["shape"] == json::array({3, 64}));
  CHECK(j["tensors"][0]["bytes"] == 204);
  CHECK(j["tensors"][2]["dequantizable"] == false);
  CHECK(j["totals"] == json({{"tensors", 3}, {"elements", 768}, {"bytes", 628}}));

  // A truncated GGUF file: one line naming the file and the defect, exit code 1.
  const std::string truncated = dir.file("truncated.gguf");
  {
    const shrink::test::Bytes bytes = b.bytes();
    std::ofstream(truncated, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 100);
  }
  require_one_line_error(run(dir, {"inspect", truncated}), 1, "inspect", truncated + ": truncated file of 100 bytes");
}

TEST_CASE("quantize --format gguf requantizes a llama.cpp file as the library does, and refuses what does not apply",
          "[cli][gguf]") {
  shrink::test::TempDir dir;
  // A one-block llama file of F32 tensors (a tied embedding, one linear with rows of 48), written by the library.
  const auto f32 = [](const std::vector<float>& v) {
    std::vector<std::uint8_t> out(v.size() * 4);
    shrink::io::gguf_quantize(0, v.data(), static_cast<std::int64_t>(v.size()), out.data());
    return out;
  };
  shrink::io::GgufWriter w;
  w.set_string("general.architecture", "llama").set_uint32("llama.block_count", 1);
  w.add_tensor("token_embd.weight", {8, 64}, 0, f32(shrink::test::random_values(8 * 64, 1, 1.0f)));
  w.add_tensor("blk.0.attn_norm.weight", {64}, 0, f32(shrink::test::random_values(64, 2, 1.0f)));
  w.add_tensor("blk.0.attn_q.weight", {64, 64}, 0, f32(shrink::test::random_values(64 * 64, 3, 0.1f)));
  w.add_tensor("blk.0.ffn_down.weight", {64, 48}, 0, f32(shrink::test::random_values(64 * 48, 4, 0.1f)));
  const std::string model = dir.file("model.gguf"), out = dir.file("model-q4_0.gguf");
  w.write(model);

  const Result text = run(dir, {"quantize", model, out, "--format", "gguf", "--type", "q4_0"});
  INFO(text.err);
  REQUIRE(text.code == 0);
  CHECK(text.out.find(model + " -> " + out + ": GGUF, linears Q4_0") == 0);
  CHECK(text.out.find("blk.0.attn_norm.weight           F32   -> F32    (copied)") != std::string::npos);
  CHECK(text.out.find("blk.0.attn_q.weight              F32   -> Q4_0") != std::string::npos);
  CHECK(text.out.find("not whole blocks of 32") != std::string::npos);
  // The same file as the library writes.
  const std::string expected = dir.file("expected.gguf");
  shrink::io::requantize_gguf(shrink::io::GgufFile::open(model), expected, 2);
  CHECK(read_text(out) == read_text(expected));

  const json j =
      run_json(dir, {"quantize", model, dir.file("q8.gguf"), "--format", "gguf", "--type", "q8_0", "--json"});
  CHECK(j["type"] == "Q8_0");
  REQUIRE(j["tensors"].size() == 4);
  CHECK(j["method"] == "rtn");
  CHECK(j["tensors"][0] == json({{"name", "token_embd.weight"},
                                 {"from", "F32"},
                                 {"to", "Q8_0"},
                                 {"copied", false},
                                 {"note", ""},
                                 {"method", ""}}));
  CHECK(j["tensors"][3]["to"] == "F16");

  require_one_line_error(run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf"}), 2, "quantize",
                         "--format gguf needs --type");
  require_one_line_error(run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf", "--type", "q2_k"}), 2,
                         "quantize", "--type = 'q2_k': expected one of q4_0|q4_1");
  require_one_line_error(
      run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf", "--type", "q4_0", "--dtype", "int4"}), 2,
      "quantize", "--dtype does not apply to --format gguf");
  require_one_line_error(
      run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf", "--type", "q4_0", "--method", "gptq"}), 2,
      "quantize", "--method gptq needs --calibration FILE");
  require_one_line_error(run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf", "--type", "q4_0",
                                   "--method", "hqq", "--act-order"}),
                         2, "quantize", "--act-order does not apply to --method hqq");
  require_one_line_error(run(dir, {"quantize", model, dir.file("x.gguf"), "--format", "gguf", "--type", "q4_0",
                                   "--method", "gptq", "--bits", "3"}),
                         2, "quantize", "--bits does not apply to --format gguf");
  require_one_line_error(run(dir, {"quantize", model, dir.file("x.safetensors"), "--type", "q4_0"}), 2, "quantize",
                         "--type applies to --format gguf only");
  require_one_line_error(run(dir, {"quantize", model, model, "--format", "gguf", "--type", "q4_0"}), 2, "quantize",
                         "OUT is the input file");
  CHECK_FALSE(std::filesystem::exists(dir.file("x.gguf")));
}

TEST_CASE("inspect lists every tensor and the totals; --json is machine-readable", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const Result text = run(dir, {"inspect", model});
  REQUIRE(text.code == 0);
  REQUIRE(text.err.empty());
  for (const char* name : {"fc1.weight", "fc1.bias", "fc2.weight", "norm.weight", "step"})
    REQUIRE(text.out.find(name) != std::string::npos);

  const Result r = run(dir, {"inspect", model, "--json"});
  REQUIRE(r.code == 0);
  const json j = r.parsed();
  REQUIRE(j["tensors"].size() == 5);
  REQUIRE(j["format_version"].is_null());
  REQUIRE(j["metadata"]["format"] == "pt");
  const json& fc2 = j["tensors"][2];
  REQUIRE(fc2["name"] == "fc2.weight");
  REQUIRE(fc2["dtype"] == "F16");
  REQUIRE(fc2["shape"] == json::array({16, 32}));
  REQUIRE(fc2["bytes"] == 1024);
  REQUIRE(fc2["sparsity"] == 0.0);
  REQUIRE(j["totals"]["tensors"] == 5);
  REQUIRE(j["totals"]["elements"] == 32 * 64 + 32 + 16 * 32 + 64 + 1);
  REQUIRE(j["totals"]["bytes"] == 32 * 64 * 4 + 32 * 4 + 16 * 32 * 2 + 64 * 4 + 8);

  // After quantization: the scheme of each quantized tensor, its scales marked as parameters.
  const std::string q = dir.file("q.safetensors");
  REQUIRE(run(dir, {"quantize", model, q, "--scheme", "affine"}).code == 0);
  const json jq = run(dir, {"inspect", q, "--json"}).parsed();
  REQUIRE(jq["format_version"] == "1");
  REQUIRE(jq["totals"]["quantized_tensors"] == 2);
  REQUIRE(jq["totals"]["model_tensors"] == 5);
  bool seen = false;
  for (const json& t : jq["tensors"]) {
    if (t["name"] == "fc1.weight") {
      seen = true;
      REQUIRE(t["dtype"] == "I8");
      REQUIRE(t["quantization"]["dtype"] == "int8");
      REQUIRE(t["quantization"]["scheme"] == "affine");
      REQUIRE(t["quantization"]["granularity"] == "per_channel");
      REQUIRE(t["quantization"]["stored_bytes"] == 32 * 64 + 32 * 4 + 32);
    }
    if (t["name"] == "fc1.weight_scale") REQUIRE(t["parameter_of"] == "fc1.weight");
    if (t["name"] == "fc1.weight_zero_point") REQUIRE(t["parameter_of"] == "fc1.weight");
  }
  REQUIRE(seen);
}

TEST_CASE("quantize -> dequantize -> compare gives the SQNR each format should", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string q = dir.file("q.safetensors");
  const std::string d = dir.file("d.safetensors");
  struct Case {
    std::vector<std::string> args;
    std::string dtype;
    double min_db;
    double max_db;
  };
  const std::vector<Case> cases = {
      {{}, "int8", 35, 60},
      {{"--scheme", "affine", "--granularity", "tensor"}, "int8", 30, 60},
      {{"--dtype", "uint8", "--scheme", "affine", "--calib", "entropy"}, "uint8", 25, 60},
      {{"--calib", "percentile:99.9", "--restricted-range"}, "int8", 30, 60},
      {{"--calib", "mse"}, "int8", 35, 60},
      {{"--calib", "histogram", "--granularity", "tensor", "--scheme", "affine"}, "int8", 25, 60},
      {{"--dtype", "int4", "--granularity", "group", "--group-size", "32", "--scheme", "affine"}, "int4", 15, 30},
      {{"--dtype", "int4", "--granularity", "channel", "--axis", "0"}, "int4", 10, 30},
      {{"--dtype", "uint4", "--granularity", "group", "--axis", "1", "--group-size", "16", "--scheme", "affine"},
       "uint4",
       15,
       30},
      {{"--dtype", "fp8-e4m3"}, "fp8_e4m3", 25, 40},
      {{"--dtype", "fp8-e5m2", "--granularity", "tensor"}, "fp8_e5m2", 20, 35},
      {{"--dtype", "bf16"}, "bf16", 45, 65},
      {{"--dtype", "fp16"}, "fp16", 65, 1e9},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    std::vector<std::string> args{"quantize", model, q, "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const json summary = run_json(dir, args);
    REQUIRE(summary["totals"]["quantized"] == 2);  // the two weights; 1-D tensors and the I64 stay as they are
    REQUIRE(summary["totals"]["copied"] == 3);
    for (const json& t : summary["tensors"]) {
      const bool weight = t["name"] == "fc1.weight" || t["name"] == "fc2.weight";
      REQUIRE(t["action"] == (weight ? (c.dtype == "fp16" || c.dtype == "bf16" ? "cast" : "quantized") : "copied"));
      if (weight) REQUIRE(t["dtype"] == c.dtype);
      if (weight && (t["name"] == "fc1.weight" || t["source_dtype"] != "F16"))
        REQUIRE(t["bytes_after"].get<std::int64_t>() < t["bytes_before"].get<std::int64_t>());
    }

    REQUIRE(run(dir, {"dequantize", q, d}).code == 0);
    const json direct = compare(dir, model, q);  // compare dequantizes quantized tensors by itself
    const json via_file = compare(dir, model, d);
    const double sqnr = tensor_sqnr(via_file, "fc1.weight");
    CHECK(sqnr >= c.min_db);
    CHECK(sqnr <= c.max_db);
    REQUIRE(tensor_sqnr(direct, "fc1.weight") == sqnr);
    if (c.dtype == "int4" || c.dtype == "uint4") {  // the stored 4-bit weight multiplies as it is, affine or not
      const shrink::quant::QuantizedTensor w = shrink::io::read_quantized(SafetensorsFile(q), "fc1.weight");
      const std::int64_t n = w.shape.values[0], k = w.shape.values[1];
      std::vector<float> x(static_cast<std::size_t>(3 * k));
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
      std::vector<float> y(static_cast<std::size_t>(3 * n)), expected(y.size());
      shrink::cpu::linear_weight_only(shrink::TensorView<const float>(x.data(), shrink::Shape{3, k}),
                                      shrink::cpu::pack_weight_int4(w),
                                      shrink::TensorView<float>(y.data(), shrink::Shape{3, n}));
      const std::vector<float> real = shrink::quant::dequantize(w);
      for (std::int64_t r = 0; r < 3; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          double sum = 0, magnitude = 0;
          for (std::int64_t i = 0; i < k; ++i) {
            const double p =
                static_cast<double>(x[static_cast<std::size_t>(r * k + i)]) * real[static_cast<std::size_t>(j * k + i)];
            sum += p;
            magnitude += std::fabs(p);
          }
          REQUIRE(std::fabs(y[static_cast<std::size_t>(r * n + j)] - sum) <= 1e-5 * magnitude + 1e-30);
        }
    }
    // The overall error covers the changed weights, not the copied bias, norm and step (nor fc2, F16 cast to fp16).
    const bool fc2_same = c.dtype == "fp16";
    REQUIRE(direct["overall"]["tensors"] == (fc2_same ? 1 : 2));
    REQUIRE(direct["overall"]["unchanged_tensors"] == (fc2_same ? 4 : 3));
    REQUIRE(direct["overall"]["elements"] == (fc2_same ? 2048 : 2048 + 512));
    REQUIRE(tensor_sqnr(via_file, "fc1.bias") == INFINITY);
    REQUIRE(via_file["only_in_a"].empty());
    REQUIRE(via_file["only_in_b"].empty());
    REQUIRE(via_file["skipped"].empty());
    // The summary's SQNR is the one compare measures.
    for (const json& t : summary["tensors"])
      if (t["name"] == "fc1.weight") REQUIRE(t["sqnr_db"].get<double>() == Approx(sqnr).epsilon(1e-9));

    const SafetensorsFile restored(d);  // each weight back in its source dtype
    REQUIRE(restored.info("fc1.weight").dtype == ScalarType::f32);
    REQUIRE(restored.info("fc2.weight").dtype == ScalarType::f16);
    REQUIRE_FALSE(restored.contains("fc1.weight_scale"));
    REQUIRE(restored.metadata().count("shrink.format_version") == 0);
    REQUIRE(restored.metadata().at("format") == "pt");
  }
}

TEST_CASE("dequantize writes each tensor in its source dtype; --dtype forces one; older files give F32", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = dir.file("bf16.safetensors");
  std::vector<std::uint16_t> bf16_bits;
  for (float v : shrink::test::random_values(32 * 64, 5, 0.05f)) bf16_bits.push_back(shrink::bfloat16(v).to_bits());
  {
    SafetensorsWriter writer(model);
    writer.add_tensor("a.weight", ScalarType::bf16, {32, 64});
    writer.add_tensor("b.weight", ScalarType::f16, {16, 32});
    writer.write_header();
    writer.write("a.weight", bf16_bits.data(), bf16_bits.size() * 2);
    const std::vector<std::uint16_t> h = to_half_bits(shrink::test::random_values(16 * 32, 6, 0.1f));
    writer.write("b.weight", h.data(), h.size() * 2);
    writer.finish();
  }
  const std::string q = dir.file("q.safetensors");
  const std::string d = dir.file("d.safetensors");
  for (const char* dtype : {"int8", "int4", "fp8-e4m3"}) {
    CAPTURE(dtype);
    std::vector<std::string> args{"quantize", model, q, "--dtype", dtype};
    if (std::string(dtype) == "int4") args.insert(args.end(), {"--granularity", "group", "--group-size", "16"});
    REQUIRE(run(dir, args).code == 0);
    const json summary = run_json(dir, {"dequantize", q, d, "--json"});
    REQUIRE(summary["dtypes"]["a.weight"] == "BF16");
    REQUIRE(summary["dtypes"]["b.weight"] == "F16");
    REQUIRE(summary["notes"].empty());
    const SafetensorsFile restored(d);
    REQUIRE(restored.info("a.weight").dtype == ScalarType::bf16);
    REQUIRE(restored.info("b.weight").dtype == ScalarType::f16);
    // The F32 values rounded once to the source dtype.
    const SafetensorsFile quantized(q);
    const std::vector<float> exact = shrink::io::read_float(quantized, "a.weight");
    const std::vector<float> got = shrink::io::read_float(restored, "a.weight");
    for (std::size_t i = 0; i < exact.size(); ++i) REQUIRE(got[i] == shrink::bfloat16(exact[i]).to_float());
    REQUIRE(run(dir, {"dequantize", q, d, "--dtype", "f32"}).code == 0);
    REQUIRE(SafetensorsFile(d).info("a.weight").dtype == ScalarType::f32);
    REQUIRE(shrink::io::read_float(SafetensorsFile(d), "a.weight") == exact);
  }
  REQUIRE(run(dir, {"dequantize", q, d, "--dtype", "bf16"}).code == 0);
  REQUIRE(SafetensorsFile(d).info("b.weight").dtype == ScalarType::bf16);
  REQUIRE(run(dir, {"dequantize", q, d, "--dtype", "f64"}).code == 2);

  // A file of an older shrink: its records say nothing of the source dtype.
  const std::string old = dir.file("old.safetensors");
  {
    const std::vector<float> x = shrink::test::random_values(64, 7);
    const shrink::TensorView<const float> view(x.data(), shrink::Shape{8, 8});
    const shrink::io::EncodedQuantization e = shrink::io::encode_quantized(
        "w",
        shrink::quant::quantize(view, shrink::quant::QuantScheme::per_channel(shrink::quant::QuantDtype::int8,
                                                                              shrink::quant::Symmetry::symmetric, 0)));
    SafetensorsWriter writer(old);
    e.declare(writer);
    writer.write_header();
    e.write(writer);
    writer.finish();
  }
  const Result r = run(dir, {"dequantize", old, d});
  REQUIRE(r.code == 0);
  REQUIRE(r.out.find("no source dtype recorded") != std::string::npos);
  REQUIRE(SafetensorsFile(d).info("w").dtype == ScalarType::f32);
}

TEST_CASE("quantize --format compressed-tensors: tensors, config.json, and what it refuses", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  std::filesystem::create_directories(dir.file("ct"));
  const std::string out = dir.file("ct/model.safetensors");
  const json summary = run_json(dir, {"quantize", model, out, "--format", "compressed-tensors", "--dtype", "int4",
                                      "--granularity", "group", "--group-size", "16", "--scheme", "affine", "--json"});
  REQUIRE(summary["totals"]["quantized"] == 2);
  const SafetensorsFile file(out);
  REQUIRE(file.info("fc1.weight_packed").dtype == ScalarType::i32);
  REQUIRE(file.info("fc1.weight_packed").shape == std::vector<std::int64_t>{32, 8});
  REQUIRE(file.info("fc1.weight_zero_point").shape == std::vector<std::int64_t>{4, 4});
  REQUIRE(file.info("fc1.weight_shape").dtype == ScalarType::i64);
  REQUIRE(file.metadata().count("shrink.format_version") == 0);
  const json config = json::parse(read_text(dir.file("ct/config.json")));
  REQUIRE(config["quantization_config"]["format"] == "pack-quantized");
  REQUIRE(config["quantization_config"]["ignore"].empty());

  // No compressed-tensors form: a usage error for the dtype, a note per tensor for the scheme.
  REQUIRE(run(dir, {"quantize", model, out, "--format", "compressed-tensors", "--dtype", "fp16"}).code == 2);
  const Result per_tensor = run(
      dir, {"quantize", model, out, "--format", "compressed-tensors", "--granularity", "tensor", "--scheme", "affine"});
  REQUIRE(per_tensor.code == 2);
  REQUIRE(per_tensor.err.find("no compressed-tensors form") != std::string::npos);
  // config.json beside IN would be replaced.
  { std::ofstream(dir.file("config.json")) << "{}"; }
  const Result same_dir =
      run(dir, {"quantize", model, dir.file("beside.safetensors"), "--format", "compressed-tensors"});
  REQUIRE(same_dir.code == 2);
  REQUIRE(same_dir.err.find("another directory") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(dir.file("beside.safetensors")));
}

TEST_CASE("quantize --include and --exclude choose the tensors", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string q = dir.file("q.safetensors");
  REQUIRE(run(dir, {"quantize", model, q, "--include", "weight$", "--exclude", "^fc2"}).code == 0);
  const SafetensorsFile file(q);
  REQUIRE(file.info("fc1.weight").dtype == ScalarType::i8);
  REQUIRE(file.info("norm.weight").dtype == ScalarType::f32);  // a norm: kept unless --force names it
  REQUIRE(file.info("fc2.weight").dtype == ScalarType::f16);
  REQUIRE(file.info("fc1.bias").dtype == ScalarType::f32);
  REQUIRE(shrink::io::quantization_records(file).size() == 1);

  // --force takes a tensor the defaults keep; one scale per element would grow it, so that is skipped with a note.
  const std::string forced = dir.file("forced.safetensors");
  const json grows = run_json(dir, {"quantize", model, forced, "--include", "weight$", "--force", "^norm", "--json"});
  for (const json& t : grows["tensors"])
    if (t["name"] == "norm.weight")
      REQUIRE(t["note"].get<std::string>().find("more than its 256") != std::string::npos);
  REQUIRE(grows["totals"]["skipped"] == 1);
  REQUIRE(run(dir, {"quantize", model, forced, "--force", "^norm", "--granularity", "tensor"}).code == 0);
  REQUIRE(SafetensorsFile(forced).info("norm.weight").dtype == ScalarType::i8);

  // Quantizing a quantized file leaves its quantized tensors as they are and adds the rest.
  const std::string q2 = dir.file("q2.safetensors");
  const json summary = json::parse(run(dir, {"quantize", q, q2, "--json"}).out);
  REQUIRE(summary["totals"]["quantized"] == 1);  // fc2.weight
  REQUIRE(shrink::io::quantization_records(SafetensorsFile(q2)).size() == 2);
  // ... and one with nothing float left to quantize is an error, not "0 tensors quantized".
  const std::string q3 = dir.file("q3.safetensors");
  require_one_line_error(run(dir, {"quantize", q2, q3}), 2, "quantize", "nothing to quantize: ");
  REQUIRE_FALSE(std::filesystem::exists(q3));
}

namespace {

// A checkpoint named as Hugging Face names a decoder's tensors.
std::string write_hf_model(const shrink::test::TempDir& dir) {
  const std::string path = dir.file("hf.safetensors");
  const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {
      {"model.embed_tokens.weight", {64, 32}},
      {"model.layers.0.input_layernorm.weight", {32}},
      {"model.layers.0.self_attn.q_proj.weight", {32, 32}},
      {"model.layers.0.self_attn.q_proj.bias", {32}},
      {"model.layers.0.mlp.up_proj.weight", {48, 32}},
      {"model.norm.weight", {32}},
      {"lm_head.weight", {64, 32}},
  };
  SafetensorsWriter writer(path);
  for (const auto& t : tensors) writer.add_tensor(t.first, ScalarType::f32, t.second);
  writer.write_header();
  std::uint64_t seed = 10;
  for (const auto& t : tensors) {
    std::int64_t n = 1;
    for (std::int64_t d : t.second) n *= d;
    const std::vector<float> v = shrink::test::random_values(static_cast<std::size_t>(n), seed++);
    writer.write(t.first, v.data(), v.size() * sizeof(float));
  }
  writer.finish();
  return path;
}

}  // namespace

TEST_CASE("quantize and prune leave embeddings, the head, norms and biases alone unless --force names them", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_hf_model(dir);
  const std::string out = dir.file("out.safetensors");
  const std::vector<std::string> linears = {"model.layers.0.self_attn.q_proj.weight",
                                            "model.layers.0.mlp.up_proj.weight"};
  auto changed = [](const json& summary) {
    std::vector<std::string> names;
    for (const json& t : summary["tensors"])
      if (t["action"] != "copied") names.push_back(t["name"].get<std::string>());
    return names;
  };
  auto note_of = [](const json& summary, const std::string& name) {
    for (const json& t : summary["tensors"])
      if (t["name"] == name) return t["note"].is_null() ? std::string() : t["note"].get<std::string>();
    return std::string("missing");
  };
  const json q = run_json(dir, {"quantize", model, out, "--json"});
  REQUIRE(changed(q) == linears);
  REQUIRE(q["totals"]["kept_by_default"] == 5);
  REQUIRE(note_of(q, "model.embed_tokens.weight") == "an embedding: kept by default, --force to quantize");
  REQUIRE(note_of(q, "lm_head.weight") == "the output head: kept by default, --force to quantize");
  REQUIRE(note_of(q, "model.layers.0.input_layernorm.weight") == "a norm: kept by default, --force to quantize");
  REQUIRE(note_of(q, "model.layers.0.self_attn.q_proj.bias") == "a bias: kept by default, --force to quantize");

  for (const char* method : {"structured", "magnitude"}) {
    CAPTURE(method);
    const json p = run_json(dir, {"prune", model, out, "--method", method, "--sparsity", "0.25", "--json"});
    REQUIRE(changed(p) == linears);
    REQUIRE(p["totals"]["kept_by_default"] == 5);
    const SafetensorsFile pruned(out);
    REQUIRE(shrink::io::read_float(pruned, "model.embed_tokens.weight") ==
            shrink::io::read_float(SafetensorsFile(model), "model.embed_tokens.weight"));
  }

  const json forced = run_json(dir, {"quantize", model, out, "--force", "embed_tokens|lm_head", "--json"});
  REQUIRE(changed(forced) ==
          std::vector<std::string>{"model.embed_tokens.weight", linears[0], linears[1], "lm_head.weight"});
  // A tensor the scheme does not fit is copied with a note; the run goes on.
  const json grouped = run_json(
      dir, {"quantize", model, out, "--granularity", "group", "--group-size", "16", "--include", "proj", "--json"});
  REQUIRE(changed(grouped) == linears);
  const json uneven =
      run_json(dir, {"quantize", model, out, "--granularity", "group", "--group-size", "24", "--axis", "0", "--json"});
  REQUIRE(changed(uneven) == std::vector<std::string>{linears[1]});  // 48 rows split in 24s; q_proj's 32 cannot be
  REQUIRE(note_of(uneven, linears[0]).rfind("skipped: --group-size 24 does not divide axis 0", 0) == 0);
}

TEST_CASE("selections that match nothing and inputs with nothing to do are errors, named plainly", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_hf_model(dir);
  const std::string out = dir.file("out.safetensors");
  require_one_line_error(run(dir, {"quantize", model, out, "--include", "nomatch"}), 2, "quantize",
                         "--include 'nomatch' matches no tensor");
  require_one_line_error(run(dir, {"prune", model, out, "--method", "nm", "--force", "nomatch"}), 2, "prune",
                         "--force 'nomatch' matches no tensor");
  require_one_line_error(run(dir, {"quantize", model, out, "--include", "norm"}), 2, "quantize",
                         "nothing to quantize: model.layers.0.input_layernorm.weight (a norm: kept by default");
  REQUIRE_FALSE(std::filesystem::exists(out));

  // A library error reaches the user without C++ names or C++ options.
  const std::string nan_model = dir.file("nan.safetensors");
  {
    std::vector<float> w = shrink::test::random_values(16, 5);
    w[6] = NAN;
    SafetensorsWriter writer(nan_model);
    writer.add_tensor("w", ScalarType::f32, {4, 4});
    writer.write_header();
    writer.write("w", w.data(), w.size() * sizeof(float));
    writer.finish();
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"quantize", nan_model, out},
                                               std::vector<std::string>{"prune", nan_model, out, "--method", "nm"}}) {
    const Result r = run(dir, args);
    require_one_line_error(r, 1, args[0], "tensor \"w\": element [1, 2] is nan: expected finite values");
    REQUIRE(r.err.find("shrink::") == std::string::npos);
    REQUIRE(r.err.find("ObserverOptions") == std::string::npos);
  }
}

TEST_CASE("prune gives the sparsity asked for, in the input's dtypes", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string p = dir.file("p.safetensors");
  struct Case {
    std::vector<std::string> args;
    double fc1;  // expected sparsity of fc1.weight (-1: do not check exactly)
  };
  const std::vector<Case> cases = {
      {{"--method", "magnitude", "--sparsity", "0.5"}, 0.5},
      {{"--method", "random", "--sparsity", "0.3", "--seed", "7"}, std::nearbyint(0.3 * 2048) / 2048},
      {{"--method", "structured", "--sparsity", "0.25", "--dim", "0", "--norm", "inf"}, 0.25},
      {{"--method", "structured", "--sparsity", "0.5", "--dim", "-1", "--norm", "1"}, 0.5},
      {{"--method", "nm"}, 0.5},
      {{"--method", "nm", "--n", "1", "--m", "8"}, 0.875},
      {{"--method", "global", "--sparsity", "0.6"}, -1},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    std::vector<std::string> args{"prune", model, p, "--json"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const json summary = run_json(dir, args);
    REQUIRE(summary["totals"]["pruned"] == 2);
    const SafetensorsFile file(p);
    REQUIRE(file.info("fc1.weight").dtype == ScalarType::f32);
    REQUIRE(file.info("fc2.weight").dtype == ScalarType::f16);
    const std::vector<float> fc1 = shrink::io::read_float(file, "fc1.weight");
    std::int64_t zeros = 0;
    for (float v : fc1) zeros += v == 0.0f;
    if (c.fc1 >= 0) REQUIRE(static_cast<double>(zeros) / 2048.0 == Approx(c.fc1));
    if (c.args[1] == "global")
      REQUIRE(summary["totals"]["sparsity"].get<double>() == Approx(std::nearbyint(0.6 * (2048 + 512)) / (2048 + 512)));
    if (c.args[1] == "nm" && c.args.size() == 2) {  // 2:4 along the input dimension of both weights
      for (const char* name : {"fc1.weight", "fc2.weight"}) {
        const std::vector<float> w = shrink::io::read_float(file, name);
        for (std::size_t g = 0; g < w.size(); g += 4) {
          int kept = 0;
          for (std::size_t k = 0; k < 4; ++k) kept += w[g + k] != 0.0f;
          REQUIRE(kept <= 2);
        }
      }
    }
    // Unselected tensors are copied bit for bit; the kept weights are unchanged.
    const SafetensorsFile original(model);
    REQUIRE(shrink::io::read_float(file, "fc1.bias") == shrink::io::read_float(original, "fc1.bias"));
    const std::vector<float> before = shrink::io::read_float(original, "fc1.weight");
    for (std::size_t i = 0; i < fc1.size(); ++i)
      if (fc1[i] != 0.0f) REQUIRE(fc1[i] == before[i]);
  }
}

TEST_CASE("wanda prunes by |W| times the activation norms of --activations", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string activations = dir.file("activations.safetensors");
  {
    // fc1 gets norms [64] with one huge input channel; fc2 gets sample activations [8, 32].
    std::vector<float> norms(64, 1.0f);
    norms[5] = 1e6f;
    const std::vector<float> samples = shrink::test::random_values(8 * 32, 9);
    SafetensorsWriter writer(activations);
    writer.add_tensor("fc1.weight", ScalarType::f32, {64});
    writer.add_tensor("fc2.weight", ScalarType::f32, {8, 32});
    writer.write_header();
    writer.write("fc1.weight", norms.data(), norms.size() * sizeof(float));
    writer.write("fc2.weight", samples.data(), samples.size() * sizeof(float));
    writer.finish();
  }
  const std::string p = dir.file("p.safetensors");
  const Result r =
      run(dir, {"prune", model, p, "--method", "wanda", "--sparsity", "0.5", "--activations", activations, "--json"});
  REQUIRE(r.code == 0);
  REQUIRE(r.parsed()["totals"]["sparsity"] == 0.5);
  const std::vector<float> fc1 = shrink::io::read_float(SafetensorsFile(p), "fc1.weight");
  for (std::int64_t row = 0; row < 32; ++row) REQUIRE(fc1[static_cast<std::size_t>(row * 64 + 5)] != 0.0f);

  REQUIRE(
      run(dir, {"prune", model, p, "--method", "wanda", "--n", "2", "--m", "4", "--activations", activations}).code ==
      0);
  // norm.weight, named by --force, is 1-D: copied with a note, the others pruned.
  const json forced = run_json(dir, {"prune", model, p, "--method", "wanda", "--sparsity", "0.5", "--activations",
                                     activations, "--force", "norm", "--json"});
  REQUIRE(forced["totals"]["pruned"] == 2);
  REQUIRE(forced["totals"]["skipped"] == 1);
  for (const json& t : forced["tensors"])
    if (t["name"] == "norm.weight")
      REQUIRE(t["note"].get<std::string>().find("Wanda prunes Linear weights") != std::string::npos);
}

TEST_CASE("compare reports tensors present on one side and shapes that differ", "[cli]") {
  shrink::test::TempDir dir;
  const std::string model = write_model(dir);
  const std::string other = dir.file("other.safetensors");
  {
    const std::vector<float> w = shrink::test::random_values(32 * 64, 1, 0.05f);
    SafetensorsWriter writer(other);
    writer.add_tensor("fc1.weight", ScalarType::f32, {32, 64});
    writer.add_tensor("fc2.weight", ScalarType::f32, {32, 16});
    writer.add_tensor("extra", ScalarType::f32, {2});
    writer.write_header();
    writer.write("fc1.weight", w.data(), w.size() * sizeof(float));
    std::vector<float> fc2(512, 0.0f);
    writer.write("fc2.weight", fc2.data(), fc2.size() * sizeof(float));
    const float extra[2] = {1, 2};
    writer.write("extra", extra, sizeof extra);
    writer.finish();
  }
  const json j = compare(dir, model, other);
  REQUIRE(j["tensors"].size() == 1);
  REQUIRE(j["tensors"][0]["name"] == "fc1.weight");
  REQUIRE(j["tensors"][0]["sqnr_db"].is_null());  // identical: infinite SQNR
  REQUIRE(j["tensors"][0]["mse"] == 0.0);
  REQUIRE(j["tensors"][0]["cosine"] == 1.0);
  REQUIRE(j["overall"]["elements"] == 2048);
  REQUIRE(j["only_in_a"] == json::array({"fc1.bias", "norm.weight", "step"}));
  REQUIRE(j["only_in_b"] == json::array({"extra"}));
  REQUIRE(j["skipped"].size() == 1);
  REQUIRE(j["skipped"][0]["name"] == "fc2.weight");

  const Result text = run(dir, {"compare", model, other});
  REQUIRE(text.code == 0);
  REQUIRE(text.out.find("only in B: extra") != std::string::npos);
  REQUIRE(text.out.find("overall") != std::string::npos);
}

namespace {

// `shrink bench` on a tiny shape, quickly: --shapes 128x256 --batches 1,3 --min-time 0 (at least 3 timed runs a row).
std::vector<std::string> tiny_bench(const std::string& out, std::vector<std::string> more) {
  std::vector<std::string> args = {"bench", "--quick", "--shapes", "128x256", "--batches", "1,3"};
  args.insert(args.end(), {"--min-time", "0", "--out", out});
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

const json* find_result(const json& report, const std::string& device_kind, const std::string& precision,
                        std::int64_t m) {
  for (const json& r : report["results"])
    if ((r["device"] == "cpu") == (device_kind == "cpu") && r["precision"] == precision && r["m"] == m) return &r;
  return nullptr;
}

// Whether a line of `table` starts with these words (separated by any spaces).
bool has_table_row(const std::string& table, const std::vector<std::string>& words) {
  std::istringstream lines(table);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string word;
    std::size_t matched = 0;
    while (matched < words.size() && in >> word && word == words[matched]) ++matched;
    if (matched == words.size()) return true;
  }
  return false;
}

double sqnr_of(const json& result) { return result["sqnr_db"].is_null() ? INFINITY : result["sqnr_db"].get<double>(); }

}  // namespace

TEST_CASE("bench --gpu off and auto give the CPU table; bad --gpu and --precisions values exit 2", "[cli]") {
  shrink::test::TempDir dir;
  const std::string out = dir.file("bench");

  const Result off = run(dir, tiny_bench(out, {"--gpu", "off", "--json"}));
  CAPTURE(off.err);
  REQUIRE(off.code == 0);
  REQUIRE(off.err.empty());
  const json j = off.parsed();
  REQUIRE(j["schema"] == "shrink-bench/1");
  REQUIRE(j["machine"]["gpu"].is_null());
  REQUIRE(j["gpu_timing"].is_null());
  REQUIRE(j["not_run"].empty());
  // Every CPU precision at M = 1 and 3, at 1 thread and at every hardware thread (once when that is 1).
  const int hardware = j["machine"]["threads"].get<int>();
  REQUIRE(hardware >= 1);
  const std::size_t thread_counts = hardware > 1 ? 2 : 1;
  REQUIRE(j["results"].size() == 8 * 2 * thread_counts);
  std::map<std::string, double> sqnr_at_one_thread;  // the outputs are the same at every thread count
  for (const json& r : j["results"])
    if (r["threads"] == 1)
      sqnr_at_one_thread[r["precision"].get<std::string>() + "/" + std::to_string(r["m"].get<int>())] = sqnr_of(r);
  for (const json& r : j["results"]) {
    CAPTURE(r.dump());
    REQUIRE(r["device"] == "cpu");
    REQUIRE((r["threads"] == 1 || r["threads"] == hardware));
    REQUIRE(sqnr_of(r) ==
            sqnr_at_one_thread.at(r["precision"].get<std::string>() + "/" + std::to_string(r["m"].get<int>())));
    REQUIRE(r["n"] == 128);
    REQUIRE(r["k"] == 256);
    REQUIRE(r["seconds"].get<double>() > 0);
    REQUIRE(r["repetitions"].get<std::int64_t>() >= 3);
    REQUIRE(r["weight_bytes"].get<std::int64_t>() > 0);
    REQUIRE(r["baseline"] == "fp32");
    REQUIRE(r["speedup_vs_baseline"] == r["speedup_vs_fp32"]);
    if (r["precision"] == "fp32") REQUIRE(r["sqnr_db"].is_null());
    if (r["precision"] == "fp16-weights") REQUIRE(r["sqnr_db"].get<double>() > 50);
  }
  REQUIRE(std::filesystem::exists(out + "/bench.json"));
  REQUIRE(std::filesystem::exists(out + "/bench.svg"));
  REQUIRE_FALSE(std::filesystem::exists(out + "/bench-gpu.svg"));

  // auto: the same CPU table; GPU rows only where this build has CUDA and the machine a device, else at most a
  // one-line note on stderr.
  const Result automatic = run(dir, tiny_bench(out, {"--gpu", "auto"}));
  CAPTURE(automatic.err);
  REQUIRE(automatic.code == 0);
  REQUIRE((automatic.err.empty() ||
           (automatic.error_lines() == 1 && automatic.err.rfind("shrink bench: no GPU rows: ", 0) == 0)));
  for (const auto& [precision, m] : {std::pair<const char*, int>{"fp32", 1}, {"csr-90%", 3}}) {
    INFO(precision << " M=" << m);
    REQUIRE(has_table_row(automatic.out, {precision, "cpu", "1", "128x256", std::to_string(m)}));
  }
  REQUIRE(automatic.out.find("wrote ") != std::string::npos);

  const std::vector<FailingCase> cases = {
      {"bench", {"--gpu", "maybe", "--out", dir.file("none")}, "--gpu = 'maybe': expected one of auto|on|off"},
      {"bench", {"--threads", "0", "--out", dir.file("none")}, "--threads"},
      {"bench",
       {"--precisions", "gpu-fp64", "--out", dir.file("none")},
       "--precisions: unknown 'gpu-fp64': expected some of fp32, "},
  };
  require_each_fails(dir, cases, 2, dir.file("none"));
}

TEST_CASE("bench --gpu on: GPU rows beside the CPU ones, or exit 1 with one line saying why there are none", "[cli]") {
  shrink::test::TempDir dir;
  const std::string out = dir.file("bench");
  const Result r = run(dir, tiny_bench(out, {"--gpu", "on", "--json"}));
  CAPTURE(r.err);
  if (r.code != 0) {
    // A build without CUDA, or a machine without a (usable) device: nothing is measured or written.
    require_one_line_error(r, 1, "bench", "--gpu on: ");
    REQUIRE((r.err.find("no CUDA device found") != std::string::npos ||
             r.err.find("built without CUDA") != std::string::npos ||
             r.err.find("need sm_80 or later") != std::string::npos || r.err.find("CUDA failed") != std::string::npos));
    REQUIRE_FALSE(std::filesystem::exists(out));
    return;
  }
  // A device: every GPU row at M = 1 and 3, on this data as accurate as the CPU row of the same format.
  const json j = r.parsed();
  REQUIRE(j["machine"]["gpu"].is_string());
  REQUIRE(j["not_run"].empty());  // K = 256 and M <= 64 suit every GPU kernel
  REQUIRE(std::filesystem::exists(out + "/bench-gpu.svg"));
  const std::pair<const char*, const char*> twins[] = {
      {"gpu-int8-w8a8", "int8-w8a8"}, {"gpu-int8-weight-only", "int8-weight-only"}, {"gpu-csr-90%", "csr-90%"}};
  for (const std::int64_t m : {1, 3}) {
    CAPTURE(m);
    for (const char* name :
         {"gpu-fp16-cublas", "gpu-int8-w8a8", "gpu-int8-weight-only", "gpu-int4-weight-only", "gpu-csr-90%"}) {
      CAPTURE(name);
      const json* g = find_result(j, "gpu", name, m);
      REQUIRE(g != nullptr);
      REQUIRE((*g)["baseline"] == "gpu-fp16-cublas");
      REQUIRE((*g)["seconds"].get<double>() > 0);
      REQUIRE((*g)["repetitions"].get<std::int64_t>() >= 50);
      REQUIRE((*g)["speedup_vs_fp32"].get<double>() > 0);
      REQUIRE(std::isfinite(sqnr_of(*g)));
    }
    REQUIRE(sqnr_of(*find_result(j, "gpu", "gpu-fp16-cublas", m)) > 40);  // half inputs and output
    REQUIRE(sqnr_of(*find_result(j, "gpu", "gpu-int4-weight-only", m)) > 10);
    for (const auto& [gpu_name, cpu_name] : twins) {
      INFO(gpu_name);
      // The same weights in the same format; the GPU also rounds the activations and the output to half.
      REQUIRE(std::fabs(sqnr_of(*find_result(j, "gpu", gpu_name, m)) - sqnr_of(*find_result(j, "cpu", cpu_name, m))) <
              3.0);
    }
  }
}

namespace {

const std::vector<std::string> kShardNames = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                              "model-00003-of-00003.safetensors"};

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Splits the tensors of `model` into shards of `directory` (created), named like Hugging Face's, `groups[k]` in
// shard k, with the index and two small files a checkpoint carries.
void write_shards(const std::string& model, const std::string& directory,
                  const std::vector<std::vector<std::string>>& groups) {
  std::filesystem::create_directories(directory);
  const SafetensorsFile file(model);
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    SafetensorsWriter writer(directory + "/" + kShardNames[k]);
    for (const std::string& name : groups[k]) {
      const auto& t = file.info(name);
      writer.add_tensor(name, t.dtype, t.shape);
      index["weight_map"][name] = kShardNames[k];
      total += t.bytes;
    }
    writer.add_metadata("format", "pt");
    writer.write_header();
    for (const std::string& name : groups[k]) writer.write(name, file.bytes(name));
    writer.finish();
  }
  index["metadata"]["total_size"] = total;
  write_text_file(directory + "/model.safetensors.index.json", index.dump(2));
  write_text_file(directory + "/config.json", "{\"model_type\": \"tiny\"}\n");
  write_text_file(directory + "/tokenizer.json", "{\"version\": \"1.0\"}\n");
}

// The model of write_model in three shards under `dir`/`name`.
std::string write_sharded_model(const shrink::test::TempDir& dir, const std::string& name = "ckpt") {
  const std::string model = write_model(dir, name + ".source.safetensors");
  write_shards(model, dir.file(name), {{"fc1.weight", "fc1.bias"}, {"fc2.weight", "norm.weight"}, {"step"}});
  std::filesystem::remove(model);
  return dir.file(name);
}

// Checks an output checkpoint directory: the input's shard names, the other files copied, and an index that maps
// each tensor of each shard to that shard and sums their bytes.
void require_consistent_checkpoint(const std::string& directory) {
  for (const std::string& name : kShardNames) REQUIRE(std::filesystem::exists(directory + "/" + name));
  REQUIRE(read_text(directory + "/config.json") == "{\"model_type\": \"tiny\"}\n");
  REQUIRE(std::filesystem::exists(directory + "/tokenizer.json"));
  const json index = json::parse(read_text(directory + "/model.safetensors.index.json"));
  std::uint64_t total = 0;
  std::size_t tensors = 0;
  for (const std::string& shard : kShardNames) {
    const SafetensorsFile file(directory + "/" + shard);
    for (const auto& t : file.tensors()) {
      INFO(t.name);
      REQUIRE(index["weight_map"][t.name] == shard);
      total += t.bytes;
      ++tensors;
    }
  }
  REQUIRE(index["weight_map"].size() == tensors);
  REQUIRE(index["metadata"]["total_size"] == total);
}

// Entries of `directory` whose name starts with `prefix` (staging directories left behind).
std::size_t entries_starting(const std::string& directory, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(directory))
    n += entry.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

TEST_CASE("sharded checkpoints: inspect names each tensor's shard; quantize, dequantize, prune rewrite the shards",
          "[cli][sharded]") {
  shrink::test::TempDir dir;
  const std::string ckpt = write_sharded_model(dir);
  const std::string model = write_model(dir);

  for (const std::string& input : {ckpt, ckpt + "/model.safetensors.index.json"}) {
    const json listing = run_json(dir, {"inspect", input, "--json"});
    REQUIRE(listing["tensors"].size() == 5);
    REQUIRE(listing["shards"].size() == 3);
    REQUIRE(listing["index"]["metadata"]["total_size"].get<std::int64_t>() > 0);
    for (const auto& t : listing["tensors"]) {
      const std::string expected = t["name"] == "step"                                       ? kShardNames[2]
                                   : t["name"] == "fc2.weight" || t["name"] == "norm.weight" ? kShardNames[1]
                                                                                             : kShardNames[0];
      REQUIRE(t["shard"] == expected);
    }
  }
  const Result table = run(dir, {"inspect", ckpt});
  REQUIRE(table.code == 0);
  REQUIRE(table.out.find("5 tensors in 3 shards") != std::string::npos);
  const std::size_t row = table.out.find("\nfc2.weight ");
  REQUIRE(row != std::string::npos);
  REQUIRE(table.out.substr(row, table.out.find('\n', row + 1) - row).find(kShardNames[1]) != std::string::npos);

  const std::string quantized = dir.file("ckpt-int8");
  const json q = run_json(dir, {"quantize", ckpt, quantized, "--json"});
  REQUIRE(q["tensors"].size() == 5);
  REQUIRE(q["totals"]["quantized"] == 2);
  require_consistent_checkpoint(quantized);
  const json index = json::parse(read_text(quantized + "/model.safetensors.index.json"));
  REQUIRE(index["weight_map"]["fc2.weight_scale"] == kShardNames[1]);
  REQUIRE(entries_starting(dir.file(""), ".ckpt-int8.shrink-partial-") == 0);

  // Sharded against sharded, single file against sharded, sharded against single file.
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {ckpt, quantized}, {model, quantized}, {ckpt + "/model.safetensors.index.json", model}}) {
    const json c = compare(dir, a, b);
    REQUIRE(c["tensors"].size() == 5);
    REQUIRE(c["only_in_a"].empty());
    REQUIRE(c["only_in_b"].empty());
  }
  REQUIRE(tensor_sqnr(compare(dir, model, quantized), "fc1.weight") > 35);

  const std::string restored = dir.file("ckpt-restored");
  const json d = run_json(dir, {"dequantize", quantized, restored, "--json"});
  REQUIRE(d["dequantized"].size() == 2);
  require_consistent_checkpoint(restored);
  const json restored_index = json::parse(read_text(restored + "/model.safetensors.index.json"));
  REQUIRE(restored_index["weight_map"].size() == 5);  // the scales are gone from the index too
  const json c = compare(dir, ckpt, restored);
  REQUIRE(tensor_sqnr(c, "fc1.weight") > 35);
  REQUIRE(tensor_sqnr(c, "fc2.weight") > 35);

  const std::string pruned = dir.file("ckpt-24");
  const json p = run_json(dir, {"prune", ckpt, pruned, "--method", "nm", "--json"});
  REQUIRE(p["totals"]["pruned"] == 2);
  REQUIRE(p["totals"]["sparsity"] == 0.5);
  require_consistent_checkpoint(pruned);
  const json g =
      run_json(dir, {"prune", ckpt, dir.file("ckpt-global"), "--method", "global", "--sparsity", "0.25", "--json"});
  REQUIRE(g["totals"]["pruned"] == 2);

  // A directory holding model.safetensors gives a directory with the other files copied.
  const std::string single_dir = dir.file("single");
  std::filesystem::create_directories(single_dir);
  std::filesystem::copy_file(model, single_dir + "/model.safetensors");
  write_text_file(single_dir + "/config.json", "{}");
  REQUIRE(run(dir, {"quantize", single_dir, dir.file("single-int8")}).code == 0);
  REQUIRE(std::filesystem::exists(dir.file("single-int8/model.safetensors")));
  REQUIRE(std::filesystem::exists(dir.file("single-int8/config.json")));
  REQUIRE_FALSE(std::filesystem::exists(dir.file("single-int8/model.safetensors.index.json")));
  // --include patterns match over the whole checkpoint, not shard by shard.
  REQUIRE(run(dir, {"quantize", ckpt, dir.file("only-fc2"), "--include", "fc2"}).code == 0);
}

TEST_CASE("sharded checkpoints: a non-empty OUT, hostile indexes and failures leave no output", "[cli][sharded]") {
  shrink::test::TempDir dir;
  const std::string ckpt = write_sharded_model(dir);
  const std::string out = dir.file("out");

  std::filesystem::create_directories(out);
  write_text_file(out + "/keep.txt", "mine");
  require_one_line_error(run(dir, {"quantize", ckpt, out}), 2, "quantize", "is a directory that is not empty");
  require_one_line_error(run(dir, {"prune", ckpt, ckpt, "--method", "nm"}), 2, "prune",
                         "is a directory that is not empty");
  require_one_line_error(run(dir, {"dequantize", ckpt, out + "/keep.txt"}), 2, "dequantize", "is an existing file");
  REQUIRE(read_text(out + "/keep.txt") == "mine");
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  require_one_line_error(run(dir, {"quantize", ckpt, out + "/."}), 2, "quantize", "not '.', '..' or '/'");
  // an empty directory is taken
  REQUIRE(run(dir, {"quantize", ckpt, out}).code == 0);
  require_consistent_checkpoint(out);
  std::filesystem::remove_all(out);

  const std::string index_path = ckpt + "/model.safetensors.index.json";
  const std::string good_index = read_text(index_path);
  const std::string s1 = kShardNames[0], s2 = kShardNames[1], s3 = kShardNames[2];
  auto map_with = [&](const std::string& extra) {
    return "{\"weight_map\": {\"fc1.weight\": \"" + s1 + "\", \"fc1.bias\": \"" + s1 + "\", \"fc2.weight\": \"" + s2 +
           "\", \"norm.weight\": \"" + s2 + "\", \"step\": \"" + s3 + "\"" + extra + "}}";
  };
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {"{\"weight_map\": {\"fc1.weight\": ", "not valid JSON"},
      {map_with(", \"x\": \"../x.safetensors\""), "maps tensor \"x\" to \"../x.safetensors\", a path"},
      {map_with(", \"x\": \"model-00004-of-00003.safetensors\""), "is not a file in"},
      {map_with(", \"x\": \"" + s3 + "\""), "maps tensor \"x\" to"},
      {map_with(", \"fc1.weight\": \"" + s2 + "\""), "duplicate key \"fc1.weight\""},
  };
  for (const auto& [text, expected] : hostile) {
    INFO(text);
    write_text_file(index_path, text);
    require_one_line_error(run(dir, {"quantize", ckpt, out}), 1, "quantize", expected);
    require_one_line_error(run(dir, {"inspect", ckpt}), 1, "inspect", expected);
    REQUIRE_FALSE(std::filesystem::exists(out));
  }
  write_text_file(index_path, good_index);

  // The last shard holds a NaN: found while calibrating, before any shard is written.
  {
    const std::vector<float> values = {1.0f, NAN, 2.0f, 3.0f};
    SafetensorsWriter writer(ckpt + "/" + s3);
    writer.add_tensor("step", ScalarType::f32, {2, 2});
    writer.write_header();
    writer.write("step", values.data(), values.size() * sizeof(float));
    writer.finish();
  }
  require_one_line_error(run(dir, {"quantize", ckpt, out, "--force", "step"}), 1, "quantize", "tensor \"step\": ");
  REQUIRE_FALSE(std::filesystem::exists(out));
  // A quantized shard with a bad scale fails dequantize after the first shard is written: nothing is left.
  const std::string quantized = dir.file("q");
  REQUIRE(run(dir, {"quantize", write_sharded_model(dir, "ckpt2"), quantized}).code == 0);
  {
    SafetensorsWriter writer(quantized + "/" + s3);
    writer.add_tensor("step_scale", ScalarType::f32, {});
    writer.add_tensor("step", ScalarType::i8, {4});
    writer.add_metadata("shrink.format_version", "1");
    writer.add_metadata("shrink.quant.step",
                        R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","shape":[4]})");
    writer.write_header();
    const float scale = -0.5f;
    writer.write("step_scale", &scale, sizeof scale);
    const std::int8_t w[4] = {1, 2, 3, 4};
    writer.write("step", w, sizeof w);
    writer.finish();
    json index = json::parse(read_text(quantized + "/model.safetensors.index.json"));
    index["weight_map"]["step_scale"] = s3;
    write_text_file(quantized + "/model.safetensors.index.json", index.dump());
  }
  require_one_line_error(run(dir, {"dequantize", quantized, out}), 1, "dequantize", "expected a finite scale > 0");
  REQUIRE_FALSE(std::filesystem::exists(out));
  REQUIRE(entries_starting(dir.file(""), ".out.shrink-partial-") == 0);
}

namespace {

// Starts `shrink args...` with its output discarded; returns its process id.
pid_t start_cli(const std::vector<std::string>& args) {
  const std::string path = cli_path();
  std::vector<std::string> words{path};
  words.insert(words.end(), args.begin(), args.end());
  const pid_t child = ::fork();
  if (child == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0), ::dup2(null, 1), ::dup2(null, 2);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  return child;
}

// A checkpoint of `shards` shards of two F32 [1024, 1024] tensors each (8 MiB a shard); returns its total bytes.
std::uint64_t write_large_checkpoint(const std::string& directory, int shards) {
  std::filesystem::create_directories(directory);
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  std::vector<float> values(1024 * 1024);
  std::uint32_t state = 12345;
  std::uint64_t total = 0;
  for (int k = 0; k < shards; ++k) {
    char shard_name[64];
    std::snprintf(shard_name, sizeof shard_name, "model-%05d-of-%05d.safetensors", k + 1, shards);
    const std::string shard = shard_name;
    SafetensorsWriter writer(directory + "/" + shard);
    for (const char* part : {".q.weight", ".k.weight"}) {
      writer.add_tensor("layers." + std::to_string(k) + part, ScalarType::f32, {1024, 1024});
      index["weight_map"]["layers." + std::to_string(k) + part] = shard;
    }
    writer.write_header();
    for (const char* part : {".q.weight", ".k.weight"}) {
      for (float& v : values) v = static_cast<float>((state = state * 1664525u + 1013904223u) >> 8) * 0x1p-24f - 0.5f;
      writer.write("layers." + std::to_string(k) + part, values.data(), values.size() * sizeof(float));
      total += values.size() * sizeof(float);
    }
    writer.finish();
  }
  index["metadata"]["total_size"] = total;
  write_text_file(directory + "/model.safetensors.index.json", index.dump());
  return total;
}

}  // namespace

TEST_CASE("sharded checkpoints stream: peak memory stays far below the checkpoint; a killed run leaves no OUT",
          "[cli][sharded]") {
  shrink::test::TempDir dir;
  const std::string ckpt = dir.file("large");
  const std::uint64_t total = write_large_checkpoint(ckpt, 16);  // 128 MiB, 8 MiB a shard, 4 MiB a tensor

  // Peak resident bytes of a run of the command; Linux reports KiB.
  const auto peak_of = [](const std::vector<std::string>& args) {
    const pid_t child = start_cli(args);
    REQUIRE(child > 0);
    int status = 0;
    struct rusage usage {};
    REQUIRE(::wait4(child, &status, 0, &usage) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  };
  // What the program holds doing nothing (a build with the CUDA layer starts the CUDA runtime: ~200 MB).
  const std::uint64_t baseline = peak_of({"--version"});
  const std::uint64_t peak = peak_of({"quantize", ckpt, dir.file("q")});
  INFO("peak resident " << peak << " bytes (" << baseline << " for --version) for a checkpoint of " << total);
#if defined(__SANITIZE_ADDRESS__)
  WARN("peak memory not checked under AddressSanitizer (its quarantine holds freed memory)");
#else
  // One shard mapped (8 MiB) and one tensor's buffers (float copy, restored values, int8 data) at a time.
  REQUIRE(peak < baseline + total / 2);
#endif
  int status = 0;

  // Killed once the first shard is written: OUT never appears; the next run removes what the killed one left.
  const std::string out = dir.file("killed");
  const pid_t victim = start_cli({"quantize", ckpt, out});
  REQUIRE(victim > 0);
  const std::string staging = dir.file(".killed.shrink-partial-" + std::to_string(victim));
  bool caught = false;
  for (int i = 0; i < 200000 && !caught; ++i) {
    if (::waitpid(victim, &status, WNOHANG) == victim) break;
    std::error_code ignored;
    caught = std::filesystem::exists(staging + "/model-00001-of-00016.safetensors", ignored);
    if (!caught) ::usleep(100);
  }
  if (!caught) {
    WARN("the run finished before it could be killed; nothing to check");
    return;
  }
  ::kill(victim, SIGKILL);
  REQUIRE(::waitpid(victim, &status, 0) == victim);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE_FALSE(std::filesystem::exists(out));
  REQUIRE(run(dir, {"quantize", ckpt, out}).code == 0);
  REQUIRE(std::filesystem::exists(out + "/model.safetensors.index.json"));
  REQUIRE(entries_starting(dir.file(""), ".killed.shrink-partial-") == 0);
}

// Whether process `pid` runs the shrink program (not the forked test before its exec, which holds Catch's handlers)
// and has a handler for SIGINT yet (/proc/PID/status, SigCgt: the caught signals as a hex mask).
bool catches_sigint(pid_t pid) {
  std::error_code error;
  const std::string exe = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", error).filename();
  if (error || exe != "shrink") return false;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("SigCgt:", 0) == 0) return (std::stoull(line.substr(7), nullptr, 16) >> (SIGINT - 1)) & 1u;
  return false;
}

TEST_CASE("Ctrl-C stops a run at its next tensor: exit 130, no OUT and no staging directory left", "[cli][sharded]") {
  shrink::test::TempDir dir;
  const std::string ckpt = dir.file("large");
  write_large_checkpoint(ckpt, 16);  // 32 tensors: many steps, each short (so is the wait after Ctrl-C, ASan or not)
  for (const std::string what : {"directory", "file"}) {
    INFO(what);
    // The checkpoint directory into OUT (staged beside it), or one file into one file (an unnamed file until done).
    const std::string out = dir.file("interrupted-" + what);
    pid_t child = 0;
    int status = 0;
    bool running = false;
    if (what == "directory") {
      child = start_cli({"quantize", ckpt, out});
      REQUIRE(child > 0);
      // Once the first shard is written: the run is past its first steps and has a staging directory to remove.
      const std::string first = dir.file(".interrupted-directory.shrink-partial-" + std::to_string(child)) +
                                "/model-00001-of-00016.safetensors";
      for (int i = 0; i < 200000 && !running; ++i) {
        if (::waitpid(child, &status, WNOHANG) == child) break;
        std::error_code ignored;
        running = std::filesystem::exists(first, ignored);
        if (!running) ::usleep(100);
      }
    } else {
      // One file of 64 small tensors (64 MiB): short steps from the start.
      const std::string in = dir.file("many.safetensors");
      {
        SafetensorsWriter writer(in);
        for (int t = 0; t < 64; ++t)
          writer.add_tensor("layers." + std::to_string(t) + ".weight", ScalarType::f32, {256, 1024});
        writer.write_header();
        std::vector<float> values(256 * 1024);
        for (int t = 0; t < 64; ++t) {
          for (std::size_t i = 0; i < values.size(); ++i)
            values[i] = static_cast<float>((i * 2654435761u + t) % 1000) * 1e-3f;
          writer.write("layers." + std::to_string(t) + ".weight", values.data(), values.size() * sizeof(float));
        }
        writer.finish();
      }
      child = start_cli({"quantize", in, out});
      REQUIRE(child > 0);
      // Once it handles Ctrl-C (before that, Ctrl-C ends it as any program, with nothing written yet).
      for (int i = 0; i < 200000 && !running; ++i) {
        if (::waitpid(child, &status, WNOHANG) == child) break;
        running = catches_sigint(child);
        if (!running) ::usleep(100);
      }
    }
    if (!running) {
      WARN("the run finished before Ctrl-C; nothing to check");
      if (child > 0) ::waitpid(child, &status, 0);
      continue;
    }
    ::kill(child, SIGINT);
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 130);
    REQUIRE_FALSE(std::filesystem::exists(out));
    REQUIRE(entries_starting(dir.file(""), ".interrupted-") == 0);
  }
}

namespace {

// The calibration-based methods' model: three Linears and a norm. q and k read one input of 64 features (k's
// statistics are q's, through same_input_as), o reads 32 and is F16; the norm (1-D) is kept by default.
const std::string kQ = "layers.0.q_proj.weight";
const std::string kK = "layers.0.k_proj.weight";
const std::string kO = "layers.0.o_proj.weight";
const std::vector<std::string> kLinears = {kQ, kK, kO};

std::string write_linear_model(const shrink::test::TempDir& dir, const std::string& name = "linears.safetensors") {
  const std::string path = dir.file(name);
  SafetensorsWriter writer(path);
  writer.add_tensor(kQ, ScalarType::f32, {32, 64});
  writer.add_tensor(kK, ScalarType::f32, {16, 64});
  writer.add_tensor("layers.0.input_layernorm.weight", ScalarType::f32, {64});
  writer.add_tensor(kO, ScalarType::f16, {64, 32});
  writer.write_header();
  writer.write(kQ, bytes_of(shrink::test::random_values(32 * 64, 11, 0.05f)).data(), 32 * 64 * 4);
  writer.write(kK, bytes_of(shrink::test::random_values(16 * 64, 12, 0.05f)).data(), 16 * 64 * 4);
  writer.write("layers.0.input_layernorm.weight", bytes_of(shrink::test::random_values(64, 13)).data(), 64 * 4);
  writer.write(kO, bytes_of(to_half_bits(shrink::test::random_values(64 * 32, 14, 0.1f))).data(), 64 * 32 * 2);
  writer.finish();
  return path;
}

// n calibration rows of `in` correlated features, x = z·(I + 0.3·R), with channels 3 and 17 eight times larger (the
// salient channels AWQ protects).
std::vector<float> calibration_rows(std::int64_t n, std::int64_t in, unsigned seed) {
  const std::vector<float> z = shrink::test::random_values(static_cast<std::size_t>(n * in), seed);
  const std::vector<float> r = shrink::test::random_values(static_cast<std::size_t>(in * in), seed + 1, 0.3f);
  std::vector<float> x(static_cast<std::size_t>(n * in), 0.0f);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < in; ++j) {
      float v = z[static_cast<std::size_t>(t * in + j)];
      for (std::int64_t k = 0; k < in; ++k)
        v += z[static_cast<std::size_t>(t * in + k)] * r[static_cast<std::size_t>(k * in + j)];
      x[static_cast<std::size_t>(t * in + j)] = (j == 3 || j == 17) ? 8.0f * v : v;
    }
  return x;
}

// The statistics of rows x [n, in] as the calibration side gathers them: the Hessian from HessianObserver, the
// norms and mean |x| in double.
shrink::io::LinearInputStats input_stats(const std::vector<float>& x, std::int64_t in) {
  const std::int64_t n = static_cast<std::int64_t>(x.size()) / in;
  shrink::quant::HessianObserver observer;
  observer.observe(shrink::TensorView<const float>(x.data(), shrink::Shape{n, in}));
  shrink::io::LinearInputStats s;
  const shrink::quant::Hessian h = observer.hessian();
  s.samples = h.samples;
  s.hessian = h.values;
  s.act_norm.assign(static_cast<std::size_t>(in), 0.0);
  s.act_abs_mean.assign(static_cast<std::size_t>(in), 0.0);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < in; ++j) {
      const double v = x[static_cast<std::size_t>(t * in + j)];
      s.act_norm[static_cast<std::size_t>(j)] += v * v;
      s.act_abs_mean[static_cast<std::size_t>(j)] += std::fabs(v) / static_cast<double>(n);
    }
  for (double& v : s.act_norm) v = std::sqrt(v);
  return s;
}

std::map<std::string, shrink::io::LinearInputStats> model_stats(std::int64_t rows = 256) {
  return {{"layers.0.q_proj", input_stats(calibration_rows(rows, 64, 21), 64)},
          {"layers.0.o_proj", input_stats(calibration_rows(rows, 32, 23), 32)}};
}

const std::map<std::string, std::string> kAliases = {{"layers.0.k_proj", "layers.0.q_proj"}};

// The statistics file of the model above: q's (and k's, through same_input_as) and o's, from 256 rows each.
std::string write_calibration(const shrink::test::TempDir& dir, const std::string& name = "stats.safetensors") {
  const std::string path = dir.file(name);
  shrink::io::save_calibration_stats(path, model_stats(), kAliases);
  return path;
}

// A one-block llama GGUF of F32 tensors (width 64, MLP 96, four KV heads' worth of k and v rows) with the input
// statistics of its four linear inputs named as the GGUF's linears, for the methods of --format gguf.
struct GgufLlamaFixture {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<std::int64_t>> shapes;
  std::string model, stats;

  explicit GgufLlamaFixture(const shrink::test::TempDir& dir) {
    const std::int64_t width = 64, ffn = 256;  // ffn_down's rows whole K super-blocks, the others not (as SmolLM2's)
    const std::vector<std::pair<std::string, std::vector<std::int64_t>>> tensors = {
        {"token_embd.weight", {8, width}},       {"blk.0.attn_norm.weight", {width}},
        {"blk.0.attn_q.weight", {width, width}}, {"blk.0.attn_k.weight", {32, width}},
        {"blk.0.attn_v.weight", {32, width}},    {"blk.0.attn_output.weight", {width, width}},
        {"blk.0.ffn_norm.weight", {width}},      {"blk.0.ffn_gate.weight", {ffn, width}},
        {"blk.0.ffn_up.weight", {ffn, width}},   {"blk.0.ffn_down.weight", {width, ffn}},
        {"output_norm.weight", {width}}};
    shrink::io::GgufWriter w;
    w.set_string("general.architecture", "llama").set_uint32("llama.block_count", 1);
    unsigned seed = 60;
    for (const auto& [name, shape] : tensors) {
      std::int64_t n = 1;
      for (std::int64_t d : shape) n *= d;
      std::vector<float> v = shrink::test::random_values(static_cast<std::size_t>(n), seed++, 0.1f);
      if (shape.size() == 1)
        for (float& x : v) x = 1.0f + x;  // a norm's gains, near 1
      std::vector<std::uint8_t> bytes(v.size() * 4);
      shrink::io::gguf_quantize(0, v.data(), n, bytes.data());
      w.add_tensor(name, shape, 0, bytes);
      values[name] = v;
      shapes[name] = shape;
    }
    model = dir.file("llama.gguf");
    w.write(model);
    stats = dir.file("llama-stats.safetensors");
    shrink::io::save_calibration_stats(
        stats,
        {{"blk.0.attn_q", input_stats(calibration_rows(256, width, 31), width)},
         {"blk.0.attn_output", input_stats(calibration_rows(256, width, 33), width)},
         {"blk.0.ffn_gate", input_stats(calibration_rows(256, width, 35), width)},
         {"blk.0.ffn_down", input_stats(calibration_rows(256, ffn, 37), ffn)}},
        {{"blk.0.attn_k", "blk.0.attn_q"}, {"blk.0.attn_v", "blk.0.attn_q"}, {"blk.0.ffn_up", "blk.0.ffn_gate"}});
  }
  shrink::TensorView<const float> view(const std::string& name) const {
    const std::vector<std::int64_t>& shape = shapes.at(name);
    return {values.at(name).data(), shrink::Shape{shape[0], shape[1]}};
  }
};

std::vector<std::uint8_t> gguf_encoded(const shrink::quant::BlockQuantized& q) {
  const auto layout = shrink::io::gguf_type_layout(shrink::io::gguf_type_of(q.format));
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(q.rows * q.cols) / layout.block_elements *
                                  layout.block_bytes);
  shrink::io::encode_gguf_blocks(q, bytes.data());
  return bytes;
}

std::vector<std::uint8_t> gguf_tensor_bytes(const shrink::io::GgufFile& f, const std::string& name) {
  const shrink::io::GgufTensorInfo& t = f.tensor(name);
  return std::vector<std::uint8_t>(f.tensor_data(t), f.tensor_data(t) + t.bytes);
}

// ‖A − B‖ / ‖B‖ of two [rows, cols] row-major products: a·diag(ga) against b·diag(gb) (a gain per column).
double gguf_relative_gap(const std::vector<float>& a, const std::vector<float>& ga, const std::vector<float>& b,
                         const std::vector<float>& gb) {
  double num = 0.0, den = 0.0;
  const std::size_t cols = ga.size();
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = static_cast<double>(a[k]) * ga[k % cols], y = static_cast<double>(b[k]) * gb[k % cols];
    num += (x - y) * (x - y);
    den += y * y;
  }
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("quantize --format gguf --method gptq|hqq|awq writes the library's blocks, AWQ's factors folded",
          "[cli][gguf]") {
  using shrink::quant::BlockFormat;
  shrink::test::TempDir dir;
  const GgufLlamaFixture f(dir);
  const shrink::io::CalibrationStatsFile stats(f.stats);

  SECTION("gptq: each linear's blocks as gptq_quantize_blocks gives them, with its input's Hessian") {
    const std::string out = dir.file("gptq.gguf");
    const Result r = run(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q4_0", "--method", "gptq",
                               "--calibration", f.stats, "--act-order"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("--method gptq onto its blocks") != std::string::npos);
    CHECK(r.out.find("gptq: loss") != std::string::npos);
    const shrink::io::GgufFile written = shrink::io::GgufFile::open(out);
    shrink::quant::GptqOptions o;
    o.act_order = o.static_groups = true;
    for (const char* linear : {"blk.0.attn_v", "blk.0.ffn_down"}) {
      INFO(linear);
      const auto factor = shrink::quant::inverse_hessian_factor(stats.hessian(stats.source(linear)),
                                                                shrink::quant::inverse_hessian_options(o));
      const auto q =
          shrink::quant::gptq_quantize_blocks(f.view(std::string(linear) + ".weight"), factor, BlockFormat::q4_0, o);
      CHECK(gguf_tensor_bytes(written, std::string(linear) + ".weight") == gguf_encoded(q));
    }
    // The output head (the tied embedding) stays on llama.cpp's reference path.
    std::vector<std::uint8_t> head(gguf_tensor_bytes(written, "token_embd.weight").size());
    shrink::io::gguf_quantize(8, f.values.at("token_embd.weight").data(), 8 * 64, head.data());
    CHECK(gguf_tensor_bytes(written, "token_embd.weight") == head);
  }
  SECTION("gptq onto Q4_K: ffn_down on its super-blocks, the linears of rows of 64 on Q5_0 as llama.cpp falls back") {
    const std::string out = dir.file("gptq-q4k.gguf");
    const json j = run_json(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q4_k", "--method", "gptq",
                                  "--calibration", f.stats, "--json"});
    std::map<std::string, std::string> to, note;
    for (const json& t : j["tensors"]) {
      to[t["name"]] = t["to"];
      note[t["name"]] = t["note"];
    }
    CHECK(to["blk.0.ffn_down.weight"] == "Q4_K");
    CHECK(to["blk.0.attn_q.weight"] == "Q5_0");
    CHECK(note["blk.0.attn_q.weight"] ==
          "rows of 64 are not whole super-blocks of 256: Q5_0, as llama.cpp falls back to");
    CHECK(to["token_embd.weight"] == "Q8_0");
    const shrink::io::GgufFile written = shrink::io::GgufFile::open(out);
    shrink::quant::GptqOptions o;
    for (const auto& [linear, format] : {std::pair<const char*, BlockFormat>{"blk.0.ffn_down", BlockFormat::q4_k},
                                         {"blk.0.attn_v", BlockFormat::q5_0}}) {
      INFO(linear);
      const auto factor = shrink::quant::inverse_hessian_factor(stats.hessian(stats.source(linear)),
                                                                shrink::quant::inverse_hessian_options(o));
      const auto q = shrink::quant::gptq_quantize_blocks(f.view(std::string(linear) + ".weight"), factor, format, o);
      CHECK(gguf_tensor_bytes(written, std::string(linear) + ".weight") == gguf_encoded(q));
    }
  }
  SECTION("hqq: no calibration") {
    const std::string out = dir.file("hqq.gguf");
    const json j =
        run_json(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q4_1", "--method", "hqq", "--json"});
    CHECK(j["method"] == "hqq");
    const shrink::io::GgufFile written = shrink::io::GgufFile::open(out);
    const auto q = shrink::quant::hqq_quantize_blocks(f.view("blk.0.attn_q.weight"), BlockFormat::q4_1,
                                                      shrink::quant::HqqOptions{});
    CHECK(gguf_tensor_bytes(written, "blk.0.attn_q.weight") == gguf_encoded(q));
  }
  SECTION("awq: 1/s folded into the norms and up's rows, attn_output clipped only; the function kept") {
    const std::string out = dir.file("awq.gguf");
    const Result r = run(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q8_0", "--method", "awq",
                               "--calibration", f.stats});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const shrink::io::GgufFile written = shrink::io::GgufFile::open(out);
    const std::vector<float> attn_norm = written.dequantize("blk.0.attn_norm.weight");
    const std::vector<float> ffn_norm = written.dequantize("blk.0.ffn_norm.weight");
    CHECK(attn_norm != f.values.at("blk.0.attn_norm.weight"));
    CHECK(ffn_norm != f.values.at("blk.0.ffn_norm.weight"));
    // W·diag(norm) is what the layer computes with: kept to Q8_0's error.
    for (const char* linear : {"blk.0.attn_q", "blk.0.attn_k", "blk.0.attn_v"})
      CHECK(gguf_relative_gap(written.dequantize(std::string(linear) + ".weight"), attn_norm,
                              f.values.at(std::string(linear) + ".weight"),
                              f.values.at("blk.0.attn_norm.weight")) < 0.01);
    CHECK(gguf_relative_gap(written.dequantize("blk.0.ffn_gate.weight"), ffn_norm, f.values.at("blk.0.ffn_gate.weight"),
                            f.values.at("blk.0.ffn_norm.weight")) < 0.01);
    // down · diag(silu(gate)) · up · diag(ffn_norm): the factor between down's columns and up's rows cancels (row r
    // of up · column r of down, summed over r), and up's columns carry the MLP input's factor as gate's do.
    const std::vector<float> down = written.dequantize("blk.0.ffn_down.weight"),
                             up = written.dequantize("blk.0.ffn_up.weight");
    const std::vector<float>& down0 = f.values.at("blk.0.ffn_down.weight");
    const std::vector<float>& up0 = f.values.at("blk.0.ffn_up.weight");
    std::vector<float> prod(64 * 64, 0.0f), prod0(64 * 64, 0.0f);
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t rr = 0; rr < 256; ++rr)
        for (std::size_t j = 0; j < 64; ++j) {
          prod[i * 64 + j] += down[i * 256 + rr] * up[rr * 64 + j];
          prod0[i * 64 + j] += down0[i * 256 + rr] * up0[rr * 64 + j];
        }
    CHECK(gguf_relative_gap(prod, ffn_norm, prod0, f.values.at("blk.0.ffn_norm.weight")) < 0.01);
    CHECK(up != f.values.at("blk.0.ffn_up.weight"));
    // attn_output: s = 1 and the clip search alone.
    shrink::quant::AwqOptions o;
    o.block_format = BlockFormat::q8_0;
    const std::vector<float> s(64, 1.0f);
    const auto h = stats.hessian("blk.0.attn_output");
    const auto w = f.view("blk.0.attn_output.weight");
    CHECK(gguf_tensor_bytes(written, "blk.0.attn_output.weight") ==
          gguf_encoded(shrink::quant::awq_quantize_blocks(w, s, o, shrink::quant::awq_clip_search(w, h, s, o))));
  }
  SECTION("what the statistics or the layout cannot serve is refused before OUT exists") {
    const std::string partial = dir.file("partial-stats.safetensors");
    shrink::io::save_calibration_stats(partial, {{"blk.0.attn_q", input_stats(calibration_rows(256, 64, 31), 64)}},
                                       {{"blk.0.attn_k", "blk.0.attn_q"}, {"blk.0.attn_v", "blk.0.attn_q"}});
    const std::string out = dir.file("x.gguf");
    require_one_line_error(run(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q4_0", "--method", "gptq",
                                     "--calibration", partial}),
                           1, "quantize", "has no statistics for the Linear \"blk.0.attn_output\"");
    require_one_line_error(run(dir, {"quantize", f.model, out, "--format", "gguf", "--type", "q4_0", "--method", "gptq",
                                     "--calibration", f.stats, "--min-samples", "300"}),
                           1, "quantize", "expected at least 300 (--min-samples)");
    CHECK_FALSE(std::filesystem::exists(out));
  }
}

namespace {

// A statistics file written tensor by tensor, for the hostile ones save_calibration_stats refuses to write.
void write_raw_stats(const std::string& path, const std::map<std::string, std::vector<double>>& tensors,
                     const std::map<std::string, std::string>& metadata) {
  std::vector<shrink::io::TensorDeclaration> declarations;
  for (const auto& [name, values] : tensors) {
    const bool square = name.size() > 8 && name.compare(name.size() - 8, 8, ".hessian") == 0;
    const std::int64_t count = static_cast<std::int64_t>(values.size());
    const std::int64_t in = square ? std::llround(std::sqrt(static_cast<double>(count))) : count;
    declarations.push_back(
        {name, ScalarType::f64, square ? std::vector<std::int64_t>{in, in} : std::vector<std::int64_t>{in}});
  }
  SafetensorsWriter writer(path, declarations, metadata);
  for (const auto& [name, values] : tensors) writer.write(name, values.data(), values.size() * sizeof(double));
  writer.finish();
}

// A model tensor as float32 and its [out, in] view.
struct Weight {
  std::vector<float> values;
  shrink::Shape shape;
  shrink::TensorView<const float> view() const { return {values.data(), shape}; }
};
Weight read_weight(const std::string& model, const std::string& name) {
  const SafetensorsFile file(model);
  return {shrink::io::read_float(file, name), shrink::Shape(file.info(name).shape)};
}

// The convention's value of a tensor with an input scale s (AWQ's): dequantize(q)[r, c] / s[c], one float division.
std::vector<float> divided_by(std::vector<float> values, const std::vector<float>& s) {
  for (std::size_t k = 0; k < values.size(); ++k) values[k] /= s[k % s.size()];
  return values;
}

// Tensor `name` of `out` is stored as the library's `expected`: the same scheme, integers, scales and values (divided
// by `input_scale` when given).
void require_stored_as(const std::string& out, const std::string& name, const shrink::quant::QuantizedTensor& expected,
                       const std::vector<float>& input_scale = {}) {
  INFO(name);
  const SafetensorsFile file(out);
  const shrink::quant::QuantizedTensor q = shrink::io::read_quantized(file, name);
  REQUIRE(q.scheme.dtype == expected.scheme.dtype);
  REQUIRE(q.scheme.symmetry == expected.scheme.symmetry);
  REQUIRE(q.scheme.granularity == expected.scheme.granularity);
  REQUIRE(q.scheme.group_size == expected.scheme.group_size);
  REQUIRE(q.scheme.bits == expected.scheme.bits);
  REQUIRE(std::vector<std::uint8_t>(q.data.begin(), q.data.end()) ==
          std::vector<std::uint8_t>(expected.data.begin(), expected.data.end()));
  REQUIRE(q.qparams.scale == expected.qparams.scale);
  REQUIRE(q.scheme.float_zero_point == expected.scheme.float_zero_point);
  REQUIRE(q.qparams.zero_point == expected.qparams.zero_point);
  REQUIRE(q.qparams.float_zero_point == expected.qparams.float_zero_point);
  REQUIRE(shrink::quant::dequantize(q) == shrink::quant::dequantize(expected));
  const std::vector<float> value = shrink::io::read_float(file, name);
  REQUIRE(value == (input_scale.empty() ? shrink::quant::dequantize(expected)
                                        : divided_by(shrink::quant::dequantize(expected), input_scale)));
  REQUIRE(shrink::io::read_input_scale(file, name) == input_scale);
}

std::string calibrator_of(const std::string& out, const std::string& name) {
  return shrink::io::quantization_record(SafetensorsFile(out), name)->calibrator;
}

std::string linear_of(const std::string& weight) { return weight.substr(0, weight.size() - 7); }

}  // namespace

TEST_CASE("quantize --method gptq, awq, hqq, rtn store what the library gives for the same inputs, bit for bit",
          "[cli][methods]") {
  namespace q = shrink::quant;
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string stats = write_calibration(dir);
  const shrink::io::CalibrationStatsFile file(stats);
  const std::string out = dir.file("out.safetensors");
  auto quantize = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"quantize", model, out});
    args.push_back("--json");
    const json report = run_json(dir, args);
    REQUIRE(report["totals"]["quantized"] == 3);  // the norm is kept by default
    return report;
  };

  SECTION("gptq, 3 bits in int4, groups of 16; k through same_input_as") {
    const json report = quantize({"--method", "gptq", "--calibration", stats, "--bits", "3", "--group-size", "16"});
    REQUIRE(report["method"] == "gptq");
    REQUIRE(report["calibration"]["unused_statistics"].empty());
    q::GptqOptions o;
    o.bits = 3;
    o.group_size = 16;
    for (const std::string& name : kLinears) {
      const Weight w = read_weight(model, name);
      require_stored_as(out, name, q::gptq_quantize(w.view(), file.hessian(linear_of(name)), o));
      REQUIRE(calibrator_of(out, name) == "gptq damp=0.01");
    }
  }
  SECTION("gptq --act-order with groups: static groups, the columns in their own order; --static-groups alone") {
    for (const bool act_order : {true, false}) {
      INFO(act_order);
      quantize({"--method", "gptq", "--calibration", stats, act_order ? "--act-order" : "--static-groups",
                "--group-size", "16", "--damp", "0.05"});
      q::GptqOptions o;
      o.group_size = 16;
      o.act_order = act_order;
      o.static_groups = true;
      o.damp_percent = 0.05;
      for (const std::string& name : kLinears) {
        const Weight w = read_weight(model, name);
        require_stored_as(out, name, q::gptq_quantize(w.view(), file.hessian(linear_of(name)), o));
        REQUIRE(calibrator_of(out, name) ==
                std::string("gptq") + (act_order ? " act_order" : "") + " static_groups damp=0.05");
      }
    }
  }
  SECTION("gptq, 6 bits in uint8 with zero points, one scale per row") {
    quantize({"--method", "gptq", "--calibration", stats, "--bits", "6", "--group-size", "0", "--scheme", "affine"});
    q::GptqOptions o;
    o.bits = 6;
    o.group_size = 0;
    o.symmetry = q::Symmetry::affine;
    for (const std::string& name : kLinears) {
      const Weight w = read_weight(model, name);
      require_stored_as(out, name, q::gptq_quantize(w.view(), file.hessian(linear_of(name)), o));
    }
  }
  SECTION("awq: W·diag(s) quantized, s stored as LINEAR.input_scale and named by the record") {
    for (const bool clip : {true, false}) {
      INFO(clip);
      std::vector<std::string> args = {"--method", "awq", "--calibration", stats, "--group-size", "16"};
      if (!clip) args.push_back("--no-clip");
      const json report = quantize(args);
      q::AwqOptions o;
      o.group_size = 16;
      for (const std::string& name : kLinears) {
        const Weight w = read_weight(model, name);
        const q::Hessian h = file.hessian(linear_of(name));
        std::vector<float> mean_abs;
        for (double v : file.act_abs_mean(linear_of(name))) mean_abs.push_back(static_cast<float>(v));
        const q::AwqResult search = q::awq_search({w.view()}, h, mean_abs, o);
        const std::vector<float> bounds =
            clip ? q::awq_clip_search(w.view(), h, search.scales, o) : std::vector<float>{};
        require_stored_as(out, name, q::awq_quantize(w.view(), search.scales, o, bounds), search.scales);
        const std::string scale_name = linear_of(name) + ".input_scale";
        REQUIRE(shrink::io::quantization_record(SafetensorsFile(out), name)->input_scale == scale_name);
        REQUIRE(shrink::io::read_float(SafetensorsFile(out), scale_name) == search.scales);
        REQUIRE(SafetensorsFile(out).info(scale_name).shape == std::vector<std::int64_t>{w.shape[1]});
        char alpha[32];
        std::snprintf(alpha, sizeof alpha, "%g", search.alpha);
        REQUIRE(calibrator_of(out, name) == "awq alpha=" + std::string(alpha) + (clip ? " clip" : ""));
        for (const json& t : report["tensors"])
          if (t["name"] == name) {
            REQUIRE(t["input_scale"] == scale_name);
            REQUIRE(t["details"]["alpha"] == search.alpha);
            // The SQNR is that of the weight the layer computes with, Q(W·diag(s))·diag(s)⁻¹.
            REQUIRE(t["sqnr_db"].get<double>() > 10.0);
          }
      }
    }
  }
  SECTION("hqq, 3 bits, no calibration") {
    quantize({"--method", "hqq", "--bits", "3", "--group-size", "16"});
    q::HqqOptions o;
    o.bits = 3;
    o.group_size = 16;
    for (const std::string& name : kLinears) {
      const Weight w = read_weight(model, name);
      const q::QuantizedTensor expected = q::hqq_quantize(w.view(), o);
      REQUIRE(expected.qparams.fractional());  // the default, the paper's form: an F32 `_zero_point`
      require_stored_as(out, name, expected);
      REQUIRE(calibrator_of(out, name) == "hqq");
      REQUIRE(shrink::io::quantization_record(SafetensorsFile(out), name)->scheme.float_zero_point);
    }
  }
  SECTION("rtn, the default method: --dtype and its flags as before") {
    for (const bool named : {false, true}) {
      std::vector<std::string> args = {"--dtype",      "int4", "--granularity", "group",
                                       "--group-size", "16",   "--scheme",      "affine"};
      if (named) args.insert(args.end(), {"--method", "rtn"});
      REQUIRE(quantize(args)["method"] == "rtn");
      for (const std::string& name : kLinears) {
        const Weight w = read_weight(model, name);
        require_stored_as(
            out, name,
            q::quantize(w.view(), q::QuantScheme::per_group(q::QuantDtype::int4, q::Symmetry::affine, 1, 16)));
        REQUIRE(calibrator_of(out, name) == "minmax");
      }
    }
  }
}

TEST_CASE("an AWQ file through dequantize, compare and inspect: the weight W itself, the input scale a parameter",
          "[cli][methods][awq]") {
  namespace q = shrink::quant;
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string stats = write_calibration(dir);
  const shrink::io::CalibrationStatsFile file(stats);
  const std::string awq = dir.file("awq.safetensors");
  const json report = run_json(
      dir, {"quantize", model, awq, "--method", "awq", "--calibration", stats, "--group-size", "16", "--json"});

  // The library's W' = dequantize(awq_quantize(W, s)) / s of each Linear: the values every reader must give.
  q::AwqOptions o;
  o.group_size = 16;
  std::map<std::string, std::vector<float>> expected, stored_only;
  for (const std::string& name : kLinears) {
    const Weight w = read_weight(model, name);
    const q::Hessian h = file.hessian(linear_of(name));
    std::vector<float> mean_abs;
    for (double v : file.act_abs_mean(linear_of(name))) mean_abs.push_back(static_cast<float>(v));
    const q::AwqResult search = q::awq_search({w.view()}, h, mean_abs, o);
    const q::QuantizedTensor quantized =
        q::awq_quantize(w.view(), search.scales, o, q::awq_clip_search(w.view(), h, search.scales, o));
    stored_only[name] = q::dequantize(quantized);
    expected[name] = divided_by(stored_only[name], search.scales);
  }

  const std::string restored = dir.file("restored.safetensors");
  for (const char* dtype : {"f32", "source"}) {
    CAPTURE(dtype);
    const json d = run_json(dir, {"dequantize", awq, restored, "--dtype", dtype, "--json"});
    REQUIRE(d["dequantized"].size() == 3);
    REQUIRE(d["copied"] == json::array({"layers.0.input_layernorm.weight"}));
    const SafetensorsFile r(restored);
    REQUIRE(r.tensors().size() == 4);  // the model's own tensors: no input scale, no parameters
    for (const std::string& name : kLinears) {
      INFO(name);
      REQUIRE_FALSE(r.contains(linear_of(name) + ".input_scale"));
      std::vector<float> want = expected[name];
      if (name == kO && std::string(dtype) == "source")
        for (float& v : want) v = shrink::half(v).to_float();  // o was F16
      REQUIRE(shrink::io::read_float(r, name) == want);
    }
  }

  // compare measures the weights themselves: the same figures as against the dequantized file, and the quantize
  // report's SQNR; the stored values alone (W·diag(s)) would be far off.
  REQUIRE(run(dir, {"dequantize", awq, restored, "--dtype", "f32"}).code == 0);
  const json direct = compare(dir, model, awq);
  const json via_file = compare(dir, model, restored);
  REQUIRE(direct["only_in_a"].empty());
  REQUIRE(direct["only_in_b"].empty());
  REQUIRE(direct["overall"]["tensors"] == 3);
  for (const std::string& name : kLinears) {
    INFO(name);
    const double sqnr = tensor_sqnr(direct, name);
    REQUIRE(sqnr == tensor_sqnr(via_file, name));
    for (const json& t : report["tensors"])
      if (t["name"] == name) REQUIRE(t["sqnr_db"].get<double>() == Approx(sqnr).epsilon(1e-12));
    const Weight w = read_weight(model, name);
    const double without_scale =
        shrink::metrics::sqnr_db(w.view(), shrink::TensorView<const float>(stored_only[name].data(), w.shape));
    CAPTURE(sqnr, without_scale);
    REQUIRE(sqnr > 10.0);
    REQUIRE(sqnr > without_scale + 3.0);
  }
  for (const json& t : direct["tensors"])
    if (t["name"] == kQ) REQUIRE(t["b"]["bytes"] == 32 * 32 + 32 * 4 * 4 + 32 * 4 + 64 * 4);  // + s [64] F32

  // inspect: the input scale is a parameter of its weight, counted in its stored bytes, not a model tensor.
  const json listing = run_json(dir, {"inspect", awq, "--json"});
  REQUIRE(listing["totals"]["model_tensors"] == 4);
  REQUIRE(listing["totals"]["quantized_tensors"] == 3);
  for (const json& t : listing["tensors"]) {
    if (t["name"] == "layers.0.q_proj.input_scale") REQUIRE(t["parameter_of"] == kQ);
    if (t["name"] == kQ) {
      REQUIRE(t["quantization"]["input_scale"] == "layers.0.q_proj.input_scale");
      REQUIRE(t["quantization"]["stored_bytes"] == 32 * 32 + 32 * 4 * 4 + 32 * 4 + 64 * 4);
    }
  }
  const Result table = run(dir, {"inspect", awq});
  REQUIRE(table.code == 0);
  REQUIRE(table.out.find("input scale of " + kQ) != std::string::npos);
  REQUIRE(table.out.find(", divided by layers.0.q_proj.input_scale") != std::string::npos);
}

TEST_CASE("hostile input scales: dequantize, compare and inspect exit 1 with one line and write nothing",
          "[cli][awq]") {
  shrink::test::TempDir dir;
  const std::string record =
      R"({"dtype":"int8","scheme":"symmetric","granularity":"per_tensor","axis":0,"group_size":0,)";
  // w [2, 4] int8 with the input scale `field` names; `scale` the tensor "w.input_scale" (none when empty).
  auto write = [&](const std::string& name, const std::string& field, ScalarType dtype, std::vector<float> scale) {
    const std::string path = dir.file(name);
    SafetensorsWriter writer(path);
    writer.add_tensor("w", ScalarType::i8, {2, 4});
    writer.add_tensor("w_scale", ScalarType::f32, {});
    if (!scale.empty())
      writer.add_tensor("w.input_scale", dtype,
                        {static_cast<std::int64_t>(dtype == ScalarType::f32 ? scale.size() : 4)});
    writer.add_metadata("shrink.format_version", "1");
    writer.add_metadata("shrink.quant.w", record + field + R"("shape":[2,4]})");
    writer.write_header();
    const std::int8_t w[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    writer.write("w", w, sizeof w);
    const float s = 0.5f;
    writer.write("w_scale", &s, sizeof s);
    if (!scale.empty()) {
      if (dtype == ScalarType::f32) {
        writer.write("w.input_scale", scale.data(), scale.size() * sizeof(float));
      } else {
        const std::vector<std::uint16_t> bits = to_half_bits({1, 1, 1, 1});
        writer.write("w.input_scale", bits.data(), bits.size() * 2);
      }
    }
    writer.finish();
    return path;
  };
  const std::string field = R"("input_scale":"w.input_scale",)";
  const std::string valid = write("valid.safetensors", field, ScalarType::f32, {1, 2, 4, 8});
  REQUIRE(shrink::io::read_float(SafetensorsFile(valid), "w") ==
          std::vector<float>{0.5f, -0.5f, 0.375f, -0.25f, 2.5f, -1.5f, 0.875f, -0.5f});
  const std::string out = dir.file("out.safetensors");
  const std::vector<std::pair<std::string, std::string>> files = {
      {write("missing.safetensors", field, ScalarType::f32, {}), "no input scale tensor \"w.input_scale\""},
      {write("f16.safetensors", field, ScalarType::f16, {1}), "has dtype F16 and shape [4]: expected F32 [4]"},
      {write("short.safetensors", field, ScalarType::f32, {1, 1, 1}), "shape [3]: expected F32 [4]"},
      {write("zero.safetensors", field, ScalarType::f32, {1, 0, 1, 1}), "expected a finite input scale > 0"},
      {write("nan.safetensors", field, ScalarType::f32, {1, 1, NAN, 1}), "expected a finite input scale > 0"},
      {write("number.safetensors", R"("input_scale":3,)", ScalarType::f32, {1, 1, 1, 1}), "expected a string"},
      {write("itself.safetensors", R"("input_scale":"w",)", ScalarType::f32, {1, 1, 1, 1}),
       "names the record's own tensor \"w\""},
  };
  for (const auto& [path, expected] : files) {
    CAPTURE(path);
    require_each_fails(dir,
                       {{"dequantize", {path, out}, expected},
                        {"compare", {valid, path}, expected},
                        {"inspect", {path}, expected},
                        {"quantize", {path, out}, expected}},
                       1, out);
  }
}

TEST_CASE("prune --method sparsegpt stores what the library gives; wanda reads act_norm from --calibration",
          "[cli][methods]") {
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string stats = write_calibration(dir);
  const shrink::io::CalibrationStatsFile file(stats);
  const std::string out = dir.file("out.safetensors");

  SECTION("sparsegpt, 50% and 2:4; the F16 weight written back in F16") {
    for (const bool nm : {false, true}) {
      INFO(nm);
      std::vector<std::string> args = {"prune", model, out, "--method", "sparsegpt", "--calibration", stats, "--json"};
      if (nm)
        args.insert(args.end(), {"--n", "2", "--m", "4"});
      else
        args.insert(args.end(), {"--sparsity", "0.5"});
      const json report = run_json(dir, args);
      REQUIRE(report["totals"]["pruned"] == 3);
      REQUIRE(report["method"] == "sparsegpt");
      shrink::prune::SparseGptOptions o;
      if (nm) o.pattern = shrink::prune::NmPattern{2, 4};
      for (const std::string& name : kLinears) {
        INFO(name);
        const Weight w = read_weight(model, name);
        std::vector<float> expected = shrink::prune::sparsegpt_prune(w.view(), file.hessian(linear_of(name)), o).weight;
        if (name == kO)
          for (float& v : expected) v = shrink::half(v).to_float();  // stored in the tensor's own F16
        REQUIRE(shrink::io::read_float(SafetensorsFile(out), name) == expected);
        REQUIRE(SafetensorsFile(out).info(name).dtype == SafetensorsFile(model).info(name).dtype);
      }
    }
  }
  SECTION("wanda with --calibration: the mask of the file's act_norm (k's through same_input_as)") {
    const json report = run_json(
        dir, {"prune", model, out, "--method", "wanda", "--sparsity", "0.5", "--calibration", stats, "--json"});
    REQUIRE(report["totals"]["pruned"] == 3);
    for (const std::string& name : kLinears) {
      INFO(name);
      const Weight w = read_weight(model, name);
      std::vector<float> norms;
      for (double v : file.act_norm(linear_of(name))) norms.push_back(static_cast<float>(v));
      const shrink::prune::Mask mask = shrink::prune::wanda_mask(w.view(), norms, shrink::prune::Amount::fraction(0.5));
      std::vector<float> expected = w.values;
      for (std::int64_t k = 0; k < mask.size(); ++k)
        if (!mask.kept(k)) expected[static_cast<std::size_t>(k)] = 0.0f;
      REQUIRE(shrink::io::read_float(SafetensorsFile(out), name) == expected);
    }
  }
}

TEST_CASE("sharded checkpoints: --method runs give the single file's tensors; q and k in two shards share an input",
          "[cli][methods][sharded]") {
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string stats = write_calibration(dir);
  const std::string ckpt = dir.file("ckpt");
  write_shards(model, ckpt, {{kQ, "layers.0.input_layernorm.weight"}, {kK}, {kO}});
  const std::vector<std::vector<std::string>> runs = {
      {"quantize", "--method", "gptq", "--calibration", stats, "--group-size", "16"},
      {"quantize", "--method", "awq", "--calibration", stats, "--group-size", "32"},
      {"prune", "--method", "sparsegpt", "--calibration", stats, "--sparsity", "0.25"}};
  for (const std::vector<std::string>& run_args : runs) {
    INFO(run_args[2]);
    const std::string single = dir.file("single.safetensors");
    const std::string sharded = dir.file("sharded");
    std::vector<std::string> a = run_args;
    a.insert(a.begin() + 1, {model, single});
    REQUIRE(run(dir, a).code == 0);
    std::vector<std::string> b = run_args;
    b.insert(b.begin() + 1, {ckpt, sharded});
    const Result r = run(dir, b);
    INFO(r.err);
    REQUIRE(r.code == 0);
    require_consistent_checkpoint(sharded);
    const SafetensorsFile one(single);
    for (const auto& t : one.tensors()) {
      INFO(t.name);
      const std::string shard = t.name == kK || t.name.rfind("layers.0.k_proj.", 0) == 0   ? kShardNames[1]
                                : t.name == kO || t.name.rfind("layers.0.o_proj.", 0) == 0 ? kShardNames[2]
                                                                                           : kShardNames[0];
      const SafetensorsFile part(sharded + "/" + shard);
      const auto bytes = part.bytes(t.name);
      const auto expected = one.bytes(t.name);
      REQUIRE(bytes.size == expected.size);
      REQUIRE(std::memcmp(bytes.data, expected.data, bytes.size) == 0);
    }
    REQUIRE(entries_starting(dir.file(""), ".sharded") == 0);
    std::filesystem::remove_all(sharded);
    std::filesystem::remove(single);
  }
}

TEST_CASE("calibration statistics that do not fit, and flags that do not apply: one error, no output",
          "[cli][methods]") {
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string stats = write_calibration(dir);
  const std::string out = dir.file("out.safetensors");
  std::map<std::string, shrink::io::LinearInputStats> good = model_stats();

  // q's statistics alone: k (no alias) and o have none.
  const std::string only_q = dir.file("only_q.safetensors");
  shrink::io::save_calibration_stats(only_q, {{"layers.0.q_proj", good.at("layers.0.q_proj")}});
  // o's statistics of 64 features for a weight of input width 32.
  const std::string wide = dir.file("wide.safetensors");
  {
    auto linears = good;
    linears["layers.0.o_proj"] = good.at("layers.0.q_proj");
    shrink::io::save_calibration_stats(wide, linears, kAliases);
  }
  // A Hessian that no damping of 1% makes positive-definite: 1 on the diagonal, 2 elsewhere.
  const std::string indefinite = dir.file("indefinite.safetensors");
  {
    auto linears = good;
    for (std::size_t i = 0; i < 64; ++i)
      for (std::size_t j = 0; j < 64; ++j) linears["layers.0.q_proj"].hessian[i * 64 + j] = i == j ? 1.0 : 2.0;
    shrink::io::save_calibration_stats(indefinite, linears, kAliases);
  }
  // Hostile files save_calibration_stats would not write: a NaN in a Hessian, another layout version.
  std::map<std::string, std::vector<double>> raw = {
      {"layers.0.q_proj.hessian", good.at("layers.0.q_proj").hessian},
      {"layers.0.q_proj.act_abs_mean", good.at("layers.0.q_proj").act_abs_mean},
      {"layers.0.o_proj.hessian", good.at("layers.0.o_proj").hessian},
      {"layers.0.o_proj.act_abs_mean", good.at("layers.0.o_proj").act_abs_mean}};
  std::map<std::string, std::string> meta = {{"shrink.calibration", "1"},
                                             {"layers.0.q_proj.samples", "256"},
                                             {"layers.0.o_proj.samples", "256"},
                                             {"layers.0.k_proj.same_input_as", "layers.0.q_proj"}};
  const std::string nan = dir.file("nan.safetensors");
  {
    auto tensors = raw;
    tensors["layers.0.o_proj.hessian"][33] = NAN;
    write_raw_stats(nan, tensors, meta);
  }
  const std::string version = dir.file("version.safetensors");
  {
    auto metadata = meta;
    metadata["shrink.calibration"] = "2";
    write_raw_stats(version, raw, metadata);
  }
  // Hessians without act_abs_mean (AWQ needs both).
  const std::string no_mean = dir.file("no_mean.safetensors");
  {
    auto tensors = raw;
    tensors.erase("layers.0.q_proj.act_abs_mean");
    write_raw_stats(no_mean, tensors, meta);
  }
  const std::size_t inputs = 8;

  const std::vector<FailingCase> data_errors = {
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", only_q, "--group-size", "16"},
       "tensor \"layers.0.k_proj.weight\": calibration file " + only_q +
           " has no statistics for the Linear \"layers.0.k_proj\""},
      {"prune",
       {model, out, "--method", "sparsegpt", "--calibration", only_q, "--sparsity", "0.5"},
       "has no statistics for the Linear \"layers.0.k_proj\""},
      {"prune",
       {model, out, "--method", "wanda", "--calibration", only_q, "--sparsity", "0.5"},
       "has no statistics for the Linear \"layers.0.k_proj\""},
      {"quantize",
       {model, out, "--method", "awq", "--calibration", wide, "--group-size", "16"},
       "tensor \"layers.0.o_proj.weight\": calibration file " + wide +
           ": the statistics of \"layers.0.o_proj\" have 64 features: expected the weight's input width 32"},
      {"prune",
       {model, out, "--method", "sparsegpt", "--calibration", wide, "--n", "2", "--m", "4"},
       "have 64 features: expected the weight's input width 32"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", indefinite, "--group-size", "16"},
       "tensor \"layers.0.q_proj.weight\": calibration file " + indefinite +
           ": the Hessian of \"layers.0.q_proj\" [64, 64] is not positive-definite after damping by 0.01"},
      {"prune",
       {model, out, "--method", "sparsegpt", "--calibration", indefinite, "--sparsity", "0.5"},
       "is not positive-definite after damping by 0.01 of its mean diagonal (--damp)"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", nan, "--group-size", "16"},
       "tensor \"layers.0.o_proj.weight\": " + nan + ": layers.0.o_proj.hessian[33] = nan: expected finite values"},
      {"quantize",
       {model, out, "--method", "awq", "--calibration", nan, "--group-size", "16"},
       "layers.0.o_proj.hessian[33] = nan: expected finite values"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", version, "--group-size", "16"},
       "__metadata__ \"shrink.calibration\" = \"2\": expected \"1\""},
      {"prune",
       {model, out, "--method", "sparsegpt", "--calibration", version, "--sparsity", "0.5"},
       "expected \"1\" (a file written by save_calibration_stats)"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", model, "--group-size", "16"},
       "__metadata__ \"shrink.calibration\" = (absent)"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--group-size", "16", "--min-samples", "1000"},
       "tensor \"layers.0.q_proj.weight\": calibration file " + stats +
           ": the statistics of \"layers.0.q_proj\" come from 256 calibration rows: expected at least 1000 "
           "(--min-samples)"},
      {"quantize",
       {model, out, "--method", "awq", "--calibration", stats, "--group-size", "16", "--min-samples", "257",
        "--include", "k_proj"},
       "tensor \"layers.0.k_proj.weight\": calibration file " + stats +
           ": the statistics of \"layers.0.k_proj\" (the statistics of \"layers.0.q_proj\", whose input it shares) "
           "come from 256 calibration rows"},
      {"prune",
       {model, out, "--method", "sparsegpt", "--calibration", stats, "--sparsity", "0.5", "--min-samples", "300"},
       "come from 256 calibration rows: expected at least 300 (--min-samples)"},
      {"quantize",
       {model, out, "--method", "awq", "--calibration", no_mean, "--group-size", "16"},
       "has no act_abs_mean for \"layers.0.q_proj\": expected a tensor \"layers.0.q_proj.act_abs_mean\""},
      {"prune",
       {model, out, "--method", "wanda", "--calibration", no_mean, "--sparsity", "0.5"},
       "has no act_norm for \"layers.0.q_proj\""},
  };
  require_each_fails(dir, data_errors, 1, out);

  const std::vector<FailingCase> usage_errors = {
      {"quantize", {model, out, "--method", "gptq"}, "--method gptq needs --calibration FILE"},
      {"quantize", {model, out, "--method", "awq", "--group-size", "16"}, "--method awq needs --calibration FILE"},
      {"quantize", {model, out, "--method", "opq"}, "--method = 'opq': expected one of rtn|gptq|awq|hqq"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--bits", "9"},
       "--bits = '9': expected an integer in [2, 8]"},
      {"quantize", {model, out, "--method", "hqq", "--bits", "1"}, "--bits = '1': expected an integer in [2, 8]"},
      {"quantize", {model, out, "--method", "hqq", "--group-size", "-4"}, "--group-size = '-4': expected an integer"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--group-size", "48"},
       "nothing to quantize: layers.0.k_proj.weight (skipped: --group-size 48 does not divide the input width of "
       "shape [16, 64]: expected a divisor of 64"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--damp", "-1"},
       "--damp = '-1': expected a number in [0, 100]"},
      {"quantize",
       {model, out, "--method", "hqq", "--calibration", stats},
       "--calibration does not apply to --method hqq"},
      {"quantize", {model, out, "--calibration", stats}, "--calibration does not apply to --method rtn"},
      {"quantize", {model, out, "--bits", "4"}, "--bits does not apply to --method rtn: only to gptq or awq or hqq"},
      {"quantize",
       {model, out, "--method", "awq", "--calibration", stats, "--act-order"},
       "--act-order does not apply to --method awq: only to gptq"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--no-clip"},
       "--no-clip does not apply to --method gptq: only to awq"},
      {"quantize", {model, out, "--method", "hqq", "--damp", "0.1"}, "--damp does not apply to --method hqq"},
      {"quantize",
       {model, out, "--method", "gptq", "--calibration", stats, "--dtype", "int8"},
       "--dtype does not apply to --method gptq: its storage follows --bits, --scheme and --group-size"},
      {"quantize", {model, out, "--method", "hqq", "--granularity", "group"}, "--granularity does not apply"},
      {"quantize",
       {model, out, "--method", "hqq", "--scheme", "symmetric"},
       "--scheme symmetric does not apply to --method hqq"},
      {"quantize",
       {model, out, "--method", "hqq", "--format", "compressed-tensors"},
       "--format compressed-tensors takes --method rtn only"},
      {"quantize", {model, out, "--method", "hqq", "--format", "onnx"}, "--format = 'onnx': expected one of"},
      {"prune",
       {model, out, "--method", "sparsegpt", "--sparsity", "0.5"},
       "--method sparsegpt needs --calibration FILE"},
      {"prune", {model, out, "--method", "sparsegpt", "--calibration", stats}, "--sparsity S is required"},
      {"prune",
       {model, out, "--method", "magnitude", "--sparsity", "0.5", "--calibration", stats},
       "--calibration does not apply to --method magnitude: only to wanda or sparsegpt"},
      {"prune",
       {model, out, "--method", "wanda", "--sparsity", "0.5", "--calibration", stats, "--activations", stats},
       "give one"},
      {"prune",
       {model, out, "--method", "wanda", "--sparsity", "0.5", "--activations", stats, "--min-samples", "4"},
       "--min-samples applies to the statistics of --calibration"},
      {"prune",
       {model, out, "--method", "wanda", "--sparsity", "0.5", "--calibration", stats, "--damp", "0.1"},
       "--damp does not apply to --method wanda: only to sparsegpt"},
  };
  require_each_fails(dir, usage_errors, 2, out);

  // Nothing but the inputs is left in the directory: no outputs, no scratch files.
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.file(""))) (void)entry, ++files;
  REQUIRE(files == inputs);
}

TEST_CASE("statistics for Linears the model lacks: one warning line, the run goes on", "[cli][methods]") {
  shrink::test::TempDir dir;
  const std::string model = write_linear_model(dir);
  const std::string extra = dir.file("extra.safetensors");
  auto linears = model_stats();
  linears["layers.9.q_proj"] = linears.at("layers.0.q_proj");
  shrink::io::save_calibration_stats(extra, linears, kAliases);
  const std::string out = dir.file("out.safetensors");
  const Result r =
      run(dir, {"quantize", model, out, "--method", "gptq", "--calibration", extra, "--group-size", "16", "--json"});
  REQUIRE(r.code == 0);
  REQUIRE(r.error_lines() == 1);
  REQUIRE(r.err.rfind("shrink quantize: warning: calibration file " + extra +
                          " has statistics for 1 Linear the input lacks (\"layers.9.q_proj\")",
                      0) == 0);
  REQUIRE(r.parsed()["calibration"]["unused_statistics"] == json::array({"layers.9.q_proj"}));
  const Result p =
      run(dir, {"prune", model, out, "--method", "sparsegpt", "--calibration", extra, "--sparsity", "0.5"});
  REQUIRE(p.code == 0);
  REQUIRE(p.err.rfind("shrink prune: warning: ", 0) == 0);
}
