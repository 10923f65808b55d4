// `shrink dequantize IN OUT`: every tensor stored under shrink's convention back to float32 with its stored
// parameters; the `_scale` / `_zero_point` tensors and the convention's metadata entries dropped, the rest copied.
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
    ArgParser args(command,
                   "Turn the quantized and cast tensors of a file back into float32, using the scales and zero points\n"
                   "stored with them (shrink's convention, see `shrink quantize --help`). Their NAME_scale and\n"
                   "NAME_zero_point tensors and \"shrink.quant.*\" metadata entries are dropped; every other tensor\n"
                   "and metadata entry is copied unchanged.");
    args.positional("IN", "input .safetensors file, checkpoint directory or sharded index .json")
        .positional("OUT",
                    "output file; a new or empty directory when IN is a directory or an index (never the input)");
    args.flag("json", "print a JSON summary on stdout");
    if (!args.parse(argc, argv)) return kExitOk;
    const std::string in = args.arg("IN");
    const std::string out = args.arg("OUT");
    const io::Checkpoint input = io::open_checkpoint(in);
    CheckpointOutput output(input, in, out);

    const Progress progress(command);
    io::DequantizeFileSummary summary;  // over every shard, one at a time
    for (std::size_t k = 0; k < input.shards.size(); ++k) {
      const io::DequantizeFileSummary shard = io::dequantize_file(
          input.shards[k].path, output.shard_path(k),
          [&](const std::string& name, std::size_t i, std::size_t n) { progress.step(name, i, n); });
      summary.dequantized.insert(summary.dequantized.end(), shard.dequantized.begin(), shard.dequantized.end());
      summary.copied.insert(summary.copied.end(), shard.copied.begin(), shard.copied.end());
    }
    output.commit();
    if (args.flag_set("json")) {
      Json report;
      report["input"] = in;
      report["output"] = out;
      report["dequantized"] = summary.dequantized;
      report["copied"] = summary.copied;
      print_json(report);
    } else {
      for (const auto& name : summary.dequantized) std::printf("dequantized  %s\n", name.c_str());
      std::printf("%s: %zu tensors dequantized to F32, %zu copied\n", out.c_str(), summary.dequantized.size(),
                  summary.copied.size());
    }
    return kExitOk;
  });
}

}  // namespace shrink::cli
