"""Find AVX-512 instructions in native binaries, and whether each is chosen at run time.

A binary we ship (or start) must run on any x86-64 CPU of its baseline. AVX-512 is
allowed only inside functions that the program selects at run time after checking the
CPU. The rule, applied per function of ``objdump -d``:

* An instruction is **AVX-512** when it is EVEX-encoded (first opcode byte ``0x62``
  after the legacy prefixes: every AVX-512 instruction, at any vector width) or when it
  names a ``zmm`` register or an opmask register ``k0``–``k7`` (the VEX-encoded
  ``kmov``/``kand``… family).
* A function is **chosen at run time** when its symbol says which CPU it is for:
  the name contains ``avx512`` or ``x86_64_v4`` (case-insensitive). That is how GCC and
  Clang name ``target_clones``/``ifunc`` variants (``add.avx512f``,
  ``add.arch_x86_64_v4``) and how hand-dispatched kernels are named, such as pgvector's
  ``BitHammingDistanceAvx512Popcount``, which pgvector picks only after ``cpuid``.
* Any AVX-512 instruction anywhere else is a **violation**: an ordinary function would
  die with SIGILL on a CPU without AVX-512.

Instructions before the first symbol, or in a stripped binary without symbols, are
attributed to the section (``.text``) and count as violations: what cannot be
attributed is not trusted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

_PREFIXES = frozenset({"26", "2e", "36", "3e", "64", "65", "66", "67", "f0", "f2", "f3"})
_AVX512_OPERAND = re.compile(r"%(zmm\d+|k[0-7])\b")
_DISPATCHED = re.compile(r"avx512|x86_64_v4", re.IGNORECASE)
_SYMBOL = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")


class ObjdumpMissing(RuntimeError):
    """``objdump`` (GNU binutils) is not installed."""


def is_avx512(raw_bytes: str, instruction: str) -> bool:
    """Whether one disassembled instruction (``objdump -d`` columns) is AVX-512."""
    if _AVX512_OPERAND.search(instruction):
        return True
    for byte in raw_bytes.split():
        if byte in _PREFIXES:
            continue
        return byte == "62"
    return False


def is_dispatched(function: str) -> bool:
    """Whether ``function``'s name marks it as a variant chosen at run time."""
    return bool(_DISPATCHED.search(function))


def avx512_functions(path: Path) -> Counter[str]:
    """Count the AVX-512 instructions of every function of the ELF file ``path``.

    Raises:
        ObjdumpMissing: objdump is not on PATH.
        subprocess.CalledProcessError: objdump failed (not an object file).
    """
    objdump = shutil.which("objdump")
    if objdump is None:
        raise ObjdumpMissing("objdump not found: install GNU binutils (apt-get install binutils)")
    found: Counter[str] = Counter()
    current = "(none)"
    with subprocess.Popen(
        [objdump, "-d", "-w", str(path)], stdout=subprocess.PIPE, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            if match := _SYMBOL.match(line):
                current = match.group(1)
                continue
            if match := _SECTION.match(line):
                current = match.group(1)
                continue
            parts = line.split("\t")
            if len(parts) >= 3 and parts[0].rstrip().endswith(":"):
                if is_avx512(parts[1], parts[2]):
                    found[current] += 1
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, [objdump, "-d", str(path)])
    return found


def violations(path: Path) -> dict[str, int]:
    """AVX-512 instructions outside run-time dispatched functions, per function."""
    return {f: n for f, n in avx512_functions(path).items() if not is_dispatched(f)}
