#!/usr/bin/env bash
# Builds and runs every test of shrink: the release preset (with CUDA when nvcc is found; consumer projects and
# the header check included), then the debug-asan preset, then the GPU check's archive where nvcc is found
# (benchmarks/gpu/pack.sh --check-clean; SHRINK_GPU_PACK=0 skips it), then a bounded libFuzzer run of the safetensors
# and GGUF readers (scripts/fuzz.sh, SHRINK_FUZZ_SECONDS, 60 by default; 0 skips it). Fails on the first failure; ends with the
# summaries.
#
# `test.sh --configure-only` stops after the set-up (packages, Python environments, data) and the configure of every
# preset (release, debug-asan, and device where nvcc is found), then links a libFuzzer program with fuzz.sh's flags:
# what scripts/fresh-machine-check.sh runs on a clean Debian root to prove the set-up is complete.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-2}
configure_only=0
case ${1:-} in
  "") ;;
  --configure-only) configure_only=1 ;;
  *) echo "usage: test.sh [--configure-only]" >&2; exit 2 ;;
esac
have_nvcc=0
if command -v nvcc >/dev/null || [[ -x /usr/local/cuda/bin/nvcc ]]; then have_nvcc=1; fi

"$root/scripts/setup-debian.sh"
# The interop tests' Python packages (numpy, safetensors) in a virtual environment outside the tree; with them there,
# a Python test that would skip fails instead.
python=$("$root/scripts/python-env.sh")
# NVIDIA's cuobjdump and nvdisasm, which the same environment installs from PyPI (the toolkit here may lack them), for
# cuda/architectures and cuda/machine_code.
nvidia_tool() {
  local path
  path=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/bin/$1
  if [[ ! -x $path ]]; then
    echo "test.sh: no $1 at $path (tests/requirements.txt installs nvidia-cuda-$1 there)" >&2
    exit 1
  fi
  echo "$path"
}
cuobjdump=$(nvidia_tool cuobjdump)
nvdisasm=$(nvidia_tool nvdisasm)
# compressed-tensors' own decompression, over Debian's torch (scripts/python-env.sh torch).
torch_python=$("$root/scripts/python-env.sh" torch)
# llama.cpp itself (llama-cpp-python, built by pip from its source) for llm/llama_cpp_logits: llama.cpp loads the
# files `shrink quantize --format gguf` writes.
llama_python=$("$root/scripts/python-env.sh" llama)
# cli/real_checkpoint's model, all-MiniLM-L6-v2, downloaded once into the same cache folder.
test_model_dir=$("$root/scripts/fetch-test-models.sh")
# io/gguf_real_model's SmolLM2 GGUF (and the LLM example's texts), downloaded once into the same cache folder.
llm_data_dir=$("$root/scripts/fetch-llm-data.sh")
export SHRINK_PYTHON_STRICT=1

summaries=("set-up ($SECONDS s): Debian packages, Python environments, test model, LLM data")
total_passed=0
total_skipped=0
run_preset() {
  local preset=$1 log status start
  shift
  start=$SECONDS
  if ((configure_only)); then
    echo "=== test.sh: configure the '$preset' preset"
  else
    echo "=== test.sh: configure, build and test the '$preset' preset"
  fi
  cmake --preset "$preset" -DSHRINK_PYTHON3="$python" -DSHRINK_TORCH_PYTHON3="$torch_python" \
    -DSHRINK_LLAMA_PYTHON3="$llama_python" -DSHRINK_CUOBJDUMP="$cuobjdump" -DSHRINK_NVDISASM="$nvdisasm" \
    -DSHRINK_TEST_MODEL_DIR="$test_model_dir" -DSHRINK_LLM_DATA_DIR="$llm_data_dir" "$@"
  if ((configure_only)); then
    summaries+=("$preset ($((SECONDS - start)) s): configured")
    return
  fi
  cmake --build --preset "$preset" -j "$jobs"
  log="build/$preset/test.sh-ctest.log"
  set +e
  ctest --preset "$preset" -j "$jobs" --output-on-failure 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  summaries+=("$preset ($((SECONDS - start)) s): $(grep -E '^[0-9]+% tests passed' "$log" || echo 'no ctest summary')")
  if ((status != 0)); then
    echo "=== test.sh: the '$preset' tests failed (ctest exit status $status)" >&2
    exit "$status"
  fi
  local total skipped
  total=$(sed -nE 's/^[0-9]+% tests passed, [0-9]+ tests failed out of ([0-9]+)$/\1/p' "$log")
  skipped=$(grep -cE '^\s+[0-9]+ - .* \(Skipped\)$' "$log" || true)
  total_passed=$((total_passed + ${total:-0} - skipped))
  total_skipped=$((total_skipped + skipped))
}

# A compiler cache for this run alone (ccache, in depend mode: no second preprocessing): the GPU archive's build
# (the device preset) compiles its host sources with the release preset's flags once the release build maps the
# source path as the device preset does, so it takes them from the cache. Empty at the start, so the run's time is
# what a fresh machine takes. Paths under the checkout are hashed relative to the build directory (CCACHE_BASEDIR), so
# the unity sources CMake writes into each build directory hit too.
if command -v ccache >/dev/null; then
  CCACHE_DIR=$(mktemp -d)
  export CCACHE_DIR CCACHE_DEPEND=1 CCACHE_NOHASHDIR=1 CCACHE_BASEDIR=$root
  trap 'rm -rf "$CCACHE_DIR"' EXIT
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
run_preset release -DCMAKE_CXX_FLAGS="-ffile-prefix-map=$root/="
# Nothing of the sanitized build is shared: no cache for it.
unset CMAKE_CXX_COMPILER_LAUNCHER
run_preset debug-asan
if [[ -n ${CCACHE_DIR:-} ]]; then export CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi

if ((configure_only)); then
  # The GPU archive's preset (benchmarks/gpu/pack.sh) and the fuzzer's compiler and runtime (scripts/fuzz.sh).
  if ((have_nvcc)); then
    start=$SECONDS
    echo "=== test.sh: configure the 'device' preset"
    cmake --preset device
    summaries+=("device ($((SECONDS - start)) s): configured")
  fi
  start=$SECONDS
  "$root/scripts/fuzz.sh" --check-toolchain
  summaries+=("fuzz ($((SECONDS - start)) s): clang++ links and runs a libFuzzer program under ASan/UBSan")
  echo "=== test.sh: set-up and configure done in $SECONDS s"
  for summary in "${summaries[@]}"; do
    echo "  $summary"
  done
  exit 0
fi

# The GPU check's archive (benchmarks/gpu/pack.sh): built for sm_90a, no path of this machine in it, and started on a
# clean Debian root without a GPU, where check.sh must exit 77. Needs nvcc and root (debootstrap, chroot).
if [[ ${SHRINK_GPU_PACK:-1} != 0 ]] && ((have_nvcc)); then
  start=$SECONDS
  echo "=== test.sh: the GPU check's archive, started on a clean Debian root"
  SHRINK_JOBS=$jobs "$root/benchmarks/gpu/pack.sh" --check-clean
  summaries+=("gpu-pack ($((SECONDS - start)) s): $(du -h .device/shrink-gpu-check.tar.gz | cut -f1) archive; check.sh exit 77 on a clean root without a GPU")
fi

fuzz_seconds=${SHRINK_FUZZ_SECONDS:-60}
if ((fuzz_seconds > 0)); then
  start=$SECONDS
  SHRINK_FUZZ_SECONDS=$fuzz_seconds "$root/scripts/fuzz.sh"
  summaries+=("fuzz ($((SECONDS - start)) s): the safetensors and GGUF readers, ${fuzz_seconds} s under ASan/UBSan, no crash")
fi

echo "=== test.sh: all tests passed in $SECONDS s"
for summary in "${summaries[@]}"; do
  echo "  $summary"
done
echo "test.sh: $total_passed passed, 0 failed, $total_skipped skipped"
