# A Python model of the GPU threshold's counting (include/shrink/cuda/threshold.cuh, float keys): the warps' tile
# walk with its rotation, the rounds of warp aggregation, packed counters whose wraps are repaid in the global
# histogram (each block's atomics applied in a random order), windows, the bucket choice; scaled down (4-bit counters,
# 4-lane warps) so that counters wrap on small inputs. Checked against a sort; prints "ok <cases>". No GPU needed:
# python3 benchmarks/notes/gpu_threshold_model.py
import random
import numpy as np

H = 4                  # bits a packed counter (16 on the device)
M = 1 << H
WS = 4                 # lanes a warp (32)
L = 2                  # elements a unit (4 or 8)
UNROLL = 2
ROUNDS = 2
assert WS * L < M      # aggregated count < counter modulus (256 < 65536 on the device)


def add(table, glob, b, count):
    high = b & 1
    w = b >> 1
    old = int(table[w])
    table[w] = (old + ((count << H) if high else count)) % (1 << (2 * H))
    if high:
        if (old >> H) + count > M - 1:
            glob[b] += M
    elif (old & (M - 1)) + count > M - 1:
        glob[b] += M
        glob[b + 1] += (M - 1) if (old >> H) == M - 1 else -1


def count_elements(ops, buckets, counted):
    # buckets: [WS][L], counted: list of WS bitmasks. Appends (bucket, count) adds in issue order per lane.
    counted = list(counted)
    for _ in range(ROUNDS):
        lanes = [c != 0 for c in counted]
        if not any(lanes):
            return
        leader = lanes.index(True)
        first = [0] * WS
        for i in range(WS):
            for l in range(L - 1, -1, -1):
                if (counted[i] >> l) & 1:
                    first[i] = buckets[i][l]
        lead = first[leader]
        same = [0] * WS
        for i in range(WS):
            for l in range(L):
                if (counted[i] >> l) & 1 and buckets[i][l] == lead:
                    same[i] |= 1 << l
        total = sum(bin(s).count("1") for s in same)
        assert total >= 1
        ops.append((lead, total))
        for i in range(WS):
            counted[i] &= ~same[i]
    for i in range(WS):
        run_bucket, run = 0, 0
        for l in range(L):
            if (counted[i] >> l) & 1:
                if run and buckets[i][l] != run_bucket:
                    ops.append((run_bucket, run))
                    run = 0
                run_bucket = buckets[i][l]
                run += 1
        if run:
            ops.append((run_bucket, run))


def count_pass(tensors, blocks, threads, digit, inside, window_begin, window_buckets, hist, seen):
    # tensors: list of (keys np.array, keep np.array of bool, vectorised bool)
    warps_per_block = threads // WS
    warps = blocks * warps_per_block
    tile_size = WS * UNROLL
    block_ops = [[] for _ in range(blocks)]
    start = 0

    def units_pass(keys, keep, first, units, lanes, start):
        for g in range(warps):
            block = g // warps_per_block
            warp = (g + warps - start) % warps
            tile = warp * tile_size
            while tile < units:
                for u in range(UNROLL):
                    bk = [[0] * L for _ in range(WS)]
                    counted = [0] * WS
                    for lane in range(WS):
                        unit = tile + u * WS + lane
                        if unit < units:
                            for l in range(lanes):
                                e = first + unit * lanes + l
                                seen[id(keys)][e] += 1
                                k = int(keys[e])
                                b = digit(k) - window_begin
                                if keep[e] and inside(k) and 0 <= b < window_buckets:
                                    counted[lane] |= 1 << l
                                bk[lane][l] = b
                    count_elements(block_ops[block], bk, counted)
                tile += warps * tile_size

    for keys, keep, vectorised in tensors:
        n = len(keys)
        vectors = n // L if vectorised else 0
        units_pass(keys, keep, 0, vectors, L, start)
        start = (start + (vectors + tile_size - 1) // tile_size) % warps
        rest = n - vectors * L
        units_pass(keys, keep, vectors * L, rest, 1, start)
        start = (start + (rest + tile_size - 1) // tile_size) % warps

    glob = hist[window_begin:window_begin + window_buckets]  # a view: adds land in hist
    for ops in block_ops:
        random.shuffle(ops)  # any interleaving of the block's atomics
        table = np.zeros(window_buckets // 2, dtype=np.int64)
        for b, c in ops:
            add(table, glob, b, c)
        glob[0::2] += table & (M - 1)
        glob[1::2] += table >> H


def choose(hist, rank, threads=64):
    buckets = len(hist)
    per = buckets // threads
    assert per % WS == 0 or per < WS
    sums = hist.reshape(threads, per).sum(axis=1)
    running = np.cumsum(sums)
    total = int(running[-1])
    owner = None
    for t in range(threads):
        if running[t] - sums[t] < rank <= running[t]:
            assert owner is None
            owner = t
    assert owner is not None
    owner_before = int(running[owner] - sums[owner])
    per_lane = per // WS
    counts = hist[owner * per:(owner + 1) * per].reshape(WS, per_lane)
    lane_sums = counts.sum(axis=1)
    inclusive = np.cumsum(lane_sums)
    reach = [owner_before + int(inclusive[j]) >= rank for j in range(WS)]
    lane = reach.index(True)
    before = owner_before + int(inclusive[lane]) - int(lane_sums[lane])
    bucket = owner * per + lane * per_lane
    i = 0
    while before + int(counts[lane][i]) < rank:
        before += int(counts[lane][i])
        i += 1
        bucket += 1
    return bucket, before, int(counts[lane][i]), total


def select(tensors, k, blocks, threads, window_high, window_low):
    seen = {id(t[0]): np.zeros(len(t[0]), dtype=np.int64) for t in tensors}
    high = np.zeros(1 << 15, dtype=np.int64)
    for begin in range(0, 1 << 15, window_high):
        count_pass(tensors, blocks, threads, lambda key: key >> 16, lambda key: True, begin, window_high, high, seen)
    for t in tensors:
        assert (seen[id(t[0])] == (1 << 15) // window_high).all(), "every element once a launch"
    total = int(high.sum())
    if k == 0 or k > total:
        return dict(bits=0, below=0, at=0, at_pruned=0, candidates=total)
    b0, before0, _, _ = choose(high, k)
    rank = k - before0
    low = np.zeros(1 << 16, dtype=np.int64)
    for begin in range(0, 1 << 16, window_low):
        count_pass(tensors, blocks, threads, lambda key: key & 0xFFFF, lambda key: (key >> 16) == b0, begin,
                   window_low, low, seen)
    b1, before1, at, _ = choose(low, rank)
    below = before0 + before1
    return dict(bits=(b0 << 16) | b1, below=below, at=at, at_pruned=k - below, candidates=total)


def reference(tensors, k):
    keys = np.concatenate([t[0][t[1]] for t in tensors]).astype(np.int64)
    c = len(keys)
    if k == 0:
        return dict(bits=0, below=0, at=0, at_pruned=0, candidates=c)
    s = np.sort(keys)
    t = int(s[k - 1])
    below = int((keys < t).sum())
    return dict(bits=t, below=below, at=int((keys == t).sum()), at_pruned=k - below, candidates=c)


def keys_of(x):
    return (x.astype(np.float32).view(np.uint32) & 0x7FFFFFFF).astype(np.int64)


rng = np.random.default_rng(1)
random.seed(2)
cases = 0
for trial in range(60):
    kind = trial % 5
    tensors = []
    for s in range(rng.integers(1, 4)):
        n = int(rng.integers(1, 300))
        if kind == 0:
            x = np.full(n, 0.75)
        elif kind == 1:
            x = rng.choice([0.75, np.float32(np.uint32(0x3F410000).view(np.float32)),
                            np.float32(np.uint32(0x3F410001).view(np.float32))], n)
        elif kind == 2:
            x = rng.normal(0, 1, n) * (rng.random(n) < 0.5)
        elif kind == 3:
            x = np.round(rng.normal(0, 3, n)) / 128
        else:
            x = np.uint32(rng.integers(0, 0x7F7FFFFF, n)).view(np.float32)
        keys = keys_of(np.asarray(x, dtype=np.float32))
        keep = rng.random(n) < 0.7 if rng.random() < 0.5 else np.ones(n, dtype=bool)
        tensors.append((keys, keep, bool(rng.random() < 0.7)))
    candidates = sum(int(t[1].sum()) for t in tensors)
    blocks = int(rng.integers(1, 4))
    window_high = int(rng.choice([1 << 15, 1 << 14]))
    window_low = int(rng.choice([1 << 16, 1 << 15]))
    for k in sorted(set([0, 1, candidates, max(0, candidates - 1), candidates // 2, candidates // 3])):
        got = select(tensors, k, blocks, 8, window_high, window_low)
        want = reference(tensors, k)
        assert got == want, (trial, k, got, want)
        cases += 1
print("ok", cases)
