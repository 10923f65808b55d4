#!/usr/bin/env python3
"""Runs the `shrink` command end to end on a real checkpoint (tests/cli/CMakeLists.txt runs it as the CTest test
cli/real_checkpoint): sentence-transformers' all-MiniLM-L6-v2, a Hugging Face BertModel in FP32 (22.7M parameters),
which scripts/fetch-test-models.sh extracts into the set-up's cache folder.

usage: real_checkpoint_check.py SHRINK WORK_DIR [MODEL_DIR]
On a copy of MODEL_DIR in WORK_DIR: inspects it; quantizes it (int8 per channel, int4 per group of 128 affine),
dequantizes and compares it with the original (which tensors changed, the SQNR of those); prunes it (50% magnitude,
2:4) and checks each weight's sparsity; exports it with --format compressed-tensors and decompresses that with the
package, bit for bit against `shrink dequantize`; loads the original and every restored or pruned checkpoint into
transformers.BertModel and compares the mean-pooled sentence embeddings of fixed sentences (cosine); loads every file
written with Python's safetensors. The thresholds below are the figures measured on this model (printed), with a
margin.

Torch comes from Debian (python3-torch 1.13): compressed-tensors needs the stand-ins of compressed_tensors_check.py
before its import. Exits 77 (CTest: skipped) when MODEL_DIR or a package is missing, 1 under SHRINK_PYTHON_STRICT=1."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

STRICT = os.environ.get("SHRINK_PYTHON_STRICT") == "1"


def skip(why):
    print(f"real_checkpoint_check.py: skipped: {why}")
    sys.exit(1 if STRICT else 77)


try:
    import numpy as np
    import torch

    if not hasattr(torch, "float8_e4m3fn"):  # the stand-ins of compressed_tensors_check.py
        torch.float8_e4m3fn = torch.float16
    if not hasattr(torch, "compile"):
        torch.compile = lambda function=None, **options: function if function is not None else (lambda f: f)
    import compressed_tensors
    import transformers
    from compressed_tensors.compressors import ModelCompressor
    from safetensors.numpy import load_file
    from transformers import AutoTokenizer, BertModel
except ImportError as error:
    skip(f"{error} (scripts/python-env.sh torch)")

# The files scripts/fetch-test-models.sh extracts.
MODEL_FILES = ["model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]

# The Linear layers of BertModel: what quantize and prune take by default. Everything else (the three embeddings,
# the LayerNorms, the biases, the int64 position_ids) is kept.
LINEAR = re.compile(r"^(encoder\.layer\.\d+\.(attention\.self\.(query|key|value)|attention\.output\.dense|"
                    r"intermediate\.dense|output\.dense)|pooler\.dense)\.weight$")

# Thresholds: the figures measured on all-MiniLM-L6-v2 (docs/model-files.md), less a margin; shrink writes the same
# bytes on every machine, the forward pass varies in the 6th digit. SQNR over the changed tensors (overall) and of the
# worst tensor, in dB; the lowest cosine of a sentence embedding to the original's.
# - int8 per channel: 40.06 dB overall, 33.49 dB worst (layer 0's output.dense, whose rows hold outliers); cosine
#   0.9995 at least.
# - int4 per group of 128, affine: 19.42 dB, worst 18.48 dB (16 levels over a group's min-max range, about +-2.7
#   sigma for 128 near-Gaussian values, give about 19.7 dB); cosine 0.9515.
# - half of each Linear weight pruned, without retraining, costs this small model much more: cosine 0.685
#   (magnitude), 0.560 (2:4).
INT8 = ["--dtype", "int8"]  # symmetric, per output channel: the defaults
INT4 = ["--dtype", "int4", "--scheme", "affine", "--granularity", "group", "--group-size", "128"]
RECIPES = {  # name: (quantize flags, overall SQNR above, worst tensor SQNR above, lowest cosine above)
    "int8-channel": (INT8, 38.0, 31.0, 0.999),
    "int4-group128-affine": (INT4, 18.0, 17.0, 0.94),
}
PRUNINGS = {  # name: (prune flags, lowest cosine above)
    "magnitude-50": (["--method", "magnitude", "--sparsity", "0.5"], 0.6),
    "nm-2:4": (["--method", "nm", "--n", "2", "--m", "4"], 0.5),
}
SENTENCES = [
    "The cat sits on the mat.",
    "A quick brown fox jumps over the lazy dog.",
    "Quantization stores each weight in fewer bits.",
    "How far is the train station from here?",
    "She plays the violin in an orchestra every weekend.",
    "Stock markets fell sharply after the announcement.",
    "Pruning removes the weights of smallest magnitude.",
    "I forgot my umbrella and got soaked on the way home.",
]


def fail(message):
    print(f"real_checkpoint_check.py: FAILED: {message}")
    sys.exit(1)


def note(message):
    print(f"real_checkpoint_check.py: {message}", flush=True)


class Shrink:
    def __init__(self, path, work):
        self.path, self.work = path, work

    def __call__(self, *args):
        """Runs `shrink ARGS`, the paths relative to the work directory; returns its JSON document with --json."""
        result = subprocess.run([self.path, *args], cwd=self.work, capture_output=True, text=True)
        if result.returncode != 0:
            fail(f"shrink {' '.join(args)}: exit {result.returncode}: {result.stderr.strip()}")
        return json.loads(result.stdout) if "--json" in args else None


def check_inspect(shrink, name, reference):
    """`shrink inspect --json` lists every tensor of the file, with the dtype and shape Python's safetensors reads."""
    doc = shrink("inspect", name, "--json")
    listed = {t["name"]: t for t in doc["tensors"]}
    if sorted(listed) != sorted(reference):
        fail(f"inspect {name}: tensors {sorted(set(listed) ^ set(reference))} differ from safetensors'")
    numpy_dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "I8": np.int8, "U8": np.uint8}
    for tensor_name, value in reference.items():
        t = listed[tensor_name]
        if t["shape"] != list(value.shape) or numpy_dtypes.get(t["dtype"]) != value.dtype:
            fail(f"inspect {name}: {tensor_name} is {t['dtype']} {t['shape']}: expected {value.dtype} {value.shape}")
        if "quantization" not in t and t["zeros"] != int(np.count_nonzero(value == 0)):  # else: zeros once dequantized
            fail(f"inspect {name}: {tensor_name} has {t['zeros']} zeros: safetensors reads {np.count_nonzero(value == 0)}")
    return listed


def check_selection(label, tensors, action, linear):
    """The report of quantize or prune: every Linear weight taken, every other tensor copied, each with a note."""
    taken = {t["name"] for t in tensors if t["action"] == action}
    if taken != linear:
        fail(f"{label}: {action} {sorted(taken ^ linear)[:6]}...: expected exactly the {len(linear)} Linear weights")
    for t in tensors:
        if t["action"] == "copied" and t["name"] != "embeddings.position_ids" and "kept by default" not in (t["note"] or ""):
            fail(f"{label}: {t['name']} copied with note {t['note']!r}: expected 'kept by default'")


def check_untouched(label, original, written, linear):
    for name, value in original.items():
        if name not in linear and written[name].tobytes() != value.tobytes():
            fail(f"{label}: {name} changed: expected it copied as it was")


def sentence_embeddings(model_dir, tokens):
    model, info = BertModel.from_pretrained(model_dir, local_files_only=True, output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
        fail(f"BertModel.from_pretrained({model_dir}): {info}")
    model.eval()
    with torch.no_grad():
        hidden = model(**tokens).last_hidden_state
    mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return ((hidden * mask).sum(1) / mask.sum(1)).numpy().astype(np.float64)  # mean pooling, as the model's 1_Pooling


def cosines(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main():
    start = time.monotonic()
    if len(sys.argv) not in (3, 4):
        fail("usage: real_checkpoint_check.py SHRINK WORK_DIR [MODEL_DIR]")
    shrink_path, work = sys.argv[1], os.path.abspath(sys.argv[2])
    model_source = sys.argv[3] if len(sys.argv) == 4 else ""
    if not model_source:
        skip("no model directory (configure with -DSHRINK_TEST_MODEL_DIR=$(scripts/fetch-test-models.sh))")
    missing = [f for f in MODEL_FILES if not os.path.isfile(os.path.join(model_source, f))]
    if missing:
        skip(f"{model_source} lacks {', '.join(missing)} (scripts/fetch-test-models.sh)")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    shutil.copytree(model_source, os.path.join(work, "model"))
    shrink = Shrink(os.path.abspath(shrink_path), work)
    written = []  # every safetensors file written, loaded by Python's safetensors at the end

    original = load_file(os.path.join(work, "model", "model.safetensors"))
    linear = {name for name in original if LINEAR.match(name)}
    if len(linear) != 37:
        fail(f"{len(linear)} Linear weights: expected 37 (6 layers x 6 + the pooler)")
    check_inspect(shrink, "model", original)
    parameters = sum(v.size for v in original.values() if v.dtype == np.float32)
    note(f"all-MiniLM-L6-v2: {len(original)} tensors, {parameters / 1e6:.1f}M parameters, {len(linear)} Linear weights")

    tokenizer = AutoTokenizer.from_pretrained(os.path.join(work, "model"), local_files_only=True,
                                              clean_up_tokenization_spaces=True)
    tokens = tokenizer(SENTENCES, padding=True, return_tensors="pt")
    reference = sentence_embeddings(os.path.join(work, "model"), tokens)

    def check_embeddings(label, directory, threshold):
        # The tokenizer files travel with the checkpoint directory: the output's own tokenizer gives the same ids.
        ids = AutoTokenizer.from_pretrained(os.path.join(work, directory), local_files_only=True,
                                            clean_up_tokenization_spaces=True)(SENTENCES, padding=True)["input_ids"]
        if ids != tokens["input_ids"].tolist():
            fail(f"{label}: the tokenizer of {directory} gives other token ids")
        cos = cosines(reference, sentence_embeddings(os.path.join(work, directory), tokens))
        note(f"{label}: sentence embeddings' cosine to the original's: min {cos.min():.6f}, mean {cos.mean():.6f}")
        if cos.min() <= threshold:
            fail(f"{label}: a sentence embedding's cosine to the original's is {cos.min():.6f}: expected > {threshold}")

    # Quantize, dequantize, compare, reload.
    restored = {}
    for label, (flags, overall_min, worst_min, cosine_min) in RECIPES.items():
        q, d = f"q-{label}", f"d-{label}"
        report = shrink("quantize", "model", q, *flags, "--json")
        check_selection(f"quantize {label}", report["tensors"], "quantized", linear)
        if report["totals"]["kept_by_default"] != len(original) - len(linear) - 1:  # all but position_ids (int64)
            fail(f"quantize {label}: totals {report['totals']}")
        check_inspect(shrink, q, load_file(os.path.join(work, q, "model.safetensors")))
        dequantized = shrink("dequantize", q, d, "--json")
        if set(dequantized["dequantized"]) != linear or set(dequantized["dtypes"].values()) != {"F32"}:
            fail(f"dequantize {label}: {dequantized['dequantized']} as {dequantized['dtypes']}")
        restored[label] = load_file(os.path.join(work, d, "model.safetensors"))
        check_untouched(f"dequantize {label}", original, restored[label], linear)
        compared = shrink("compare", "model", d, "--json")
        changed = {t["name"] for t in compared["tensors"] if t["changed"]}
        if changed != linear or compared["only_in_a"] or compared["only_in_b"] or compared["skipped"]:
            fail(f"compare {label}: changed {sorted(changed ^ linear)}, {compared['only_in_a']}, "
                 f"{compared['only_in_b']}, {compared['skipped']}")
        worst = min((t for t in compared["tensors"] if t["changed"]), key=lambda t: t["sqnr_db"])
        overall = compared["overall"]["sqnr_db"]
        note(f"{label}: SQNR over the {len(changed)} changed tensors {overall:.2f} dB, worst {worst['sqnr_db']:.2f} dB "
             f"({worst['name']}); {os.path.getsize(os.path.join(work, 'model', 'model.safetensors')) / 2**20:.1f} -> "
             f"{os.path.getsize(os.path.join(work, q, 'model.safetensors')) / 2**20:.1f} MiB")
        if overall <= overall_min or worst["sqnr_db"] <= worst_min:
            fail(f"{label}: SQNR {overall:.2f} dB overall, {worst['sqnr_db']:.2f} dB for {worst['name']}: expected "
                 f"> {overall_min} and > {worst_min}")
        check_embeddings(label, d, cosine_min)
        written += [q, d]

    # Prune: each Linear weight's sparsity, read back by inspect; everything else untouched.
    for label, (flags, cosine_min) in PRUNINGS.items():
        p = f"p-{label.replace(':', '')}"
        report = shrink("prune", "model", p, *flags, "--json")
        check_selection(f"prune {label}", report["tensors"], "pruned", linear)
        pruned = load_file(os.path.join(work, p, "model.safetensors"))
        check_untouched(f"prune {label}", original, pruned, linear)
        listed = check_inspect(shrink, p, pruned)
        for name in sorted(linear):
            value, elements = pruned[name], original[name].size
            if listed[name]["zeros"] != elements // 2 or listed[name]["sparsity"] != 0.5:
                fail(f"prune {label}: {name}: {listed[name]['zeros']} zeros of {elements}: expected half")
            kept = value != 0
            if np.any(value[kept] != original[name][kept]):
                fail(f"prune {label}: {name}: a weight kept was changed")
            if label == "nm-2:4":
                if np.any(kept.reshape(-1, 4).sum(axis=1) > 2):
                    fail(f"prune {label}: {name}: a group of 4 along the last dimension keeps more than 2")
            else:
                if np.abs(original[name][~kept]).max() > np.abs(original[name][kept]).min():
                    fail(f"prune {label}: {name}: a weight pruned is larger than one kept")
        note(f"prune {label}: each of the {len(linear)} Linear weights at sparsity 0.5000 (inspect), "
             f"the other {len(original) - len(linear)} tensors untouched")
        check_embeddings(f"prune {label}", p, cosine_min)
        written.append(p)

    # --format compressed-tensors: the config, and the package's decompression against shrink's own dequantization.
    for label, (flags, _, _, _) in RECIPES.items():
        ct = f"ct-{label}"
        shrink("quantize", "model", ct, "--format", "compressed-tensors", *flags)
        with open(os.path.join(work, ct, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(work, "model", "config.json")) as f:
            source_config = json.load(f)
        qconfig = config.pop("quantization_config", None)
        if config != source_config or qconfig is None:
            fail(f"{ct}/config.json: expected the input's config.json with a quantization_config")
        if qconfig["quant_method"] != "compressed-tensors" or qconfig["format"] != "pack-quantized":
            fail(f"{ct}: quantization_config {qconfig}")
        if qconfig["ignore"] != []:  # every Linear layer of BertModel is quantized; embeddings are no Linear layers
            fail(f"{ct}: ignore = {qconfig['ignore']}: expected []")
        compressor = ModelCompressor.from_compression_config(qconfig)
        scheme = compressor.quantization_config.config_groups["group_0"]
        exported = os.path.join(work, ct, "model.safetensors")
        state = {name: torch.from_numpy(value) for name, value in load_file(exported).items()}
        modules = sorted(name[: -len(".weight_scale")] for name in state if name.endswith(".weight_scale"))
        if {m + ".weight" for m in modules} != linear:
            fail(f"{ct}: weight_scale for {modules}: expected the Linear layers")
        if scheme.weights.symmetric:
            qc = compressor.quantization_compressor
            qc = qc["pack-quantized"] if isinstance(qc, dict) else qc
            decompressed = {m: w["weight"] for m, w in qc.decompress_from_state_dict(state, {m: scheme for m in modules})}
        else:  # 0.12.2 refuses packed zero points on decompression: compressed_tensors_check.py's 0.13 stand-in
            from compressed_tensors_check import decompress_packed_zero_points
            decompressed = {m: decompress_packed_zero_points(state, m, scheme.weights) for m in modules}
        for module in modules:
            mine = decompressed[module].to(torch.float32).numpy()
            theirs = restored[label][module + ".weight"]
            if mine.shape != theirs.shape or not np.array_equal(mine.view(np.uint32), theirs.view(np.uint32)):
                fail(f"{ct}: {module}: compressed-tensors' decompression differs from `shrink dequantize`")
        for name, value in original.items():
            if name not in linear and state[name].numpy().tobytes() != value.tobytes():
                fail(f"{ct}: {name} was not copied unchanged")
        note(f"{ct}: compressed-tensors {compressed_tensors.__version__} decompresses the {len(modules)} weights "
             f"bit for bit as `shrink dequantize`, ignore []")
        written.append(ct)

    for directory in written:
        load_file(os.path.join(work, directory, "model.safetensors"))  # raises on a file it cannot read
    note(f"Python's safetensors loads all {len(written)} files written")
    note(f"passed in {time.monotonic() - start:.1f} s (transformers {transformers.__version__}, torch {torch.__version__})")
    shutil.rmtree(work, ignore_errors=True)  # about 700 MB of checkpoints


if __name__ == "__main__":
    main()
