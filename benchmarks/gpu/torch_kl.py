#!/usr/bin/env python3
"""PyTorch's soft-target KL + backward on the logits bench_gpu_kl.cpp uses (its shape 0), for the speed and memory ratios.

Times F.kl_div(F.log_softmax(s / T, -1), F.softmax(t / T, -1), reduction='batchmean') * T * T followed by backward()
with CUDA events (warm-up, then the median of --iterations runs), and measures the peak device memory the step takes
beyond its inputs (torch.cuda.reset_peak_memory_stats / max_memory_allocated minus what s and t hold; the gradient
s.grad is part of it, as shrink's gradient buffer is of shrink's side). Prints one JSON line and, with --out, writes it
there; run by benchmarks/gpu/device-check.sh on a machine with a GPU and PyTorch.

The logits equal bench_gpu_kl's bit for bit: row r repeats row r % 64 of a hashed block,
h = ((j + 131071 (r % 64) + 7919 salt) * 2654435761) mod 2^32, value = float32(h) * 2^-29 - 4 (uniform in [-4, 4)),
rounded to the dtype; salt 0 for the student, 1 for the teacher.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

DISTINCT_ROWS = 64


def logits(rows, cols, salt, dtype, device):
    r = torch.arange(DISTINCT_ROWS, device=device, dtype=torch.int64).unsqueeze(1)
    j = torch.arange(cols, device=device, dtype=torch.int64).unsqueeze(0)
    h = ((j + 131071 * r + 7919 * salt) * 2654435761) & 0xFFFFFFFF
    block = (h.to(torch.float32) * 2.0**-29 - 4.0).to(dtype)
    return block.repeat((rows + DISTINCT_ROWS - 1) // DISTINCT_ROWS, 1)[:rows].contiguous()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--cols", type=int, default=131072)
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16")
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--out", help="also write the JSON line to this file")
    args = parser.parse_args()

    device = torch.device("cuda")
    dtype = getattr(torch, args.dtype)
    s = logits(args.rows, args.cols, 0, dtype, device).requires_grad_()
    t = logits(args.rows, args.cols, 1, dtype, device)
    temperature = args.temperature

    def step():
        s.grad = None
        loss = F.kl_div(F.log_softmax(s / temperature, -1), F.softmax(t / temperature, -1),
                        reduction="batchmean") * temperature * temperature
        loss.backward()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.iterations):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))

    s.grad = None
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    inputs = torch.cuda.memory_allocated()  # s and t (and nothing else of ours)
    torch.cuda.reset_peak_memory_stats()
    loss = step()
    torch.cuda.synchronize()
    peak_extra = torch.cuda.max_memory_allocated() - inputs

    result = {
        "shape": [args.rows, args.cols],
        "dtype": args.dtype,
        "temperature": temperature,
        "median_ms": statistics.median(times),
        "min_ms": min(times),
        "iterations": args.iterations,
        "peak_extra_bytes": peak_extra,
        "grad_bytes": s.grad.numel() * s.grad.element_size(),
        "input_bytes": inputs,
        "loss": float(loss),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }
    line = json.dumps(result)
    print(line)
    if args.out:
        with open(args.out, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
