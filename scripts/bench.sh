#!/usr/bin/env bash
# The main job: builds the release preset and runs the precision-comparison benchmarks, every executable built
# from benchmarks/bench_quant*.cpp. Extra arguments go to each benchmark (e.g. --benchmark_filter=per_tensor).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-2}

"$root/scripts/setup-debian.sh"

shopt -s nullglob
sources=(benchmarks/bench_quant*.cpp)
if ((${#sources[@]} == 0)); then
  echo "bench.sh: there is no benchmarks/bench_quant*.cpp yet: no precision-comparison benchmark to run" >&2
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
