#!/usr/bin/env python3
"""Regenerates every golden file under tests/golden/ from PyTorch (and independent numpy references).

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/generate.py
Each gen_*.py module beside this file writes its own *.golden files; tests read them, so CI needs no torch.
"""
import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

if __name__ == "__main__":
    modules = sorted(p.stem for p in HERE.glob("gen_*.py"))
    for name in modules:
        module = importlib.import_module(name)
        module.generate(HERE)
        print(f"{name}: done")
