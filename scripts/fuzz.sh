#!/usr/bin/env bash
# Fuzzes the model-file readers with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer for a bounded
# time (SHRINK_FUZZ_SECONDS, default 60, split evenly between the safetensors and the GGUF reader), starting from the
# hostile-file corpora in tests/io/corpus (and, for GGUF, the golden files in tests/golden). Needs clang and Debian's
# libclang-rt-14-dev (scripts/setup-debian.sh installs them) and nlohmann-json3-dev. Exits non-zero when libFuzzer
# finds a crash; the crashing input is kept in build/fuzz/.
# `fuzz.sh --check-toolchain` only compiles, links and runs once a one-function fuzz target with the same flags (a few
# seconds): it proves clang++ and libFuzzer's runtime are installed (scripts/test.sh --configure-only).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${SHRINK_FUZZ_SECONDS:-60}
each=$(((seconds + 1) / 2))
out=build/fuzz
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
mkdir -p "$out"

if [[ ${1:-} == --check-toolchain ]]; then
  printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
    'extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }' >"$out/toolchain.cpp"
  clang++ "${flags[@]}" "$out/toolchain.cpp" -o "$out/toolchain"
  "$out/toolchain" -runs=1 2>/dev/null
  echo "=== fuzz.sh: clang++ $(clang++ -dumpversion) links and runs a libFuzzer program under ASan/UBSan"
  exit 0
elif [[ -n ${1:-} ]]; then
  echo "usage: fuzz.sh [--check-toolchain]" >&2
  exit 2
fi

mkdir -p "$out/corpus" "$out/corpus-gguf" "$out/seeds-gguf"
for target in fuzz_safetensors fuzz_gguf; do
  clang++ "${flags[@]}" -I include -I /usr/include/eigen3 "tests/io/fuzz/$target.cpp" -o "$out/$target"
done
# libFuzzer reads every file of a seed folder: give it only the .gguf files.
cp "$root"/tests/io/corpus/*.gguf "$root"/tests/golden/*.gguf "$out/seeds-gguf/"

# The working corpora grow across runs in build/fuzz/corpus*; the committed files seed them.
# set -e and pipefail stop here with libFuzzer's status when it finds a crash.
echo "=== fuzz.sh: fuzzing the safetensors reader for $each s"
(cd "$out" && ./fuzz_safetensors -max_total_time="$each" -max_len=65536 -timeout=10 -print_final_stats=1 \
  corpus "$root/tests/io/corpus" 2>&1 | tail -n 8)
echo "=== fuzz.sh: fuzzing the GGUF reader for $each s"
(cd "$out" && ./fuzz_gguf -max_total_time="$each" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
  corpus-gguf seeds-gguf 2>&1 | tail -n 8)
echo "=== fuzz.sh: no crash in $seconds s"
