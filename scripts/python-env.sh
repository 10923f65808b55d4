#!/usr/bin/env bash
# Makes (or reuses) the virtual environment of the Python interop tests, with tests/requirements.txt installed, in a
# cache folder outside the tree (SHRINK_CACHE_DIR, else $XDG_CACHE_HOME/shrink, else ~/.cache/shrink), and prints its
# python3's path. Uses Debian's python3 (python3-venv, installed by scripts/setup-debian.sh); the packages come from
# PyPI once, then the environment is reused until the requirements change.
# `python-env.sh torch` makes the compressed-tensors test's environment instead (tests/requirements-torch.txt): made
# with --system-site-packages, so that torch and numpy are Debian's python3-torch and python3-numpy.
# `python-env.sh llama` makes the llama.cpp peer's (benchmarks/llm/requirements-llama.txt: llama-cpp-python, which pip
# builds from its source with this machine's compiler and CMake, for this CPU: about ten minutes on 2 cores, once;
# pip keeps the wheel it built in its cache, so a second environment reuses it).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SHRINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shrink}
venv=$cache/venv
requirements=$root/tests/requirements.txt
venv_options=()
if [[ ${1:-} == torch ]]; then
  venv=$cache/venv-torch
  requirements=$root/tests/requirements-torch.txt
  venv_options=(--system-site-packages)
elif [[ ${1:-} == llama ]]; then
  venv=$cache/venv-llama
  requirements=$root/benchmarks/llm/requirements-llama.txt
  # Without the multimodal library (llava / mtmd), which nothing here loads: a few minutes less of building.
  export CMAKE_ARGS="-DLLAVA_BUILD=OFF ${CMAKE_ARGS:-}"
elif [[ -n ${1:-} ]]; then
  echo "usage: python-env.sh [torch|llama]" >&2
  exit 2
fi
stamp=$venv/requirements.sha256
wanted=$(sha256sum "$requirements" | cut -d' ' -f1)

if [[ ! -x $venv/bin/python3 || ! -f $stamp || $(cat "$stamp") != "$wanted" ]]; then
  echo "python-env: installing $(grep -v '^#' "$requirements" | paste -sd ' ') into $venv" >&2
  rm -rf "$venv"
  mkdir -p "$cache"
  /usr/bin/python3 -m venv "${venv_options[@]}" "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --requirement "$requirements" >&2
  echo "$wanted" >"$stamp"
fi
echo "$venv/bin/python3"
