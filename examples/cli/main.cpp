// `shrink`: compress safetensors model files from the command line; dispatches to one subcommand.
#include <cstdio>
#include <cstring>

#include "args.hpp"
#include "bench_command.hpp"
#include "commands.hpp"
#include "interrupt.hpp"
#include "shrink/core/config.hpp"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"inspect", shrink::cli::run_inspect_command, "list tensors: dtype, shape, bytes, sparsity, quantization"},
    {"quantize", shrink::cli::run_quantize_command,
     "quantize (int8/uint8/int4/uint4; rtn, GPTQ, AWQ, HQQ) or cast (fp16/bf16/fp8) weights"},
    {"dequantize", shrink::cli::run_dequantize_command, "turn quantized tensors back into float32"},
    {"prune", shrink::cli::run_prune_command,
     "zero weights: magnitude, global, random, structured, N:M, Wanda, SparseGPT"},
    {"compare", shrink::cli::run_compare_command, "error between two files' tensors: MSE, max-abs, SQNR, cosine"},
    {"bench", shrink::cli::run_bench_command, "time matrix products at each precision on this machine"},
};

void print_usage(std::FILE* out) {
  std::fputs("usage: shrink COMMAND [arguments] [options]\n\nCompress safetensors model files.\n\ncommands:\n", out);
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-12s%s\n", s.name, s.summary);
  std::fputs(
      "\n`shrink COMMAND --help` describes each command; `shrink --version` prints the version. Exit codes:\n"
      "0 success, 1 bad or unreadable file, 2 bad command line.\n",
      out);
}

// `shrink --version`: the version on the first line, then what this build and machine run.
void print_version() {
  std::printf("shrink %s\n", SHRINK_VERSION_STRING);
  std::printf("CPU kernels: %s\n", shrink::cli::simd_text().c_str());
#if defined(SHRINK_CLI_HAS_CUDA)
  std::printf("CUDA layer: built\n");
#else
  std::printf("CUDA layer: not built\n");
#endif
}

}  // namespace

int main(int argc, char** argv) {
  shrink::cli::install_interrupt_handlers();  // Ctrl-C stops a command cleanly at its next tensor
  if (argc < 2) {
    print_usage(stderr);
    return shrink::cli::kExitUsageError;
  }
  const char* name = argv[1];
  if (std::strcmp(name, "--help") == 0 || std::strcmp(name, "-h") == 0 || std::strcmp(name, "help") == 0) {
    print_usage(stdout);
    return shrink::cli::kExitOk;
  }
  if (std::strcmp(name, "--version") == 0 || std::strcmp(name, "version") == 0) {
    print_version();
    return shrink::cli::kExitOk;
  }
  for (const Subcommand& s : kSubcommands)
    if (std::strcmp(name, s.name) == 0) return s.run(argc - 2, argv + 2);
  shrink::cli::print_error("shrink", std::string("unknown command '") + name + "' (see shrink --help)");
  return shrink::cli::kExitUsageError;
}
