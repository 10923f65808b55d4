#!/usr/bin/env bash
# The GPU check. It runs from the archive benchmarks/gpu/pack.sh makes (programs built elsewhere for sm_90a, with the
# shared libraries a GPU machine lacks), never builds, and never stops at a failure. Steps, in the default order (call
# 1 of docs/gpu-check.md):
#   info       GPU, driver, CUDA version, clocks, `nvidia-smi -q`, compute-sanitizer's version, whether ncu is there,
#              which library each program loads
#   probe      the layout probe: what mma.sp, wgmma and mma.sync do on this GPU next to what the kernels assume
#   tests      the [gpu] tests, one process per test file (Catch2's file tags), each under its own timeout, with
#              CUDA_LAUNCH_BLOCKING=1 so that a fault names its kernel; the GEMM files first
#   memcheck   compute-sanitizer memcheck on the "[sanitize]" cases (at least one per kernel file)
#   bench      the benchmarks of the targets, the GEMMs first, each program under its own cap, one repetition
#   synccheck, racecheck   the other sanitizers on the same cases
#   cli        the test of `shrink bench --gpu on`, then `shrink bench --gpu on --quick`
# and, by name only: initcheck; tests:SPEC (one process, a Catch2 test spec: 'tests:[#test_nm_cuda]',
# 'tests:cuda linear_nm*'); bench:NAME (one benchmark program); run -- COMMAND... (the rest of the line, with the
# archive's programs on PATH and its libraries found, e.g. `run -- test_cuda_device --gpu "[gpu]" -c "..."`).
#
# Output is line-buffered and each step prints as it goes: every test file's counts, every target's PASS/MISS as soon
# as its benchmark and baseline have run. Each step runs under its own `timeout`, within a budget for the whole check
# (SHRINK_CHECK_BUDGET seconds, 360 by default: with the unpacking, the first call ends inside about 6.5 minutes); a
# step the budget leaves out is reported as left out. Under $OUT: summary.txt (the table, also printed last),
# logs.tar.gz (every step's full log, refreshed after each step, so a check cut short still returns what ran),
# probe.txt (the probe's table) and shrink-bench.json.
#
# A corrected copy of this script runs without repacking: copy it over the unpacked check.sh, or run it from the
# checkout with SHRINK_CHECK_ROOT naming the unpacked archive.
#
# Usage: check.sh [STEP...]   (no step: info probe tests memcheck bench synccheck racecheck cli)
# Environment: SHRINK_CHECK_BUDGET (360), SHRINK_CHECK_TEST_CAP (seconds per test file, 60), SHRINK_CHECK_ROOT, OUT.
# Exit status: 0  every step ran in its time and passed (a MISS is a figure, not a failure)
#              1  a test, sanitizer, probe or program failed, a step ran out of time, or the budget left one out
#              2  bad usage
#              77 no GPU: every program was started in its no-device mode and behaved as documented (the probe and
#                 the [gpu] tests exit 77, each benchmark reports "no CUDA device", `shrink bench --gpu on` exits 1
#                 saying why)
set -uo pipefail

here=${SHRINK_CHECK_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
bin=$here/bin
out=${OUT:-$here/out}
budget=${SHRINK_CHECK_BUDGET:-360}
test_cap=${SHRINK_CHECK_TEST_CAP:-60}
work=$(mktemp -d "${TMPDIR:-/tmp}/shrink-check.XXXXXX")
mkdir -p "$out"
started=$SECONDS
[[ -x $bin/test_cuda_device ]] || { echo "check.sh: no $bin/test_cuda_device: is SHRINK_CHECK_ROOT the unpacked archive?" >&2; exit 2; }

# Target programs first: the GEMMs' targets are the ones a short run must not lose.
all_benches=(linear_int8 linear_weight_only linear_nm linear_csr kl threshold quantize calibration prune losses)
steps=()
benches=()
run_command=()
while (($# > 0)); do
  arg=$1
  shift
  case $arg in
    info | probe | tests | memcheck | synccheck | racecheck | initcheck | cli) steps+=("$arg") ;;
    tests:*) steps+=("$arg") ;;
    bench) steps+=(bench); benches+=("${all_benches[@]}") ;;
    bench:*)
      name=${arg#bench:}
      [[ " ${all_benches[*]} " == *" $name "* ]] || { echo "check.sh: unknown benchmark '$name' (${all_benches[*]})" >&2; exit 2; }
      [[ " ${steps[*]} " == *" bench "* ]] || steps+=(bench)
      benches+=("$name") ;;
    run)
      [[ ${1:-} == -- ]] && shift
      (($# > 0)) || { echo "check.sh: run -- COMMAND...: no command" >&2; exit 2; }
      run_command=("$@")
      steps+=(run)
      set -- ;;
    *) echo "check.sh: unknown step '$arg' (info probe tests tests:SPEC memcheck bench bench:NAME synccheck racecheck initcheck cli run -- CMD)" >&2; exit 2 ;;
  esac
done
((${#steps[@]} > 0)) || { steps=(info probe tests memcheck bench synccheck racecheck cli); benches=("${all_benches[@]}"); }

rows=()     # the summary's rows: step, status, seconds, detail
failures=() # the steps that failed, ran out of time or were left out

# ---- Libraries: this archive's lib/, then the CUDA libraries wherever this machine keeps them --------------------
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$bin:$PATH"
missing_libraries() { ldd "$bin"/* 2>/dev/null | awk '/=> not found/ {print $1}' | sort -u; }
library_search_dirs() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64; do
    [[ -d $d ]] && echo "$d"
  done
  python3 - 2>/dev/null <<'EOF'
import site, sys
for p in site.getsitepackages() + [site.getusersitepackages()]:
    print(p + "/nvidia")
EOF
  echo /usr/lib/x86_64-linux-gnu
  echo /opt
}
for library in $(missing_libraries); do
  for dir in $(library_search_dirs); do
    [[ -d $dir ]] || continue
    found=$(find "$dir" -name "$library" \( -type f -o -type l \) -print -quit 2>/dev/null)
    if [[ -n $found ]]; then
      export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$found")"
      break
    fi
  done
done
# Last resort, the copies the archive carries (CUDA runtime, C++ runtime): after the machine's own when only missing,
# before them when the machine's are too old for these programs.
if [[ -n $(missing_libraries) ]]; then export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$here/lib/fallback"; fi
if ldd "$bin"/* 2>&1 | grep -q "version .* not found"; then
  export LD_LIBRARY_PATH="$here/lib/fallback:$LD_LIBRARY_PATH"
fi

# Line-buffered stdout for the programs (C stdio, and std::cout through it), where coreutils' stdbuf is there.
line_buffered=()
command -v stdbuf >/dev/null && line_buffered=(stdbuf -oL -eL)

pack_logs() { tar -czf "$out/logs.tar.gz" -C "$work" . 2>/dev/null; }

# ---- Steps --------------------------------------------------------------------------------------------------------
# run_step LOG CAP COMMAND...: COMMAND under `timeout` (CAP seconds, fewer when the budget has fewer left), its output
# in $work/LOG.log, shown as it comes with a prefix when it is short-lined (SHOW=all) or only its last lines (the
# default). Sets rc (124: out of time; -1: left out) and took (seconds).
run_step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - (SECONDS - started) - 5))
  ((cap > left)) && cap=$left
  echo "=== check.sh: $name (at most ${cap} s, $((SECONDS - started)) s into the check)"
  if ((cap < 3)); then
    echo "left out: the check's budget of $budget s is spent"
    rc=-1 took=0
    return
  fi
  local t0=$SECONDS
  if [[ ${SHOW:-tail} == all ]]; then
    timeout -k 5 "$cap" "${line_buffered[@]}" "$@" 2>&1 | tee "$work/$name.log"
    rc=${PIPESTATUS[0]}
  else
    timeout -k 5 "$cap" "${line_buffered[@]}" "$@" >"$work/$name.log" 2>&1
    rc=$?
    tail -n 12 "$work/$name.log"
  fi
  took=$((SECONDS - t0))
  ((rc == 124 || rc == 137)) && rc=124
  pack_logs
}

# row STEP STATUS DETAIL: one line of the summary, printed now too; a status other than ok (or no-gpu on a machine
# without a GPU) counts as a failure.
row() {
  local line
  line=$(printf '%-30s %-9s %5s s  %s' "$1" "$2" "$took" "$3")
  rows+=("$line")
  echo "row: $line"
  [[ $2 == ok || $2 == no-gpu ]] || failures+=("$1")
}

status_of() {  # the status word for rc: ok when rc is one of the expected codes given
  local r=$1
  shift
  ((r == -1)) && { echo "left-out"; return; }
  ((r == 124)) && { echo "TIMEOUT"; return; }
  local e
  for e in "$@"; do ((r == e)) && { echo ok; return; }; done
  echo "FAIL($r)"
}

# Catch2's closing line: "All tests passed (A assertions in N test cases)" or "test cases: N | P passed | F failed".
catch_counts() {
  grep -E "^All tests passed|^test cases:|^No tests ran" "$1" | tr -s ' ' | paste -sd ';' - || true
}

has_gpu=1
"$bin/test_cuda_device" --gpu --list-test-names-only "[no-such-tag]" >/dev/null 2>&1
(($? == 77)) && has_gpu=0
if ((!has_gpu)); then
  echo "check.sh: no CUDA device: every program runs in its no-device mode"
  if nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    took=0
    row "runtime" FAIL "nvidia-smi lists a GPU, but the CUDA runtime in these programs sees none"
  fi
fi

sanitizer() {
  local s
  for s in "$(command -v compute-sanitizer)" /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [[ -n $s && -x $s ]] && { echo "$s"; return; }
  done
  find /usr/local /opt -name compute-sanitizer -type f -perm -u+x -print -quit 2>/dev/null
}

step_info() {
  run_step info 25 bash -c '
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "host: $(uname -srm)"; echo "cpus: $(nproc)"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw,power.limit --format=csv
      nvidia-smi | grep -m1 "CUDA Version" | sed "s/^| *//; s/ *|$//"
    else
      echo "nvidia-smi: not found"
    fi
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    if [[ -n $1 ]]; then echo "compute-sanitizer: $1: $("$1" --version 2>&1 | tail -n 1)"; else echo "compute-sanitizer: not found"; fi
    if command -v ncu >/dev/null; then echo "ncu: $(ncu --version 2>/dev/null | tail -n 1)"; else echo "ncu: not found"; fi
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for p in "$0"/*; do echo "$(basename "$p"):"; ldd "$p" | grep -vE "linux-vdso|ld-linux|libc\.so|libm\.so|libgcc_s|libstdc"; done
    head -n 5 "$0/../MANIFEST" 2>/dev/null
    echo; echo "---- nvidia-smi -q"; nvidia-smi -q 2>/dev/null || echo "(no nvidia-smi)"
  ' "$bin" "$(sanitizer)"
  local gpu missing
  gpu=$(grep -m1 -E '^[^,]+, [0-9.]+, [0-9]+ MiB' "$work/info.log" 2>/dev/null | cut -d, -f1-3)
  missing=$(missing_libraries | paste -sd ' ' -)
  if [[ -n $missing ]]; then
    rc=1
    row info "$(status_of "$rc" 0)" "libraries not found: $missing"
  else
    row info "$(status_of "$rc" 0)" "${gpu:-no GPU}; $(grep -E '^(compute-sanitizer|ncu):' "$work/info.log" | paste -sd ';' -)"
  fi
}

step_probe() {
  if [[ ! -x $bin/shrink_layout_probe ]]; then
    took=0
    row probe missing "bin/shrink_layout_probe is not in this archive"
    return
  fi
  SHOW=all run_step probe 30 "$bin/shrink_layout_probe"
  cp "$work/probe.log" "$out/probe.txt" 2>/dev/null
  if ((rc == 77 && !has_gpu)); then
    row probe no-gpu "exit 77: $(grep -m1 -i "no CUDA device" "$work/probe.log")"
    return
  fi
  # The 2:4 int8 metadata mapping the hardware matched, for every later step (unless the caller chose one): the
  # kernel's default is the one the probe checks against, so a run whose hardware matches only the other one still
  # tests the 2:4 kernel with the right one, and says so.
  local matched
  matched=$(sed -n 's/^ *int8 metadata: the hardware matches \([a-z_]*\);.*/\1/p' "$work/probe.log" | head -n 1)
  local note=""
  if [[ -z ${SHRINK_NM_INT8_METADATA:-} && ( $matched == row_per_lane || $matched == word_per_lane ) ]]; then
    export SHRINK_NM_INT8_METADATA=$matched
    note="; SHRINK_NM_INT8_METADATA=$matched for the later steps"
  fi
  row probe "$(status_of "$rc" 0)" "$(grep -cE "\bDIFFER\b" "$work/probe.log") rows differ; see probe.txt$note"
}

# The [gpu] test files (Catch2's -# tags, "[#test_nm_cuda]"), the GEMMs' first.
test_files() {
  "$bin/test_cuda_device" -# --list-tags "[gpu]" 2>/dev/null | grep -oE '\[#[A-Za-z0-9_]+\]' | tr -d '[]#' |
    awk '{print (/^test_(int8|nm|weight_only|csr)_cuda$/ ? 0 : 1), $0}' | sort | cut -d' ' -f2
}

step_tests() {
  if ((!has_gpu)); then
    run_step tests 30 "$bin/test_cuda_device" --gpu "[gpu]"
    row "tests [gpu]" "$( ((rc == 77)) && echo no-gpu || status_of "$rc" 77)" "exit $rc: $(head -c 100 "$work/tests.log")"
    return
  fi
  local file files
  files=$(test_files)
  [[ -n $files ]] || { took=0; row "tests [gpu]" FAIL "no test file found by: test_cuda_device -# --list-tags [gpu]"; return; }
  for file in $files; do
    SHOW=all run_step "tests-$file" "$test_cap" env CUDA_LAUNCH_BLOCKING=1 \
      "$bin/test_cuda_device" --gpu -# "[gpu][#$file]" --durations yes
    row "tests $file" "$(status_of "$rc" 0)" "$(catch_counts "$work/tests-$file.log")"
  done
}

# tests:SPEC: one process over a Catch2 test spec, e.g. a rerun of one file or one test case.
step_tests_spec() {
  local spec=$1
  SHOW=all run_step "tests-spec" $((2 * test_cap)) env CUDA_LAUNCH_BLOCKING=1 \
    "$bin/test_cuda_device" --gpu -# "$spec" --durations yes
  if ((rc == 77 && !has_gpu)); then
    row "tests $spec" no-gpu "skipped: no CUDA device (exit 77)"
  else
    row "tests $spec" "$(status_of "$rc" 0)" "$(catch_counts "$work/tests-spec.log")"
  fi
}

step_sanitizer() {
  local tool=$1 cap=$2 tool_path detail
  tool_path=$(sanitizer)
  if ((!has_gpu)); then
    took=0 row "$tool [sanitize]" no-gpu "skipped: no CUDA device"
    return
  fi
  if [[ -z $tool_path ]]; then
    took=0 row "$tool [sanitize]" missing "compute-sanitizer not found"
    return
  fi
  run_step "$tool" "$cap" "$tool_path" --tool "$tool" --error-exitcode 99 --print-limit 20 \
    "$bin/test_cuda_device" --gpu "[sanitize]" --durations yes
  detail="$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$work/$tool.log" | tail -n 1 | sed 's/^=* *//'); $(catch_counts "$work/$tool.log")"
  row "$tool [sanitize]" "$(status_of "$rc" 0)" "$detail"
}
step_memcheck() { step_sanitizer memcheck 90; }
step_synccheck() { step_sanitizer synccheck 45; }
step_racecheck() { step_sanitizer racecheck 75; }
step_initcheck() { step_sanitizer initcheck 60; }

# A target's line as the benchmarks print it (benchmarks/support/ratio_table.hpp), as soon as its two rows exist:
# "target: BENCHMARK vs BASELINE: ratio R (>= T) PASS|MISS (what)", or "(info)" for a row without a target.
target_lines() { grep -hE "^target: " "$@" 2>/dev/null; }

# bench_program NAME CAP PROGRAM ARGS...: one benchmark program, one repetition, its targets shown as they come.
bench_program() {
  local name=$1 cap=$2 program=$3
  shift 3
  SHOW=all run_step "bench-$name" "$cap" "$bin/$program" --benchmark_repetitions=1 --benchmark_min_time=0.05 "$@"
  local targets passes threw status
  targets=$(target_lines "$work/bench-$name.log" | grep -cE " (PASS|MISS) ")
  passes=$(target_lines "$work/bench-$name.log" | grep -c " PASS ")
  # A benchmark that throws reports "threw: ..." as its row (benchmarks/support/guarded.hpp) and the program goes on.
  threw=$(grep -c "threw: " "$work/bench-$name.log")
  if ((has_gpu)); then
    status=$(status_of "$rc" 0)
    [[ $status == ok && $threw -gt 0 ]] && status=FAIL
    row "bench $name" "$status" "$targets targets: $passes PASS, $((targets - passes)) MISS; $threw rows threw"
  elif ((rc == 0)) && grep -q "no CUDA device" "$work/bench-$name.log"; then
    row "bench $name" no-gpu "every row: no CUDA device (exit 0)"
  else
    row "bench $name" "$(status_of "$rc" 0)" "expected every row to say no CUDA device"
  fi
}

bench_one() {
  case $1 in
    linear_int8)
      bench_program linear_int8 60 bench_gpu_linear_int8 \
        '--benchmark_filter=^(cublas_f16|cublaslt_s8_epilogue|cublaslt_s8_alone|w8a8_[a-z_]+_f16)/M:(1024|4096|8192)/N:(4096|8192)/K:(4096|8192)/' ;;
    linear_weight_only)
      bench_program linear_weight_only 30 bench_gpu_linear_weight_only \
        '--benchmark_filter=^BM_gpu_copy|^BM_(cublas_f16|w8a16|w4a16_g128|w4a16_g64)/(path:0/)?m:(1|16)/n:(4096|8192)/k:(4096|8192|14336)/' ;;
    linear_nm)
      bench_program linear_nm 40 bench_gpu_linear_nm \
        '--benchmark_filter=^gpu_(dense_cublas|sparse24_shrink)_(f16|bf16|s8)/M:(1024|4096)/N:(4096|8192)/K:(4096|8192)/' ;;
    linear_csr)
      bench_program linear_csr 40 bench_gpu_linear_csr \
        '--benchmark_filter=^spmm/(f32|f16)/(shrink|cusparse_default|cusparse_csr_alg[123]|cublas)/M:(16|4096)/N:4096/K:4096/' ;;
    kl)
      export SHRINK_TORCH_KL_JSON="$work/torch_kl.json"
      if ((has_gpu)) && python3 -c "import torch" 2>/dev/null; then
        run_step torch-kl 60 python3 "$here/torch_kl.py" --out "$SHRINK_TORCH_KL_JSON"
        row "bench torch_kl.py" "$(status_of "$rc" 0)" "PyTorch's KL + backward, the baseline of bench kl"
      fi
      bench_program kl 40 bench_gpu_kl '--benchmark_filter=/shape:0/' ;;
    threshold) bench_program threshold 30 bench_gpu_threshold '--benchmark_filter=BM_gpu_(read|threshold)<' ;;
    quantize) bench_program quantize 20 bench_gpu_quantize ;;
    calibration) bench_program calibration 15 bench_gpu_calibration ;;
    prune) bench_program prune 20 bench_gpu_prune ;;
    losses) bench_program losses 20 bench_gpu_losses ;;
  esac
}

step_bench() {
  local name
  for name in "${benches[@]}"; do bench_one "$name"; done
}

step_cli() {
  run_step cli-test 35 env SHRINK_CLI="$bin/shrink" "$bin/test_cli" "bench --gpu on*"
  row "cli test (--gpu on)" "$(status_of "$rc" 0)" "$(catch_counts "$work/cli-test.log")"
  run_step cli-bench 35 "$bin/shrink" bench --gpu on --quick --json --out "$work/shrink-bench"
  if ((rc == 0)); then
    cp "$work/shrink-bench/bench.json" "$out/shrink-bench.json" 2>/dev/null
    row "shrink bench --gpu on" ok "GPU rows in shrink-bench.json"
  elif ((!has_gpu)) && ((rc == 1)) && grep -q -- "--gpu on" "$work/cli-bench.log"; then
    row "shrink bench --gpu on" no-gpu "exit 1: $(head -c 120 "$work/cli-bench.log")"
  else
    row "shrink bench --gpu on" "$(status_of "$rc" 0)" "see cli-bench.log"
  fi
}

# run -- COMMAND...: the command as given, with the archive's programs and libraries, its output in run.log.
step_run() {
  SHOW=all run_step run $((budget - (SECONDS - started) - 5)) "${run_command[@]}"
  row "run ${run_command[0]}" "$(status_of "$rc" 0)" "exit $rc; output in run.log"
}

for step in "${steps[@]}"; do
  case $step in
    tests:*) step_tests_spec "${step#tests:}" ;;
    *) "step_$step" ;;
  esac
done

# ---- Summary ------------------------------------------------------------------------------------------------------
{
  echo
  echo "=== check.sh summary ($((SECONDS - started)) s of a $budget s budget; $(date -u +%Y-%m-%dT%H:%M:%SZ))"
  [[ -f $work/info.log ]] && grep -m3 -E "^name, |^[^,]+, [0-9.]+, [0-9]+ MiB|CUDA Version" "$work/info.log"
  printf '%-30s %-9s %7s  %s\n' step status time detail
  printf '%s\n' "${rows[@]}"
  if grep -qE "^summary:" "$work/probe.log" 2>/dev/null; then
    echo
    echo "Probe (the whole table in probe.txt):"
    grep -E "int8 metadata: the hardware matches|^summary:" "$work/probe.log"
  fi
  if [[ -n $(target_lines "$work"/bench-*.log) ]]; then
    echo
    echo "Targets (benchmark, baseline, ratio, target, PASS/MISS):"
    target_lines "$work"/bench-*.log | sed 's/  */ /g'
  fi
  echo
  if ((${#failures[@]} > 0)); then
    echo "check.sh: exit 1: ${failures[*]}"
  elif ((!has_gpu)); then
    echo "check.sh: exit 77: no CUDA device; every program behaved as documented without one"
  else
    echo "check.sh: exit 0: every step passed"
  fi
} | tee "$out/summary.txt"
pack_logs
rm -rf "$work"
((${#failures[@]} > 0)) && exit 1
((has_gpu)) || exit 77
exit 0
