#!/usr/bin/env bash
# Fuzzes the safetensors reader with libFuzzer under AddressSanitizer and UndefinedBehaviorSanitizer for a bounded
# time (SHRINK_FUZZ_SECONDS, default 60), starting from the hostile-file corpus in tests/io/corpus. Needs clang and
# Debian's libclang-rt-14-dev (scripts/setup-debian.sh installs them) and nlohmann-json3-dev. Exits non-zero when
# libFuzzer finds a crash; the crashing input is kept in build/fuzz/.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${SHRINK_FUZZ_SECONDS:-60}
out=build/fuzz
mkdir -p "$out/corpus"

clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I include -I /usr/include/eigen3 tests/io/fuzz/fuzz_safetensors.cpp -o "$out/fuzz_safetensors"

# The working corpus grows across runs in build/fuzz/corpus; the committed hostile files seed it.
echo "=== fuzz.sh: fuzzing the safetensors reader for $seconds s"
# set -e and pipefail stop here with libFuzzer's status when it finds a crash.
(cd "$out" && ./fuzz_safetensors -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
  corpus "$root/tests/io/corpus" 2>&1 | tail -n 8)
echo "=== fuzz.sh: no crash in $seconds s"
