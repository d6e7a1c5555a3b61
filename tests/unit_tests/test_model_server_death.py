"""A dead local model server is reported as such: signal, crash site, last log lines, remedy.

Pure logic over real inputs: the kernel lines and the ``llama_print_system_info()`` strings
below were read on a Xeon with AMX (family 6 model 167) from a llama-cpp-python built with
``-march=native``, whose first prompt died in ``ggml_backend_amx_mul_mat``.
"""

from __future__ import annotations

import signal
from pathlib import Path

from memory_graph_agent.core.install import REBUILD_LLAMA
from memory_graph_agent.local.crash_site import CrashSite, parse_trap
from memory_graph_agent.local.model_server import EXIT_UNPORTABLE, ServerDeath, unportable_build

NATIVE_ON_AMX = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | "
    "BMI2 = 1 | AVX512 = 1 | AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | "
    "AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
PORTABLE = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
GP_FAULT = (
    "traps: python[5397] general protection fault ip:7f4b9147c193 sp:7f4b7d2a5980 error:0 "
    "in libggml-cpu.so.0[7c193,7f4b91414000+156000]"
)
OLD_KERNEL_SEGFAULT = (
    "python3[812]: segfault at 0 ip 00007f0000001234 sp 00007ffd00000000 error 4 "
    "in libllama.so[7f0000000000+200000]"
)


def test_a_native_build_with_amx_is_refused_with_the_rebuild_command() -> None:
    refused = unportable_build(NATIVE_ON_AMX)
    assert refused is not None and "AMX_INT8" in refused and "20824" in refused
    assert REBUILD_LLAMA in refused


def test_the_portable_build_runs() -> None:
    assert unportable_build(PORTABLE) is None
    assert unportable_build("") is None


def test_kernel_trap_lines_name_the_library_and_offset() -> None:
    site = parse_trap(GP_FAULT)
    assert site == CrashSite("general protection fault", "libggml-cpu.so.0", 0x7C193)
    old = parse_trap(OLD_KERNEL_SEGFAULT)
    assert old == CrashSite("segfault", "libllama.so", 0x1234)
    assert parse_trap("EXT4-fs (vda): mounted filesystem") is None
    assert (
        parse_trap("traps: python[5395] general protection fault ip:7f4b sp:7ffe error:0") is None
    )


def test_a_crash_in_the_amx_kernel_is_told_with_its_site_and_the_rebuild() -> None:
    site = CrashSite("general protection fault", "libggml-cpu.so.0", 0x7C193,
                     "ggml_backend_amx_mul_mat")  # fmt: skip
    death = ServerDeath(-signal.SIGSEGV, ["llama_context: n_ctx = 4096"], site, Path("m.log"))
    text = death.describe()
    assert "killed by signal 11 (SIGSEGV)" in text
    assert "general protection fault in libggml-cpu.so.0 (ggml_backend_amx_mul_mat)" in text
    assert "llama_context: n_ctx = 4096" in text and "Log: m.log" in text
    assert REBUILD_LLAMA in text
    assert death.signal_name == "SIGSEGV"


def test_other_deaths_say_how_and_what_next() -> None:
    refused = ServerDeath(EXIT_UNPORTABLE, ["refusing to start: ..."])
    assert "exited with status 78" in refused.describe() and REBUILD_LLAMA in refused.remedy
    sigill = ServerDeath(-signal.SIGILL, [])
    assert "SIGILL" in sigill.describe() and "instruction this CPU lacks" in sigill.remedy
    killed = ServerDeath(-signal.SIGKILL, [])
    assert "killed by signal 9 (SIGKILL)" in killed.describe()
    assert "restarted for the next call" in killed.remedy and "(nothing)" in killed.describe()
