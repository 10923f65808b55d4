#!/usr/bin/env bash
# The LLM example's recipe table (docs/llm.md): fetches the data (scripts/fetch-llm-data.sh: SmolLM2-135M-Instruct as
# GGUF, Hamlet for evaluation, Macbeth for calibration, into the cache folder), builds examples/llm's shrink_llm and
# runs every recipe: one table printed, llm-table/table.json written. Arguments go to shrink_llm (e.g. --windows 2,
# --recipes base,w8,w4-g64, --threads 1; see --help).
#
# --reference (first argument) also runs the independent PyTorch forward (examples/llm/reference_forward.py, in
# scripts/python-env.sh's torch environment: Debian's python3-torch and PyPI gguf) on the same token ids, window and
# thread count, writes llm-table/reference.json, and prints each row both computed beside each other with the gap.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=${SHRINK_JOBS:-2}
reference=0
if [[ ${1:-} == --reference ]]; then
  reference=1
  shift
fi

# suites: the compiler and libraries of the command, and python3-venv with ca-certificates for the data's download
# (python3-torch too, for --reference).
"$root/scripts/setup-debian.sh" suites
data=$("$root/scripts/fetch-llm-data.sh")
cmake --preset no-cuda -DSHRINK_BUILD_TESTS=OFF -DSHRINK_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build --preset no-cuda -j "$jobs" --target shrink_llm
mkdir -p llm-table
build/no-cuda/examples/llm/shrink_llm --data "$data" --json llm-table/table.json --write-ids llm-table/eval.ids \
  --write-calibration-ids llm-table/calibration.ids "$@"

if ((reference)); then
  torch_python=$("$root/scripts/python-env.sh" torch)
  # The same window, windows and threads as the table (read back from its JSON).
  read -r window windows threads calibration_windows rows < <(/usr/bin/python3 -c 'import json, sys
t = json.load(open(sys.argv[1])); e = t["evaluation"]
names = {"base": "base", "fp16": "fp16", "bf16": "bf16", "w8": "int8", "w8a8": "w8a8", "w4-g64": "w4g64",
         "w4a8-g64": "w4a8g64", "w3-g64": "w3g64", "mag-50": "magnitude50", "mag-2:4": "magnitude24"}
same = ("gptq-w4-g64", "gptq-w4-g64-act", "gptq-w3-g64", "gptq-w3-g64-act", "awq-w4-g64", "hqq-w4-g64",
        "sparsegpt-50", "sparsegpt-2:4")
rows = [names.get(r["recipe"], r["recipe"]) for r in t["rows"] if r["recipe"] in names or r["recipe"] in same]
print(e["window"], e["windows"], t["threads"], t["calibration"]["windows"], ",".join(rows) or "base")' llm-table/table.json)
  "$torch_python" examples/llm/reference_forward.py --gguf "$data/SmolLM2-135M-Instruct.Q4_1.gguf" \
    --ids llm-table/eval.ids --window "$window" --windows "$windows" --threads "$threads" --rows "$rows" \
    --calibration-ids llm-table/calibration.ids --calibration-windows "$calibration_windows" \
    --json llm-table/reference.json
  /usr/bin/python3 - llm-table/table.json llm-table/reference.json <<'PY'
import json, sys
table, reference = (json.load(open(p)) for p in sys.argv[1:3])
# shrink recipe -> reference_forward.py row
names = {"base": "base", "fp16": "fp16", "bf16": "bf16", "w8": "int8", "w8a8": "w8a8", "w4-g64": "w4g64",
         "w4a8-g64": "w4a8g64", "w3-g64": "w3g64", "mag-50": "magnitude50", "mag-2:4": "magnitude24"}
for r in ("gptq-w4-g64", "gptq-w4-g64-act", "gptq-w3-g64", "gptq-w3-g64-act", "awq-w4-g64", "hqq-w4-g64",
          "sparsegpt-50", "sparsegpt-2:4"):
    names[r] = r
print(f"{'recipe':16s} {'shrink':>11s} {'PyTorch':>11s} {'gap':>9s} {'tokens/s':>9s} {'PyTorch t/s':>11s}")
for row in table["rows"]:
    ref = reference["rows"].get(names.get(row["recipe"], ""))
    if ref is None:
        continue
    gap = 100.0 * (row["perplexity"] / ref["perplexity"] - 1.0)
    print(f"{row['recipe']:16s} {row['perplexity']:11.4f} {ref['perplexity']:11.4f} {gap:+8.3f}% "
          f"{row['tokens_per_second']:9.1f} {ref['tokens_per_second']:11.1f}")
PY
fi
