#!/usr/bin/env bash
# Builds here, with nvcc and for sm_90a alone (the `device` preset), what the one-call GPU check runs, and packs it into
# .device/shrink-gpu-check.tar.gz (git-ignored): the [gpu] test program, the layout probe, the GPU benchmarks, the
# `shrink` command and its test, device-check.sh as check.sh, torch_kl.py, and every shared library they load that a
# GPU machine with the CUDA toolkit and PyTorch lacks (Google Benchmark's; the CUDA and C++ runtimes as fallbacks in
# lib/fallback).
# Refuses to pack a program that holds this checkout's path or a RUNPATH other than $ORIGIN/../lib.
#
# Then, on the GPU machine (the device tool: the archive travels with the tree, carry [".device"]):
#   tar -xzf .device/shrink-gpu-check.tar.gz -C /tmp && /tmp/shrink-gpu-check/check.sh
# and here, to see the programs start on a machine without a GPU: benchmarks/gpu/pack.sh --check-clean
# (unpacks the archive into a fresh Debian root of scripts/clean-root.sh, with only the CUDA toolkit's libraries added,
# and runs check.sh there: it must exit 77, every program in its no-device mode).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-$(nproc)}
build=build/device
name=shrink-gpu-check
archive=.device/$name.tar.gz
max_mib=48  # the tree that travels holds at most 64 MiB

check_clean=0
for arg in "$@"; do
  case $arg in
    --check-clean) check_clean=1 ;;
    *) echo "pack.sh: unknown argument '$arg' (--check-clean)" >&2; exit 2 ;;
  esac
done

"$root/scripts/setup-debian.sh" >/dev/null

programs=(test_cuda_device test_cli shrink_cli shrink_layout_probe)
for source in benchmarks/gpu/bench_gpu_*.cpp; do programs+=("$(basename "$source" .cpp)"); done
cmake --preset device >/dev/null
cmake --build --preset device -j "$jobs" --target "${programs[@]}"

stage=$(mktemp -d)/$name
mkdir -p "$stage/bin" "$stage/lib/fallback"
trap 'rm -rf "$(dirname "$stage")"' EXIT
cp "$build/tests/cuda/test_cuda_device" "$build/tests/cli/test_cli" "$build/examples/cli/shrink" \
  "$build/benchmarks/shrink_layout_probe" "$build"/benchmarks/bench_gpu_* "$stage/bin/"
strip --strip-unneeded "$stage"/bin/*
cp benchmarks/gpu/device-check.sh "$stage/check.sh"
cp benchmarks/gpu/torch_kl.py "$stage/"

# Libraries: what the GPU machine has (its CUDA toolkit or PyTorch's CUDA wheels, the C and C++ runtimes) stays out;
# everything else ldd resolves here comes along.
machine_has='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcusparse|libnvJitLink)\.'
ldd "$stage"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r soname path; do
  if [[ ! $soname =~ $machine_has ]]; then cp -L "$path" "$stage/lib/$soname"; fi
done
for fallback in libcudart.so.13 libstdc++.so.6 libgcc_s.so.1; do
  path=$(ldd "$stage/bin/test_cuda_device" | awk -v s="$fallback" '$1 == s {print $3}')
  [[ -n $path ]] && cp -L "$path" "$stage/lib/fallback/$fallback"
done
if ldd "$stage"/bin/* | grep -q "not found"; then
  echo "pack.sh: a library the programs need is not found here:" >&2
  ldd "$stage"/bin/* | grep "not found" >&2
  exit 1
fi

# Nothing may point back at this machine: no checkout or build path in any file, no RUNPATH but $ORIGIN/../lib.
for file in "$stage"/bin/* "$stage"/lib/*.so*; do
  if grep -qaF "$root" "$file"; then
    echo "pack.sh: $(basename "$file") holds this checkout's path $root" >&2
    exit 1
  fi
done
for program in "$stage"/bin/*; do
  runpath=$(readelf -d "$program" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p; s/.*(RPATH).*\[\(.*\)\]/\1/p')
  if [[ -n $runpath && $runpath != '$ORIGIN/../lib' ]]; then
    echo "pack.sh: $(basename "$program") has RUNPATH '$runpath', expected \$ORIGIN/../lib" >&2
    exit 1
  fi
done

# The registers, stack and shared memory of every kernel packed, from cuobjdump (PyPI's, in scripts/python-env.sh's
# environment): the build's --resource-usage report, kept with the results.
cuobjdump=$("$("$root/scripts/python-env.sh")" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/bin/cuobjdump
if [[ ! -x $cuobjdump ]]; then
  echo "pack.sh: no cuobjdump at $cuobjdump (tests/requirements.txt installs nvidia-cuda-cuobjdump there)" >&2
  exit 1
fi
{
  echo "shrink GPU check, $(git describe --always --dirty 2>/dev/null || echo unknown), built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nvcc: $(/usr/local/cuda/bin/nvcc --version | tail -n 1); architectures: sm_90a"
  echo "host compiler: $(c++ --version | head -n 1)"
  echo "glibc symbols up to: $(objdump -T "$stage"/bin/* | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)"
  echo
  (cd "$stage" && find . -type f -printf '%8k KiB  %p\n' | sort -k3)
  echo
  echo "resource usage of $build/cuda/libshrink_cuda.a, a kernel a line (cuobjdump --dump-resource-usage):"
  "$cuobjdump" --dump-resource-usage "$build/cuda/libshrink_cuda.a" |
    awk '/^arch = / {arch = $3} /Function .*:$/ {name = $2; sub(/:$/, "", name)}
         /REG:/ {print arch, $1, $2, $3, $4, name}' | c++filt
} >"$stage/MANIFEST"

mkdir -p .device
tar -czf "$archive" -C "$(dirname "$stage")" "$name"
size_kib=$(du -k "$archive" | cut -f1)
echo "pack.sh: $archive, $((size_kib / 1024)) MiB ($size_kib KiB) packed, $(du -sk "$stage" | cut -f1) KiB unpacked"
cat "$stage/MANIFEST"
if ((size_kib > max_mib * 1024)); then
  echo "pack.sh: the archive is over $max_mib MiB: it would crowd the 64 MiB the device tool carries" >&2
  exit 1
fi

((check_clean)) || exit 0

# ---- The archive on a clean machine: a minimal Debian root (scripts/clean-root.sh: a fresh copy of a debootstrap
# minbase root cached outside the tree) with the CUDA toolkit's libraries and nothing of shrink's.
jail=$(mktemp -d /var/tmp/shrink-gpu-check-root.XXXXXX)
trap 'rm -rf "$(dirname "$stage")" "$jail"' EXIT
"$root/scripts/clean-root.sh" "$jail"
mkdir -p "$jail/opt/check" "$jail/usr/local/cuda/lib64"
cp -a /usr/local/cuda/lib64/{libcudart,libcublas,libcublasLt,libcusparse,libnvJitLink}.so* "$jail/usr/local/cuda/lib64/"
tar -xzf "$archive" -C "$jail/opt/check"
set +e
chroot "$jail" /usr/bin/env -i PATH=/usr/bin:/bin OUT=/opt/check/out /opt/check/$name/check.sh
status=$?
set -e
echo "pack.sh: check.sh on a clean Debian root without a GPU exited $status (expected 77)"
((status == 77))
