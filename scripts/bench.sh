#!/usr/bin/env bash
# The main job: builds the `shrink` command and runs `shrink bench`, the precision comparison of
# matrix products on this machine (FP32, FP16, BF16, INT8 W8A8, INT8 weight-only, 2:4, CSR at 90%; GPU rows too when
# nvidia-smi lists a GPU: the command is then built with the CUDA layer, else host-only): it prints one table and
# writes shrink-bench/bench.json and shrink-bench/bench.svg. Arguments go to `shrink bench` (e.g. --quick,
# --price-per-hour 2.5, --shapes 4096x4096 --batches 1,32, --gpu off; see --help).
#
# A first argument naming a suite runs the Google Benchmark programs benchmarks/bench_<suite>*.cpp instead (quant,
# prune, sparse, distill, matmul, threads, llm; `all` runs every one), the remaining arguments going to each (e.g.
# --benchmark_filter=per_tensor). `llm` (bench_llm: the LLM example's forward against PyTorch's; bench_llm_generate:
# its generation, prefill and decode, against llama.cpp's) also needs the data of scripts/fetch-llm-data.sh, the torch
# environment of `scripts/python-env.sh torch` and the llama.cpp one of `scripts/python-env.sh llama`, all reused
# from the cache folder (made there when missing).
#
# The main job installs and configures only what the `shrink` command needs (`setup-debian.sh bench`; no tests, no
# Google Benchmark suites); a suite installs the suites' packages (`setup-debian.sh suites`).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-2}

if (($# == 0)) || [[ $1 == -* ]]; then
  "$root/scripts/setup-debian.sh" bench
  # The CUDA layer takes minutes to compile and adds rows only where a GPU is present: without one (nvidia-smi
  # lists none), the host-only preset builds the command.
  preset=no-cuda
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    preset=release
  fi
  # Neither the tests nor the Google Benchmark suites are configured here: their packages (Catch2, Google
  # Benchmark, oneDNN, ...) are the test command's and the suites' to install.
  cmake --preset "$preset" -DSHRINK_BUILD_TESTS=OFF -DSHRINK_BUILD_BENCHMARKS=OFF
  cmake --build --preset "$preset" -j "$jobs" --target shrink_cli
  exec "build/$preset/examples/cli/shrink" bench "$@"
fi

suite=$1
shift
"$root/scripts/setup-debian.sh" suites
[[ $suite == all ]] && suite=""

shopt -s nullglob
sources=(benchmarks/bench_"$suite"*.cpp)
if ((${#sources[@]} == 0)); then
  echo "bench.sh: no benchmarks/bench_${suite}*.cpp: suites are $(ls benchmarks/bench_*.cpp | sed 's|.*/bench_||; s|[._].*||' | sort -u | tr '\n' ' ')" >&2
  exit 1
fi
names=()
for source in "${sources[@]}"; do
  names+=("$(basename "$source" .cpp)")
done

llm_options=()
if [[ " ${names[*]} " == *" bench_llm "* ]]; then
  llm_options=(-DSHRINK_LLM_DATA_DIR="$("$root/scripts/fetch-llm-data.sh")"
    -DSHRINK_TORCH_PYTHON3="$("$root/scripts/python-env.sh" torch)")
fi
if [[ " ${names[*]} " == *" bench_llm_generate "* ]]; then
  llm_options+=(-DSHRINK_LLM_DATA_DIR="$("$root/scripts/fetch-llm-data.sh")"
    -DSHRINK_LLAMA_CPP_PYTHON3="$("$root/scripts/python-env.sh" llama)")
fi

cmake --preset release -DSHRINK_BUILD_BENCHMARKS=ON -DSHRINK_BUILD_TESTS=OFF "${llm_options[@]}"
cmake --build --preset release -j "$jobs" --target "${names[@]}"

for name in "${names[@]}"; do
  echo "=== bench.sh: $name"
  "build/release/benchmarks/$name" "$@"
done
