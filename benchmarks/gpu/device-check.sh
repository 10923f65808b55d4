#!/usr/bin/env bash
# The one-call GPU check. It runs from the archive benchmarks/gpu/pack.sh makes (programs built elsewhere for sm_90a,
# with the shared libraries a GPU machine lacks), never builds, and never stops at a failure:
#   info      GPU name, driver, CUDA version, clocks; which library each program loads
#   tests     the [gpu] tests (every operation against its CPU twin, outputs poisoned)
#   bench     the benchmarks of the targets, filtered, one repetition each (PyTorch's KL first, where it is installed)
#   cli       the test of `shrink bench --gpu on`, then `shrink bench --gpu on --quick`
#   sanitize  compute-sanitizer memcheck, then racecheck, on the "[sanitize]" test cases (every GEMM path, the cluster
#             KL path, the threshold, SpMM, one quantize)
# Each step runs under its own `timeout`, within a budget for the whole check (SHRINK_CHECK_BUDGET seconds, 450 by
# default: under 8 minutes with the unpacking), and the summary table comes last: test counts, sanitizer errors,
# every target ratio with PASS/MISS. Logs go to $OUT/logs.tar.gz (refreshed after every step, so a check cut short
# still returns what it ran), the summary to $OUT/summary.txt and `shrink bench`'s JSON to $OUT/shrink-bench.json.
#
# Usage: check.sh [info] [tests] [bench[:NAME]...] [cli] [sanitize]   (no step: all of them, in that order;
#        bench:linear_int8 runs one benchmark program, e.g. for a rerun)
# Exit status: 0  every step ran in its time and passed (a MISS is a figure, not a failure)
#              1  a test, sanitizer or program failed, a step ran out of time, or the budget left one out
#              2  bad usage
#              77 no GPU: every program was started in its no-device mode and behaved as documented (the [gpu]
#                 tests exit 77, each benchmark reports "no CUDA device", `shrink bench --gpu on` exits 1 saying why)
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$here/bin
out=${OUT:-$here/out}
budget=${SHRINK_CHECK_BUDGET:-450}
bench_budget=${SHRINK_CHECK_BENCH_BUDGET:-160}  # all benchmark programs together
work=$(mktemp -d "${TMPDIR:-/tmp}/shrink-check.XXXXXX")
mkdir -p "$out"
started=$SECONDS

all_benches=(quantize calibration threshold prune losses kl linear_int8 linear_weight_only linear_nm linear_csr)
steps=()
benches=()
for arg in "$@"; do
  case $arg in
    info | tests | cli | sanitize) steps+=("$arg") ;;
    bench) steps+=(bench); benches+=("${all_benches[@]}") ;;
    bench:*)
      name=${arg#bench:}
      [[ " ${all_benches[*]} " == *" $name "* ]] || { echo "check.sh: unknown benchmark '$name' (${all_benches[*]})" >&2; exit 2; }
      [[ " ${steps[*]} " == *" bench "* ]] || steps+=(bench)
      benches+=("$name") ;;
    *) echo "check.sh: unknown step '$arg' (info tests bench bench:NAME cli sanitize)" >&2; exit 2 ;;
  esac
done
((${#steps[@]} > 0)) || { steps=(info tests bench cli sanitize); benches=("${all_benches[@]}"); }

rows=()     # the summary's rows: step, status, seconds, detail
failures=() # the steps that failed, ran out of time or were left out

# ---- Libraries: this archive's lib/, then the CUDA libraries wherever this machine keeps them --------------------
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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

# ---- Steps --------------------------------------------------------------------------------------------------------
# run_step NAME CAP COMMAND...: COMMAND under `timeout` (CAP seconds, fewer when the budget has fewer left), its output
# in $work/NAME.log and its last lines here. Sets rc (124: out of time; -1: left out) and took (seconds).
run_step() {
  local name=$1 cap=$2
  shift 2
  local left=$((budget - (SECONDS - started) - 5))
  ((cap > left)) && cap=$left
  echo "=== check.sh: $name (at most ${cap} s)"
  if ((cap < 3)); then
    echo "left out: the check's budget of $budget s is spent"
    rc=-1 took=0
    return
  fi
  local t0=$SECONDS
  timeout -k 5 "$cap" "$@" >"$work/$name.log" 2>&1
  rc=$? took=$((SECONDS - t0))
  tail -n 12 "$work/$name.log"
  ((rc == 124 || rc == 137)) && rc=124
  tar -czf "$out/logs.tar.gz" -C "$work" . 2>/dev/null
}

# row STEP STATUS DETAIL: one line of the summary; a status other than ok (or skipped on a machine without a GPU)
# counts as a failure.
row() {
  rows+=("$(printf '%-26s %-8s %5s s  %s' "$1" "$2" "$took" "$3")")
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
probe() {
  "$bin/test_cuda_device" --gpu --list-test-names-only "[no-such-tag]" >/dev/null 2>&1
  [[ $? -ne 77 ]]
}
probe || has_gpu=0
if ((!has_gpu)); then
  echo "check.sh: no CUDA device: every program runs in its no-device mode"
  if nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    took=0
    row "runtime" FAIL "nvidia-smi lists a GPU, but the CUDA runtime in these programs sees none"
  fi
fi

step_info() {
  run_step info 20 bash -c '
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "host: $(uname -srm)"
    if command -v nvidia-smi >/dev/null; then
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,temperature.gpu,power.draw,power.limit --format=csv
      nvidia-smi | grep -m1 "CUDA Version" | sed "s/^| *//; s/ *|$//"
    else
      echo "nvidia-smi: not found"
    fi
    command -v nvcc >/dev/null && nvcc --version | tail -n 2
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    for p in "$0"/*; do echo "$(basename "$p"):"; ldd "$p" | grep -vE "linux-vdso|ld-linux|libc\.so|libm\.so|libgcc_s|libstdc"; done
    cat "$0/../MANIFEST" 2>/dev/null | head -n 5
  ' "$bin"
  local gpu missing
  gpu=$(grep -m1 -E '^[^,]+, [0-9.]+, [0-9]+ MiB' "$work/info.log" 2>/dev/null | cut -d, -f1-3)
  missing=$(missing_libraries | paste -sd ' ' -)
  if [[ -n $missing ]]; then
    rc=1
    row info "$(status_of "$rc" 0)" "libraries not found: $missing"
  else
    row info "$(status_of "$rc" 0)" "${gpu:-no GPU}"
  fi
}

step_tests() {
  run_step tests 130 "$bin/test_cuda_device" --gpu "[gpu]" --durations yes
  if ((rc == 77)); then
    row "tests [gpu]" "$( ((has_gpu)) && echo "FAIL(77)" || echo no-gpu)" "skipped: no CUDA device (exit 77)"
  else
    row "tests [gpu]" "$(status_of "$rc" 0)" "$(catch_counts "$work/tests.log")"
  fi
}

# bench_program NAME CAP PROGRAM ARGS...: one benchmark program, one repetition; its PASS/MISS lines join the summary.
bench_left=0
bench_program() {
  local name=$1 cap=$2 program=$3
  shift 3
  ((cap > bench_left)) && cap=$bench_left
  local t0=$SECONDS
  run_step "bench-$name" "$cap" "$bin/$program" --benchmark_repetitions=1 --benchmark_min_time=0.05 "$@"
  bench_left=$((bench_left - (SECONDS - t0)))
  local targets passes misses
  targets=$(grep -cE "  (PASS|MISS)  |: (PASS|MISS)\)" "$work/bench-$name.log" 2>/dev/null)
  passes=$(grep -cE "  PASS  |: PASS\)" "$work/bench-$name.log" 2>/dev/null)
  misses=$((targets - passes))
  if ((has_gpu)); then
    row "bench $name" "$(status_of "$rc" 0)" "$targets targets: $passes PASS, $misses MISS"
  elif ((rc == 0)) && grep -q "no CUDA device" "$work/bench-$name.log"; then
    row "bench $name" no-gpu "every row: no CUDA device (exit 0)"
  else
    row "bench $name" "$(status_of "$rc" 0)" "expected every row to say no CUDA device"
  fi
}

bench_one() {
  case $1 in
    quantize) bench_program quantize 20 bench_gpu_quantize ;;
    calibration) bench_program calibration 15 bench_gpu_calibration ;;
    threshold) bench_program threshold 30 bench_gpu_threshold '--benchmark_filter=BM_gpu_(read|threshold)<' ;;
    prune) bench_program prune 20 bench_gpu_prune ;;
    losses) bench_program losses 20 bench_gpu_losses ;;
    kl)
      export SHRINK_TORCH_KL_JSON="$work/torch_kl.json"
      if ((has_gpu)) && python3 -c "import torch" 2>/dev/null; then
        local t0=$SECONDS cap=60
        ((cap > bench_left)) && cap=$bench_left
        run_step torch-kl "$cap" python3 "$here/torch_kl.py" --out "$SHRINK_TORCH_KL_JSON"
        bench_left=$((bench_left - (SECONDS - t0)))
        row "bench torch_kl.py" "$(status_of "$rc" 0)" "PyTorch's KL + backward, the baseline of bench kl"
      fi
      bench_program kl 40 bench_gpu_kl '--benchmark_filter=/shape:0/' ;;
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
  esac
}

step_bench() {
  bench_left=$bench_budget
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

sanitizer() {
  local s
  for s in "$(command -v compute-sanitizer)" /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [[ -n $s && -x $s ]] && { echo "$s"; return; }
  done
  find /usr/local /opt -name compute-sanitizer -type f -perm -u+x -print -quit 2>/dev/null
}

step_sanitize() {
  local tool tool_path detail
  tool_path=$(sanitizer)
  for tool in memcheck racecheck; do
    if ((!has_gpu)); then
      took=0 row "$tool [sanitize]" no-gpu "skipped: no CUDA device"
      continue
    fi
    if [[ -z $tool_path ]]; then
      took=0 row "$tool [sanitize]" missing "compute-sanitizer not found"
      continue
    fi
    run_step "$tool" 55 "$tool_path" --tool "$tool" --error-exitcode 99 --print-limit 20 \
      "$bin/test_cuda_device" --gpu "[sanitize]" --durations yes
    detail="$(grep -hE "ERROR SUMMARY|RACECHECK SUMMARY" "$work/$tool.log" | tail -n 1 | sed 's/^=* *//'); $(catch_counts "$work/$tool.log")"
    row "$tool [sanitize]" "$(status_of "$rc" 0)" "$detail"
  done
}

for step in "${steps[@]}"; do "step_$step"; done

# ---- Summary ------------------------------------------------------------------------------------------------------
{
  echo
  echo "=== check.sh summary ($((SECONDS - started)) s of a $budget s budget; $(date -u +%Y-%m-%dT%H:%M:%SZ))"
  [[ -f $work/info.log ]] && grep -E "^name, |^[^,]+, [0-9.]+, [0-9]+ MiB|CUDA Version" "$work/info.log"
  printf '%-26s %-8s %7s  %s\n' step status time detail
  printf '%s\n' "${rows[@]}"
  if compgen -G "$work/bench-*.log" >/dev/null; then
    echo
    echo "Targets (benchmark, baseline, ratio, target, PASS/MISS):"
    grep -hE "  (PASS|MISS)  |: (PASS|MISS)\)" "$work"/bench-*.log | sed 's/  */ /g'
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
tar -czf "$out/logs.tar.gz" -C "$work" . 2>/dev/null
rm -rf "$work"
((${#failures[@]} > 0)) && exit 1
((has_gpu)) || exit 77
exit 0
