#!/usr/bin/env bash
# Installs the Debian bookworm packages shrink needs when any of them is missing: `setup-debian.sh bench` those the
# main job (scripts/bench.sh) needs, `setup-debian.sh` (or `test`) everything the tests need too.
# Runs as root or through sudo, without questions; does nothing, not even apt-get update, when all are present.
set -euo pipefail

purpose=${1:-test}
if [[ $purpose != bench && $purpose != test ]]; then
  echo "usage: setup-debian.sh [bench|test]" >&2
  exit 2
fi

# The build of the `shrink` command and the Google Benchmark suites; libdnnl-dev and libopenblas-dev: the PyTorch CPU
# backends benchmarks/bench_threads.cpp times beside shrink (OpenBLAS is also what makes Debian's torch fast).
packages=(cmake ninja-build g++ libeigen3-dev nlohmann-json3-dev libbenchmark-dev libdnnl-dev libopenblas-dev)
if [[ $purpose == test ]]; then
  # catch2: the unit tests. python3, python3-venv: the interop tests' packages (scripts/python-env.sh). git: the
  # consumer tests. clang and libclang-rt-14-dev (bookworm's clang is 14): the clang consumer test and the libFuzzer
  # run of scripts/fuzz.sh. dataset-fashion-mnist and zlib1g-dev (its IDX files are gzipped): the end-to-end example
  # on real data. debootstrap and binutils: the GPU check's archive is started on a clean Debian root
  # (benchmarks/gpu/pack.sh). python3-torch: compressed-tensors' own decompression in cli/compressed_tensors_interop
  # (scripts/python-env.sh torch), and the goldens' generator. ccache: scripts/test.sh's GPU archive build reuses the
  # release build's objects.
  packages+=(catch2 python3 python3-venv git clang libclang-rt-14-dev dataset-fashion-mnist zlib1g-dev debootstrap
    binutils python3-torch ccache)
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup-debian: all required packages are installed (${packages[*]})"
  exit 0
fi

echo "setup-debian: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup-debian: missing packages (${missing[*]}), and neither root nor sudo is available to install them" >&2
  exit 1
fi

"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
