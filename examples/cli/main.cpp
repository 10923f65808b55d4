// `shrink`: compress safetensors model files from the command line; dispatches to one subcommand.
#include <cstdio>
#include <cstring>

#include "args.hpp"
#include "bench_command.hpp"
#include "commands.hpp"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", shrink::cli::run_inspect_command, "list tensors: dtype, shape, bytes, sparsity, quantization"},
    {"quantize", shrink::cli::run_quantize_command, "quantize (int8/uint8/int4) or cast (fp16/bf16/fp8) weights"},
    {"dequantize", shrink::cli::run_dequantize_command, "turn quantized tensors back into float32"},
    {"prune", shrink::cli::run_prune_command, "zero weights: magnitude, global, random, structured, N:M, Wanda"},
    {"compare", shrink::cli::run_compare_command, "error between two files' tensors: MSE, max-abs, SQNR, cosine"},
    {"bench", shrink::cli::run_bench_command, "time matrix products at each precision on this machine"},
};

void print_usage(std::FILE* out) {
  std::fputs("usage: shrink COMMAND [arguments] [options]\n\nCompress safetensors model files.\n\ncommands:\n", out);
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-12s%s\n", s.name, s.summary);
  std::fputs("\n`shrink COMMAND --help` describes each command. Exit codes: 0 success, 1 bad or unreadable file,\n"
             "2 bad command line.\n",
             out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return shrink::cli::kExitUsageError;
  }
  const char* name = argv[1];
  if (std::strcmp(name, "--help") == 0 || std::strcmp(name, "-h") == 0 || std::strcmp(name, "help") == 0) {
    print_usage(stdout);
    return shrink::cli::kExitOk;
  }
  for (const Subcommand& s : kSubcommands)
    if (std::strcmp(name, s.name) == 0) return s.run(argc - 2, argv + 2);
  shrink::cli::print_error("shrink", std::string("unknown command '") + name + "' (see shrink --help)");
  return shrink::cli::kExitUsageError;
}
