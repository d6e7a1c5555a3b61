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

**AMX** (the tile instructions, ``ldtilecfg``, ``tileloadd``, ``tdpb*``…) is counted too.
AMX needs the kernel's permission per process and a valid tile configuration: llama.cpp
built with ``-march=native`` on a Sapphire/Granite Rapids CPU dies in
``ggml_backend_amx_mul_mat`` (llama.cpp issue 20824). No function name makes AMX
acceptable; `tests.unit_tests.test_portability` names the one reviewed library that
selects AMX at run time.

`environment_libraries` lists every ELF file of the Python environment with the
distribution that installed it, for the scan of everything a user's install brings.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import shutil
import subprocess
import sysconfig
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_PREFIXES = frozenset({"26", "2e", "36", "3e", "64", "65", "66", "67", "f0", "f2", "f3"})
_AVX512_OPERAND = re.compile(r"%(zmm\d+|k[0-7])\b")
_DISPATCHED = re.compile(r"avx512|x86_64_v4", re.IGNORECASE)
_SYMBOL = re.compile(r"^[0-9a-f]+ <(.+)>:$")
_SECTION = re.compile(r"^Disassembly of section (\S+):$")
_AMX = re.compile(
    r"^(ldtilecfg|sttilecfg|tileloadd|tileloaddt1|tilestored|tilerelease|tilezero"
    r"|tdpb[su][su]d|tdpbf16ps|tdpfp16ps|tcmmimfp16ps|tcmmrlfp16ps)\b"
)


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


def is_amx(instruction: str) -> bool:
    """Whether one disassembled instruction (objdump's mnemonic column) is an AMX one."""
    return bool(_AMX.match(instruction.strip()))


def is_dispatched(function: str) -> bool:
    """Whether ``function``'s name marks it as a variant chosen at run time."""
    return bool(_DISPATCHED.search(function))


@dataclass
class IsaScan:
    """What one ELF file holds beyond x86-64-v3: AVX-512 and AMX instructions per function."""

    avx512: Counter[str] = field(default_factory=Counter)
    amx: Counter[str] = field(default_factory=Counter)


def scan(path: Path) -> IsaScan:
    """Count the AVX-512 and AMX instructions of every function of the ELF file ``path``.

    Raises:
        ObjdumpMissing: objdump is not on PATH.
        subprocess.CalledProcessError: objdump failed (not an object file).
    """
    objdump = shutil.which("objdump")
    if objdump is None:
        raise ObjdumpMissing("objdump not found: install GNU binutils (apt-get install binutils)")
    found = IsaScan()
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
                    found.avx512[current] += 1
                if is_amx(parts[2]):
                    found.amx[current] += 1
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, [objdump, "-d", str(path)])
    return found


def avx512_functions(path: Path) -> Counter[str]:
    """Count the AVX-512 instructions of every function of the ELF file ``path``."""
    return scan(path).avx512


def violations(path: Path) -> dict[str, int]:
    """AVX-512 instructions outside run-time dispatched functions, and AMX, per function."""
    found = scan(path)
    bad = Counter({f: n for f, n in found.avx512.items() if not is_dispatched(f)})
    bad.update({f"{f} (AMX)": n for f, n in found.amx.items()})
    return dict(bad)


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def environment_libraries() -> dict[Path, str]:
    """Every ELF file installed in this Python environment, with its distribution's name.

    Read from each distribution's RECORD, so a library a package brings under another
    top-level name (llama-cpp-python's ``lib/``) is still its own. Copies (the same bytes
    under another name, such as ``libx.so`` and ``libx.so.0``) are listed once.
    """
    roots = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    found: dict[Path, str] = {}
    seen: set[str] = set()
    for dist in importlib.metadata.distributions():
        for file in dist.files or ():
            path = Path(str(dist.locate_file(file))).resolve()
            if path in found or not path.is_file() or not any(r in path.parents for r in roots):
                continue
            if not _is_elf(path):
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            found[path] = dist.metadata["Name"].lower().replace("_", "-")
    return found
