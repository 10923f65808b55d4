#!/usr/bin/env python3
"""Independent PyTorch forward of a llama-architecture GGUF (SmolLM2-135M-Instruct): the reference that the C++
example examples/llm/ is judged against (docs/llm.md).

Written from the model's definition, not from shrink: the GGUF is read and dequantized by PyPI `gguf` (gguf-py), the
forward is plain torch (Debian python3-torch), and each compression row is applied with PyTorch's own quantization
ops where they exist (observers for the qparams, fake_quantize_per_channel_affine for the rounding,
torch.nn.utils.prune's L1 rule for magnitude pruning, with ties ordered explicitly).

    python3 reference_forward.py --gguf MODEL.gguf --ids eval.ids --window 512 --windows 8 \
        --rows base,fp16,bf16,int8,w8a8,w4g64,w4a8g64,w3g64,magnitude50,magnitude24 --threads 2 --json out.json

eval.ids: the token ids as little-endian int32 (written by `shrink_llm --write-ids`). Perplexity is
exp(mean negative log-likelihood) of every token of each window given the tokens before it in that window
(window - 1 predictions per window, positions restart at 0 in each window).
"""
import argparse
import json
import math
import sys
import time

import pathlib

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "golden"))
import gen_awq  # noqa: E402  AWQ's search and clip search written from the paper (float64 errors)
import gen_gptq  # noqa: E402  the float64 GPTQ written from the paper, the unit tests' reference
import gen_hqq  # noqa: E402  HQQ per group (shrink's fractional zero point; hqq_paper: the same in float64)
import gen_sparsegpt  # noqa: E402  SparseGPT's Algorithm 1, float64


def field(reader, key):
    return reader.fields[key].contents()


def load(path):
    """Config and float32 weights ([out, in] for linears) of a llama GGUF."""
    reader = GGUFReader(path)
    arch = field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"reference_forward: {path}: architecture {arch!r}, expected 'llama'")
    config = {
        "blocks": int(field(reader, "llama.block_count")),
        "width": int(field(reader, "llama.embedding_length")),
        "ffn": int(field(reader, "llama.feed_forward_length")),
        "heads": int(field(reader, "llama.attention.head_count")),
        "kv_heads": int(field(reader, "llama.attention.head_count_kv")),
        "rope_base": float(field(reader, "llama.rope.freq_base")),
        "eps": float(field(reader, "llama.attention.layer_norm_rms_epsilon")),
    }
    weights = {}
    for t in reader.tensors:
        # gguf-py gives the row-major shape (outermost first): a linear is [out, in], as torch.
        weights[t.name] = torch.from_numpy(np.array(dequantize(t.data, t.tensor_type), dtype=np.float32))  # a writable copy
    return config, weights


LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def rms_norm(x, gamma, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma


def rope(x, base):
    """Rotary embedding over adjacent pairs (x[2i], x[2i+1]): llama.cpp's converter permutes the q/k rows to
    this order. x: [heads, T, d]."""
    d = x.shape[-1]
    t = x.shape[-2]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angles = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(angles).float(), torch.sin(angles).float()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


ACTIVATION_JITTER = 0.0  # --activation-jitter: relative change of activations before their quantization


def per_token_fake_quant(x):
    """W8A8's activations: int8 symmetric per token, the scale from the row's |x| maximum (PyTorch's observer)."""
    if ACTIVATION_JITTER:
        x = x * (1.0 + ACTIVATION_JITTER)
    obs = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8,
                                                         qscheme=torch.per_channel_symmetric)
    obs(x)
    scale, zp = obs.calculate_qparams()
    return torch.fake_quantize_per_channel_affine(x, scale.float(), zp.int(), 0, -128, 127)


def per_group_fake_quant(x, group):
    """W4A8's activations: int8 symmetric per token and group of `group` inputs (each group a row of its own)."""
    t, k = x.shape
    return per_token_fake_quant(x.reshape(t * (k // group), group)).reshape(t, k)


STAGES = ("attention", "attention_output", "ffn", "ffn_down")  # the linear inputs of a block, in forward order
STAGE_LINEARS = {"attention": ("attn_q", "attn_k", "attn_v"), "attention_output": ("attn_output",),
                 "ffn": ("ffn_gate", "ffn_up"), "ffn_down": ("ffn_down",)}


def block_forward(config, w, b, x, act_quant=False, tap=None, stop_after=None):
    """Block b on hidden states x [T, width]; returns the new x. tap(stage, input) sees each linear input; with
    stop_after the pass ends right after that stage's input was seen (sequential calibration)."""
    width, heads, kv = config["width"], config["heads"], config["kv_heads"]
    head_dim = width // heads
    t = x.shape[0]
    mask = torch.full((t, t), float("-inf")).triu(1)

    def linear(h, name):
        if act_quant is True:
            h = per_token_fake_quant(h)
        elif act_quant:  # a group size
            h = per_group_fake_quant(h, act_quant)
        return h @ w[name].t()

    def seen(stage, h):
        if tap is not None:
            tap(stage, h)
        return stop_after == stage

    p = f"blk.{b}."
    h = rms_norm(x, w[p + "attn_norm.weight"], config["eps"])
    if seen("attention", h):
        return x
    q = linear(h, p + "attn_q.weight").view(t, heads, head_dim).transpose(0, 1)
    k = linear(h, p + "attn_k.weight").view(t, kv, head_dim).transpose(0, 1)
    v = linear(h, p + "attn_v.weight").view(t, kv, head_dim).transpose(0, 1)
    q, k = rope(q, config["rope_base"]), rope(k, config["rope_base"])
    k = k.repeat_interleave(heads // kv, dim=0)  # query head h reads KV head h // (heads / kv)
    v = v.repeat_interleave(heads // kv, dim=0)
    scores = q @ k.transpose(1, 2) / math.sqrt(head_dim) + mask
    attn = (torch.softmax(scores, dim=-1) @ v).transpose(0, 1).reshape(t, width)
    if seen("attention_output", attn):
        return x
    x = x + linear(attn, p + "attn_output.weight")
    h = rms_norm(x, w[p + "ffn_norm.weight"], config["eps"])
    if seen("ffn", h):
        return x
    product = torch.nn.functional.silu(linear(h, p + "ffn_gate.weight")) * linear(h, p + "ffn_up.weight")
    if seen("ffn_down", product):
        return x
    return x + linear(product, p + "ffn_down.weight")


def forward_nll(config, w, ids, act_quant=False):
    """Sum of the negative log-likelihoods of ids[1:] given the prefix, and their count, for one window."""
    t = ids.shape[0]
    x = w["token_embd.weight"][ids]
    for b in range(config["blocks"]):
        x = block_forward(config, w, b, x, act_quant)
    x = rms_norm(x, w["output_norm.weight"], config["eps"])
    head = w.get("output.weight", w["token_embd.weight"])  # tied embeddings when there is no output.weight
    logits = x[:-1] @ head.t()
    nll = torch.nn.functional.cross_entropy(logits.double(), ids[1:], reduction="sum")
    return float(nll), t - 1


HESSIAN_JITTER = (0.0, 0)  # --hessian-jitter EPS --jitter-seed S: H_ij ← H_ij · (1 + EPS·u_ij), u uniform in [−1, 1]


def jittered(hessian):
    """The Hessian with a symmetric relative perturbation of float32 rounding's order (HESSIAN_JITTER), to measure how
    far a row moves when its statistics move that little: the spread a float-order difference can cause."""
    eps, seed = HESSIAN_JITTER
    if eps == 0.0:
        return hessian
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(hessian.shape, generator=g, dtype=torch.float64) * 2.0 - 1.0
    u = torch.tril(u) + torch.tril(u, -1).t()
    return hessian * (1.0 + eps * u)


def sequential(config, base, calibration, compress, stage_wise=False):
    """GPTQ's sequential calibration ("true sequential"): the calibration windows (a list of id tensors) go through
    the blocks one by one; in each block, each linear input's statistics come from the block with its earlier linears
    already compressed. Per linear (stage_wise False): H = (2/n) Σ xᵀx (float64) and compress(weight, H) gives that
    input's linears' new weights. Per stage (stage_wise True): compress(w, base, b, stage, x) with x the stage's input
    rows [n, in] (float32) changes the weights w itself (AWQ: a search shared by the linears, a norm folded).
    Returns the weights and the seconds spent in the passes and in compress()."""
    w = dict(base)
    hidden = [w["token_embd.weight"][ids] for ids in calibration]
    passes = method = 0.0
    for b in range(config["blocks"]):
        for stage in STAGES:
            start = time.perf_counter()
            sums = {"rows": []}

            def tap(seen_stage, h, stage=stage):
                if seen_stage != stage:
                    return
                if stage_wise:
                    sums["rows"].append(h.clone())
                    return
                hd = h.double()
                sums["xx"] = sums.get("xx", 0.0) + hd.t() @ hd
                sums["n"] = sums.get("n", 0) + hd.shape[0]

            for x in hidden:
                block_forward(config, w, b, x, tap=tap, stop_after=stage)
            if not stage_wise:
                hessian = jittered((2.0 / sums["n"]) * sums["xx"])
            passes += time.perf_counter() - start
            start = time.perf_counter()
            if stage_wise:
                compress(w, base, b, stage, torch.cat(sums["rows"]))
            else:
                for name in STAGE_LINEARS[stage]:
                    key = f"blk.{b}.{name}.weight"
                    w[key] = compress(base[key], hessian)
            method += time.perf_counter() - start
        start = time.perf_counter()
        hidden = [block_forward(config, w, b, x) for x in hidden]
        passes += time.perf_counter() - start
    return w, passes, method


# ---- the compression rows: each maps a linear's float weight [out, in] to the weight the forward uses ----------

def observer_fake_quant(w, dtype, qscheme, qmin, qmax):
    """Per-row qparams from PyTorch's PerChannelMinMaxObserver, rounding by fake_quantize_per_channel_affine."""
    obs = torch.ao.quantization.PerChannelMinMaxObserver(ch_axis=0, dtype=dtype, qscheme=qscheme,
                                                         quant_min=qmin, quant_max=qmax)
    obs(w)
    scale, zp = obs.calculate_qparams()
    return torch.fake_quantize_per_channel_affine(w, scale.float(), zp.int(), 0, qmin, qmax)


def int8_per_channel(w):
    return observer_fake_quant(w, torch.qint8, torch.per_channel_symmetric, -128, 127)


def uint_per_group(bits, group):
    def apply(w):
        rows = w.reshape(-1, group)  # each group of `group` inputs of a row is one observer channel
        q = observer_fake_quant(rows, torch.quint8, torch.per_channel_affine, 0, 2**bits - 1)
        return q.reshape(w.shape)
    return apply


# Magnitude pruning: torch.nn.utils.prune's L1 rule (the round(amount * n) smallest |w|) and the usual 2:4 rule (the
# two largest |w| of each run of four inputs), with ties ordered explicitly: among equal |w| the lower index is kept
# (shrink's documented rule; torch.topk leaves the order of ties unspecified). Weights dequantized from Q4_1 take 16
# values per block of 32, so ties are common and the order decides which weights go.

def magnitude_unstructured(amount):
    def apply(w):
        flat = w.flatten()
        k = round(amount * flat.numel())
        reversed_order = torch.sort(flat.abs().flip(0), stable=True).indices[:k]  # higher index first among ties
        mask = torch.ones_like(flat, dtype=torch.bool)
        mask[flat.numel() - 1 - reversed_order] = False
        return (flat * mask).reshape(w.shape)
    return apply


def magnitude_nm(n, m):
    def apply(w):
        groups = w.reshape(-1, m)
        keep = torch.sort(-groups.abs(), dim=1, stable=True).indices[:, :n]  # lower index first among ties
        mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, keep, True)
        return (groups * mask).reshape(w.shape)
    return apply


def gptq_row(bits, act_order):
    """GPTQ, affine, groups of 64 (act_order: groups in processing order, read back through g_idx), damping 0.01,
    blocks of 128: tests/golden/gen_gptq.py's implementation; the weight dequantized as shrink does,
    float(q − zp)·s in float32."""
    def apply(w, hessian):
        q, scale, zero, _, _, g_idx = gen_gptq.gptq(w, hessian, bits, False, 64, act_order, False)
        g = torch.from_numpy(np.asarray(g_idx))
        return (q - zero[:, g]).float() * scale[:, g]
    return apply


def sparsegpt_row(nm):
    """SparseGPT, 50% per row within mask blocks of 128 (nm: n of every m instead), damping 0.01, blocks of 128:
    tests/golden/gen_sparsegpt.py's implementation; the kept weights (float64) rounded to float32."""
    def apply(w, hessian):
        sparsity = 0.5 if nm is None else 0.0
        _, w_hat, _, _, _, _ = gen_sparsegpt.sparsegpt(w, hessian, sparsity=sparsity, nm=nm)
        return w_hat.float()
    return apply


# AWQ as the LLM example applies it (examples/llm/recipes.hpp): per linear input, one search of α (grid of 20, s =
# mean|x|^α, no duo scaling) for the linears reading it; the clip search for each of them but q and k; 4-bit affine
# groups of 64; 1/s folded into the norm before q/k/v and gate/up, kept as an input scale before o and down. The
# errors are gen_awq's mean((X·ΔWᵀ)²) computed on R of X = QR (RᵀR = XᵀX: the same means up to the factor n / in,
# which no argmin sees), so a search costs in² per output, not n·in.
AWQ_NORM = {"attention": "attn_norm", "ffn": "ffn_norm"}


def awq_stage(w, base, b, stage, x):
    names = STAGE_LINEARS[stage]
    weights = [base[f"blk.{b}.{name}.weight"] for name in names]
    bits, symmetric, group, grid = 4, False, 64, 20
    sx = gen_awq.mean_abs(x)
    r = torch.linalg.qr(x.double(), mode="r").R
    losses = []
    for i in range(grid):
        s = gen_awq.scales(sx, None, i / grid)
        losses.append(sum(gen_awq.output_error(r, wk, gen_awq.rtn(wk * s, bits, symmetric, group)[3].double() /
                                               s.double()) for wk in weights))
    best = min(range(grid), key=lambda i: (losses[i], i))
    s = gen_awq.scales(sx, None, best / grid)
    for name, wk in zip(names, weights):
        clip = None
        if name not in ("attn_q", "attn_k"):
            clip = gen_awq.clip_search(wk, r, s, bits, symmetric, group)
        w_hat = gen_awq.rtn(wk * s, bits, symmetric, group, clip)[3]  # dequantize(Q(W·diag(s))), float32
        if stage in AWQ_NORM:
            w[f"blk.{b}.{name}.weight"] = w_hat  # the norm below divides the input by s
        else:
            w[f"blk.{b}.{name}.weight"] = w_hat / s  # the layer's input scale: Ŵ·(x / s)
    if stage in AWQ_NORM:
        key = f"blk.{b}.{AWQ_NORM[stage]}.weight"
        w[key] = base[key] / s


def hqq_row(bits, group, paper=False):
    """HQQ per group, no calibration: gen_hqq.hqq_fractional (the paper's fractional zero point with the min/max scale,
    in shrink's float32 operation order: what shrink's hqq-w4-g64 computes), the weight dequantized as shrink does,
    (float(q) − z)·s in float32; paper: gen_hqq.hqq_paper, the same form computed in float64 (for comparison)."""
    def apply(w):
        if paper:
            return gen_hqq.hqq_paper(w, bits, group).float()
        q, scale, zero = gen_hqq.hqq_fractional(w, bits, group)[:3]
        g = torch.arange(w.shape[1]) // group
        return (q.float() - zero[:, g]) * scale[:, g]
    return apply


# Rows calibrated sequentially on --calibration-ids (shrink_llm's recipe names): per linear (weight, H) -> weight, or
# per stage (STAGE_WISE_ROWS).
SEQUENTIAL_ROWS = {
    "gptq-w4-g64": gptq_row(4, False),
    "gptq-w4-g64-act": gptq_row(4, True),
    "gptq-w3-g64": gptq_row(3, False),
    "gptq-w3-g64-act": gptq_row(3, True),
    "awq-w4-g64": awq_stage,
    "sparsegpt-50": sparsegpt_row(None),
    "sparsegpt-2:4": sparsegpt_row((2, 4)),
}
STAGE_WISE_ROWS = ("awq-w4-g64",)

ROWS = {
    "base": (None, False),
    "fp16": (lambda w: w.half().float(), False),
    "bf16": (lambda w: w.bfloat16().float(), False),
    "int8": (int8_per_channel, False),
    "w8a8": (int8_per_channel, True),
    "w4g64": (uint_per_group(4, 64), False),
    "w4a8g64": (uint_per_group(4, 64), 64),
    "w3g64": (uint_per_group(3, 64), False),
    "magnitude50": (magnitude_unstructured(0.5), False),
    "magnitude24": (magnitude_nm(2, 4), False),
    "hqq-w4-g64": (hqq_row(4, 64), False),
    "hqq-w4-g64-paper": (hqq_row(4, 64, paper=True), False),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--ids", required=True, help="token ids, little-endian int32")
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--windows", type=int, default=8)
    parser.add_argument("--rows", default=",".join(ROWS), help="rows: " + ", ".join(list(ROWS) + list(SEQUENTIAL_ROWS)))
    parser.add_argument("--calibration-ids", help="calibration token ids (little-endian int32) for the sequential rows")
    parser.add_argument("--calibration-windows", type=int, default=4)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--activation-jitter", type=float, default=0.0,
                        help="scale W8A8's activations by (1 + this) before quantizing them: how much the row moves "
                             "when its inputs move by float rounding's order (e.g. 1e-6)")
    parser.add_argument("--hessian-jitter", type=float, default=0.0,
                        help="multiply each Hessian entry H_ij (symmetric) by (1 + this·u), u uniform in [-1, 1], "
                             "for the sequential per-linear rows: how much a row moves when its statistics move by "
                             "float rounding's order (e.g. 1e-7)")
    parser.add_argument("--jitter-seed", type=int, default=1, help="the seed of --hessian-jitter's u")
    args = parser.parse_args()
    global ACTIVATION_JITTER, HESSIAN_JITTER
    ACTIVATION_JITTER = args.activation_jitter
    HESSIAN_JITTER = (args.hessian_jitter, args.jitter_seed)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    rows = args.rows.split(",")
    for row in rows:
        if row not in ROWS and row not in SEQUENTIAL_ROWS:
            sys.exit(f"reference_forward: --rows: unknown row {row!r}; known: "
                     f"{', '.join(list(ROWS) + list(SEQUENTIAL_ROWS))}")
        if row in SEQUENTIAL_ROWS and not args.calibration_ids:
            sys.exit(f"reference_forward: row {row!r} needs --calibration-ids")

    ids = torch.from_numpy(np.fromfile(args.ids, dtype="<i4").astype(np.int64))
    needed = args.window * args.windows
    if ids.numel() < needed:
        sys.exit(f"reference_forward: {args.ids}: {ids.numel()} ids, fewer than {args.windows} windows of {args.window}")
    calibration = []
    if args.calibration_ids:
        cal = torch.from_numpy(np.fromfile(args.calibration_ids, dtype="<i4").astype(np.int64))
        if cal.numel() < args.window * args.calibration_windows:
            sys.exit(f"reference_forward: {args.calibration_ids}: {cal.numel()} ids, fewer than "
                     f"{args.calibration_windows} windows of {args.window}")
        calibration = [cal[i * args.window:(i + 1) * args.window] for i in range(args.calibration_windows)]
    config, base = load(args.gguf)
    results = {"threads": torch.get_num_threads(), "window": args.window, "windows": args.windows,
               "torch": torch.__version__, "rows": {}}
    for row in rows:
        extra = {}
        if row in SEQUENTIAL_ROWS:
            with torch.no_grad():
                weights, passes, method = sequential(config, base, calibration, SEQUENTIAL_ROWS[row],
                                                     stage_wise=row in STAGE_WISE_ROWS)
            transform, act_quant = None, False
            extra = {"calibration_seconds": passes, "compress_seconds": method}
        else:
            transform, act_quant = ROWS[row]
            weights = dict(base)
        if transform is not None:
            for b in range(config["blocks"]):
                for name in LINEARS:
                    key = f"blk.{b}.{name}.weight"
                    weights[key] = transform(base[key])
        start = time.perf_counter()
        total, count = 0.0, 0
        with torch.no_grad():
            for i in range(args.windows):
                nll, n = forward_nll(config, weights, ids[i * args.window:(i + 1) * args.window], act_quant)
                total, count = total + nll, count + n
        seconds = time.perf_counter() - start
        ppl = math.exp(total / count)
        results["rows"][row] = {"perplexity": ppl, "nll_sum": total, "predictions": count, "seconds": seconds,
                                "tokens_per_second": args.window * args.windows / seconds, **extra}
        print(f"{row:12s} perplexity {ppl:10.4f}   {args.window * args.windows / seconds:8.1f} tokens/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
