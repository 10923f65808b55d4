#!/usr/bin/env bash
# Installs the Debian bookworm packages one purpose of shrink's needs, when any of them is missing, on a machine that
# may have nothing (a debootstrap minbase root: scripts/fresh-machine-check.sh proves it):
#   setup-debian.sh bench   the main job (scripts/bench.sh with no suite): a compiler, CMake, Eigen, nlohmann_json
#   setup-debian.sh suites  the Google Benchmark suites (scripts/bench.sh <suite>) with their peers
#   setup-debian.sh [test]  everything the test command (scripts/test.sh) needs: both of the above and the rest
#   setup-debian.sh root    debootstrap alone: the clean Debian roots of scripts/clean-root.sh
# Runs as root or through sudo, without questions; does nothing, not even apt-get update, when all are present.
set -euo pipefail

purpose=${1:-test}
if [[ ! $purpose =~ ^(bench|suites|test|root)$ ]]; then
  echo "usage: setup-debian.sh [bench|suites|test|root]" >&2
  exit 2
fi

packages=()
if [[ $purpose == root ]]; then
  packages=(debootstrap)
else
  # The `shrink` command: a C++17 compiler, CMake and Ninja, Eigen (the headers' one dependency), nlohmann_json (the
  # model files the command reads and writes).
  packages=(cmake ninja-build g++ libeigen3-dev nlohmann-json3-dev)
fi
if [[ $purpose == suites || $purpose == test ]]; then
  # Google Benchmark; libdnnl-dev and libopenblas-dev: PyTorch's CPU backends, which benchmarks/bench_threads.cpp times
  # beside shrink (OpenBLAS is also what makes Debian's torch fast); ocl-icd-opencl-dev: Debian's oneDNN is built with
  # its OpenCL runtime and its CMake package requires OpenCL's development files. python3, python3-venv and
  # python3-torch: the PyTorch references bench_gptq and bench_llm time; ca-certificates: pip's HTTPS to PyPI, for
  # scripts/python-env.sh's environments and the data fetches (bench_llm's, the tests').
  packages+=(libbenchmark-dev libdnnl-dev ocl-icd-opencl-dev libopenblas-dev python3 python3-venv python3-torch
    ca-certificates)
fi
if [[ $purpose == test ]]; then
  # catch2: the unit tests. git:
  # the consumer tests. clang and libclang-rt-14-dev (bookworm's clang is 14): the clang consumer test and the
  # libFuzzer run of scripts/fuzz.sh. dataset-fashion-mnist and zlib1g-dev (its IDX files are gzipped): the end-to-end
  # example on real data. debootstrap and binutils: the GPU check's archive is started on a clean Debian root
  # (benchmarks/gpu/pack.sh). python3-torch is also compressed-tensors' own decompression in
  # cli/compressed_tensors_interop (scripts/python-env.sh torch) and the goldens' generator. ccache: scripts/test.sh's
  # GPU archive build reuses the release build's objects.
  packages+=(catch2 git clang libclang-rt-14-dev dataset-fashion-mnist zlib1g-dev debootstrap binutils
    ccache)
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup-debian: all the packages of '$purpose' are installed (${packages[*]})"
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
