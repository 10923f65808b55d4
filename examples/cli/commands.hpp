// The `shrink` subcommands: each takes the arguments after its name and returns the process exit code.
#pragma once

namespace shrink::cli {

int run_inspect_command(int argc, char** argv);
int run_quantize_command(int argc, char** argv);
int run_dequantize_command(int argc, char** argv);
int run_prune_command(int argc, char** argv);
int run_compare_command(int argc, char** argv);

}  // namespace shrink::cli
