// `shrink dequantize IN OUT`: every tensor stored under shrink's convention back to floats with its stored
// parameters (and divided by its input scale: AWQ's weights come back as W), in the dtype it had before quantization
// (or the one --dtype names); the `_scale` / `_zero_point` / input-scale tensors and the convention's metadata entries
// dropped, the rest copied.
#include <cstdio>
#include <string>

#include "args.hpp"
#include "checkpoint_output.hpp"
#include "commands.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "shrink/io/quantized_safetensors.hpp"

namespace shrink::cli {

int run_dequantize_command(int argc, char** argv) {
  const std::string command = "shrink dequantize";
  return run_command(command, [&] {
    ArgParser args(
        command,
        "Turn the quantized and cast tensors of a file back into floats, using the scales and zero points\n"
        "stored with them (shrink's convention, see `shrink quantize --help`), in the dtype each tensor had\n"
        "before quantization (F32 for files that do not record it, with a note). A tensor with an input\n"
        "scale (--method awq's LINEAR.input_scale) is divided by it column by column: the weight itself.\n"
        "Their NAME_scale, NAME_zero_point and input-scale tensors and \"shrink.quant.*\" metadata entries\n"
        "are dropped; every other tensor and metadata entry is copied unchanged.");
    args.positional("IN", "input .safetensors file, checkpoint directory or sharded index .json")
        .positional("OUT",
                    "output file; a new or empty directory when IN is a directory or an index (never the input)");
    args.option("dtype", "TYPE", "source|f32|f16|bf16: the dtype dequantized tensors are written in", "source");
    args.flag("json", "print a JSON summary on stdout");
    if (!args.parse(argc, argv)) return kExitOk;
    const std::string dtype = args.choice("dtype", {"source", "f32", "f16", "bf16"}, "source");
    const io::DequantizeTo to = dtype == "f32"    ? io::DequantizeTo::f32
                                : dtype == "f16"  ? io::DequantizeTo::f16
                                : dtype == "bf16" ? io::DequantizeTo::bf16
                                                  : io::DequantizeTo::source;
    const std::string in = args.arg("IN");
    const std::string out = args.arg("OUT");
    const io::Checkpoint input = io::open_checkpoint(in);
    CheckpointOutput output(input, in, out);

    const Progress progress(command);
    io::DequantizeFileSummary summary;  // over every shard, one at a time
    for (std::size_t k = 0; k < input.shards.size(); ++k) {
      const io::DequantizeFileSummary shard = io::dequantize_file(
          input.shards[k].path, output.shard_path(k),
          [&](const std::string& name, std::size_t i, std::size_t n) { progress.step(name, i, n); }, to);
      summary.dequantized.insert(summary.dequantized.end(), shard.dequantized.begin(), shard.dequantized.end());
      summary.dequantized_dtypes.insert(summary.dequantized_dtypes.end(), shard.dequantized_dtypes.begin(),
                                        shard.dequantized_dtypes.end());
      summary.notes.insert(shard.notes.begin(), shard.notes.end());
      summary.copied.insert(summary.copied.end(), shard.copied.begin(), shard.copied.end());
    }
    output.commit();
    if (args.flag_set("json")) {
      Json report;
      report["input"] = in;
      report["output"] = out;
      report["dequantized"] = summary.dequantized;
      Json dtypes = Json::object();
      for (std::size_t i = 0; i < summary.dequantized.size(); ++i)
        dtypes[summary.dequantized[i]] = dtype_text(summary.dequantized_dtypes[i]);
      report["dtypes"] = dtypes;
      report["notes"] = summary.notes;
      report["copied"] = summary.copied;
      print_json(report);
    } else {
      for (std::size_t i = 0; i < summary.dequantized.size(); ++i) {
        const std::string& name = summary.dequantized[i];
        const auto note = summary.notes.find(name);
        std::printf("dequantized  %-5s %s%s\n", dtype_text(summary.dequantized_dtypes[i]).c_str(), name.c_str(),
                    note == summary.notes.end() ? "" : (" (" + note->second + ")").c_str());
      }
      std::printf("%s: %zu tensors dequantized (%s), %zu copied\n", out.c_str(), summary.dequantized.size(),
                  dtype == "source" ? "each in its source dtype" : dtype.c_str(), summary.copied.size());
    }
    return kExitOk;
  });
}

}  // namespace shrink::cli
