#!/usr/bin/env python3
"""The layer order of ../shared/DESIGN.md (docs/layers.md), checked from the source text.

Finds, in include/shrink (and the compiled layer cuda/, for detail uses):
  cycle       folders of include/shrink that include each other, directly or not (counted by their edges)
  up          an #include of a header in a higher layer than the including header's folder
  detail      a use of X::detail:: or X::<name>_detail:: (or a reopening of such a namespace) outside module X's
              folders
  intrinsics  SIMD intrinsics or their headers in include/shrink outside cpu/
  dispatch    a choice of SIMD level in include/shrink outside cpu/: use_avx2() and the other use_avx*, use_vnni*,
              use_sse2 tests, simd_level, SimdLevel, SHRINK_CPU_AVX2_DISPATCH, SHRINK_CPU_SSE2, SHRINK_TARGET_*
  cuh         a device header (.cuh) included from a file that nvcc does not compile (.hpp, .cpp)
and fails on any, after printing the counts per kind ("0 cycle, 0 up, ..." when the tree keeps the order).

Usage: check_layers.py [--root DIR]
"""
import argparse
import collections
import os
import re
import sys

# Layers, bottom to top: a header may include its own layer's folders (without a cycle) and any lower layer.
LAYERS = [
    ["core"],                                            # views, dtypes, errors, the specs both backends share
    ["cpu"],                                             # CPU kernels: SIMD loops, reductions; every intrinsic
    ["quant", "prune", "sparse", "distill", "metrics"],  # the algorithms
    ["cuda"],                                            # the GPU realisations: host API, kernels/, kernels/common/
    ["linear"],                                          # matrix products over every weight format, both backends
    ["io"],                                              # model files
    [""],                                                # the umbrella headers shrink.hpp, cuda.hpp
]
LEVEL = {folder: level for level, folders in enumerate(LAYERS) for folder in folders}

# The folders where each module's detail namespace may be used: its headers, its tests, and for cuda the compiled
# layer. "shrink" is core's (shrink::detail).
MODULE_FOLDERS = {
    module: [f"include/shrink/{module}/", f"tests/{module}/"] for folders in LAYERS for module in folders if module
}
MODULE_FOLDERS["cuda"].append("cuda/")
MODULE_FOLDERS["shrink"] = MODULE_FOLDERS["core"]

INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]shrink/([^">]+)[">]')
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')
# X::detail, or a private namespace of another name (X::feature_detail).
DETAIL_USE = re.compile(r"\b(?:shrink::)?(core|cpu|cuda|quant|prune|sparse|distill|metrics|linear|io|shrink)::(?:\w+_)?detail::")
DETAIL_OPEN = re.compile(r"\bnamespace\s+(?:shrink::)?(cpu|cuda|quant|prune|sparse|distill|metrics|linear|io)::(?:\w+_)?detail\b")
INTRINSICS = re.compile(r"<(?:imm|x86|[a-z]mm)intrin\.h>|\b_mm(?:256|512)?_\w+\s*\(|\b__m(?:128|256|512)[id]?\b")
# The ISA dispatch of cpu/simd.hpp: the level tests, the level itself, and the macros that guard or target a level.
DISPATCH = re.compile(r"\b(?:use_(?:avx|vnni)\w*|use_sse2|(?:detect_)?simd_level|SimdLevel|SHRINK_CPU_AVX2_DISPATCH|"
                      r"SHRINK_CPU_SSE2|SHRINK_TARGET_\w+)\b")
SOURCE_EXTENSIONS = (".hpp", ".h", ".cuh", ".cu", ".cpp")


def folder_of(header):
    """The folder of a path under include/shrink ('' for the umbrella headers)."""
    return header.split("/")[0] if "/" in header else ""


def strip_comments(line):
    return line.split("//", 1)[0]


def source_files(root, top):
    base = os.path.join(root, top)
    for directory, _, names in os.walk(base):
        for name in sorted(names):
            if name.endswith(SOURCE_EXTENSIONS):
                path = os.path.join(directory, name)
                yield os.path.relpath(path, root).replace(os.sep, "/")


def find_violations(root):
    found = collections.Counter()  # key -> number of uses
    graph = collections.defaultdict(set)
    include_root = "include/shrink/"
    for path in source_files(root, "include/shrink"):
        header = path[len(include_root):]
        here = folder_of(header)
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = f.readlines()
        for line in lines:
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            there = folder_of(target)
            if there != here and here and there:
                graph[here].add(there)
            if here not in LEVEL or there not in LEVEL:
                found[f"up {path} -> shrink/{target} (folder outside the layers)"] += 1
            elif LEVEL[there] > LEVEL[here]:
                found[f"up {path} -> shrink/{target}"] += 1
        if here != "cpu":
            uses = sum(len(INTRINSICS.findall(strip_comments(line))) for line in lines)
            if uses:
                found[f"intrinsics {path}"] += uses
            uses = sum(len(DISPATCH.findall(strip_comments(line))) for line in lines)
            if uses:
                found[f"dispatch {path}"] += uses

    for component in folder_cycles(graph):
        edges = sum(len(graph[v] & set(component)) for v in component)
        found["cycle among " + ", ".join(component)] += edges

    for top in ("include/shrink", "cuda", "tests", "examples", "benchmarks"):
        for path in source_files(root, top):
            with open(os.path.join(root, path), encoding="utf-8") as f:
                lines = f.readlines()
            uses = collections.Counter()
            for line in lines:
                code = strip_comments(line)
                for module in DETAIL_USE.findall(code) + DETAIL_OPEN.findall(code):
                    if not any(path.startswith(folder) for folder in MODULE_FOLDERS[module]):
                        uses[module] += 1
                m = ANY_INCLUDE.match(line)
                # The compiled layer cuda/ is nvcc's alone: its private .hpp files may include device headers.
                if m and m.group(1).endswith(".cuh") and not path.endswith((".cu", ".cuh")) and \
                        not path.startswith("cuda/"):
                    found[f"cuh {path} -> {m.group(1)}"] += 1
            for module, count in uses.items():
                name = "core (shrink)" if module == "shrink" else module
                found[f"detail {path} uses {name}::detail"] += count
    return found


def folder_cycles(graph):
    """The strongly connected components of more than one folder (Tarjan): the folders that reach each other."""
    index, low, stack, on_stack, components, counter = {}, {}, [], set(), [], [0]

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(list(graph)):
        if v not in index:
            connect(v)
    return components


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    args = parser.parse_args()

    found = find_violations(args.root)
    kinds = collections.Counter()
    for key, count in found.items():
        kinds[key.split(" ", 1)[0]] += count
    order = ("cycle", "up", "detail", "intrinsics", "dispatch", "cuh")
    print("layers: " + ", ".join(f"{kinds[k]} {k}" for k in order) + f" ({sum(found.values())} in all)")

    for key in sorted(found):
        print(f"{key} x{found[key]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
