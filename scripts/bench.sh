#!/usr/bin/env bash
# The main job: builds the release preset and runs the precision-comparison benchmarks, every executable built
# from benchmarks/bench_quant*.cpp. A first argument naming a suite runs benchmarks/bench_<suite>*.cpp instead
# (quant, prune, sparse, distill; `all` runs every one). Other arguments go to each benchmark (e.g.
# --benchmark_filter=per_tensor).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-2}

"$root/scripts/setup-debian.sh"

suite=quant
if (($# > 0)) && [[ $1 != -* ]]; then
  suite=$1
  shift
fi
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

cmake --preset release -DSHRINK_BUILD_BENCHMARKS=ON
cmake --build --preset release -j "$jobs" --target "${names[@]}"

for name in "${names[@]}"; do
  echo "=== bench.sh: $name"
  "build/release/benchmarks/$name" "$@"
done
