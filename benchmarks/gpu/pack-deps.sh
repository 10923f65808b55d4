#!/usr/bin/env bash
# Downloads (does not install) the Debian packages the GPU run needs beyond CUDA — Eigen, Catch2, nlohmann-json,
# Google Benchmark and its library — into .gpu-deps/ (git-ignored), for a GPU machine that has CUDA, CMake and
# Ninja but cannot fetch anything. Run it here, carry .gpu-deps along, and run.sh unpacks them there when
# find_package would not find the packages otherwise.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$root/.gpu-deps"
cd "$root/.gpu-deps"
rm -f ./*.deb
apt-get download libeigen3-dev catch2 nlohmann-json3-dev libbenchmark-dev libbenchmark1debian
ls -l ./*.deb
