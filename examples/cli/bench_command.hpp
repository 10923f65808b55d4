// `shrink bench`: the precision comparison of matrix products on this machine (table, JSON, SVG chart).
#pragma once

#include <string>

namespace shrink::cli {

// Runs `shrink bench` with the arguments after the subcommand name; returns the process exit code.
int run_bench_command(int argc, char** argv);

// The CPU kernels this machine runs: "AVX-512 + VNNI", "AVX-512", "AVX2", "SSE2" or "scalar".
std::string simd_text();

}  // namespace shrink::cli
