// `shrink bench`: the precision comparison of matrix products on this machine (table, JSON, SVG chart).
#pragma once

namespace shrink::cli {

// Runs `shrink bench` with the arguments after the subcommand name; returns the process exit code.
int run_bench_command(int argc, char** argv);

}  // namespace shrink::cli
