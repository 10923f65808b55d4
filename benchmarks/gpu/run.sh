#!/usr/bin/env bash
# The GPU run, in one call on a machine with a device: builds the release preset with CUDA, runs the [gpu] tests
# (against the CPU path), then once under compute-sanitizer memcheck and racecheck, then `shrink bench --gpu on
# --quick` (the GPU rows of the precision comparison, after their test), then every GPU benchmark, and prints the
# ratio tables last. Arguments go to each benchmark (e.g. --benchmark_filter=quantize). On a machine
# without Eigen, Catch2, nlohmann-json or Google Benchmark, run benchmarks/gpu/pack-deps.sh first where apt works and
# bring .gpu-deps along (the device tool: carry [".gpu-deps"]).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-$(nproc)}
build=build/gpu

nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader || true

# A GPU machine that cannot install packages gets them from .gpu-deps (benchmarks/gpu/pack-deps.sh, run where apt
# works, then carried along): unpacked under /tmp, found through CMAKE_PREFIX_PATH.
prefix_path=()
if compgen -G ".gpu-deps/*.deb" >/dev/null; then
  deps=/tmp/shrink-gpu-deps
  for deb in .gpu-deps/*.deb; do dpkg-deb -x "$deb" "$deps"; done
  prefix_path=(-DCMAKE_PREFIX_PATH="$deps/usr")
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "run.sh: using the packages unpacked from .gpu-deps under $deps"
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHRINK_ENABLE_CUDA=ON -DSHRINK_BUILD_TESTS=ON \
  -DSHRINK_BUILD_BENCHMARKS=ON -DSHRINK_BUILD_EXAMPLES=ON "${prefix_path[@]}" >/dev/null
# The `shrink` command and its test exist only where nlohmann-json was found.
cli_targets=()
if cmake --build "$build" --target help | grep '^shrink_cli:' >/dev/null; then cli_targets=(shrink_cli test_cli); fi
cmake --build "$build" -j "$jobs" --target test_cuda_device "${cli_targets[@]}" \
  $(cd benchmarks/gpu && ls bench_gpu_*.cpp | sed 's/\.cpp$//')

echo "=== run.sh: [gpu] tests"
"$build/tests/cuda/test_cuda_device" --gpu "[gpu]"

sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  echo "=== run.sh: [gpu] tests under compute-sanitizer --tool $tool"
  "$sanitizer" --tool "$tool" --error-exitcode 1 "$build/tests/cuda/test_cuda_device" --gpu "[gpu]" >/dev/null
  echo "compute-sanitizer $tool: clean"
done

# A failure here is reported without stopping the kernel benchmarks below.
if ((${#cli_targets[@]} > 0)); then
  echo "=== run.sh: shrink bench --gpu on --quick"
  "$build/tests/cli/test_cli" "bench --gpu on*" || echo "run.sh: FAILED: the test of shrink bench's GPU rows"
  "$build/examples/cli/shrink" bench --gpu on --quick --out "$build/shrink-bench" || echo "run.sh: FAILED: shrink bench"
fi

# PyTorch's KL + backward on bench_gpu_kl's logits, for its speed and memory ratios (skipped without PyTorch).
export SHRINK_TORCH_KL_JSON="$root/$build/torch_kl.json"
rm -f "$SHRINK_TORCH_KL_JSON"
if python3 -c "import torch" 2>/dev/null; then
  echo "=== run.sh: torch_kl.py (PyTorch baseline for bench_gpu_kl)"
  python3 benchmarks/gpu/torch_kl.py --out "$SHRINK_TORCH_KL_JSON" || echo "torch_kl.py failed: no PyTorch ratios"
else
  echo "=== run.sh: no PyTorch here (python3 -c 'import torch' failed): bench_gpu_kl prints no PyTorch ratios"
fi

tables=()
for bench in "$build"/benchmarks/bench_gpu_*; do
  echo "=== run.sh: $(basename "$bench")"
  out=$("$bench" --benchmark_repetitions=3 "$@" | tee /dev/stderr)
  tables+=("$(sed -n '/^Ratios/,$p' <<<"$out")")
done
echo
echo "=== run.sh: summary"
printf '%s\n' "${tables[@]}"
