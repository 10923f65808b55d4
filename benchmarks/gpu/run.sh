#!/usr/bin/env bash
# The GPU run on a machine with a device, in stages so that each fits one call of a time-limited lease (the build
# directory build/gpu is reused by later calls on the same machine):
#   build     configure and build the release preset with CUDA for this GPU's architecture (SHRINK_CUDA_ARCHS, 90
#             by default: sm_90 plus the sm_90a wgmma objects), the tests, the `shrink` command and the benchmarks
#   test      the [gpu] tests (every operation against the CPU path, outputs poisoned)
#   sanitize  the [gpu] tests once under compute-sanitizer memcheck and once under racecheck
#   cli       the test of `shrink bench`'s GPU rows, then `shrink bench --gpu on --quick`
#   bench     PyTorch's KL baseline (torch_kl.py, where PyTorch is installed), then every GPU benchmark (or those
#             named in SHRINK_GPU_BENCHES, e.g. "kl gemm_int8"), and the ratio tables last
# `run.sh` alone runs every stage in that order; `run.sh build test` runs those; arguments after `--` go to each
# benchmark (e.g. -- --benchmark_filter=quantize). Logs and tables are also written under $OUT when it is set.
# On a machine without Eigen, Catch2, nlohmann-json or Google Benchmark, run benchmarks/gpu/pack-deps.sh first where
# apt works and bring .gpu-deps along (the device tool: carry [".gpu-deps"]).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-$(nproc)}
build=build/gpu

stages=()
while (($# > 0)) && [[ $1 != -- ]]; do stages+=("$1"); shift; done
(($# > 0)) && shift  # the "--"
bench_args=("$@")
((${#stages[@]} > 0)) || stages=(build test sanitize cli bench)
for stage in "${stages[@]}"; do
  [[ $stage =~ ^(build|test|sanitize|cli|bench)$ ]] || { echo "run.sh: unknown stage '$stage'" >&2; exit 2; }
done
log_dir=${OUT:-$build}
mkdir -p "$build" "$log_dir"

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

run_build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHRINK_ENABLE_CUDA=ON -DSHRINK_BUILD_TESTS=ON \
    -DSHRINK_BUILD_BENCHMARKS=ON -DSHRINK_BUILD_EXAMPLES=ON -DCMAKE_CUDA_ARCHITECTURES="${SHRINK_CUDA_ARCHS:-90}" \
    "${prefix_path[@]}" >/dev/null
  # The `shrink` command and its test exist only where nlohmann-json was found.
  local cli_targets=()
  if cmake --build "$build" --target help | grep '^shrink_cli:' >/dev/null; then cli_targets=(shrink_cli test_cli); fi
  cmake --build "$build" -j "$jobs" --target test_cuda_device "${cli_targets[@]}" \
    $(cd benchmarks/gpu && ls bench_gpu_*.cpp | sed 's/\.cpp$//') 2>&1 | tail -n 20
  echo "run.sh: built"
}

run_test() {
  echo "=== run.sh: [gpu] tests"
  "$build/tests/cuda/test_cuda_device" --gpu "[gpu]" 2>&1 | tee "$log_dir/gpu-tests.log" | tail -n 40
}

run_sanitize() {
  local sanitizer tool
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in memcheck racecheck; do
    echo "=== run.sh: [gpu] tests under compute-sanitizer --tool $tool"
    if "$sanitizer" --tool "$tool" --error-exitcode 1 "$build/tests/cuda/test_cuda_device" --gpu "[gpu]" \
        >"$log_dir/sanitizer-$tool.log" 2>&1; then
      echo "compute-sanitizer $tool: clean"
    else
      echo "compute-sanitizer $tool: FAILED (log: $log_dir/sanitizer-$tool.log)"; tail -n 30 "$log_dir/sanitizer-$tool.log"
      return 1
    fi
  done
}

# A failure here is reported without stopping the stages after it.
run_cli() {
  if [[ ! -x "$build/examples/cli/shrink" ]]; then echo "run.sh: no shrink command in this build"; return 0; fi
  echo "=== run.sh: shrink bench --gpu on --quick"
  "$build/tests/cli/test_cli" "bench --gpu on*" || echo "run.sh: FAILED: the test of shrink bench's GPU rows"
  "$build/examples/cli/shrink" bench --gpu on --quick --out "$log_dir/shrink-bench" || echo "run.sh: FAILED: shrink bench"
}

run_bench() {
  # PyTorch's KL + backward on bench_gpu_kl's logits, for its speed and memory ratios (skipped without PyTorch).
  export SHRINK_TORCH_KL_JSON="$root/$build/torch_kl.json"
  local names=() bench out tables=()
  if [[ -n ${SHRINK_GPU_BENCHES:-} ]]; then
    for name in $SHRINK_GPU_BENCHES; do names+=("$build/benchmarks/bench_gpu_$name"); done
  else
    names=("$build"/benchmarks/bench_gpu_*)
  fi
  if [[ " ${names[*]} " == *bench_gpu_kl\ * ]]; then
    rm -f "$SHRINK_TORCH_KL_JSON"
    if python3 -c "import torch" 2>/dev/null; then
      echo "=== run.sh: torch_kl.py (PyTorch baseline for bench_gpu_kl)"
      python3 benchmarks/gpu/torch_kl.py --out "$SHRINK_TORCH_KL_JSON" || echo "torch_kl.py failed: no PyTorch ratios"
    else
      echo "=== run.sh: no PyTorch here (python3 -c 'import torch' failed): bench_gpu_kl prints no PyTorch ratios"
    fi
  fi
  for bench in "${names[@]}"; do
    echo "=== run.sh: $(basename "$bench")"
    out=$("$bench" --benchmark_repetitions=3 "${bench_args[@]}" 2>&1 | tee "$log_dir/$(basename "$bench").log")
    tables+=("$(sed -n '/^Ratios/,$p' <<<"$out")")
  done
  echo
  echo "=== run.sh: summary"
  printf '%s\n' "${tables[@]}" | tee "$log_dir/summary.txt"
}

for stage in "${stages[@]}"; do
  start=$SECONDS
  "run_$stage"
  echo "run.sh: stage $stage took $((SECONDS - start)) s"
done
