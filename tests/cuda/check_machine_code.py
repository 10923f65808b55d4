#!/usr/bin/env python3
"""Checks shrink_cuda's machine code against tests/cuda/machine_code_expectations.txt (CTest's cuda/machine_code).

usage: check_machine_code.py CUOBJDUMP NVDISASM EXPECTATIONS LIBRARY [--list]
For every row of EXPECTATIONS and every kernel of LIBRARY whose demangled name the row's regex finds, in every cubin
whose architecture the row's arch regex matches: registers and stack frame at most the row's ceilings
(cuobjdump --dump-resource-usage), with local = none no local memory (LOCAL:0) and no LDL/STL instruction, and each
of the row's instructions present in the kernel's SASS (nvdisasm). A row that matches no kernel in the cubins of the
architectures it names that the library holds is a failure, so that a renamed kernel cannot leave the check empty.
--list prints every kernel's resource usage instead (to set a ceiling). Exits 77 (CTest: skipped) when cuobjdump or
nvdisasm is missing, 1 under SHRINK_PYTHON_STRICT=1 (scripts/test.sh installs both from PyPI into the environment of
scripts/python-env.sh)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

LOCAL_OPCODE = re.compile(r"(LDL|STL)(\.|$)")
# One SASS line of nvdisasm: /*0a40*/  [@!P0] OPCODE.MODIFIERS operands ;
SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?\S+\s+)?([A-Z][A-Za-z0-9_.]*)")
SECTION_LINE = re.compile(r"^//-+ \.text\.(\S+) -+$")


def fail_usage(message):
    print(f"check_machine_code.py: {message}")
    sys.exit(2)


def skip(message):
    print(f"check_machine_code.py: SKIPPED: {message}")
    # scripts/test.sh installs the tools (tests/requirements.txt), sets SHRINK_PYTHON_STRICT: there a skip is a failure.
    sys.exit(1 if os.environ.get("SHRINK_PYTHON_STRICT") == "1" else 77)


def run(command, cwd=None):
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"check_machine_code.py: FAILED: {' '.join(command)} exited {result.returncode}:\n{result.stderr}")
        sys.exit(1)
    return result.stdout


class Row:
    """One line of the expectations file."""

    def __init__(self, line_number, fields, comment):
        if len(fields) < 6:
            fail_usage(f"expectations line {line_number}: want kernel arch regs stack local instructions...")
        self.line = line_number
        self.kernel, self.arch = fields[0], fields[1]
        self.kernel_re, self.arch_re = re.compile(fields[0]), re.compile(fields[1])
        self.max_registers, self.max_stack = (None if field == "-" else int(field) for field in fields[2:4])
        if fields[4] not in ("none", "-"):
            fail_usage(f"expectations line {line_number}: local is 'none' or '-', not '{fields[4]}'")
        self.no_local = fields[4] == "none"
        self.instructions = [] if fields[5:] == ["-"] else fields[5:]
        self.instruction_res = [re.compile(pattern) for pattern in self.instructions]
        self.comment = comment

    def needs_sass(self):
        return self.no_local or bool(self.instructions)

    def describe(self):
        return f"line {self.line} ({self.kernel} on {self.arch})"


def read_expectations(path):
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            text, _, comment = line.partition("#")
            if text.strip():
                rows.append(Row(number, text.split(), comment.strip()))
    return rows


def member_name(line):
    """The object file of an archive's "member LIBRARY:OBJECT:" line."""
    return line.rstrip(":").rsplit(":", 1)[-1]


class Kernel:
    def __init__(self, member, arch, mangled, usage):
        self.member, self.arch, self.mangled, self.usage = member, arch, mangled, usage
        self.name = mangled
        self.opcodes = None  # opcode -> count, from nvdisasm, for the kernels a row needs SASS of

    def where(self):
        return f"{self.name} [{self.arch}, {self.member}]"


def read_resource_usage(cuobjdump, library):
    """Kernel per (member, arch, mangled name), from cuobjdump --dump-resource-usage."""
    kernels, member, arch, elf, function = [], os.path.basename(library), None, False, None
    for line in run([cuobjdump, "--dump-resource-usage", library]).splitlines():
        line = line.strip()
        if line.startswith("member "):
            member = member_name(line)
        elif line.startswith("Fatbin "):
            elf = line.startswith("Fatbin elf")
        elif line.startswith("arch = ") and elf:
            arch = line.split("=", 1)[1].strip()
        elif line.startswith("Function "):
            function = line[len("Function "):].rstrip(":")
        elif line.startswith("REG:") and function:
            usage = {key: int(value) for key, value in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            kernels.append(Kernel(member, arch, function, usage))
            function = None
    return kernels


def demangle(kernels):
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        print("check_machine_code.py: FAILED: no c++filt (binutils) to demangle the kernel names")
        sys.exit(1)
    names = subprocess.run([cxxfilt], input="\n".join(k.mangled for k in kernels) + "\n", capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for kernel, name in zip(kernels, names):
        kernel.name = name


def cubin_files(cuobjdump, library):
    """(member, arch) -> the name cuobjdump -xelf gives that cubin."""
    files, member = {}, os.path.basename(library)
    for line in run([cuobjdump, "--list-elf", library]).splitlines():
        if line.startswith("member "):
            member = member_name(line)
        match = re.match(r"ELF file\s+\d+:\s+(\S+\.(sm_\w+)\.cubin)$", line.strip())
        if match:
            files[(member, match.group(2))] = match.group(1)
    return files


def read_sass(nvdisasm, cubin):
    """Mangled kernel name -> {opcode: count} for one cubin."""
    opcodes, current = {}, None
    for line in run([nvdisasm, "--print-code", cubin]).splitlines():
        section = SECTION_LINE.match(line)
        if section:
            current = opcodes.setdefault(section.group(1), {})
            continue
        instruction = SASS_LINE.match(line)
        if instruction and current is not None:
            opcode = instruction.group(1)
            current[opcode] = current.get(opcode, 0) + 1
    return opcodes


def attach_sass(cuobjdump, nvdisasm, library, kernels):
    files = cubin_files(cuobjdump, library)
    wanted = sorted({(k.member, k.arch) for k in kernels if k.opcodes is not None})
    with tempfile.TemporaryDirectory() as folder:
        run([cuobjdump, "-xelf", "all", os.path.abspath(library)], cwd=folder)
        paths = []
        for key in wanted:
            if key not in files:
                print(f"check_machine_code.py: FAILED: cuobjdump --list-elf names no cubin for {key[0]} {key[1]}")
                sys.exit(1)
            paths.append(os.path.join(folder, files[key]))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            sass = dict(zip(wanted, pool.map(lambda path: read_sass(nvdisasm, path), paths)))
    for kernel in kernels:
        if kernel.opcodes is not None:
            kernel.opcodes = sass[(kernel.member, kernel.arch)].get(kernel.mangled)
            if kernel.opcodes is None:
                print(f"check_machine_code.py: FAILED: nvdisasm shows no code for {kernel.where()}")
                sys.exit(1)


def ceiling(value):
    return "" if value is None else f" (ceiling {value})"


def check(rows, kernels):
    failures = []
    architectures = sorted({k.arch for k in kernels})
    for row in rows:
        present = [arch for arch in architectures if row.arch_re.fullmatch(arch)]
        if not present:
            print(f"  {row.describe()}: no {row.arch} machine code in this library, not applicable")
            continue
        # At least one kernel over the architectures present (the device build holds sm_90a alone).
        if not any(k.arch in present and row.kernel_re.search(k.name) for k in kernels):
            failures.append(f"{row.describe()}: no {'/'.join(present)} kernel's name matches '{row.kernel}' (renamed?)")
            continue
        for arch in present:
            matched = [k for k in kernels if k.arch == arch and row.kernel_re.search(k.name)]
            if not matched:
                continue
            registers = max(k.usage.get("REG", 0) for k in matched)
            stack = max(k.usage.get("STACK", 0) for k in matched)
            print(f"  {row.describe()}: {len(matched)} {arch} kernels, at most {registers} registers"
                  f"{ceiling(row.max_registers)}, {stack} B of stack{ceiling(row.max_stack)}")
            for k in matched:
                found = k.usage.get("REG", 0)
                if row.max_registers is not None and found > row.max_registers:
                    failures.append(f"{k.where()}: {found} registers, expected at most {row.max_registers} "
                                    f"({row.describe()}; its comment: {row.comment or 'none'})")
                found = k.usage.get("STACK", 0)
                if row.max_stack is not None and found > row.max_stack:
                    failures.append(f"{k.where()}: stack frame {found} B, expected at most {row.max_stack} B "
                                    f"({row.describe()})")
                if row.no_local:
                    if k.usage.get("LOCAL", 0):
                        failures.append(f"{k.where()}: LOCAL:{k.usage['LOCAL']}, expected no local memory "
                                        f"({row.describe()})")
                    local = {op: n for op, n in k.opcodes.items() if LOCAL_OPCODE.match(op)}
                    if local:
                        failures.append(f"{k.where()}: local-memory instructions {local}, expected none "
                                        f"({row.describe()})")
                for pattern, regex in zip(row.instructions, row.instruction_res):
                    if not any(regex.match(op) for op in k.opcodes):
                        mma = sorted(op for op in k.opcodes if "MMA" in op)
                        failures.append(f"{k.where()}: no instruction matching '{pattern}', expected one "
                                        f"({row.describe()}); its MMA instructions: {mma or 'none'}")
    return failures


def main():
    arguments = [a for a in sys.argv[1:] if a != "--list"]
    if len(arguments) != 4:
        fail_usage("usage: check_machine_code.py CUOBJDUMP NVDISASM EXPECTATIONS LIBRARY [--list]")
    cuobjdump, nvdisasm, expectations, library = arguments
    for tool, name in ((cuobjdump, "cuobjdump"), (nvdisasm, "nvdisasm")):
        if not tool or not os.access(tool, os.X_OK):
            skip(f"no {name} ('{tool}'; pip install nvidia-cuda-{name}, then pass -DSHRINK_{name.upper()}=its path)")
    kernels = read_resource_usage(cuobjdump, library)
    if not kernels:
        print(f"check_machine_code.py: FAILED: cuobjdump finds no kernel in {library}")
        sys.exit(1)
    demangle(kernels)
    if "--list" in sys.argv:
        for k in sorted(kernels, key=lambda k: (k.name, k.arch)):
            print(f"{k.arch:7} REG:{k.usage.get('REG', 0):<4} STACK:{k.usage.get('STACK', 0):<4} "
                  f"LOCAL:{k.usage.get('LOCAL', 0):<3} SHARED:{k.usage.get('SHARED', 0):<6} {k.name}")
        return
    rows = read_expectations(expectations)
    for k in kernels:
        if any(r.needs_sass() and r.arch_re.fullmatch(k.arch) and r.kernel_re.search(k.name) for r in rows):
            k.opcodes = {}
    attach_sass(cuobjdump, nvdisasm, library, kernels)
    print(f"check_machine_code.py: {len(kernels)} kernels in {library}, "
          f"{sum(k.opcodes is not None for k in kernels)} disassembled; architectures "
          f"{', '.join(sorted({k.arch for k in kernels}))}")
    failures = check(rows, kernels)
    for failure in failures:
        print(f"check_machine_code.py: FAILED: {failure}")
    if failures:
        sys.exit(1)
    print(f"check_machine_code.py: {len(rows)} expectations hold")


if __name__ == "__main__":
    main()
