#!/usr/bin/env bash
# Fuzzes the model-file readers with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer for a bounded
# time (SHRINK_FUZZ_SECONDS, default 60, split evenly between the safetensors and the GGUF reader), starting from the
# hostile-file corpora in tests/io/corpus (and, for GGUF, the golden files in tests/golden). Needs clang and Debian's
# libclang-rt-14-dev (scripts/setup-debian.sh installs them) and nlohmann-json3-dev. Exits non-zero when libFuzzer
# finds a crash; the crashing input is kept in build/fuzz/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${SHRINK_FUZZ_SECONDS:-60}
each=$(((seconds + 1) / 2))
out=build/fuzz
mkdir -p "$out/corpus" "$out/corpus-gguf" "$out/seeds-gguf"

for target in fuzz_safetensors fuzz_gguf; do
  clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I include -I /usr/include/eigen3 "tests/io/fuzz/$target.cpp" -o "$out/$target"
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
